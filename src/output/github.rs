//! GitHub Actions: annotations, the job summary and step outputs, each a
//! function over the report.
//!
//! Everything here can carry surface data or config values (a pull request
//! can change the config), so every annotation is built with the runner's
//! own escaping rules, every summary cell is entity-escaped so that no value
//! can break the table or inject markup, and outputs use a random heredoc
//! delimiter that no value may contain.

use super::markdown::{cell, text, word};
use super::repo::Context;
use crate::escape;
use crate::fault::Fault;
use crate::report::{Finding, Report};
use crate::verdict::Verdict;
use std::fmt::Write as _;

/// Annotations of one kind a step may show (GitHub's limit: 10 errors and
/// 10 warnings per step).
pub const PER_KIND: usize = 10;

/// The job summary stays under GitHub's 1 MiB per step, with room to spare.
pub const SUMMARY_BUDGET: usize = 900 * 1024;

/// Escapes a workflow command's message: `%`, `\r`, `\n` (the runner's
/// data escaping), and the first `#` of every `##[`.
fn data(s: &str) -> String {
    escape::line(s)
}

/// Escapes a workflow command property value: the data escaping plus `:`
/// and `,`.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

fn annotation(kind: &str, f: &Finding, ctx: &Context, title: &str) -> String {
    let mut props = Vec::new();
    if let Some((uri, line, col)) = ctx.location(f) {
        // The runner wants a path; uris are percent-encoded.
        props.push(format!(
            "file={}",
            property(&crate::wire::percent_decode(&uri))
        ));
        props.push(format!("line={line}"));
        props.push(format!("col={col}"));
    }
    props.push(format!(
        "title={}",
        property(&format!("{title} {}", f.channel))
    ));
    format!("::{kind} {}::{}", props.join(","), data(&f.detail))
}

/// One `::error` per FAIL and `::warning` per ERROR, at most [`PER_KIND`]
/// of each, then one `::notice` saying how many more and where the report
/// is.
pub fn annotations(report: &Report, ctx: &Context, report_path: Option<&str>) -> String {
    let mut out = String::new();
    for (verdict, kind, title) in [
        (Verdict::Fail, "error", "Undeclared channel"),
        (Verdict::Error, "warning", "Probe error on"),
    ] {
        let all: Vec<&Finding> = report
            .findings
            .iter()
            .filter(|f| f.verdict == verdict)
            .collect();
        for f in all.iter().take(PER_KIND) {
            out += &annotation(kind, f, ctx, title);
            out.push('\n');
        }
        if all.len() > PER_KIND {
            let where_ = report_path.map(|p| format!(" in {p}")).unwrap_or_default();
            let msg = format!(
                "{} more {} findings are not annotated; all are in the report{where_}",
                all.len() - PER_KIND,
                verdict.as_str()
            );
            let _ = writeln!(
                out,
                "::notice title={}::{}",
                property("runwarden"),
                data(&msg)
            );
        }
    }
    out
}

/// Escapes runwarden's own text for a link destination (a run URL from
/// the runner's environment): every character Markdown or HTML could act
/// on becomes an entity. Never for surface data, which only
/// [`super::markdown`] renders.
pub(super) fn url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            c if c.is_ascii_alphanumeric() || "-._~:/?=&%+,;".contains(c) => out.push(c),
            c if c.is_control() || c.is_whitespace() => {}
            c => {
                let _ = write!(out, "&#{};", c as u32);
            }
        }
    }
    out
}

/// The docs section of a finding's carrier.
pub(super) fn docs_link(f: &Finding) -> String {
    super::markdown::docs_link(&f.surface_type, &f.carrier)
}

/// The job summary: counts, a mermaid diagram of the open channels (run A
/// -> surface -> run B), then every finding, worst first, each with a link
/// to its carrier's docs. Stays under [`SUMMARY_BUDGET`]: past it, rows are
/// cut with a line saying how many (the report keeps them all).
pub fn summary(report: &Report, report_path: Option<&str>) -> String {
    summary_within(report, report_path, SUMMARY_BUDGET)
}

