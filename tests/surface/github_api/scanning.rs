//! `code-scanning` (opt-in) against the loopback GitHub, whose code
//! scanning routes tests/system/loopback/github_scanning.rs proves against
//! `@octokit/rest`. A permissive token opens it, the restricted default closes
//! it with GitHub's refusal named, run B's refused read is a PASS that
//! names it, cleanup leaves nothing of the probe's and nothing foreign
//! touched, and a forged journal entry removes nothing.

use super::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use runwarden::marker::Key;
use runwarden::nonce::Nonce;
use runwarden::surface::{self, CleanupOutcome, PlantJob, PlantOutcome, RunCtx};
use serde_json::{Value, json};
use std::path::Path;

const REF: &str = "refs/heads/feature";

fn config(extra: &str) -> String {
    format!("version: 1\nsurfaces:\n  - name: github\n    type: github-api\n{extra}")
}

fn run(dir: &Path, svc: &GitHubServer, config: &str, env: &[(&str, &str)], args: &[&str]) -> Probe {
    let mut all = vec![("GITHUB_REF", REF)];
    all.extend_from_slice(env);
    super::run(dir, svc, config, &all, args)
}

/// A foreign analysis on the plant's ref (another tool's, its own
/// category), the newest of its set.
fn foreign_analysis(svc: &GitHubServer, category: &str, sarif_id: &str) -> u64 {
    svc.add(
        "analysis",
        REPO,
        json!({ "ref": REF, "commit_sha": SHA, "category": category, "sarif_id": sarif_id,
                "tool": { "name": "CodeQL", "version": "2.0", "guid": null },
                "_results": [], "_rules": [] }),
    )
}

#[test]
fn code_scanning_opens_with_a_permissive_token_and_cleanup_deletes_only_its_analyses() {
    let svc = server();
    let foreign = foreign_analysis(&svc, "/language:rust", "f0f0-foreign");
    let token = svc.token(WRITE_ALL);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config("    code-scanning: true\n"),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(
        p.verdict("github:code-scanning"),
        "fail",
        "{}\n{}",
        p.report,
        p.stderr
    );
    let d = p.finding("github:code-scanning")["detail"].to_string();
    assert!(
        d.contains("code-scanning/analyses?ref=refs%2Fheads%2Ffeature"),
        "{d}"
    );
    // The upload went to the configured ref and commit, as its tool.
    let up = svc.sarifs();
    let ours: Vec<_> = up.iter().filter(|u| u.repo == REPO).collect();
    // (The control's upload went to the control's own server.)
    assert_eq!(ours.len(), 1, "{ours:?}");
    assert!(
        ours.iter()
            .all(|u| u.fields["ref"] == REF && u.fields["commit_sha"] == SHA)
    );
    assert!(
        ours.iter()
            .all(|u| u.fields["tool_name"] == "runwarden-probe")
    );
    // Cleanup took the probe's analyses and left the foreign one.
    let left: Vec<Value> = svc.objects("analysis");
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["id"], foreign);
    let left_over = &p.report["cleanup"]["left"];
    assert!(
        left_over.as_array().is_none_or(|l| l.is_empty()),
        "{left_over}"
    );
    no_secrets(&p, &[&token]);
}

