//! The loopback GitHub's REST side (src/loopback/github/rest*.rs) proven
//! against the real client, npm `@octokit/rest`: labels (with
//! `octokit.paginate` following the `Link` header past 100), issue
//! comments, milestones, releases (drafts only to `contents: write`),
//! deployments and their statuses (an active deployment that is not the
//! only one cannot be deleted), repository variables, commit statuses and
//! check runs on a commit made through the git API (50 annotations per
//! request, not 51), and GitHub's 403 with `X-Accepted-GitHub-Permissions`
//! for a token that lacks the permission. Only a stand-in that passes
//! these may be used to test runwarden's own client.

use crate::common::strip_runner_env;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const CLIENT: &str = "@octokit/rest@22.0.1";

/// `@octokit/rest`'s entry point, installed once under the target dir.
fn client_lib() -> PathBuf {
    crate::common::npm_client(
        "npm-octokit-rest",
        CLIENT,
        "@octokit/rest/dist-src/index.js",
    )
}

/// Runs `ops` (see fixtures/octokit-client.mjs) through the real client
/// with `token`, on `octo/repo` unless an op names another, and returns
/// one result per op.
pub(super) fn octokit(svc: &GitHubServer, token: &str, ops: Value) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/octokit-client.mjs");
    let mut ops = ops.as_array().unwrap().clone();
    for op in &mut ops {
        let params = op["params"].as_object_mut();
        if let Some(p) = params {
            p.entry("owner").or_insert(json!("octo"));
            p.entry("repo").or_insert(json!("repo"));
        } else {
            op["params"] = json!({ "owner": "octo", "repo": "repo" });
        }
    }
    let request = json!({ "baseUrl": svc.api_url(), "token": token, "ops": ops });
    let mut c = Command::new("node");
    c.arg(script).env("CLIENT_REQUEST", request.to_string());
    strip_runner_env(&mut c);
    let out = c.env("OCTOKIT_REST_LIB", client_lib()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the client failed:\n{all}");
    let last = stdout.lines().last().unwrap_or("null");
    let v: Value = serde_json::from_str(last).unwrap_or(Value::Null);
    let results = v["results"].as_array().cloned();
    results.unwrap_or_else(|| panic!("no results from the client:\n{all}"))
}

pub(super) fn status(r: &Value) -> u64 {
    r["status"]
        .as_u64()
        .or(r["error"]["status"].as_u64())
        .unwrap_or_else(|| panic!("no status in {r}"))
}

/// GitHub's refusal of a token that lacks a permission, as the client
/// reports it: 403, the message, and what the endpoint wanted.
pub(super) fn assert_refused(r: &Value, wanted: &str) {
    let e = &r["error"];
    assert_eq!(e["status"], 403, "{r}");
    assert_eq!(
        e["data"]["message"], "Resource not accessible by integration",
        "{r}"
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Resource not accessible by integration"),
        "{r}"
    );
    assert_eq!(e["headers"]["x-accepted-github-permissions"], wanted, "{r}");
}

