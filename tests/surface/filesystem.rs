//! `type: filesystem` on real filesystems: ext4 (the disk), tmpfs, ramfs, a
//! read-only mount, a directory closed to run B (B dropped to another uid),
//! a hostile directory and a 100,000-entry one.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn fs_type(p: &Path) -> String {
    let out = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A directory on the disk the repository is on (ext4 here), not /tmp.
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn seed_foreign(dir: &Path) {
    std::fs::write(dir.join("notes.txt"), "pre-existing content\n").unwrap();
    std::fs::create_dir(dir.join("subdir")).unwrap();
    std::fs::write(dir.join("subdir/inner"), "x").unwrap();
    std::os::unix::fs::symlink("notes.txt", dir.join("link")).unwrap();
    let _ = xattr::set(dir.join("notes.txt"), "user.owner", b"someone");
}

fn assert_all(p: &Probe, surface: &str, verdict: &str) {
    let got = p.verdicts_of(surface);
    assert_eq!(got.len(), ALL_CARRIERS.len(), "{}", p.stdout);
    for (carrier, v) in &got {
        assert_eq!(
            v, verdict,
            "{surface}:{carrier}\n{}\n{}",
            p.stdout, p.stderr
        );
    }
}

fn all_carriers_fail_on(dir: &Path, persistence: &str) {
    seed_foreign(dir);
    let before = snapshot(dir);
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &fs_config("shared", dir, ""), &[]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_all(&p, "shared", "fail");
    for f in p.report["findings"].as_array().unwrap() {
        assert_control_sound(f);
        assert_eq!(f["persistence"], persistence);
        assert_eq!(f["declared"], false);
    }
    assert_eq!(
        snapshot(dir),
        before,
        "pre-existing entries changed or plants left"
    );
    assert!(leftovers(dir).is_empty());
    assert!(p.report["cleanup"]["left"].as_array().unwrap().is_empty());
    // Each planted entry once, each deleted (its intent is not another).
    assert_eq!(p.report["cleanup"]["removed"], 10);
    assert_eq!(p.report["cleanup"]["deleted"], 10);
    assert_eq!(p.report["cleanup"]["already_gone"], 0);
}

#[test]
fn every_carrier_fails_on_ext4() {
    let d = disk_dir();
    eprintln!("disk filesystem: {}", fs_type(d.path()));
    all_carriers_fail_on(d.path(), "durable");
}

#[test]
fn every_carrier_fails_on_tmpfs() {
    if needs_root("mounting tmpfs") {
        return;
    }
    let m = Mount::new("tmpfs", "size=64m");
    assert_eq!(fs_type(&m.path()), "tmpfs");
    all_carriers_fail_on(&m.path(), "transient");
}

#[test]
fn xattrs_are_skipped_where_the_filesystem_has_none() {
    if needs_root("mounting ramfs") {
        return;
    }
    let m = Mount::new("ramfs", "mode=755");
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &fs_config("ram", &m.path(), ""), &[]);
    for c in ["xattr", "xattr-name"] {
        let f = p.finding(&format!("ram:{c}"));
        assert_eq!(f["verdict"], "skipped", "{f}");
        assert!(
            f["detail"]
                .as_str()
                .unwrap()
                .contains("does not support user.* extended attributes")
        );
    }
    assert_eq!(p.verdict("ram:file-name"), "fail");
    assert!(leftovers(&m.path()).is_empty());
}

#[test]
fn a_read_only_filesystem_is_pass_with_the_refusal() {
    if needs_root("mounting a read-only tmpfs") {
        return;
    }
    let m = Mount::new("tmpfs", "size=1m,ro");
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &fs_config("ro", &m.path(), ""), &[]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_all(&p, "ro", "pass");
    for f in p.report["findings"].as_array().unwrap() {
        assert!(f["detail"].as_str().unwrap().contains("EROFS"), "{f}");
        assert_control_sound(f);
    }
}

