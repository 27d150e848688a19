//! The command line: parse, find the config, run, and say which exit code.
//!
//! Exit codes: 0 no open undeclared channel and no error; 1 at least one
//! FAIL or ERROR (or a planted entry cleanup had to leave); 2 could not run
//! (bad arguments, bad config, report not writable).

use crate::config::ConfigError;
use crate::engine::{self, ProbeOptions};
use crate::escape;
use crate::marker::{self, Key};
use crate::output::{self, Format};
use crate::plan::{self, ConfigSource, Discovered, Plan};
use crate::receipt::Receipt;
use crate::report::{Mode, Report};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "runwarden",
    version,
    about = "Proves which channels between isolated CI runs are open"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Plant nonces in run A, recover them in run B, report every channel.
    Probe(ProbeArgs),
    /// Plant markers for a later job's `recover` and write a receipt.
    Plant(PlantArgs),
    /// Recover the markers an earlier job's `plant` left; report every
    /// channel (in a later job, on the same or another runner).
    Recover(RecoverArgs),
    /// Remove exactly what a `plant` created (by receipt, or found by
    /// probe id). Idempotent.
    Cleanup(CleanupArgs),
    /// Merge reports (one per runner label) into one Markdown table,
    /// channel by label; exit 1 when any report would (FAIL, ERROR, leftovers).
    Merge {
        /// Report files, or directories searched (two levels deep) for
        /// `*.json` reports.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// `github` also appends the table to the job summary.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Validate a config and exit (0 valid, 2 invalid).
    CheckConfig {
        /// The config file; default: found as `probe` finds it.
        file: Option<PathBuf>,
    },
    /// List every surface type and carrier.
    Carriers {
        #[arg(long, value_enum, default_value_t = CatalogFormat::Table)]
        format: CatalogFormat,
    },
    /// Inspect this environment and propose a starter config.
    Discover {
        /// Write the config here instead of stdout (never over an existing
        /// file).
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
    },
    /// Run as the GitHub Action: inputs from `INPUT_*` (see docs/action.md).
    Action,
    /// Internal: one run (A or B) of a probe. Reads a request on stdin.
    #[command(name = "__run", hide = true)]
    Run,
}

/// How `carriers` prints the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CatalogFormat {
    Table,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct ProbeArgs {
    /// Config file (else $RUNWARDEN_CONFIG, .github/runwarden.yml,
    /// runwarden.yml, else what `runwarden discover` proposes).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Where to make the probe's private directory (default: system temp).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Run B as another user, UID[:GID] (needs root): can one user on a
    /// shared host read what another left?
    #[arg(long, value_name = "UID[:GID]", value_parser = parse_uid_gid)]
    pub run_b_as: Option<(u32, u32)>,
    /// Seconds each run (A, B) may take before it is killed (ERROR).
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
}

/// Where a report goes (`probe` and `recover`).
#[derive(clap::Args, Debug)]
pub struct OutputArgs {
    /// Write the JSON report here (atomically).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write SARIF 2.1.0 for GitHub code scanning here (atomically).
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// A name for where this ran (e.g. the runner label), kept in the
    /// report and used by `merge`.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
}

/// What `plant`, `recover` and `cleanup` share.
#[derive(clap::Args, Debug)]
pub struct CrossArgs {
    /// Config file (found as `probe` finds it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The probe id shared by plant, recover and cleanup (default in
    /// GitHub Actions: gh-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT). The marker
    /// key comes from $RUNWARDEN_KEY.
    #[arg(long, value_name = "ID")]
    pub probe_id: Option<String>,
    /// Where to make the private work directory (default: system temp).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Seconds each run may take before it is killed.
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
}

#[derive(clap::Args, Debug)]
pub struct PlantArgs {
    #[command(flatten)]
    pub cross: CrossArgs,
    /// Where to write the receipt (default:
    /// runwarden-receipt-<probe id>.json).
    #[arg(long, value_name = "FILE")]
    pub receipt: Option<PathBuf>,
    /// Plant only the signed runner-persistence beacons of filesystem
    /// surfaces, to be left for later jobs to find.
    #[arg(long)]
    pub beacon: bool,
}

