//! The command line: parse, find the config, run, and say which exit code.
//!
//! Exit codes: 0 no open undeclared channel and no error; 1 at least one
//! FAIL or ERROR (or a planted entry cleanup had to leave; for `publish`,
//! a part that broke); 2 could not run (bad arguments, bad config, report
//! not writable); for `watch`, 3 a canary was read, else the command's own
//! status when nothing failed (src/cli/watch.rs).

mod action;
mod check;
mod commands;
mod config_file;
mod drill;
use config_file::find_config;
mod man;
mod outputs;
pub use outputs::not_run;
mod publish;
mod rendezvous;
mod watch;

pub use action::GithubOptions;
use action::{action, secret_env};
use commands::{cleanup, merge, plant, probe, recover};
use outputs::{Pending, print_stdout};
use publish::{PublishArgs, publish_command};
use rendezvous::{RendezvousArgs, rendezvous};
use watch::{WatchArgs, watch};

use crate::escape;
use crate::marker::Key;
use crate::output::{self, Format};
use crate::plan::{self, ConfigSource, Discovered, Plan};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(
    name = "runwarden",
    version,
    about = "Proves which channels between isolated CI runs are open"
)]
pub struct Cli {
    /// Print nothing but errors: the exit code says the rest (reports
    /// and SARIF are still written where asked).
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// In GitHub Actions, take the config from the work tree as it is now,
    /// not as committed at GITHUB_WORKFLOW_SHA (an earlier step of the job
    /// could have written it: every output says it was taken so).
    #[arg(long, global = true)]
    pub config_from_worktree: bool,
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
    /// Merge reports (one per runner label) into one table, channel by
    /// label (plain columns, or Markdown with --format markdown|github);
    /// exit 1 when any report would (FAIL, ERROR, leftovers).
    Merge {
        /// Report files, or directories searched (two levels deep) for
        /// `*.json` reports.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// `table`: plain columns; `markdown`: the Markdown table; `github`:
        /// the Markdown table, also appended to the job summary.
        #[arg(long, value_enum, default_value_t = MergeFormat::Table)]
        format: MergeFormat,
    },
    /// Publish a report where reviewers look: a check run with every FAIL
    /// and ERROR annotated, a sticky pull request comment, the SARIF
    /// upload to code scanning (exit 1 when a part broke; a refusal by
    /// GitHub is a notice).
    Publish(PublishArgs),
    /// Run a command between two snapshots of every configured surface,
    /// with canary credentials armed; report what it wrote (FAIL unless
    /// declared) and any canary read (exit 3).
    Watch(WatchArgs),
    /// Serve as the rendezvous `network-egress` surfaces deliver nonces to
    /// (outside the runners' network), until SIGINT or SIGTERM.
    Rendezvous(RendezvousArgs),
    /// Validate a config and exit (0 valid, 2 invalid).
    CheckConfig {
        /// The config file; default: found as `probe` finds it.
        file: Option<PathBuf>,
    },
    /// List every surface type and carrier.
    Carriers {
        #[arg(long, value_enum, default_value_t = CatalogFormat::Table)]
        format: CatalogFormat,
        /// Why hidden: this command prints what it was asked for, so the
        /// global `--quiet` has nothing to leave out here; defining it hides
        /// it from this command's help (clap propagates a global only where
        /// the id is not defined) while still accepting it.
        #[arg(short, long, hide = true)]
        quiet: bool,
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
    /// Print shell completions for bash, zsh, fish, powershell or elvish.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
        /// Why hidden: this command prints what it was asked for, so the
        /// global `--quiet` has nothing to leave out here; defining it hides
        /// it from this command's help (clap propagates a global only where
        /// the id is not defined) while still accepting it.
        #[arg(short, long, hide = true)]
        quiet: bool,
    },
    /// Print a man page (roff), generated from this command line: the
    /// top page, or COMMAND's page (runwarden-COMMAND); with --dir, write
    /// every page there.
    Man {
        /// The command whose page to print (`probe`, `watch`, …).
        command: Option<String>,
        /// Write every page (runwarden.1, runwarden-probe.1, …) into DIR
        /// and print their paths.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
        /// Why hidden: this command prints what it was asked for, so the
        /// global `--quiet` has nothing to leave out here; defining it hides
        /// it from this command's help (clap propagates a global only where
        /// the id is not defined) while still accepting it.
        #[arg(short, long, hide = true)]
        quiet: bool,
    },
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
    /// Every channel in the table, on a terminal too (`--format
    /// table-wide`).
    #[arg(short, long)]
    pub verbose: bool,
    /// Write what `--format` prints to this file (atomically) instead of
    /// stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// A name for where this ran (e.g. the runner label), kept in the
    /// report and used by `merge`.
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
    /// Fail the run (exit 1) when an exposure of this environment is not
    /// tested and not declared (docs/coverage.md). Off by default: a
    /// first run should show its gaps, not fail on them.
    #[arg(long)]
    pub require_coverage: bool,
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
    /// The poisoning drill NAME (docs/recipes/poisoning-drill.md): the
    /// probe id is drill-NAME-<planting run's id>. `plant` plants as this
    /// run; `recover` finds the planting run with `--planted-by`;
    /// `cleanup` takes the probe id recover printed.
    #[arg(long, value_name = "NAME", conflicts_with = "probe_id")]
    pub drill: Option<String>,
    /// With `--drill`, in `recover`: the workflow file whose newest
    /// completed run planted (its runs are listed through the API with
    /// this job's token, `actions: read`); without `--receipt`, `recover`
    /// reads that run's artifact runwarden-receipt-NAME through the API.
    /// (`cleanup` takes the probe id recover printed instead.)
    #[arg(long, value_name = "WORKFLOW", requires = "drill")]
    pub planted_by: Option<String>,
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
    /// Plant only the signed runner-persistence beacons (of filesystem
    /// and docker-daemon surfaces), to be left for later jobs to find.
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
    /// How to print what cleanup did: `table` (what was removed, already
    /// gone or left), `json` (the report), `github` (the table plus
    /// annotations, summary and outputs in Actions).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Write what `--format` prints to this file (atomically) instead of
    /// stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What `merge` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MergeFormat {
    /// Plain columns, channel by label, for a terminal.
    Table,
    /// The merged Markdown table, channel by label.
    Markdown,
    /// The same table, also appended to the job summary.
    Github,
}

