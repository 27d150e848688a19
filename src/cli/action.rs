//! `runwarden action` (what the GitHub Action runs): its inputs, the
//! secrets masked before anything is printed, the job summary and step
//! outputs.

use super::commands::{cleanup, merge, plant, probe, recover};
use super::publish::{Parts, publish_after_action, publish_report};
use super::watch::{canary_specs, finish_saved, parse_canary, start_saved};
use super::{
    CleanupArgs, CrossArgs, Failure, OutputArgs, PlantArgs, ProbeArgs, RecoverArgs, find_config,
};
use crate::marker::Key;
use crate::output::Format;
use crate::{escape, marker, output};
use std::io::Write;
use std::path::{Path, PathBuf};

pub(super) fn secret_env() -> Vec<String> {
    let secretive = |k: &str| {
        let k = k.to_ascii_uppercase();
        [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "PRIVATE_KEY",
            "API_KEY",
        ]
        .iter()
        .any(|w| k.contains(w))
    };
    // The marker key: $RUNWARDEN_KEY, or the action's `key` input.
    let keys = |k: &str| k == marker::KEY_ENV || k == "INPUT_KEY";
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, v)| (secretive(k) || keys(k)) && v.len() >= 4)
        .map(|(_, v)| v)
        .collect()
}

/// Appends the job summary to `$GITHUB_STEP_SUMMARY` and the outputs to
/// `$GITHUB_OUTPUT`, when the runner provides them.
pub(super) fn github_files(
    report: &crate::report::Report,
    report_path: Option<&str>,
    sarif_path: Option<&str>,
    summary: bool,
) -> Result<(), Failure> {
    use std::fs::OpenOptions;
    let append = |var: &str, body: &str| -> Result<(), Failure> {
        let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) else {
            return Ok(());
        };
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .and_then(|mut f| f.write_all(body.as_bytes()))
            .map_err(|e| Failure::Other(format!("cannot write ${var}: {e}")))
    };
    if summary {
        append(
            "GITHUB_STEP_SUMMARY",
            &output::github::summary(report, report_path),
        )?;
    }
    let mut outputs = output::github::outputs(report, report_path, sarif_path);
    outputs.push(("probe-id", report.probe_id.clone()));
    append_outputs(&outputs)
}

/// Appends step outputs to `$GITHUB_OUTPUT` (when the runner provides it)
/// with a random heredoc delimiter.
pub(super) fn append_outputs(outputs: &[(&str, String)]) -> Result<(), Failure> {
    use std::fs::OpenOptions;
    let Some(path) = std::env::var_os("GITHUB_OUTPUT").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let delimiter = format!(
        "runwarden_{}",
        crate::nonce::Nonce::generate()
            .map_err(|e| Failure::Other(e.to_string()))?
            .hex()
    );
    let body = output::github::output_file(outputs, &delimiter)?;
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .and_then(|mut f| f.write_all(body.as_bytes()))
        .map_err(|e| Failure::Other(format!("cannot write $GITHUB_OUTPUT: {e}")))
}

/// What `--format github` writes besides the table (the action's
/// `annotations` and `summary` inputs).
pub struct GithubOptions {
    pub annotations: bool,
    pub summary: bool,
}

impl Default for GithubOptions {
    fn default() -> Self {
        GithubOptions {
            annotations: true,
            summary: true,
        }
    }
}

