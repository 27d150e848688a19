//! The sticky pull request comment, a function over the report: what
//! changed since the last run, the counts, the open channels.
//!
//! The comment carries its own state: a hidden marker that finds it again
//! (one per pull request, config and label) and a hidden state line (the
//! verdict of every channel and whether the run failed, base64 JSON) that
//! the next run compares with its own. With a configured marker key the
//! state line is signed (HMAC-SHA256), so a comment that imitates ours is
//! told apart even when it comes from the same identity (every workflow of
//! a repository comments as `github-actions[bot]`). Comments are hostile
//! input: [`comment_state`] reads only well-formed entries.

use super::github::docs_link;
use super::groups::{Group, by_surface, first};
use super::markdown::{cell, close_link, text, word};
use super::review::{headline, side};
use super::sarif::truncate as clip;
use crate::marker::Key;
use crate::report::{Finding, Report};
use crate::verdict::Verdict;
use base64::Engine as _;
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A comment's body (GitHub: at most 65,536 characters), with room.
pub const COMMENT_BUDGET: usize = 60 * 1024;

/// Channel (with `@side` for a scoped declaration) -> verdict.
pub type Verdicts = BTreeMap<String, String>;

/// The verdict of every channel in the report.
pub fn verdicts(report: &Report) -> Verdicts {
    report
        .findings
        .iter()
        .map(|f| {
            let side = f.side().map(|s| format!("@{s}")).unwrap_or_default();
            (format!("{}{side}", f.channel), f.verdict.as_str().into())
        })
        .collect()
}

/// What changed between two runs.
#[derive(Debug, Default, PartialEq)]
pub struct Changes {
    /// Open now (FAIL or AUTHORIZED), not open before (or not there).
    pub opened: Vec<String>,
    /// Open before, PASS now.
    pub closed: Vec<String>,
    /// Every other change: (channel, before, now); `-` for absent.
    pub other: Vec<(String, String, String)>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty() && self.closed.is_empty() && self.other.is_empty()
    }
}

fn is_open(v: &str) -> bool {
    matches!(v, "fail" | "authorized")
}

pub fn changes(before: &Verdicts, now: &Verdicts) -> Changes {
    let mut c = Changes::default();
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(now.keys()).collect();
    for k in keys {
        let (b, n) = (before.get(k), now.get(k));
        if b == n {
            continue;
        }
        let (bs, ns) = (b.map_or("-", String::as_str), n.map_or("-", String::as_str));
        if is_open(ns) && !is_open(bs) {
            c.opened.push(k.clone());
        } else if is_open(bs) && ns == "pass" {
            c.closed.push(k.clone());
        } else {
            c.other.push((k.clone(), bs.into(), ns.into()));
        }
    }
    c
}

/// The hidden marker of the comment for this report's config and label:
/// one comment per pull request and config.
pub fn marker(report: &Report) -> String {
    let mut h = sha2::Sha256::new();
    h.update(report.config.path.as_deref().unwrap_or("(discovered)"));
    h.update([0]);
    h.update(report.label.as_deref().unwrap_or(""));
    let key = crate::nonce::to_hex(&h.finalize());
    format!("<!-- runwarden-comment {} -->", &key[..16])
}

const STATE_START: &str = "<!-- runwarden-state ";
const STATE_END: &str = " -->";

/// What a comment remembers of the run that wrote it.
#[derive(Debug, PartialEq)]
pub struct State {
    /// The commit it was written for.
    pub sha: Option<String>,
    /// The run's exit code (1: a FAIL, an ERROR or a planted entry left).
    pub exit: Option<i64>,
    pub verdicts: Verdicts,
    /// What the state kept of the verdicts when all of them would not
    /// fit in the comment ([`STATE_BUDGET`]).
    pub kept: Kept,
    /// SHA-256 of every verdict (kept or not): a change among those left
    /// out still shows.
    pub digest: Option<String>,
}

