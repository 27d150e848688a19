//! `runwarden watch -- COMMAND` as a user runs it (src/cli/watch.rs): the
//! command's stdio and exit status pass through; a canary read with `cat`
//! exits 3 and no canary value reaches any output; a command that reads
//! nothing has no canary finding; a command killed by a signal, or a
//! watch asked to stop, is still reported and its canaries removed; and
//! 100,000 entries already on a surface are diffed in bounded memory.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

struct Watched {
    out: Output,
    report: Value,
}

/// `runwarden watch` on a one-directory config, with HOME and the
/// workspace (for the default canaries) under `root`.
fn watch_cmd(root: &Path, extra: &[&str], command: &[&str]) -> Command {
    let shared = root.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(root.join("home")).unwrap();
    std::fs::create_dir_all(root.join("ws")).unwrap();
    std::fs::write(root.join("runwarden.yml"), fs_config("shared", &shared, "")).unwrap();
    let mut c = bin();
    c.arg("watch")
        .arg("--config")
        .arg(root.join("runwarden.yml"))
        .arg("--report")
        .arg(root.join("report.json"))
        .arg("--work-dir")
        .arg(root)
        .args(extra)
        .arg("--")
        .args(command)
        .current_dir(root)
        .env("HOME", root.join("home"))
        .env("GITHUB_WORKSPACE", root.join("ws"));
    c
}

fn watch(root: &Path, extra: &[&str], command: &[&str]) -> Watched {
    let out = watch_cmd(root, extra, command).output().unwrap();
    let report = std::fs::read_to_string(root.join("report.json"))
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or(Value::Null);
    Watched { out, report }
}

fn verdict(r: &Value, channel: &str) -> String {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["channel"] == channel)
        .map(|f| f["verdict"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no {channel}"))
}

fn canaries_gone(root: &Path) {
    for p in ["home/.aws", "home/.npmrc", "ws/.env"] {
        assert!(
            std::fs::symlink_metadata(root.join(p)).is_err(),
            "{p} left behind"
        );
    }
}

#[test]
fn a_canary_read_with_cat_exits_3_and_its_value_is_never_printed() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let env = root.path().join("ws/.env");
    let w = watch(
        root.path(),
        &["--format", "json"],
        &["sh", "-c", &format!("cat {} >&2; echo out", env.display())],
    );
    assert_eq!(w.out.status.code(), Some(3), "{w:?}", w = w.report);
    assert_eq!(verdict(&w.report, "canary:dotenv"), "fail");
    assert_eq!(verdict(&w.report, "canary:npmrc"), "pass");
    let read = &w.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["channel"] == "canary:dotenv")
        .unwrap()["observed"][0];
    assert!(
        read["change"].as_str().unwrap().starts_with("read"),
        "{read}"
    );
    // The command's own output passed through (stdout and stderr); the
    // value it printed is its business, but runwarden never repeats it.
    let stdout = String::from_utf8_lossy(&w.out.stdout);
    let stderr = String::from_utf8_lossy(&w.out.stderr);
    assert!(stdout.starts_with("out\n"), "{stdout}");
    let token = stderr
        .lines()
        .find_map(|l| l.strip_prefix("GITHUB_TOKEN="))
        .expect("cat printed the canary")
        .to_string();
    let report = std::fs::read_to_string(root.path().join("report.json")).unwrap();
    assert!(!report.contains(&token));
    assert!(!stdout.contains(&token));
    assert_eq!(w.report["watch"]["command"][0], "sh");
    assert_eq!(w.report["watch"]["exit_code"], 0);
    canaries_gone(root.path());
}

#[test]
fn a_command_that_reads_nothing_passes_and_its_exit_status_passes_through() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = watch(
        root.path(),
        &[],
        &["sh", "-c", "ls -a \"$HOME\" >/dev/null; exit 7"],
    );
    assert_eq!(w.out.status.code(), Some(7));
    for c in ["canary:aws-credentials", "canary:npmrc", "canary:dotenv"] {
        assert_eq!(verdict(&w.report, c), "pass");
    }
    assert_eq!(w.report["summary"]["fail"], 0);
    assert_eq!(w.report["watch"]["exit_code"], 7);
    assert_eq!(w.report["mode"], "watch");
    let table = String::from_utf8_lossy(&w.out.stdout);
    assert!(table.contains("exited 7"), "{table}");
    canaries_gone(root.path());
}

