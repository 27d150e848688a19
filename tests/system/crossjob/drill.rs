//! The poisoning drill (src/trust.rs): a plant by an untrusted run (a
//! `pull_request_target` run of a fork's pull request) recovered by a
//! trusted one (a push to the protected `main`), against the loopback
//! GitHub for the API's record of the planting run and the branch's
//! protection. An open channel leads every output with the direction;
//! run A's trust is the API's record, not the receipt's claim.

use super::run;
use crate::common::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use serde_json::json;
use std::path::Path;

const REPO: &str = "octo/app";

/// A job of `event` in run `run_id` of octo/app, its payload written to
/// `dir`, with the loopback API and a token that may read contents.
fn job(
    dir: &Path,
    gh: &GitHubServer,
    token: &str,
    event: &str,
    payload: serde_json::Value,
    run_id: &str,
) -> Vec<(String, String)> {
    let path = dir.join(format!("event-{run_id}.json"));
    std::fs::write(&path, payload.to_string()).unwrap();
    [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_REPOSITORY", REPO),
        ("GITHUB_WORKFLOW", "drill"),
        ("GITHUB_RUN_ID", run_id),
        ("GITHUB_RUN_ATTEMPT", "1"),
        ("GITHUB_JOB", "drill"),
        ("GITHUB_EVENT_NAME", event),
        ("GITHUB_EVENT_PATH", path.to_str().unwrap()),
        ("GITHUB_REF", "refs/heads/main"),
        ("GITHUB_API_URL", &gh.api_url()),
        ("GITHUB_TOKEN", token),
        ("RUNWARDEN_KEY", "drill-key-51e0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn env(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn a_write_by_an_untrusted_run_read_by_a_trusted_one_leads_every_output() {
    let gh = GitHubServer::start().unwrap();
    // (contents: read for the branch's protection, actions: read for the
    // planting run's record.)
    let token = gh.token(&[("contents", "read"), ("actions", "read")]);
    gh.add("branch", REPO, json!({ "name": "main", "protected": true }));
    // The planting run, as the API records it: a fork's pull request on
    // pull_request_target (its ref is the base branch, main).
    let planting = gh.add(
        "workflow-run",
        REPO,
        json!({
            "event": "pull_request_target", "head_branch": "main", "status": "completed",
            "repository": { "full_name": REPO },
            "head_repository": { "full_name": "stranger/app" },
            "actor": { "type": "User" },
        }),
    );
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("c.yml"), fs_config("shared", &shared, "")).unwrap();
    let fork = json!({
        "repository": { "full_name": REPO },
        "pull_request": { "head": { "repo": { "full_name": "stranger/app" } } },
        "sender": { "type": "User" },
    });
    let id = planting.to_string();
    let a = job(work.path(), &gh, &token, "pull_request_target", fork, &id);
    let plant = run(
        work.path(),
        &["plant", "--config", "c.yml", "--probe-id", "drill-1"],
        &env(&a),
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let push = json!({ "repository": { "full_name": REPO }, "sender": { "type": "User" } });
    let b = job(work.path(), &gh, &token, "push", push, "200");
    let sarif = work.path().join("r.sarif");
    let summary = work.path().join("summary.md");
    let mut env_b = env(&b);
    env_b.push(("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()));
    let rec = run(
        work.path(),
        &[
            "recover",
            "--config",
            "c.yml",
            "--probe-id",
            "drill-1",
            "--sarif",
            sarif.to_str().unwrap(),
            "--format",
            "github",
        ],
        &env_b,
    );
    assert_eq!(rec.code, 1, "{}\n{}", rec.stdout, rec.stderr);
    let line =
        "a write by a pull_request_target run from a fork reached a push run on main: poisoning";
    let t = &rec.report["trust"];
    assert_eq!(t["poisoning"], line, "{t}");
    assert_eq!(t["a"]["class"], "untrusted");
    assert_eq!(t["a"]["source"], format!("the API's record of run {id}"));
    assert_eq!(t["b"]["class"], "trusted");
    assert_eq!(t["b"]["why"], "push on the protected branch main");
    let s = std::fs::read_to_string(&summary).unwrap();
    // (Its words are rendered as surface text is: a code span.)
    assert!(s.contains(&format!("**Poisoning:** ` {line} `.")), "{s}");
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    assert_eq!(
        sarif["runs"][0]["properties"]["runwarden/trust"]["poisoning"],
        line
    );
    // The table leads with it.
    let table = run(
        work.path(),
        &["recover", "--config", "c.yml", "--probe-id", "drill-1"],
        &env(&b),
    );
    assert!(
        table.stdout.starts_with(&format!("POISONING: {line}\n")),
        "{}",
        table.stdout
    );
    // The receipt's claim is not what counts: a receipt whose run the API
    // does not know is said to be only a claim.
    let unknown = job(
        work.path(),
        &gh,
        &token,
        "pull_request_target",
        json!({}),
        "999999",
    );
    let plant = run(
        work.path(),
        &["plant", "--config", "c.yml", "--probe-id", "drill-2"],
        &env(&unknown),
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    let rec = run(
        work.path(),
        &["recover", "--config", "c.yml", "--probe-id", "drill-2"],
        &env(&b),
    );
    let a = &rec.report["trust"]["a"];
    assert!(
        a["source"]
            .as_str()
            .unwrap()
            .starts_with("claimed by the plant's receipt"),
        "{a}"
    );
    assert!(
        rec.report["trust"]["poisoning"]
            .as_str()
            .unwrap()
            .contains("the API did not confirm it"),
        "{}",
        rec.report["trust"]
    );
}

/// Where the untrusted run's writes are refused, no channel is open: no
/// poisoning line, each run's trust said all the same.
#[test]
fn a_closed_store_says_each_runs_trust_and_no_poisoning() {
    let gh = GitHubServer::start().unwrap();
    let token = gh.token(CONTENTS_READ);
    gh.add("branch", REPO, json!({ "name": "main", "protected": true }));
    let work = tempfile::tempdir().unwrap();
    let fork = json!({
        "repository": { "full_name": REPO },
        "pull_request": { "head": { "repo": { "full_name": "stranger/app" } } },
    });
    let a = job(work.path(), &gh, &token, "pull_request", fork, "7");
    // (A surface with nothing planted: an empty config's probe is refused;
    // the trust of a probe's two runs is this job's.)
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("c.yml"), fs_config("shared", &shared, "")).unwrap();
    let p = run(work.path(), &["probe", "--config", "c.yml"], &env(&a));
    let t = &p.report["trust"];
    assert_eq!(t["a"]["class"], "untrusted", "{t}");
    assert_eq!(t["a"]["fork"], true);
    assert!(t.get("poisoning").is_none(), "{t}");
}
