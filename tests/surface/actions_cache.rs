//! `type: actions-cache` against the loopback cache service
//! (src/loopback/actions_cache.rs, which tests/loopback/actions_cache.rs
//! proves against the real client, npm `@actions/cache`): the carriers open
//! and closed by the token's scopes, the service down, no token, branch
//! scopes across jobs, cleanup among 1,000 foreign entries, and no
//! credential in any output.

use crate::common::*;
use runwarden::loopback::actions_cache::CacheServer;
use std::path::Path;

const CARRIERS: [&str; 4] = [
    "cache-key",
    "cache-version",
    "cache-content",
    "restore-prefix",
];

const CONFIG: &str = "version: 1\nsurfaces:\n  - name: cache\n    type: actions-cache\n";

const MAIN_RW: &[(&str, u8)] = &[("refs/heads/main", 3)];

/// The runner's environment for a step holding `token` (and `api` as
/// GITHUB_TOKEN), pointed at `svc`.
fn runner_env(svc: &CacheServer, token: Option<&str>, api: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![
        ("ACTIONS_RESULTS_URL".to_string(), svc.results_url()),
        ("GITHUB_API_URL".to_string(), svc.api_url()),
        ("GITHUB_REPOSITORY".to_string(), "octo/repo".to_string()),
    ];
    env.extend(token.map(|t| ("ACTIONS_RUNTIME_TOKEN".to_string(), t.to_string())));
    env.extend(api.map(|t| ("GITHUB_TOKEN".to_string(), t.to_string())));
    env
}

/// Runs `args` (a subcommand and its options) with the config in `dir`
/// (CONFIG unless a test wrote its own), as a step holding these tokens,
/// and reads the report of probe and recover.
fn run(
    dir: &Path,
    svc: &CacheServer,
    token: Option<&str>,
    api: Option<&str>,
    args: &[&str],
) -> Probe {
    run_with(dir, svc, token, api, None, args)
}

/// `run` with a marker key (`RUNWARDEN_KEY`), as the plant, recover and
/// cleanup jobs of one workflow share one.
fn run_keyed(
    dir: &Path,
    svc: &CacheServer,
    token: &str,
    api: &str,
    key: &str,
    args: &[&str],
) -> Probe {
    run_with(dir, svc, Some(token), Some(api), Some(key), args)
}

fn run_with(
    dir: &Path,
    svc: &CacheServer,
    token: Option<&str>,
    api: Option<&str>,
    key: Option<&str>,
    args: &[&str],
) -> Probe {
    let config = std::fs::read_to_string(dir.join("runwarden.yml")).unwrap_or(CONFIG.into());
    let mut env = runner_env(svc, token, api);
    env.extend(key.map(|k| ("RUNWARDEN_KEY".to_string(), k.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    run_config(dir, &config, &env, args)
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("cache:{c}")))
        .collect()
}

/// The service's entries as (key, version, scope), sorted.
fn entries(svc: &CacheServer) -> Vec<(String, String, String)> {
    let mut e: Vec<_> = svc
        .entries()
        .into_iter()
        .map(|e| (e.key, e.version, e.scope))
        .collect();
    e.sort();
    e
}

/// No output of `p` (stdout, stderr, report) holds a credential.
fn no_secrets(p: &Probe, secrets: &[&str]) {
    let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
    for s in secrets {
        assert!(!all.contains(s), "a credential leaked:\n{all}");
    }
}

#[test]
fn every_carrier_is_open_with_a_read_write_token_and_cleanup_takes_only_the_plants() {
    let svc = CacheServer::start().unwrap();
    for i in 0..1000 {
        // Foreign entries, including keys in runwarden's own form.
        let key = match i % 4 {
            0 => format!("npm-linux-{i}"),
            1 => format!("runwarden-other-cache-key-{i:032x}"),
            2 => format!("weird key, with ;&?=% chars {i}"),
            _ => format!("pip-{i}"),
        };
        svc.add(&key, "v1", "refs/heads/main", b"foreign");
    }
    let before = entries(&svc);
    let token = svc.runtime_token(MAIN_RW);
    let api = svc.api_token(true);
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, Some(&token), Some(&api), &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
    for c in CARRIERS {
        let f = p.finding(&format!("cache:{c}"));
        assert_eq!(f["control"], "recovered", "{f}");
        assert_eq!(f["persistence"], "until-evicted");
        let detail = f["detail"].as_str().unwrap();
        assert!(detail.contains("refs/heads/main"), "{c}: {detail}");
    }
    let facts = &p.report["surfaces"][0]["facts"];
    assert_eq!(facts["runtime-token"], "ACTIONS_RUNTIME_TOKEN", "{facts}");
    assert_eq!(facts["scopes"], "\"refs/heads/main\" (read, write)");
    assert_eq!(facts["api-token"], "GITHUB_TOKEN");
    // Cleanup: exactly the four plants gone, every foreign entry as it was.
    assert_eq!(entries(&svc), before);
    assert_eq!(p.report["cleanup"]["left"], serde_json::json!([]));
    let sig = svc.state.lock().unwrap().sig.clone();
    no_secrets(&p, &[&token, &api, &sig]);
}

#[test]
fn a_read_only_token_closes_every_carrier_and_the_service_down_is_an_error() {
    let svc = CacheServer::start().unwrap();
    let token = svc.runtime_token(&[("refs/heads/main", 1)]);
    let api = svc.api_token(false);
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, Some(&token), Some(&api), &["probe"]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 4], "{}", p.report);
    for c in CARRIERS {
        let d = p.finding(&format!("cache:{c}"))["detail"].to_string();
        assert!(d.contains("cache write denied"), "{c}: {d}");
    }
    assert!(svc.entries().is_empty());
    assert_eq!(
        p.report["surfaces"][0]["facts"]["scopes"],
        "\"refs/heads/main\" (read)"
    );

    // The service and the API gone: every carrier ERROR, the run fails.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let down = format!(
        "version: 1\nsurfaces:\n  - name: cache\n    type: actions-cache\n    results-url: http://127.0.0.1:{port}/\n    api-url: http://127.0.0.1:{port}/api\n"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runwarden.yml"), down).unwrap();
    let p = run(dir.path(), &svc, Some(&token), Some(&api), &["probe"]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
    let d = p.finding("cache:cache-content")["detail"].to_string();
    assert!(d.contains("cannot reach the cache service"), "{d}");
    no_secrets(&p, &[&token, &api]);
}