/// The job summary, cut to stay under `budget` bytes (a check run's
/// summary takes 65,535 characters).
pub fn summary_within(report: &Report, report_path: Option<&str>, budget: usize) -> String {
    let s = &report.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## runwarden: {} open undeclared, {} errors\n",
        s.fail, s.error
    );
    if let Some(p) = report.poisoning() {
        let _ = writeln!(out, "**Poisoning:** {}.\n", text(p));
    }
    let _ = writeln!(
        out,
        "**{}** fail · **{}** error · **{}** authorized · **{}** skipped · **{}** pass (probe {})\n",
        s.fail,
        s.error,
        s.authorized,
        s.skipped,
        s.pass,
        text(&report.probe_id)
    );
    // Findings first when there are any to act on; else the coverage
    // (its first line counts the gaps), then the rest.
    let coverage = super::coverage::markdown(report);
    let failing = s.fail + s.error > 0;
    if !failing {
        out += &coverage;
    } else if let Some(first) = coverage.split_inclusive("\n\n").next() {
        out += first;
    }
    out += &context(report);
    out += &diagram(report);
    out +=
        "| Verdict | Channel | Persistence | Control | Detail |\n| --- | --- | --- | --- | --- |\n";
    let mut rows: Vec<&Finding> = report.findings.iter().collect();
    rows.sort_by_key(|f| f.verdict);
    // (Room kept for the coverage section after the findings.)
    let footer_room = 512
        + if failing {
            coverage.len().min(budget / 4)
        } else {
            0
        };
    for (i, f) in rows.iter().enumerate() {
        let row = summary_row(f);
        if out.len() + row.len() + footer_room > budget {
            let where_ = report_path
                .map(|p| format!(" in {}", text(p)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "\n{} more findings are not shown here; the report{where_} has them all.",
                rows.len() - i
            );
            if failing && out.len() + coverage.len() <= budget {
                out += "\n";
                out += &coverage;
            }
            return out;
        }
        out += &row;
    }
    if failing && out.len() + coverage.len() + 512 <= budget {
        out += "\n";
        out += &coverage;
    }
    out + &cleanup_footer(report)
}

/// A mermaid diagram of the open channels (run A -> surface -> run B),
/// or nothing when none is open.
fn diagram(report: &Report) -> String {
    let open: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| matches!(f.verdict, Verdict::Fail | Verdict::Authorized))
        .collect();
    let mut out = String::new();
    if open.is_empty() {
        return out;
    }
    // Surface names are validated ([a-z0-9-]) and carriers are
    // kebab-case constants: nothing here comes from a surface.
    out += "```mermaid\nflowchart LR\n  A([run A])\n  B([run B])\n";
    let mut surfaces: Vec<&str> = open.iter().map(|f| f.surface.as_str()).collect();
    surfaces.dedup();
    for (i, name) in surfaces.iter().enumerate() {
        let carriers: Vec<String> = open
            .iter()
            .filter(|f| f.surface == *name)
            .map(|f| {
                if f.verdict == Verdict::Authorized {
                    format!("{} declared", f.carrier)
                } else {
                    f.carrier.clone()
                }
            })
            .collect();
        let mut unique = carriers.clone();
        unique.sort();
        unique.dedup();
        let _ = writeln!(out, "  S{i}[({})]", mermaid_text(name));
        let _ = writeln!(
            out,
            "  A -- \"{}\" --> S{i} --> B",
            mermaid_text(&unique.join(", "))
        );
    }
    out += "```\n\n";
    out
}

/// One finding's row of the summary's table, with a link to its
/// carrier's docs.
fn summary_row(f: &Finding) -> String {
    let side = super::review::side(f);
    format!(
        "| {} | [{}]({}){} | {} | {} | {} |\n",
        f.verdict.as_str().to_uppercase(),
        word(&f.channel),
        docs_link(f),
        cell(&side),
        f.persistence.as_str(),
        cell(
            &serde_json::to_value(f.control)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        ),
        cell(&f.detail_and_reason())
    )
}

/// What cleanup left, refused or kept, when it did.
fn cleanup_footer(report: &Report) -> String {
    let mut out = String::new();
    if !report.cleanup.left.is_empty() {
        let _ = writeln!(
            out,
            "\nCleanup left {} planted entries in place; see the report.",
            report.cleanup.left.len()
        );
    }
    if !report.cleanup.refused.is_empty() {
        let _ = writeln!(
            out,
            "\nCleanup refused {} journal entries that are not runwarden's (left alone); see the report.",
            report.cleanup.refused.len()
        );
    }
    if !report.cleanup.kept.is_empty() {
        let _ = writeln!(
            out,
            "\nCleanup kept {} planted entries nothing can remove (the run's own traces, or accepted with `permanent: true` or `repository-name: true`); see the report.",
            report.cleanup.kept.len()
        );
    }
    out
}