/// `--run-b-as`: `Invalid` unless UID[:GID], both numeric.
fn parse_uid_gid(s: &str) -> Result<(u32, u32), crate::fault::Fault> {
    let (u, g) = s.split_once(':').unwrap_or((s, s));
    let p = |x: &str| {
        x.parse::<u32>()
            .map_err(|_| crate::fault::Fault::invalid(format!("`{x}` is not a numeric id")))
    };
    Ok((p(u)?, p(g)?))
}

/// Where a report goes: its files (opened before the work) and stdout.
struct Outputs<'a> {
    report: Option<(&'a Path, Pending)>,
    sarif: Option<(&'a Path, Pending)>,
    format: Format,
    /// `--output`: what `format` prints goes to this file instead of
    /// stdout.
    output: Option<(&'a Path, Pending)>,
}

/// Why runwarden could not run (exit code 2).
#[derive(Debug)]
pub enum Failure {
    Config(crate::config::ConfigErrors),
    Other(String),
}

impl Failure {
    /// What to print, one line each (every config error on its own line).
    pub fn lines(&self) -> Vec<String> {
        match self {
            Failure::Config(e) => e.0.iter().map(ToString::to_string).collect(),
            Failure::Other(m) => vec![m.clone()],
        }
    }
}

/// Why: whatever its kind, a fault that reaches the command line is one
/// line and exit 2 (could not run).
impl From<crate::fault::Fault> for Failure {
    fn from(f: crate::fault::Fault) -> Failure {
        Failure::Other(f.into_reason())
    }
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
    if QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    error(msg);
}

pub use crate::say::{MAX_LINE, error, log_line};

/// `--quiet`: notes and results are not printed.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this runs in GitHub Actions (`GITHUB_ACTIONS=true`).
pub(crate) fn in_actions() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// Whether `--quiet` was given.
pub(crate) fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Where the config comes from.
pub(super) enum Found {
    File(PathBuf),
    /// Named by $RUNWARDEN_CONFIG: said so when it cannot be read.
    FromEnv(PathBuf),
    Embedded,
}

/// The plan from the config file, or (no file found) from what
/// `runwarden discover` proposes for this environment, announced on stderr.
/// `findings`: the command reports findings (probe, recover), whose
/// report and table say what discovery skipped; otherwise each skip is said
/// here.
fn load_plan(found: &Found, findings: bool) -> Result<Plan, Failure> {
    load_plan_text(found, findings).map(|(plan, _)| plan)
}

/// The config's text as read or discovered, and its source.
fn config_of(found: &Found) -> Result<(String, ConfigSource), Failure> {
    Ok(match found {
        Found::File(p) | Found::FromEnv(p) => {
            config_file::read(p, matches!(found, Found::FromEnv(_)))?
        }
        Found::Embedded => {
            let d = discovered();
            let source = ConfigSource {
                path: None,
                embedded_default: true,
                discovered: Some(Discovered {
                    runner: d.runner_kind().into(),
                    skipped: d.skipped(),
                }),
                pinned: None,
            };
            (crate::discover::render(d), source)
        }
    })
}

/// What discovery makes of this process's environment, once a run: the
/// discovered config and the report's coverage read the same (discovery
/// runs git and connects to sockets; twice would be twice the wait).
pub(super) fn discovered() -> &'static crate::discover::Discovery {
    static DISCOVERED: std::sync::OnceLock<crate::discover::Discovery> = std::sync::OnceLock::new();
    DISCOVERED.get_or_init(|| {
        let env = |k: &str| std::env::var(k).ok();
        crate::discover::discover(&env)
    })
}

/// [`load_plan`], and the config's text (which a saved watch keeps).
fn load_plan_text(found: &Found, findings: bool) -> Result<(Plan, String), Failure> {
    let (text, source) = config_of(found)?;
    let plan = plan::build(&text, source, &config_env).map_err(Failure::Config)?;
    if let Some(d) = &plan.source.discovered {
        let names: Vec<&str> = plan.surfaces.iter().map(|s| s.name.as_str()).collect();
        // Once, here; what discovery skipped and why is in the report (and
        // under the table) of a command with findings, not printed twice.
        note(&format!(
            "no config found ($RUNWARDEN_CONFIG, .github/runwarden.yml, runwarden.yml); using the discovered config ({} runner): {}{}",
            d.runner,
            names.join(", "),
            match (d.skipped.len(), findings) {
                (0, _) => String::new(),
                (n, true) => format!("; {n} skipped (listed with the findings)"),
                (n, false) => format!("; {n} skipped:"),
            }
        ));
        if !findings {
            for why in &d.skipped {
                note(&format!("  skipped: {why}"));
            }
        }
    }
    Ok((plan, text))
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<i32, Failure> {
    // Every credential the environment holds is a secret from the start:
    // whatever a surface, git or a server says later is redacted.
    if !matches!(cli.command, Cmd::Run) {
        secret_env().iter().for_each(|s| crate::redact::add(s));
    }
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    if cli.config_from_worktree {
        config_file::set_config_from_worktree();
    }
    match cli.command {
        Cmd::Run => Ok(crate::child::run()),
        Cmd::Completions { shell, .. } => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "runwarden", &mut out);
            print_stdout(&String::from_utf8_lossy(&out))?;
            Ok(0)
        }
        Cmd::Man { command, dir, .. } => man::man(command.as_deref(), dir.as_deref()),
        Cmd::Carriers { format, .. } => {
            let text = match format {
                CatalogFormat::Table => output::carriers::table(match outputs::stdout_fit() {
                    output::table::Fit::Terminal(w) => w,
                    output::table::Fit::Piped => crate::wrap::PROSE,
                }),
                CatalogFormat::Json => output::carriers::json(),
            };
            print_stdout(&text)?;
            Ok(0)
        }
        Cmd::CheckConfig { file } => check::check_config(file.as_deref()),
        Cmd::Probe(args) => probe(args, &GithubOptions::default(), Key::from_env()),
        Cmd::Plant(args) => plant(args, Key::from_env()),
        Cmd::Recover(args) => recover(args, &GithubOptions::default(), Key::from_env()),
        Cmd::Cleanup(args) => cleanup(args, Key::from_env()),
        Cmd::Merge { paths, format } => merge(&paths, format),
        Cmd::Publish(args) => publish_command(args),
        Cmd::Watch(args) => watch(args, &GithubOptions::default()),
        Cmd::Rendezvous(args) => rendezvous(args),
        Cmd::Action => action(),
        Cmd::Discover { write } => {
            let env = |k: &str| std::env::var(k).ok();
            // Paths come from the environment: keep `##[` out of the log.
            let text = escape::json(&crate::discover::render(&crate::discover::discover(&env)));
            match write {
                None => print_stdout(&text)?,
                Some(path) => {
                    use std::fs::OpenOptions;
                    // The directory too (`.github/` of a fresh repository):
                    // the user's own path, named on the command line.
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        std::fs::create_dir_all(dir).map_err(|e| {
                            Failure::Other(format!("cannot make {}: {e}", dir.display()))
                        })?;
                    }
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&path)
                        .and_then(|mut f| f.write_all(text.as_bytes()))
                        .map_err(|e| {
                            Failure::Other(if e.kind() == std::io::ErrorKind::AlreadyExists {
                                format!(
                                    "{} exists: never written over (choose another path, or remove it first)",
                                    path.display()
                                )
                            } else {
                                format!("cannot write {}: {e}", path.display())
                            })
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

/// The environment a config sees. The action's `github-token` input (the
/// job's GITHUB_TOKEN by default) stands in for an unset GITHUB_TOKEN: a
/// node action gets the token only as an input, and the actions-cache
/// surface lists and deletes entries with it.
pub(super) fn config_env(name: &str) -> Option<std::ffi::OsString> {
    let set = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty());
    set(name).or_else(|| {
        (name == "GITHUB_TOKEN")
            .then(|| set("INPUT_GITHUB-TOKEN"))
            .flatten()
    })
}