#[test]
fn without_a_token_every_carrier_is_skipped_with_the_reason() {
    let svc = CacheServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, None, None, &["probe"]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(verdicts(&p), ["skipped"; 4]);
    let d = p.finding("cache:cache-key")["detail"].to_string();
    assert!(d.contains("id-token: write"), "{d}");
    assert_eq!(p.report["surfaces"][0]["facts"]["runtime-token"], "none");

    // A runtime token but no API token: only the listing carriers wait.
    let token = svc.runtime_token(MAIN_RW);
    let p = run(dir.path(), &svc, Some(&token), None, &["probe"]);
    assert_eq!(
        verdicts(&p),
        ["skipped", "skipped", "fail", "fail"],
        "{}",
        p.report
    );
    let d = p.finding("cache:cache-version")["detail"].to_string();
    assert!(d.contains("API token"), "{d}");
    // Nothing to delete with: the plants are left, each said, until eviction.
    let left = p.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 2, "{}", p.report["cleanup"]);
    assert!(left[0]["reason"].as_str().unwrap().contains("evicted"));
    assert_eq!(svc.entries().len(), 2);
    // Later, with a token that may delete: cleanup by probe id finds them.
    let id = p.report["probe_id"].as_str().unwrap().to_string();
    let api = svc.api_token(true);
    let c = run(
        dir.path(),
        &svc,
        Some(&token),
        Some(&api),
        &["cleanup", "--probe-id", &id],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.entries().is_empty(), "{:?}", entries(&svc));
}

#[test]
fn branch_scopes_hold_across_jobs() {
    let svc = CacheServer::start().unwrap();
    let api = svc.api_token(true);
    let key = "0123456789abcdef0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    // Written by a default-branch run: a pull request restores it.
    let main = svc.runtime_token(MAIN_RW);
    let plant = run_keyed(
        dir.path(),
        &svc,
        &main,
        &api,
        key,
        &["plant", "--probe-id", "gh-1-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let pr1 = svc.runtime_token(&[("refs/pull/1/merge", 3), ("refs/heads/main", 1)]);
    let p = run_keyed(
        dir.path(),
        &svc,
        &pr1,
        &api,
        key,
        &["recover", "--probe-id", "gh-1-1"],
    );
    assert_eq!(verdicts(&p), ["fail"; 4], "{}\n{}", p.report, p.stderr);
    let d = p.finding("cache:restore-prefix")["detail"].to_string();
    assert!(
        d.contains("written to scope \\\"refs/heads/main\\\""),
        "{d}"
    );
    let c = run_keyed(
        dir.path(),
        &svc,
        &main,
        &api,
        key,
        &["cleanup", "--probe-id", "gh-1-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.entries().is_empty(), "{:?}", entries(&svc));

    // Written by one pull request: another cannot restore it. Listing is
    // repository-wide, so the listed carriers stay open.
    let plant = run_keyed(
        dir.path(),
        &svc,
        &pr1,
        &api,
        key,
        &["plant", "--probe-id", "gh-2-1"],
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    assert!(entries(&svc).iter().all(|e| e.2 == "refs/pull/1/merge"));
    let pr2 = svc.runtime_token(&[("refs/pull/2/merge", 3), ("refs/heads/main", 1)]);
    let p = run_keyed(
        dir.path(),
        &svc,
        &pr2,
        &api,
        key,
        &["recover", "--probe-id", "gh-2-1"],
    );
    assert_eq!(
        verdicts(&p),
        ["fail", "fail", "pass", "pass"],
        "{}",
        p.report
    );
    let d = p.finding("cache:cache-content")["detail"].to_string();
    assert!(d.contains("refs/pull/2/merge"), "{d}");
    let c = run_keyed(
        dir.path(),
        &svc,
        &pr1,
        &api,
        key,
        &["cleanup", "--probe-id", "gh-2-1"],
    );
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(svc.entries().is_empty());
}
