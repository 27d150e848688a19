//! Canary credentials (src/watch/canary/) against real readers: `cat`,
//! a bare `open(2)` and an `mmap`, each seen by every detector that can see
//! it (fanotify needs root; atime sees reads, not bare opens); a command
//! that reads nothing leaves no trace; the canaries are removed afterwards,
//! but never one that was replaced; nothing is ever written over.

use crate::common;
use runwarden::watch::canary::{self, Detector, Kind, Spec};
use std::path::{Path, PathBuf};
use std::process::Command;

fn specs(home: &Path, work: &Path) -> Vec<Spec> {
    canary::default_specs(home, work)
}

/// Runs `program args…` with the test's runner variables stripped; what
/// it prints (a canary's value, among others) is kept out of the test log
/// unless it fails.
fn run(program: &str, args: &[&str]) {
    let mut c = Command::new(program);
    common::strip_runner_env(&mut c);
    let out = c.args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn detectors() -> Vec<Detector> {
    let mut d = vec![Detector::Inotify, Detector::Atime];
    if common::is_root() {
        d.insert(0, Detector::Fanotify);
    }
    d
}

/// Arms the default canaries in fresh directories with `d`.
fn armed(d: Detector) -> (tempfile::TempDir, canary::Armed, Vec<PathBuf>) {
    // Not under /tmp's tmpfs options by chance: the target dir's
    // filesystem, as the runner's home would be.
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = root.path().join("home");
    let work = root.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut journal = Vec::new();
    let a = canary::arm(&specs(&home, &work), Some(d), &mut |p| {
        journal.push(p.to_path_buf())
    })
    .unwrap();
    assert_eq!(a.detector(), d);
    (root, a, journal)
}

#[test]
fn a_read_with_cat_is_seen_by_every_detector() {
    for d in detectors() {
        let (_root, mut a, journal) = armed(d);
        let paths: Vec<PathBuf> = a.paths().iter().map(|p| p.to_path_buf()).collect();
        assert_eq!(paths.len(), 3);
        // The journal heard of each before it was made: ~/.aws first.
        assert!(journal[0].ends_with(".aws"), "{journal:?}");
        assert!(journal.contains(&paths[0]));
        run("cat", &[paths[1].to_str().unwrap()]);
        let reads = a.collect().unwrap();
        assert_eq!(reads.len(), 1, "{d:?}: {reads:?}");
        assert_eq!(reads[0].path, paths[1], "{d:?}");
        if d == Detector::Fanotify {
            assert!(reads[0].pid.is_some());
        }
        assert!(a.disarm().is_empty());
        for p in &paths {
            assert!(!p.exists(), "{p:?} left");
        }
        // The directory made for ~/.aws/credentials goes too.
        assert!(!paths[0].parent().unwrap().exists());
    }
}

#[test]
fn a_bare_open_and_an_mmap_are_seen() {
    for d in detectors() {
        let (_root, mut a, _) = armed(d);
        let paths: Vec<PathBuf> = a.paths().iter().map(|p| p.to_path_buf()).collect();
        // open(2) and close, nothing read.
        run(
            "python3",
            &[
                "-c",
                "import os,sys; os.close(os.open(sys.argv[1], os.O_RDONLY))",
                paths[0].to_str().unwrap(),
            ],
        );
        // Mapped and read through the mapping, no read(2).
        run(
            "python3",
            &[
                "-c",
                "import mmap,sys\nf=open(sys.argv[1],'rb')\nm=mmap.mmap(f.fileno(),0,access=mmap.ACCESS_READ)\nm[0]",
                paths[2].to_str().unwrap(),
            ],
        );
        let reads = a.collect().unwrap();
        let seen: Vec<&Path> = reads.iter().map(|r| r.path.as_path()).collect();
        // atime sees what was read (the mapping), not a bare open.
        if d != Detector::Atime {
            assert!(seen.contains(&paths[0].as_path()), "{d:?}: {reads:?}");
        }
        assert!(seen.contains(&paths[2].as_path()), "{d:?}: {reads:?}");
        assert!(!seen.contains(&paths[1].as_path()), "{d:?}: {reads:?}");
        assert!(a.disarm().is_empty());
    }
}

#[test]
fn a_command_that_reads_nothing_leaves_no_trace() {
    for d in detectors() {
        let (_root, mut a, _) = armed(d);
        let paths: Vec<PathBuf> = a.paths().iter().map(|p| p.to_path_buf()).collect();
        // Listing the directory and stat-ing the file are not reads.
        run("ls", &["-la", paths[1].parent().unwrap().to_str().unwrap()]);
        run("stat", &[paths[1].to_str().unwrap()]);
        assert_eq!(a.collect().unwrap(), vec![], "{d:?}");
        assert!(a.disarm().is_empty());
    }
}

#[test]
fn nothing_is_written_over_and_a_replaced_canary_is_left() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = root.path().join("home");
    let work = root.path().join("work");
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    // Real credentials already there: never touched.
    std::fs::write(home.join(".aws/credentials"), "real").unwrap();
    // A symlink where .npmrc would go: not followed.
    std::os::unix::fs::symlink("/etc/passwd", home.join(".npmrc")).unwrap();
    let a = canary::arm(&specs(&home, &work), Some(Detector::Inotify), &mut |_| {}).unwrap();
    assert_eq!(a.paths(), vec![work.join(".env").as_path()]);
    assert_eq!(a.skipped().len(), 2, "{:?}", a.skipped());
    // The command replaces the one canary with a file of its own.
    std::fs::remove_file(work.join(".env")).unwrap();
    std::fs::write(work.join(".env"), "theirs").unwrap();
    let left = a.disarm();
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        std::fs::read_to_string(work.join(".env")).unwrap(),
        "theirs"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".aws/credentials")).unwrap(),
        "real"
    );
    assert!(
        std::fs::symlink_metadata(home.join(".npmrc"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn canaries_look_like_credentials_and_are_secrets() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let specs = vec![
        Spec {
            path: root.path().join("credentials"),
            kind: Kind::AwsCredentials,
        },
        Spec {
            path: root.path().join("npmrc"),
            kind: Kind::Npmrc,
        },
        Spec {
            path: root.path().join("env"),
            kind: Kind::DotEnv,
        },
    ];
    let a = canary::arm(&specs, Some(Detector::Inotify), &mut |_| {}).unwrap();
    let aws = std::fs::read_to_string(root.path().join("credentials")).unwrap();
    let npm = std::fs::read_to_string(root.path().join("npmrc")).unwrap();
    let env = std::fs::read_to_string(root.path().join("env")).unwrap();
    assert!(aws.contains("aws_access_key_id = AKIA"), "{aws}");
    assert!(
        npm.starts_with("//registry.npmjs.org/:_authToken=npm_"),
        "{npm}"
    );
    assert!(
        env.starts_with("GITHUB_TOKEN=ghp_") && env.trim().len() == 13 + 40,
        "{env}"
    );
    // Every value is redacted wherever it would be printed.
    let token = env.trim().trim_start_matches("GITHUB_TOKEN=");
    assert!(!runwarden::redact::text(&format!("x {token} y")).contains(token));
    assert!(a.disarm().is_empty());
}

/// A canary the command swapped for a FIFO is left as it is, and taking
/// the canaries away never blocks on it (an open of a FIFO waits for a
/// writer unless it is non-blocking).
#[test]
fn a_canary_replaced_with_a_fifo_never_hangs_the_watch() {
    let (_root, a, _) = armed(Detector::Inotify);
    let fifo = a.paths()[1].to_path_buf();
    std::fs::remove_file(&fifo).unwrap();
    run("mkfifo", &[fifo.to_str().unwrap()]);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(a.disarm());
    });
    let left = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("removing the canaries hung on a FIFO");
    assert_eq!(left.len(), 1, "{left:?}");
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
}
