//! `runwarden watch -- COMMAND`: runs one command between two snapshots of
//! every configured surface, with canary credentials armed, and reports
//! what it did.
//!
//! Exit codes: 3 a canary was read; 1 a FAIL or ERROR (or a canary left
//! behind); otherwise the command's own status (128+N when signal N ended
//! it), so that wrapping a step never turns a failed step green; 2 could
//! not run (bad config, or the command could not be started).

use super::action::{GithubOptions, mask_secrets};
use super::outputs::{print_stdout, write_outputs};
use super::{
    Failure, Found, OutputArgs, Outputs, config_env, error, find_config, load_plan, load_plan_text,
    note,
};
use crate::fault::Fault;
use crate::output::Format;
use crate::watch::canary::{self, Detector, Kind, Spec};
use crate::watch::run::{self, Ended};
use crate::{escape, plan};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    pub detector: Option<Detector>,
    /// Instead of running a command: take the first snapshots, arm the
    /// canaries (seen by atime, the one detector that outlives this
    /// process), save the watch and print its token, for `--finish` at
    /// the end of the job (another CI system's before and after scripts).
    #[arg(long, conflicts_with_all = ["finish", "command"])]
    pub start: bool,
    /// Finish the watch `--start` saved (TOKEN: what it printed): collect
    /// the canaries' reads, remove them, take the second snapshots and
    /// report, with the config the watch started with.
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["command", "config"])]
    pub finish: Option<String>,
    /// The command and its arguments (no shell).
    #[arg(last = true, required_unless_present_any = ["start", "finish"], value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `--canary` (and the action's `canaries` input): `Invalid` unless
