//! `type: actions-cache` against the loopback cache service
//! (src/loopback/actions_cache.rs, which
//! tests/system/loopback/actions_cache.rs proves against the real client,
//! npm `@actions/cache`): the carriers open and closed by the token's
//! scopes, the service down, no token, branch scopes across jobs, cleanup
//! among 1,000 foreign entries, and no credential in any output; and,
//! through a hostile front, answers that are not the service's own (an HTML
//! 200, a proxy's 403, a rate limit, a listing cut short, a shadowing
//! archive), each an error, never a pass.

use crate::common::hostile::{Answer, Hostile, Reply, Req};
use crate::common::*;
use runwarden::loopback::Knob;
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
        assert_control_sound(f);
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
    // The runner's own services (the config's `results-url` elsewhere
    // would not get the runtime token).
    let (results, api_url) = (
        format!("http://127.0.0.1:{port}/"),
        format!("http://127.0.0.1:{port}/api"),
    );
    let down = format!(
        "version: 1\nsurfaces:\n  - name: cache\n    type: actions-cache\n    results-url: {results}\n    api-url: {api_url}\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut env = runner_env(&svc, Some(&token), Some(&api));
    env.retain(|(k, _)| k != "ACTIONS_RESULTS_URL" && k != "GITHUB_API_URL");
    env.push(("ACTIONS_RESULTS_URL".into(), results.clone()));
    env.push(("GITHUB_API_URL".into(), api_url.clone()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let p = run_config(dir.path(), &down, &env, &["probe"]);
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
    // Nothing was tested: a gate that says so (0.11.0 exited 0).
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(p.stderr.contains("nothing was tested"), "{}", p.stderr);
    assert_eq!(verdicts(&p), ["skipped"; 4]);
    let d = p.finding("cache:cache-key")["detail"].to_string();
    assert!(d.contains("id-token: write"), "{d}");
    assert_eq!(p.report["surfaces"][0]["facts"]["runtime-token"], "none");

    // A runtime token but no API token: only the listing carriers wait
    // (the listing is their only route: the nonce is in the key or
    // version, which B cannot look up).
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
    // Nothing to delete with: the plants and the restore route's two
    // witnesses are left, each said, until eviction.
    let left = p.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 4, "{}", p.report["cleanup"]);
    assert!(left[0]["reason"].as_str().unwrap().contains("evicted"));
    assert_eq!(svc.entries().len(), 4);
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
    // A PASS only because the listing shows the witnesses pr2 misses.
    assert!(d.contains("isolated: the REST listing"), "{d}");
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

/// An entry evicted between run A and run B (issue 38, hole 4): the
/// restore misses that 0.11.0 called closed ("no entry restorable with
/// this token") are ERROR, saying the store dropped older entries; so is
/// a cache emptied whole, which nothing shows current; and cleanup counts
/// as gone only what is gone.
#[test]
fn an_eviction_between_a_and_b_is_no_pass() {
    let svc = CacheServer::start().unwrap();
    let api = svc.api_token(true);
    let key = "0123456789abcdef0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("runwarden.yml"),
        format!("{CONFIG}    consistency-wait: 0\n"),
    )
    .unwrap();
    let main = svc.runtime_token(MAIN_RW);
    let job = |args: &[&str]| run_keyed(dir.path(), &svc, &main, &api, key, args);
    let plant = job(&["plant", "--probe-id", "gh-5-1"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    // Least recently used first: all but the newest entry go.
    assert!(svc.knobs()(Knob::Evict, true));
    assert_eq!(svc.entries().len(), 1);
    let p = job(&["recover", "--probe-id", "gh-5-1"]);
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
    for c in ["cache-content", "restore-prefix"] {
        let d = p.finding(&format!("cache:{c}"))["detail"].to_string();
        assert!(d.contains("as an eviction does"), "{c}: {d}");
    }
    let c = job(&["cleanup", "--probe-id", "gh-5-1"]);
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.entries().is_empty(), "{:?}", entries(&svc));

    // Everything evicted, the witnesses too: no route shows run A's
    // writes, so an eviction cannot be told from isolation.
    let plant = job(&["plant", "--probe-id", "gh-6-1"]);
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    svc.lock().entries.clear();
    let p = job(&["recover", "--probe-id", "gh-6-1"]);
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
    let d = p.finding("cache:cache-content")["detail"].to_string();
    assert!(d.contains("shows neither witness"), "{d}");
    assert!(d.contains("nor does the REST listing"), "{d}");
    let c = job(&["cleanup", "--probe-id", "gh-6-1"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
}

/// `probe` with the service reached through `front`: the results and REST
/// URLs point at it.
fn probe_through(front: &Hostile, token: &str, api: Option<&str>) -> Probe {
    let dir = tempfile::tempdir().unwrap();
    let mut env = vec![
        (
            "ACTIONS_RESULTS_URL".to_string(),
            format!("{}/", front.base()),
        ),
        (
            "GITHUB_API_URL".to_string(),
            format!("{}/api", front.base()),
        ),
        ("GITHUB_REPOSITORY".to_string(), "octo/repo".to_string()),
        ("ACTIONS_RUNTIME_TOKEN".to_string(), token.to_string()),
    ];
    env.extend(api.map(|t| ("GITHUB_TOKEN".to_string(), t.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    run_config(dir.path(), CONFIG, &env, &["probe"])
}

const LOOKUP: &str = "/twirp/github.actions.results.api.v1.CacheService/GetCacheEntryDownloadURL";
const CREATE: &str = "/twirp/github.actions.results.api.v1.CacheService/CreateCacheEntry";

/// A listing of every entry (recovery's), not cleanup's by key.
fn full_listing(r: &Req) -> bool {
    r.method == "GET" && r.path().ends_with("/actions/caches") && !r.url.contains("key=")
}

#[test]
fn answers_that_are_not_the_services_own_are_errors_never_a_pass() {
    let cases: [(&str, Answer, [&str; 4]); 6] = [
        // A sign-in page with 200 where the lookup's JSON should be.
        (
            "html-200",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::html(200, "<html><body>Sign in</body></html>");
                }
                pass(r)
            },
            ["fail", "fail", "error", "error"],
        ),
        // A proxy's 403, without Twirp's permission_denied.
        (
            "proxy-403",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::html(403, "<html><body>403 Forbidden</body></html>");
                }
                pass(r)
            },
            ["fail", "fail", "error", "error"],
        ),
        // The same on the write: no refusal by the cache.
        (
            "proxy-403-write",
            |r, pass| {
                if r.path() == CREATE {
                    return Reply::new(403, "text/plain", "Forbidden");
                }
                pass(r)
            },
            ["error"; 4],
        ),
        // A restore that misses everything (broken, or lagging) while
        // the listing shows the witnesses in the very scope the token
        // reads: no isolation, so no PASS (before the scope check the
        // two restore carriers passed as "isolated").
        (
            "restore-misses",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({ "ok": false }));
                }
                pass(r)
            },
            ["fail", "fail", "error", "error"],
        ),
        // ok, but without the matched key.
        (
            "no-matched-key",
            |r, pass| {
                let mut a = pass(r);
                if r.path() == LOOKUP {
                    let mut v = a.json_body();
                    v.as_object_mut().unwrap().remove("matched_key");
                    a.body = v.to_string().into_bytes();
                }
                a
            },
            ["fail", "fail", "error", "error"],
        ),
        // The agreed key restores an archive without the nonce (another
        // entry shadows the plant's, here one the front serves).
        (
            "shadowed-archive",
            |r, pass| {
                if r.path() == "/shadow" {
                    return Reply::new(
                        200,
                        "application/octet-stream",
                        "an archive of someone else",
                    );
                }
                let mut a = pass(r);
                let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
                let key = body["key"].as_str().unwrap_or("");
                if r.path() == LOOKUP && key.contains("-cache-content-") {
                    let port = r
                        .header("host")
                        .unwrap()
                        .rsplit(':')
                        .next()
                        .unwrap()
                        .to_string();
                    a = Reply::json(
                        200,
                        serde_json::json!({
                            "ok": true, "matched_key": key,
                            "signed_download_url": format!("http://127.0.0.1:{port}/shadow"),
                        }),
                    );
                }
                a
            },
            ["fail", "fail", "error", "fail"],
        ),
    ];
    for (name, answer, want) in cases {
        let svc = CacheServer::start().unwrap();
        let front = Hostile::start(&svc.results_url(), answer);
        let token = svc.runtime_token(MAIN_RW);
        let api = svc.api_token(true);
        let p = probe_through(&front, &token, Some(&api));
        assert_eq!(verdicts(&p), want, "{name}: {}", p.report);
        assert_eq!(p.code, 1, "{name}");
        no_secrets(&p, &[&token, &api]);
    }

    // The service's own denial of a read still closes the carriers read by
    // lookup: a token that may write but read no scope.
    let svc = CacheServer::start().unwrap();
    let token = svc.runtime_token(&[("refs/heads/main", 2)]);
    let api = svc.api_token(true);
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, Some(&token), Some(&api), &["probe"]);
    assert_eq!(
        verdicts(&p),
        ["fail", "fail", "pass", "pass"],
        "{}",
        p.report
    );
    let d = p.finding("cache:restore-prefix")["detail"].to_string();
    assert!(d.contains("permission_denied"), "{d}");
}

