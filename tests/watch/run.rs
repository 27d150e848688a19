//! A watch (src/watch/run/) over real surfaces: a directory, a bare git
//! remote and the cache stand-in (src/loopback/actions_cache.rs). What
//! happens between the two snapshots is attributed to exactly the carriers
//! that would carry it, and nothing else is reported; a declared carrier
//! is AUTHORIZED only inside its scope; a first snapshot the command
//! rewrote is an ERROR, a directory time set by hand is seen, and a tag
//! moved to a new commit carries the commit.

use crate::common::*;
use runwarden::loopback::actions_cache::CacheServer;
use runwarden::plan::{self, ConfigSource};
use runwarden::report::Report;
use runwarden::watch::run::{self, Ended, Options};
use std::collections::BTreeSet;
use std::path::Path;

fn plan_of(text: &str, env: &[(String, String)]) -> runwarden::plan::Plan {
    let lookup = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| std::ffi::OsString::from(v))
    };
    plan::build(
        text,
        ConfigSource {
            path: Some("runwarden.yml".into()),
            embedded_default: false,
            discovered: None,
            pinned: None,
        },
        &lookup,
    )
    .unwrap()
}

fn failing(r: &Report) -> BTreeSet<String> {
    r.findings
        .iter()
        .filter(|f| f.verdict.fails_run())
        .map(|f| f.channel.clone())
        .collect()
}

fn finding<'r>(r: &'r Report, channel: &str) -> &'r runwarden::report::Finding {
    r.findings.iter().find(|f| f.channel == channel).unwrap()
}

/// What a finding observed, `entry change`, without the quotes escaping
/// puts around every name (these tests' names need no escaping).
fn observed(r: &Report, channel: &str) -> Vec<String> {
    finding(r, channel)
        .observed
        .iter()
        .map(|o| format!("{} {}", o.entry, o.change).replace('"', ""))
        .collect()
}

fn touch_mtime(path: &Path) {
    // Read-only: a directory too (futimens needs only ownership).
    let f = std::fs::File::open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000))
        .unwrap();
}

#[test]
fn each_change_is_attributed_to_its_carriers_and_nothing_else() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir_all(shared.join("sub")).unwrap();
    std::fs::write(shared.join("keep"), "kept").unwrap();
    std::fs::write(shared.join("sub/old-name"), "renamed").unwrap();
    std::fs::write(shared.join("untouched"), "same").unwrap();
    let remote = bare_remote(root.path());
    let svc = CacheServer::start().unwrap();
    svc.add("foreign-key", "v0", "refs/heads/main", b"old");
    let env = vec![
        ("ACTIONS_RESULTS_URL".to_string(), svc.results_url()),
        ("GITHUB_API_URL".to_string(), svc.api_url()),
        ("GITHUB_REPOSITORY".to_string(), "octo/repo".to_string()),
        (
            "ACTIONS_RUNTIME_TOKEN".to_string(),
            svc.runtime_token(&[("refs/heads/main", 3)]),
        ),
        ("GITHUB_TOKEN".to_string(), svc.api_token(true)),
    ];
    let config = format!(
        "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n  - name: repo\n    type: git-remote\n    remote: {}\n  - name: cache\n    type: actions-cache\n",
        shared.display(),
        remote.display()
    );
    let plan = plan_of(&config, &env);
    let w = run::start(
        &plan,
        &Options {
            work_dir: Some(root.path().to_path_buf()),
            ..Options::default()
        },
    )
    .unwrap();

    // What the "command" does: one new file, one rename, one mtime, one
    // branch pushed with a new commit, one cache entry saved.
    std::fs::write(shared.join("new-file"), "hello").unwrap();
    std::fs::rename(shared.join("sub/old-name"), shared.join("sub/new-name")).unwrap();
    touch_mtime(&shared.join("keep"));
    let work = root.path().join("work");
    git(root.path(), &["init", "-q", "work"]);
    empty_commit(&work, "a message");
    git(
        &work,
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            "HEAD:refs/heads/agent",
        ],
    );
    svc.add("agent-key", "v1", "refs/heads/main", b"data");

    let r = w.finish(Ended::default());
    let want: BTreeSet<String> = [
        "shared:file-name",
        "shared:file-content",
        "shared:file-size",
        "shared:mtime",
        "repo:branch-name",
        "repo:commit-message",
        "repo:author-name",
        "repo:author-email",
        "repo:file-content",
        "repo:file-path",
        "cache:cache-key",
        "cache:cache-version",
        "cache:cache-content",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(failing(&r), want, "{:#?}", r.findings);
    assert_eq!(
        observed(&r, "shared:file-name"),
        vec![
            "new-file created".to_string(),
            "sub/new-name renamed from sub/old-name".to_string()
        ]
    );
    assert_eq!(
        observed(&r, "shared:file-content"),
        vec!["new-file created"]
    );
    assert_eq!(observed(&r, "shared:mtime"), vec!["keep changed: mtime"]);
    assert_eq!(
        observed(&r, "repo:branch-name"),
        vec!["refs/heads/agent created"]
    );
    assert_eq!(
        observed(&r, "cache:cache-key"),
        vec!["agent-key/v1/refs/heads/main created"]
    );
    // Everything else: not used (PASS), or a carrier no listing shows
    // (SKIPPED, with why).
    for f in &r.findings {
        if !want.contains(&f.channel) {
            assert!(
                matches!(
                    f.verdict,
                    runwarden::verdict::Verdict::Pass | runwarden::verdict::Verdict::Skipped
                ),
                "{f:?}"
            );
            assert!(f.observed.is_empty(), "{f:?}");
        }
    }
    assert_eq!(r.mode, runwarden::report::Mode::Watch);
    assert_eq!(r.exit_code(), 1);
    // The work directory (and its snapshots) was left out and is gone.
    assert_eq!(
        std::fs::read_dir(root.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("runwarden-watch-"))
            .count(),
        0
    );
}