#[test]
fn a_directory_closed_to_run_b_is_pass() {
    if needs_root("dropping run B to another uid") {
        return;
    }
    let d = disk_dir();
    let closed = d.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    // The tempdir itself must let uid 65534 reach `closed` and the control.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("closed", &closed, ""),
        &["--run-b-as", NOBODY],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_all(&p, "closed", "pass");
    assert_eq!(p.report["runs"]["b_uid"], 65534);
    for f in p.report["findings"].as_array().unwrap() {
        assert_control_sound(f);
        assert!(
            f["detail"].as_str().unwrap().contains("Permission denied"),
            "{f}"
        );
    }
    assert!(leftovers(&closed).is_empty());
}

#[test]
fn the_same_directory_open_to_run_b_fails() {
    if needs_root("dropping run B to another uid") {
        return;
    }
    let d = disk_dir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("open", d.path(), ""),
        &["--run-b-as", NOBODY],
    );
    assert_all(&p, "open", "fail");
}

#[test]
fn content_reads_false_skips_file_content() {
    let d = disk_dir();
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("s", d.path(), "    content-reads: false\n"),
        &[],
    );
    let f = p.finding("s:file-content");
    assert_eq!(f["verdict"], "skipped");
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .contains("content-reads: false")
    );
    assert_eq!(f["control"], "not-run");
    assert_eq!(p.verdict("s:file-name"), "fail");
    assert_eq!(p.report["summary"]["skipped"], 1);
    assert!(
        leftovers(d.path()).is_empty(),
        "file-content was not even planted"
    );
}

#[test]
fn declared_channels_are_authorized_and_stay_in_the_record() {
    let d = disk_dir();
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("s", d.path(), "declared:\n  - s:file-name\n  - s:mtime\n"),
        &[],
    );
    assert_eq!(p.verdict("s:file-name"), "authorized");
    assert_eq!(p.verdict("s:mtime"), "authorized");
    assert_eq!(p.finding("s:mtime")["declared"], true);
    assert_eq!(p.verdict("s:xattr"), "fail");
    assert_eq!(p.report["summary"]["authorized"], 2);
    assert_eq!(p.code, 1);
    // Declaring everything open gives exit 0.
    let all: String = ALL_CARRIERS
        .iter()
        .map(|c| format!("  - s:{c}\n"))
        .collect();
    let p = probe(
        work.path(),
        &fs_config("s", d.path(), &format!("declared:\n{all}")),
        &[],
    );
    assert_eq!(p.code, 0, "{}", p.stdout);
    assert_all(&p, "s", "authorized");
}

#[test]
fn an_unreachable_surface_is_error_and_the_others_go_on() {
    let d = disk_dir();
    let missing = d.path().join("does-not-exist");
    let cfg = format!(
        "{}  - name: fine\n    type: filesystem\n    path: {}\n",
        fs_config("gone", &missing, ""),
        serde_json::to_string(&d.path()).unwrap()
    );
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &cfg, &[]);
    assert_eq!(p.code, 1);
    assert_all(&p, "gone", "error");
    assert!(
        p.finding("gone:file-name")["detail"]
            .as_str()
            .unwrap()
            .contains("surface unreachable")
    );
    assert_all(&p, "fine", "fail");
    assert!(
        !missing.exists(),
        "nothing created in place of the missing path"
    );
}

#[test]
fn a_control_that_fails_turns_pass_into_error() {
    if needs_root("ramfs work dir and another uid") {
        return;
    }
    // The control lives in the work dir: on ramfs it cannot hold xattrs,
    // while the surface (closed to B) gives nothing to recover. A PASS here
    // would be unproven, so it must be ERROR.
    let ram = Mount::new("ramfs", "mode=755");
    let d = disk_dir();
    let closed = d.path().join("closed");
    std::fs::create_dir(&closed).unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let ram_path = ram.path();
    let p = probe(
        work.path(),
        &fs_config("closed", &closed, ""),
        &[
            "--run-b-as",
            NOBODY,
            "--work-dir",
            ram_path.to_str().unwrap(),
        ],
    );
    let f = p.finding("closed:xattr");
    assert_eq!(f["verdict"], "error", "{f}");
    assert_eq!(f["control"], "error");
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .starts_with("detector failed its control"),
        "{f}"
    );
    assert_eq!(p.verdict("closed:file-name"), "pass");
    assert_eq!(p.code, 1);
}

