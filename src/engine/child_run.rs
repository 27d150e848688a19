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

/// Runs one child (A or B) to completion, a timeout or a signal, and
/// collects what it reported. Never fails: problems land in `problem`.
pub(super) fn run_child(
    run: &Run<'_>,
    exe: &Path,
    probe_id: &str,
    key: Option<String>,
    targets: Vec<Target>,
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
    let total: usize = targets
        .iter()
        .map(|t| t.plant.len() + t.recover.len() + t.cleanup.len())
        .sum();
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
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C at the terminal reaches only the
        // orchestrator, which stops the run it chooses to stop and still
        // cleans up.
        .process_group(0);
    crate::sys::die_with_parent(&mut cmd);
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
        probe_id: probe_id.into(),
        key,
        targets,
    };
    // The child reads all of stdin before writing anything, so writing the
    // whole request first cannot deadlock.
    if let Some(mut stdin) = child.stdin.take() {
        let body = serde_json::to_vec(&req).expect("request serializes");
        if let Err(e) = stdin.write_all(&body) {
            res.problem = Some(format!("run {role}: could not send the request: {e}"));
        }
    }
    // The run's own words on stderr reach the terminal only redacted.
    if let Some(stderr) = child.stderr.take() {
        // Read as bytes to the end, whatever they hold: a line that is not
        // UTF-8 must not stop the reading, or the run would block on a
        // full pipe.
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let _ = std::io::stderr().write_all(&crate::redact::bytes(&line));
                line.clear();
            }
        });
    }
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut done = false;
    let mut killed: Option<String> = None;
    let mut stopping: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => match parse_event(&line) {
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
                Ok(Event::Done) => done = true,
                Err(e) => killed = Some(format!("run {role} sent a malformed event: {e}")),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
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
    // A killed run's last journal lines may still be on their way from the
    // reader thread: drain until its pipe closes (at once, now the run is
    // gone; bounded in case something still holds it). They are exactly
    // the entries cleanup must not miss.
    let drain_deadline = Instant::now() + Duration::from_secs(2);
    while let Some(left) = drain_deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Ok(Event::Created { target, entry }) = parse_event(&line) {
                    res.created.push((target, entry));
                }
            }
            Err(_) => break,
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
