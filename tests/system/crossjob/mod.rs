//! Across jobs: `plant`, `recover` and `cleanup` as separate invocations
//! with different environments (src/engine/modes.rs `plant`/`recover`/`cleanup`,
//! src/receipt.rs, the beacons of src/marker.rs), on a shared directory
//! and on a smart-HTTP git server.

mod drill;
mod forged;
use crate::common::githttp::GitHttp;
use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;

/// One `runwarden <args>` in `dir` (where receipts land by default) with
/// `env` on top of a clean environment; reads `--report` when given.
fn run(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Probe {
    let report = dir.join("report.json");
    let _ = std::fs::remove_file(&report);
    let mut cmd = bin();
    cmd.current_dir(dir).args(args).envs(env.iter().copied());
    if args[0] != "plant" {
        cmd.arg("--report").arg(&report);
    }
    finish(cmd.output().unwrap(), &report)
}

/// The environment of a job in workflow run 100 of octo/app.
fn job(name: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_REPOSITORY", "octo/app"),
        ("GITHUB_WORKFLOW", "isolation"),
        ("GITHUB_RUN_ID", "100"),
        ("GITHUB_RUN_ATTEMPT", "1"),
        ("GITHUB_JOB", name),
        ("RUNWARDEN_KEY", "k-3f9a1c"),
    ]
}

fn seed_foreign(dir: &Path) {
    std::fs::write(dir.join("notes.txt"), "pre-existing\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    // A foreign entry that looks like one of ours but is not.
    std::fs::write(dir.join(".runwarden-gh-100-1-notes"), "theirs").unwrap();
}

fn notices(p: &Probe, kind: &str) -> Vec<Value> {
    p.report["notices"]
        .as_array()
        .map(|a| a.iter().filter(|n| n["kind"] == kind).cloned().collect())
        .unwrap_or_default()
}

#[test]
fn plant_in_one_job_is_recovered_in_another_and_cleaned_by_receipt() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    seed_foreign(&shared);
    let before = snapshot(&shared);
    std::fs::write(work.path().join("rw.yml"), fs_config("shared", &shared, "")).unwrap();

    // The probe id defaults to gh-<run id>-<attempt> in both jobs.
    let plant = run(work.path(), &["plant", "--config", "rw.yml"], &job("plant"));
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let receipt_path = work.path().join("runwarden-receipt-gh-100-1.json");
    let receipt: Value =
        serde_json::from_str(&std::fs::read_to_string(&receipt_path).unwrap()).unwrap();
    assert_eq!(receipt["schema"], "runwarden-receipt/1");
    assert_eq!(receipt["probe_id"], "gh-100-1");
    assert_eq!(receipt["key"], "configured");
    assert_eq!(receipt["origin"]["job"], "plant");
    // Each entry twice: its intent, journalled before the syscall, then
    // its full record.
    let entries = receipt["surfaces"][0]["entries"].as_array().unwrap();
    assert_eq!(
        entries.iter().filter(|e| e.get("intent").is_some()).count(),
        9
    );
    assert_eq!(entries.iter().filter(|e| e.get("ino").is_some()).count(), 9);
    assert_eq!(entries.len(), 18);
    assert!(!receipt.to_string().contains("k-3f9a1c"), "the key leaked");
    assert_eq!(leftovers(&shared).len(), 9 + 1);

    let rec = run(
        work.path(),
        &[
            "recover",
            "--config",
            "rw.yml",
            "--receipt-via",
            "artifact runwarden-receipt-0",
        ],
        &job("recover"),
    );
    assert_eq!(rec.code, 1, "{}\n{}", rec.stdout, rec.stderr);
    assert_eq!(
        rec.report["cross_job"]["receipt_via"],
        "artifact runwarden-receipt-0"
    );
    assert!(
        crate::common::unwrapped(&rec.stdout).contains(
            "carried by artifact runwarden-receipt-0: a declared channel between the jobs"
        ),
        "{}",
        rec.stdout
    );
    assert_eq!(rec.report["mode"], "recover");
    assert_eq!(rec.report["probe_id"], "gh-100-1");
    assert_eq!(rec.report["key"], "configured");
    assert_eq!(
        rec.report["cross_job"]["receipt"],
        "runwarden-receipt-gh-100-1.json"
    );
    assert_eq!(rec.report["cross_job"]["plant_origin"]["job"], "plant");
    for (carrier, v) in rec.verdicts_of("shared") {
        assert_eq!(v, "fail", "{carrier}\n{}", rec.stdout);
    }
    assert_eq!(rec.verdict("shared:runner-persistence"), "pass");
    for f in rec.report["findings"].as_array().unwrap() {
        assert_control_sound(f);
    }
    assert!(rec.report["notices"].is_null(), "{}", rec.report["notices"]);
    assert!(rec.report["cleanup"]["left"].as_array().unwrap().is_empty());

    // A recover with another key counts none of them, and names the
    // markers it cannot verify.
    let mut other = job("recover");
    other.retain(|(k, _)| *k != "RUNWARDEN_KEY");
    other.push(("RUNWARDEN_KEY", "another-key"));
    std::fs::rename(&receipt_path, work.path().join("kept.json")).unwrap();
    let wrong = run(work.path(), &["recover", "--config", "rw.yml"], &other);
    assert_eq!(wrong.code, 1, "{}", wrong.stdout);
    assert!(wrong.report["cross_job"]["receipt"].is_null());
    // Without the receipt nothing shows a plant happened: finding none of
    // the markers this key derives is no PASS.
    for (carrier, v) in wrong.verdicts_of("shared") {
        assert_eq!(v, "error", "{carrier}\n{}", wrong.stdout);
    }
    assert_eq!(
        notices(&wrong, "forged-marker").len(),
        3,
        "{}",
        wrong.stdout
    );

    // Cleanup by receipt: everything goes, and so does the receipt, which
    // has nothing left to say.
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--receipt", "kept.json"],
        &[],
    );
    // The receipt is signed: without the key it is refused whole.
    assert_eq!(c.code, 2, "{}\n{}", c.stdout, c.stderr);
    assert!(
        c.stderr
            .contains("the receipt is signed but RUNWARDEN_KEY is not set"),
        "{}",
        c.stderr
    );
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--receipt", "kept.json"],
        &[("RUNWARDEN_KEY", "k-3f9a1c")],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(c.report["mode"], "cleanup");
    assert_eq!(c.report["cleanup"]["removed"], 9);
    assert!(c.report["cleanup"]["left"].as_array().unwrap().is_empty());
    assert!(
        !work.path().join("kept.json").exists(),
        "the receipt stayed"
    );
    assert!(c.stderr.contains("removed the receipt"), "{}", c.stderr);
    assert_eq!(snapshot(&shared), before, "pre-existing entries changed");
}