#[test]
fn labels_page_past_100_through_link_and_round_trip() {
    let svc = GitHubServer::start().unwrap();
    for i in 0..120 {
        svc.add(
            "label",
            "octo/repo",
            json!({ "name": format!("foreign-{i:03}"), "color": "ededed" }),
        );
    }
    svc.add("label", "octo/other", json!({ "name": "elsewhere" }));
    let token = svc.token(&[("issues", "write")]);
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "issues.createLabel",
              "params": { "name": "mail box: 1", "color": "00ff00", "description": "carrier" } },
            { "paginate": "issues.listLabelsForRepo", "params": { "per_page": 100 } },
            { "call": "issues.getLabel", "params": { "name": "mail box: 1" } },
            { "call": "issues.createLabel", "params": { "name": "too long", "description": "x".repeat(101) } },
            { "call": "issues.updateLabel", "params": { "name": "mail box: 1", "description": "edited" } },
            { "call": "issues.deleteLabel", "params": { "name": "mail box: 1" } },
            { "call": "issues.getLabel", "params": { "name": "mail box: 1" } },
        ]),
    );
    assert_eq!(status(&r[0]), 201, "{}", r[0]);
    assert!(r[0]["headers"]["x-github-request-id"].is_string());
    assert_eq!(r[0]["data"]["color"], "00ff00");
    assert_eq!(
        r[0]["headers"]["x-accepted-github-permissions"],
        "issues=write; pull_requests=write"
    );
    assert_eq!(r[1]["pages"], 2, "paginate did not follow Link: {}", r[1]);
    let names: Vec<&str> = r[1]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 121);
    assert!(names.contains(&"mail box: 1") && !names.contains(&"elsewhere"));
    assert_eq!(r[2]["data"]["description"], "carrier", "{}", r[2]);
    assert_eq!(status(&r[3]), 422, "{}", r[3]);
    assert_eq!(r[4]["data"]["description"], "edited", "{}", r[4]);
    assert_eq!(r[4]["data"]["color"], "00ff00");
    assert_eq!(status(&r[5]), 204, "{}", r[5]);
    assert_eq!(status(&r[6]), 404, "{}", r[6]);
    assert_eq!(svc.objects("label").len(), 121);
}

#[test]
fn issue_comments_create_list_update_delete() {
    let svc = GitHubServer::start().unwrap();
    // Pull requests: write is enough for a PR's conversation.
    let token = svc.token(&[("pull_requests", "write")]);
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "issues.createComment", "params": { "issue_number": 7, "body": "first" } },
            { "call": "issues.createComment", "params": { "issue_number": 7, "body": "second" } },
            { "call": "issues.createComment", "params": { "issue_number": 8, "body": "other issue" } },
            { "paginate": "issues.listComments", "params": { "issue_number": 7 } },
            { "call": "issues.updateComment", "params": { "comment_id": "$0.data.id", "body": "first, edited" } },
            { "call": "issues.getComment", "params": { "comment_id": "$0.data.id" } },
            { "call": "issues.deleteComment", "params": { "comment_id": "$1.data.id" } },
            { "call": "issues.listComments", "params": { "issue_number": 7 } },
            { "call": "issues.createComment", "params": { "issue_number": 7, "body": "x".repeat(65537) } },
        ]),
    );
    assert_eq!(status(&r[0]), 201, "{}", r[0]);
    let bodies = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|c| c["body"].as_str().unwrap().to_string())
            .collect()
    };
    // Ascending by id.
    assert_eq!(bodies(&r[3]["data"]), ["first", "second"]);
    assert_eq!(status(&r[4]), 200, "{}", r[4]);
    assert_eq!(r[5]["data"]["body"], "first, edited");
    assert_eq!(status(&r[6]), 204, "{}", r[6]);
    assert_eq!(bodies(&r[7]["data"]), ["first, edited"]);
    assert_eq!(status(&r[8]), 422, "{}", r[8]);
}