#[test]
fn code_scanning_is_opt_in_and_needs_a_ref() {
    let svc = server();
    let token = svc.token(WRITE_ALL);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(p.verdict("github:code-scanning"), "skipped", "{}", p.report);
    let d = p.finding("github:code-scanning")["detail"].to_string();
    assert!(d.contains("code-scanning: true"), "{d}");
    assert!(svc.sarifs().iter().all(|u| u.repo != REPO));
    // No usable ref: GITHUB_REF is a remote's, and no `ref` key.
    let p = run(
        dir.path(),
        &svc,
        &config("    code-scanning: true\n"),
        &[
            ("GITHUB_TOKEN", &token),
            ("GITHUB_REF", "refs/remotes/o/main"),
        ],
        &["probe"],
    );
    assert_eq!(p.verdict("github:code-scanning"), "skipped", "{}", p.report);
    let d = p.finding("github:code-scanning")["detail"].to_string();
    assert!(d.contains("set `ref`"), "{d}");
    // A `ref` key that code scanning would not take is a config error.
    let p = run(
        dir.path(),
        &svc,
        &config("    code-scanning: true\n    ref: main\n"),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(p.code, 2, "{}\n{}", p.stdout, p.stderr);
}

#[test]
fn code_scanning_is_closed_by_the_restricted_default_with_the_permission_named() {
    let svc = server();
    let token = svc.token(CONTENTS_READ);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config("    code-scanning: true\n"),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(p.verdict("github:code-scanning"), "pass", "{}", p.report);
    let d = p.finding("github:code-scanning")["detail"].to_string();
    assert!(d.contains("security_events=write"), "{d}");
    assert!(svc.objects("analysis").is_empty());
}

/// Run B, in a later job on another ref, reads the plant's ref; a reader
/// without `security-events: read` is refused both routes: PASS, named.
#[test]
fn code_scanning_across_jobs_reads_the_plants_ref_and_a_refused_read_passes() {
    let svc = server();
    let mut all = WRITE_ALL.to_vec();
    all.push(("actions_variables", "write"));
    let writer = svc.token(&all);
    let reader = svc.token(&[("security_events", "read")]);
    let blind = svc.token(&[("contents", "read"), ("checks", "read")]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("    code-scanning: true\n    read-token-env: READ_TOKEN\n");
    let id = "gh-cs-1";
    let plant = run(
        dir.path(),
        &svc,
        &cfg,
        &[("GITHUB_TOKEN", &writer), ("READ_TOKEN", &reader)],
        &["plant", "--probe-id", id],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let later = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", reader.as_str()),
        ("GITHUB_REF", "refs/pull/9/merge"),
    ];
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &later,
        &["recover", "--probe-id", id],
    );
    assert_eq!(p.verdict("github:code-scanning"), "fail", "{}", p.report);
    let blinded = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", blind.as_str()),
    ];
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &blinded,
        &["recover", "--probe-id", id],
    );
    assert_eq!(p.verdict("github:code-scanning"), "pass", "{}", p.report);
    let d = p.finding("github:code-scanning")["detail"].to_string();
    assert!(d.contains("security_events=read"), "{d}");
    let c = run(
        dir.path(),
        &svc,
        &cfg,
        &later,
        &["cleanup", "--probe-id", id],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    let ours: Vec<Value> = svc
        .objects("analysis")
        .into_iter()
        .filter(|a| a["ref"] == REF)
        .collect();
    assert!(ours.is_empty(), "{ours:?}\n{}", c.stdout);
    no_secrets(&p, &[&writer, &reader, &blind]);
}

/// The control instance, its server, and a probe's context.
fn control() -> (surface::Control, Key) {
    let ty = surface::by_name("github-api").unwrap();
    let work = tempfile::tempdir().unwrap();
    let control = ty.control(&Value::Null, work.path()).unwrap();
    (control, Key::new(Some(b"github-api-more-key".to_vec())))
}

fn svc_of(c: &surface::Control) -> &GitHubServer {
    c.keep
        .as_ref()
        .unwrap()
        .downcast_ref::<GitHubServer>()
        .unwrap()
}

