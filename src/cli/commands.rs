//! The subcommands that run the engine (`probe`, `plant`, `recover`,
//! `cleanup`) and `merge`, with what they share: probe ids, options, the
//! receipt's default place.

use super::action::{GithubOptions, append_outputs, mask_secrets};
use super::outputs::{Pending, Planting, pending, print_stdout, show_progress, write_outputs};
use super::{
    CleanupArgs, CrossArgs, Failure, Outputs, PlantArgs, ProbeArgs, RecoverArgs, find_config,
    in_actions, load_plan, note,
};
use crate::engine::ProbeOptions;
use crate::marker::Key;
use crate::output::Format;
use crate::receipt::Receipt;
use crate::report::{Mode, Report};
use crate::{engine, escape, marker, output, plan};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) fn probe(args: ProbeArgs, gh: &GithubOptions, key: Key) -> Result<i32, Failure> {
    show_progress(args.out.format, Planting::Both);
    if args.out.format == Format::Github {
        mask_secrets();
    }
    let plan = load_plan(&find_config(args.config.as_deref()), true)?;
    let outs = args.out.open()?;
    crate::signals::install();
    let opts = ProbeOptions {
        work_dir: args.work_dir,
        run_b_as: args.run_b_as,
        phase_timeout: Duration::from_secs(args.timeout),
        key,
        allow_missing_receipt: false,
    };
    let mut report = engine::probe(&plan, &opts).map_err(|e| Failure::Other(e.0))?;
    report.label = args.out.label.clone();
    // (Runs A and B are this job: one trust, and no direction between.)
    let t = crate::trust::this_job(&super::drill::job_env, false);
    report.trust = Some(crate::trust::Trusts {
        a: t.clone(),
        b: t,
        poisoning: None,
    });
    add_coverage(&plan, &mut report, args.out.require_coverage, None);
    write_outputs(&report, outs, gh)
}

/// The report's coverage of this process's environment: after the
/// verdicts, before any output (every output shows it).
fn add_coverage(
    plan: &plan::Plan,
    report: &mut Report,
    required: bool,
    known: Option<crate::coverage::permissions::Known>,
) {
    let env = |k: &str| std::env::var(k).ok();
    let envi = crate::coverage::Environment {
        env: &env,
        discovery: super::discovered(),
        // The plant job's word, in a recover (outside Actions too); else
        // this job's permissions, read through the API.
        known: known.or_else(|| crate::coverage::permissions::read(&env)),
    };
    report.coverage = Some(crate::coverage::assess(plan, report, &envi, required));
}

/// The probe id a cross-job command works on: `--probe-id`, else the one
/// derived from the GitHub Actions run.
pub(super) fn probe_id_of(args: &CrossArgs) -> Result<String, Failure> {
    if let Some((id, _)) = super::drill::drill_of(args)? {
        return Ok(id);
    }
    let env = |k: &str| std::env::var(k).ok();
    let id = match &args.probe_id {
        Some(id) => id.clone(),
        None => marker::default_probe_id(&env).ok_or_else(|| {
            Failure::Other(
                "--probe-id is needed outside GitHub Actions (there it defaults to gh-<run id>-<attempt>)".into(),
            )
        })?,
    };
    marker::check_probe_id(&id)?;
    Ok(id)
}

pub(super) fn cross_options(args: &CrossArgs, key: Key) -> ProbeOptions {
    ProbeOptions {
        work_dir: args.work_dir.clone(),
        run_b_as: None,
        phase_timeout: Duration::from_secs(args.timeout),
        key,
        allow_missing_receipt: false,
    }
}

/// Where `plant` writes its receipt when not told: in GitHub Actions the
/// job's `RUNNER_TEMP` (never the checkout, where it would show up as an
/// untracked file and could be committed), elsewhere the working
/// directory.
pub(super) fn default_receipt(probe_id: &str) -> PathBuf {
    let name = format!("runwarden-receipt-{probe_id}.json");
    match runner_temp() {
        Some(dir) => dir.join(name),
        None => PathBuf::from(name),
    }
}

/// `RUNNER_TEMP` inside GitHub Actions.
fn runner_temp() -> Option<PathBuf> {
    let in_actions = in_actions();
    std::env::var_os("RUNNER_TEMP")
        .filter(|d| in_actions && !d.is_empty())
        .map(PathBuf::from)
}

