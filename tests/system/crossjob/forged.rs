//! Forged receipts (src/receipt.rs, the engine's ownership check in
//! src/surface/mod.rs `cleanup_owned`): the job where the agent ran can
//! edit the receipt that travels to the cleanup job. A foreign entry in it
//! removes nothing and is listed as not runwarden's; with a key, a receipt
//! edited at all is refused whole. (Every surface type's own forgeries are
//! in tests/surface/conformance.rs.)

use super::run;
use crate::common::*;
use serde_json::{Value, json};
use std::path::Path;

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write(p: &Path, v: &Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// A local bare remote with `main` and `v1`, and a config naming it.
fn remote() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let remote = bare_remote(root.path());
    std::fs::write(root.path().join("rw.yml"), origin_config(&remote)).unwrap();
    (root, remote)
}

#[test]
fn a_receipt_naming_main_deletes_nothing_and_says_so() {
    let (root, remote) = remote();
    let main = git(&remote, &["rev-parse", "refs/heads/main"])
        .trim()
        .to_string();
    let v1 = git(&remote, &["rev-parse", "refs/tags/v1"])
        .trim()
        .to_string();
    let p = run(
        root.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "fx-1"],
        &[],
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    let path = root.path().join("runwarden-receipt-fx-1.json");
    let mut r = read(&path);
    let entries = r["surfaces"][0]["entries"].as_array_mut().unwrap();
    let planted = entries.len();
    entries.push(json!({ "ref": "refs/heads/main", "sha": main }));
    entries.push(json!({ "ref": "refs/tags/v1", "sha": v1 }));
    // A ref in runwarden's form for this probe id, pointing at a foreign
    // commit: the name alone is no proof.
    entries.push(json!({ "ref": "refs/heads/runwarden/fx-1/../../main", "sha": main }));
    let forged = root.path().join("forged.json");
    write(&forged, &r);
    let c = run(
        root.path(),
        &["cleanup", "--config", "rw.yml", "--receipt", "forged.json"],
        &[],
    );
    assert_eq!(
        c.code, 1,
        "a forged receipt never cleans green\n{}",
        c.stdout
    );
    let now = refs(&remote);
    assert!(now.contains(&format!("{main} refs/heads/main")), "{now}");
    assert!(now.contains(&format!("{v1} refs/tags/v1")), "{now}");
    assert!(!now.contains("fx-1"), "its own refs went: {now}");
    let refused = c.report["cleanup"]["refused"].as_array().unwrap();
    assert_eq!(refused.len(), 3, "{}", c.stdout);
    for l in refused {
        assert!(
            l["reason"]
                .as_str()
                .unwrap()
                .starts_with("not runwarden's: left alone"),
            "{l}"
        );
    }
    assert!(
        c.stdout
            .contains("cleanup refused 3 journal entries that are not runwarden's"),
        "{}",
        c.stdout
    );
    assert!(planted > 0);
    assert!(
        forged.exists(),
        "a receipt that named foreign entries stays the record"
    );
}

#[test]
fn by_probe_id_a_foreign_ref_under_a_derived_name_is_not_taken() {
    let (root, remote) = remote();
    let env = [("RUNWARDEN_KEY", "k-forge")];
    let p = run(
        root.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "fx-2"],
        &env,
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    // Someone moves a derived name to a commit of theirs.
    let r = read(&root.path().join("runwarden-receipt-fx-2.json"));
    let branch = r["surfaces"][0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["ref"].as_str())
        // (Its agreed name ends in the surface's tag.)
        .find(|r| r.contains("/commit-message-"))
        .unwrap()
        .to_string();
    git(&remote, &["update-ref", &branch, "refs/heads/main"]);
    let c = run(
        root.path(),
        &["cleanup", "--config", "rw.yml", "--probe-id", "fx-2"],
        &env,
    );
    // Left, and said by name: a ref under a plant's name stays on the
    // remote (0.11.0 left it without a word and exited 0).
    assert_eq!(c.code, 1, "{}\n{}", c.stdout, c.stderr);
    let now = refs(&remote);
    assert!(
        now.contains(&branch),
        "a ref whose commit is not runwarden's was deleted: {now}"
    );
    assert_eq!(now.matches("fx-2").count(), 1, "{now}");
    let left = c.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{}", c.report["cleanup"]);
    assert!(
        left[0]["entry"].as_str().unwrap().contains(&branch),
        "{}",
        left[0]
    );
    assert!(
        left[0]["reason"]
            .as_str()
            .unwrap()
            .contains("its object is not one runwarden writes"),
        "{}",
        left[0]
    );
    assert!(c.stdout.contains(&branch), "{}", c.stdout);
}

