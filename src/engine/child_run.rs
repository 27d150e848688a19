//! One child run (A, B or cleanup): started with a cut environment, fed
//! its request, read event by event (each redacted before it is kept),
//! stopped on a signal or a timeout, and reaped.

use super::*;

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
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
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
    then: Option<(&'static str, Vec<Target>, &Path)>,
    timeout: Duration,
) -> RunResult {
    use std::os::unix::process::CommandExt;
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
    let mut total = work(&targets);
    let (then_role, then, then_dir) = match then {
        Some((r, t, d)) => (r, t, Some(d.to_path_buf())),
        None => ("", Vec::new(), None),
    };
    let then_total = work(&then);
    let mut steps = 0usize;
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
    // No working directory and no pre-exec hook here: either makes std
    // fork the orchestrator (copying its page tables) instead of spawning
    // with vfork, about 0.8 ms a probe. The run moves to its directory
    // (HOME) and asks to die with this process itself, first thing
    // (`crate::child::run`).
    if let Some((uid, gid)) = as_user {
        // std drops supplementary groups too when root switches uid.
        cmd.uid(uid).gid(gid);
    }
    let mut child = match cmd.spawn() {
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
    };
    // The child reads all of stdin before writing anything, so writing the
    // whole request first cannot deadlock.
    if let Some(mut stdin) = child.stdin.take() {
        let body = serde_json::to_vec(&req).expect("request serializes");
        if let Err(e) = stdin.write_all(&body) {
            res.problem = Some(format!("run {role}: could not send the request: {e}"));
        }
    }
    // One thread reads both pipes as they fill (poll): the run's events
    // on stdout, its own words on stderr (which reach the terminal only
    // redacted). No reader threads: a probe's three runs would start six.
    let mut pipes = Pipes::new(child.stdout.take(), child.stderr.take());
    let mut deadline = Instant::now() + timeout;
    // The role whose work is under way (B, then cleanup), and whether a
    // signal stops it (cleanup goes on; its timeout stops it).
    let (mut role, mut interruptible) = (role, interruptible);
    let mut done = false;
    let mut killed: Option<String> = None;
    let mut stopping: Option<Instant> = None;
    loop {
        let open = pipes.wait(
            Duration::from_millis(100),
            &mut |line| match parse_event(line) {
                Ok(Event::Created { target, entry }) => res.created.push((target, entry)),
                Ok(Event::Planted {
                    target,
                    key,
                    outcome,
                }) => {
                    res.planted.insert((target, key), outcome);
                    steps += 1;
                    progress(&Progress::Step {
                        role,
                        done: steps,
                        total,
                    });
                }
                Ok(Event::Recovered {
                    target,
                    key,
                    outcome,
                }) => {
                    res.recovered.insert((target, key), outcome);
                    steps += 1;
                    progress(&Progress::Step {
                        role,
                        done: steps,
                        total,
                    });
                }
                Ok(Event::Cleaned {
                    target,
                    index,
                    outcome,
                }) => {
                    res.cleaned.insert((target, index), outcome);
                    steps += 1;
                    progress(&Progress::Step {
                        role,
                        done: steps,
                        total,
                    });
                }
                Ok(Event::Notice { target, notice }) => {
                    let n = res.notice_counts.entry(target).or_default();
                    *n += 1;
                    if *n <= MAX_NOTICES {
                        res.notices.push((target, notice));
                    }
                }
                Ok(Event::FindFailed { target, reason }) => res.find_failed.push((target, reason)),
                Ok(Event::Phase) if !then_role.is_empty() && !res.first_phase_done => {
                    res.first_phase_done = true;
                    progress(&Progress::Finished { role });
                    role = then_role;
                    interruptible = false;
                    (total, steps) = (then_total, 0);
                    deadline = Instant::now() + timeout;
                    progress(&Progress::Started { role, total });
                }
                Ok(Event::Done) => done = true,
                Ok(Event::Phase) => killed = Some(format!("run {role} sent an unexpected phase")),
                Err(e) => killed = Some(format!("run {role} sent a malformed event: {e}")),
            },
        );
        if !open {
            break;
        }
        if killed.is_none() {
            if let Some(sig) = signals::received().filter(|_| interruptible) {
                killed = Some(format!("interrupted by {sig} during run {role}"));
                if role == "A" {
                    // Run A stops between syscalls: it finishes the
                    // carrier under way (its journal complete), starts no
                    // other, and exits. Killed only if it does not.
                    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                    stopping = Some(Instant::now() + STOP_GRACE);
                }
            } else if Instant::now() >= deadline {
                killed = Some(format!("run {role} timed out after {}s", timeout.as_secs()));
            }
        }
        // Whatever stopped trusting the run stops the run (after its grace
        // to stop by itself, for run A on a signal).
        if killed.is_some() && stopping.is_none_or(|end| Instant::now() >= end) {
            kill_group(&mut child);
            break;
        }
    }
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
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < reap_deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            _ => {
                kill_group(&mut child);
                break None;
            }
        }
    };
    // A killed run's last journal lines may still be in its pipe: drain it
    // to its end (at once, now the run is gone; bounded in case something
    // still holds it). They are exactly the entries cleanup must not miss.
    let drain_deadline = Instant::now() + Duration::from_secs(2);
    while let Some(left) = drain_deadline.checked_duration_since(Instant::now()) {
        let open = pipes.wait(left, &mut |line| {
            if let Ok(Event::Created { target, entry }) = parse_event(line) {
                res.created.push((target, entry));
            }
        });
        if !open {
            break;
        }
    }
    progress(&Progress::Finished { role });
    res.problem = res.problem.or(killed).or_else(|| match status {
        Some(s) if s.success() && done => None,
        Some(s) if s.success() => Some(format!("run {role} exited before finishing")),
        Some(s) => Some(format!("run {role} failed ({s})")),
        None => Some(format!("run {role} could not be reaped")),
    });
    res
}