/// The receipt `recover` and `cleanup` use when not told: the default
/// place, else the working directory (where download-artifact puts one
/// carried over from the plant's job).
pub(super) fn found_receipt(probe_id: &str) -> Option<PathBuf> {
    let name = PathBuf::from(format!("runwarden-receipt-{probe_id}.json"));
    [default_receipt(probe_id), name]
        .into_iter()
        .find(|p| p.is_file())
}

/// Says once, on stderr, what an unkeyed cross-job marker means.
pub(super) fn warn_unkeyed(opts: &ProbeOptions) {
    if !opts.key.is_configured() {
        note(&format!(
            "no ${} set: markers use a key derived from the probe id, so anyone who knows the probe id could forge one",
            marker::KEY_ENV
        ));
    }
}

pub(super) fn plant(args: PlantArgs, key: Key) -> Result<i32, Failure> {
    show_progress(Format::Table, Planting::Carriers);
    if args.cross.planted_by.is_some() {
        return Err(Failure::Other(
            "--planted-by is the recovering job's: `plant --drill` plants as this run".into(),
        ));
    }
    let probe_id = probe_id_of(&args.cross)?;
    let plan = load_plan(&find_config(args.cross.config.as_deref()), false)?;
    let path = args.receipt.unwrap_or_else(|| default_receipt(&probe_id));
    let out = Pending::open(&path)?;
    crate::signals::install();
    let opts = cross_options(&args.cross, key.clone());
    warn_unkeyed(&opts);
    let mut receipt =
        engine::plant(&plan, &opts, &probe_id, args.beacon).map_err(|e| Failure::Other(e.0))?;
    // The job's permissions, for the recovering job's coverage: run A
    // wrote with this job's token.
    let env = |k: &str| std::env::var(k).ok();
    if let Some(k) = crate::coverage::permissions::read(&env) {
        receipt.permissions = k.listed();
        receipt.permissions_source = k.source;
    }
    // Its trust, as this job's environment says it: a claim the
    // recovering job checks against the API where it can.
    receipt.trust = Some(crate::trust::this_job(&super::drill::job_env, false));
    receipt = receipt.signed(&key);
    if !super::quiet() {
        print_stdout(&output::table::render_receipt(
            &receipt,
            super::outputs::stdout_fit(),
        ))?;
    }
    // Written even when run A was cut short: it lists everything A
    // reported creating, which is what cleanup needs.
    out.write(&(serde_json::to_string_pretty(&receipt).expect("receipt serializes") + "\n"))?;
    note(&format!(
        "wrote the receipt {}; recover with `runwarden recover --probe-id {probe_id} --receipt FILE` in a later job (the receipt copied there, e.g. as an artifact: say how with --receipt-via)",
        path.display()
    ));
    // What this plant left out, said: the beacons are planted on their
    // own (`--beacon`), for a later job's probe to find.
    let beacons = plan.surfaces.iter().any(|s| {
        crate::surface::by_name(s.type_name).is_some_and(|t| {
            t.carriers()
                .iter()
                .any(|c| c.name == crate::surface::RUNNER_PERSISTENCE)
        })
    });
    if beacons && !args.beacon {
        note(
            "runner-persistence was not planted: `runwarden plant --beacon` plants its beacons alone, for a later job's probe to find",
        );
    }
    append_outputs(&[
        ("probe-id", probe_id.clone()),
        ("receipt", path.to_string_lossy().into_owned()),
    ])?;
    Ok(if receipt.complete && receipt.failures() == 0 {
        0
    } else {
        1
    })
}

