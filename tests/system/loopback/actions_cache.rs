//! The loopback Actions cache service (src/loopback/actions_cache.rs: the
//! actions-cache control, and the tests' stand-in for GitHub's) proven against the
//! real client, npm `@actions/cache`: save and restore through the Twirp
//! API and signed blob URLs, restore through a prefix key, a read-only
//! token refused, and the branch scope rules. Only a stand-in that passes
//! these may be used to test runwarden's own client.

use crate::common::strip_runner_env;
use runwarden::loopback::actions_cache::CacheServer;
use std::path::{Path, PathBuf};
use std::process::Command;

const CLIENT: &str = "@actions/cache@6.3.0";

/// `@actions/cache`'s entry point, installed once under the target dir.
fn client_lib() -> PathBuf {
    crate::common::npm_client("npm-actions-cache", CLIENT, "@actions/cache/lib/cache.js")
}

struct Client {
    out: String,
    result: serde_json::Value,
}

/// Runs the real client once, as a step holding `token` would.
fn client(svc: &CacheServer, token: &str, dir: &Path, request: serde_json::Value) -> Client {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/actions-cache-client.mjs");
    let tmp = dir.join("runner-temp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut c = Command::new("node");
    c.arg(script).arg(request.to_string()).current_dir(dir);
    strip_runner_env(&mut c);
    let out = c
        .env("ACTIONS_CACHE_LIB", client_lib())
        .env("ACTIONS_RESULTS_URL", svc.results_url())
        .env("ACTIONS_RUNTIME_TOKEN", token)
        .env("ACTIONS_CACHE_SERVICE_V2", "true")
        .env("RUNNER_TEMP", &tmp)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the client failed:\n{all}");
    let last = stdout.lines().last().unwrap_or("null");
    Client {
        result: serde_json::from_str(last).unwrap_or(serde_json::Value::Null),
        out: all,
    }
}

fn save(svc: &CacheServer, token: &str, dir: &Path, key: &str, content: &str) -> Client {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/payload.txt"), content).unwrap();
    client(
        svc,
        token,
        dir,
        serde_json::json!({ "op": "save", "paths": ["data"], "key": key }),
    )
}

/// Restores into an empty `data` and returns (matched key, content).
fn restore(
    svc: &CacheServer,
    token: &str,
    dir: &Path,
    key: &str,
    restore_keys: &[&str],
) -> (Option<String>, Option<String>) {
    let _ = std::fs::remove_dir_all(dir.join("data"));
    let c = client(
        svc,
        token,
        dir,
        serde_json::json!({ "op": "restore", "paths": ["data"], "key": key, "restoreKeys": restore_keys }),
    );
    (
        c.result["matchedKey"].as_str().map(String::from),
        std::fs::read_to_string(dir.join("data/payload.txt")).ok(),
    )
}

const MAIN_RW: &[(&str, u8)] = &[("refs/heads/main", 3)];

#[test]
fn the_real_client_saves_and_restores_exactly_and_by_prefix() {
    let svc = CacheServer::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let token = svc.runtime_token(MAIN_RW);
    let s = save(
        &svc,
        &token,
        work.path(),
        "deps-linux-abc123",
        "hello cache\n",
    );
    assert!(s.result["cacheId"].as_i64().unwrap() > 0, "{}", s.out);
    let e = &svc.entries()[0];
    assert!(e.finalized && e.scope == "refs/heads/main", "{e:?}");
    assert_eq!(e.key, "deps-linux-abc123");

    let (matched, content) = restore(&svc, &token, work.path(), "deps-linux-abc123", &[]);
    assert_eq!(matched.as_deref(), Some("deps-linux-abc123"));
    assert_eq!(content.as_deref(), Some("hello cache\n"));
    // A key nobody wrote, with a generic restore prefix anyone could guess.
    let (matched, content) = restore(&svc, &token, work.path(), "deps-linux-zzz", &["deps-"]);
    assert_eq!(matched.as_deref(), Some("deps-linux-abc123"));
    assert_eq!(content.as_deref(), Some("hello cache\n"));
    let (matched, _) = restore(&svc, &token, work.path(), "other", &["nothing-"]);
    assert_eq!(matched, None);
    // Entries are immutable: the same key and version again is refused.
    let again = save(&svc, &token, work.path(), "deps-linux-abc123", "changed\n");
    assert_eq!(again.result["cacheId"], -1, "{}", again.out);
    assert_eq!(svc.entries().len(), 1);
}

#[test]
fn a_read_only_token_is_refused_and_scopes_hold() {
    let svc = CacheServer::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let read_only = svc.runtime_token(&[("refs/heads/main", 1)]);
    let s = save(&svc, &read_only, work.path(), "ro-key", "x\n");
    assert_eq!(s.result["cacheId"], -1, "{}", s.out);
    assert!(s.out.contains("cache write denied"), "{}", s.out);
    assert!(svc.entries().is_empty());

    // Written on the default branch: restorable from a pull request.
    let main = svc.runtime_token(MAIN_RW);
    save(&svc, &main, work.path(), "shared-1", "from main\n");
    let pr1 = svc.runtime_token(&[("refs/pull/1/merge", 3), ("refs/heads/main", 1)]);
    let (matched, content) = restore(&svc, &pr1, work.path(), "shared-1", &[]);
    assert_eq!(matched.as_deref(), Some("shared-1"));
    assert_eq!(content.as_deref(), Some("from main\n"));
    // Written by a pull request: its own scope, not another PR's.
    let s = save(&svc, &pr1, work.path(), "pr-only", "from pr 1\n");
    assert!(s.result["cacheId"].as_i64().unwrap() > 0, "{}", s.out);
    let e = svc
        .entries()
        .into_iter()
        .find(|e| e.key == "pr-only")
        .unwrap();
    assert_eq!(e.scope, "refs/pull/1/merge");
    let (matched, _) = restore(&svc, &pr1, work.path(), "pr-only", &[]);
    assert_eq!(matched.as_deref(), Some("pr-only"));
    let pr2 = svc.runtime_token(&[("refs/pull/2/merge", 3), ("refs/heads/main", 1)]);
    let (matched, _) = restore(&svc, &pr2, work.path(), "pr-only", &[]);
    assert_eq!(matched, None);
    // A token with no scope to read is refused by the service.
    let write_only = svc.runtime_token(&[("refs/heads/main", 2)]);
    let c = client(
        &svc,
        &write_only,
        work.path(),
        serde_json::json!({ "op": "restore", "paths": ["data"], "key": "shared-1" }),
    );
    assert_eq!(c.result["matchedKey"], serde_json::Value::Null, "{}", c.out);
}

#[test]
fn the_rest_side_lists_pages_and_deletes_only_with_actions_write() {
    let svc = CacheServer::start().unwrap();
    for i in 0..150 {
        svc.add(&format!("foreign-{i}"), "v1", "refs/heads/main", b"x");
    }
    svc.add("mine", "v1", "refs/heads/feature", b"y");
    let (read_token, write_token) = (svc.api_token(false), svc.api_token(true));
    let curl = |method: &str, path: &str, token: &str| -> (u16, String) {
        let out = Command::new("curl")
            .args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method, "-H"])
            .arg(format!("Authorization: Bearer {token}"))
            .arg(format!("{}/repos/o/r/actions/caches{path}", svc.api_url()))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.parse().unwrap(), body.to_string())
    };
    let (code, body) = curl("GET", "?per_page=100&page=2", &read_token);
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["total_count"], 151);
    assert_eq!(v["actions_caches"].as_array().unwrap().len(), 51);
    let (_, body) = curl("GET", "?key=mi&ref=refs/heads/feature", &read_token);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["actions_caches"][0]["key"], "mine");
    assert_eq!(curl("GET", "", "nobody").0, 401);
    assert_eq!(curl("DELETE", "?key=mine", &read_token).0, 403);
    assert_eq!(
        curl("DELETE", "?key=mine&ref=refs/heads/feature", &write_token).0,
        204
    );
    assert_eq!(svc.entries().len(), 150);
    assert_eq!(curl("DELETE", "?key=mine", &write_token).0, 404);
}
