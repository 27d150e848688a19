//! The fleet table: several reports (one per runner label, from the fleet
//! workflow's recover jobs) merged into one Markdown table, channel by
//! label. A function over reports, like every output.

use crate::output::github::cell;
use crate::report::Report;
use crate::verdict::Verdict;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One column of the table: its heading and its report.
pub struct Column<'a> {
    pub heading: String,
    pub report: &'a Report,
}

/// The worst verdict of a channel in one report (a scoped channel has two
/// findings).
fn worst(report: &Report, channel: &str) -> Option<Verdict> {
    report
        .findings
        .iter()
        .filter(|f| f.channel == channel)
        .map(|f| f.verdict)
        .min()
}

/// Markdown: a heading line, one row per channel (in first-seen order),
/// one column per report, then a count row of failing verdicts.
pub fn render(columns: &[Column<'_>]) -> String {
    let mut channels: Vec<&str> = Vec::new();
    let mut seen = BTreeMap::new();
    for c in columns {
        for f in &c.report.findings {
            if seen.insert(f.channel.as_str(), ()).is_none() {
                channels.push(&f.channel);
            }
        }
    }
    let failing = columns.iter().filter(|c| c.report.exit_code() != 0).count();
    let mut out = format!(
        "## runwarden fleet: {} of {} runner labels with open undeclared channels, errors or leftovers\n\n",
        failing,
        columns.len()
    );
    out += "| channel |";
    for c in columns {
        let _ = write!(out, " {} |", cell(&c.heading));
    }
    out += "\n| --- |";
    for _ in columns {
        out += " --- |";
    }
    out += "\n";
    for ch in &channels {
        // Entities are not decoded inside code spans: plain text.
        let _ = write!(out, "| {} |", cell(ch));
        for c in columns {
            let v = match worst(c.report, ch) {
                Some(Verdict::Fail) => "**FAIL**",
                Some(v) => match v {
                    Verdict::Error => "ERROR",
                    Verdict::Authorized => "AUTHORIZED",
                    Verdict::Skipped => "SKIPPED",
                    _ => "PASS",
                },
                None => "–",
            };
            let _ = write!(out, " {v} |");
        }
        out += "\n";
    }
    out += "| **fail / error** |";
    for c in columns {
        let _ = write!(
            out,
            " {} / {} |",
            c.report.summary.fail, c.report.summary.error
        );
    }
    out += "\n";
    out
}
