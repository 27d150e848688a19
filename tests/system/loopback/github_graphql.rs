//! The loopback GitHub's GraphQL endpoint for discussions
//! (src/loopback/github/graphql.rs) proven against the real client, npm
//! `@octokit/graphql`, with exactly the documents runwarden sends
//! (`runwarden::surface::github_api::GRAPHQL_DOCUMENTS`): the repository's
//! id and categories, a discussion created, listed (paged by cursor, the
//! client's own `after`), read back by id and deleted; GitHub's refusal
//! (200 with an error of type `FORBIDDEN`) for a token without
//! `discussions`, which the client throws as a GraphQL error; who the
//! token is (`viewer`); a document the stand-in does not take;
//! discussions turned off.

use crate::common::strip_runner_env;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use runwarden::surface::github_api::{GRAPHQL_DOCUMENTS as DOCS, graphql_url};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const CLIENT: &str = "@octokit/graphql@9.0.5";

fn client_lib() -> std::path::PathBuf {
    crate::common::npm_client(
        "npm-octokit-graphql",
        CLIENT,
        "@octokit/graphql/dist-bundle/index.js",
    )
}

/// Runs `ops` (see fixtures/octokit-graphql-client.mjs) with `token`.
fn client(svc: &GitHubServer, token: &str, ops: Value) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/octokit-graphql-client.mjs");
    let request = json!({ "baseUrl": svc.api_url(), "token": token, "ops": ops });
    let mut c = Command::new("node");
    c.arg(script).env("CLIENT_REQUEST", request.to_string());
    strip_runner_env(&mut c);
    let out = c.env("OCTOKIT_GRAPHQL_LIB", client_lib()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the client failed:\n{all}");
    let v: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap_or(Value::Null);
    v["results"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no results:\n{all}"))
}

fn repo() -> Value {
    json!({ "owner": "octo", "name": "repo" })
}

#[test]
fn the_graphql_url_is_where_github_puts_it() {
    assert_eq!(
        graphql_url("https://api.github.com"),
        "https://api.github.com/graphql"
    );
    assert_eq!(
        graphql_url("https://ghe.example/api/v3"),
        "https://ghe.example/api/graphql"
    );
    let svc = GitHubServer::start().unwrap();
    // The client's own rule for its baseUrl lands on the same endpoint.
    assert_eq!(
        graphql_url(&svc.api_url()),
        format!("{}/graphql", svc.api_url())
    );
}

#[test]
fn discussions_created_listed_read_back_and_deleted() {
    let [categories, listing, create, node, delete, viewer] = DOCS;
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(WRITE_ALL);
    let mut ops = vec![json!({ "query": categories, "variables": repo() })];
    for i in 0..102 {
        ops.push(json!({ "query": create, "variables": {
            "repositoryId": "$0.data.repository.id",
            "categoryId": "$0.data.repository.discussionCategories.nodes.1.id",
            "title": format!("t{i}"), "body": format!("b{i}") } }));
    }
    let r = client(&svc, &token, Value::Array(ops));
    let repo_data = &r[0]["data"]["repository"];
    assert_eq!(repo_data["hasDiscussionsEnabled"], true, "{}", r[0]);
    let slugs: Vec<_> = repo_data["discussionCategories"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["announcements", "general", "q-a"]);
    let made = &r[102]["data"]["createDiscussion"]["discussion"];
    assert_eq!(made["title"], "t101", "{}", r[102]);
    let mut v = repo();
    let r = client(
        &svc,
        &token,
        json!([
            { "query": listing, "variables": v.clone() },
            { "query": listing, "variables": { "owner": "octo", "name": "repo", "after": "$0.data.repository.discussions.pageInfo.endCursor" } },
            { "query": node, "variables": { "id": made["id"] } },
            { "query": delete, "variables": { "id": made["id"] } },
            { "query": node, "variables": { "id": made["id"] } },
            { "query": delete, "variables": { "id": made["id"] } },
        ]),
    );
    let page1 = &r[0]["data"]["repository"]["discussions"];
    assert_eq!(page1["totalCount"], 102, "{}", r[0]);
    assert_eq!(page1["nodes"].as_array().unwrap().len(), 100);
    assert_eq!(page1["nodes"][0]["title"], "t101", "newest first");
    assert_eq!(page1["pageInfo"]["hasNextPage"], true);
    let page2 = &r[1]["data"]["repository"]["discussions"];
    assert_eq!(page2["nodes"].as_array().unwrap().len(), 2, "{}", r[1]);
    assert_eq!(page2["pageInfo"]["hasNextPage"], false);
    assert_eq!(r[2]["data"]["node"]["body"], "b101", "{}", r[2]);
    assert_eq!(r[2]["data"]["node"]["author"]["login"], "github-actions");
    assert_eq!(
        r[3]["data"]["deleteDiscussion"]["discussion"]["id"],
        made["id"]
    );
    // Gone: the node is null, with GitHub's NOT_FOUND beside it.
    assert!(r[4]["error"]["data"]["node"].is_null(), "{}", r[4]);
    assert!(r[4]["error"]["data"].is_object(), "{}", r[4]);
    assert_eq!(r[4]["error"]["errors"][0]["type"], "NOT_FOUND", "{}", r[4]);
    assert_eq!(r[5]["error"]["errors"][0]["type"], "NOT_FOUND", "{}", r[5]);

    // Without `discussions`: GitHub's refusal to each (the categories
    // too, as the third security review saw GitHub refuse them), which
    // the client throws.
    let weak = svc.token(CONTENTS_READ);
    let create_vars =
        json!({ "repositoryId": "R_x", "categoryId": "C_x", "title": "t", "body": "b" });
    let r = client(
        &svc,
        &weak,
        json!([
            { "query": categories, "variables": repo() },
            { "query": listing, "variables": repo() },
            { "query": create, "variables": create_vars },
            { "query": "query { rateLimit { remaining } }" },
            { "query": viewer },
        ]),
    );
    for (i, field) in [
        (0, "repository"),
        (1, "repository"),
        (2, "createDiscussion"),
    ] {
        let e = &r[i]["error"];
        assert_eq!(e["name"], "GraphqlResponseError", "{}", r[i]);
        assert_eq!(e["errors"][0]["type"], "FORBIDDEN", "{}", r[i]);
        assert_eq!(
            e["errors"][0]["message"],
            "Resource not accessible by integration"
        );
        assert_eq!(e["errors"][0]["path"][0], field);
    }
    assert!(
        r[3]["error"]["errors"][0]["message"].is_string(),
        "{}",
        r[3]
    );
    assert!(r[3]["error"]["errors"][0]["type"].is_null(), "{}", r[3]);
    // Who writes: no permission needed; the job's token is a bot.
    assert_eq!(
        r[4]["data"]["viewer"]["login"], "github-actions[bot]",
        "{}",
        r[4]
    );

    svc.disable_discussions("octo/repo");
    v["after"] = Value::Null;
    let r = client(
        &svc,
        &token,
        json!([{ "query": categories, "variables": v }]),
    );
    assert_eq!(
        r[0]["data"]["repository"]["hasDiscussionsEnabled"], false,
        "{}",
        r[0]
    );
}
