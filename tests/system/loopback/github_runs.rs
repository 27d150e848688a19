//! The loopback GitHub's workflow run jobs (src/loopback/github/rest_runs.rs)
//! proven against the real client, npm `@octokit/rest` (through
//! github_rest.rs's driver): the run's jobs with their check runs, the
//! annotations a `::notice` became, and the job log's 302 to a signed
//! URL, which serves the log once, without the token, and refuses a
//! request that carries one; the permissions GitHub asks for each.

use super::github_rest::{assert_refused, octokit, status};
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use serde_json::json;
use std::io::{Read as _, Write as _};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// `GET url` straight, with `auth` as the Authorization header when
/// given: (status line, body).
fn get(url: &str, auth: Option<&str>) -> (String, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = std::net::TcpStream::connect(host).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    )
}

#[test]
fn jobs_annotations_and_the_log_redirect() {
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(WRITE_ALL);
    let job = svc.add_job("octo/repo", 9, "build", "completed", SHA);
    assert!(svc.runner_line(9, "::notice title=rw-a%3Ab::runwarden probe x y"));
    assert!(svc.runner_line(9, "a plain line"));
    assert!(!svc.runner_line(10, "no such run"));
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "actions.listJobsForWorkflowRun", "params": { "run_id": 9, "filter": "all" } },
            { "call": "checks.listAnnotations", "params": { "check_run_id": job } },
            { "request": "GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs",
              "params": { "job_id": job, "request": { "redirect": "manual" } } },
            { "call": "actions.listJobsForWorkflowRun", "params": { "run_id": 10 } },
        ]),
    );
    assert_eq!(r[0]["data"]["total_count"], 1, "{}", r[0]);
    let j = &r[0]["data"]["jobs"][0];
    assert_eq!(j["status"], "completed");
    assert!(
        j["check_run_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/check-runs/{job}")),
        "{j}"
    );
    let notes = r[1]["data"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{}", r[1]);
    assert_eq!(notes[0]["title"], "rw-a:b");
    assert_eq!(notes[0]["message"], "runwarden probe x y");
    assert_eq!(notes[0]["annotation_level"], "notice");
    assert_eq!(status(&r[2]), 302, "{}", r[2]);
    let location = r[2]["headers"]["location"].as_str().unwrap().to_string();
    assert_eq!(status(&r[3]), 404, "{}", r[3]);
    // With a token: refused, as blob storage refuses it.
    let (line, _) = get(&location, Some(&format!("Bearer {token}")));
    assert!(line.contains(" 403"), "{line}");
    let (line, body) = get(&location, None);
    assert!(line.contains(" 200"), "{line}");
    assert!(body.ends_with(" a plain line\n"), "{body}");
    assert!(!body.contains("::notice"), "{body}");
    // Once.
    let (line, _) = get(&location, None);
    assert!(line.contains(" 403"), "{line}");

    let weak = svc.token(CONTENTS_READ);
    let r = octokit(
        &svc,
        &weak,
        json!([
            { "call": "actions.listJobsForWorkflowRun", "params": { "run_id": 9 } },
            { "call": "checks.listAnnotations", "params": { "check_run_id": job } },
            { "call": "actions.downloadJobLogsForWorkflowRun", "params": { "job_id": job } },
            { "call": "actions.downloadWorkflowRunLogs", "params": { "run_id": 9 } },
        ]),
    );
    assert_refused(&r[0], "actions=read");
    assert_refused(&r[1], "checks=read");
    assert_refused(&r[2], "actions=read");
    assert_refused(&r[3], "actions=read");
}

