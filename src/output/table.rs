//! The table printed on stdout: one row per finding, worst first, then the
//! counts and anything cleanup had to leave behind.

use crate::escape;
use crate::report::Report;
use std::fmt::Write as _;

pub fn render(report: &Report) -> String {
    let mut rows: Vec<[String; 5]> = vec![[
        "VERDICT".into(),
        "CHANNEL".into(),
        "PERSISTENCE".into(),
        "CONTROL".into(),
        "DETAIL".into(),
    ]];
    let mut findings: Vec<_> = report.findings.iter().collect();
    // Stable sort: config order within each verdict.
    findings.sort_by_key(|f| f.verdict);
    for f in findings {
        rows.push([
            f.verdict.as_str().to_uppercase(),
            escape::line(&match &f.scope {
                Some(sc) => {
                    let side = sc.get("side").map(String::as_str).unwrap_or("?");
                    let what: Vec<String> = sc
                        .iter()
                        .filter(|(k, _)| *k != "side")
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect();
                    format!("{} [{side} {}]", f.channel, what.join(", "))
                }
                None => f.channel.clone(),
            }),
            f.persistence.as_str().into(),
            escape::line(
                &serde_json::to_value(f.control)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
            ),
            escape::line(&f.detail),
        ]);
    }
    let mut widths = [0usize; 4];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        for (w, cell) in widths.iter().zip(r.iter()) {
            let _ = write!(out, "{cell:<w$}  ", w = *w);
        }
        out.push_str(&r[4]);
        out.push('\n');
    }
    let s = &report.summary;
    let _ = writeln!(
        out,
        "\n{} fail, {} error, {} authorized, {} skipped, {} pass (probe {})",
        s.fail,
        s.error,
        s.authorized,
        s.skipped,
        s.pass,
        escape::line(&report.probe_id)
    );
    if !report.cleanup.left.is_empty() {
        let _ = writeln!(
            out,
            "cleanup left {} planted entries in place:",
            report.cleanup.left.len()
        );
        for l in &report.cleanup.left {
            let _ = writeln!(
                out,
                "  {}: {}: {}",
                escape::line(&l.surface),
                escape::line(&l.entry),
                escape::line(&l.reason)
            );
        }
    }
    out
}
