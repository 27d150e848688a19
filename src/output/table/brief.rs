//! The brief table a terminal gets: one line per surface (what is open,
//! broken, declared, and where to read how to close it), fitted to the
//! terminal's width, then what the full table ends with.

use super::{Fit, render_wide, trailer, who_ran};
use crate::escape;
use crate::report::{Mode, Report};
use crate::verdict::Verdict;
use crate::wrap;
use std::fmt::Write as _;

/// The brief table for a terminal `width` columns wide: one line per
/// surface (what is open, broken, declared, and where to read how to close
/// it), who runs A and B ran as, then what the full table ends with.
pub fn render_brief(report: &Report, width: usize) -> String {
    if report.mode == Mode::Cleanup {
        return render_wide(report, Fit::Terminal(width));
    }
    let groups = crate::output::groups::by_surface(report);
    let names: Vec<String> = groups
        .iter()
        .map(|g| {
            format!(
                "{} ({})",
                escape::line(g.surface),
                escape::line(g.surface_type)
            )
        })
        .collect();
    let name_w = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .min(width / 3);
    let mut out = crate::wrap::text(&super::lead(report), width);
    for (g, name) in groups.iter().zip(&names) {
        let line = format!("{name:<name_w$}  {}", brief_parts(g, report.mode));
        // The counts hang under themselves: nothing of the line is cut.
        let head = line.len() - line[name.len()..].trim_start().len();
        for l in wrap::line(&line, width, head, name_w + 2) {
            let _ = writeln!(out, "{l}");
        }
        if !g.with(Verdict::Fail).is_empty() {
            let link = crate::output::markdown::close_link(g.surface_type);
            // Never cut: a link cut short leads nowhere. Unindented when it
            // does not fit indented.
            let indent = if name_w + 12 + link.len() <= width {
                name_w + 2
            } else {
                0
            };
            let _ = writeln!(out, "{:indent$}close it: {link}", "");
        }
    }
    let mut rest = String::new();
    if report.mode != Mode::Watch {
        let _ = writeln!(rest, "\n{}", who_ran(report));
    }
    rest.push_str("every channel: -v, or --format table-wide\n");
    out + &wrap::text(&(rest + &trailer(report, false)), width)
}

/// What one surface's line says: open (undeclared), declared, broken,
/// skipped and passed carriers, in that order, the open ones named. A
/// PASS is worded as it means in `mode` (docs/verdicts.md): in watch mode
/// "not used"; a runner-persistence PASS found no other probe's beacon,
/// which cannot show it closed.
fn brief_parts(g: &crate::output::groups::Group<'_>, mode: Mode) -> String {
    let total = g.findings.len();
    let n = |v: Verdict| g.with(v).len();
    // Counts first, names last: a narrow terminal cuts the names, never a
    // count.
    // In watch mode a FAIL is a carrier the command used
    // (docs/watch.md), not one shown open.
    let open_word = if mode == Mode::Watch { "used" } else { "open" };
    let mut parts = vec![];
    let open = g.carriers(Verdict::Fail);
    if !open.is_empty() {
        parts.push(format!("{} of {total} {open_word}", open.len()));
    }
    if n(Verdict::Authorized) > 0 {
        parts.push(format!("{} declared {open_word}", n(Verdict::Authorized)));
    }
    if let Some(e) = g.with(Verdict::Error).first() {
        parts.push(format!(
            "{} errors ({})",
            n(Verdict::Error),
            escape::line(&e.detail)
        ));
    }
    if n(Verdict::Skipped) > 0 {
        parts.push(format!("{} skipped", n(Verdict::Skipped)));
    }
    let passed = g.with(Verdict::Pass);
    let beacons = passed
        .iter()
        .filter(|f| mode != Mode::Watch && f.carrier == crate::surface::RUNNER_PERSISTENCE)
        .count();
    let rest = passed.len() - beacons;
    if rest > 0 {
        let word = if mode == Mode::Watch {
            "not used"
        } else {
            "closed"
        };
        parts.push(format!("{rest} {word}"));
    }
    if beacons > 0 {
        parts.push("no earlier probe's beacon found".into());
    }
    let mut line = parts.join("; ");
    if !open.is_empty() {
        // The shorter list: what is open, or what is not (never "all but"
        // a carrier open and declared: it is open too).
        let not_open = g.carriers_but(Verdict::Fail);
        let names = if not_open.is_empty() {
            "all".to_string()
        } else if not_open.len() < open.len() && n(Verdict::Authorized) == 0 {
            format!(
                "all but {}",
                crate::output::groups::first(&not_open, 12, escape::line)
            )
        } else {
            crate::output::groups::first(&open, 12, escape::line)
        };
        let _ = write!(line, " — {open_word}: {names}");
    }
    line
}