#[test]
fn cleanup_by_probe_id_removes_only_entries_that_prove_they_are_ours() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("rw.yml"), fs_config("shared", &shared, "")).unwrap();
    let env = [("RUNWARDEN_KEY", "k")];
    let plant = run(
        work.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "p7"],
        &env,
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    // A neighbour swaps the content marker for a file of its own under
    // the same name.
    // (Its agreed name ends in a tag of the surface's name.)
    let swapped = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .starts_with(".runwarden-p7-file-content-")
            })
        })
        .unwrap();
    std::fs::remove_file(&swapped).unwrap();
    std::fs::write(&swapped, "someone else's").unwrap();

    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "p7"],
        &env,
    );
    assert_eq!(c.code, 1, "{}", c.stdout);
    assert_eq!(c.report["cleanup"]["removed"], 8);
    let left = c.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{}", c.stdout);
    assert!(
        left[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not provably ours"),
        "{}",
        left[0]
    );
    assert_eq!(std::fs::read_to_string(&swapped).unwrap(), "someone else's");
    // Without the key the names are someone else's: nothing is removed.
    std::fs::remove_file(&swapped).unwrap();
    let plant = run(
        work.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "p8"],
        &env,
    );
    assert_eq!(plant.code, 0);
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "p8"],
        &[],
    );
    assert_eq!(c.report["cleanup"]["removed"], 0, "{}", c.stdout);
    assert_eq!(leftovers(&shared).len(), 9);
}

