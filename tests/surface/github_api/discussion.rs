//! `discussion` (GraphQL) against the loopback GitHub, whose GraphQL
//! tests/system/loopback/github_graphql.rs proves against
//! `@octokit/graphql`: a permissive token opens it and cleanup deletes
//! only the probe's discussion, the restricted default closes it with
//! GitHub's FORBIDDEN named, and it goes in the category named.

use super::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use serde_json::json;

fn config(extra: &str) -> String {
    format!("version: 1\nsurfaces:\n  - name: github\n    type: github-api\n{extra}")
}

/// The discussions in `svc` (title, category id).
fn discussions(svc: &GitHubServer) -> Vec<(String, String)> {
    svc.objects("discussion")
        .iter()
        .map(|d| {
            (
                d["title"].as_str().unwrap_or("").to_string(),
                d["category"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_discussion_opens_with_a_permissive_token_and_cleanup_deletes_only_it() {
    let svc = server();
    let token = permissive(&svc);
    // Someone else's discussion, which nothing may touch.
    svc.add(
        "discussion",
        REPO,
        json!({ "title": "hello", "body": "rw-gh-d-1-", "category": "DIC_kwDOgeneral0",
                "node_id": "D_foreign" }),
    );
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &[("GITHUB_TOKEN", &token)],
        &["plant", "--probe-id", "gh-d-1"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    // In `general`, by default.
    let d = discussions(&svc);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(
        d[1].0.starts_with("rw-gh-d-1-") && d[1].1 == "DIC_kwDOgeneral0",
        "{d:?}"
    );
    let reader = svc.token(&[("discussions", "read")]);
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", reader.as_str()),
    ];
    let cfg = config("    read-token-env: READ_TOKEN\n");
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["recover", "--probe-id", "gh-d-1"],
    );
    assert_eq!(p.verdict("github:discussion"), "fail", "{}", p.report);
    let detail = p.finding("github:discussion")["detail"].to_string();
    assert!(detail.contains("GraphQL"), "{detail}");
    // A reader without discussions: GitHub's refusal, named.
    let blind = svc.token(&[("contents", "read")]);
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("READ_TOKEN", blind.as_str()),
    ];
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["recover", "--probe-id", "gh-d-1"],
    );
    assert_eq!(p.verdict("github:discussion"), "pass", "{}", p.report);
    let detail = p.finding("github:discussion")["detail"].to_string();
    assert!(
        detail.contains("FORBIDDEN") && detail.contains("discussions=read"),
        "{detail}"
    );
    let c = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["cleanup", "--probe-id", "gh-d-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    let left = discussions(&svc);
    assert_eq!(
        left,
        [("hello".to_string(), "DIC_kwDOgeneral0".to_string())]
    );
    no_secrets(&p, &[&token, &reader, &blind]);
}

#[test]
fn a_discussion_is_refused_skipped_when_off_and_goes_in_the_category_named() {
    let svc = server();
    let weak = svc.token(CONTENTS_READ);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &[("GITHUB_TOKEN", &weak)],
        &["probe"],
    );
    // Refused the categories, which the write needs first: the write is
    // not tried, so SKIPPED with GitHub's answer (0.11.0: ERROR, a
    // failed job for the configuration docs/action.md recommends).
    assert_eq!(p.verdict("github:discussion"), "skipped", "{}", p.report);
    let d = p.finding("github:discussion")["detail"].to_string();
    assert!(
        d.contains("FORBIDDEN") && d.contains("discussions=read") && d.contains("not tried"),
        "{d}"
    );
    // With discussions: read, the very write is refused: PASS.
    let reader = svc.token(&[("contents", "read"), ("discussions", "read")]);
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &[("GITHUB_TOKEN", &reader)],
        &["probe"],
    );
    assert_eq!(p.verdict("github:discussion"), "pass", "{}", p.report);
    let d = p.finding("github:discussion")["detail"].to_string();
    assert!(
        d.contains("FORBIDDEN") && d.contains("discussions=write"),
        "{d}"
    );
    let token = svc.token(WRITE_ALL);
    let cfg = config("    discussion-category: q&a\n");
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &[("GITHUB_TOKEN", &token)],
        &["plant", "--probe-id", "gh-d-2"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(discussions(&svc)[0].1, "DIC_kwDOquestion");
    let cfg = config("    discussion-category: ideas\n");
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(p.verdict("github:discussion"), "error", "{}", p.report);
    let d = p.finding("github:discussion")["detail"].to_string();
    assert!(
        d.contains(r#"it has \"Announcements\", \"General\", \"Q&A\""#),
        "{d}"
    );
    svc.disable_discussions(REPO);
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(p.verdict("github:discussion"), "skipped", "{}", p.report);
    let d = p.finding("github:discussion")["detail"].to_string();
    assert!(d.contains("turned off"), "{d}");
}

/// Cleanup by probe id finds the plant by its text: a copy of it that
/// someone else wrote is theirs, listed and left; the probe's own goes.
#[test]
fn cleanup_by_probe_id_leaves_a_copy_by_another_author() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let env = [("GITHUB_TOKEN", token.as_str())];
    let p = run(
        dir.path(),
        &svc,
        &config(""),
        &env,
        &["plant", "--probe-id", "gh-d-3"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    let ours = svc.objects("discussion")[0].clone();
    svc.add(
        "discussion",
        REPO,
        json!({ "title": ours["title"], "body": ours["body"], "category": ours["category"],
                "node_id": "D_copy", "author": "mallory" }),
    );
    let c = run(
        dir.path(),
        &svc,
        &config(""),
        &env,
        &["cleanup", "--probe-id", "gh-d-3"],
    );
    assert_eq!(c.code, 1, "{}\n{}", c.stdout, c.stderr);
    assert!(
        c.stdout.contains("another author") && c.stdout.contains("D_copy"),
        "{}",
        c.stdout
    );
    let left: Vec<String> = svc
        .objects("discussion")
        .iter()
        .map(|d| d["node_id"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(left, ["D_copy"]);
}