/// The digest of a run's verdicts, whatever a state line keeps of them.
fn digest(v: &Verdicts) -> String {
    let json = serde_json::to_string(v).expect("verdicts serialize");
    crate::nonce::to_hex(&sha2::Sha256::digest(json.as_bytes()))
}

/// How much of a run's verdicts a state line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Every channel's.
    All,
    /// Every channel's but the PASSes: a channel not listed passed (or
    /// was not there).
    NotPass,
    /// None: even the others were too many.
    None,
}

/// The most a state line may take of a comment (its verdicts in base64
/// JSON): past it, the PASSes are left out, and past that every verdict.
pub const STATE_BUDGET: usize = 24 * 1024;

fn not_pass(v: &Verdicts) -> Verdicts {
    v.iter()
        .filter(|(_, v)| v.as_str() != "pass")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

impl State {
    /// What this report would remember.
    pub fn of(report: &Report, sha: Option<&str>) -> State {
        State {
            sha: sha.map(str::to_string),
            exit: Some(i64::from(report.exit_code())),
            digest: Some(digest(&verdicts(report))),
            verdicts: verdicts(report),
            kept: Kept::All,
        }
    }

    /// Whether a new comment would say something else: a verdict, or
    /// whether the run failed (a planted entry left turns it red with
    /// every verdict the same). Verdicts are compared as far as both
    /// states kept them.
    pub fn differs(&self, other: &State) -> bool {
        if let (Some(a), Some(b)) = (&self.digest, &other.digest) {
            return a != b || self.exit != other.exit;
        }
        let verdicts = match (self.kept, other.kept) {
            (Kept::None, _) | (_, Kept::None) => true,
            (Kept::All, Kept::All) => self.verdicts != other.verdicts,
            _ => not_pass(&self.verdicts) != not_pass(&other.verdicts),
        };
        verdicts || self.exit != other.exit
    }
}

/// What became of the state of an earlier comment.
#[derive(Debug, PartialEq)]
pub enum Read {
    /// Well formed, and signed with the key when one is configured.
    Trusted(State),
    /// No state line, a malformed one, or (with a key) one without a
    /// valid signature: not written by this repository's runwarden.
    Untrusted,
}

fn signature(key: &Key, marker: &str, payload: &str) -> Option<String> {
    key.sign("runwarden-comment-state/1", &format!("{marker}\0{payload}"))
}

/// The state a comment body carries. `marker` is the comment's marker and
/// `at` the repository and pull request it is read on (a state written for
/// another is not this one's); with a configured `key` the state must
/// carry its signature.
pub fn comment_state(body: &str, marker: &str, key: &Key, at: &str) -> Read {
    let parse = || -> Option<State> {
        let start = body.rfind(STATE_START)? + STATE_START.len();
        let len = body[start..].find(STATE_END)?;
        let mut words = body[start..start + len].split_whitespace();
        let payload = words.next()?;
        if key.is_configured() {
            let want = signature(key, marker, payload)?;
            let got = words.next()?;
            if !crate::marker::same(want.as_bytes(), got.as_bytes()) {
                return None;
            }
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&raw).ok()?;
        if v["at"].as_str() != Some(at) {
            return None;
        }
        let known = ["fail", "error", "authorized", "skipped", "pass"];
        let key_ok = |k: &str| {
            !k.is_empty()
                && k.len() <= 200
                && k.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'@' | b'.')
                })
        };
        let verdicts = v["verdicts"]
            .as_object()?
            .iter()
            .filter_map(|(k, v)| {
                let v = v.as_str()?;
                (key_ok(k) && known.contains(&v)).then(|| (k.clone(), v.to_string()))
            })
            .collect();
        let sha = v["sha"]
            .as_str()
            .filter(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string);
        let exit = v["exit"].as_i64().filter(|e| matches!(e, 0 | 1));
        let kept = match v["kept"].as_str() {
            None | Some("all") => Kept::All,
            Some("not-pass") => Kept::NotPass,
            Some("none") => Kept::None,
            Some(_) => return None,
        };
        let digest = v["digest"]
            .as_str()
            .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_string);
        Some(State {
            sha,
            exit,
            verdicts,
            kept,
            digest,
        })
    };
    match parse() {
        Some(s) => Read::Trusted(s),
        None => Read::Untrusted,
    }
}