/// A writer blocked opening a FIFO for writing: its open returns only when
/// someone opens the FIFO for reading. Still blocked after the probe proves
/// runwarden never opened it.
struct FifoTripwire {
    opened: std::sync::Arc<std::sync::atomic::AtomicBool>,
    path: std::path::PathBuf,
}

impl FifoTripwire {
    fn new(path: &Path) -> FifoTripwire {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        let opened = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (o, p) = (opened.clone(), path.to_path_buf());
        std::thread::spawn(move || {
            let _f = std::fs::OpenOptions::new().write(true).open(&p);
            o.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        FifoTripwire {
            opened,
            path: path.to_path_buf(),
        }
    }

    fn was_opened(&self) -> bool {
        std::thread::sleep(std::time::Duration::from_millis(50));
        self.opened.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Releases the writer thread.
    fn release(&self) {
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags_nonblock()
            .open(&self.path);
    }
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}
impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}

#[test]
fn a_hostile_directory_is_survived_and_left_untouched() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let d = disk_dir();
    // The surface directory's own name is hostile too: it is printed in
    // every detail.
    let dir = d
        .path()
        .join("x\n::set-output name=a::b %0A::warning::y ##[error]z");
    std::fs::create_dir(&dir).unwrap();
    for name in [
        &b"line\nbreak"[..],
        b"::error file=a::forged",
        b"##[warning]forged",
        b"100%25 %0A::notice::x",
        b"\xff\xfe invalid utf-8",
        b"\x1b[31mred",
        b"-rf",
    ] {
        std::fs::write(dir.join(OsStr::from_bytes(name)), b"foreign").unwrap();
    }
    let tripwire = FifoTripwire::new(&dir.join("fifo-with-a-blocked-writer"));
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("socket")).unwrap();
    std::os::unix::fs::symlink("loop-b", dir.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", dir.join("loop-b")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("to-dev-zero")).unwrap();
    std::os::unix::fs::symlink("/", dir.join("to-root")).unwrap();
    let locked = dir.join("unreadable-subdir");
    std::fs::create_dir(&locked).unwrap();
    std::fs::write(locked.join("secret"), "s").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    std::fs::write(dir.join("unreadable-file"), "s").unwrap();
    std::fs::set_permissions(
        dir.join("unreadable-file"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    // A 1 TiB sparse file: reading it whole would never finish.
    std::fs::File::create(dir.join("huge"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    if is_root() {
        let c = std::ffi::CString::new(dir.join("char-dev-null").as_os_str().as_bytes()).unwrap();
        assert_eq!(
            unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) },
            0
        );
    }
    let before = snapshot(&dir);

    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    // A second, unreachable surface whose hostile path is printed in its
    // ERROR details.
    let missing = d.path().join("gone\n::set-output name=a::b ##[error]z");
    let cfg = format!(
        "{}  - name: gone\n    type: filesystem\n    path: {}\n",
        fs_config("hostile", &dir, ""),
        serde_json::to_string(&missing.to_string_lossy()).unwrap()
    );
    let p = probe(work.path(), &cfg, &[]);
    eprintln!("hostile probe took {:?}", started.elapsed());
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_all(&p, "hostile", "fail");
    assert_all(&p, "gone", "error");
    assert!(!tripwire.was_opened(), "runwarden opened a FIFO");
    tripwire.release();
    assert_eq!(snapshot(&dir), before);
    assert!(leftovers(&dir).is_empty());

    // Nothing printed can start a workflow command or forge one.
    for line in p.stdout.lines().chain(p.stderr.lines()) {
        assert!(
            !line.trim_start().starts_with("::"),
            "command line printed: {line}"
        );
        assert!(!line.contains("##["), "legacy command printed: {line}");
    }
    let rows = p
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL") || l.starts_with("ERROR"))
        .count();
    // 9 FAIL rows for the hostile directory, and one ERROR row for the
    // directory that is gone (its 10 carriers failed for one reason).
    assert_eq!(
        rows, 10,
        "one line per row, no line breaks injected:\n{}",
        p.stdout
    );
    // The path is printed, escaped, where it is part of the detail.
    let detail = p.finding("gone:file-name")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(detail.contains(r#"gone\n::set-output"#), "{detail}");
    assert!(p.stdout.contains(r#"gone\n::set-output"#), "{}", p.stdout);
    // The json format is just as safe.
    let out = bin()
        .args(["probe", "--format", "json", "--config"])
        .arg(work.path().join("runwarden.yml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("##["));
    assert!(text.lines().all(|l| !l.trim_start().starts_with("::")));
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_directory_of_100000_foreign_entries_gives_the_right_verdicts() {
    let d = disk_dir();
    let dir = d.path();
    for i in 0..100_000u32 {
        let name = format!("foreign-{i:06}");
        if i % 10 == 0 {
            std::fs::write(dir.join(&name), format!("payload {i}\n")).unwrap();
        } else {
            std::fs::File::create(dir.join(&name)).unwrap();
        }
    }
    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let p = probe(work.path(), &fs_config("busy", dir, ""), &[]);
    eprintln!("100k-entry probe took {:?}", started.elapsed());
    assert_all(&p, "busy", "fail");
    let listed = p.finding("busy:file-name")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(leftovers(dir).is_empty());
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 100_000, "{listed}");
}

mod cleanup {
    //! Cleanup removes only what run A planted, checked first: these call
    //! the surface directly on a real directory and change entries between
    //! plant and cleanup the way a hostile neighbour could.
    use runwarden::marker::Key;
    use runwarden::nonce::Nonce;
    use runwarden::surface::{self, CleanupOutcome, Instance, PlantJob, PlantOutcome, RunCtx};
    use serde_json::Value;
    use std::path::Path;

    fn open(dir: &Path) -> Box<dyn Instance> {
        let ty = surface::by_name("filesystem").unwrap();
        let settings = serde_json::json!({ "path": dir, "content-reads": true });
        ty.open(&settings).unwrap()
    }

    static KEY: std::sync::LazyLock<Key> = std::sync::LazyLock::new(|| Key::new(None));

    fn ctx() -> RunCtx<'static> {
        RunCtx {
            probe_id: "testprobe",
            key: &KEY,
            surface: "",
        }
    }

    fn job(carrier: &str) -> PlantJob {
        PlantJob {
            key: carrier.into(),
            carrier: carrier.into(),
            nonce: Nonce::generate().unwrap(),
            scope: None,
            beacon: None,
        }
    }

    /// Plants one carrier; returns the journalled entry (after its
    /// intent, journalled before the syscall).
    fn plant(s: &dyn Instance, carrier: &str) -> Value {
        let mut entries = Vec::new();
        let outcome = s.plant(&ctx(), &job(carrier), &mut |e| entries.push(e));
        assert!(
            matches!(outcome, PlantOutcome::Planted { .. }),
            "{outcome:?}"
        );
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[0]["intent"]["name"], entries[1]["name"]);
        entries.pop().unwrap()
    }

    fn name(entry: &Value) -> String {
        entry["name"].as_str().unwrap().to_string()
    }

    #[test]
    fn removes_its_plant_once_and_is_idempotent() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        let e = plant(s.as_ref(), "file-content");
        assert!(name(&e).starts_with(".runwarden-testprobe-"));
        assert_eq!(s.cleanup(&e), CleanupOutcome::Removed);
        assert_eq!(s.cleanup(&e), CleanupOutcome::Gone);
        assert!(std::fs::read_dir(d.path()).unwrap().next().is_none());
    }

    #[test]
    fn an_intent_alone_removes_only_what_run_a_was_creating() {
        // Run A journalled its intent and stopped: the entry may or may
        // not exist. Cleanup removes it when it has the intended type,
        // owner and age, and leaves anything older of that name alone.
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        let mut entries = Vec::new();
        s.plant(&ctx(), &job("mtime"), &mut |e| entries.push(e));
        let intent = entries[0].clone();
        let name = intent["intent"]["name"].as_str().unwrap().to_string();
        assert_eq!(
            s.cleanup_all(std::slice::from_ref(&intent)),
            [CleanupOutcome::Removed]
        );
        assert_eq!(
            s.cleanup_all(std::slice::from_ref(&intent)),
            [CleanupOutcome::Gone]
        );
        // Someone's file of that name, born before the intent.
        let p = d.path().join(&name);
        std::fs::write(&p, "theirs").unwrap();
        let mut later = intent.clone();
        later["intent"]["after"][0] =
            serde_json::json!(intent["intent"]["after"][0].as_i64().unwrap() + 10);
        assert!(
            matches!(&s.cleanup_all(&[later])[0], CleanupOutcome::Left { reason } if reason.contains("not ours"))
        );
        // Or of another type.
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(matches!(
            &s.cleanup_all(std::slice::from_ref(&intent))[0],
            CleanupOutcome::Left { .. }
        ));
        assert!(p.is_dir());
    }

    #[test]
    fn leaves_a_replaced_file() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        let e = plant(s.as_ref(), "file-name");
        let p = d.path().join(name(&e));
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "someone else's now").unwrap();
        assert!(
            matches!(s.cleanup(&e), CleanupOutcome::Left { reason } if reason.contains("replaced"))
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "someone else's now");
    }

    #[test]
    fn never_follows_a_symlink_swapped_in() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let s = open(d.path());
        let e = plant(s.as_ref(), "mtime");
        let p = d.path().join(name(&e));
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        assert!(matches!(s.cleanup(&e), CleanupOutcome::Left { .. }));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            std::fs::symlink_metadata(&p)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn leaves_a_planted_directory_someone_filled() {
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        let e = plant(s.as_ref(), "directory-name");
        let inner = d.path().join(name(&e)).join("theirs");
        std::fs::write(&inner, "x").unwrap();
        assert!(
            matches!(s.cleanup(&e), CleanupOutcome::Left { reason } if reason.contains("no longer empty"))
        );
        assert_eq!(std::fs::read_to_string(&inner).unwrap(), "x");
    }

    #[test]
    fn leaves_everything_when_the_surface_path_names_another_directory() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("shared");
        std::fs::create_dir(&dir).unwrap();
        let s = open(&dir);
        let e = plant(s.as_ref(), "file-name");
        // Move the planted directory away and put a new one, holding an
        // entry of the same name, in its place.
        std::fs::rename(&dir, parent.path().join("moved")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(name(&e)), "new").unwrap();
        assert!(
            matches!(s.cleanup(&e), CleanupOutcome::Left { reason } if reason.contains("another directory"))
        );
        assert_eq!(std::fs::read_to_string(dir.join(name(&e))).unwrap(), "new");
    }

    #[test]
    fn never_overwrites_an_existing_name() {
        // Plant names are fresh per probe id and nonce; even so, creation
        // is O_EXCL: a name that exists is a failed plant, never a write.
        let d = tempfile::tempdir().unwrap();
        let s = open(d.path());
        let existing = d.path().join(".runwarden-testprobe-file-content");
        std::fs::write(&existing, "theirs").unwrap();
        let mut entries = Vec::new();
        let outcome = s.plant(&ctx(), &job("file-content"), &mut |e| entries.push(e));
        assert!(
            matches!(outcome, PlantOutcome::Error { ref reason } if reason.contains("EEXIST")),
            "{outcome:?}"
        );
        // The intent, then its retraction: nothing for cleanup to touch.
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert_eq!(entries[1]["retract"], entries[0]);
        let outcomes = s.cleanup_all(&entries);
        assert!(
            outcomes.iter().all(|o| *o == CleanupOutcome::Superseded),
            "{outcomes:?}"
        );
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "theirs");
    }
}

#[test]
fn a_directory_private_to_each_run_is_pass_after_a_full_scan() {
    // /proc/self/cwd resolves, in each run, to that run's own working
    // directory: A plants in its own, B scans its own and finds nothing,
    // the way per-run directories behave. Cleanup runs as A and finds A's.
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("per-run", Path::new("/proc/self/cwd"), ""),
        &[],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_all(&p, "per-run", "pass");
    for f in p.report["findings"].as_array().unwrap() {
        assert_control_sound(f);
        assert!(
            f["detail"]
                .as_str()
                .unwrap()
                .contains("none carried the nonce")
                || f["carrier"] == "runner-persistence",
            "{f}"
        );
    }
    assert_eq!(p.report["cleanup"]["removed"], 10);
    assert!(p.report["cleanup"]["left"].as_array().unwrap().is_empty());
}

/// The carriers whose entry has a name both runs derive from the probe id:
/// run B reaches them by lookup alone.
const BY_AGREED_NAME: [&str; 6] = [
    "file-content",
    "symlink-target",
    "xattr",
    "xattr-name",
    "mtime",
    "file-size",
];

/// A directory a colluding pair can write and look up in but not list:
/// the carriers with an agreed name are open (FAIL), the name carriers are
/// closed (PASS, "B could not list"). The whole probe runs as uid 65534,
/// so root's right to read any directory plays no part.
fn probe_unlistable(dir: &Path) {
    // Everything the unprivileged probe needs: its work dir, its config,
    // its report.
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let cfg = work.path().join("runwarden.yml");
    std::fs::write(&cfg, fs_config("dropbox", dir, "")).unwrap();
    let report = work.path().join("report.json");
    use std::os::unix::process::CommandExt;
    let out = bin()
        .args(["probe", "--config"])
        .arg(&cfg)
        .arg("--report")
        .arg(&report)
        .arg("--work-dir")
        .arg(work.path())
        .env("HOME", work.path())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let p = finish(out, &report);
    for c in ALL_CARRIERS.iter().chain(["runner-persistence"].iter()) {
        let f = p.finding(&format!("dropbox:{c}"));
        let detail = f["detail"].as_str().unwrap();
        assert_control_sound(f);
        if BY_AGREED_NAME.contains(c) {
            assert_eq!(f["verdict"], "fail", "{c}: {f}\n{}", p.stderr);
            assert!(detail.contains("looked up by its agreed name"), "{c}: {f}");
        } else {
            assert_eq!(f["verdict"], "pass", "{c}: {f}\n{}", p.stderr);
            assert!(
                detail.contains("B could not list the directory"),
                "{c}: {f}"
            );
        }
    }
    assert!(
        p.report["cleanup"]["left"].as_array().unwrap().is_empty(),
        "{}",
        p.report["cleanup"]
    );
    assert!(leftovers(dir).is_empty(), "{:?}", leftovers(dir));
}

#[test]
fn a_directory_that_can_be_written_but_not_listed_is_open_by_agreed_names() {
    if needs_root("probing as another uid") {
        return;
    }
    let d = disk_dir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // 0333, owned by the probing user: write and search, no read.
    let own = d.path().join("write-only");
    std::fs::create_dir(&own).unwrap();
    sys_chown(&own, 65534, 65534);
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o333)).unwrap();
    probe_unlistable(&own);
    // 1733, the classic drop box, owned by root: others write and search.
    let dropbox = d.path().join("dropbox");
    std::fs::create_dir(&dropbox).unwrap();
    std::fs::set_permissions(&dropbox, std::fs::Permissions::from_mode(0o1733)).unwrap();
    probe_unlistable(&dropbox);
}

