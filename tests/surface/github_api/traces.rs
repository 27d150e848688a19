//! The `github-api` run traces, `run-annotation` and `run-log`, against
//! the loopback GitHub, whose jobs, annotations and log redirect
//! tests/system/loopback/github_runs.rs proves against `@octokit/rest`.
//! The test is the runner: it hands what `runwarden plant` printed on
//! stderr to the stand-in's job, as the runner puts a step's output in
//! the job log. An in-job probe skips both; a later job with
//! `checks: read` and `actions: read` reads both back (FAIL); a reader
//! refused the very read gets PASS with the permission named; a job still
//! running is no look (ERROR); cleanup keeps both, with the retention.

use super::*;
use runwarden::loopback::github::{GitHubServer, WRITE_ALL};
use std::path::Path;

const RUN: u64 = 77;
const TRACES: [&str; 2] = ["github:run-annotation", "github:run-log"];

fn config(extra: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n    read-token-env: READ_TOKEN\n{extra}"
    )
}

fn verdicts(p: &Probe) -> Vec<String> {
    TRACES.iter().map(|c| p.verdict(c)).collect()
}

/// Run A (`plant` in job `agent` of run 77), its stderr handed to the
/// stand-in's job as the runner would; the job then ends.
fn planted(svc: &GitHubServer, dir: &Path, token: &str, id: &str) -> Probe {
    planted_after(svc, dir, token, id, 0)
}

