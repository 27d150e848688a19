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
//!
//! The state line itself is [`state`].

mod state;

pub use state::{Kept, STATE_BUDGET, State, Stored, comment_state};

use super::github::docs_link;
use super::groups::{Group, by_surface, first};
use super::markdown::{cell, close_link, text, word};
use super::review::{headline, side};
use super::sarif::truncate as clip;
use crate::marker::Key;
use crate::report::{Finding, Report};
use crate::verdict::Verdict;
use sha2::Digest as _;
use state::{digest, state_line};
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
/// counts, the count of coverage gaps, one row per surface with what is
/// open there and where to read how to close it, then every FAIL, ERROR
/// and AUTHORIZED channel in a collapsed table, then the gaps (before the
/// surfaces when nothing FAILs or is ERROR), then this run's state. Cut to [`COMMENT_BUDGET`],
/// saying what was cut.
pub fn comment(report: &Report, earlier: Earlier<'_>, cx: &CommentContext<'_>) -> String {
    let marker = marker(report);
    let mut out = marker.clone() + "\n";
    // Yellow: green, but with exposures no channel tested.
    let icon = if report.exit_code() != 0 {
        "🔴"
    } else if report.coverage.as_ref().is_some_and(|c| c.gap_count() > 0) {
        "🟡"
    } else {
        "🟢"
    };
    let _ = writeln!(out, "### {icon} runwarden: {}\n", headline(report));
    if let Some(label) = &report.label {
        // A relayed report's label can be any length: the comment's own
        // budget must not be spent on it.
        let _ = writeln!(out, "Runner: {}\n", text(&clip(label, 100)));
    }
    if let Some(w) = report.config_warning() {
        let _ = writeln!(out, "**Warning:** {}.\n", text(&w));
    }
    if let Some(t) = crate::output::review::trust_line(report) {
        let _ = writeln!(out, "{t}\n");
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
    // The findings first when there are any to act on, after the gaps'
    // count (the coverage section's first line); else the gaps before
    // the rest. When the whole section does not fit, its first line still
    // does.
    let coverage = super::coverage::markdown(report);
    let first = coverage.split_inclusive("\n\n").next().unwrap_or_default();
    let failing = report.summary.fail + report.summary.error > 0;
    if failing {
        out += first;
    } else if room(&out, coverage.len()) {
        out += &coverage;
    } else {
        out += first;
        out += "The report lists every exposure.\n\n";
    }
    surfaces(&mut out, report, &room);
    channels(&mut out, report, &room);
    if failing && coverage.len() > first.len() {
        if room(&out, coverage.len()) {
            out += &coverage;
        } else {
            out += "The report lists every exposure.\n\n";
        }
    }
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
}
