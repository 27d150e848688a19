//! The engine (src/engine/, src/child.rs): runs A and B are separate
//! processes with a cut environment and disjoint directories, A is gone
//! before B starts, and cleanup runs after a signal or a timeout.
//!
//! To catch run B in the act, the tests freeze it with SIGSTOP as soon as
//! it appears (a real process, nothing mocked); a directory of 100,000
//! entries keeps B busy long enough to be caught.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A fresh directory of 100,000 empty files (one per test: the tests run
/// in parallel and count what is planted).
fn busy_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("busy-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    for i in 0..100_000u32 {
        std::fs::File::create(d.path().join(format!("f{i:06}"))).unwrap();
    }
    d
}

/// Direct children of `pid`, from /proc.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // Field 4 (ppid) comes after the parenthesised command name.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == pid {
            out.push(child);
        }
    }
    out
}

struct Caught {
    a: Option<u32>,
    b: u32,
}

/// Waits for run B (the second child of the probe) and stops it.
fn stop_run_b(probe: u32) -> Caught {
    let mut first: Option<u32> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for c in children(probe) {
            let cmd = std::fs::read(format!("/proc/{c}/cmdline")).unwrap_or_default();
            if !cmd.split(|b| *b == 0).any(|a| a == b"__run") {
                continue;
            }
            let env = std::fs::read(format!("/proc/{c}/environ")).unwrap_or_default();
            let home = env
                .split(|b| *b == 0)
                .find(|v| v.starts_with(b"HOME="))
                .unwrap_or_default()
                .to_vec();
            // Stopped once it runs in its own directory (its first act).
            let dir = home
                .get(5..)
                .map(|d| PathBuf::from(String::from_utf8_lossy(d).into_owned()));
            let moved = std::fs::read_link(format!("/proc/{c}/cwd")).ok() == dir;
            if String::from_utf8_lossy(&home).ends_with("/b") && moved {
                unsafe { libc::kill(c as i32, libc::SIGSTOP) };
                return Caught { a: first, b: c };
            }
            first.get_or_insert(c);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    panic!("run B never appeared");
}

fn environ(pid: u32) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let mut v: Vec<(String, String)> = raw
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let s = String::from_utf8_lossy(s);
            let (k, v) = s.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    v.sort();
    v
}

fn spawn_probe(work: &Path, busy: &Path, extra: &[&str]) -> (std::process::Child, PathBuf) {
    let cfg = work.join("rw.yml");
    std::fs::write(&cfg, fs_config("busy", busy, "")).unwrap();
    let report = work.join("report.json");
    let child = bin()
        .args(["probe", "--config"])
        .arg(&cfg)
        .arg("--report")
        .arg(&report)
        .arg("--work-dir")
        .arg(work)
        .args(extra)
        .env("SECRET_TOKEN", "must-not-reach-the-runs")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, report)
}

/// `probe --config cfg` with its report and work dir in `work`, output
/// captured.
fn start_probe(cfg: &Path, work: &Path) -> (std::process::Child, PathBuf) {
    start_probe_with(cfg, work, &[])
}

fn start_probe_with(cfg: &Path, work: &Path, extra: &[&str]) -> (std::process::Child, PathBuf) {
    let report = work.join("r.json");
    let child = bin()
        .args(["probe", "--config"])
        .arg(cfg)
        .arg("--report")
        .arg(&report)
        .arg("--work-dir")
        .arg(work)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, report)
}

/// Run A of the probe `probe`, once it appears (a child whose HOME is its
/// `a` directory).
fn find_run_a(probe: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "run A never appeared");
        let found = children(probe).into_iter().find(|c| {
            let env = std::fs::read(format!("/proc/{c}/environ")).unwrap_or_default();
            env.split(|b| *b == 0)
                .any(|v| v.starts_with(b"HOME=") && v.ends_with(b"/a"))
        });
        if let Some(a) = found {
            return a;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn probe_dirs(work: &Path) -> Vec<String> {
    std::fs::read_dir(work)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("runwarden-"))
        .collect()
}