/// `planted`, in a step that printed `notices` notices before.
fn planted_after(svc: &GitHubServer, dir: &Path, token: &str, id: &str, notices: usize) -> Probe {
    let job = svc.add_job(REPO, RUN, "agent", "in_progress", SHA);
    for i in 0..notices {
        assert!(svc.runner_line(RUN, &format!("::notice::an earlier notice {i}")));
    }
    let env = [
        ("GITHUB_TOKEN", token),
        ("READ_TOKEN", token),
        ("GITHUB_RUN_ID", "77"),
        ("GITHUB_RUN_ATTEMPT", "1"),
    ];
    let p = run(dir, svc, &config(""), &env, &["plant", "--probe-id", id]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    for line in p.stderr.lines() {
        assert!(svc.runner_line(RUN, line));
    }
    svc.set_job_status(job, "completed");
    p
}

#[test]
fn an_in_job_probe_skips_the_run_traces() {
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(WRITE_ALL);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", token.as_str()),
        ("GITHUB_RUN_ID", "77"),
    ];
    let p = run(dir.path(), &svc, &config(""), &env, &["probe"]);
    assert_eq!(verdicts(&p), ["skipped", "skipped"], "{}", p.report);
    let d = p.finding("github:run-log")["detail"].to_string();
    assert!(d.contains("later job"), "{d}");
    // Outside Actions, the reason says that.
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &[("GITHUB_TOKEN", &token), ("READ_TOKEN", &token)],
        &["plant", "--probe-id", "gh-tr-0"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert!(
        !p.stderr.contains("runwarden probe gh-tr-0 run-"),
        "{}",
        p.stderr
    );
}

#[test]
fn a_later_job_reads_the_annotation_and_the_log_and_cleanup_keeps_them() {
    let svc = GitHubServer::start().unwrap();
    let mut all = WRITE_ALL.to_vec();
    all.push(("actions_variables", "write"));
    let writer = svc.token(&all);
    let dir = tempfile::tempdir().unwrap();
    let a = planted(&svc, dir.path(), &writer, "gh-tr-1");
    // On stderr, never stdout; the notice is a workflow command.
    assert!(
        a.stderr.contains("::notice title=rw-gh-tr-1-"),
        "{}",
        a.stderr
    );
    assert!(!a.stdout.contains("::notice title="), "{}", a.stdout);
    // No write permission at all: a reader's token, in another run.
    let reader = svc.token(&[("actions", "read"), ("checks", "read")]);
    let env = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", reader.as_str()),
        ("GITHUB_RUN_ID", "78"),
    ];
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &env,
        &["recover", "--probe-id", "gh-tr-1"],
    );
    assert_eq!(verdicts(&p), ["fail", "fail"], "{}", p.report);
    let d = p.finding("github:run-log")["detail"].to_string();
    assert!(d.contains("log holds the nonce"), "{d}");
    // The log URL was fetched without the token (the stand-in refuses
    // one), once.
    let c = run(
        dir.path(),
        &svc,
        &config(""),
        &env,
        &["cleanup", "--probe-id", "gh-tr-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    // (Found by probe id: the run is run A's, which this job does not know.)
    assert!(
        c.stdout.contains("the annotation \"rw-gh-tr-1-"),
        "{}",
        c.stdout
    );
    assert!(
        c.stdout.contains("the log line \"rw-gh-tr-1-"),
        "{}",
        c.stdout
    );
    assert!(c.stdout.contains("in run A's run"), "{}", c.stdout);
    assert!(c.stdout.contains("log retention"), "{}", c.stdout);
    no_secrets(&p, &[&writer, &reader]);
}

#[test]
fn a_refused_read_passes_naming_what_github_wanted() {
    let svc = GitHubServer::start().unwrap();
    let writer = svc.token(WRITE_ALL);
    let dir = tempfile::tempdir().unwrap();
    planted(&svc, dir.path(), &writer, "gh-tr-2");
    let recover = |reader: &str| {
        let env = [
            ("GITHUB_TOKEN", writer.as_str()),
            ("READ_TOKEN", reader),
            ("GITHUB_RUN_ID", "78"),
        ];
        run(
            dir.path(),
            &svc,
            &config(""),
            &env,
            &["recover", "--probe-id", "gh-tr-2"],
        )
    };
    // actions: read only: the annotations are refused.
    let p = recover(&svc.token(&[("actions", "read")]));
    assert_eq!(verdicts(&p), ["pass", "fail"], "{}", p.report);
    let d = p.finding("github:run-annotation")["detail"].to_string();
    assert!(d.contains("checks=read"), "{d}");
    // checks: read only: the jobs listing and the run's logs are refused:
    // the log is PASS; the annotation is read through the commit's check
    // runs, run B's other route (0.11.0: ERROR, "not tested").
    let p = recover(&svc.token(&[("checks", "read")]));
    assert_eq!(verdicts(&p), ["fail", "pass"], "{}", p.report);
    let d = p.finding("github:run-log")["detail"].to_string();
    assert!(d.contains("actions=read"), "{d}");
    let d = p.finding("github:run-annotation")["detail"].to_string();
    assert!(d.contains(&format!("commit {SHA}")), "{d}");
    // Neither (docs/action.md's `contents: read`): both routes refused,
    // both named: PASS.
    let p = recover(&svc.token(&[("contents", "read")]));
    assert_eq!(verdicts(&p), ["pass", "pass"], "{}", p.report);
    let d = p.finding("github:run-annotation")["detail"].to_string();
    assert!(
        d.contains("both of run B's routes") && d.contains("check runs"),
        "{d}"
    );
}

#[test]
fn a_job_still_running_is_no_look_unless_it_is_run_bs_own() {
    let svc = GitHubServer::start().unwrap();
    let writer = svc.token(WRITE_ALL);
    let dir = tempfile::tempdir().unwrap();
    planted(&svc, dir.path(), &writer, "gh-tr-3");
    let other = svc.add_job(REPO, RUN, "tests", "in_progress", SHA);
    let cfg = config("    consistency-wait: 1\n");
    let env = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", writer.as_str()),
        ("GITHUB_RUN_ID", "77"),
    ];
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["recover", "--probe-id", "gh-tr-3"],
    );
    assert_eq!(verdicts(&p), ["error", "error"], "{}", p.report);
    let d = p.finding("github:run-log")["detail"].to_string();
    assert!(
        d.contains("not current") && d.contains("in_progress"),
        "{d}"
    );
    // The job still running is run B's own (its runner): it is left out.
    let runner = svc
        .jobs()
        .into_iter()
        .find(|j| j.id == other)
        .unwrap()
        .runner_name;
    let mut own = env.to_vec();
    own.push(("RUNNER_NAME", &runner));
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &own,
        &["recover", "--probe-id", "gh-tr-3"],
    );
    assert_eq!(verdicts(&p), ["fail", "fail"], "{}", p.report);
}

/// A step that printed 10 notices before runwarden's drops both of its
/// notices while its log keeps the lines: the annotation is not current
/// (ERROR), never PASS, and the log still FAILs. One that printed 9
/// keeps the nonce's notice (FAIL: the witness speaks only for a miss).
#[test]
fn a_step_whose_notices_are_spent_is_no_look_for_the_annotation() {
    for (spent, id) in [(10, "gh-tr-4"), (9, "gh-tr-5")] {
        let svc = GitHubServer::start().unwrap();
        let writer = svc.token(WRITE_ALL);
        let dir = tempfile::tempdir().unwrap();
        planted_after(&svc, dir.path(), &writer, id, spent);
        let env = [
            ("GITHUB_TOKEN", writer.as_str()),
            ("READ_TOKEN", writer.as_str()),
            ("GITHUB_RUN_ID", "78"),
        ];
        let cfg = config("    consistency-wait: 1\n");
        let p = run(dir.path(), &svc, &cfg, &env, &["recover", "--probe-id", id]);
        let want = if spent == 10 { "error" } else { "fail" };
        assert_eq!(verdicts(&p), [want, "fail"], "{spent}: {}", p.report);
        if spent == 10 {
            let d = p.finding("github:run-annotation")["detail"].to_string();
            assert!(
                d.contains("not current") && d.contains("witness notice"),
                "{d}"
            );
        }
    }
}