#[derive(clap::Args, Debug)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub cross: CrossArgs,
    /// The plant's receipt (default: runwarden-receipt-<probe id>.json if
    /// it exists). Without one, nothing shows a plant happened: markers
    /// derived from the probe id are still looked for (found: FAIL), but
    /// finding nothing is ERROR, not PASS.
    #[arg(long, value_name = "FILE")]
    pub receipt: Option<PathBuf>,
    /// Accept a recover without the plant's receipt on purpose: carriers
    /// where nothing was found are SKIPPED instead of ERROR.
    #[arg(long)]
    pub allow_missing_receipt: bool,
    /// How the receipt reached this job (e.g. "artifact
    /// runwarden-receipt-0"), said in the report: the receipt's own
    /// channel, opened on purpose.
    #[arg(long, value_name = "TEXT")]
    pub receipt_via: Option<String>,
    #[command(flatten)]
    pub out: OutputArgs,
}

#[derive(clap::Args, Debug)]
pub struct CleanupArgs {
    #[command(flatten)]
    pub cross: CrossArgs,
    /// Remove what this receipt lists (its probe id is used).
    #[arg(long, value_name = "FILE")]
    pub receipt: Option<PathBuf>,
    /// Write the JSON report here (atomically).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

fn parse_uid_gid(s: &str) -> Result<(u32, u32), String> {
    let (u, g) = s.split_once(':').unwrap_or((s, s));
    let p = |x: &str| {
        x.parse::<u32>()
            .map_err(|_| format!("`{x}` is not a numeric id"))
    };
    Ok((p(u)?, p(g)?))
}

/// Why runwarden could not run (exit code 2).
#[derive(Debug)]
pub enum Failure {
    Config(ConfigError),
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Config(e) => write!(f, "{e}"),
            Failure::Other(m) => f.write_str(m),
        }
    }
}

/// Prints one line on stderr, escaped: messages can carry config values and
/// surface data.
pub fn note(msg: &str) {
    eprintln!("runwarden: {}", escape::line(&crate::redact::text(msg)));
}

/// Where the config comes from.
enum Found {
    File(PathBuf),
    Embedded,
}