#[test]
fn a_recover_whose_plant_never_ran_is_never_green() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let remote = bare_remote(work.path());
    let cfg = format!(
        "{}  - name: origin\n    type: git-remote\n    remote: {}\n",
        fs_config("shared", &shared, ""),
        serde_json::to_string(&remote).unwrap()
    );
    std::fs::write(work.path().join("rw.yml"), cfg).unwrap();
    // Someone made a ref in this probe's marker form: reported, not counted.
    let main = git(&remote, &["rev-parse", "refs/heads/main"]);
    let forged = format!("refs/heads/runwarden/never/{}", "0".repeat(32));
    git(&remote, &["update-ref", &forged, main.trim()]);
    // A typo in a later job's probe id: nothing was planted under it.
    let p = run(
        work.path(),
        &["recover", "--config", "rw.yml", "--probe-id", "never"],
        &[],
    );
    let forgeries = notices(&p, "forged-marker");
    assert_eq!(forgeries.len(), 1, "{}", p.stdout);
    assert_eq!(forgeries[0]["surface"], "origin");
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert!(p.report["cross_job"]["receipt"].is_null());
    assert_eq!(p.report["cross_job"]["missing_receipt_allowed"], false);
    assert!(
        p.stdout
            .contains("no plant receipt: nothing shows a plant happened"),
        "{}",
        p.stdout
    );
    assert!(p.stderr.contains("no plant receipt found"), "{}", p.stderr);
    // Nothing to look for and nothing that shows a plant (the commit id
    // only the plant knows): ERROR as well, SKIPPED when accepted.
    let expect = |f: &serde_json::Value, otherwise: &str| -> String {
        if f["carrier"] == "runner-persistence" {
            // It looks for other probes' beacons: no receipt needed.
            "pass".into()
        } else {
            otherwise.into()
        }
    };
    for f in p.report["findings"].as_array().unwrap() {
        assert_eq!(f["verdict"], expect(f, "error"), "{f}");
    }
    let detail = p.finding("shared:file-name")["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "no plant receipt: nothing shows a plant happened, so finding nothing is no PASS"
        ),
        "{detail}"
    );
    // Accepted on purpose: SKIPPED, and the run is green.
    let p = run(
        work.path(),
        &[
            "recover",
            "--config",
            "rw.yml",
            "--probe-id",
            "never",
            "--allow-missing-receipt",
        ],
        &[],
    );
    git(&remote, &["update-ref", "-d", &forged]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(p.report["cross_job"]["missing_receipt_allowed"], true);
    for f in p.report["findings"].as_array().unwrap() {
        assert_eq!(f["verdict"], expect(f, "skipped"), "{f}");
    }
    assert!(
        p.finding("origin:unreachable-object")["detail"]
            .as_str()
            .unwrap()
            .contains("no plant receipt")
    );
}

/// A smart-HTTP remote with foreign refs, and a work directory whose
/// `rw.yml` names it as surface `origin`, reached as the writer.
struct HttpOrigin {
    _root: tempfile::TempDir,
    _srv: GitHttp,
    remote: std::path::PathBuf,
    before: String,
    work: tempfile::TempDir,
}

impl HttpOrigin {
    fn new() -> HttpOrigin {
        let root = tempfile::tempdir().unwrap();
        let remote = bare_remote(root.path());
        let before = refs(&remote);
        let srv = GitHttp::writer_and_reader(root.path(), true);
        let url = srv.url("writer", "w-secret-4f1c9a", "remote.git");
        let work = tempfile::tempdir().unwrap();
        std::fs::write(
            work.path().join("rw.yml"),
            format!(
                "version: 1\nsurfaces:\n  - name: origin\n    type: git-remote\n    remote: {}\n",
                serde_json::to_string(&url).unwrap()
            ),
        )
        .unwrap();
        HttpOrigin {
            _root: root,
            _srv: srv,
            remote,
            before,
            work,
        }
    }
}

