//! The check run reviewers see, a function over the report: its
//! conclusion, title, summary, and one annotation per FAIL and ERROR on
//! the config line that declares the surface. (The sticky comment is
//! [`super::comment`].)

use super::github::{docs_link, summary_within};
use super::repo::Context;
use super::sarif::truncate as clip;
use crate::report::{Finding, Report};
use crate::verdict::Verdict;
use crate::wire::percent_decode as decode;

/// A check run's summary (GitHub: at most 65,535 characters), with room.
pub const CHECK_SUMMARY_BUDGET: usize = 60 * 1024;

/// `failure` when the run fails (a FAIL or ERROR, a planted entry left
/// behind, or a probe whose every channel was SKIPPED, so nothing was
/// tested: what the exit code says), `neutral` when an exposure was not
/// tested (a green run with gaps is no plain green), else `success`.
pub fn conclusion(report: &Report) -> &'static str {
    let gaps = report.coverage.as_ref().is_some_and(|c| c.gap_count() > 0);
    if report.exit_code() != 0 {
        "failure"
    } else if gaps
        || report
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
    // (An open channel from an untrusted run to a trusted one leads.)
    if let Some(p) = report.poisoning() {
        parts.push(p.to_string());
    }
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
    if !report.cleanup.refused.is_empty() {
        parts.push(plural(
            report.cleanup.refused.len() as u64,
            "journal entry not runwarden's",
            "journal entries not runwarden's",
        ));
    }
    if !parts.is_empty() {
        parts.extend(super::coverage::lead(report, false));
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
    let gaps = report.coverage.as_ref().is_some_and(|c| c.gap_count() > 0);
    match super::coverage::lead(report, true) {
        Some(lead) if gaps => {
            return format!("{lead} ({tested} channels tested, none open undeclared)");
        }
        // Only declared exposures: a plain green, saying so.
        Some(declared) => {
            return format!("no undeclared channel open ({tested} tested), {declared}");
        }
        None => {}
    }
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

pub(super) fn side(f: &Finding) -> String {
    f.side().map(|s| format!(" ({s})")).unwrap_or_default()
}

/// Both runs' trust, in a recover (a probe's two runs are one job): one
/// Markdown line, its words rendered as surface text is.
pub fn trust_line(report: &Report) -> Option<String> {
    if report.mode != crate::report::Mode::Recover {
        return None;
    }
    let t = report.trust.as_ref()?;
    Some(format!(
        "Run A: {}; run B: {}.",
        super::markdown::text(&trust_words(&t.a)),
        super::markdown::text(&trust_words(&t.b))
    ))
}

/// One run's trust for people: "untrusted (pull_request_target …; the
/// API's record of run 42)". Not escaped: the caller
/// escapes it its way.
pub fn trust_words(t: &crate::trust::Trust) -> String {
    let class = match t.class {
        crate::trust::Class::Untrusted => "untrusted",
        crate::trust::Class::Trusted => "trusted",
        crate::trust::Class::Unclassified => "unclassified",
    };
    format!("{class} ({}; {})", t.why, t.source)
}
