//! `type: github-api` against the loopback GitHub (src/loopback/github/,
//! proven against the real clients by tests/system/loopback/github_*.rs),
//! a file per kind of carrier as src/surface/github_api/ has them; the
//! probe's environment and the server they all start from live here.

use crate::common::*;
use runwarden::loopback::github::{GitHubServer, WRITE_ALL};
use serde_json::json;
use std::path::Path;

mod discussion;
mod dispatch;
mod objects;
mod scanning;
mod traces;

pub const REPO: &str = "octo/repo";
pub const SHA: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";

/// A loopback GitHub whose repository holds the commit `SHA`.
pub fn server() -> GitHubServer {
    let svc = GitHubServer::start().unwrap();
    svc.add("commit", REPO, json!({ "sha": SHA }));
    svc
}

/// A token like one given to an agent: everything GITHUB_TOKEN can
/// have, and variables too (a PAT or an app token).
pub fn permissive(svc: &GitHubServer) -> String {
    let mut all = WRITE_ALL.to_vec();
    all.push(("actions_variables", "write"));
    svc.token(&all)
}

/// runwarden `args` with `config`, in GitHub Actions on `REPO` at `SHA`
/// against `svc`, with a fixed key; `env` adds to that (a later value of
/// a name wins).
pub fn run(
    dir: &Path,
    svc: &GitHubServer,
    config: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> Probe {
    let api = svc.api_url();
    let mut all = vec![
        ("GITHUB_API_URL", api.as_str()),
        ("GITHUB_REPOSITORY", REPO),
        ("GITHUB_SHA", SHA),
        ("RUNWARDEN_KEY", "0123456789abcdef0123456789abcdef"),
    ];
    all.extend_from_slice(env);
    run_config(dir, config, &all, args)
}