/// What the comment says about this run beside the report.
pub struct CommentContext<'a> {
    /// The commit this run checked (40 hex), remembered for the next.
    pub sha: Option<&'a str>,
    /// A link to the workflow run.
    pub run_url: Option<&'a str>,
    /// Signs the state line when configured.
    pub key: &'a Key,
    /// `owner/repo#N`: where the comment is, bound into its state.
    pub at: &'a str,
}

/// What the comment is written over.
pub enum Earlier<'a> {
    /// No comment yet.
    None,
    /// A comment of ours whose state cannot be read.
    Unreadable,
    State(&'a State),
}

/// At most this many channel names in one line of the comment (a list of
/// changes, a surface's open carriers); the rest are counted.
const NAMES: usize = 20;

/// The sticky comment: marker, headline, what changed since `earlier`, the
/// counts, one row per surface with what is open there and where to read
/// how to close it, then every FAIL, ERROR and AUTHORIZED channel in a
/// collapsed table, then this run's state. Cut to [`COMMENT_BUDGET`],
/// saying what was cut.
pub fn comment(report: &Report, earlier: Earlier<'_>, cx: &CommentContext<'_>) -> String {
    let marker = marker(report);
    let mut out = marker.clone() + "\n";
    let icon = if report.exit_code() != 0 {
        "🔴"
    } else {
        "🟢"
    };
    let _ = writeln!(out, "### {icon} runwarden: {}\n", headline(report));
    if let Some(label) = &report.label {
        // A relayed report's label can be any length: the comment's own
        // budget must not be spent on it.
        let _ = writeln!(out, "Runner: {}\n", text(&clip(label, 100)));
    }
    out += &since(report, earlier);
    let s = &report.summary;
    let _ = writeln!(
        out,
        "**{}** fail · **{}** error · **{}** authorized · **{}** skipped · **{}** pass\n",
        s.fail, s.error, s.authorized, s.skipped, s.pass
    );
    if !report.cleanup.left.is_empty() {
        let _ = writeln!(
            out,
            "Cleanup left {} planted entries in place; the report lists them.\n",
            report.cleanup.left.len()
        );
    }
    let state = state_line(&State::of(report, cx.sha), &marker, cx.key, cx.at);
    let footer = footer(cx);
    let room = |out: &str, more: usize| {
        out.len() + more + footer.len() + state.len() + 300 <= COMMENT_BUDGET
    };
    surfaces(&mut out, report, &room);
    channels(&mut out, report, &room);
    out += &footer;
    out += &state;
    out
}