/// KIND:PATH.
pub(super) fn parse_canary(s: &str) -> Result<(Kind, PathBuf), Fault> {
    let (kind, path) = s
        .split_once(':')
        .ok_or_else(|| Fault::invalid("expected KIND:PATH, e.g. dotenv:./app/.env"))?;
    let kind = Kind::from_name(kind).ok_or_else(|| {
        Fault::invalid(format!(
            "unknown canary kind `{kind}` (aws-credentials, npmrc or dotenv)"
        ))
    })?;
    if path.is_empty() {
        return Err(Fault::invalid("the canary's path is empty"));
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
    if let Some(token) = &args.finish {
        let outs = args.out.open()?;
        return finish_saved(token, args.out.label.clone(), outs, gh);
    }
    let found = find_config(args.config.as_deref());
    refuse_discovered(&found)?;
    let mut opts = run::Options {
        work_dir: args.work_dir.clone(),
        canaries: canary_specs(&args.canary, !args.no_default_canaries),
        detector: args.detector,
    };
    if args.start {
        if opts.detector.is_some_and(|d| d != Detector::Atime) {
            return Err(Failure::Other(
                "--start watches the canaries by atime: fanotify and inotify end with the process"
                    .into(),
            ));
        }
        opts.detector = Some(Detector::Atime);
        let token = start_saved(&found, &opts)?;
        print_stdout(&format!("{token}\n"))?;
        return Ok(0);
    }
    let plan = load_plan(&found, true)?;
    let outs = args.out.open()?;
    crate::signals::install();
    let w = run::start(&plan, &opts)?;
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
    // Processes the command leaves behind are reparented to this one, so
    // that the report can say which were still running at the end.
    // Why the result is ignored: without it (an old kernel) the leftovers
    // go to init and the report only sees fewer survivors.
    let _ = crate::sys::become_subreaper();
    let spawned = child.spawn().map(|c| wait(c, &mut ended));
    // A bounded grace for what the command left running (a child that
    // called setsid() too: this process is their subreaper) to end.
    // Quiet only when a look finds nothing running and nothing that just
    // ended: a process that forks and exits over and over (each child
    // reparented here after the list was read) is never quiet.
    let grace = std::time::Instant::now() + SURVIVOR_GRACE;
    loop {
        let now = survivors();
        let quiet = now.running.is_empty() && now.reaped.is_empty() && now.readable;
        if quiet {
            ended.survivors = vec![];
            break;
        }
        // (pid 0: the kernel's list of children could not be read, so
        // nothing shows the command left nothing running.)
        ended.survivors = if !now.readable {
            vec![0]
        } else if now.running.is_empty() {
            now.reaped
        } else {
            now.running
        };
        if std::time::Instant::now() >= grace {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut report = w.finish(ended.clone());
    report.label = args.out.label.clone();
    if let Err(e) = spawned {
        return Err(Failure::Other(format!(
            "cannot run {}: {e}",
            escape::bytes(args.command[0].as_encoded_bytes())
        )));
    }
    let code = write_outputs(&report, outs, gh)?;
    if !ended.survivors.is_empty() {
        note(&format!(
            "{} processes the command started were still running 2 s after it ended: what they do from now on is not watched, and no carrier is PASS",
            ended.survivors.len()
        ));
    }
    Ok(match (code, ended.exit_code, ended.signal) {
        (0, Some(c), _) => c,
        (0, None, Some(n)) => 128 + n,
        (0, None, None) => {
            error("the command's exit status could not be read");
            1
        }
        (code, _, _) => code,
    })
}

/// How long processes the command left running get to end before the
/// second snapshots: past it, the watch's PASS verdicts are ERROR.
const SURVIVOR_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The children of this process still running (the command's leftovers,
/// reparented here); those that already ended are reaped.
fn survivors() -> Survivors {
    let mut pids = Vec::new();
    let mut readable = false;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                readable = true;
                pids.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    let listed = pids.clone();
    pids.retain(|&pid| crate::sys::child_running(pid));
    // One that ended just now may have handed on to a child of its own
    // (reparented here after the list was read): activity all the same.
    let reaped: Vec<u32> = listed.into_iter().filter(|p| !pids.contains(p)).collect();
    Survivors {
        running: pids,
        reaped,
        readable,
    }
}

/// One look at what the command left: still running, just ended (reaped
/// now), and whether the kernel's list of children could be read at all.
struct Survivors {
    running: Vec<u32>,
    reaped: Vec<u32>,
    readable: bool,
}

/// Starts a watch another process finishes ([`finish_saved`]); its token
/// (`sha256:<hex>:<dir>`).
/// Why watch needs a config: what discovery proposes for a probe
/// (`$HOME`, the temp directory, caches) is what every other process on the
/// machine writes to, and a watch attributes every change there to the
/// command. A probe plants its own entries and looks only for them; a
/// watch cannot tell whose a change was. So watch takes the places to look
/// at from a config, and says how to write one.
fn refuse_discovered(found: &Found) -> Result<(), Failure> {
    if matches!(found, Found::Embedded) {
        return Err(Failure::Other(
            "watch needs a config naming the places the command shares (none found: --config, $RUNWARDEN_CONFIG, .github/runwarden.yml, runwarden.yml): discovery's places ($HOME, the temp directory, caches) are written by every process on the machine, and a watch would blame the command for all of it. `runwarden discover --write runwarden.yml` proposes a config to cut down to what the command shares, then `runwarden watch --config runwarden.yml -- COMMAND`".into(),
        ));
    }
    Ok(())
}

pub(super) fn start_saved(found: &Found, opts: &run::Options) -> Result<String, Failure> {
    refuse_discovered(found)?;
    let (plan, text) = load_plan_text(found, false)?;
    let w = run::start(&plan, opts)?;
    let token = w.save(&text)?;
    note(&format!(
        "watching {} surfaces from now on ({} canaries asked for); finish with `runwarden watch --finish TOKEN`, TOKEN being what this printed",
        plan.surfaces.len(),
        opts.canaries.len()
    ));
    Ok(token)
}

/// Finishes the watch a token names ([`start_saved`]) and reports it, with
/// the config the watch started with.
pub(super) fn finish_saved(
    token: &str,
    label: Option<String>,
    outs: Outputs<'_>,
    gh: &GithubOptions,
) -> Result<i32, Failure> {
    let resumed = run::load(token)?;
    let plan = match plan::build(
        &resumed.config_text,
        resumed.config_source.clone(),
        &config_env,
    ) {
        Ok(p) => p,
        Err(e) => {
            for (p, why) in resumed.abandon() {
                error(&format!(
                    "canary {} left: {why}",
                    escape::bytes(p.as_os_str().as_bytes())
                ));
            }
            return Err(Failure::Config(e));
        }
    };
    let w = resumed.watch(&plan)?;
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
            // A signal to our own child.
            crate::sys::send_signal(c.id(), sig);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(st) = status {
        ended.exit_code = st.code();
        ended.signal = st.signal();
    }
}