#[test]
fn a_command_killed_by_a_signal_is_still_reported_and_the_canaries_removed() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = watch(
        root.path(),
        &[],
        &["sh", "-c", "echo x > shared/f; kill -KILL $$"],
    );
    assert_eq!(w.out.status.code(), Some(1), "the write FAILs first");
    assert_eq!(w.report["watch"]["signal"], "SIGKILL");
    assert_eq!(verdict(&w.report, "shared:file-name"), "fail");
    canaries_gone(root.path());
}

#[test]
fn a_watch_asked_to_stop_passes_it_on_and_still_reports() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let child = watch_cmd(root.path(), &[], &["sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the canaries are armed: the command is then running.
    let env = root.path().join("ws/.env");
    for _ in 0..500 {
        if env.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(env.exists());
    std::thread::sleep(std::time::Duration::from_millis(100));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SIGTERM passed on to the watched command")
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["watch"]["signal"], "SIGTERM");
    canaries_gone(root.path());
}

#[test]
fn a_command_that_cannot_start_is_exit_2_and_leaves_nothing() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = watch(root.path(), &[], &["/nonexistent/agent"]);
    assert_eq!(w.out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&w.out.stderr).contains("cannot run"),
        "{:?}",
        w.out
    );
    canaries_gone(root.path());
}

/// The largest resident set of a finished child, in KiB.
// Reaped by wait4 below, which std's wait cannot do: it drops the usage.
#[allow(clippy::zombie_processes)]
fn run_measured(mut c: Command) -> (i32, i64) {
    let child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (libc::WEXITSTATUS(status), usage.ru_maxrss)
}

/// The max RSS of a watch of `cmd` over 1,000 entries and over 100,000
/// (on tmpfs where the test may mount one: making 100,000 files on this
/// machine's ext4 takes from two to sixty seconds, on tmpfs one), with
/// the second's report. `first`: a file `0first` that sorts first, and
/// trees old enough for the second snapshot to trust their stat (ctime +
/// 2 < since).
fn rss_small_and_big(cmd: &str, first: bool) -> (i64, i64, Value) {
    let place = || -> (Option<Mount>, tempfile::TempDir) {
        match is_root() {
            true => (
                Some(Mount::new("tmpfs", "size=256m")),
                tempfile::tempdir().unwrap(),
            ),
            false => (None, tempfile::tempdir().unwrap()),
        }
    };
    let (small_place, big_place) = (place(), place());
    let path = |p: &(Option<Mount>, tempfile::TempDir)| {
        p.0.as_ref().map_or(p.1.path().to_path_buf(), Mount::path)
    };
    let (small, big) = (path(&small_place), path(&big_place));
    let (small, big) = (small.as_path(), big.as_path());
    for (root, dirs) in [(small, 1), (big, 100)] {
        for d in 0..dirs {
            let dir = root.join(format!("shared/d{d:03}"));
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..1000 {
                std::fs::File::create(dir.join(format!("entry-{i:04}"))).unwrap();
            }
        }
        if first {
            std::fs::write(root.join("shared/0first"), "x").unwrap();
        }
    }
    if first {
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
    let cmd = ["sh", "-c", cmd];
    let flags = ["--no-default-canaries"];
    let (code_small, rss_small) = run_measured(watch_cmd(small, &flags, &cmd));
    let (code_big, rss_big) = run_measured(watch_cmd(big, &flags, &cmd));
    assert_eq!((code_small, code_big), (1, 1));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(big.join("report.json")).unwrap()).unwrap();
    eprintln!("max RSS: 1,000 entries {rss_small} KiB, 100,000 entries {rss_big} KiB");
    (rss_small, rss_big, report)
}

#[test]
fn a_hundred_thousand_entries_are_diffed_in_bounded_memory() {
    let (rss_small, rss_big, report) = rss_small_and_big("echo x > shared/d000/new", false);
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["channel"] == "shared:file-name")
        .unwrap();
    assert_eq!(f["observed"].as_array().unwrap().len(), 1, "{f}");
    // 99,000 more entries cost less than 8 MiB (under 85 bytes each):
    // the snapshots are on disk, the diff holds only what changed.
    assert!(
        rss_big - rss_small < 8 * 1024,
        "1,000 entries: {rss_small} KiB; 100,000: {rss_big} KiB"
    );
}