/// Dispatches start runs only where a workflow takes them, titled as its
/// `run-name` shows the input or the event's action; runs are listed by
/// event and creation time, newest first, cancelled and deleted; each
/// route behind the permission GitHub names.
#[test]
fn dispatches_start_runs_that_are_listed_cancelled_and_deleted() {
    let svc = GitHubServer::start().unwrap();
    svc.add_workflow("octo/repo", "probe.yml", "title");
    let token = svc.token(WRITE_ALL);
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "actions.createWorkflowDispatch",
              "params": { "workflow_id": "probe.yml", "ref": "main", "inputs": { "title": "rw-one" } } },
            { "call": "actions.createWorkflowDispatch",
              "params": { "workflow_id": "probe.yml", "ref": "main", "inputs": { "other": "x" } } },
            { "call": "actions.createWorkflowDispatch",
              "params": { "workflow_id": "none.yml", "ref": "main" } },
            // No workflow takes repository_dispatch yet: 204, no run.
            { "call": "repos.createDispatchEvent", "params": { "event_type": "rw-two" } },
            { "call": "repos.createDispatchEvent", "params": { "event_type": "x".repeat(101) } },
            { "call": "actions.listWorkflowRunsForRepo",
              "params": { "event": "workflow_dispatch", "created": ">=2000-01-01T00:00:00Z" } },
            { "call": "actions.listWorkflowRunsForRepo",
              "params": { "event": "workflow_dispatch", "created": ">=2999-01-01T00:00:00Z" } },
            { "call": "actions.listWorkflowRunsForRepo", "params": { "event": "repository_dispatch" } },
        ]),
    );
    assert_eq!(status(&r[0]), 204, "{}", r[0]);
    assert_eq!(status(&r[1]), 422, "{}", r[1]);
    assert_eq!(status(&r[2]), 404, "{}", r[2]);
    assert_eq!(status(&r[3]), 204, "{}", r[3]);
    assert_eq!(status(&r[4]), 422, "{}", r[4]);
    assert_eq!(r[5]["data"]["total_count"], 1, "{}", r[5]);
    let run = &r[5]["data"]["workflow_runs"][0];
    assert_eq!(run["display_title"], "rw-one");
    assert_eq!(run["event"], "workflow_dispatch");
    assert_eq!(r[6]["data"]["total_count"], 0, "{}", r[6]);
    assert_eq!(r[7]["data"]["total_count"], 0, "{}", r[7]);

    svc.add_dispatch_workflow("octo/repo");
    svc.set_dispatched_status(Some("in_progress"));
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "repos.createDispatchEvent", "params": { "event_type": "rw-two" } },
            { "call": "actions.listWorkflowRunsForRepo", "params": { "event": "repository_dispatch" } },
            { "call": "actions.deleteWorkflowRun", "params": { "run_id": "$1.data.workflow_runs.0.id" } },
            { "call": "actions.cancelWorkflowRun", "params": { "run_id": "$1.data.workflow_runs.0.id" } },
            { "call": "actions.getWorkflowRun", "params": { "run_id": "$1.data.workflow_runs.0.id" } },
            { "call": "actions.cancelWorkflowRun", "params": { "run_id": "$1.data.workflow_runs.0.id" } },
            { "call": "actions.deleteWorkflowRun", "params": { "run_id": "$1.data.workflow_runs.0.id" } },
            { "call": "actions.getWorkflowRun", "params": { "run_id": "$1.data.workflow_runs.0.id" } },
        ]),
    );
    assert_eq!(
        r[1]["data"]["workflow_runs"][0]["display_title"], "rw-two",
        "{}",
        r[1]
    );
    assert_eq!(r[1]["data"]["workflow_runs"][0]["status"], "in_progress");
    assert_eq!(status(&r[2]), 409, "{}", r[2]);
    assert_eq!(status(&r[3]), 202, "{}", r[3]);
    assert_eq!(r[4]["data"]["conclusion"], "cancelled", "{}", r[4]);
    assert_eq!(status(&r[5]), 409, "{}", r[5]);
    assert_eq!(status(&r[6]), 204, "{}", r[6]);
    assert_eq!(status(&r[7]), 404, "{}", r[7]);

    let weak = svc.token(CONTENTS_READ);
    let r = octokit(
        &svc,
        &weak,
        json!([
            { "call": "actions.createWorkflowDispatch",
              "params": { "workflow_id": "probe.yml", "ref": "main", "inputs": { "title": "t" } } },
            { "call": "repos.createDispatchEvent", "params": { "event_type": "t" } },
            { "call": "actions.listWorkflowRunsForRepo", "params": { "event": "repository_dispatch" } },
        ]),
    );
    assert_refused(&r[0], "actions=write");
    assert_refused(&r[1], "contents=write");
    assert_refused(&r[2], "actions=read");
}