#[test]
fn a_receipt_edited_under_a_key_is_refused_whole() {
    let (root, remote) = remote();
    let before = refs(&remote);
    let env = [("RUNWARDEN_KEY", "k-mac")];
    let p = run(
        root.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "fx-3"],
        &env,
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    let path = root.path().join("runwarden-receipt-fx-3.json");
    let genuine = read(&path);
    assert!(
        genuine["mac"].as_str().is_some_and(|m| m.len() == 64),
        "{genuine}"
    );

    // One entry more: the MAC no longer verifies; nothing is touched.
    let mut edited = genuine.clone();
    edited["surfaces"][0]["entries"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "ref": "refs/heads/main", "sha": "0".repeat(40) }));
    write(&root.path().join("edited.json"), &edited);
    let c = run(
        root.path(),
        &["cleanup", "--config", "rw.yml", "--receipt", "edited.json"],
        &env,
    );
    assert_eq!(c.code, 2, "{}", c.stderr);
    assert!(
        c.stderr.contains("MAC does not verify with RUNWARDEN_KEY"),
        "{}",
        c.stderr
    );
    assert!(c.stderr.contains("refused whole"), "{}", c.stderr);

    // The MAC taken off (or a 0.7.0 receipt): refused under a key too.
    let mut stripped = genuine.clone();
    stripped.as_object_mut().unwrap().remove("mac");
    write(&root.path().join("stripped.json"), &stripped);
    let c = run(
        root.path(),
        &[
            "cleanup",
            "--config",
            "rw.yml",
            "--receipt",
            "stripped.json",
        ],
        &env,
    );
    assert_eq!(c.code, 2, "{}", c.stderr);
    assert!(
        c.stderr.contains("carries no MAC but RUNWARDEN_KEY is set"),
        "{}",
        c.stderr
    );
    // A recover reads receipts the same way.
    let c = run(
        root.path(),
        &[
            "recover",
            "--config",
            "rw.yml",
            "--probe-id",
            "fx-3",
            "--receipt",
            "edited.json",
        ],
        &env,
    );
    assert_eq!(c.code, 2, "{}", c.stderr);
    assert_ne!(refs(&remote), before, "the plant is still there");

    // The genuine receipt cleans up everything.
    let c = run(
        root.path(),
        &[
            "cleanup",
            "--config",
            "rw.yml",
            "--receipt",
            path.to_str().unwrap(),
        ],
        &env,
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(refs(&remote), before);
}

#[test]
fn a_foreign_file_in_a_receipt_stays_where_it_is() {
    use std::os::unix::fs::MetadataExt;
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("rw.yml"), fs_config("shared", &shared, "")).unwrap();
    let p = run(
        work.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "fx-4"],
        &[],
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    // Foreign entries named like runwarden's, with their real identity.
    std::fs::write(shared.join(".runwarden-notes"), "theirs").unwrap();
    std::fs::write(shared.join(".runwarden-beacon-other"), "{}").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", shared.join(".runwarden-fx-4-link")).unwrap();
    let dir = std::fs::metadata(&shared).unwrap();
    let mut r = read(&work.path().join("runwarden-receipt-fx-4.json"));
    let entries = r["surfaces"][0]["entries"].as_array_mut().unwrap();
    for name in [
        ".runwarden-notes",
        ".runwarden-beacon-other",
        ".runwarden-fx-4-link",
    ] {
        let m = std::fs::symlink_metadata(shared.join(name)).unwrap();
        let kind = if m.file_type().is_symlink() {
            "symlink"
        } else {
            "file"
        };
        entries.push(json!({
            "name": name, "kind": kind, "dev": m.dev(), "ino": m.ino(),
            "dir_dev": dir.dev(), "dir_ino": dir.ino(), "btime": null,
        }));
        entries.push(json!({ "intent": {
            "name": name, "kind": kind, "dir_dev": dir.dev(), "dir_ino": dir.ino(),
            "uid": 0, "after": [0, 0],
        }}));
    }
    write(&work.path().join("forged.json"), &r);
    let c = run(
        work.path(),
        &["cleanup", "--config", "rw.yml", "--receipt", "forged.json"],
        &[],
    );
    assert_eq!(c.code, 1, "{}", c.stdout);
    // Each once, by its name (an entry and its intent are one thing:
    // 0.11.0 listed each twice, once as "?").
    let refused: Vec<String> = c.report["cleanup"]["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["entry"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(refused.len(), 3, "{refused:?}");
    for name in [
        ".runwarden-notes",
        ".runwarden-beacon-other",
        ".runwarden-fx-4-link",
    ] {
        assert_eq!(
            refused.iter().filter(|e| e.contains(name)).count(),
            1,
            "{refused:?}"
        );
    }
    assert_eq!(
        c.report["cleanup"]["refused"].as_array().unwrap().len(),
        3,
        "{}",
        c.stdout
    );
    let mut left: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ".runwarden-beacon-other",
            ".runwarden-fx-4-link",
            ".runwarden-notes"
        ]
    );
    assert!(std::fs::metadata("/etc/passwd").is_ok());
}