#[test]
fn plant_recover_and_cleanup_over_smart_http() {
    let h = HttpOrigin::new();
    let (remote, before, work) = (&h.remote, &h.before, &h.work);
    let ids = ["--config", "rw.yml", "--probe-id", "xj-1"];
    let plant = run(work.path(), &[&["plant"][..], &ids].concat(), &job("plant"));
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let receipt = std::fs::read_to_string(work.path().join("runwarden-receipt-xj-1.json")).unwrap();
    assert!(!receipt.contains("w-secret-4f1c9a"), "the password leaked");

    // A job of a later workflow run recovers. With the receipt: everything
    // but the transient ref is open.
    let mut later = job("recover");
    later.retain(|(k, _)| *k != "GITHUB_RUN_ID");
    later.push(("GITHUB_RUN_ID", "101"));
    let rec = run(work.path(), &[&["recover"][..], &ids].concat(), &later);
    for f in rec.report["findings"].as_array().unwrap() {
        let expect = if f["carrier"] == "deleted-ref" {
            "pass"
        } else {
            "fail"
        };
        assert_eq!(f["verdict"], expect, "{f}\n{}", rec.stderr);
        assert_control_sound(f);
    }
    assert_eq!(rec.report["cross_job"]["plant_origin"]["run_id"], "100");
    // Without it: the same, except the unreachable commit, whose id only
    // the plant knew.
    std::fs::rename(
        work.path().join("runwarden-receipt-xj-1.json"),
        work.path().join("kept.json"),
    )
    .unwrap();
    let bare = run(work.path(), &[&["recover"][..], &ids].concat(), &later);
    assert_eq!(bare.verdict("origin:unreachable-object"), "error");
    assert_eq!(bare.verdict("origin:commit-message"), "fail");
    assert_eq!(bare.verdict("origin:branch-name"), "fail");
    for p in [&plant, &rec, &bare] {
        for text in [&p.stdout, &p.stderr, &p.report.to_string()] {
            assert!(!text.contains("w-secret-4f1c9a"), "the password leaked");
        }
    }

    // Cleanup by receipt: one push; the remote is as it was. (In Actions a
    // receipt given alone must be this workflow run's own probe's: this
    // one's probe id is named.)
    let c = run(
        work.path(),
        &[
            "cleanup",
            "--config",
            "rw.yml",
            "--receipt",
            "kept.json",
            "--probe-id",
            "xj-1",
        ],
        &job("cleanup"),
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    // Ten refs; the deleted ref's two journal lines (created, then
    // retracted by run A itself) count as nothing.
    assert_eq!(c.report["cleanup"]["removed"], 10, "{}", c.stdout);
    assert_eq!(c.report["cleanup"]["deleted"], 10, "{}", c.stdout);
    assert_eq!(&refs(remote), before, "the remote's refs changed");
    // By probe id afterwards: nothing left to find.
    let c = run(
        work.path(),
        &[&["cleanup"][..], &ids].concat(),
        &job("cleanup"),
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(c.report["cleanup"]["removed"], 0, "{}", c.stdout);
}

#[test]
fn cleanup_by_probe_id_on_smart_http_removes_exactly_the_derived_refs() {
    let h = HttpOrigin::new();
    let (remote, before, work) = (&h.remote, &h.before, &h.work);
    let env = [("RUNWARDEN_KEY", "k")];
    for id in ["xj-2", "xj-3"] {
        let p = run(
            work.path(),
            &["plant", "--config", "rw.yml", "--probe-id", id],
            &env,
        );
        assert_eq!(p.code, 0, "{}", p.stderr);
    }
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "xj-2"],
        &env,
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(c.report["cleanup"]["removed"], 10, "{}", c.stdout);
    let now = refs(remote);
    assert!(!now.contains("xj-2"), "{now}");
    assert!(
        now.contains("xj-3"),
        "another probe's refs were touched:\n{now}"
    );
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "xj-3"],
        &env,
    );
    assert_eq!(c.code, 0);
    assert_eq!(&refs(remote), before, "the remote's refs changed");
}