/// What changed since the earlier comment's run.
fn since(report: &Report, earlier: Earlier<'_>) -> String {
    let b = match earlier {
        Earlier::None => return "First run on this pull request.\n\n".into(),
        Earlier::Unreadable => {
            return "The earlier state of this comment could not be read (edited?): no comparison this time.\n\n".into();
        }
        Earlier::State(b) => b,
    };
    if b.kept == Kept::None {
        return "The earlier run had too many channels to remember in its comment: no comparison this time.\n\n".into();
    }
    let now = verdicts(report);
    let mut before = b.verdicts.clone();
    if b.kept == Kept::NotPass {
        // A channel the earlier state does not list passed (or was not
        // there): its PASSes were left out to fit.
        for k in now.keys() {
            before.entry(k.clone()).or_insert_with(|| "pass".into());
        }
    }
    let at = b
        .sha
        .as_deref()
        .map(|s| format!(" (at {})", text(s.get(..7).unwrap_or(s))))
        .unwrap_or_default();
    let c = changes(&before, &now);
    if c.is_empty() {
        if b.digest.as_ref().is_some_and(|d| *d != digest(&now)) {
            return format!(
                "**Channels changed since the last run{at}, among those it had too many of to remember (PASS, or not probed): which, the report says.**\n\n"
            );
        }
        return format!("**No channel changed since the last run{at}.**\n\n");
    }
    let mut out = format!("**Since the last run{at}:**\n\n");
    let list = |v: &[String]| first(v, NAMES, word);
    if !c.opened.is_empty() {
        let _ = writeln!(
            out,
            "- newly open ({}): {}",
            c.opened.len(),
            list(&c.opened)
        );
    }
    if !c.closed.is_empty() {
        let _ = writeln!(
            out,
            "- newly closed ({}): {}",
            c.closed.len(),
            list(&c.closed)
        );
    }
    for (k, b, n) in c.other.iter().take(NAMES) {
        let _ = writeln!(
            out,
            "- {}: {} → {}",
            word(k),
            word(b).to_uppercase(),
            word(n).to_uppercase()
        );
    }
    if c.other.len() > NAMES {
        let _ = writeln!(out, "- … {} more other changes", c.other.len() - NAMES);
    }
    out.push('\n');
    out
}

/// One row per surface with anything but PASS and SKIPPED: what is open,
/// what broke, what is declared, and where to read how to close it.
fn surfaces(out: &mut String, report: &Report, room: &dyn Fn(&str, usize) -> bool) {
    let groups: Vec<Group<'_>> = by_surface(report)
        .into_iter()
        .filter(|g| !g.quiet())
        .collect();
    if groups.is_empty() {
        return;
    }
    *out +=
        "| Surface | Open (undeclared) | Errors | Declared | |\n| --- | --- | --- | --- | --- |\n";
    for (i, g) in groups.iter().enumerate() {
        let list = |v: Verdict| {
            let names = g.carriers(v);
            match names.len() {
                0 => "0".to_string(),
                n => format!("{n}: {}", first(&names, NAMES, word)),
            }
        };
        let row = format!(
            "| {} ({}) | {} | {} | {} | [close it]({}) |\n",
            word(g.surface),
            word(g.surface_type),
            list(Verdict::Fail),
            list(Verdict::Error),
            list(Verdict::Authorized),
            close_link(g.surface_type)
        );
        if !room(out, row.len()) {
            let _ = writeln!(
                out,
                "\n{} more surfaces are in the job summary and the report.",
                groups.len() - i
            );
            break;
        }
        *out += &row;
    }
    out.push('\n');
}

/// Every FAIL, ERROR and AUTHORIZED channel, worst first, in a collapsed
/// table (the surfaces above say the same in short).
fn channels(out: &mut String, report: &Report, room: &dyn Fn(&str, usize) -> bool) {
    let mut rows: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.verdict.is_shown())
        .collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by_key(|f| f.verdict);
    let _ = writeln!(
        out,
        "<details><summary>Every open, broken and declared channel ({})</summary>\n",
        rows.len()
    );
    *out += "| Verdict | Channel | Detail |\n| --- | --- | --- |\n";
    for (i, f) in rows.iter().enumerate() {
        let row = format!(
            "| {} | [{}]({}){} | {} |\n",
            f.verdict.as_str().to_uppercase(),
            word(&f.channel),
            docs_link(f),
            cell(&side(f)),
            cell(&clip(&f.detail_and_reason(), 600))
        );
        if !room(out, row.len()) {
            let _ = writeln!(
                out,
                "\n{} more rows are in the job summary and the report.",
                rows.len() - i
            );
            break;
        }
        *out += &row;
    }
    *out += "\n</details>\n\n";
}