#[test]
fn milestones_by_state_and_releases_drafts_only_to_writers() {
    let svc = GitHubServer::start().unwrap();
    let writer = svc.token(WRITE_ALL);
    let r = octokit(
        &svc,
        &writer,
        json!([
            { "call": "issues.createMilestone", "params": { "title": "open one" } },
            { "call": "issues.createMilestone", "params": { "title": "closed one", "state": "closed" } },
            { "call": "issues.listMilestones", "params": {} },
            { "call": "issues.listMilestones", "params": { "state": "all" } },
            { "call": "issues.updateMilestone",
              "params": { "milestone_number": "$1.data.number", "description": "edited" } },
            { "call": "issues.deleteMilestone", "params": { "milestone_number": "$1.data.number" } },
            { "call": "issues.listMilestones", "params": { "state": "all" } },
            { "call": "repos.createRelease", "params": { "tag_name": "v1", "name": "public" } },
            { "call": "repos.createRelease", "params": { "tag_name": "v2-mailbox", "draft": true, "body": "hidden" } },
            { "call": "repos.listReleases", "params": {} },
            { "call": "repos.getReleaseByTag", "params": { "tag": "v1" } },
            // Published releases only, even to a writer.
            { "call": "repos.getReleaseByTag", "params": { "tag": "v2-mailbox" } },
        ]),
    );
    let titles = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["title"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(status(&r[0]), 201, "{}", r[0]);
    assert_eq!(titles(&r[2]), ["open one"]);
    assert_eq!(titles(&r[3]), ["open one", "closed one"]);
    assert_eq!(r[4]["data"]["state"], "closed", "{}", r[4]);
    assert_eq!(r[4]["data"]["description"], "edited");
    assert_eq!(status(&r[5]), 204, "{}", r[5]);
    assert_eq!(titles(&r[6]), ["open one"]);
    assert_eq!(status(&r[8]), 201, "{}", r[8]);
    let tags = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["tag_name"].as_str().unwrap().to_string())
            .collect()
    };
    let mut all = tags(&r[9]);
    all.sort();
    assert_eq!(all, ["v1", "v2-mailbox"]);
    assert_eq!(r[10]["data"]["name"], "public", "{}", r[10]);
    assert_eq!(status(&r[11]), 404, "{}", r[11]);

    let reader = svc.token(CONTENTS_READ);
    let draft_id = r[8]["data"]["id"].clone();
    let r = octokit(
        &svc,
        &reader,
        json!([
            { "call": "repos.listReleases", "params": {} },
            { "call": "repos.deleteRelease", "params": { "release_id": draft_id } },
        ]),
    );
    assert_eq!(tags(&r[0]), ["v1"]);
    assert_refused(&r[1], "contents=write");
    let r = octokit(
        &svc,
        &writer,
        json!([{ "call": "repos.deleteRelease", "params": { "release_id": draft_id } }]),
    );
    assert_eq!(status(&r[0]), 204, "{}", r[0]);
    assert_eq!(svc.objects("release").len(), 1);
}