/// A beacon planted by a job of another repository.
fn plant_beacon(work: &Path, probe_id: &str, key: Option<&str>) {
    let mut env = vec![
        ("GITHUB_REPOSITORY", "octo/other"),
        ("GITHUB_WORKFLOW", "nightly"),
        ("GITHUB_RUN_ID", "5"),
        ("RUNNER_NAME", "shared-runner-3"),
    ];
    if let Some(k) = key {
        env.push(("RUNWARDEN_KEY", k));
    }
    let p = run(
        work,
        &[
            "plant",
            "--config",
            "rw.yml",
            "--beacon",
            "--probe-id",
            probe_id,
        ],
        &env,
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
}

#[test]
fn beacons_of_other_repositories_are_attributed_and_forgeries_are_not_counted() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("rw.yml"), fs_config("shared", &shared, "")).unwrap();
    plant_beacon(work.path(), "nightly-5", None);
    let real = std::fs::read_to_string(shared.join(".runwarden-beacon-nightly-5")).unwrap();
    // Forgeries: an altered copy (its MAC no longer verifies), a
    // truncated one, and a name-marker of the recovering probe that no
    // plant made. A renamed copy of the real one is still the real one.
    std::fs::write(
        shared.join(".runwarden-beacon-altered"),
        real.replace("octo/other", "octo/victim"),
    )
    .unwrap();
    std::fs::write(
        shared.join(".runwarden-beacon-cut"),
        &real[..real.len() / 2],
    )
    .unwrap();
    std::fs::write(shared.join(".runwarden-beacon-renamed"), &real).unwrap();
    std::fs::write(shared.join(format!(".runwarden-me-{}", "0".repeat(32))), "").unwrap();

    let p = run(
        work.path(),
        &[
            "recover",
            "--config",
            "rw.yml",
            "--probe-id",
            "me",
            "--allow-missing-receipt",
        ],
        &[],
    );
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    let f = p.finding("shared:runner-persistence");
    assert_eq!(f["verdict"], "fail", "{f}");
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.contains("octo/other") && detail.contains("nightly-5"),
        "{detail}"
    );
    for (carrier, v) in p.verdicts_of("shared") {
        assert_eq!(v, "skipped", "{carrier}: forged markers must not count");
    }
    let beacons = notices(&p, "beacon");
    assert_eq!(beacons.len(), 2, "{}", p.stdout);
    assert_eq!(beacons[0]["beacon"]["origin"]["repository"], "octo/other");
    assert_eq!(beacons[0]["beacon"]["origin"]["runner"], "shared-runner-3");
    assert_eq!(notices(&p, "unverified-beacon").len(), 1, "{}", p.stdout);
    assert_eq!(notices(&p, "malformed-beacon").len(), 1, "{}", p.stdout);
    assert_eq!(notices(&p, "forged-marker").len(), 1, "{}", p.stdout);
    assert!(p.stdout.contains("notice: shared: unverified-beacon"));

    // With a key configured, an unkeyed beacon proves nothing: anyone could
    // have written it.
    let p = run(
        work.path(),
        &["recover", "--config", "rw.yml", "--probe-id", "me"],
        &[("RUNWARDEN_KEY", "k")],
    );
    assert_eq!(p.verdict("shared:runner-persistence"), "pass");
    assert_eq!(notices(&p, "beacon").len(), 0);

    // An in-job probe on the same directory finds it too, and a declared
    // runner-persistence is AUTHORIZED.
    let p = probe(
        work.path(),
        &fs_config(
            "shared",
            &shared,
            "declared:\n  - shared:runner-persistence\n",
        ),
        &[],
    );
    assert_eq!(p.verdict("shared:runner-persistence"), "authorized");
    assert_eq!(notices(&p, "beacon").len(), 2);
}

#[test]
fn ten_thousand_foreign_markers_are_listed_once_and_capped_in_the_report() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("rw.yml"), fs_config("shared", &shared, "")).unwrap();
    for i in 0..10_000 {
        std::fs::write(
            shared.join(format!(".runwarden-beacon-f{i}")),
            format!("{{\"runwarden_beacon\":1,\"probe_id\":\"f{i}\",\"mac\":\"00\"}}"),
        )
        .unwrap();
    }
    let p = run(
        work.path(),
        &[
            "recover",
            "--config",
            "rw.yml",
            "--probe-id",
            "me",
            "--allow-missing-receipt",
        ],
        &[],
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(p.verdict("shared:runner-persistence"), "pass");
    let all = p.report["notices"].as_array().unwrap();
    assert_eq!(all.len(), 101);
    assert_eq!(all[100]["kind"], "omitted");
    assert!(
        all[100]["detail"]
            .as_str()
            .unwrap()
            .starts_with("9900 more notices")
    );
}

