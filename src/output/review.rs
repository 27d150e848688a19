//! What reviewers see in a pull request, each a function over the report:
//! the check run (conclusion, title, summary, and one annotation per FAIL
//! and ERROR on the config line that declares the surface) and the sticky
//! comment (what changed since the last run, then the open channels).
//!
//! The comment carries its own state: a hidden marker that finds it again
//! (one per pull request and config) and the verdict of every channel,
//! base64 JSON in an HTML comment, which the next run compares with its
//! own. Comments are hostile input (anyone can write one that looks like
//! ours), so [`comment_state`] reads only well-formed entries, and the
//! caller reads it only from comments the token's own identity wrote.

use super::github::{cell, docs_link, summary_within};
use super::repo::{Context, decode};
use super::sarif::truncate as clip;
use crate::report::{Finding, Report};
use crate::verdict::Verdict;
use base64::Engine as _;
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A check run's summary (GitHub: at most 65,535 characters), with room.
pub const CHECK_SUMMARY_BUDGET: usize = 60 * 1024;

/// A comment's body (GitHub: at most 65,536 characters), with room.
pub const COMMENT_BUDGET: usize = 60 * 1024;

/// `failure` when the run fails (a FAIL or ERROR, or a planted entry left
/// behind: what the exit code says), `neutral` when every channel was
/// SKIPPED (nothing was tested), else `success`.
pub fn conclusion(report: &Report) -> &'static str {
    if report.exit_code() != 0 {
        "failure"
    } else if report
        .findings
        .iter()
        .all(|f| f.verdict == Verdict::Skipped)
    {
        "neutral"
    } else {
        "success"
    }
}

/// One line for the check run's title and the comment's heading.
pub fn headline(report: &Report) -> String {
    let s = &report.summary;
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = Vec::new();
    if s.fail > 0 {
        parts.push(plural(
            s.fail,
            "undeclared channel open",
            "undeclared channels open",
        ));
    }
    if s.error > 0 {
        parts.push(plural(s.error, "error", "errors"));
    }
    if !report.cleanup.left.is_empty() {
        parts.push(plural(
            report.cleanup.left.len() as u64,
            "planted entry left",
            "planted entries left",
        ));
    }
    if !parts.is_empty() {
        return parts.join(", ");
    }
    if report
        .findings
        .iter()
        .all(|f| f.verdict == Verdict::Skipped)
    {
        return "nothing could be tested (every channel skipped)".into();
    }
    let tested = s.pass + s.authorized;
    match s.authorized {
        0 => format!("no undeclared channel open ({tested} tested)"),
        n => format!(
            "no undeclared channel open ({tested} tested, {} declared open)",
            n
        ),
    }
}

/// The check run's summary: the job summary's content, cut to
/// [`CHECK_SUMMARY_BUDGET`].
pub fn check_summary(report: &Report) -> String {
    summary_within(report, None, CHECK_SUMMARY_BUDGET)
}

/// One check run annotation.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Repository-relative path, as the API wants it (not percent-encoded).
    pub path: String,
    pub line: u64,
    pub column: u64,
    /// `failure` (FAIL) or `warning` (ERROR).
    pub level: &'static str,
    /// At most 255 characters.
    pub title: String,
    pub message: String,
}

/// Every FAIL and ERROR as an annotation, FAIL first, on the config line
/// that declares its surface (for a discovered config, the workflow step
/// that runs runwarden). Also returns how many findings had no file in
/// the repository to point at (they are in the summary only).
pub fn annotations(report: &Report, ctx: &Context) -> (Vec<Annotation>, usize) {
    let mut out = Vec::new();
    let mut homeless = 0;
    for (verdict, level, title) in [
        (Verdict::Fail, "failure", "Undeclared channel"),
        (Verdict::Error, "warning", "Probe error on"),
    ] {
        for f in report.findings.iter().filter(|f| f.verdict == verdict) {
            let Some((uri, line, column)) = ctx.location(f) else {
                homeless += 1;
                continue;
            };
            let path: Vec<String> = uri.split('/').map(decode).collect();
            out.push(Annotation {
                path: path.join("/"),
                line,
                column,
                level,
                title: clip(&format!("{title} {}{}", f.channel, side(f)), 255),
                message: clip(
                    &format!(
                        "{} (persistence: {}). How to close it or declare it: {}",
                        f.detail,
                        f.persistence.as_str(),
                        docs_link(f)
                    ),
                    4096,
                ),
            });
        }
    }
    (out, homeless)
}

fn side(f: &Finding) -> String {
    f.side().map(|s| format!(" ({s})")).unwrap_or_default()
}

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

/// What a comment remembers: the commit it was written for and every
/// channel's verdict.
#[derive(Debug, PartialEq)]
pub struct State {
    pub sha: Option<String>,
    pub verdicts: Verdicts,
}

/// The state a comment body carries, when it is well formed. Hostile
/// input: only channel keys of the id grammar and known verdicts count.
pub fn comment_state(body: &str) -> Option<State> {
    let start = body.rfind(STATE_START)? + STATE_START.len();
    let len = body[start..].find(STATE_END)?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(body[start..start + len].trim())
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&raw).ok()?;
    let known = ["fail", "error", "authorized", "skipped", "pass"];
    let key_ok = |k: &str| {
        !k.is_empty()
            && k.len() <= 200
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'@' | b'.'))
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
    Some(State { sha, verdicts })
}

