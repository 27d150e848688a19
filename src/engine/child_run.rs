//! One child run (A, B or cleanup): started with a cut environment, fed
//! its request, read event by event (each redacted before it is kept),
//! stopped on a signal or a timeout, and reaped.

use super::pipes::Pipes;
use super::{MAX_NOTICES, Progress, Run, RunResult, progress};
use crate::child::{Event, Request, Target};
use crate::signals;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One event line from a run, with every string in it redacted before
/// anything is kept: the runs relay what servers and git said.
pub(super) fn parse_event(line: &str) -> Result<Event, serde_json::Error> {
    let mut v: Value = serde_json::from_str(line)?;
    crate::redact::value(&mut v);
    serde_json::from_value(v)
}

/// How long run A has, after a signal, to finish the carrier under way
/// and exit by itself (a few syscalls, or one request or push already
/// under way) before it is killed. Short: GitHub Actions sends SIGKILL
/// 2.5 s after its SIGTERM (7.5 s after SIGINT).
pub(super) const STOP_GRACE: Duration = Duration::from_secs(2);

/// Kills a run and everything it started (its process group: a local
/// push's receive-pack is not its child's child by accident).
pub(super) fn kill_group(child: &mut std::process::Child) {
    crate::sys::send_signal_group(child.id(), libc::SIGKILL);
    let _ = child.kill();
}

/// Runs one child (A, B or cleanup) to completion, a timeout or a signal,
/// and collects what it reported. Never fails: problems land in `problem`.
/// `then` is a second phase in the same process (cleanup after B), with
/// its own role for progress and messages and a timeout of its own.
pub(super) fn run_child(
    run: &Run<'_>,
    exe: &Path,
    probe_id: &str,
    key: Option<String>,
    targets: Vec<Target>,
    then: Option<Then<'_>>,
    timeout: Duration,
) -> RunResult {
    let Run {
        role,
        dir,
        id: run_id,
        as_user,
        interruptible,
    } = *run;
    let mut res = RunResult::default();
    // What this run has to do, for progress: carriers to plant or recover,
    // entries to clean (cleanup by probe id finds more as it goes).
    let work = |ts: &[Target]| -> usize {
        ts.iter()
            .map(|t| t.plant.len() + t.recover.len() + t.cleanup.len())
            .sum()
    };
    let total = work(&targets);
    let (then_role, then, then_dir, then_id) = match then {
        Some(t) => (
            t.role,
            t.targets,
            Some(t.dir.to_path_buf()),
            Some(t.run_id.to_string()),
        ),
        None => ("", Vec::new(), None, None),
    };
    let then_total = work(&then);
    let mut child = match command(exe, dir, run_id, as_user).spawn() {
        Ok(c) => c,
        Err(e) => {
            res.problem = Some(format!("run {role} could not start: {e}"));
            return res;
        }
    };
    // (Only once it runs: a run that never started has no progress line
    // to clear.)
    progress(&Progress::Started { role, total });
    let req = Request {
        parent: Some(std::process::id()),
        probe_id: probe_id.into(),
        key,
        targets,
        then,
        then_dir,
        then_run_id: then_id,
    };
    let body = serde_json::to_vec(&req).expect("request serializes");
    // The child reads all of stdin before writing anything, so writing the
    // request cannot deadlock; what fits in the pipe is written at once,
    // a larger request by a thread of its own, so that a run that never
    // reads (stuck entering a directory on a dead mount) cannot hold the
    // probe past its timeout.
    if let Some(stdin) = child.stdin.take()
        && let Err(e) = send(stdin, body)
    {
        res.problem = Some(format!("run {role}: could not send the request: {e}"));
    }
    // One thread reads both pipes as they fill (poll): the run's events
    // on stdout, its own words on stderr (which reach the terminal only
    // redacted). No reader threads: a probe's three runs would start six.
    let mut pipes = Pipes::new(child.stdout.take(), child.stderr.take());
    let mut c = Collect {
        res,
        role,
        interruptible,
        total,
        steps: 0,
        then_role,
        then_total,
        deadline: Instant::now() + timeout,
        timeout,
        done: false,
        killed: None,
        quiet: false,
    };
    watch(&mut child, &mut pipes, &mut c);
    let status = reap(&mut child);
    drain(&mut pipes, &mut c);
    c.finish(status)
}