#[test]
fn a_declared_carrier_is_authorized_only_inside_its_scope() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let remote = bare_remote(root.path());
    let config = format!(
        "version: 1\nsurfaces:\n  - name: repo\n    type: git-remote\n    remote: {}\ndeclared:\n  - channel: repo:branch-name\n    refs: \"refs/heads/memory/*\"\n    reason: agents keep notes here\n",
        remote.display()
    );
    let plan = plan_of(&config, &[]);
    let seed = root.path().join("seed");
    let push = |name: &str| {
        git(
            &seed,
            &[
                "push",
                "-q",
                remote.to_str().unwrap(),
                &format!("main:{name}"),
            ],
        )
    };
    git(&seed, &["branch", "-q", "-M", "main"]);

    let w = run::start(&plan, &Options::default()).unwrap();
    push("refs/heads/memory/one");
    let r = w.finish(Ended::default());
    let f = finding(&r, "repo:branch-name");
    assert_eq!(f.verdict, runwarden::verdict::Verdict::Authorized, "{f:?}");
    assert_eq!(r.exit_code(), 0, "{:#?}", r.findings);

    let w = run::start(&plan, &Options::default()).unwrap();
    push("refs/heads/elsewhere");
    let r = w.finish(Ended::default());
    let f = finding(&r, "repo:branch-name");
    assert_eq!(f.verdict, runwarden::verdict::Verdict::Fail, "{f:?}");
    assert!(f.detail.contains("outside the declared scope"), "{f:?}");
}

#[test]
fn a_surface_that_cannot_be_looked_at_is_an_error_and_a_type_without_snapshot_is_skipped() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let gone = root.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let config = format!(
        "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n  - name: npm\n    type: npm-registry\n    url: http://127.0.0.1:9/\n",
        gone.display()
    );
    let plan = plan_of(&config, &[]);
    let w = run::start(&plan, &Options::default()).unwrap();
    std::fs::remove_dir(&gone).unwrap();
    let r = w.finish(Ended::default());
    for f in &r.findings {
        let want = if f.surface == "shared" && f.carrier != "runner-persistence" {
            runwarden::verdict::Verdict::Error
        } else {
            runwarden::verdict::Verdict::Skipped
        };
        assert_eq!(f.verdict, want, "{f:?}");
    }
    assert_eq!(r.exit_code(), 1);
}

/// A one-directory plan over `shared`, with `extra` surface keys.
fn shared_plan(shared: &Path, extra: &str) -> runwarden::plan::Plan {
    plan_of(
        &format!(
            "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n{extra}",
            shared.display()
        ),
        &[],
    )
}

fn verdict_of(r: &Report, channel: &str) -> runwarden::verdict::Verdict {
    finding(r, channel).verdict
}

