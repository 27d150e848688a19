//! Coverage in every output: the headline's lead ("green, but 5
//! exposures not tested: packages, discussions, …"), the table's lines
//! and the Markdown section of the job summary, the check run and the
//! pull request comment. A clean run with gaps never reads as a plain
//! green.
//!
//! The lead names gaps only by words this module owns (a permission key
//! of GitHub's, a fixed exposure name, or a kind with a count: "2 paths"):
//! an exposure's place (a path, an origin) is environment text, shown
//! only escaped, in the table and the section.

use super::markdown::{cell, word};
use crate::escape;
use crate::report::{Coverage, ExposureStatus, Report, TestedBy};
use std::fmt::Write as _;

/// Gap names past this many are counted, not named, in a headline.
const NAMED: usize = 5;

/// Rows of one Markdown table past this many are counted, not shown (a
/// runner logged in to a hundred registries).
const ROWS: usize = 50;

/// The gaps by name, in the report's order: a permission's key, a fixed
/// exposure's id, else its kind counted ("2 paths").
fn names(c: &Coverage) -> Vec<String> {
    let mut named: Vec<String> = vec![];
    let mut kinds: Vec<(&'static str, &'static str, usize)> = vec![];
    for e in c
        .exposures
        .iter()
        .filter(|e| e.status == ExposureStatus::NotTested)
    {
        if let Some(k) = e.id.strip_prefix("permission:")
            && let Some(k) = crate::plan::PERMISSION_KEYS.iter().find(|x| **x == k)
        {
            named.push(k.to_string());
            continue;
        }
        if let Some(f) = crate::plan::FIXED_EXPOSURES.iter().find(|f| **f == e.id) {
            named.push(f.to_string());
            continue;
        }
        let kind =
            e.id.split_once(':')
                .and_then(|(k, _)| crate::plan::PLACED_EXPOSURES.iter().find(|p| p.0 == k))
                .map_or(("exposure", "exposures"), |p| (p.1, p.2));
        match kinds.iter_mut().find(|k| k.0 == kind.0) {
            Some(k) => k.2 += 1,
            None => kinds.push((kind.0, kind.1, 1)),
        }
    }
    named.extend(kinds.into_iter().map(|(one, many, n)| match n {
        1 => format!("a {one}"),
        n => format!("{n} {many}"),
    }));
    named
}

/// `5 exposures not tested: packages, discussions, run-traces, a
/// registry, 2 paths` (at most [`NAMED`] names, then `…`).
fn gap_line(c: &Coverage) -> String {
    let names = names(c);
    let shown: Vec<&str> = names.iter().take(NAMED).map(String::as_str).collect();
    let gaps = c.gap_count();
    format!(
        "{gaps} {} not tested: {}{}",
        if gaps == 1 { "exposure" } else { "exposures" },
        shown.join(", "),
        if names.len() > NAMED { ", …" } else { "" }
    )
}

/// `, 2 declared untested` when the config declares exposures it leaves
/// untested (the config is the work tree's: a reader should see them).
fn declared_part(c: &Coverage) -> String {
    match c.count(ExposureStatus::Declared) {
        0 => String::new(),
        n => format!(", {n} declared untested"),
    }
}

/// The headline's coverage part, plain words only: `None` when every
/// exposure was tested. `green` says whether the rest of the run is clean
/// (then the line starts "green, but").
pub fn lead(report: &Report, green: bool) -> Option<String> {
    let c = report.coverage.as_ref()?;
    let declared = declared_part(c);
    if c.gap_count() == 0 {
        return (!declared.is_empty()).then(|| declared.trim_start_matches(", ").to_string());
    }
    Some(match (green, c.required) {
        (true, false) => format!("green, but {}{declared}", gap_line(c)),
        (_, true) => format!("{}{declared} (coverage required)", gap_line(c)),
        (false, false) => format!("{}{declared}", gap_line(c)),
    })
}