/// The command that starts a run: `__run` with a cut environment, its
/// pipes, in a process group of its own (as `as_user`, if given).
fn command(exe: &Path, dir: &Path, run_id: &str, as_user: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(exe);
    cmd.arg("__run")
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", dir)
        .env("TMPDIR", dir.join("tmp"))
        .env("RUNWARDEN_RUN_ID", run_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C at the terminal reaches only the
        // orchestrator, which stops the run it chooses to stop and still
        // cleans up.
        .process_group(0);
    // No working directory and no pre-exec hook here: in the static
    // binary the action ships either makes std fork the orchestrator
    // (copying its page tables) instead of spawning with vfork, about
    // 0.8 ms a probe (a uid for `--run-b-as` still forks). The run moves to its directory
    // (HOME) and asks to die with this process itself, first thing
    // (`crate::child::run`).
    if let Some((uid, gid)) = as_user {
        // std drops supplementary groups too when root switches uid.
        cmd.uid(uid).gid(gid);
    }
    cmd
}

/// Reads the run's events until its stdout closes, or until a signal (if
/// the run is interruptible) or its timeout stops trusting it, which then
/// kills it.
fn watch(child: &mut std::process::Child, pipes: &mut Pipes, c: &mut Collect) {
    let mut stopping: Option<Instant> = None;
    loop {
        if !pipes.wait(Duration::from_millis(100), &mut |l| c.line(l)) {
            break;
        }
        if c.killed.is_none() {
            let signal = signals::received().filter(|_| c.interruptible);
            let late = Instant::now() >= c.deadline;
            if signal.is_some() || late {
                // Whatever the run already said counts first: a phase it
                // finished (and the cleanup a signal must not stop) may
                // be waiting in the pipe.
                pipes.take_ready(&mut |l| c.line(l));
            }
            if let Some(sig) = signals::received().filter(|_| c.interruptible) {
                c.killed = Some(format!("interrupted by {sig} during run {}", c.role));
                if c.role == "A" {
                    // Run A stops between syscalls: it finishes the
                    // carrier under way (its journal complete), starts no
                    // other, and exits. Killed only if it does not.
                    crate::sys::send_signal(child.id(), libc::SIGTERM);
                    stopping = Some(Instant::now() + STOP_GRACE);
                }
            } else if Instant::now() >= c.deadline {
                c.killed = Some(format!(
                    "run {} timed out after {}s",
                    c.role,
                    c.timeout.as_secs()
                ));
            }
        }
        // Whatever stopped trusting the run stops the run (after its grace
        // to stop by itself, for run A on a signal).
        if c.killed.is_some() && stopping.is_none_or(|end| Instant::now() >= end) {
            kill_group(child);
            break;
        }
    }
}

/// The run's exit status; None if it could not be reaped (it is killed).
fn reap(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    // Reap the child without waiting forever (a process stuck in the
    // kernel on a dead network mount cannot even be killed). A child that
    // has just closed stdout is usually a moment from exiting: wait for
    // that moment, then poll with a backoff from 0.5 ms where no pidfd
    // told it, so a probe does not sleep for nothing at every phase.
    let reap_deadline = Instant::now() + Duration::from_secs(10);
    // Woken the moment it exits where the kernel can (a pidfd); the
    // polling below then finds it at once, or polls where there is none.
    crate::sys::wait_exit(child.id(), reap_deadline);
    let mut pause = Duration::from_micros(500);
    loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < reap_deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            _ => {
                kill_group(child);
                break None;
            }
        }
    }
}

/// Reads what is left in the pipes of a run that is over.
fn drain(pipes: &mut Pipes, c: &mut Collect) {
    // A killed run's last lines may still be in its pipe: drain it to its
    // end (at once, now the run is gone; bounded in case something still
    // holds it). Its journal lines are exactly the entries cleanup must
    // not miss; what it recovered or removed counts too.
    c.quiet = true;
    let drain_deadline = Instant::now() + Duration::from_secs(2);
    while let Some(left) = drain_deadline.checked_duration_since(Instant::now()) {
        if !pipes.wait(left, &mut |l| c.line(l)) {
            break;
        }
    }
}