pub(super) fn recover(args: RecoverArgs, gh: &GithubOptions, key: Key) -> Result<i32, Failure> {
    show_progress(args.out.format, Planting::Controls);
    if args.out.format == Format::Github {
        mask_secrets();
    }
    // The drill's receipt is an untrusted run's upload: without a key
    // anyone who knows the probe id forges it.
    if args.cross.drill.is_some() && args.cross.planted_by.is_some() && !key.is_configured() {
        return Err(Failure::Other(format!(
            "--drill with --planted-by reads a receipt an untrusted run uploaded: set ${} in both workflows (the action's `key` input), or anyone who knows the probe id could forge it",
            marker::KEY_ENV
        )));
    }
    let drill = super::drill::drill_of(&args.cross)?;
    let probe_id = match &drill {
        Some((id, _)) => id.clone(),
        None => probe_id_of(&args.cross)?,
    };
    let plan = load_plan(&find_config(args.cross.config.as_deref()), true)?;
    // A drill's receipt: the planting run's artifact, read through the
    // API into a private file (kept until the report is written).
    let (receipt_path, receipt_via, _fetched) = match &drill {
        Some((_, run)) if args.receipt.is_none() && args.cross.planted_by.is_some() => {
            let (path, via, dir) = super::drill::receipt(&args.cross, run, &probe_id)?;
            (
                Some(path),
                args.receipt_via.clone().or(Some(via)),
                Some(dir),
            )
        }
        _ => (
            args.receipt.clone().or_else(|| found_receipt(&probe_id)),
            args.receipt_via.clone(),
            None,
        ),
    };
    let receipt = receipt_path
        .as_deref()
        .map(|p| Receipt::read(p, Some(&probe_id), &key))
        .transpose()?;
    if receipt.is_none() {
        note(if args.allow_missing_receipt {
            "no plant receipt found (accepted with --allow-missing-receipt): looking for the markers derived from the probe id and key; a carrier where none is found is SKIPPED"
        } else {
            "no plant receipt found: looking for the markers derived from the probe id and key; a carrier where none is found is ERROR (nothing shows a plant happened), unless --allow-missing-receipt"
        });
    }
    // Both runs' trust, before run B reads anything.
    let planting = drill.as_ref().map(|(_, run)| run.as_str());
    let (a, b) = super::drill::trusts(receipt.as_ref(), planting);
    let outs = args.out.open()?;
    crate::signals::install();
    let opts = ProbeOptions {
        allow_missing_receipt: args.allow_missing_receipt,
        ..cross_options(&args.cross, key.clone())
    };
    // The table says it under the findings; stderr only where no table
    // is printed (JSON, or the table written to a file).
    let table_says_it = args.out.format != Format::Json && args.out.output.is_none();
    if !table_says_it {
        warn_unkeyed(&opts);
    }
    let shown = receipt_path.map(|p| p.to_string_lossy().into_owned());
    let mut report = engine::recover(
        &plan,
        &opts,
        &probe_id,
        receipt.as_ref().zip(shown.as_deref()),
    )
    .map_err(|e| Failure::Other(e.0))?;
    report.label = args.out.label.clone();
    if let Some(cj) = report.cross_job.as_mut() {
        cj.receipt_via = receipt_via.filter(|_| receipt.is_some());
    }
    // What run A could write with is the plant job's token, not this
    // job's: from the receipt, when it can be trusted.
    use crate::coverage::permissions::Known;
    let in_actions = std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true");
    let known = match &receipt {
        // Outside Actions, a plant that ran outside a workflow run had no
        // job token: no permission is an exposure (a newcomer's local
        // plant and recover listed thirteen "unknown" ones).
        Some(r) if !in_actions && r.origin.run_id.is_none() => None,
        Some(r) => Some(Known::from_receipt(
            &r.permissions,
            &r.permissions_source,
            key.is_configured(),
        )),
        // Without a receipt nothing says what the plant job could write
        // (this job's token is the reader's): in Actions, unknown.
        None => in_actions.then(|| {
            Known::unknown("no plant receipt: the plant job's permissions are unknown".into())
        }),
    };
    add_coverage(&plan, &mut report, args.out.require_coverage, known);
    let poisoning = crate::trust::direction(&a, &b, report.summary.fail > 0);
    report.trust = Some(crate::trust::Trusts { a, b, poisoning });
    write_outputs(&report, outs, gh)
}