#[test]
fn a_first_snapshot_changed_on_disk_makes_the_surface_an_error() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let plan = shared_plan(&shared, "");
    let w = run::start(&plan, &Options::default()).unwrap();
    // The command writes a file, then rewrites the first snapshot so that
    // the file seems to have been there already.
    std::fs::write(shared.join("msg"), "x").unwrap();
    let before = w.work_dir().join("0.before");
    let mut forged = vec![];
    runwarden::state::line::encode(
        &runwarden::state::snapshot::listed(vec!["msg".into()], "file", &[]),
        &mut forged,
    );
    std::fs::write(&before, forged).unwrap();
    let r = w.finish(Ended::default());
    assert_eq!(
        verdict_of(&r, "shared:file-name"),
        runwarden::verdict::Verdict::Error
    );
    assert!(
        finding(&r, "shared:file-name")
            .detail
            .contains("changed on disk"),
        "{:?}",
        finding(&r, "shared:file-name")
    );
}

#[test]
fn each_entrys_xattrs_are_its_own_whatever_the_walk_entered_before() {
    // The walk reads xattrs by bare name from inside each directory: the
    // directory `x` is read after its own entry `x/x`, from its parent.
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir_all(shared.join("x")).unwrap();
    std::fs::write(shared.join("x/x"), "y").unwrap();
    std::fs::write(shared.join("z"), "").unwrap();
    if xattr::set(shared.join("x/x"), "user.m", b"1").is_err() {
        eprintln!("skipped: no user xattrs here");
        return;
    }
    let plan = shared_plan(&shared, "");
    let w = run::start(&plan, &Options::default()).unwrap();
    let first = runwarden::state::snapshot::Reader::open(&w.work_dir().join("0.before")).unwrap();
    let names: Vec<(String, bool)> = first
        .map(|e| e.unwrap())
        .map(|e| (e.key.join("/"), e.attrs.contains_key("xattr-names")))
        .collect();
    assert_eq!(
        names,
        [
            ("x/x".into(), true),
            ("x".into(), false),
            ("z".into(), false)
        ]
    );
    xattr::set(shared.join("z"), "user.m", b"2").unwrap();
    let r = w.finish(Ended::default());
    assert_eq!(
        observed(&r, "shared:xattr-name"),
        ["z changed: xattr-names, xattrs"]
    );
}

#[test]
fn an_old_tree_is_taken_as_recorded_and_every_change_in_it_still_shows() {
    // Entries older than the first look: the second snapshot takes each
    // one its stat shows unchanged as the first recorded it.
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    for d in ["a", "c", "e/f"] {
        std::fs::create_dir_all(shared.join(d)).unwrap();
    }
    for (f, text) in [
        ("a/f1", "x"),
        ("a/f2", "y"),
        ("b", "z"),
        ("d", "w"),
        ("e/f/g", "v"),
    ] {
        std::fs::write(shared.join(f), text).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(3100));
    let plan = shared_plan(&shared, "");
    let w = run::start(&plan, &Options::default()).unwrap();
    std::fs::write(shared.join("a/f1"), "q").unwrap();
    std::fs::set_permissions(shared.join("d"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_dir(shared.join("c")).unwrap();
    std::fs::write(shared.join("e/f/new"), "n").unwrap();
    let r = w.finish(Ended::default());
    let mut seen: Vec<String> = r
        .findings
        .iter()
        .flat_map(|f| {
            f.observed
                .iter()
                .map(|o| format!("{} {}", o.entry, o.change).replace('"', ""))
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "a/f1 changed: head, mtime",
            "c removed",
            "d changed: ctime",
            "e/f/new created"
        ],
        "{:#?}",
        r.findings
    );
}

#[test]
fn a_directory_time_set_by_hand_is_not_hidden_by_a_rewrite_inside_it() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir_all(shared.join("d")).unwrap();
    std::fs::write(shared.join("d/f"), "y").unwrap();
    let plan = shared_plan(&shared, "    content-reads: false\n");
    let w = run::start(&plan, &Options::default()).unwrap();
    // Same size, no content reads: only the times show the rewrite.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(shared.join("d/f"), "x").unwrap();
    touch_mtime(&shared.join("d"));
    let r = w.finish(Ended::default());
    use runwarden::verdict::Verdict;
    assert_eq!(
        verdict_of(&r, "shared:mtime"),
        Verdict::Fail,
        "{:#?}",
        r.findings
    );
    assert!(observed(&r, "shared:mtime").contains(&"d changed: mtime".to_string()));
    assert_eq!(verdict_of(&r, "shared:file-content"), Verdict::Fail);
    assert_eq!(verdict_of(&r, "shared:file-name"), Verdict::Pass);
}

#[test]
fn a_tag_moved_to_a_new_commit_carries_the_commit() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let remote = bare_remote(root.path());
    let plan = plan_of(
        &format!(
            "version: 1\nsurfaces:\n  - name: repo\n    type: git-remote\n    remote: {}\n",
            remote.display()
        ),
        &[],
    );
    let seed = root.path().join("seed");
    let w = run::start(&plan, &Options::default()).unwrap();
    empty_commit(&seed, "moved");
    git(&seed, &["tag", "-f", "v1"]);
    git(&seed, &["push", "-q", "-f", remote.to_str().unwrap(), "v1"]);
    let r = w.finish(Ended::default());
    use runwarden::verdict::Verdict;
    // v1 is a lightweight tag: it has no message to carry.
    assert_eq!(verdict_of(&r, "repo:annotated-tag-message"), Verdict::Pass);
    for c in ["commit-message", "author-name"] {
        assert_eq!(
            verdict_of(&r, &format!("repo:{c}")),
            Verdict::Fail,
            "{c}: {:#?}",
            r.findings
        );
    }
    assert_eq!(verdict_of(&r, "repo:branch-name"), Verdict::Pass);
}