#[test]
fn cleanup_after_a_plant_killed_halfway() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    seed_foreign(&shared);
    let before = snapshot(&shared);
    // The second surface is a git server that accepts and never answers:
    // run A has planted the directory and hangs in its push when killed.
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/r.git",
        hang.local_addr().unwrap().port()
    );
    let cfg = format!(
        "{}  - name: stuck\n    type: git-remote\n    remote: {}\n",
        fs_config("shared", &shared, ""),
        serde_json::to_string(&url).unwrap()
    );
    std::fs::write(work.path().join("both.yml"), cfg).unwrap();
    std::fs::write(work.path().join("fs.yml"), fs_config("shared", &shared, "")).unwrap();
    let mut plant = bin()
        .current_dir(work.path())
        .args(["plant", "--config", "both.yml", "--probe-id", "killed"])
        // Its private directory outlives a SIGKILL: keep it in the test's.
        .arg("--work-dir")
        .arg(work.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while leftovers(&shared).len() < 10 {
        assert!(
            std::time::Instant::now() < deadline,
            "plant never got going"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Nine markers and the foreign look-alike: run A is now in the push.
    plant.kill().unwrap();
    plant.wait().unwrap();
    assert!(!work.path().join("runwarden-receipt-killed.json").exists());
    let dirs = |w: &std::path::Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(w)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("runwarden-killed-"))
            .collect();
        v.sort();
        v
    };
    // The killed plant's private directory (a, b, control) outlived it.
    assert_eq!(dirs(work.path()).len(), 1);

    // Beside it: one of a probe of this id that is running (its lock
    // held), and one without a lock (as runwarden 0.11.0 made them).
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o711)).unwrap()
    };
    let (live, old) = (
        work.path().join("runwarden-killed-00000000000a"),
        work.path().join("runwarden-killed-00000000000b"),
    );
    for d in [&live, &old] {
        std::fs::create_dir_all(d.join("a")).unwrap();
        mode(d);
    }
    let lock = std::fs::File::create(live.join("lock")).unwrap();
    use std::os::fd::AsRawFd as _;
    assert_eq!(unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) }, 0);
    let wd = work.path().to_str().unwrap();
    let c = run(
        work.path(),
        &[
            "cleanup",
            "--config",
            "fs.yml",
            "--probe-id",
            "killed",
            "--work-dir",
            wd,
        ],
        &[],
    );
    // Nine plants and the dead probe's directory (0.11.0 left it); the
    // other two stay, each said.
    assert_eq!(c.code, 1, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(
        c.report["cleanup"]["removed"], 10,
        "{}",
        c.report["cleanup"]
    );
    assert_eq!(snapshot(&shared), before);
    assert_eq!(
        dirs(work.path()),
        [
            "runwarden-killed-00000000000a",
            "runwarden-killed-00000000000b"
        ]
    );
    let left = c.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 2, "{}", c.report["cleanup"]);
    for (l, says) in left
        .iter()
        .zip(["is running and holds it", "it has no lock"])
    {
        assert_eq!(l["surface"], "(work directory)");
        assert!(l["reason"].as_str().unwrap().contains(says), "{l}");
    }
    drop(lock);
    drop(hang);
}

/// In GitHub Actions the receipt goes to RUNNER_TEMP, never into the
/// checkout; recover finds it there, and a complete cleanup removes it.
#[test]
fn in_actions_the_receipt_goes_to_runner_temp_and_goes_after_cleanup() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    let temp = work.path().join("runner-temp");
    std::fs::create_dir(&shared).unwrap();
    std::fs::create_dir(&temp).unwrap();
    std::fs::write(work.path().join("rw.yml"), fs_config("shared", &shared, "")).unwrap();
    let temp_s = temp.to_string_lossy().into_owned();
    let env = [
        ("RUNWARDEN_KEY", "k"),
        ("GITHUB_ACTIONS", "true"),
        ("RUNNER_TEMP", temp_s.as_str()),
    ];
    let plant = run(
        work.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "p9"],
        &env,
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    let receipt = temp.join("runwarden-receipt-p9.json");
    assert!(receipt.is_file(), "{}", plant.stderr);
    assert!(!work.path().join("runwarden-receipt-p9.json").exists());
    let rec = run(
        work.path(),
        &["recover", "--config", "rw.yml", "--probe-id", "p9"],
        &env,
    );
    assert!(
        rec.report["cross_job"]["receipt"].is_string(),
        "{}",
        rec.report
    );
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "p9"],
        &env,
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(
        !receipt.exists(),
        "the receipt stayed after a complete cleanup"
    );
}

/// A receipt found (not given) is kept when it lists a surface the config
/// no longer has: cleanup by probe id did not look there, and the receipt
/// is the only record of those plants.
#[test]
fn a_receipt_listing_a_surface_the_config_dropped_is_kept() {
    let work = tempfile::tempdir().unwrap();
    let (one, two) = (work.path().join("one"), work.path().join("two"));
    std::fs::create_dir(&one).unwrap();
    std::fs::create_dir(&two).unwrap();
    let both = format!(
        "{}  - name: two\n    type: filesystem\n    path: {}\n",
        fs_config("one", &one, ""),
        serde_json::to_string(two.to_str().unwrap()).unwrap()
    );
    std::fs::write(work.path().join("rw.yml"), &both).unwrap();
    let env = [("RUNWARDEN_KEY", "k")];
    let plant = run(
        work.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "p5"],
        &env,
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    std::fs::write(work.path().join("rw.yml"), fs_config("one", &one, "")).unwrap();
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "p5"],
        &env,
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(
        work.path().join("runwarden-receipt-p5.json").exists(),
        "{}",
        c.stderr
    );
    assert!(
        std::fs::read_dir(&two).unwrap().next().is_some(),
        "two was not cleaned"
    );
}