pub(super) fn cleanup(args: CleanupArgs, key: Key) -> Result<i32, Failure> {
    show_progress(args.format, Planting::Both);
    // A drill's cleanup takes the very plant recover read: a listing now
    // could pick a newer drill nobody has recovered yet.
    if args.cross.drill.is_some() {
        return Err(Failure::Other(
            "cleanup takes the probe id recover printed (--probe-id drill-NAME-RUN), not --drill: a newer drill may not be recovered yet".into(),
        ));
    }
    // The receipt must be this probe's: the id given, else (in Actions)
    // this workflow run's own. A receipt of another probe, even a genuine
    // signed one, would clean that probe's plants and leave this one's.
    let env = |k: &str| std::env::var(k).ok();
    let expected = args
        .cross
        .probe_id
        .clone()
        .or_else(|| marker::default_probe_id(&env));
    // A drill's receipt artifact is taken first (checked, then deleted):
    // once cleanup has run, no later recover may read this plant again,
    // where a store cleaned since would read as closed. Its receipt is
    // then what cleanup works from.
    let mut _taken = None;
    let receipt_path = match (&args.receipt, expected.as_deref()) {
        (None, Some(id)) => match super::drill::take_receipt(id, &key)? {
            Some((path, dir)) => {
                _taken = Some(dir);
                Some(path)
            }
            None => None,
        },
        (r, _) => r.clone(),
    };
    let receipt = receipt_path
        .as_deref()
        .map(|p| Receipt::read(p, expected.as_deref(), &key))
        .transpose()?;
    if receipt.as_ref().is_some_and(|r| r.mac.is_none()) {
        note(
            "the receipt is not signed (no RUNWARDEN_KEY): every entry is checked to be runwarden's before anything is removed, but an edited receipt can still leave a plant out",
        );
    }
    let probe_id = match &receipt {
        Some(r) => r.probe_id.clone(),
        None => probe_id_of(&args.cross)?,
    };
    let plan = load_plan(&find_config(args.cross.config.as_deref()), false)?;
    let outs = Outputs {
        report: pending(args.report.as_deref())?,
        sarif: None,
        format: args.format,
        output: pending(args.output.as_deref())?,
    };
    crate::signals::install();
    let opts = cross_options(&args.cross, key.clone());
    let report = engine::cleanup(&plan, &opts, &probe_id, receipt.as_ref())
        .map_err(|e| Failure::Other(e.0))?;
    // Everything is gone: the receipt has nothing left to say, and is
    // removed. Not while it lists anything left or kept (it is the record
    // of where those are) or anything not runwarden's (the evidence that
    // it was edited), and a receipt found rather than given only when
    // every surface it lists was cleaned here (a surface renamed or
    // removed from the config since the plant was not looked at).
    // A found receipt was not what this cleanup worked from: it goes only
    // when what it lists was surely looked at (each surface it lists is in
    // the config with the same type), and something was removed if it
    // lists anything (nothing found for a receipt with entries means a
    // wrong key or a plant elsewhere: it stays the record), and never
    // after a signal.
    let nothing_left = report.cleanup.left.is_empty()
        && report.cleanup.kept.is_empty()
        && report.cleanup.refused.is_empty()
        && crate::signals::received().is_none();
    if nothing_left {
        let covered = |r: &Receipt| {
            let listed = r.surfaces.iter().any(|s| !s.entries.is_empty());
            r.surfaces.iter().all(|s| {
                s.entries.is_empty()
                    || plan
                        .surfaces
                        .iter()
                        .any(|c| c.name == s.name && c.type_name == s.type_name)
            }) && (!listed || report.cleanup.removed > 0)
        };
        let path = args
            .receipt
            .clone()
            .filter(|_| _taken.is_none())
            .or_else(|| {
                found_receipt(&probe_id)
                    .filter(|p| Receipt::read(p, Some(&probe_id), &key).is_ok_and(|r| covered(&r)))
            });
        if let Some(path) = path {
            match std::fs::remove_file(&path) {
                Ok(()) => note(&format!(
                    "removed the receipt {}: nothing it lists is left",
                    path.display()
                )),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => note(&format!(
                    "could not remove the receipt {}: {e}",
                    path.display()
                )),
            }
        }
    }
    write_outputs(&report, outs, &GithubOptions::default())
}

/// Report files under `path`: itself, or `*.json` files in it and its
/// subdirectories (one level: the layout download-artifact makes).
pub(super) fn report_files(path: &Path) -> Result<Vec<PathBuf>, Failure> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let list = |d: &Path| -> Result<Vec<PathBuf>, Failure> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map_err(|e| Failure::Other(format!("cannot list {}: {e}", d.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        v.sort();
        Ok(v)
    };
    let mut out = Vec::new();
    for p in list(path)? {
        let inner = if p.is_dir() { list(&p)? } else { vec![p] };
        out.extend(
            inner
                .into_iter()
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "json")),
        );
    }
    Ok(out)
}