#[test]
fn runs_get_a_cut_environment_and_sigterm_still_cleans_up() {
    let work = tempfile::tempdir().unwrap();
    let busy = busy_dir();
    let (child, report) = spawn_probe(work.path(), busy.path(), &[]);
    let caught = stop_run_b(child.id());

    // Run A has exited (and been reaped) before B started.
    if let Some(a) = caught.a {
        assert!(
            !Path::new(&format!("/proc/{a}")).exists(),
            "run A still alive while B runs"
        );
    }
    let env = environ(caught.b);
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["HOME", "PATH", "RUNWARDEN_RUN_ID", "TMPDIR"]);
    let get = |k: &str| env.iter().find(|(key, _)| key == k).unwrap().1.clone();
    let home = PathBuf::from(get("HOME"));
    assert!(
        home.starts_with(work.path()) && home.ends_with("b"),
        "{home:?}"
    );
    assert_eq!(PathBuf::from(get("TMPDIR")), home.join("tmp"));
    assert_eq!(
        std::fs::read_link(format!("/proc/{}/cwd", caught.b)).unwrap(),
        home
    );
    // A's directory is a sibling: disjoint from B's.
    assert!(home.parent().unwrap().join("a").is_dir());
    // Planted entries are on the surface while B is frozen.
    // Nine message carriers and the beacon.
    assert_eq!(leftovers(busy.path()).len(), 10);

    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let p = finish(child.wait_with_output().unwrap(), &report);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_all_error(&p, "interrupted by SIGTERM during run B");
    assert!(p.stderr.contains("interrupted by SIGTERM"), "{}", p.stderr);
    assert!(
        leftovers(busy.path()).is_empty(),
        "cleanup ran after the signal"
    );
    assert!(
        probe_dirs(work.path()).is_empty(),
        "probe directory removed"
    );
    assert!(
        !Path::new(&format!("/proc/{}", caught.b)).exists(),
        "run B was killed"
    );
}