/// From a review: the command deletes one file that sorts first and
/// changes nothing else. The second snapshot takes every other entry as
/// unchanged and streams none: the deleted entry, which the diff takes
/// only at the end, must not keep every entry behind it in memory.
#[test]
fn a_deletion_keeps_memory_bounded() {
    let (rss_small, rss_big, _) = rss_small_and_big("rm shared/0first", true);
    assert!(
        rss_big - rss_small < 8 * 1024,
        "1,000 entries: {rss_small} KiB; 100,000: {rss_big} KiB"
    );
}

#[test]
fn a_canary_read_then_removed_or_its_time_set_back_is_still_a_read() {
    for hide in ["rm \"$1\"", "touch -a -d '2020-01-01' \"$1\""] {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let env = root.path().join("ws/.env");
        let script = format!("cat \"$1\" >/dev/null; {hide}");
        let w = watch(
            root.path(),
            &["--detector", "atime"],
            &["sh", "-c", &script, "sh", env.to_str().unwrap()],
        );
        assert_eq!(w.out.status.code(), Some(3), "{hide}: {}", w.report);
        assert_eq!(verdict(&w.report, "canary:dotenv"), "fail", "{hide}");
        canaries_gone(root.path());
    }
}

/// A child that leaves the command's session (setsid) and writes into the
/// watched directory after the command returned: named, and no carrier is
/// PASS (what it writes after the second snapshot is not seen).
#[test]
fn processes_left_running_by_the_command_are_named_and_no_carrier_passes() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = watch(
        root.path(),
        &["--no-default-canaries"],
        &[
            "sh",
            "-c",
            "setsid sh -c 'sleep 3; echo x > shared/late' </dev/null >/dev/null 2>&1 & exit 0",
        ],
    );
    assert_eq!(w.out.status.code(), Some(1), "{}", w.report);
    assert_eq!(w.report["watch"]["survivors"].as_array().unwrap().len(), 1);
    assert!(
        String::from_utf8_lossy(&w.out.stderr).contains("still running"),
        "{:?}",
        w.out
    );
    for f in w.report["findings"].as_array().unwrap() {
        assert_ne!(f["verdict"], "pass", "{f}");
    }
    assert_eq!(verdict(&w.report, "shared:file-name"), "error");
    // (The late write lands after the report: let it, before the
    // directory goes.)
    std::thread::sleep(std::time::Duration::from_secs(2));
}

#[test]
fn a_started_watch_is_finished_by_its_token_and_a_changed_one_is_refused() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let start = |root: &Path| {
        let out = bin()
            .args(["watch", "--start", "--config"])
            .arg(root.join("runwarden.yml"))
            .arg("--work-dir")
            .arg(root)
            .current_dir(root)
            .env("HOME", root.join("home"))
            .env("GITHUB_WORKSPACE", root.join("ws"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    // The config and directories the other tests' helper makes.
    let _ = watch_cmd(root.path(), &[], &["true"]);
    let token = start(root.path());
    assert!(token.starts_with("sha256:"), "{token}");
    std::fs::write(root.path().join("shared/written"), "x").unwrap();
    let finish = |token: &str| {
        bin()
            .args(["watch", "--finish", token, "--report"])
            .arg(root.path().join("report.json"))
            .current_dir(root.path())
            .output()
            .unwrap()
    };
    let out = finish(&token);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["watch"]["scope"], "job");
    assert_eq!(verdict(&report, "shared:file-name"), "fail");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("watched the job's steps: finished"),
        "{table}"
    );
    canaries_gone(root.path());

    // A saved watch changed after the start is refused, whole.
    let token = start(root.path());
    let dir = token.splitn(3, ':').nth(2).unwrap().to_string();
    let saved = Path::new(&dir).join("watch.json");
    let text = std::fs::read_to_string(&saved).unwrap();
    std::fs::write(&saved, text.replace("\"specs\":[", "\"specs\":[ ")).unwrap();
    let out = finish(&token);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not the one the token names"),
        "{out:?}"
    );
}

