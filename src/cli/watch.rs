//! `runwarden watch -- COMMAND`: runs one command between two snapshots of
//! every configured surface, with canary credentials armed, and reports
//! what it did.
//!
//! Exit codes: 3 a canary was read; 1 a FAIL or ERROR (or a canary left
//! behind); otherwise the command's own status (128+N when signal N ended
//! it), so that wrapping a step never turns a failed step green; 2 could
//! not run (bad config, or the command could not be started).

use super::*;
use crate::watch::canary::{self, Detector, Kind, Spec};
use crate::watch::run::{self, Ended};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// Config file (found as `probe` finds it).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Where to keep the snapshots (default: system temp).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// One more canary, KIND:PATH (KIND: aws-credentials, npmrc, dotenv);
    /// repeatable. A path that exists is never replaced.
    #[arg(long, value_name = "KIND:PATH", value_parser = parse_canary)]
    pub canary: Vec<(Kind, PathBuf)>,
    /// Place no canary at the default paths (~/.aws/credentials,
    /// ~/.npmrc, .env in the workspace); `--canary` ones still are.
    #[arg(long)]
    pub no_default_canaries: bool,
    /// How to see canary reads (default: the best this process may use:
    /// fanotify, else inotify, else atime).
    #[arg(long, value_enum)]
    pub detector: Option<DetectorArg>,
    /// Instead of running a command: take the first snapshots, arm the
    /// canaries (seen by atime, the one detector that outlives this
    /// process), save the watch and print its directory, for `--finish`
    /// at the end of the job (another CI system's before and after
    /// scripts).
    #[arg(long, conflicts_with_all = ["finish", "command"])]
    pub start: bool,
    /// Finish the watch `--start` saved in DIR: collect the canaries'
    /// reads, remove them, take the second snapshots and report.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub finish: Option<PathBuf>,
    /// The command and its arguments (no shell).
    #[arg(last = true, required_unless_present_any = ["start", "finish"], value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DetectorArg {
    Fanotify,
    Inotify,
    Atime,
}

pub(super) fn parse_canary(s: &str) -> Result<(Kind, PathBuf), String> {
    let (kind, path) = s
        .split_once(':')
        .ok_or("expected KIND:PATH, e.g. dotenv:./app/.env")?;
    let kind = Kind::from_name(kind).ok_or_else(|| {
        format!("unknown canary kind `{kind}` (aws-credentials, npmrc or dotenv)")
    })?;
    if path.is_empty() {
        return Err("the canary's path is empty".into());
    }
    Ok((kind, PathBuf::from(path)))
}

/// The canaries of a watch: the defaults (unless turned off) and the
/// `--canary` ones, relative paths taken from the current directory.
pub(super) fn canary_specs(extra: &[(Kind, PathBuf)], defaults: bool) -> Vec<Spec> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let mut specs = Vec::new();
    if defaults {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
        let workspace = std::env::var_os("GITHUB_WORKSPACE")
            .filter(|w| !w.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| cwd.clone());
        match home {
            Some(h) => specs.extend(canary::default_specs(Path::new(&h), &workspace)),
            None => specs.extend(
                canary::default_specs(&workspace, &workspace)
                    .into_iter()
                    .filter(|s| s.kind == Kind::DotEnv),
            ),
        }
    }
    for (kind, path) in extra {
        specs.push(Spec {
            path: cwd.join(path),
            kind: *kind,
        });
    }
    specs
}

pub(super) fn watch(args: WatchArgs, gh: &GithubOptions) -> Result<i32, Failure> {
    if args.out.format == Format::Github {
        mask_secrets();
    }
    let plan = load_plan(&find_config(args.config.as_deref()), !args.start)?;
    let mut opts = run::Options {
        work_dir: args.work_dir.clone(),
        canaries: canary_specs(&args.canary, !args.no_default_canaries),
        detector: args.detector.map(|d| match d {
            DetectorArg::Fanotify => Detector::Fanotify,
            DetectorArg::Inotify => Detector::Inotify,
            DetectorArg::Atime => Detector::Atime,
        }),
    };
    if args.start {
        if opts.detector.is_some_and(|d| d != Detector::Atime) {
            return Err(Failure::Other(
                "--start watches the canaries by atime: fanotify and inotify end with the process"
                    .into(),
            ));
        }
        opts.detector = Some(Detector::Atime);
        let dir = start_saved(&plan, &opts)?;
        print_stdout(&format!("{}\n", escape::bytes(dir.as_os_str().as_bytes())))?;
        return Ok(0);
    }
    if let Some(dir) = &args.finish {
        let outs = args.out.open()?;
        return finish_saved(&plan, dir, args.out.label.clone(), outs, gh);
    }
    let outs = args.out.open()?;
    crate::signals::install();
    let w = run::start(&plan, &opts).map_err(Failure::Other)?;
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut child = std::process::Command::new(&args.command[0]);
    child.args(&args.command[1..]);
    let mut ended = Ended {
        command,
        ..Ended::default()
    };
    let spawned = child.spawn().map(|c| wait(c, &mut ended));
    let mut report = w.finish(ended.clone());
    report.label = args.out.label.clone();
    if let Err(e) = spawned {
        return Err(Failure::Other(format!(
            "cannot run {}: {e}",
            escape::bytes(args.command[0].as_encoded_bytes())
        )));
    }
    let code = write_outputs(&report, outs, gh)?;
    Ok(match (code, ended.exit_code, &ended.signal) {
        (0, Some(c), _) => c,
        (0, None, Some(_)) => 128 + ended.signal_number.unwrap_or(0),
        (code, _, _) => code,
    })
}

/// Starts a watch another process finishes ([`finish_saved`]); its
/// directory.
pub(super) fn start_saved(plan: &Plan, opts: &run::Options) -> Result<PathBuf, Failure> {
    let w = run::start(plan, opts).map_err(Failure::Other)?;
    let placed = opts.canaries.len();
    let dir = w.save().map_err(Failure::Other)?;
    note(&format!(
        "watching {} surfaces from now on ({placed} canaries asked for); finish with `runwarden watch --finish {}`",
        plan.surfaces.len(),
        escape::bytes(dir.as_os_str().as_bytes())
    ));
    Ok(dir)
}

/// Finishes a watch [`start_saved`] saved in `dir` and reports it.
pub(super) fn finish_saved(
    plan: &Plan,
    dir: &Path,
    label: Option<String>,
    outs: Outputs<'_>,
    gh: &GithubOptions,
) -> Result<i32, Failure> {
    let w = run::resume(plan, dir).map_err(Failure::Other)?;
    let mut report = w.finish(Ended::default());
    report.label = label;
    write_outputs(&report, outs, gh)
}

/// Waits for the command; a SIGINT, SIGTERM or SIGHUP runwarden receives
/// meanwhile is passed on to it (once), and the watch still reports.
fn wait(mut c: std::process::Child, ended: &mut Ended) {
    use std::os::unix::process::ExitStatusExt;
    let mut forwarded = false;
    let status = loop {
        match c.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(_) => break c.wait().ok(),
        }
        if !forwarded && let Some(sig) = crate::signals::received_number() {
            forwarded = true;
            unsafe { libc::kill(c.id() as i32, sig) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(st) = status {
        ended.exit_code = st.code();
        ended.signal = st.signal().map(signal_name);
        ended.signal_number = st.signal();
    }
}

fn signal_name(n: i32) -> String {
    let name = match n {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {n}"),
    };
    name.into()
}