/// Entries a forged receipt could hold: another probe's plant, ours with
/// the upload id of a foreign upload, ours on a ref that is none, a
/// category in our form with no tag. None removes anything: the foreign
/// analyses all stay.
#[test]
fn a_forged_code_scanning_entry_removes_nothing() {
    let (control, key) = control();
    let ty = surface::by_name("github-api").unwrap();
    let inst = ty.open(&control.settings).unwrap();
    let svc = svc_of(&control);
    let ours = RunCtx {
        probe_id: "forge-ours",
        key: &key,
        surface: "test",
    };
    let theirs = RunCtx {
        probe_id: "forge-theirs",
        key: &key,
        surface: "test",
    };
    let job = |ctx: &RunCtx<'_>| PlantJob {
        key: "code-scanning".into(),
        carrier: "code-scanning".into(),
        nonce: key.nonce(ctx.probe_id, "github", "code-scanning"),
        scope: None,
        beacon: None,
    };
    let mut their_journal = vec![];
    let out = inst.plant(&theirs, &job(&theirs), &mut |e| their_journal.push(e));
    assert!(matches!(out, PlantOutcome::Planted { .. }), "{out:?}");
    let mut our_journal = vec![];
    let out = inst.plant(&ours, &job(&ours), &mut |e| our_journal.push(e));
    assert!(matches!(out, PlantOutcome::Planted { .. }), "{out:?}");
    let before = svc.objects("analysis");
    assert_eq!(before.len(), 2, "{before:?}");
    let their_id = their_journal.last().unwrap()["sarif_id"].clone();
    let mut swapped = our_journal.last().unwrap().clone();
    swapped["sarif_id"] = their_id;
    let mut off_ref = our_journal.last().unwrap().clone();
    off_ref["git_ref"] = json!("refs/heads/../../x y");
    let mut untagged = our_journal.last().unwrap().clone();
    untagged.as_object_mut().unwrap().remove("tag");
    let n = Nonce::generate().unwrap();
    let made_up = json!({ "carrier": "code-scanning", "git_ref": "refs/heads/main",
        "commit": "c0ffee0000000000000000000000000000c0ffee",
        "category": format!("rw-forge-ours-{}", n.hex()), "sarif_id": null, "tag": "0".repeat(16) });
    // Their plant under our probe id: not ours.
    let mut forged: Vec<Value> = their_journal.clone();
    forged.extend([off_ref, untagged, made_up]);
    for (e, o) in forged
        .iter()
        .zip(surface::cleanup_owned(&*inst, &ours, &forged))
    {
        assert!(matches!(o, CleanupOutcome::Foreign { .. }), "{e} -> {o:?}");
    }
    // Ours, pointing at their upload: owned in form, but its category is
    // ours, which their analysis does not have: nothing goes.
    let o = surface::cleanup_owned(&*inst, &ours, std::slice::from_ref(&swapped));
    assert!(!matches!(o[0], CleanupOutcome::Removed), "{o:?}");
    assert_eq!(svc.objects("analysis"), before);
    // Our own journal removes ours, and only ours.
    let newest: Vec<Value> = our_journal.iter().rev().cloned().collect();
    let o = surface::cleanup_owned(&*inst, &ours, &newest);
    assert!(o.contains(&CleanupOutcome::Removed), "{o:?}");
    let left = svc.objects("analysis");
    assert_eq!(left.len(), 1);
    assert_eq!(
        left[0]["sarif_id"],
        their_journal.last().unwrap()["sarif_id"]
    );
}

/// What GitHub does not let go: an analysis of the plant's set that is
/// not the newest (a foreign upload in the same set after it) is not
/// deletable, and cleanup says so, naming it.
#[test]
fn an_analysis_github_will_not_delete_is_listed_as_left() {
    let (control, key) = control();
    let ty = surface::by_name("github-api").unwrap();
    let inst = ty.open(&control.settings).unwrap();
    let svc = svc_of(&control);
    let ctx = RunCtx {
        probe_id: "left-ours",
        key: &key,
        surface: "test",
    };
    let job = PlantJob {
        key: "code-scanning".into(),
        carrier: "code-scanning".into(),
        nonce: Nonce::generate().unwrap(),
        scope: None,
        beacon: None,
    };
    let mut journal = vec![];
    let out = inst.plant(&ctx, &job, &mut |e| journal.push(e));
    assert!(matches!(out, PlantOutcome::Planted { .. }), "{out:?}");
    let ours = svc.objects("analysis")[0].clone();
    // Someone uploads to the same set (ref, tool, category) afterwards.
    svc.add(
        "analysis",
        "runwarden/control",
        json!({ "ref": ours["ref"], "commit_sha": ours["commit_sha"], "category": ours["category"],
                "sarif_id": "later-upload", "tool": ours["tool"], "_results": [], "_rules": [] }),
    );
    let newest: Vec<Value> = journal.iter().rev().cloned().collect();
    let o = surface::cleanup_owned(&*inst, &ctx, &newest);
    let left: Vec<&CleanupOutcome> = o
        .iter()
        .filter(|o| matches!(o, CleanupOutcome::Left { .. }))
        .collect();
    assert_eq!(left.len(), 1, "{o:?}");
    assert!(format!("{left:?}").contains("deletable"), "{left:?}");
    assert_eq!(svc.objects("analysis").len(), 2);
}

/// Where code scanning is off (a private repository without GitHub Code
/// Security), GitHub's 403 is no permission's: the carrier cannot exist
/// here, SKIPPED with GitHub's answer, never a PASS that names a refusal.
#[test]
fn code_scanning_that_is_off_is_skipped_not_refused() {
    let svc = server();
    svc.disable_code_scanning(REPO);
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config("    code-scanning: true\n"),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(p.verdict("github:code-scanning"), "skipped", "{}", p.report);
    let d = p.finding("github:code-scanning")["detail"].to_string();
    assert!(d.contains("must be enabled") && d.contains("off"), "{d}");
    assert!(svc.objects("analysis").is_empty());
    let left = &p.report["cleanup"]["left"];
    assert!(left.as_array().is_none_or(|l| l.is_empty()), "{left}");
}