/// The watch's work directory is never inside a watched surface (the
/// snapshots leave it out: a place to hide a message): asked for one
/// there, the watch takes another and says so.
#[test]
fn the_work_directory_is_never_inside_a_watched_surface() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::create_dir_all(root.path().join("shared")).unwrap();
    let c = watch_cmd(root.path(), &["--no-default-canaries"], &["true"]);
    // A later --work-dir wins over watch_cmd's: inside the surface.
    let args: Vec<std::ffi::OsString> = c.get_args().map(|a| a.to_os_string()).collect();
    let mut c2 = bin();
    c2.current_dir(root.path())
        .env("HOME", root.path().join("home"))
        .env("GITHUB_WORKSPACE", root.path().join("ws"));
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--work-dir" {
            it.next();
            c2.arg("--work-dir").arg(root.path().join("shared"));
        } else {
            c2.arg(a);
        }
    }
    drop(c);
    let out = c2.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is in the watched surface shared"), "{err}");
    assert_eq!(
        std::fs::read_dir(root.path().join("shared"))
            .unwrap()
            .count(),
        0
    );
}

/// What the command writes into runwarden's own work directory is never
/// silence; and a work directory swapped for a symlink is left alone, the
/// link's target untouched.
#[test]
fn the_work_directory_is_runwardens_own() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let w = watch(
        root.path(),
        &["--no-default-canaries"],
        &[
            "sh",
            "-c",
            "for d in runwarden-watch-*; do echo hi > $d/note; done",
        ],
    );
    assert_eq!(w.out.status.code(), Some(1), "{}", w.report);
    assert_eq!(verdict(&w.report, "shared:file-name"), "error");
    let f = &w.report["findings"].as_array().unwrap()[0];
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .contains("in its own work directory"),
        "{f}"
    );
    // The note stays: only runwarden's own files are removed.
    let left: Vec<_> = std::fs::read_dir(root.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("runwarden-watch-")
        })
        .collect();
    assert_eq!(left.len(), 1);
    assert!(left[0].path().join("note").is_file());

    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let victim = root.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    for n in ["canaries.journal", "0.before", "saved.json"] {
        std::fs::write(victim.join(n), "theirs").unwrap();
    }
    let w = watch(
        root.path(),
        &["--no-default-canaries"],
        &[
            "sh",
            "-c",
            "for d in runwarden-watch-*; do mv $d moved; ln -s victim $d; done",
        ],
    );
    assert_eq!(w.out.status.code(), Some(1), "{}", w.report);
    for n in ["canaries.journal", "0.before", "saved.json"] {
        assert_eq!(
            std::fs::read_to_string(victim.join(n)).unwrap(),
            "theirs",
            "{n}"
        );
    }
}

/// A leftover that forks and exits over and over (each pid the watch reads
/// is gone by the time it looks, its successor not yet listed) is never
/// taken for quiet: no carrier is PASS.
#[test]
fn a_leftover_that_hops_from_pid_to_pid_still_holds_the_verdicts() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let hop = "import os, time\n\
               os.setsid()\n\
               end = time.time() + 4\n\
               while time.time() < end:\n\
               \x20   if os.fork():\n\
               \x20       os._exit(0)\n\
               \x20   time.sleep(0.005)\n\
               open('shared/late', 'w').write('x')\n";
    let w = watch(
        root.path(),
        &["--no-default-canaries"],
        &["python3", "-c", hop],
    );
    assert_eq!(w.out.status.code(), Some(1), "{}", w.report);
    for f in w.report["findings"].as_array().unwrap() {
        assert_ne!(f["verdict"], "pass", "{f}");
    }
    std::thread::sleep(std::time::Duration::from_secs(3));
}

/// Without a config, watch does not watch discovery's busy places (every
/// process writes `$HOME` and the temp directory): it says how to write a
/// config, exit 2, and runs nothing.
#[test]
fn without_a_config_watch_refuses_and_says_how_to_write_one() {
    let root = tempfile::tempdir().unwrap();
    let marker = root.path().join("ran");
    let out = bin()
        .args(["watch", "--", "touch"])
        .arg(&marker)
        .current_dir(root.path())
        .env_remove("RUNWARDEN_CONFIG")
        .env("HOME", root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("watch needs a config") && err.contains("runwarden discover --write"),
        "{err}"
    );
    assert!(!marker.exists(), "the command did not run");
}