/// A probe killed outright (SIGKILL: nothing of it runs again) takes its
/// runs with it: none is left behind, stopped or running.
#[test]
fn a_run_dies_with_the_probe() {
    let work = tempfile::tempdir().unwrap();
    let busy = busy_dir();
    let (mut child, _report) = spawn_probe(work.path(), busy.path(), &[]);
    let caught = stop_run_b(child.id());
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    let alive = || {
        std::fs::read_to_string(format!("/proc/{}/stat", caught.b))
            .is_ok_and(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
    };
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let outlived = alive();
    if outlived {
        unsafe { libc::kill(caught.b as i32, libc::SIGKILL) };
    }
    assert!(!outlived, "run B outlived the probe");
}

#[test]
fn a_run_that_hangs_is_killed_at_the_timeout() {
    let work = tempfile::tempdir().unwrap();
    let busy = busy_dir();
    let (child, report) = spawn_probe(work.path(), busy.path(), &["--timeout", "2"]);
    let _caught = stop_run_b(child.id());
    let started = Instant::now();
    let p = finish(child.wait_with_output().unwrap(), &report);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(p.code, 1);
    assert_all_error(&p, "run B timed out after 2s");
    assert!(leftovers(busy.path()).is_empty());
    assert!(probe_dirs(work.path()).is_empty());
}

/// A local bare remote holding 10,000 refs: run A's push (the ref
/// advertisement alone) takes long enough for A to be killed mid-plant.
fn busy_remote(root: &Path) -> PathBuf {
    let remote = bare_remote(root);
    add_refs(&remote, 10_000, &["f"]);
    remote
}

#[test]
fn run_a_killed_mid_plant_leaves_nothing_behind() {
    let root = tempfile::tempdir().unwrap();
    let remote = busy_remote(root.path());
    let before = refs(&remote);
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("rw.yml");
    std::fs::write(&cfg, origin_config(&remote)).unwrap();
    // Find run A, then kill it the moment its `git push` is under way: the
    // push (A's grandchild) dies with it, mid-transfer.
    let (child, report) = start_probe(&cfg, work.path());
    let a = find_run_a(child.id());
    loop {
        assert!(
            Path::new(&format!("/proc/{a}")).exists(),
            "run A finished before its push was seen"
        );
        let pushing = children(a).into_iter().any(|c| {
            let cmd = std::fs::read(format!("/proc/{c}/cmdline")).unwrap_or_default();
            cmd.split(|b| *b == 0).any(|arg| arg == b"push")
        });
        if pushing {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    unsafe { libc::kill(a as i32, libc::SIGKILL) };
    let p = finish(child.wait_with_output().unwrap(), &report);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_all_error(&p, "run A");
    eprintln!("cleanup: {}", p.report["cleanup"]);
    // Whatever A pushed before it died, cleanup removed it; nothing A had
    // only journalled is reported as left.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(refs(&remote), before, "refs left on the remote");
    assert!(
        p.report["cleanup"]["left"].as_array().unwrap().is_empty(),
        "{}",
        p.report["cleanup"]
    );
}

/// Every finding is ERROR, saying `why`.
fn assert_all_error(p: &Probe, why: &str) {
    for f in p.report["findings"].as_array().unwrap() {
        assert_eq!(f["verdict"], "error", "{f}");
        assert!(f["detail"].as_str().unwrap().contains(why), "{f}");
    }
}

/// What one SIGTERM sweep saw.
#[derive(Default, Debug)]
struct Sweep {
    moments: usize,
    /// Runs the signal reached while run A was planting.
    during_a: usize,
    /// Runs the signal reached before the probe could say anything (before
    /// its handlers were installed, or before run A).
    no_report: usize,
}

/// Probes `cfg` and sends the probe SIGTERM `steps` times at moments
/// spread over the first `span` of a probe's life; after each, `same()`
/// must hold (the surface is as it was) and the work dir is empty.
fn sigterm_sweep(
    cfg: &Path,
    steps: usize,
    span: Duration,
    same: &dyn Fn() -> Result<(), String>,
) -> Sweep {
    let mut sweep = Sweep::default();
    for i in 0..steps {
        let at = span.mul_f64(i as f64 / steps as f64);
        let work = tempfile::tempdir().unwrap();
        let (child, report) = start_probe(cfg, work.path());
        std::thread::sleep(at);
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().unwrap();
        sweep.moments += 1;
        if let Err(why) = same() {
            panic!(
                "SIGTERM at {at:?}: {why}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // Only the report file's own temporary sibling may be gone or
        // renamed: the probe directory itself is removed.
        let stray: Vec<String> = std::fs::read_dir(work.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("runwarden-"))
            .collect();
        assert!(
            stray.is_empty(),
            "SIGTERM at {at:?}: probe directory left: {stray:?}"
        );
        match std::fs::read_to_string(&report) {
            Ok(text) => {
                let r: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert!(
                    r["cleanup"]["left"].as_array().unwrap().is_empty(),
                    "SIGTERM at {at:?}: {}",
                    r["cleanup"]
                );
                if text.contains("interrupted by SIGTERM during run A") {
                    sweep.during_a += 1;
                }
            }
            Err(_) => sweep.no_report += 1,
        }
    }
    eprintln!("{sweep:?}");
    sweep
}

/// How long one whole probe of `cfg` takes here (the sweep's span).
fn probe_time(cfg: &Path) -> Duration {
    let work = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = bin()
        .args(["probe", "--config"])
        .arg(cfg)
        .arg("--work-dir")
        .arg(work.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    started.elapsed()
}

#[test]
fn sigterm_at_any_moment_of_run_a_leaves_a_directory_as_it_was() {
    // Run A's moments come at the same time whatever the directory holds
    // (B's scan is what grows): the span is measured on the empty one.
    let mut span = None;
    for entries in [0u32, 30_000] {
        let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        for i in 0..entries {
            std::fs::File::create(d.path().join(format!("f{i:05}"))).unwrap();
        }
        std::fs::write(d.path().join("notes.txt"), "theirs\n").unwrap();
        let before = snapshot(d.path());
        let cfg = d.path().with_extension("yml");
        std::fs::write(&cfg, fs_config("shared", d.path(), "")).unwrap();
        let whole = *span.get_or_insert_with(|| probe_time(&cfg));
        let same = || {
            let now = snapshot(d.path());
            if now == before {
                Ok(())
            } else {
                Err(format!("left: {:?}", leftovers(d.path())))
            }
        };
        // A starts after setup and ends well before B's scan: the first
        // 60% of a probe covers it.
        let sweep = sigterm_sweep(&cfg, 60, whole.mul_f64(0.6), &same);
        assert!(
            sweep.during_a >= 3,
            "the sweep rarely reached run A: {sweep:?}"
        );
    }
}

#[test]
fn sigterm_at_any_moment_of_run_a_leaves_a_remotes_refs_as_they_were() {
    let root = tempfile::tempdir().unwrap();
    let remote = bare_remote(root.path());
    let before = refs(&remote);
    let cfg = root.path().join("rw.yml");
    std::fs::write(&cfg, origin_config(&remote)).unwrap();
    let whole = probe_time(&cfg);
    let same = || {
        let now = refs(&remote);
        if now == before {
            Ok(())
        } else {
            Err(format!("refs changed:\n{now}"))
        }
    };
    let sweep = sigterm_sweep(&cfg, 40, whole.mul_f64(0.7), &same);
    assert!(
        sweep.during_a >= 3,
        "the sweep rarely reached run A: {sweep:?}"
    );
}

#[test]
fn sigkill_of_run_a_at_any_moment_leaves_a_directory_as_it_was() {
    // Run A killed outright (no grace): between an intent and its syscall,
    // between the syscall and the full record, or after. The write-ahead
    // journal must let cleanup find whatever exists, and only that.
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(d.path().join("notes.txt"), "theirs\n").unwrap();
    let before = snapshot(d.path());
    let cfg = d.path().with_extension("yml");
    std::fs::write(&cfg, fs_config("shared", d.path(), "")).unwrap();
    let (mut killed_in_a, mut moments, mut partial) = (0, 0, 0u64);
    for i in 0..80u64 {
        let work = tempfile::tempdir().unwrap();
        let (child, report) = start_probe(&cfg, work.path());
        let a = find_run_a(child.id());
        std::thread::sleep(Duration::from_micros(i * 50));
        unsafe { libc::kill(a as i32, libc::SIGKILL) };
        let out = child.wait_with_output().unwrap();
        moments += 1;
        assert_eq!(
            snapshot(d.path()),
            before,
            "SIGKILL {} µs into run A left {:?}\n{}",
            i * 50,
            leftovers(d.path()),
            String::from_utf8_lossy(&out.stderr)
        );
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert!(
            r["cleanup"]["left"].as_array().unwrap().is_empty(),
            "{}",
            r["cleanup"]
        );
        if r.to_string().contains("run A failed") {
            killed_in_a += 1;
        }
        let deleted = r["cleanup"]["deleted"].as_u64().unwrap();
        partial += u64::from(deleted > 0 && deleted < 10);
    }
    eprintln!(
        "{killed_in_a} of {moments} probes had run A killed; {partial} after some plants and before the last"
    );
    assert!(killed_in_a >= 20, "{killed_in_a} of {moments}");
    assert!(
        partial >= 2,
        "the sweep rarely hit run A mid-plant: {partial}"
    );
}

/// Run B of `probe` stopped (SIGSTOP) once it is cleaning up: working in
/// run A's directory (its second phase) with its own HOME.
fn stop_run_b_cleaning(probe: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for c in children(probe) {
            let env = std::fs::read(format!("/proc/{c}/environ")).unwrap_or_default();
            let is_b = env
                .split(|b| *b == 0)
                .any(|v| v.starts_with(b"HOME=") && v.ends_with(b"/b"));
            let cwd = std::fs::read_link(format!("/proc/{c}/cwd")).unwrap_or_default();
            // In A's directory and running git: past the phase event (B
            // moves, then says so, then starts cleaning). Stopped between
            // its move and that event, B would still be interruptible.
            if is_b && cwd.ends_with("a") && !children(c).is_empty() {
                unsafe { libc::kill(c as i32, libc::SIGSTOP) };
                return c;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("run B was never seen cleaning up");
}

/// Nothing left on the remote or in the report, and no ERROR: B's
/// recovery was complete.
fn assert_cleaned_and_recovered(p: &Probe, remote: &Path, before: &str) {
    assert_eq!(refs(remote), before, "refs left on the remote");
    assert!(
        p.report["cleanup"]["left"].as_array().unwrap().is_empty(),
        "{}",
        p.report["cleanup"]
    );
    for f in p.report["findings"].as_array().unwrap() {
        assert_ne!(f["verdict"], "error", "{f}");
    }
}

/// A git remote with 10,000 refs (cleanup's push takes a while) and its
/// config; the refs before the probe.
fn slow_cleanup_remote(root: &Path, work: &Path) -> (PathBuf, PathBuf, String) {
    let remote = busy_remote(root);
    let before = refs(&remote);
    let cfg = work.join("rw.yml");
    std::fs::write(&cfg, origin_config(&remote)).unwrap();
    (remote, cfg, before)
}

/// Run B cleans up after its recovery in its own process. Stopped there
/// past its timeout, it is killed, and a cleanup run of its own takes the
/// entries B did not report (their removal may have landed: the push was
/// under way, so they count as already gone): nothing is left, and the
/// verdicts are B's recovery's, which was complete (no ERROR for a
/// cleanup that timed out).
#[test]
fn a_cleanup_phase_that_times_out_is_finished_by_a_cleanup_run() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (remote, cfg, before) = slow_cleanup_remote(root.path(), work.path());
    let (child, report) = start_probe_with(&cfg, work.path(), &["--timeout", "5"]);
    stop_run_b_cleaning(child.id());
    let p = finish(child.wait_with_output().unwrap(), &report);
    assert_cleaned_and_recovered(&p, &remote, &before);
    assert!(p.report["summary"]["fail"].as_u64().unwrap() > 0);
}

/// A signal while run B cleans up does not stop the cleanup (as it does
/// not stop a cleanup run): B finishes, and the verdicts stand.
#[test]
fn a_signal_during_the_cleanup_phase_lets_it_finish() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (remote, cfg, before) = slow_cleanup_remote(root.path(), work.path());
    let (child, report) = start_probe_with(&cfg, work.path(), &[]);
    let b = stop_run_b_cleaning(child.id());
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        Path::new(&format!("/proc/{b}")).exists(),
        "run B was killed while cleaning up"
    );
    unsafe { libc::kill(b as i32, libc::SIGCONT) };
    let p = finish(child.wait_with_output().unwrap(), &report);
    assert_cleaned_and_recovered(&p, &remote, &before);
    assert!(p.report["cleanup"]["deleted"].as_u64().unwrap() > 0);
}