fn footer(cx: &CommentContext<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(u) = cx.run_url {
        parts.push(format!("[the run]({})", super::github::url(u)));
    }
    if let Some(s) = cx.sha {
        parts.push(format!("commit {}", text(&s[..s.len().min(7)])));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "<sub>Updated in place by each run ({}).</sub>\n",
        parts.join(", ")
    )
}

/// The state line: the state, the place it is for (`at`: the repository
/// and pull request, so a state copied into another pull request's
/// comment is not this one's), and with a key its signature (which covers
/// the marker, so the config and label, and all of that). Within
/// [`STATE_BUDGET`]: the PASSes are left out when all would not fit, and
/// every verdict when even the rest would not.
fn state_line(state: &State, marker: &str, key: &Key, at: &str) -> String {
    let line = |verdicts: &Verdicts, kept: &str| {
        let v = serde_json::json!({ "v": 1, "at": at, "sha": state.sha, "exit": state.exit, "kept": kept, "digest": state.digest, "verdicts": verdicts });
        let payload = base64::engine::general_purpose::STANDARD.encode(v.to_string());
        let sig = signature(key, marker, &payload)
            .map(|s| format!(" {s}"))
            .unwrap_or_default();
        format!("{STATE_START}{payload}{sig}{STATE_END}\n")
    };
    let all = line(&state.verdicts, "all");
    if all.len() <= STATE_BUDGET {
        return all;
    }
    let some = line(&not_pass(&state.verdicts), "not-pass");
    if some.len() <= STATE_BUDGET {
        return some;
    }
    line(&Verdicts::new(), "none")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(pairs: &[(&str, &str)]) -> Verdicts {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn changes_say_what_opened_closed_and_moved() {
        let before = v(&[
            ("a:x", "pass"),
            ("a:y", "fail"),
            ("a:z", "fail"),
            ("b:q", "pass"),
        ]);
        let now = v(&[
            ("a:x", "fail"),
            ("a:y", "pass"),
            ("a:z", "error"),
            ("c:n", "authorized"),
        ]);
        let c = changes(&before, &now);
        assert_eq!(c.opened, ["a:x", "c:n"]);
        assert_eq!(c.closed, ["a:y"]);
        assert_eq!(
            c.other,
            [
                ("a:z".to_string(), "fail".to_string(), "error".to_string()),
                ("b:q".to_string(), "pass".to_string(), "-".to_string())
            ]
        );
        assert!(changes(&now, &now).is_empty());
    }

    #[test]
    fn state_reads_back_and_ignores_what_is_not_ours() {
        let m = "<!-- runwarden-comment 0123456789abcdef -->";
        let now = State {
            sha: Some("0123456789abcdef0123456789abcdef01234567".into()),
            exit: Some(1),
            verdicts: v(&[("fs:file-name", "fail"), ("git:ref@inside", "pass")]),
            kept: Kept::All,
            digest: None,
        };
        // Without a key: read back as written.
        let none = Key::new(None);
        let at = "octo/app#8";
        let line = state_line(&now, m, &none, at);
        assert_eq!(
            comment_state(&format!("text\n{line}"), m, &none, at),
            Read::Trusted(now)
        );
        // Copied into another pull request's comment: not its state.
        assert_eq!(
            comment_state(&format!("text\n{line}"), m, &none, "octo/app#9"),
            Read::Untrusted
        );
        // Hostile entries are dropped, a bad sha or exit is none.
        let hostile = serde_json::json!({ "at": at, "verdicts": { "<img>": "fail", "a:b": "owned", "c:d": "pass" }, "sha": "zz", "exit": 7 });
        let body = format!(
            "{STATE_START}{}{STATE_END}",
            base64::engine::general_purpose::STANDARD.encode(hostile.to_string())
        );
        let Read::Trusted(s) = comment_state(&body, m, &none, at) else {
            panic!()
        };
        assert_eq!(s.verdicts, v(&[("c:d", "pass")]));
        assert_eq!((s.sha, s.exit), (None, None));
        assert_eq!(
            comment_state("no state here", m, &none, at),
            Read::Untrusted
        );
        // With a key: only a state it signed, for this marker.
        let key = Key::new(Some(b"k3y-for-the-comment-test".to_vec()));
        let state = State {
            sha: None,
            exit: Some(0),
            verdicts: v(&[("a:b", "pass")]),
            kept: Kept::All,
            digest: None,
        };
        let signed = state_line(&state, m, &key, at);
        assert!(matches!(
            comment_state(&signed, m, &key, at),
            Read::Trusted(_)
        ));
        let other = "<!-- runwarden-comment fedcba9876543210 -->";
        assert_eq!(comment_state(&signed, other, &key, at), Read::Untrusted);
        assert_eq!(
            comment_state(&body, m, &key, at),
            Read::Untrusted,
            "unsigned"
        );
        let forged = signed.replacen("runwarden-state ", "runwarden-state e30=", 1);
        assert_eq!(comment_state(&forged, m, &key, at), Read::Untrusted);
    }

    #[test]
    fn a_state_too_large_keeps_what_is_not_pass_then_nothing() {
        let m = "<!-- runwarden-comment 0123456789abcdef -->";
        let none = Key::new(None);
        let many = |n: usize, verdict: &str| -> Verdicts {
            (0..n)
                .map(|i| (format!("s:c{i}"), verdict.to_string()))
                .collect()
        };
        let mut verdicts = many(3000, "pass");
        verdicts.insert("s:open".into(), "fail".into());
        let big = State {
            sha: None,
            exit: Some(1),
            verdicts,
            kept: Kept::All,
            digest: None,
        };
        let line = state_line(&big, m, &none, "o/r#1");
        assert!(line.len() <= STATE_BUDGET);
        let Read::Trusted(back) = comment_state(&line, m, &none, "o/r#1") else {
            panic!()
        };
        assert_eq!(back.kept, Kept::NotPass);
        assert_eq!(back.verdicts, v(&[("s:open", "fail")]));
        assert!(!back.differs(&big), "the same run, compared as far as kept");
        let huge = State {
            sha: None,
            exit: Some(1),
            verdicts: many(3000, "fail"),
            kept: Kept::All,
            digest: None,
        };
        let Read::Trusted(back) =
            comment_state(&state_line(&huge, m, &none, "o/r#1"), m, &none, "o/r#1")
        else {
            panic!()
        };
        assert_eq!((back.kept, back.verdicts.len()), (Kept::None, 0));
        assert!(back.differs(&huge));
    }

    #[test]
    fn a_pass_that_comes_or_goes_beyond_the_budget_still_differs() {
        let m = "<!-- runwarden-comment 0123456789abcdef -->";
        let none = Key::new(None);
        let state = |n: usize| {
            let verdicts: Verdicts = (0..n)
                .map(|i| (format!("s:c{i}"), "pass".to_string()))
                .collect();
            State {
                sha: None,
                exit: Some(0),
                digest: Some(digest(&verdicts)),
                verdicts,
                kept: Kept::All,
            }
        };
        let Read::Trusted(back) = comment_state(
            &state_line(&state(3000), m, &none, "o/r#1"),
            m,
            &none,
            "o/r#1",
        ) else {
            panic!()
        };
        assert_eq!(back.kept, Kept::NotPass);
        assert!(!back.differs(&state(3000)));
        assert!(
            back.differs(&state(2999)),
            "a surface of PASSes removed is a change"
        );
    }

    #[test]
    fn a_run_that_turns_red_with_the_same_verdicts_differs() {
        let s = |exit| State {
            sha: None,
            exit: Some(exit),
            verdicts: v(&[("a:b", "pass")]),
            kept: Kept::All,
            digest: None,
        };
        assert!(s(0).differs(&s(1)));
        assert!(!s(1).differs(&s(1)));
    }
}