#[test]
fn a_listing_refused_is_a_pass_but_rate_limited_or_cut_short_is_no_pass() {
    // Every lookup misses (`{}`: proto3 JSON's ok: false), so the listing
    // alone decides cache-key and cache-version.
    let cases: [(&str, Answer, &str); 7] = [
        (
            "primary rate limit",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    return Reply::json(403, serde_json::json!({
                    "message": "API rate limit exceeded for installation ID 1.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
                }))
                .with_header("x-ratelimit-remaining", "0");
                }
                pass(r)
            },
            "error",
        ),
        (
            "secondary rate limit",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    return Reply::json(403, serde_json::json!({
                    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                }))
                .with_header("retry-after", "60");
                }
                pass(r)
            },
            "error",
        ),
        (
            "a proxy's 403",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    return Reply::html(403, "<html>Access denied</html>");
                }
                pass(r)
            },
            "error",
        ),
        (
            "429 to the end",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    return Reply::json(429, serde_json::json!({ "message": "slow down" }));
                }
                pass(r)
            },
            "error",
        ),
        // An API that hands over one entry a page: the first short page
        // is not the end while total_count says there are more.
        (
            "pages of one",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    let mut r = r.clone();
                    r.url = r.url.replace("per_page=100", "per_page=1");
                    return pass(&r);
                }
                pass(r)
            },
            "error",
        ),
        // GitHub's own refusal of the listing, B's only route to these
        // two: closed.
        (
            "refused",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    return Reply::json(
                        403,
                        // GitHub's body, as GitHub sends it.
                        serde_json::json!({
                            "message": "Resource not accessible by integration",
                            "documentation_url": "https://docs.github.com/rest/actions/cache#list-github-actions-caches-for-a-repository",
                            "status": "403",
                        }),
                    );
                }
                pass(r)
            },
            "pass",
        ),
        // A gateway's 403 in front of GitHub: a message, but neither
        // GitHub's documentation_url nor its request id.
        (
            "a gateway's 403",
            |r, pass| {
                if r.path() == LOOKUP {
                    return Reply::json(200, serde_json::json!({}));
                }
                if full_listing(r) {
                    return Reply::json(403, serde_json::json!({ "message": "Forbidden" }));
                }
                pass(r)
            },
            "error",
        ),
    ];
    for (name, answer, want) in cases {
        let svc = CacheServer::start().unwrap();
        let front = Hostile::start(&svc.results_url(), answer);
        let token = svc.runtime_token(MAIN_RW);
        let api = svc.api_token(true);
        let p = probe_through(&front, &token, Some(&api));
        for c in ["cache:cache-key", "cache:cache-version"] {
            assert_eq!(p.verdict(c), want, "{name}: {c}: {}", p.report);
        }
        no_secrets(&p, &[&token, &api]);
    }
}