fn sys_chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
}

/// A default ACL that gives new entries no permissions beyond their
/// owner's: what a directory with `setfacl -d -m g::-,o::-` does. Written
/// as the kernel's `system.posix_acl_default` value (version 2; entries of
/// tag, permissions, id).
fn owner_only_default_acl(dir: &Path) {
    let mut v = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 7u16), (0x04, 0), (0x20, 0)] {
        v.extend(tag.to_le_bytes());
        v.extend(perm.to_le_bytes());
        v.extend(u32::MAX.to_le_bytes());
    }
    xattr::set(dir, "system.posix_acl_default", &v).unwrap();
}

#[test]
fn a_default_acl_does_not_close_what_the_sender_can_chmod() {
    if needs_root("dropping run B to another uid") {
        return;
    }
    let d = disk_dir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = d.path().join("private");
    std::fs::create_dir(&private).unwrap();
    owner_only_default_acl(&private);
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("shared", &private, ""),
        &["--run-b-as", NOBODY],
    );
    // The default ACL makes A's files 0600, but A owns them: as a sender
    // would, it sets the mode it asked for (0644), and B reads them all. A
    // default ACL is no access control against a colluding sender.
    for c in ALL_CARRIERS {
        let f = p.finding(&format!("shared:{c}"));
        assert_eq!(f["verdict"], "fail", "{c}: {f}\n{}", p.stderr);
        assert_control_sound(f);
    }
    assert!(leftovers(&private).is_empty());
    // The same directory without the ACL: A's files are 0644, all open.
    let shared = d.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let p = probe(
        work.path(),
        &fs_config("shared", &shared, ""),
        &["--run-b-as", NOBODY],
    );
    assert_all(&p, "shared", "fail");
}

