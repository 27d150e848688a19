//! The loopback GitHub's contents route (src/loopback/github/rest_commits.rs),
//! which coverage reads the workflow file through, proven against the
//! real client, npm `@octokit/rest` (`repos.getContent`): a file at a
//! commit as base64 in lines, 404 at another ref, and GitHub's refusal of
//! a token without `contents: read`.

use super::github_rest::{assert_refused, octokit, status};
use base64::Engine as _;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use serde_json::json;

#[test]
fn a_file_at_a_commit_and_the_refusals() {
    let svc = GitHubServer::start().unwrap();
    let text =
        "on: push\npermissions:\n  contents: read\njobs:\n  probe:\n    runs-on: ubuntu-latest\n"
            .repeat(3);
    let sha = "f00dfeed00000000000000000000000000000001";
    svc.add(
        "file",
        "octo/repo",
        json!({ "path": ".github/workflows/ci.yml", "ref": sha, "text": text }),
    );
    let reader = svc.token(CONTENTS_READ);
    let nobody = svc.token(&[("issues", "read")]);
    let r = octokit(
        &svc,
        &reader,
        json!([
            { "call": "repos.getContent", "params": { "path": ".github/workflows/ci.yml", "ref": sha } },
            { "call": "repos.getContent", "params": { "path": ".github/workflows/ci.yml", "ref": "0000000000000000000000000000000000000000" } },
            { "call": "repos.getContent", "params": { "path": ".github/workflows/ci.yml", "ref": sha }, "token": nobody },
        ]),
    );
    assert_eq!(status(&r[0]), 200, "{}", r[0]);
    let d = &r[0]["data"];
    assert_eq!(
        (d["type"].as_str(), d["encoding"].as_str()),
        (Some("file"), Some("base64"))
    );
    let content: String = d["content"]
        .as_str()
        .unwrap()
        .chars()
        .filter(|c| *c != '\n')
        .collect();
    assert!(
        d["content"].as_str().unwrap().contains('\n'),
        "GitHub's lines of base64"
    );
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(content)
        .unwrap();
    assert_eq!(String::from_utf8(bytes).unwrap(), text);
    assert_eq!(status(&r[1]), 404, "{}", r[1]);
    assert_refused(&r[2], "contents=read");
}