#[test]
fn a_newer_entry_under_the_restore_prefix_is_an_error_never_a_pass() {
    let svc = CacheServer::start().unwrap();
    let api = svc.api_token(true);
    let main = svc.runtime_token(MAIN_RW);
    let key = "fedcba9876543210fedcba9876543210";
    let dir = tempfile::tempdir().unwrap();
    let plant = run_keyed(
        dir.path(),
        &svc,
        &main,
        &api,
        key,
        &["plant", "--probe-id", "gh-9-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    // Someone writes a newer entry under the prefix, with the plants'
    // version: the prefix now restores it.
    use sha2::Digest as _;
    let version = runwarden::nonce::to_hex(&sha2::Sha256::digest(b"runwarden|actions-cache|1"));
    svc.add(
        "runwarden-gh-9-1-restore-prefix-zz",
        &version,
        "refs/heads/main",
        b"x",
    );
    let p = run_keyed(
        dir.path(),
        &svc,
        &main,
        &api,
        key,
        &["recover", "--probe-id", "gh-9-1"],
    );
    // The prefix is B's only route (the plant's key holds the nonce): what
    // it restores is not the plant, so whether the plant is there cannot
    // be told.
    assert_eq!(p.verdict("cache:restore-prefix"), "error", "{}", p.report);
    let d = p.finding("cache:restore-prefix")["detail"].to_string();
    assert!(d.contains("a newer entry under the prefix hides it"), "{d}");
    assert!(p.report["notices"].to_string().contains("forged-marker"));
    let c = run_keyed(
        dir.path(),
        &svc,
        &main,
        &api,
        key,
        &["cleanup", "--probe-id", "gh-9-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(svc.entries().len(), 1, "{:?}", entries(&svc));
}

/// gh-aw's cache-memory declared exactly: `keys: "memory-*"` accepts the
/// channels under that prefix (AUTHORIZED) and proves the same carriers
/// open everywhere else (FAIL); cleanup takes both plants.
#[test]
fn a_declaration_scoped_by_keys_authorizes_only_inside_the_pattern() {
    let svc = CacheServer::start().unwrap();
    let token = svc.runtime_token(MAIN_RW);
    let api = svc.api_token(true);
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{CONFIG}declared:\n  - channel: cache:cache-content\n    keys: \"memory-*\"\n  - channel: cache:restore-prefix\n    keys: \"memory-*\"\n"
    );
    std::fs::write(dir.path().join("runwarden.yml"), &config).unwrap();
    let p = run(dir.path(), &svc, Some(&token), Some(&api), &["probe"]);
    let scoped: Vec<(String, String)> = p.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["scope"].is_object())
        .map(|f| {
            (
                format!(
                    "{}@{}",
                    f["channel"].as_str().unwrap(),
                    f["scope"]["side"].as_str().unwrap()
                ),
                f["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        scoped,
        [
            (
                "cache:cache-content@inside".to_string(),
                "authorized".to_string()
            ),
            (
                "cache:cache-content@outside".to_string(),
                "fail".to_string()
            ),
            (
                "cache:restore-prefix@inside".to_string(),
                "authorized".to_string()
            ),
            (
                "cache:restore-prefix@outside".to_string(),
                "fail".to_string()
            ),
        ],
        "{}",
        p.report
    );
    assert!(svc.entries().is_empty(), "{:?}", entries(&svc));
    // Plant and clean up by probe id with no receipt: the scoped plants
    // are found under the pattern too.
    let key = "0123456789abcdef0123456789abcdef";
    let plant = run_keyed(
        dir.path(),
        &svc,
        &token,
        &api,
        key,
        &["plant", "--probe-id", "gh-5-1"],
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    assert!(
        entries(&svc)
            .iter()
            .any(|e| e.0.starts_with("memory-runwarden-gh-5-1-")),
        "{:?}",
        entries(&svc)
    );
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap().path();
        if f.to_string_lossy().contains("receipt") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let c = run_keyed(
        dir.path(),
        &svc,
        &token,
        &api,
        key,
        &["cleanup", "--probe-id", "gh-5-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.entries().is_empty(), "{:?}", entries(&svc));
    // A pattern that covers runwarden's own keys leaves no outside.
    let bad =
        format!("{CONFIG}declared:\n  - channel: cache:cache-key\n    keys: \"runwarden-*\"\n");
    std::fs::write(dir.path().join("runwarden.yml"), &bad).unwrap();
    let p = run(dir.path(), &svc, Some(&token), Some(&api), &["probe"]);
    assert_eq!(p.code, 2, "{}", p.stderr);
    assert!(
        p.stderr.contains("also covers runwarden's own keys"),
        "{}",
        p.stderr
    );
}