#[test]
fn a_symlink_named_like_a_beacon_is_a_notice_not_an_error() {
    let d = disk_dir();
    std::os::unix::fs::symlink("/etc/passwd", d.path().join(".runwarden-beacon-x")).unwrap();
    std::os::unix::fs::symlink("nowhere", d.path().join(".runwarden-beacon-y")).unwrap();
    let before = snapshot(d.path());
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &fs_config("tmp", d.path(), ""), &[]);
    let f = p.finding("tmp:runner-persistence");
    assert_eq!(f["verdict"], "pass", "{f}\n{}", p.stderr);
    let notices: Vec<&serde_json::Value> = p.report["notices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "malformed-beacon")
        .collect();
    assert_eq!(notices.len(), 2, "{}", p.report["notices"]);
    assert_eq!(p.report["summary"]["error"], 0);
    assert_eq!(snapshot(d.path()), before);
}

#[test]
fn an_instance_on_tmpfs_is_transient_whatever_the_verdict() {
    if needs_root("mounting tmpfs") {
        return;
    }
    // Four inodes besides the root: the later plants fail (ENOSPC), so
    // the probe has ERROR findings beside its FAILs.
    let m = Mount::new("tmpfs", "size=1m,nr_inodes=5");
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &fs_config("small", &m.path(), ""), &[]);
    assert!(
        p.report["summary"]["error"].as_u64().unwrap() > 0,
        "{}",
        p.stdout
    );
    assert!(
        p.report["summary"]["fail"].as_u64().unwrap() > 0,
        "{}",
        p.stdout
    );
    for f in p.report["findings"].as_array().unwrap() {
        assert_eq!(f["persistence"], "transient", "{f}");
    }
    assert!(leftovers(&m.path()).is_empty());
}