/// What the findings rest on, when it is not a plain probe of a config
/// file: a discovered config, a recover (with or without the plant's
/// receipt, signed or not), and what run B noticed (beacons of other
/// probes, markers that do not verify), at most 10 listed.
fn context(report: &Report) -> String {
    let mut out = String::new();
    if let Some(w) = report.config_warning() {
        let _ = writeln!(out, "**Warning:** {}.\n", text(&w));
    }
    if let Some(t) = super::review::trust_line(report) {
        let _ = writeln!(out, "{t}\n");
    }
    if let Some(d) = &report.config.discovered {
        let _ = writeln!(
            out,
            "No config file: probed the surfaces discovered on this {} runner; {} skipped (see the report's `config.discovered`).\n",
            text(&d.runner),
            d.skipped.len()
        );
    }
    for sf in &report.surfaces {
        let facts: Vec<String> = sf
            .facts
            .iter()
            .map(|(k, v)| format!("{} {}", word(k), text(v)))
            .collect();
        let _ = writeln!(
            out,
            "Surface {} ({}): {}.\n",
            word(&sf.surface),
            word(&sf.surface_type),
            facts.join("; ")
        );
    }
    if let Some(cj) = &report.cross_job {
        let _ = match (&cj.receipt, &cj.plant_origin) {
            (Some(_), Some(origin)) => writeln!(
                out,
                "Recovered the plant made {} by {}{}.\n",
                text(cj.planted_at.as_deref().unwrap_or("?")),
                text(&origin.describe()),
                cj.receipt_via
                    .as_deref()
                    .map(|v| format!(
                        "; its receipt was carried by {}, a declared channel between the jobs",
                        text(v)
                    ))
                    .unwrap_or_default()
            ),
            _ => {
                let line = crate::output::table::no_receipt_line(cj.missing_receipt_allowed);
                let mut chars = line.chars();
                let first = chars.next().map(|c| c.to_ascii_uppercase()).unwrap_or(' ');
                writeln!(out, "{first}{}.\n", chars.as_str())
            }
        };
        if report.key == crate::report::KeyKind::DerivedDefault {
            out += "No key was configured (`RUNWARDEN_KEY`): anyone who knows the probe id could forge a marker.\n\n";
        }
    }
    if !report.notices.is_empty() {
        let _ = writeln!(
            out,
            "**Noticed by run B** (a valid beacon of another probe counts for runner-persistence; nothing else here counts):\n\n| Kind | Surface | Entry | Detail |\n| --- | --- | --- | --- |"
        );
        for n in report.notices.iter().take(10) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                n.kind.as_str(),
                word(&n.surface),
                cell(&n.entry),
                cell(&n.detail)
            );
        }
        if report.notices.len() > 10 {
            let _ = writeln!(
                out,
                "\n{} more in the report's `notices`.",
                report.notices.len() - 10
            );
        }
        out += "\n";
    }
    out
}

/// Text inside a mermaid label: only characters that cannot end it.
fn mermaid_text(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ' ' | ',' | '_'))
        .collect()
}

/// The step outputs: `report`, `sarif`, `fail-count`, `error-count` and
/// `open-channels` (FAIL and AUTHORIZED channel ids, comma-separated).
pub fn outputs(
    report: &Report,
    report_path: Option<&str>,
    sarif_path: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut open: Vec<String> = report
        .findings
        .iter()
        .filter(|f| matches!(f.verdict, Verdict::Fail | Verdict::Authorized))
        .map(|f| f.channel.clone())
        .collect();
    open.dedup();
    vec![
        ("report", report_path.unwrap_or("").to_string()),
        ("sarif", sarif_path.unwrap_or("").to_string()),
        ("fail-count", report.summary.fail.to_string()),
        ("error-count", report.summary.error.to_string()),
        ("open-channels", open.join(",")),
    ]
}

/// Renders outputs for `$GITHUB_OUTPUT` with a heredoc delimiter; a value
/// that contains the delimiter is refused, `Invalid` (it could end the
/// value early and set other outputs).
pub fn output_file(outputs: &[(&str, String)], delimiter: &str) -> Result<String, Fault> {
    let mut out = String::new();
    for (name, value) in outputs {
        if value.contains(delimiter) {
            return Err(Fault::invalid(format!(
                "output {name} contains the delimiter; refused"
            )));
        }
        let _ = write!(out, "{name}<<{delimiter}\n{value}\n{delimiter}\n");
    }
    Ok(out)
}

/// A place in a file: (path, line, column), 1-based.
pub type At = (String, u64, u64);

/// Why runwarden did not run (exit 2), for GitHub: one `::error` per
/// line, at its `file:line:column` when it has one (a config error), and
/// a job summary that says the run did not happen. `lines`: (where, what).
pub fn not_run(lines: &[(Option<At>, String)]) -> (String, String) {
    let mut commands = String::new();
    for (at, what) in lines.iter().take(PER_KIND) {
        let props = match at {
            Some((file, line, col)) => format!(
                " file={},line={line},col={col},title=runwarden could not run",
                property(file)
            ),
            None => " title=runwarden could not run".into(),
        };
        let _ = writeln!(commands, "::error{props}::{}", data(what));
    }
    let mut summary = String::from(
        "## runwarden did not run\n\nNothing was probed: runwarden stopped before any work (exit 2).\n\n",
    );
    for (_, what) in lines.iter().take(50) {
        let _ = writeln!(summary, "- {}", text(&escape::clip(what, 2_000)));
    }
    (commands, summary)
}