/// A run's stdout (events, one JSON object a line) and stderr (its own
/// words, copied to ours redacted), read as they fill.
struct Pipes {
    out: Option<std::process::ChildStdout>,
    err: Option<std::process::ChildStderr>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
}

impl Pipes {
    fn new(
        out: Option<std::process::ChildStdout>,
        err: Option<std::process::ChildStderr>,
    ) -> Pipes {
        Pipes {
            out,
            err,
            out_buf: Vec::new(),
            err_buf: Vec::new(),
        }
    }

    /// Waits up to `timeout` for either pipe, reads what is there, hands
    /// every complete stdout line to `line` and copies complete stderr
    /// lines out. False once stdout has ended (the run closed it: it
    /// exited, or is about to).
    fn wait(&mut self, timeout: Duration, line: &mut dyn FnMut(&str)) -> bool {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let fds = [
            self.out.as_ref().map(|p| p.as_raw_fd()),
            self.err.as_ref().map(|p| p.as_raw_fd()),
        ];
        if self.out.is_none() {
            return false;
        }
        let ready = sys::poll_readable(&fds, timeout);
        let mut chunk = [0u8; 64 * 1024];
        if ready[0]
            && let Some(out) = self.out.as_mut()
        {
            match out.read(&mut chunk) {
                Ok(n) if n > 0 => self.out_buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => self.out = None,
            }
            // Whole lines only; a last line without its newline is not an
            // event (the run died writing it).
            while let Some(i) = self.out_buf.iter().position(|&b| b == b'\n') {
                let rest = self.out_buf.split_off(i + 1);
                let l = std::mem::replace(&mut self.out_buf, rest);
                line(String::from_utf8_lossy(&l[..i]).trim_end_matches('\r'));
            }
        }
        if ready[1]
            && let Some(err) = self.err.as_mut()
        {
            // Bytes, whatever they hold: a line that is not UTF-8 must not
            // stop the reading, or the run would block on a full pipe.
            match err.read(&mut chunk) {
                Ok(n) if n > 0 => self.err_buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => {
                    self.err = None;
                    self.err_buf.push(b'\n');
                }
            }
            while let Some(i) = self.err_buf.iter().position(|&b| b == b'\n') {
                let rest = self.err_buf.split_off(i + 1);
                let l = std::mem::replace(&mut self.err_buf, rest);
                if l.len() > 1 {
                    let _ = std::io::stderr().write_all(&crate::redact::bytes(&l));
                }
            }
        }
        if self.out.is_none() && self.err.is_some() {
            // The events have ended: the run exited, or closed stdout to
            // exit. What it said on stderr by now is taken; a process it
            // left that still holds stderr (a credential cache daemon) is
            // not waited for.
            let fd = self.err.as_ref().map(|p| p.as_raw_fd());
            // Bounded: a process that keeps writing is not read forever.
            let mut reads = 0;
            while reads < 64
                && sys::poll_readable(&[fd], Duration::ZERO)[0]
                && let Some(err) = self.err.as_mut()
            {
                reads += 1;
                match err.read(&mut chunk) {
                    Ok(n) if n > 0 => self.err_buf.extend_from_slice(&chunk[..n]),
                    _ => break,
                }
            }
            self.err_buf.push(b'\n');
            for l in self
                .err_buf
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
            {
                let mut l = l.to_vec();
                l.push(b'\n');
                let _ = std::io::stderr().write_all(&crate::redact::bytes(&l));
            }
            self.err_buf.clear();
            self.err = None;
        }
        self.out.is_some()
    }
}