/// One directory under two names in one config: a symlinked path is the
/// same way there, probed once under the first name (the second says so,
/// and nothing collides); a read-only bind mount of it is another way, with
/// other access, probed on its own, and never hides the open one.
#[test]
fn two_names_for_one_directory_are_probed_once() {
    let d = disk_dir();
    let link = d.path().with_extension("link");
    std::os::unix::fs::symlink(d.path(), &link).unwrap();
    let cfg = fs_config("first", d.path(), "")
        + &format!(
            "  - name: by-link\n    type: filesystem\n    path: {}\n",
            serde_json::to_string(&link.to_string_lossy()).unwrap()
        );
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &cfg, &[]);
    let _ = std::fs::remove_file(&link);
    assert_all(&p, "first", "fail");
    for f in p.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["surface"] == "by-link")
    {
        assert_eq!(f["verdict"], "skipped", "{f}");
        assert!(
            f["detail"]
                .as_str()
                .unwrap()
                .contains("the same as surface \"first\""),
            "{f}"
        );
    }
    assert!(
        p.report["notices"].as_array().is_none_or(|n| n.is_empty()),
        "{}",
        p.report["notices"]
    );
    assert!(leftovers(d.path()).is_empty());
    if !is_root() {
        return;
    }
    // A read-only bind mount first: it must not stand for the open one.
    let ro = d.path().with_extension("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let mount = |args: &[&str]| {
        assert!(
            std::process::Command::new("mount")
                .args(args)
                .status()
                .unwrap()
                .success()
        )
    };
    mount(&["--bind", d.path().to_str().unwrap(), ro.to_str().unwrap()]);
    mount(&["-o", "remount,bind,ro", ro.to_str().unwrap()]);
    let cfg = fs_config("view", &ro, "")
        + &fs_config("data", d.path(), "").replace("version: 1\nsurfaces:\n", "");
    let p = probe(work.path(), &cfg, &[]);
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&ro)
        .status();
    assert_eq!(p.verdict("data:file-name"), "fail", "{}", p.stdout);
    assert_ne!(p.code, 0, "{}", p.stdout);
}

