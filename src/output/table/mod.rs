//! The table printed on stdout: one row per finding, worst first, then the
//! counts, what run B noticed, and anything cleanup had to leave behind.
//! Also the table `plant` prints from its receipt.

mod brief;

pub use brief::render_brief;

use crate::escape;
use crate::receipt::Receipt;
use crate::report::{KeyKind, Mode, Report};
use crate::surface::PlantOutcome;
use crate::wrap;
use std::fmt::Write as _;

/// Where a table is printed, and so how wide its lines may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// A terminal this many columns wide: every line fits it.
    Terminal(usize),
    /// A pipe, a file, a log: rows stay whole (a program or `grep` reads
    /// them), prose wraps at [`wrap::PROSE`].
    Piped,
}

impl Fit {
    fn rows(self) -> Option<usize> {
        match self {
            Fit::Terminal(w) => Some(w),
            Fit::Piped => None,
        }
    }

    fn prose(self) -> usize {
        match self {
            Fit::Terminal(w) => w,
            Fit::Piped => wrap::PROSE,
        }
    }
}

/// Columns padded to their widest cell; the last column is not padded.
/// On a terminal a row too wide wraps its last column under itself.
fn columns<const N: usize>(rows: &[[String; N]], fit: Fit) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // On a terminal too narrow for the columns, cells are not padded: each
    // row is its cells one after another, wrapped.
    let padded: usize = widths.iter().take(N - 1).map(|w| w + 2).sum();
    let pad = fit.rows().is_none_or(|width| padded <= width / 2);
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (w, cell) in widths.iter().zip(r.iter()).take(N - 1) {
            let w = if pad { *w } else { 0 };
            let _ = write!(line, "{cell:<w$}  ");
        }
        let head = line.len();
        line.push_str(&r[N - 1]);
        match fit.rows() {
            Some(width) => {
                // The last column hangs under itself while that leaves it
                // room; else each row wraps whole, under its first column.
                let (keep, hang) = if pad { (head, head) } else { (0, 4) };
                for l in wrap::line(&line, width, keep, hang) {
                    out.push_str(&l);
                    out.push('\n');
                }
            }
            None => {
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

/// What `plant` did, carrier by carrier.
pub fn render_receipt(r: &Receipt, fit: Fit) -> String {
    let mut rows: Vec<[String; 3]> = vec![["PLANT".into(), "CHANNEL".into(), "DETAIL".into()]];
    let (mut lines, mut planted, mut plants) = (0, 0, 0);
    for s in &r.surfaces {
        lines += s.entries.len();
        for p in &s.plants {
            plants += 1;
            planted += usize::from(matches!(p.outcome, PlantOutcome::Planted { .. }));
            let (what, detail) = match &p.outcome {
                PlantOutcome::Planted { detail, .. } => ("planted", detail),
                PlantOutcome::Refused { reason } => ("refused", reason),
                PlantOutcome::Unsupported { reason } => ("unsupported", reason),
                PlantOutcome::Error { reason } => ("failed", reason),
            };
            let channel = match &p.scope {
                Some(sc) => {
                    let side = if sc.inside { "inside" } else { "outside" };
                    format!("{}:{} [{side} {}: {}]", s.name, p.carrier, sc.key, sc.value)
                }
                None => format!("{}:{}", s.name, p.carrier),
            };
            rows.push([
                what.to_uppercase(),
                escape::line(&channel),
                escape::line(detail),
            ]);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nprobe {}: {planted} of {plants} carriers planted ({lines} journal lines for cleanup){}",
        escape::line(&r.probe_id),
        match &r.problem {
            Some(p) => format!("; run A did not finish: {}", escape::line(p)),
            None => String::new(),
        }
    );
    columns(&rows, fit) + &wrap::text(&out, fit.prose())
}

fn render_cleanup(report: &Report) -> String {
    let c = &report.cleanup;
    format!(
        "cleanup of probe {}: {} removed, {} already gone, {} left\n",
        escape::line(&report.probe_id),
        c.deleted,
        c.already_gone,
        c.left.len()
    ) + &if c.kept.is_empty() {
        String::new()
    } else {
        format!(
            "{} kept on purpose (nothing can remove them: the run's own traces, or planted with `permanent: true` or `repository-name: true`)\n",
            c.kept.len()
        )
    }
}

/// What a git remote keeps after cleanup: deleting a ref leaves its
/// objects on the server until its garbage collection (the
/// `unreachable-object` carrier), which no client can hurry.
fn gc_note(report: &Report) -> &'static str {
    // A git-remote surface refs were deleted from (watch deletes nothing;
    // a push that failed deleted nothing).
    let git = |name: &String| {
        report
            .findings
            .iter()
            .any(|f| f.surface == *name && f.surface_type == "git-remote")
            || report
                .surfaces
                .iter()
                .any(|s| s.surface == *name && s.surface_type == "git-remote")
    };
    if report.mode != Mode::Watch && report.cleanup.deleted_on.iter().any(git) {
        "git-remote: the refs are deleted; their objects stay on the server until its garbage collection (see unreachable-object)\n"
    } else {
        ""
    }
}

/// The full table, piped: one row per finding.
pub fn render(report: &Report) -> String {
    render_wide(report, Fit::Piped)
}

/// The full table where `fit` says: one row per finding.
pub fn render_wide(report: &Report, fit: Fit) -> String {
    if report.mode == Mode::Cleanup {
        let text = render_cleanup(report) + gc_note(report) + &leftovers(report);
        return wrap::text(&text, fit.prose());
    }
    // Watch mode has no control: its fourth column is how many changes
    // (or canary reads) were seen.
    let watch = report.mode == Mode::Watch;
    // Who runs A and B ran as, piped too (a terminal's brief table says
    // it under its lines).
    let who = if watch {
        String::new()
    } else {
        format!("{}\n", who_ran(report))
    };
    wrap::text(&lead(report), fit.prose())
        + &columns(&finding_rows(report, watch), fit)
        + &wrap::text(&(who + &trailer(report, true)), fit.prose())
}

/// Both runs' trust, in a recover, right under the counts; and why an
/// open channel from an untrusted run A is not called poisoning when run
/// B was not shown trusted.
fn trust_lines(report: &Report) -> String {
    use crate::trust::Class;
    let mut out = String::new();
    let Some(t) = report
        .trust
        .as_ref()
        .filter(|_| report.mode == Mode::Recover)
    else {
        return out;
    };
    let _ = writeln!(
        out,
        "run A: {}; run B: {}",
        escape::line(&crate::output::review::trust_words(&t.a)),
        escape::line(&crate::output::review::trust_words(&t.b))
    );
    if report.summary.fail > 0 && t.a.class == Class::Untrusted && t.b.class != Class::Trusted {
        let _ = writeln!(
            out,
            "not called poisoning: run B was not shown trusted (a push, schedule or workflow_dispatch run on a branch the API says is protected: give the recovering job `contents: read` and protect its branch)"
        );
    }
    out
}

/// What leads the table, above everything: an open channel from an
/// untrusted run A to a trusted run B ([`Report::poisoning`]).
pub(super) fn lead(report: &Report) -> String {
    match report.poisoning() {
        Some(p) => format!("POISONING: {}\n\n", escape::line(p)),
        None => String::new(),
    }
}

/// Which users runs A and B ran as, and how to test another.
fn who_ran(report: &Report) -> String {
    match (report.runs.a_uid, report.runs.b_uid) {
        (Some(a), Some(b)) if a != b => format!("run A ran as uid {a}, run B as uid {b}"),
        (Some(a), _) => format!(
            "runs A and B both ran as uid {a}: `--run-b-as UID[:GID]` tests what another user can read"
        ),
        (None, Some(b)) if report.mode == Mode::Recover => {
            format!("run A was the plant job; run B ran as uid {b}")
        }
        (None, Some(b)) => format!("run B ran as uid {b}"),
        (None, None) if report.mode == Mode::Recover => {
            "run A was the plant job; run B ran as this process's user".into()
        }
        (None, None) => "runs A and B ran as the same user".into(),
    }
}

/// What both tables end with: the counts, a watch's story, coverage (the
/// gaps; with `wide`, every exposure), the surfaces' provenance and facts,
/// cross-job lines, notices and leftovers.
fn trailer(report: &Report, wide: bool) -> String {
    let watch = report.mode == Mode::Watch;
    let mut out = String::new();
    let s = &report.summary;
    let _ = writeln!(
        out,
        "\n{} fail, {} error, {} authorized, {} skipped, {} pass ({} {})",
        s.fail,
        s.error,
        s.authorized,
        s.skipped,
        s.pass,
        if watch { "watch" } else { "probe" },
        escape::line(&report.probe_id)
    );
    if let Some(w) = &report.watch {
        out.push_str(&watched(report, w));
    }
    out.push_str(&trust_lines(report));
    out.push_str(&super::coverage::table_lines(report, wide));
    out.push_str(&surfaces(report, watch));
    out.push_str(&cross_job(report));
    for n in &report.notices {
        let _ = writeln!(
            out,
            "notice: {}: {}: {} {}",
            escape::line(&n.surface),
            n.kind.as_str(),
            escape::line(&n.entry),
            escape::line(&n.detail)
        );
    }
    out + gc_note(report) + &leftovers(report)
}

/// The table's header and one row per finding, worst first.
fn finding_rows(report: &Report, watch: bool) -> Vec<[String; 5]> {
    let mut rows: Vec<[String; 5]> = vec![[
        "VERDICT".into(),
        "CHANNEL".into(),
        "PERSISTENCE".into(),
        if watch { "SEEN" } else { "CONTROL" }.into(),
        "DETAIL".into(),
    ]];
    let mut findings: Vec<_> = report.findings.iter().collect();
    // Stable sort: config order within each verdict.
    findings.sort_by_key(|f| f.verdict);
    // One surface's errors with the same cause (a path that does not
    // exist, a service that is down) are one row, not one per carrier;
    // the report keeps every finding.
    let mut i = 0;
    while i < findings.len() {
        let f = findings[i];
        let same = findings[i..]
            .iter()
            .take_while(|g| {
                g.verdict == crate::verdict::Verdict::Error
                    && g.surface == f.surface
                    && g.detail == f.detail
                    && g.scope.is_none()
            })
            .count();
        if same > 1 {
            let carriers: Vec<String> = findings[i..i + same]
                .iter()
                .map(|g| g.carrier.clone())
                .collect();
            rows.push([
                "ERROR".into(),
                escape::line(&format!("{}:* ({same} carriers)", f.surface)),
                String::new(),
                String::new(),
                escape::line(&format!(
                    "{} (the carriers: {})",
                    f.detail,
                    super::groups::first(&carriers, 12, |c| c.to_string())
                )),
            ]);
            i += same;
            continue;
        }
        i += 1;
        rows.push(finding_row(f, watch));
    }
    rows
}

/// One finding's row: its channel (with the side of its scope), and in
/// the fourth column its control, or in watch mode how often it was seen.
fn finding_row(f: &crate::report::Finding, watch: bool) -> [String; 5] {
    [
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
        if watch {
            f.observed.len().to_string()
        } else {
            escape::line(
                &serde_json::to_value(f.control)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
            )
        },
        escape::line(&f.detail_and_reason()),
    ]
}

/// Where the surfaces came from (a discovered config, and what discovery
/// skipped), and each surface's facts.
fn surfaces(report: &Report, watch: bool) -> String {
    let mut out = String::new();
    if let Some(w) = report.config_warning() {
        let _ = writeln!(out, "warning: {}", escape::line(&w));
    }
    if let Some(d) = &report.config.discovered {
        let _ = writeln!(
            out,
            "no config file: {} the surfaces discovered on this {} runner (`runwarden discover --write FILE` to keep and edit them)",
            if watch { "watched" } else { "probed" },
            escape::line(&d.runner)
        );
        for s in &d.skipped {
            let _ = writeln!(out, "skipped: {}", escape::line(s));
        }
    }
    for sf in &report.surfaces {
        let facts: Vec<String> = sf.facts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            out,
            "{} ({}): {}",
            escape::line(&sf.surface),
            escape::line(&sf.surface_type),
            escape::line(&facts.join("; "))
        );
    }
    out
}

/// A cross-job recover: whose plant it recovered (or that no receipt
/// shows one), and a warning when no key was configured.
fn cross_job(report: &Report) -> String {
    let mut out = String::new();
    let Some(cj) = &report.cross_job else {
        return out;
    };

    let _ = match &cj.receipt {
        Some(path) => writeln!(
            out,
            "recovered the plant of {} (receipt {}{})",
            escape::line(cj.planted_at.as_deref().unwrap_or("?")),
            escape::line(path),
            cj.receipt_via
                .as_deref()
                .map(|v| format!(
                    ", carried by {}: a declared channel between the jobs",
                    escape::line(v)
                ))
                .unwrap_or_default()
        ),
        None => writeln!(out, "{}", no_receipt_line(cj.missing_receipt_allowed)),
    };
    if report.key == KeyKind::DerivedDefault {
        let _ = writeln!(
            out,
            "no key configured (RUNWARDEN_KEY): anyone who knows the probe id could forge a marker"
        );
    }
    out
}

/// How many of one finding's observations the table lists (the report
/// has them all).
const SHOWN_OBSERVATIONS: usize = 10;

/// Watch mode: what ran, how it ended, the canaries, and what the command
/// did through each carrier that FAILs or is AUTHORIZED.
fn watched(report: &Report, w: &crate::report::Watch) -> String {
    let mut out = String::new();
    let how = match (w.exit_code, &w.signal) {
        (Some(c), _) => format!("exited {c}"),
        (None, Some(s)) => format!("ended by {}", escape::line(s)),
        // The job-wide watch (`watch --finish`) has no command of its own:
        // its steps ended when the finish ran.
        (None, None) if w.scope == "job" => "finished".into(),
        (None, None) => "did not finish".into(),
    };
    let what = if w.scope == "job" {
        "the job's steps".to_string()
    } else {
        format!("`{}`", escape::line(&w.command.join(" ")))
    };
    let _ = writeln!(out, "watched {what}: {how}");
    if !w.survivors.is_empty() {
        let _ = writeln!(
            out,
            "{} processes it started were still running when it ended (not watched since)",
            w.survivors.len()
        );
    }
    let c = &w.canaries;
    if let Some(d) = &c.detector {
        let _ = writeln!(
            out,
            "canaries: {} placed, reads seen with {}{}",
            c.placed.len(),
            escape::line(d),
            if c.skipped.is_empty() {
                String::new()
            } else {
                format!("; {} not placed (something was there)", c.skipped.len())
            }
        );
    }
    let mut heading = false;
    for f in &report.findings {
        if !matches!(
            f.verdict,
            crate::verdict::Verdict::Fail | crate::verdict::Verdict::Authorized
        ) {
            continue;
        }
        if !heading && !f.observed.is_empty() {
            heading = true;
            let _ = writeln!(out, "what it did through each channel it used:");
        }
        for o in f.observed.iter().take(SHOWN_OBSERVATIONS) {
            let _ = writeln!(
                out,
                "  {}: {} {}{}{}",
                escape::line(&f.channel),
                escape::line(&o.entry),
                escape::line(&o.change),
                o.at.as_deref()
                    .map(|a| format!(" at {}", escape::line(a)))
                    .unwrap_or_default(),
                o.pid.map(|p| format!(" by pid {p}")).unwrap_or_default()
            );
        }
        let more = f.observed.len().saturating_sub(SHOWN_OBSERVATIONS) as u64 + f.observed_omitted;
        if more > 0 {
            let _ = writeln!(
                out,
                "  {}: {more} more{}",
                escape::line(&f.channel),
                if f.observed_omitted > 0 {
                    " (the report lists the first 1,000)"
                } else {
                    " (see the report)"
                }
            );
        }
    }
    out
}

fn leftovers(report: &Report) -> String {
    let c = &report.cleanup;
    let mut out = String::new();
    for (list, heading) in [
        (
            &c.kept,
            "kept {} planted entries nothing can remove (the run's own traces, or accepted with `permanent: true` or `repository-name: true`):",
        ),
        (&c.left, "cleanup left {} planted entries in place:"),
        (
            &c.refused,
            "cleanup refused {} journal entries that are not runwarden's (the receipt names what the plant never made; nothing of it was touched):",
        ),
    ] {
        if list.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{}", heading.replace("{}", &list.len().to_string()));
        for l in list {
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

/// What a recover without the plant's receipt means, for people.
pub fn no_receipt_line(allowed: bool) -> &'static str {
    if allowed {
        "no plant receipt (accepted with --allow-missing-receipt): nothing shows a plant happened; where recovery found none of the derived markers the carrier is SKIPPED, and a marker found still FAILs"
    } else {
        "no plant receipt: nothing shows a plant happened, so where recovery found none of the derived markers the carrier is ERROR (a marker found still FAILs); give the receipt with --receipt"
    }
}

/// The table with each row's verdict coloured (ANSI: FAIL and ERROR red,
/// PASS green, AUTHORIZED and SKIPPED yellow). Only the verdict word at the
/// start of a row changes, so columns stay aligned; surface data in the
/// rest of the line is already escaped and is left as it is.
pub fn colour(table: &str) -> String {
    let mut out = String::with_capacity(table.len() + 256);
    for line in table.split_inclusive('\n') {
        let word = line.split(' ').next().unwrap_or("");
        let code = match word {
            "FAIL" | "ERROR" => Some("31"),
            "PASS" => Some("32"),
            "AUTHORIZED" | "SKIPPED" => Some("33"),
            _ => None,
        };
        match code {
            Some(c) => {
                out.push_str(&format!("\x1b[{c}m{word}\x1b[0m"));
                out.push_str(&line[word.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}