pub(super) fn merge(paths: &[PathBuf], format: super::MergeFormat) -> Result<i32, Failure> {
    let mut reports: Vec<(String, Report)> = Vec::new();
    for p in paths {
        for file in report_files(p)? {
            let r = read_report(&file)?;
            let heading = r
                .label
                .clone()
                .unwrap_or_else(|| file.to_string_lossy().into_owned());
            reports.push((heading, r));
        }
    }
    if reports.is_empty() {
        return Err(Failure::Other("no reports found to merge".into()));
    }
    check_mergeable(&reports)?;
    let columns: Vec<output::fleet::Column<'_>> = reports
        .iter()
        .map(|(heading, report)| output::fleet::Column {
            heading: heading.clone(),
            report,
        })
        .collect();
    let table = output::fleet::render(&columns);
    // Safe to print as it is: every line starts with `|` or `## `, and the
    // cells entity-escape `:`, `#` and `[`, so no workflow command can form
    // (the plain table escapes every cell for one line of a log).
    if format == super::MergeFormat::Table {
        print_stdout(&output::fleet::render_plain(&columns))?;
    } else {
        print_stdout(&table)?;
    }
    if format == super::MergeFormat::Github
        && let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty())
    {
        use std::fs::OpenOptions;
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| f.write_all(table.as_bytes()))
            .map_err(|e| Failure::Other(format!("cannot write $GITHUB_STEP_SUMMARY: {e}")))?;
    }
    // Each report's own exit code: a FAIL, an ERROR or a leftover.
    Ok(reports
        .iter()
        .map(|(_, r)| r.exit_code())
        .max()
        .unwrap_or(0))
}

/// Why: a watch report says what a command did and a probe's what could
/// carry a message; in one table their verdicts would read as the same
/// thing. And a cleanup report has no channels. So merge takes reports of
/// one kind only, and says which file is the odd one.
fn check_mergeable(reports: &[(String, Report)]) -> Result<(), Failure> {
    let kind = |r: &Report| match r.mode {
        Mode::Watch => "a watch report (what a command did)",
        Mode::Probe | Mode::Recover => "a probe report (what could carry a message)",
        Mode::Cleanup => "a cleanup report",
    };
    if let Some((name, _)) = reports.iter().find(|(_, r)| r.mode == Mode::Cleanup) {
        return Err(Failure::Other(format!(
            "{} is a cleanup report: it has no channels to merge",
            escape::line(name)
        )));
    }
    let (first, r0) = &reports[0];
    if let Some((other, r)) = reports.iter().find(|(_, r)| kind(r) != kind(r0)) {
        return Err(Failure::Other(format!(
            "{} is {} and {} is {}: merge each kind on its own",
            escape::line(first),
            kind(r0),
            escape::line(other),
            kind(r)
        )));
    }
    Ok(())
}

/// A report file, read and checked to be a `runwarden-report/1`.
pub(super) fn read_report(file: &Path) -> Result<Report, Failure> {
    // From another job, perhaps: a regular file, not through a symlink,
    // and bounded (a report of the most findings a run makes is a few
    // MiB).
    let text = crate::sys::read_regular(file, 64 << 20)
        .map_err(|e| Failure::Other(format!("cannot read {}: {e}", file.display())))?;
    let mut r: Report = serde_json::from_slice(&text).map_err(|e| {
        Failure::Other(format!("{} is not a runwarden report: {e}", file.display()))
    })?;
    if r.schema != crate::report::SCHEMA {
        return Err(Failure::Other(format!(
            "{}: unsupported report schema `{}`",
            file.display(),
            escape::line(&r.schema)
        )));
    }
    // A report can come from elsewhere (an artifact of another job): its
    // findings must be ones runwarden makes, since their ids go into
    // links and markup, and the counts are the findings', not the file's.
    for f in &r.findings {
        let known = crate::surface::by_name(&f.surface_type)
            .is_some_and(|t| t.carriers().iter().any(|c| c.name == f.carrier))
            || (f.surface_type == crate::report::CANARY_TYPE
                && f.surface == crate::report::CANARY_TYPE
                && crate::watch::canary::Kind::from_name(&f.carrier).is_some());
        if !known
            || !plan::is_valid_name(&f.surface)
            || f.channel != format!("{}:{}", f.surface, f.carrier)
        {
            return Err(Failure::Other(format!(
                "{}: finding {} is not one runwarden makes (an unknown surface type or \
                 carrier, or a malformed channel id)",
                file.display(),
                escape::line(&f.channel)
            )));
        }
    }
    r.summary = crate::report::Summary::of(&r.findings);
    Ok(r)
}