/// One directory under two names that are two ways there with the same
/// access (a writable bind mount: not the same path, so each is probed):
/// the names a plant agrees on end in a tag of the surface's name, so
/// neither collides with the other, and both are open (issue 38, hole 5:
/// on 0.11.0 six carriers of the second surface were ERROR, EEXIST).
#[test]
fn a_directory_under_two_names_is_probed_under_each_without_a_collision() {
    if needs_root("a bind mount") {
        return;
    }
    let d = disk_dir();
    let rw = d.path().with_extension("rw");
    std::fs::create_dir_all(&rw).unwrap();
    let bound = std::process::Command::new("mount")
        .args(["--bind", d.path().to_str().unwrap(), rw.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(bound.success());
    let cfg = fs_config("one", d.path(), "")
        + &fs_config("two", &rw, "").replace("version: 1\nsurfaces:\n", "");
    let work = tempfile::tempdir().unwrap();
    let p = probe(work.path(), &cfg, &[]);
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&rw)
        .status();
    assert_all(&p, "one", "fail");
    assert_all(&p, "two", "fail");
    assert!(leftovers(d.path()).is_empty(), "{:?}", leftovers(d.path()));
}

/// A directory run B may read but not search (`r--`): an agreed-name
/// lookup it was refused reads as refused, never as "not there".
#[test]
fn a_refused_lookup_is_said_to_be_refused() {
    if needs_root("dropping run B to another uid") {
        return;
    }
    let d = disk_dir();
    let listed = d.path().join("listed");
    std::fs::create_dir(&listed).unwrap();
    std::fs::set_permissions(&listed, std::fs::Permissions::from_mode(0o744)).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &fs_config("listed", &listed, ""),
        &["--run-b-as", NOBODY],
    );
    let f = |c: &str| {
        p.report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["channel"] == format!("listed:{c}"))
            .unwrap()
            .clone()
    };
    let mtime = f("mtime");
    assert_eq!(mtime["verdict"], "pass", "{}", p.stdout);
    let detail = mtime["detail"].as_str().unwrap();
    assert!(detail.contains(": refused (permission denied)"), "{mtime}");
    assert!(!detail.contains(": not there"), "{mtime}");
}
