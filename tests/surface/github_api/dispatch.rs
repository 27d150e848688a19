//! `workflow-dispatch` and `repository-dispatch` against the loopback
//! GitHub (its dispatch routes proven against `@octokit/rest` in
//! tests/system/loopback/github_runs.rs): skipped unless the config names
//! a workflow that shows the dispatch; a permissive token opens both and
//! cleanup deletes the runs they started (cancelling one still running)
//! and no other; the restricted default is refused with the permission
//! named; with no workflow to show it, ERROR saying so.

use super::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use serde_json::json;
use std::path::Path;

const CARRIERS: [&str; 2] = ["github:workflow-dispatch", "github:repository-dispatch"];
const CONFIGURED: &str =
    "    dispatch-workflow: probe.yml\n    dispatch-input: title\n    repository-dispatch: true\n";

fn run(dir: &Path, svc: &GitHubServer, extra: &str, env: &[(&str, &str)], args: &[&str]) -> Probe {
    let cfg = format!(
        "version: 1
surfaces:
  - name: github
    type: github-api
    read-token-env: READ_TOKEN
{extra}"
    );
    let mut all = vec![("GITHUB_REF", "refs/heads/main")];
    all.extend_from_slice(env);
    super::run(dir, svc, &cfg, &all, args)
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS.iter().map(|c| p.verdict(c)).collect()
}

fn server() -> GitHubServer {
    let svc = GitHubServer::start().unwrap();
    svc.add_workflow(REPO, "probe.yml", "title");
    svc.add_dispatch_workflow(REPO);
    svc
}

#[test]
fn dispatches_are_skipped_unless_a_workflow_shows_them() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
    ];
    let p = run(dir.path(), &svc, "", &env, &["probe"]);
    assert_eq!(verdicts(&p), ["skipped", "skipped"], "{}", p.report);
    let d = p.finding(CARRIERS[0])["detail"].to_string();
    assert!(
        d.contains("dispatch-workflow") && d.contains("run-name"),
        "{d}"
    );
    let d = p.finding(CARRIERS[1])["detail"].to_string();
    assert!(d.contains("repository-dispatch: true"), "{d}");
    assert!(svc.objects("workflow-run").is_empty());
}

#[test]
fn a_permissive_token_opens_both_and_cleanup_deletes_only_their_runs() {
    let svc = server();
    svc.add(
        "workflow-run",
        REPO,
        json!({ "display_title": "nightly", "event": "workflow_dispatch", "status": "completed",
                "created_at": "2099-01-01T00:00:00Z" }),
    );
    // The runs they start are still going at cleanup: cancelled first.
    svc.set_dispatched_status(Some("in_progress"));
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
    ];
    let p = run(dir.path(), &svc, CONFIGURED, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["fail", "fail"], "{}\n{}", p.report, p.stderr);
    let d = p.finding(CARRIERS[0])["detail"].to_string();
    assert!(d.contains("display_title"), "{d}");
    let left: Vec<String> = svc
        .objects("workflow-run")
        .iter()
        .map(|r| r["display_title"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(left, ["nightly"], "{}", p.stdout);
    no_secrets(&p, &[&token]);
}

#[test]
fn the_restricted_default_is_refused_with_the_permission_named() {
    let svc = server();
    let token = svc.token(CONTENTS_READ);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
    ];
    let p = run(dir.path(), &svc, CONFIGURED, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["pass", "pass"], "{}", p.report);
    let d = p.finding(CARRIERS[0])["detail"].to_string();
    assert!(d.contains("actions=write"), "{d}");
    let d = p.finding(CARRIERS[1])["detail"].to_string();
    assert!(d.contains("contents=write"), "{d}");
    assert!(svc.objects("workflow-run").is_empty());
}

#[test]
fn without_a_workflow_to_show_it_a_dispatch_is_an_error_saying_so() {
    let svc = GitHubServer::start().unwrap();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
    ];
    let extra = format!("{CONFIGURED}    consistency-wait: 1\n");
    let p = run(dir.path(), &svc, &extra, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["error", "error"], "{}", p.report);
    let d = p.finding(CARRIERS[0])["detail"].to_string();
    assert!(d.contains("dispatch-workflow"), "{d}");
    let d = p.finding(CARRIERS[1])["detail"].to_string();
    assert!(d.contains("no run shows the dispatch back"), "{d}");
}

