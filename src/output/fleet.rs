//! The fleet table: several reports (one per runner label, from the fleet
//! workflow's recover jobs) merged into one table, channel by label:
//! Markdown for job summaries ([`render`]), plain columns for a terminal
//! ([`render_plain`]). Functions over reports, like every output.

use crate::output::markdown::word;
use crate::report::Report;
use crate::verdict::Verdict;
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
    let channels = channels(columns);
    let failing = columns.iter().filter(|c| c.report.exit_code() != 0).count();
    let mut out = format!(
        "## runwarden fleet: {} of {} runner labels with open undeclared channels, errors or leftovers\n\n",
        failing,
        columns.len()
    );
    out += "| channel |";
    for c in columns {
        let _ = write!(out, " {} |", word(&c.heading));
    }
    out += "\n| --- |";
    for _ in columns {
        out += " --- |";
    }
    out += "\n";
    for ch in &channels {
        let _ = write!(out, "| {} |", word(ch));
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

/// Every channel of the reports, in first-seen order.
fn channels<'a>(columns: &[Column<'a>]) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for c in columns {
        for f in &c.report.findings {
            if seen.insert(f.channel.as_str()) {
                out.push(&f.channel);
            }
        }
    }
    out
}

/// Plain columns for a terminal: the same rows as [`render`], without
/// Markdown or HTML entities; labels and channel ids escaped for one line
/// of a log.
pub fn render_plain(columns: &[Column<'_>]) -> String {
    let line = |s: &str| crate::escape::line(s);
    let mut rows: Vec<Vec<String>> = vec![
        std::iter::once("CHANNEL".to_string())
            .chain(columns.iter().map(|c| line(&c.heading)))
            .collect(),
    ];
    for ch in channels(columns) {
        let mut row = vec![line(ch)];
        for c in columns {
            row.push(
                worst(c.report, ch)
                    .map(|v| v.as_str().to_ascii_uppercase())
                    .unwrap_or_else(|| "-".into()),
            );
        }
        rows.push(row);
    }
    rows.push(
        std::iter::once("fail / error".to_string())
            .chain(
                columns
                    .iter()
                    .map(|c| format!("{} / {}", c.report.summary.fail, c.report.summary.error)),
            )
            .collect(),
    );
    let widths: Vec<usize> = (0..=columns.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let failing = columns.iter().filter(|c| c.report.exit_code() != 0).count();
    let mut out = format!(
        "runwarden fleet: {failing} of {} runner labels fail (undeclared open, errors, leftovers)\n",
        columns.len()
    );
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}", w = *w))
            .collect();
        out += cells.join("  ").trim_end();
        out.push('\n');
    }
    out
}