#[test]
fn deployments_statuses_and_deletion_rules() {
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(&[("deployments", "write")]);
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "repos.createDeployment",
              "params": { "ref": "main", "required_contexts": [], "payload": { "m": "hello" } } },
            { "call": "repos.createDeployment",
              "params": { "ref": "main", "required_contexts": [], "environment": "staging" } },
            { "call": "repos.listDeployments", "params": {} },
            { "call": "repos.deleteDeployment", "params": { "deployment_id": "$0.data.id" } },
            { "call": "repos.createDeploymentStatus",
              "params": { "deployment_id": "$0.data.id", "state": "inactive" } },
            { "call": "repos.listDeploymentStatuses", "params": { "deployment_id": "$0.data.id" } },
            { "call": "repos.deleteDeployment", "params": { "deployment_id": "$0.data.id" } },
            // Now the only deployment: deletable although active.
            { "call": "repos.deleteDeployment", "params": { "deployment_id": "$1.data.id" } },
            { "call": "repos.listDeployments", "params": {} },
        ]),
    );
    assert_eq!(status(&r[0]), 201, "{}", r[0]);
    assert_eq!(r[0]["data"]["environment"], "production");
    assert_eq!(r[0]["data"]["payload"]["m"], "hello");
    assert_eq!(r[2]["data"].as_array().map(Vec::len), Some(2), "{}", r[2]);
    assert_eq!(status(&r[3]), 422, "{}", r[3]);
    assert_eq!(status(&r[4]), 201, "{}", r[4]);
    assert_eq!(r[4]["data"]["state"], "inactive");
    assert_eq!(r[5]["data"][0]["state"], "inactive", "{}", r[5]);
    assert_eq!(status(&r[6]), 204, "{}", r[6]);
    assert_eq!(status(&r[7]), 204, "{}", r[7]);
    assert_eq!(r[8]["data"], json!([]));

    // auto_inactive: a success status makes the prior successful
    // deployment to the same (non-production) environment inactive.
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "repos.createDeployment",
              "params": { "ref": "main", "required_contexts": [], "environment": "preview" } },
            { "call": "repos.createDeploymentStatus",
              "params": { "deployment_id": "$0.data.id", "state": "success" } },
            { "call": "repos.createDeployment",
              "params": { "ref": "main", "required_contexts": [], "environment": "preview" } },
            { "call": "repos.createDeploymentStatus",
              "params": { "deployment_id": "$2.data.id", "state": "success" } },
            { "call": "repos.listDeploymentStatuses", "params": { "deployment_id": "$0.data.id" } },
            { "call": "repos.deleteDeployment", "params": { "deployment_id": "$0.data.id" } },
            { "call": "repos.deleteDeployment", "params": { "deployment_id": "$2.data.id" } },
        ]),
    );
    assert_eq!(r[4]["data"][0]["state"], "inactive", "{}", r[4]);
    assert_eq!(status(&r[5]), 204, "{}", r[5]);
    assert_eq!(status(&r[6]), 204, "{}", r[6]);
    let reader = svc.token(CONTENTS_READ);
    let r = octokit(
        &svc,
        &reader,
        json!([{ "call": "repos.createDeployment", "params": { "ref": "main" } }]),
    );
    assert_refused(&r[0], "deployments=write");

    // The deployments made their environments; creating or deleting one
    // takes administration, which GITHUB_TOKEN cannot be granted.
    let all = svc.token(WRITE_ALL);
    let admin = svc.token(&[("administration", "write"), ("actions", "read")]);
    let r = octokit(
        &svc,
        &all,
        json!([
            { "call": "repos.getAllEnvironments", "params": {} },
            { "call": "repos.createOrUpdateEnvironment", "params": { "environment_name": "mail box" } },
            { "call": "repos.createOrUpdateEnvironment", "token": admin,
              "params": { "environment_name": "mail box", "wait_timer": 5 } },
            { "call": "repos.getEnvironment", "params": { "environment_name": "mail box" } },
            { "call": "repos.deleteAnEnvironment", "token": admin, "params": { "environment_name": "mail box" } },
            { "call": "repos.getAllEnvironments", "params": {} },
        ]),
    );
    let names = |v: &Value| -> Vec<String> {
        let mut n: Vec<String> = v["data"]["environments"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&r[0]), ["preview", "production", "staging"]);
    assert_refused(&r[1], "administration=write");
    assert_eq!(status(&r[2]), 200, "{}", r[2]);
    assert_eq!(r[3]["data"]["name"], "mail box", "{}", r[3]);
    assert_eq!(status(&r[4]), 204, "{}", r[4]);
    assert_eq!(names(&r[5]), ["preview", "production", "staging"]);
}