#[test]
fn a_directory_time_set_by_hand_is_seen_even_when_an_entry_came_too() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir_all(shared.join("d")).unwrap();
    let plan = shared_plan(&shared, "");
    let w = run::start(&plan, &Options::default()).unwrap();
    std::fs::write(shared.join("d/new"), "x").unwrap();
    touch_mtime(&shared.join("d"));
    let r = w.finish(Ended::default());
    assert_eq!(
        verdict_of(&r, "shared:mtime"),
        runwarden::verdict::Verdict::Fail,
        "{:#?}",
        r.findings
    );
    assert!(observed(&r, "shared:mtime").contains(&"d changed: mtime".to_string()));
}

/// Entries made and removed again inside a subdirectory between the
/// snapshots: no name is left to see, but the directory's time moved,
/// which a reader sees: `mtime`, as docs/watch.md says.
#[test]
fn a_directory_time_moved_by_entries_made_and_removed_is_mtime() {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir_all(shared.join("sub")).unwrap();
    let plan = shared_plan(&shared, "");
    let w = run::start(&plan, &Options::default()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(shared.join("sub/x"), "x").unwrap();
    std::fs::create_dir(shared.join("sub/d")).unwrap();
    std::fs::remove_file(shared.join("sub/x")).unwrap();
    std::fs::remove_dir(shared.join("sub/d")).unwrap();
    let r = w.finish(Ended::default());
    use runwarden::verdict::Verdict;
    assert_eq!(
        verdict_of(&r, "shared:mtime"),
        Verdict::Fail,
        "{:#?}",
        r.findings
    );
    assert!(
        observed(&r, "shared:mtime")
            .iter()
            .any(|o| o.starts_with("sub changed")),
        "{:?}",
        observed(&r, "shared:mtime")
    );
    assert_eq!(verdict_of(&r, "shared:file-name"), Verdict::Pass);
}

/// A filesystem mounted below the watched path is not entered: what the
/// command writes inside it is not seen, so a carrier with nothing seen is
/// SKIPPED naming the mount point, never "not used".
#[test]
fn a_mount_below_the_watched_path_makes_its_carriers_skipped() {
    if crate::common::needs_root("mounting a tmpfs") {
        return;
    }
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let shared = root.path().join("shared");
    let m = shared.join("m");
    std::fs::create_dir_all(&m).unwrap();
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(&m)
        .status()
        .unwrap();
    assert!(st.success());
    let plan = shared_plan(&shared, "");
    let w = run::start(&plan, &Options::default()).unwrap();
    std::fs::write(m.join("note"), "hello").unwrap();
    let r = w.finish(Ended::default());
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(&m)
        .status();
    use runwarden::verdict::Verdict;
    for c in ["file-name", "file-content"] {
        let f = r.findings.iter().find(|f| f.carrier == c).unwrap();
        assert_eq!(f.verdict, Verdict::Skipped, "{c}: {f:?}");
        assert!(
            f.detail
                .contains("other filesystems mounted here are not entered (\"m\")"),
            "{}",
            f.detail
        );
    }
}