/// A second phase of a run, in the same process: its role (for progress
/// and messages), its targets, and the directory and run id it works as.
pub(super) struct Then<'a> {
    pub role: &'static str,
    pub targets: Vec<Target>,
    pub dir: &'a Path,
    pub run_id: &'a str,
}

/// Writes the request: at once when the pipe holds it whole, else from a
/// thread of its own.
fn send(mut stdin: std::process::ChildStdin, body: Vec<u8>) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    let room = crate::sys::pipe_capacity(stdin.as_fd());
    if room.is_some_and(|room| body.len() <= room) {
        return stdin.write_all(&body);
    }
    std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    Ok(())
}

/// What a run said so far, and where it stands.
struct Collect {
    res: RunResult,
    /// The role whose work is under way (B, then cleanup).
    role: &'static str,
    /// Whether a signal stops it (cleanup goes on; its timeout stops it).
    interruptible: bool,
    total: usize,
    steps: usize,
    then_role: &'static str,
    then_total: usize,
    deadline: Instant,
    timeout: Duration,
    done: bool,
    killed: Option<String>,
    /// No more progress lines (the run is over; its pipe is drained).
    quiet: bool,
}

impl Collect {
    /// The run's result, once it is over: its first problem, else why it
    /// was stopped, else what its exit `status` says.
    fn finish(self, status: Option<std::process::ExitStatus>) -> RunResult {
        let Collect {
            mut res,
            role,
            done,
            killed,
            ..
        } = self;
        progress(&Progress::Finished { role });
        res.problem = res.problem.or(killed).or_else(|| match status {
            Some(s) if s.success() && done => None,
            Some(s) if s.success() => Some(format!("run {role} exited before finishing")),
            Some(s) => Some(format!("run {role} failed ({s})")),
            None => Some(format!("run {role} could not be reaped")),
        });
        res
    }

    fn step(&mut self) {
        self.steps += 1;
        if !self.quiet {
            progress(&Progress::Step {
                role: self.role,
                done: self.steps,
                total: self.total,
            });
        }
    }

    /// One line of the run's stdout.
    fn line(&mut self, line: &str) {
        let res = &mut self.res;
        match parse_event(line) {
            Ok(Event::Created { target, entry }) => res.created.push((target, entry)),
            Ok(Event::Planted {
                target,
                key,
                outcome,
            }) => {
                res.planted.insert((target, key), outcome);
                self.step();
            }
            Ok(Event::Recovered {
                target,
                key,
                outcome,
            }) => {
                res.recovered.insert((target, key), outcome);
                self.step();
            }
            Ok(Event::Cleaned {
                target,
                index,
                outcome,
            }) => {
                res.cleaned.insert((target, index), outcome);
                self.step();
            }
            Ok(Event::Notice { target, notice }) => {
                let n = res.notice_counts.entry(target).or_default();
                *n += 1;
                if *n <= MAX_NOTICES {
                    res.notices.push((target, notice));
                }
            }
            Ok(Event::FindFailed { target, reason }) => res.find_failed.push((target, reason)),
            Ok(Event::FoundLeft {
                target,
                entry,
                reason,
            }) => res.found_left.push((target, entry, reason)),
            // A run already distrusted (a malformed line) has no phase to
            // finish: its problem stays its first phase's.
            Ok(Event::Phase)
                if !self.then_role.is_empty() && !res.first_phase_done && self.killed.is_none() =>
            {
                res.first_phase_done = true;
                if !self.quiet {
                    progress(&Progress::Finished { role: self.role });
                }
                self.role = self.then_role;
                self.interruptible = false;
                (self.total, self.steps) = (self.then_total, 0);
                self.deadline = Instant::now() + self.timeout;
                if !self.quiet {
                    progress(&Progress::Started {
                        role: self.role,
                        total: self.total,
                    });
                }
            }
            Ok(Event::Done) => self.done = true,
            Ok(Event::Phase) => {
                let msg = format!("run {} sent an unexpected phase", self.role);
                self.killed.get_or_insert(msg);
            }
            Err(e) => {
                let msg = format!("run {} sent a malformed event: {e}", self.role);
                self.killed.get_or_insert(msg);
            }
        }
    }
}