/// What the comment says about this run beside the report.
pub struct CommentContext<'a> {
    /// The commit this run checked (40 hex), remembered for the next.
    pub sha: Option<&'a str>,
    /// A link to the workflow run.
    pub run_url: Option<&'a str>,
}

/// The sticky comment: marker, headline, what changed since `before`
/// (`None`: the first comment), the counts and every FAIL, ERROR and
/// AUTHORIZED channel, then this run's state. Cut to [`COMMENT_BUDGET`].
pub fn comment(report: &Report, before: Option<&State>, cx: &CommentContext<'_>) -> String {
    let now = verdicts(report);
    let mut out = marker(report) + "\n";
    let icon = if report.exit_code() != 0 {
        "🔴"
    } else {
        "🟢"
    };
    let _ = writeln!(out, "### {icon} runwarden: {}\n", cell(&headline(report)));
    if let Some(label) = &report.label {
        let _ = writeln!(out, "Runner: {}\n", cell(label));
    }
    match before {
        None => out += "First run on this pull request.\n\n",
        Some(b) => {
            let since = b
                .sha
                .as_deref()
                .map(|s| format!(" (at {})", &s[..7]))
                .unwrap_or_default();
            let c = changes(&b.verdicts, &now);
            if c.is_empty() {
                let _ = writeln!(out, "**No change since the last run{since}.**\n");
            } else {
                let _ = writeln!(out, "**Since the last run{since}:**\n");
                let list = |v: &[String]| v.iter().map(|k| cell(k)).collect::<Vec<_>>().join(", ");
                if !c.opened.is_empty() {
                    let _ = writeln!(out, "- newly open: {}", list(&c.opened));
                }
                if !c.closed.is_empty() {
                    let _ = writeln!(out, "- newly closed: {}", list(&c.closed));
                }
                for (k, b, n) in &c.other {
                    let _ = writeln!(
                        out,
                        "- {}: {} → {}",
                        cell(k),
                        b.to_uppercase(),
                        n.to_uppercase()
                    );
                }
                out.push('\n');
            }
        }
    }
    let s = &report.summary;
    let _ = writeln!(
        out,
        "**{}** fail · **{}** error · **{}** authorized · **{}** skipped · **{}** pass\n",
        s.fail, s.error, s.authorized, s.skipped, s.pass
    );
    let mut rows: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| {
            matches!(
                f.verdict,
                Verdict::Fail | Verdict::Error | Verdict::Authorized
            )
        })
        .collect();
    rows.sort_by_key(|f| f.verdict);
    let state = state_line(cx.sha, &now);
    let footer = footer(cx);
    if !rows.is_empty() {
        out += "| Verdict | Channel | Detail |\n| --- | --- | --- |\n";
        for (i, f) in rows.iter().enumerate() {
            let row = format!(
                "| {} | [{}]({}){} | {} |\n",
                f.verdict.as_str().to_uppercase(),
                cell(&f.channel),
                docs_link(f),
                cell(&side(f)),
                cell(&clip(&f.detail, 600))
            );
            if out.len() + row.len() + footer.len() + state.len() + 200 > COMMENT_BUDGET {
                let _ = writeln!(
                    out,
                    "\n{} more rows are in the job summary and the report.",
                    rows.len() - i
                );
                break;
            }
            out += &row;
        }
        out.push('\n');
    }
    out += &footer;
    out += &state;
    out
}

fn footer(cx: &CommentContext<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(u) = cx.run_url {
        parts.push(format!("[the run]({})", cell(u)));
    }
    if let Some(s) = cx.sha {
        parts.push(format!("commit {}", cell(&s[..s.len().min(7)])));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(
        "<sub>Updated in place by each run ({}).</sub>\n",
        parts.join(", ")
    )
}

fn state_line(sha: Option<&str>, verdicts: &Verdicts) -> String {
    let v = serde_json::json!({ "v": 1, "sha": sha, "verdicts": verdicts });
    let b64 = base64::engine::general_purpose::STANDARD.encode(v.to_string());
    format!("{STATE_START}{b64}{STATE_END}\n")
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
        let now = v(&[("fs:file-name", "fail"), ("git:ref@inside", "pass")]);
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let line = state_line(Some(sha), &now);
        let s = comment_state(&format!("text\n{line}")).unwrap();
        assert_eq!(s.verdicts, now);
        assert_eq!(s.sha.as_deref(), Some(sha));
        let hostile = serde_json::json!({ "verdicts": { "<img>": "fail", "a:b": "owned", "c:d": "pass" }, "sha": "zz" });
        let body = format!(
            "{STATE_START}{}{STATE_END}",
            base64::engine::general_purpose::STANDARD.encode(hostile.to_string())
        );
        let s = comment_state(&body).unwrap();
        assert_eq!(s.verdicts, v(&[("c:d", "pass")]));
        assert_eq!(s.sha, None);
        assert_eq!(comment_state("no state here"), None);
    }
}