/// One action input, as the runner passes it: `INPUT_` + the name upper
/// cased, spaces to `_`, hyphens kept.
pub(super) fn input(name: &str) -> Option<String> {
    let var = format!("INPUT_{}", name.to_uppercase().replace(' ', "_"));
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

pub(super) fn bool_input(name: &str, default: bool) -> Result<bool, Failure> {
    match input(name).as_deref() {
        None => Ok(default),
        Some("true" | "True" | "TRUE") => Ok(true),
        Some("false" | "False" | "FALSE") => Ok(false),
        Some(other) => Err(Failure::Other(format!(
            "input `{name}` must be true or false, not `{other}`"
        ))),
    }
}

/// `runwarden action`: the GitHub Action's entry point. `mode` picks the
/// command; the other inputs map onto its flags.
pub(super) fn action() -> Result<i32, Failure> {
    let fail_on = input("fail-on").unwrap_or_else(|| "undeclared".into());
    if !matches!(fail_on.as_str(), "undeclared" | "never") {
        return Err(Failure::Other(format!(
            "input `fail-on` must be `undeclared` or `never`, not `{fail_on}`"
        )));
    }
    let opts = GithubOptions {
        annotations: bool_input("annotations", true)?,
        summary: bool_input("summary", true)?,
    };
    // The config as committed, unless taken from the work tree on purpose
    // (`--config-from-worktree`).
    if bool_input("config-from-worktree", false)? {
        super::config_file::set_config_from_worktree();
    }
    // The `key` input (a secret) wins over $RUNWARDEN_KEY; both are masked
    // before anything is printed.
    mask_secrets();
    let inputs = Inputs {
        key: action_key(),
        config: input("config").map(PathBuf::from),
        report: Some(PathBuf::from(
            input("report").unwrap_or_else(|| "runwarden-report.json".into()),
        )),
        sarif: Some(PathBuf::from(
            input("sarif").unwrap_or_else(|| "runwarden.sarif".into()),
        )),
        receipt: input("receipt").map(PathBuf::from),
        require_coverage: bool_input("require-coverage", false)?,
    };
    let mode = input("mode").unwrap_or_else(|| "probe".into());
    let parts = publish_inputs()?;
    let Some(code) = run_mode(&mode, &inputs, &opts, &parts)? else {
        return Ok(0);
    };
    // Publishing follows a report with verdicts. It never changes the
    // probe's exit code, except that a part that broke fails a green step.
    let mut code = code;
    if matches!(mode.as_str(), "probe" | "recover" | "watch")
        && parts.any()
        && let Some(path) = &inputs.report
        && path.is_file()
    {
        let broke = publish_after_action(path, &parts, inputs.key);
        if code == 0 {
            code = broke;
        }
    }
    // `never`: report, annotate and summarise, but let the job go on.
    Ok(if fail_on == "never" { 0 } else { code })
}

/// The inputs the modes share.
struct Inputs {
    key: Key,
    config: Option<PathBuf>,
    /// The report's path (the `report` input has a default).
    report: Option<PathBuf>,
    sarif: Option<PathBuf>,
    receipt: Option<PathBuf>,
    /// `require-coverage`: a gap in coverage fails the run.
    require_coverage: bool,
}

impl Inputs {
    /// Where a mode with verdicts writes them.
    fn out(&self) -> OutputArgs {
        OutputArgs {
            report: self.report.clone(),
            sarif: self.sarif.clone(),
            format: Format::Github,
            verbose: false,
            output: None,
            label: input("label"),
            require_coverage: self.require_coverage,
        }
    }

    /// What the cross-job modes share.
    fn cross(&self) -> CrossArgs {
        CrossArgs {
            config: self.config.clone(),
            probe_id: input("probe-id"),
            drill: input("drill"),
            planted_by: input("planted-by"),
            work_dir: None,
            timeout: 300,
        }
    }
}

/// Runs the command `mode` names, to its exit code; None for the watch
/// step, which only arms the watch.
fn run_mode(
    mode: &str,
    inputs: &Inputs,
    opts: &GithubOptions,
    parts: &Parts,
) -> Result<Option<i32>, Failure> {
    let key = inputs.key.clone();
    let receipt = inputs.receipt.clone();
    Ok(Some(match mode {
        "probe" => probe(
            ProbeArgs {
                config: inputs.config.clone(),
                out: inputs.out(),
                work_dir: None,
                run_b_as: None,
                timeout: 300,
            },
            opts,
            key,
        )?,
        "plant" => plant(
            PlantArgs {
                cross: inputs.cross(),
                receipt,
                beacon: bool_input("beacon", false)?,
            },
            key,
        )?,
        "recover" => recover(
            RecoverArgs {
                cross: inputs.cross(),
                receipt,
                allow_missing_receipt: bool_input("allow-missing-receipt", false)?,
                receipt_via: input("receipt-via"),
                out: inputs.out(),
            },
            opts,
            key,
        )?,
        "cleanup" => cleanup(
            CleanupArgs {
                cross: inputs.cross(),
                receipt,
                report: inputs.report.clone(),
                format: Format::Github,
                output: None,
            },
            key,
        )?,
        "merge" => {
            let paths: Vec<PathBuf> = input("reports")
                .ok_or_else(|| Failure::Other("`mode: merge` needs the `reports` input".into()))?
                .split_whitespace()
                .map(PathBuf::from)
                .collect();
            merge(&paths, super::MergeFormat::Github)?
        }
        // A report made in another job (one with the agent job's own
        // permissions), published from this one.
        // A report made in another job: the step's result is whether it
        // was published.
        "publish" => {
            let path = inputs
                .report
                .clone()
                .expect("the report input has a default");
            publish_report(&path, parts, &Default::default(), key)?
        }
        // The watch step arms the watch and saves it; the action's post
        // step (dist/index.js passes the watch's token on) reports, with
        // the config the watch step read.
        "watch" => match std::env::var_os(WATCH_STATE).filter(|d| !d.is_empty()) {
            None => {
                watch_step(inputs.config.as_deref())?;
                return Ok(None);
            }
            Some(token) => {
                let args = inputs.out();
                let token = token.to_string_lossy();
                finish_saved(&token, args.label.clone(), args.open()?, opts)?
            }
        },
        other => {
            return Err(Failure::Other(format!(
                "input `mode` must be probe, plant, recover, cleanup, merge, publish or watch, not `{other}`"
            )));
        }
    }))
}

/// The token of the watch the watch step saved, for the post step:
/// dist/index.js sets it there (only there) from the step's saved state
/// (`STATE_runwarden_watch`).
const WATCH_STATE: &str = "RUNWARDEN_WATCH_STATE";

/// `mode: watch`, the step: the first snapshots and the canaries (by atime:
/// the one detector that outlives the step), saved under RUNNER_TEMP; the
/// directory goes to `$GITHUB_STATE` for the post step.
fn watch_step(config: Option<&Path>) -> Result<(), Failure> {
    // Checked first: without a place for the token, a watch started here
    // could never be finished.
    let Some(state) = std::env::var_os("GITHUB_STATE").filter(|p| !p.is_empty()) else {
        return Err(Failure::Other(
            "mode: watch needs $GITHUB_STATE (the runner's file for the post step's state)".into(),
        ));
    };
    let extra = input("canaries")
        .unwrap_or_default()
        .split_whitespace()
        .map(|c| parse_canary(c).map_err(|e| Failure::Other(format!("input `canaries`: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = crate::watch::run::Options {
        work_dir: std::env::var_os("RUNNER_TEMP")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
        canaries: canary_specs(&extra, bool_input("default-canaries", true)?),
        detector: Some(crate::watch::canary::Detector::Atime),
    };
    let token = start_saved(&find_config(config), &opts)?;
    // The token goes to the runner, which hands it to the post step: the
    // steps in between cannot change it.
    let line = format!("runwarden_watch={token}\n");
    if line.matches('\n').count() != 1 {
        return Err(Failure::Other(
            "the watch directory's path holds a newline".into(),
        ));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(state)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|e| Failure::Other(format!("cannot write $GITHUB_STATE: {e}")))
}

/// The marker key: the `key` input (a secret) wins over $RUNWARDEN_KEY.
pub(super) fn action_key() -> Key {
    match input("key") {
        Some(k) => Key::new(Some(k.into_bytes())),
        None => Key::from_env(),
    }
}

/// The publish inputs: `check-run`, `pr-comment`, `comment-author`,
/// `upload-sarif`, `sarif-category`.
fn publish_inputs() -> Result<Parts, Failure> {
    use crate::publish::CommentMode;
    let comment = match input("pr-comment").as_deref() {
        None | Some("on-change") => CommentMode::OnChange,
        Some("always") => CommentMode::Always,
        Some("never") => CommentMode::Never,
        Some(other) => {
            return Err(Failure::Other(format!(
                "input `pr-comment` must be always, on-change or never, not `{other}`"
            )));
        }
    };
    Ok(Parts {
        check_run: bool_input("check-run", true)?,
        check_name: None,
        comment,
        comment_author: input("comment-author"),
        upload_sarif: bool_input("upload-sarif", false)?,
        category: input("sarif-category"),
        sarif_wait: 120,
    })
}

/// Before anything else is printed in an Actions log: the runner then
/// hides these values wherever they would appear later.
pub(super) fn mask_secrets() {
    // Once per process: the action masks first, then runs a command that
    // would mask again.
    static ONCE: std::sync::Once = std::sync::Once::new();
    let mut first = false;
    ONCE.call_once(|| first = true);
    if !first {
        return;
    }
    let mut out = std::io::stdout().lock();
    for secret in secret_env() {
        for line in secret.lines().filter(|l| l.len() >= 4) {
            let _ = writeln!(out, "::add-mask::{}", escape::data(line));
        }
    }
}