fn find_config(explicit: Option<&Path>) -> Found {
    if let Some(p) = explicit {
        return Found::File(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("RUNWARDEN_CONFIG").filter(|p| !p.is_empty()) {
        return Found::File(PathBuf::from(p));
    }
    for p in [".github/runwarden.yml", "runwarden.yml"] {
        if Path::new(p).is_file() {
            return Found::File(PathBuf::from(p));
        }
    }
    Found::Embedded
}

/// The plan from the config file, or (no file found) from what
/// `runwarden discover` proposes for this environment, announced on stderr.
fn load_plan(found: &Found) -> Result<Plan, Failure> {
    let (text, source) = match found {
        Found::File(p) => (
            std::fs::read_to_string(p)
                .map_err(|e| Failure::Other(format!("cannot read config {}: {e}", p.display())))?,
            ConfigSource {
                path: Some(p.to_string_lossy().into_owned()),
                embedded_default: false,
                discovered: None,
            },
        ),
        Found::Embedded => {
            let env = |k: &str| std::env::var(k).ok();
            let d = crate::discover::discover(&env);
            let source = ConfigSource {
                path: None,
                embedded_default: true,
                discovered: Some(Discovered {
                    runner: d.runner_kind().into(),
                    skipped: d.skipped(),
                }),
            };
            (crate::discover::render(&d), source)
        }
    };
    let plan = plan::build(&text, source, &config_env).map_err(Failure::Config)?;
    if let Some(d) = &plan.source.discovered {
        let names: Vec<&str> = plan.surfaces.iter().map(|s| s.name.as_str()).collect();
        note(&format!(
            "no config found ($RUNWARDEN_CONFIG, .github/runwarden.yml, runwarden.yml); using the discovered config ({} runner): {}",
            d.runner,
            names.join(", ")
        ));
        for s in &d.skipped {
            note(&format!("skipped: {s}"));
        }
    }
    Ok(plan)
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<i32, Failure> {
    // Every credential the environment holds is a secret from the start:
    // whatever a surface, git or a server says later is redacted.
    if !matches!(cli.command, Cmd::Run) {
        secret_env().iter().for_each(|s| crate::redact::add(s));
    }
    match cli.command {
        Cmd::Run => Ok(crate::child::run()),
        Cmd::Carriers { format } => {
            let text = match format {
                CatalogFormat::Table => output::carriers::table(),
                CatalogFormat::Json => output::carriers::json(),
            };
            print_stdout(&text)?;
            Ok(0)
        }
        Cmd::CheckConfig { file } => {
            let found = find_config(file.as_deref());
            let plan = load_plan(&found)?;
            let carriers: usize = plan
                .surfaces
                .iter()
                .filter_map(|s| crate::surface::by_name(s.type_name))
                .map(|t| t.carriers().len())
                .sum();
            let what = match &found {
                Found::File(p) => p.display().to_string(),
                Found::Embedded => "no config file found; the discovered config".into(),
            };
            note(&format!(
                "{what} is valid: {} surfaces, {carriers} channels, {} declared",
                plan.surfaces.len(),
                plan.declared.len()
            ));
            Ok(0)
        }
        Cmd::Probe(args) => probe(args, &GithubOptions::default(), Key::from_env()),
        Cmd::Plant(args) => plant(args, Key::from_env()),
        Cmd::Recover(args) => recover(args, &GithubOptions::default(), Key::from_env()),
        Cmd::Cleanup(args) => cleanup(args, Key::from_env()),
        Cmd::Merge { paths, format } => merge(&paths, format),
        Cmd::Action => action(),
        Cmd::Discover { write } => {
            let env = |k: &str| std::env::var(k).ok();
            // Paths come from the environment: keep `##[` out of the log.
            let text = escape::json(&crate::discover::render(&crate::discover::discover(&env)));
            match write {
                None => print_stdout(&text)?,
                Some(path) => {
                    use std::fs::OpenOptions;
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&path)
                        .and_then(|mut f| f.write_all(text.as_bytes()))
                        .map_err(|e| {
                            Failure::Other(format!("cannot write {}: {e}", path.display()))
                        })?;
                    note(&format!(
                        "wrote {}; check it with `runwarden check-config {}`",
                        path.display(),
                        path.display()
                    ));
                }
            }
            Ok(0)
        }
    }
}

/// Environment variables whose values are credentials: masked in the
/// Actions log before runwarden prints anything else.
/// The environment a config sees. The action's `github-token` input (the
/// job's GITHUB_TOKEN by default) stands in for an unset GITHUB_TOKEN: a
/// node action gets the token only as an input, and the actions-cache
/// surface lists and deletes entries with it.
fn config_env(name: &str) -> Option<std::ffi::OsString> {
    let set = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    set(name).or_else(|| {
        (name == "GITHUB_TOKEN")
            .then(|| set("INPUT_GITHUB-TOKEN"))
            .flatten()
    })
}

fn secret_env() -> Vec<String> {
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
fn github_files(
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
fn append_outputs(outputs: &[(&str, String)]) -> Result<(), Failure> {
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
    let body = output::github::output_file(outputs, &delimiter).map_err(Failure::Other)?;
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
fn input(name: &str) -> Option<String> {
    let var = format!("INPUT_{}", name.to_uppercase().replace(' ', "_"));
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn bool_input(name: &str, default: bool) -> Result<bool, Failure> {
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
fn action() -> Result<i32, Failure> {
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
    // The `key` input (a secret) wins over $RUNWARDEN_KEY; both are masked
    // before anything is printed.
    mask_secrets();
    let key = match input("key") {
        Some(k) => Key::new(Some(k.into_bytes())),
        None => Key::from_env(),
    };
    let config = input("config").map(PathBuf::from);
    let report = Some(PathBuf::from(
        input("report").unwrap_or_else(|| "runwarden-report.json".into()),
    ));
    let sarif = Some(PathBuf::from(
        input("sarif").unwrap_or_else(|| "runwarden.sarif".into()),
    ));
    let out = || OutputArgs {
        report: report.clone(),
        sarif: sarif.clone(),
        format: Format::Github,
        label: input("label"),
    };
    let cross = || CrossArgs {
        config: config.clone(),
        probe_id: input("probe-id"),
        work_dir: None,
        timeout: 300,
    };
    let receipt = input("receipt").map(PathBuf::from);
    let mode = input("mode").unwrap_or_else(|| "probe".into());
    let code = match mode.as_str() {
        "probe" => probe(
            ProbeArgs {
                config: config.clone(),
                out: out(),
                work_dir: None,
                run_b_as: None,
                timeout: 300,
            },
            &opts,
            key,
        )?,
        "plant" => plant(
            PlantArgs {
                cross: cross(),
                receipt,
                beacon: bool_input("beacon", false)?,
            },
            key,
        )?,
        "recover" => recover(
            RecoverArgs {
                cross: cross(),
                receipt,
                allow_missing_receipt: bool_input("allow-missing-receipt", false)?,
                receipt_via: input("receipt-via"),
                out: out(),
            },
            &opts,
            key,
        )?,
        "cleanup" => cleanup(
            CleanupArgs {
                cross: cross(),
                receipt,
                report,
                format: Format::Github,
            },
            key,
        )?,
        "merge" => {
            let paths: Vec<PathBuf> = input("reports")
                .ok_or_else(|| Failure::Other("`mode: merge` needs the `reports` input".into()))?
                .split_whitespace()
                .map(PathBuf::from)
                .collect();
            merge(&paths, Format::Github)?
        }
        other => {
            return Err(Failure::Other(format!(
                "input `mode` must be probe, plant, recover, cleanup or merge, not `{other}`"
            )));
        }
    };
    // `never`: report, annotate and summarise, but let the job go on.
    Ok(if fail_on == "never" { 0 } else { code })
}

fn probe(args: ProbeArgs, gh: &GithubOptions, key: Key) -> Result<i32, Failure> {
    if args.out.format == Format::Github {
        mask_secrets();
    }
    let plan = load_plan(&find_config(args.config.as_deref()))?;
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
    publish(&report, outs, gh)
}

/// An output file's temp file, opened before any work: an unwritable
/// location is "could not run", not a surprise after the probe.
fn pending(path: Option<&Path>) -> Result<Option<(&Path, Pending)>, Failure> {
    path.map(|p| Pending::open(p).map(|o| (p, o))).transpose()
}

impl OutputArgs {
    fn open(&self) -> Result<Outputs<'_>, Failure> {
        Ok(Outputs {
            report: pending(self.report.as_deref())?,
            sarif: pending(self.sarif.as_deref())?,
            format: self.format,
        })
    }
}

/// Where a report goes: its files (opened before the work) and stdout.
struct Outputs<'a> {
    report: Option<(&'a Path, Pending)>,
    sarif: Option<(&'a Path, Pending)>,
    format: Format,
}

/// Prints and writes a finished report; returns its exit code.
fn publish(report: &Report, outs: Outputs<'_>, gh: &GithubOptions) -> Result<i32, Failure> {
    let args = &outs;
    // The results are printed first: a report that cannot be written at the
    // end (a full disk) must not swallow them.
    let report_path = args
        .report
        .as_ref()
        .map(|(p, _)| p.to_string_lossy().into_owned());
    let sarif_path = args
        .sarif
        .as_ref()
        .map(|(p, _)| p.to_string_lossy().into_owned());
    let ctx = output::sarif::Context::from_env(report);
    let text = match args.format {
        Format::Table => output::table::render(report),
        Format::Json => output::json::render(report),
        Format::Github if gh.annotations && report.mode != Mode::Cleanup => {
            output::table::render(report)
                + &output::github::annotations(report, &ctx, report_path.as_deref())
        }
        Format::Github => output::table::render(report),
    };
    print_stdout(&text)?;
    if let Some(sig) = crate::signals::received() {
        note(&format!(
            "interrupted by {sig}; cleanup ran; unfinished carriers are ERROR"
        ));
    }
    let Outputs {
        report: report_out,
        sarif: sarif_out,
        format,
    } = outs;
    if let Some((_, out)) = report_out {
        out.write(&output::json::render(report))?;
    }
    if let Some((_, out)) = sarif_out {
        out.write(&output::sarif::render(report, &ctx))?;
    }
    if format == Format::Github && report.mode != Mode::Cleanup {
        github_files(
            report,
            report_path.as_deref(),
            sarif_path.as_deref(),
            gh.summary,
        )?;
    }
    Ok(report.exit_code())
}

/// The probe id a cross-job command works on: `--probe-id`, else the one
/// derived from the GitHub Actions run.
fn probe_id_of(args: &CrossArgs) -> Result<String, Failure> {
    let env = |k: &str| std::env::var(k).ok();
    let id = match &args.probe_id {
        Some(id) => id.clone(),
        None => marker::default_probe_id(&env).ok_or_else(|| {
            Failure::Other(
                "--probe-id is needed outside GitHub Actions (there it defaults to gh-<run id>-<attempt>)".into(),
            )
        })?,
    };
    marker::check_probe_id(&id).map_err(Failure::Other)?;
    Ok(id)
}

fn cross_options(args: &CrossArgs, key: Key) -> ProbeOptions {
    ProbeOptions {
        work_dir: args.work_dir.clone(),
        run_b_as: None,
        phase_timeout: Duration::from_secs(args.timeout),
        key,
        allow_missing_receipt: false,
    }
}

fn default_receipt(probe_id: &str) -> PathBuf {
    PathBuf::from(format!("runwarden-receipt-{probe_id}.json"))
}

/// Says once, on stderr, what an unkeyed cross-job marker means.
fn warn_unkeyed(opts: &ProbeOptions) {
    if !opts.key.is_configured() {
        note(&format!(
            "no ${} set: markers use a key derived from the probe id, so anyone who knows the probe id could forge one",
            marker::KEY_ENV
        ));
    }
}

fn plant(args: PlantArgs, key: Key) -> Result<i32, Failure> {
    let probe_id = probe_id_of(&args.cross)?;
    let plan = load_plan(&find_config(args.cross.config.as_deref()))?;
    let path = args.receipt.unwrap_or_else(|| default_receipt(&probe_id));
    let out = Pending::open(&path)?;
    crate::signals::install();
    let opts = cross_options(&args.cross, key.clone());
    warn_unkeyed(&opts);
    let receipt =
        engine::plant(&plan, &opts, &probe_id, args.beacon).map_err(|e| Failure::Other(e.0))?;
    print_stdout(&output::table::render_receipt(&receipt))?;
    // Written even when run A was cut short: it lists everything A
    // reported creating, which is what cleanup needs.
    out.write(&(serde_json::to_string_pretty(&receipt).expect("receipt serializes") + "\n"))?;
    note(&format!(
        "wrote the receipt {}; recover with `runwarden recover --probe-id {probe_id}` in a later job",
        path.display()
    ));
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

fn recover(args: RecoverArgs, gh: &GithubOptions, key: Key) -> Result<i32, Failure> {
    if args.out.format == Format::Github {
        mask_secrets();
    }
    let probe_id = probe_id_of(&args.cross)?;
    let plan = load_plan(&find_config(args.cross.config.as_deref()))?;
    let receipt_path = match args.receipt {
        Some(p) => Some(p),
        None => Some(default_receipt(&probe_id)).filter(|p| p.is_file()),
    };
    let receipt = receipt_path
        .as_deref()
        .map(|p| Receipt::read(p, Some(&probe_id)))
        .transpose()
        .map_err(Failure::Other)?;
    if receipt.is_none() {
        note(if args.allow_missing_receipt {
            "no plant receipt found (accepted with --allow-missing-receipt): looking for the markers derived from the probe id and key; a carrier where none is found is SKIPPED"
        } else {
            "no plant receipt found: looking for the markers derived from the probe id and key; a carrier where none is found is ERROR (nothing shows a plant happened), unless --allow-missing-receipt"
        });
    }
    let outs = args.out.open()?;
    crate::signals::install();
    let opts = ProbeOptions {
        allow_missing_receipt: args.allow_missing_receipt,
        ..cross_options(&args.cross, key.clone())
    };
    warn_unkeyed(&opts);
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
        cj.receipt_via = args.receipt_via.filter(|_| receipt.is_some());
    }
    publish(&report, outs, gh)
}

fn cleanup(args: CleanupArgs, key: Key) -> Result<i32, Failure> {
    let receipt = args
        .receipt
        .as_deref()
        .map(|p| Receipt::read(p, args.cross.probe_id.as_deref()))
        .transpose()
        .map_err(Failure::Other)?;
    let probe_id = match &receipt {
        Some(r) => r.probe_id.clone(),
        None => probe_id_of(&args.cross)?,
    };
    let plan = load_plan(&find_config(args.cross.config.as_deref()))?;
    let outs = Outputs {
        report: pending(args.report.as_deref())?,
        sarif: None,
        format: args.format,
    };
    crate::signals::install();
    let opts = cross_options(&args.cross, key.clone());
    let report = engine::cleanup(&plan, &opts, &probe_id, receipt.as_ref())
        .map_err(|e| Failure::Other(e.0))?;
    publish(&report, outs, &GithubOptions::default())
}

/// Report files under `path`: itself, or `*.json` files in it and its
/// subdirectories (one level: the layout download-artifact makes).
fn report_files(path: &Path) -> Result<Vec<PathBuf>, Failure> {
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

fn merge(paths: &[PathBuf], format: Format) -> Result<i32, Failure> {
    let mut reports: Vec<(String, Report)> = Vec::new();
    for p in paths {
        for file in report_files(p)? {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Failure::Other(format!("cannot read {}: {e}", file.display())))?;
            let r: Report = serde_json::from_str(&text).map_err(|e| {
                Failure::Other(format!("{} is not a runwarden report: {e}", file.display()))
            })?;
            if r.schema != crate::report::SCHEMA {
                return Err(Failure::Other(format!(
                    "{}: unsupported report schema `{}`",
                    file.display(),
                    escape::line(&r.schema)
                )));
            }
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
    let columns: Vec<output::fleet::Column<'_>> = reports
        .iter()
        .map(|(heading, report)| output::fleet::Column {
            heading: heading.clone(),
            report,
        })
        .collect();
    let table = output::fleet::render(&columns);
    // Safe to print as it is: every line starts with `|` or `## `, and the
    // cells entity-escape `:`, `#` and `[`, so no workflow command can form.
    print_stdout(&table)?;
    if format == Format::Github
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

/// Before anything else is printed in an Actions log: the runner then
/// hides these values wherever they would appear later.
fn mask_secrets() {
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

/// An output file written atomically: a temporary file in the target's
/// directory, made before the probe starts, renamed over the target at the
/// end.
struct Pending {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl Pending {
    fn open(path: &Path) -> Result<Pending, Failure> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".runwarden-")
            .tempfile_in(&dir)
            .map_err(|e| Failure::Other(format!("{} is not writable: {e}", path.display())))?;
        Ok(Pending {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// No fsync: the rename makes the write atomic for readers, and
    /// durability across a power cut (a journal commit, ~30 ms on ext4) is
    /// not worth it for a CI report.
    fn write(mut self, body: &str) -> Result<(), Failure> {
        let failed = |e: &dyn std::fmt::Display| {
            Failure::Other(format!("cannot write {}: {e}", self.path.display()))
        };
        self.tmp
            .write_all(body.as_bytes())
            .map_err(|e| failed(&e))?;
        self.tmp.persist(&self.path).map_err(|e| failed(&e.error))?;
        Ok(())
    }
}

fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Other(format!("cannot write to stdout: {e}"))),
    }
}