#[test]
fn a_retraction_that_also_names_a_ref_removes_nothing() {
    let (root, remote) = remote();
    let main = git(&remote, &["rev-parse", "refs/heads/main"])
        .trim()
        .to_string();
    let p = run(
        root.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "fx-5"],
        &[],
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    let mut r = read(&root.path().join("runwarden-receipt-fx-5.json"));
    let entries = r["surfaces"][0]["entries"].as_array_mut().unwrap();
    let first = entries[0].clone();
    // It passes as the retraction of a real plant, and names `main`.
    entries.push(json!({ "retract": first["ref"], "ref": "refs/heads/main", "sha": main }));
    entries.push(json!({ "retract": first, "ref": "refs/tags/v1", "sha": main }));
    write(&root.path().join("forged.json"), &r);
    let c = run(
        root.path(),
        &["cleanup", "--config", "rw.yml", "--receipt", "forged.json"],
        &[],
    );
    assert_eq!(c.code, 1, "{}", c.stdout);
    let now = refs(&remote);
    assert!(
        now.contains("refs/heads/main") && now.contains("refs/tags/v1"),
        "{now}"
    );
    assert!(
        !now.contains("fx-5"),
        "its own plant was hidden from cleanup: {now}"
    );
    assert_eq!(
        c.report["cleanup"]["refused"].as_array().unwrap().len(),
        2,
        "{}",
        c.stdout
    );
    assert!(root.path().join("forged.json").exists());
}

#[test]
fn in_actions_a_receipt_of_another_probe_is_refused() {
    let (root, remote) = remote();
    let before = refs(&remote);
    let key = ("RUNWARDEN_KEY", "k-other");
    let p = run(
        root.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "victim-1"],
        &[key],
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    // A genuine, signed receipt of a concurrent probe, handed to this
    // run's cleanup: this run's probe id is gh-777-1.
    let env = [
        key,
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_RUN_ID", "777"),
        ("GITHUB_RUN_ATTEMPT", "1"),
    ];
    let c = run(
        root.path(),
        &[
            "cleanup",
            "--config",
            "rw.yml",
            "--receipt",
            "runwarden-receipt-victim-1.json",
        ],
        &env,
    );
    assert_eq!(c.code, 2, "{}", c.stderr);
    assert!(
        c.stderr
            .contains("is the receipt of probe victim-1, not gh-777-1"),
        "{}",
        c.stderr
    );
    assert_ne!(refs(&remote), before, "the other probe's plant was cleaned");
    // Named on purpose, it is cleaned.
    let c = run(
        root.path(),
        &[
            "cleanup",
            "--config",
            "rw.yml",
            "--probe-id",
            "victim-1",
            "--receipt",
            "runwarden-receipt-victim-1.json",
        ],
        &env,
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(refs(&remote), before);
}

#[test]
fn a_scoped_plant_inside_a_pattern_is_runwardens_own() {
    let root = tempfile::tempdir().unwrap();
    let remote = bare_remote(root.path());
    let before = refs(&remote);
    let cfg = format!(
        "{}declared:\n  - channel: origin:branch-name\n    refs: \"refs/heads/memory-*-x\"\n    reason: agents keep notes here\n",
        origin_config(&remote)
    );
    std::fs::write(root.path().join("rw.yml"), cfg).unwrap();
    let p = run(root.path(), &["probe", "--config", "rw.yml"], &[]);
    assert!(
        p.report["cleanup"]["refused"]
            .as_array()
            .is_none_or(|r| r.is_empty()),
        "{}",
        p.stdout
    );
    assert_eq!(refs(&remote), before, "{}", p.stdout);
}