#[test]
fn variables_need_the_variables_permission() {
    let svc = GitHubServer::start().unwrap();
    for i in 0..32 {
        svc.add(
            "variable",
            "octo/repo",
            json!({ "name": format!("FOREIGN_{i:02}"), "value": "v" }),
        );
    }
    let token = svc.token(&[("actions_variables", "write")]);
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "actions.createRepoVariable", "params": { "name": "mailbox_1", "value": "hello" } },
            { "paginate": "actions.listRepoVariables", "params": { "per_page": 100 } },
            { "call": "actions.updateRepoVariable", "params": { "name": "mailbox_1", "value": "again" } },
            { "call": "actions.getRepoVariable", "params": { "name": "MAILBOX_1" } },
            { "call": "actions.deleteRepoVariable", "params": { "name": "MAILBOX_1" } },
            { "call": "actions.getRepoVariable", "params": { "name": "MAILBOX_1" } },
        ]),
    );
    assert_eq!(status(&r[0]), 201, "{}", r[0]);
    // At most 30 a page: 33 take two.
    assert_eq!(r[1]["pages"], 2, "{}", r[1]);
    assert_eq!(r[1]["data"].as_array().map(Vec::len), Some(33));
    assert_eq!(status(&r[2]), 204, "{}", r[2]);
    assert_eq!(r[3]["data"]["name"], "MAILBOX_1", "{}", r[3]);
    assert_eq!(r[3]["data"]["value"], "again");
    assert_eq!(status(&r[4]), 204, "{}", r[4]);
    assert_eq!(status(&r[5]), 404, "{}", r[5]);
    // GITHUB_TOKEN cannot be granted variables: even write-all is refused.
    let all = svc.token(WRITE_ALL);
    let r = octokit(
        &svc,
        &all,
        json!([{ "call": "actions.createRepoVariable", "params": { "name": "X", "value": "y" } }]),
    );
    assert_refused(&r[0], "actions_variables=write");
}

#[test]
fn statuses_and_check_runs_on_a_commit_made_through_the_git_api() {
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(WRITE_ALL);
    let note = |i: u64| {
        json!({ "path": "README.md", "start_line": i, "end_line": i,
            "annotation_level": "notice", "message": format!("n{i}") })
    };
    let notes = |n: u64| Value::Array((1..=n).map(note).collect());
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "git.createTree",
              "params": { "tree": [{ "path": "README.md", "mode": "100644", "type": "blob", "content": "hi\n" }] } },
            { "call": "git.createCommit",
              "params": { "message": "mailbox", "tree": "$0.data.sha", "parents": [] } },
            { "call": "repos.createCommitStatus",
              "params": { "sha": "$1.data.sha", "state": "success", "context": "ci/mailbox", "description": "hello" } },
            { "call": "repos.createCommitStatus",
              "params": { "sha": "$1.data.sha", "state": "pending", "context": "ci/other" } },
            { "call": "repos.listCommitStatusesForRef", "params": { "ref": "$1.data.sha" } },
            { "call": "checks.create",
              "params": { "name": "mailbox", "head_sha": "$1.data.sha", "status": "completed", "conclusion": "neutral",
                          "output": { "title": "t", "summary": "s", "annotations": notes(50) } } },
            { "call": "checks.create",
              "params": { "name": "too many", "head_sha": "$1.data.sha",
                          "output": { "title": "t", "summary": "s", "annotations": notes(51) } } },
            { "call": "checks.listForRef", "params": { "ref": "$1.data.sha" } },
            { "call": "repos.createCommitStatus",
              "params": { "sha": "0123456789abcdef0123456789abcdef01234567", "state": "success" } },
            { "call": "repos.getCombinedStatusForRef", "params": { "ref": "$1.data.sha" } },
            // An update appends its annotations (50 more).
            { "call": "checks.update",
              "params": { "check_run_id": "$5.data.id",
                          "output": { "title": "t2", "summary": "s2", "annotations": notes(50) } } },
            { "call": "checks.get", "params": { "check_run_id": "$5.data.id" } },
            { "paginate": "checks.listAnnotations", "params": { "check_run_id": "$5.data.id", "per_page": 30 } },
        ]),
    );
    assert_eq!(status(&r[0]), 201, "{}", r[0]);
    assert_eq!(status(&r[1]), 201, "{}", r[1]);
    let sha = r[1]["data"]["sha"].as_str().unwrap();
    assert_eq!(sha.len(), 40);
    assert_eq!(status(&r[2]), 201, "{}", r[2]);
    // Newest first.
    let contexts: Vec<&str> = r[4]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["context"].as_str().unwrap())
        .collect();
    assert_eq!(contexts, ["ci/other", "ci/mailbox"], "{}", r[4]);
    assert_eq!(status(&r[5]), 201, "{}", r[5]);
    assert_eq!(status(&r[6]), 422, "{}", r[6]);
    assert_eq!(r[7]["data"]["total_count"], 1, "{}", r[7]);
    let run = &r[7]["data"]["check_runs"][0];
    assert_eq!(run["name"], "mailbox");
    assert_eq!(run["head_sha"], sha);
    assert_eq!(status(&r[8]), 422, "{}", r[8]);
    // One pending context: the combined state is pending.
    assert_eq!(r[9]["data"]["state"], "pending", "{}", r[9]);
    assert_eq!(r[9]["data"]["total_count"], 2);
    assert_eq!(r[9]["data"]["sha"], sha);
    assert_eq!(status(&r[10]), 200, "{}", r[10]);
    assert_eq!(r[11]["data"]["output"]["title"], "t2", "{}", r[11]);
    assert_eq!(r[11]["data"]["output"]["annotations_count"], 100);
    assert_eq!(
        r[12]["data"].as_array().map(Vec::len),
        Some(100),
        "{}",
        r[12]
    );
    assert_eq!(r[12]["pages"], 4);
    assert_eq!(r[12]["data"][50]["message"], "n1");
    assert_eq!(svc.objects("check-run").len(), 1);
    let stored = &svc.objects("check-run")[0];
    assert_eq!(
        stored["output"]["annotations"].as_array().map(Vec::len),
        Some(100)
    );

    // Without checks/statuses: GitHub's refusal, naming what was wanted.
    let weak = svc.token(&[("contents", "write")]);
    let r = octokit(
        &svc,
        &weak,
        json!([
            { "call": "checks.create", "params": { "name": "x", "head_sha": sha } },
            { "call": "repos.createCommitStatus", "params": { "sha": sha, "state": "success" } },
            { "call": "issues.createComment", "params": { "issue_number": 1, "body": "x" } },
        ]),
    );
    assert_refused(&r[0], "checks=write");
    // Every answer carries a request id, refusals too.
    assert!(r[0]["error"]["headers"]["x-github-request-id"].is_string());
    assert_refused(&r[1], "statuses=write");
    assert_refused(&r[2], "issues=write; pull_requests=write");
    let r = octokit(
        &svc,
        "ghs_not_minted_here",
        json!([{ "call": "issues.listLabelsForRepo", "params": {} }]),
    );
    assert_eq!(status(&r[0]), 401, "{}", r[0]);
}