/// The channels that tested an exposure, short: one channel of a
/// surface as it is (`github:release-draft (fail)`), several counted by
/// verdict (`home: 9 fail, 1 pass`).
fn tested_by(channels: &[TestedBy]) -> String {
    let mut by: Vec<(&str, Vec<&TestedBy>)> = vec![];
    for t in channels {
        let surface = t
            .channel
            .split_once(':')
            .map_or(t.channel.as_str(), |(s, _)| s);
        match by.iter_mut().find(|(s, _)| *s == surface) {
            Some((_, v)) => v.push(t),
            None => by.push((surface, vec![t])),
        }
    }
    by.iter()
        .map(|(surface, ts)| {
            if let [t] = ts.as_slice() {
                return format!("{} ({})", t.channel, t.verdict.as_str());
            }
            let mut counts: Vec<(&str, usize)> = vec![];
            for t in ts {
                match counts.iter_mut().find(|(v, _)| *v == t.verdict.as_str()) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((t.verdict.as_str(), 1)),
                }
            }
            let counts: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
            format!("{surface}: {}", counts.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The terminal table's lines: the coverage line, then each gap and
/// each declared exposure with why (with `all`, the wide table's, every
/// exposure and what tested it).
pub fn table_lines(report: &Report, all: bool) -> String {
    let Some(c) = &report.coverage else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "coverage ({} runner): {}",
        escape::line(&c.runner),
        match c.gap_count() {
            0 => format!("every exposure tested or declared{}", declared_part(c)),
            _ => gap_line(c) + &declared_part(c),
        }
    );
    let shown: Vec<&crate::report::Exposure> = c
        .exposures
        .iter()
        .filter(|e| all || e.status != ExposureStatus::Tested)
        .collect();
    // The terminal's brief table groups gaps of one kind and one reason
    // ("5 path exposures: no channel of the config tests it"): the
    // findings stay in view; -v and the report list each.
    let kind = |e: &crate::report::Exposure| e.id.split(':').next().unwrap_or("").to_string();
    let mut grouped: Vec<(String, String)> = vec![];
    if !all {
        let mut groups: Vec<((String, String), usize)> = vec![];
        for e in shown
            .iter()
            .filter(|e| e.status == ExposureStatus::NotTested)
        {
            let key = (kind(e), e.reason.clone().unwrap_or_default());
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, n)) => *n += 1,
                None => groups.push((key, 1)),
            }
        }
        for ((k, why), n) in groups.into_iter().filter(|(_, n)| *n >= 3) {
            let _ = writeln!(
                out,
                "  {:<10} {n} {} exposures: {} (-v lists each)",
                ExposureStatus::NotTested.as_str(),
                escape::line(&k),
                escape::line(&why)
            );
            grouped.push((k, why));
        }
    }
    for e in shown {
        if e.status == ExposureStatus::NotTested
            && grouped
                .iter()
                .any(|(k, why)| *k == kind(e) && Some(why) == e.reason.as_ref())
        {
            continue;
        }
        let how = match e.status {
            ExposureStatus::Tested => tested_by(&e.channels),
            _ => e.reason.clone().unwrap_or_default(),
        };
        let _ = writeln!(
            out,
            "  {:<10} {}: {}",
            e.status.as_str(),
            escape::line(&e.id),
            escape::line(&how)
        );
    }
    if all && !c.permissions_source.is_empty() {
        let _ = writeln!(
            out,
            "  permissions: {}",
            escape::line(&c.permissions_source)
        );
    }
    if c.gap_count() > 0 {
        // A gap left on purpose (a path taken out of the discovered
        // config) is declared, with why, and stops counting as one.
        let _ = writeln!(
            out,
            "  a gap you accept: declare it in the config (`exposure:` and `reason:`, docs/coverage.md)"
        );
    }
    out
}

/// The Markdown section: the gaps first (each with why and the stanza
/// that would test it), then what was tested or declared, collapsed.
pub fn markdown(report: &Report) -> String {
    let Some(c) = &report.coverage else {
        return String::new();
    };
    let mut out = String::new();
    if c.gap_count() == 0 {
        let _ = writeln!(
            out,
            "**Coverage:** every exposure of this {} runner was tested or declared ({}).\n",
            word(&c.runner),
            c.exposures.len()
        );
    } else {
        let _ = writeln!(
            out,
            "**Coverage: {}{}.** A green run says nothing about these:\n",
            gap_line(c),
            declared_part(c)
        );
        out += "| Not tested | Why |\n| --- | --- |\n";
        let gaps: Vec<_> = c
            .exposures
            .iter()
            .filter(|e| e.status == ExposureStatus::NotTested)
            .collect();
        for e in gaps.iter().take(ROWS) {
            let _ = writeln!(
                out,
                "| {} | {} |",
                cell(&e.id),
                cell(e.reason.as_deref().unwrap_or(""))
            );
        }
        if gaps.len() > ROWS {
            let _ = writeln!(out, "\n{} more gaps are in the report.", gaps.len() - ROWS);
        }
        out += "\n";
        // The config that would test each, as YAML one can copy: a code
        // block (its fence longer than any run of backticks in it), never
        // YAML flattened into a table cell.
        let stanzas: Vec<_> = gaps
            .iter()
            .take(ROWS)
            .filter_map(|e| Some((e, e.stanza.as_deref()?)))
            .collect();
        if !stanzas.is_empty() {
            out += "<details><summary>The config that would test them</summary>\n\n";
            for (e, stanza) in stanzas {
                let _ = writeln!(out, "{}:\n\n{}", cell(&e.id), code_block(stanza));
            }
            out += "</details>\n\n";
        }
    }
    let rest: Vec<_> = c
        .exposures
        .iter()
        .filter(|e| e.status != ExposureStatus::NotTested)
        .collect();
    if !rest.is_empty() {
        out += "<details><summary>Tested and declared exposures</summary>\n\n| Status | Exposure | Tested by, or why declared |\n| --- | --- | --- |\n";
        for e in rest.iter().take(ROWS) {
            let how = match e.status {
                ExposureStatus::Tested => tested_by(&e.channels),
                _ => e.reason.clone().unwrap_or_default(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                e.status.as_str(),
                cell(&e.id),
                cell(&how)
            );
        }
        if rest.len() > ROWS {
            let _ = writeln!(out, "\n{} more are in the report.", rest.len() - ROWS);
        }
        out += "\n</details>\n\n";
    }
    out
}

/// `text` as a fenced YAML code block: the fence is longer than any run
/// of backticks in it, and no line of it can close the block or the
/// `<details>` around it (inside a fenced block nothing is markup).
fn code_block(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat((longest + 1).max(3));
    let body: String = text
        .lines()
        .map(|l| crate::escape::line(l).replace("##[", "#\u{2060}#["))
        .collect::<Vec<_>>()
        .join("\n");
    format!("{fence}yaml\n{body}\n{fence}\n")
}