/// Run B in a later job reads the runs with its own token; one without
/// `actions: read` is refused the listing: PASS, named.
#[test]
fn across_jobs_a_reader_without_actions_is_refused() {
    let svc = server();
    let writer = permissive(&svc);
    let blind = svc.token(&[("contents", "read")]);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", writer.as_str()),
    ];
    let p = run(
        dir.path(),
        &svc,
        CONFIGURED,
        &env,
        &["plant", "--probe-id", "gh-dp-1"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    let p = run(
        dir.path(),
        &svc,
        CONFIGURED,
        &env,
        &["recover", "--probe-id", "gh-dp-1"],
    );
    assert_eq!(verdicts(&p), ["fail", "fail"], "{}", p.report);
    let env = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", blind.as_str()),
    ];
    let p = run(
        dir.path(),
        &svc,
        CONFIGURED,
        &env,
        &["recover", "--probe-id", "gh-dp-1"],
    );
    assert_eq!(verdicts(&p), ["pass", "pass"], "{}", p.report);
    let d = p.finding(CARRIERS[1])["detail"].to_string();
    assert!(d.contains("actions=read"), "{d}");
    let c = run(
        dir.path(),
        &svc,
        CONFIGURED,
        &env,
        &["cleanup", "--probe-id", "gh-dp-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.objects("workflow-run").is_empty(), "{}", c.stdout);
}

/// Runs that show a plant's name but that its dispatch did not make
/// (another workflow's, a title that only holds the name): cleanup leaves
/// both, and lists them.
#[test]
fn cleanup_takes_only_the_runs_the_dispatch_made() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
    ];
    let args = ["plant", "--probe-id", "gh-dp-9"];
    let a = run(dir.path(), &svc, CONFIGURED, &env, &args);
    assert_eq!(a.code, 0, "{}\n{}", a.stdout, a.stderr);
    let title = |ev: &str| {
        svc.objects("workflow-run")
            .iter()
            .find(|r| r["event"] == ev)
            .unwrap()["display_title"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (wf, rd) = (title("workflow_dispatch"), title("repository_dispatch"));
    let foreign = [
        (
            "workflow_dispatch",
            "deploy.yml",
            format!("deploy {wf}"),
            "2099-01-01T00:00:00Z",
        ),
        (
            "repository_dispatch",
            "other.yml",
            format!("note: {rd}"),
            "2099-01-01T00:00:00Z",
        ),
    ];
    for (ev, file, t, at) in &foreign {
        svc.add(
            "workflow-run",
            REPO,
            json!({ "display_title": t, "event": ev, "status": "completed",
                    "path": format!(".github/workflows/{file}"), "created_at": at }),
        );
    }
    let c = run(
        dir.path(),
        &svc,
        CONFIGURED,
        &env,
        &["cleanup", "--probe-id", "gh-dp-9"],
    );
    // Left, and listed: the run fails, naming them.
    assert_eq!(c.code, 1, "{}\n{}", c.stdout, c.stderr);
    assert!(c.stdout.contains("not removed"), "{}", c.stdout);
    let mut left: Vec<String> = svc
        .objects("workflow-run")
        .iter()
        .map(|r| r["display_title"].as_str().unwrap_or("").to_string())
        .collect();
    left.sort();
    let mut want: Vec<String> = foreign.iter().map(|f| f.2.clone()).collect();
    want.sort();
    assert_eq!(left, want, "{}", c.stdout);
}

/// A repository_dispatch starts every workflow on the event: the run of a
/// workflow whose title does not show the name stays (it cannot be told
/// the plant's) and is listed as possibly the plant's, by id (0.11.0 left
/// it without a word).
#[test]
fn a_run_the_dispatch_started_under_another_title_is_listed_not_removed() {
    let svc = server();
    svc.add_titled_dispatch_workflow(REPO, "deploy.yml", "deploy");
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
    ];
    let p = run(dir.path(), &svc, CONFIGURED, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["fail", "fail"], "{}", p.report);
    let runs = svc.objects("workflow-run");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["display_title"], "deploy");
    let id = runs[0]["id"].to_string();
    let left = p.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 1, "{}", p.report["cleanup"]);
    let reason = left[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("run(s) \"{id}\"")) && reason.contains("may be its dispatch's"),
        "{reason}"
    );
    assert_eq!(p.code, 1, "{}", p.stdout);
}
