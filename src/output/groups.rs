//! Findings grouped by surface, for the outputs that lead with one line per
//! surface (the terminal table, the sticky comment) instead of one row per
//! channel: which carriers are open, which broke, which were declared.

use crate::report::{Finding, Report};
use crate::verdict::Verdict;

/// One surface's findings, in the report's order.
pub struct Group<'r> {
    pub surface: &'r str,
    pub surface_type: &'r str,
    /// Every finding of the surface (a scoped channel counts once per side).
    pub findings: Vec<&'r Finding>,
}

impl<'r> Group<'r> {
    /// The findings with verdict `v`.
    pub fn with(&self, v: Verdict) -> Vec<&'r Finding> {
        self.findings
            .iter()
            .copied()
            .filter(|f| f.verdict == v)
            .collect()
    }

    /// The carriers (with `@side` for a scoped channel) of the findings
    /// with verdict `v`.
    pub fn carriers(&self, v: Verdict) -> Vec<String> {
        self.with(v).iter().map(|f| named(f)).collect()
    }

    /// The carriers (as [`Group::carriers`] names them) of the findings
    /// whose verdict is not `v`.
    pub fn carriers_but(&self, v: Verdict) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| f.verdict != v)
            .map(|f| named(f))
            .collect()
    }

    /// Whether every finding here passed or was skipped: nothing to say
    /// beyond the counts.
    pub fn quiet(&self) -> bool {
        self.findings
            .iter()
            .all(|f| matches!(f.verdict, Verdict::Pass | Verdict::Skipped))
    }
}

/// A finding's carrier, with `@side` for a scoped channel.
fn named(f: &Finding) -> String {
    match f.side() {
        Some(s) => format!("{}@{s}", f.carrier),
        None => f.carrier.clone(),
    }
}

/// The report's findings by surface, surfaces in the order they first
/// appear (the config's).
pub fn by_surface(report: &Report) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for f in &report.findings {
        match out.iter_mut().find(|g| g.surface == f.surface) {
            Some(g) => g.findings.push(f),
            None => out.push(Group {
                surface: &f.surface,
                surface_type: &f.surface_type,
                findings: vec![f],
            }),
        }
    }
    out
}

/// `names` joined with `, `, at most `max` of them, then `, … N more`.
pub fn first(names: &[String], max: usize, show: impl Fn(&str) -> String) -> String {
    let mut s: Vec<String> = names.iter().take(max).map(|n| show(n)).collect();
    if names.len() > max {
        s.push(format!("… {} more", names.len() - max));
    }
    s.join(", ")
}