/// Code scanning's SARIF upload as the client sends it (gzip, base64) and
/// its processing status; what GitHub rejects (a short `commit_sha`, a
/// ref that is no branch, tag or pull request, a body that is not gzip,
/// a missing `security_events`); and `GET /user`, which an installation
/// token like `GITHUB_TOKEN` is refused.
#[test]
fn sarif_uploads_and_their_status_and_who_the_token_is() {
    use base64::Engine as _;
    let svc = GitHubServer::start().unwrap();
    svc.set_processing(runwarden::loopback::github::Processing {
        pending: 1,
        errors: None,
    });
    let token = svc.token(WRITE_ALL);
    let sarif = br#"{"version":"2.1.0","runs":[]}"#;
    let gz =
        base64::engine::general_purpose::STANDARD.encode(runwarden::archive::gzip_stored(sarif));
    let plain = base64::engine::general_purpose::STANDARD.encode(sarif);
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "codeScanning.uploadSarif",
              "params": { "commit_sha": sha, "ref": "refs/pull/7/merge", "sarif": gz, "tool_name": "runwarden" } },
            { "call": "codeScanning.getSarif", "params": { "sarif_id": "$0.data.id" } },
            { "call": "codeScanning.getSarif", "params": { "sarif_id": "$0.data.id" } },
            { "call": "codeScanning.uploadSarif",
              "params": { "commit_sha": "abc123", "ref": "refs/heads/main", "sarif": gz } },
            { "call": "codeScanning.uploadSarif",
              "params": { "commit_sha": sha, "ref": "main", "sarif": gz } },
            { "call": "codeScanning.uploadSarif",
              "params": { "commit_sha": sha, "ref": "refs/heads/main", "sarif": plain } },
            { "call": "users.getAuthenticated", "params": {} },
        ]),
    );
    assert_eq!(status(&r[0]), 202, "{}", r[0]);
    assert!(r[0]["data"]["id"].is_string() && r[0]["data"]["url"].is_string());
    assert_eq!(r[1]["data"]["processing_status"], "pending", "{}", r[1]);
    assert_eq!(r[2]["data"]["processing_status"], "complete", "{}", r[2]);
    assert!(r[2]["data"]["analyses_url"].is_string());
    assert_eq!(status(&r[3]), 422, "{}", r[3]);
    assert_eq!(status(&r[4]), 422, "{}", r[4]);
    assert_eq!(status(&r[5]), 400, "{}", r[5]);
    assert_eq!(status(&r[6]), 403, "{}", r[6]);
    let uploads = svc.sarifs();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].gzip, runwarden::archive::gzip_stored(sarif));
    assert_eq!(uploads[0].fields["ref"], "refs/pull/7/merge");

    let weak = svc.token(CONTENTS_READ);
    let r = octokit(
        &svc,
        &weak,
        json!([{ "call": "codeScanning.uploadSarif",
                 "params": { "commit_sha": sha, "ref": "refs/heads/main", "sarif": gz } }]),
    );
    assert_refused(&r[0], "security_events=write");

    // A user's token says who it is and comments as that user; an App's
    // token is refused `GET /user` and comments as its bot; only a
    // comment's author may edit it.
    let pat = svc.user_token(WRITE_ALL, "octocat");
    let app = svc.app_token(WRITE_ALL, "warden-app[bot]");
    let r = octokit(
        &svc,
        &pat,
        json!([
            { "call": "users.getAuthenticated", "params": {} },
            { "call": "issues.createComment", "params": { "issue_number": 7, "body": "mine" } },
            { "call": "issues.createComment", "params": { "issue_number": 7, "body": "app's" }, "token": app },
            { "call": "users.getAuthenticated", "params": {}, "token": app },
            { "call": "issues.updateComment", "params": { "comment_id": "$1.data.id", "body": "edited" }, "token": app },
            { "call": "issues.updateComment", "params": { "comment_id": "$1.data.id", "body": "edited" } },
        ]),
    );
    assert_eq!(r[0]["data"]["login"], "octocat", "{}", r[0]);
    assert_eq!(r[1]["data"]["user"]["login"], "octocat", "{}", r[1]);
    assert_eq!(r[2]["data"]["user"]["login"], "warden-app[bot]", "{}", r[2]);
    assert_eq!(status(&r[3]), 403, "{}", r[3]);
    assert_eq!(status(&r[4]), 403, "{}", r[4]);
    assert_eq!(status(&r[5]), 200, "{}", r[5]);
}

/// A gzipped SARIF over 10 MB is refused with 413 before anything is
/// kept. (Sent raw: the client's request would not fit in the
/// environment variable that carries it.)
#[test]
fn a_sarif_over_ten_megabytes_is_too_large() {
    use base64::Engine as _;
    use std::io::{Read as _, Write as _};
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(WRITE_ALL);
    let mut gz = vec![0x1f, 0x8b];
    gz.resize(runwarden::loopback::github::MAX_GZIP + 1, b'x');
    let body = json!({ "commit_sha": "0123456789abcdef0123456789abcdef01234567",
        "ref": "refs/heads/main",
        "sarif": base64::engine::general_purpose::STANDARD.encode(&gz) })
    .to_string();
    let url = svc.api_url();
    let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    write!(
        s,
        "POST /api/repos/octo/repo/code-scanning/sarifs HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("SARIF file is too large"), "{answer}");
    assert!(svc.sarifs().is_empty());
}
