//! `type: http-cache` against the loopback WebDAV cache
//! (src/loopback/dav.rs): every carrier open on a writable cache that
//! remembers misses, closed on the same cache read-only, ERROR with the
//! server down; foreign files with odd names unchanged; an index URL
//! instead of PROPFIND; no credential in any output.

use crate::common::*;
use runwarden::loopback::dav::DavServer;

const CARRIERS: [&str; 4] = [
    "cache-key",
    "negative-lookup",
    "collection-name",
    "property",
];

fn config(url: &str, extra: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: cache\n    type: http-cache\n    url: {}\n{extra}",
        serde_json::to_string(url).unwrap()
    )
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("cache:{c}")))
        .collect()
}

/// Foreign files, some with names that need escaping everywhere.
fn foreign(svc: &DavServer) {
    for (i, name) in [
        "libs/a.jar",
        "odd name & <tag> \"q\".bin",
        "percent%41.txt",
        "unicode-\u{202e}gnp.exe",
        "runwarden-other-cache-key-0123456789abcdef0123456789abcdef-0123456789abcdef",
    ]
    .iter()
    .enumerate()
    {
        svc.add(name, format!("foreign {i}").as_bytes());
    }
}

const CREDS: &str = "    username-env: CACHE_USER\n    password-env: CACHE_PASS\n";

#[test]
fn every_carrier_is_open_on_a_writable_cache_and_cleanup_restores_it() {
    let svc = DavServer::start(false).unwrap();
    svc.user("builder", "b-secret-5e1f");
    foreign(&svc);
    let before = svc.snapshot();
    let dir = tempfile::tempdir().unwrap();
    let env = [("CACHE_USER", "builder"), ("CACHE_PASS", "b-secret-5e1f")];
    let p = run_config(dir.path(), &config(&svc.url(), CREDS), &env, &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
    for c in CARRIERS {
        assert_eq!(p.finding(&format!("cache:{c}"))["control"], "recovered");
    }
    let d = p.finding("cache:negative-lookup")["detail"].to_string();
    assert!(d.contains("x-cache"), "{d}");
    let d = p.finding("cache:collection-name")["detail"].to_string();
    assert!(
        d.contains("the listing names") && d.contains("-collection-name-"),
        "{d}"
    );
    assert_eq!(
        p.report["surfaces"][0]["facts"]["credentials"],
        "basic auth from CACHE_USER and CACHE_PASS"
    );
    // Nothing pre-existing changed, nothing of the probe's is left.
    assert_eq!(svc.snapshot(), before);
    assert_eq!(p.report["cleanup"]["left"], serde_json::json!([]));
    // The odd foreign names were never printed raw.
    assert!(!p.stdout.contains('\u{202e}'), "{}", p.stdout);
    let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
    assert!(!all.contains("b-secret-5e1f") && !all.contains("YnVpbGRlcjpi"));
}

#[test]
fn a_read_only_cache_closes_every_carrier_and_a_dead_one_is_an_error() {
    let svc = DavServer::start(true).unwrap();
    let token = svc.token().unwrap();
    foreign(&svc);
    let before = svc.snapshot();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(&svc.url(), "    token-env: CACHE_TOKEN\n");
    let p = run_config(dir.path(), &cfg, &[("CACHE_TOKEN", &token)], &["probe"]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 4], "{}", p.report);
    let d = p.finding("cache:cache-key")["detail"].to_string();
    assert!(d.contains("refused the PUT (HTTP 403)"), "{d}");
    // The miss happened, and was not remembered.
    let d = p.finding("cache:negative-lookup")["detail"].to_string();
    assert!(d.contains("no sign of a remembered miss"), "{d}");
    assert_eq!(svc.snapshot(), before);
    assert!(!format!("{}{}", p.stdout, p.report).contains(&token));

    // No credential where the config names one: SKIPPED, with why.
    let p = run_config(dir.path(), &cfg, &[], &["probe"]);
    assert_eq!(verdicts(&p), ["skipped"; 4]);
    assert!(
        p.finding("cache:property")["detail"]
            .to_string()
            .contains("CACHE_TOKEN")
    );

    // Credentials in the URL are a config error, and are not echoed.
    let inline = config("https://ci:s3cret-in-url@cache.internal/builds/", "");
    let p = run_config(dir.path(), &inline, &[], &["probe"]);
    assert_eq!(p.code, 2, "{}", p.stderr);
    assert!(
        p.stderr.contains("no credentials in the URL"),
        "{}",
        p.stderr
    );
    assert!(!p.stderr.contains("s3cret-in-url"), "{}", p.stderr);

    // Nothing listening: every carrier ERROR.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = config(&format!("http://127.0.0.1:{port}/cache/"), "");
    let p = run_config(dir.path(), &dead, &[], &["probe"]);
    assert_eq!(p.code, 1);
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
    assert!(
        p.finding("cache:cache-key")["detail"]
            .to_string()
            .contains("cannot reach the cache")
    );
}

#[test]
fn an_index_url_lists_the_cache_and_cleanup_by_probe_id_takes_only_tagged_names() {
    let svc = DavServer::start(false).unwrap();
    let token = svc.token().unwrap();
    foreign(&svc);
    let before = svc.snapshot();
    let dir = tempfile::tempdir().unwrap();
    // The server's own HTML listing of the root, as an index.
    let cfg = config(
        &svc.url(),
        &format!("    token-env: CACHE_TOKEN\n    index-url: {}\n", svc.url()),
    );
    let env = [("CACHE_TOKEN", token.as_str())];
    let p = run_config(dir.path(), &cfg, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
    assert!(
        p.finding("cache:cache-key")["detail"]
            .to_string()
            .contains("the listing holds it")
    );
    assert_eq!(svc.snapshot(), before);

    // A plant in one job, cleaned up by probe id in another (PROPFIND).
    let cfg = config(&svc.url(), "    token-env: CACHE_TOKEN\n");
    let key = [
        ("CACHE_TOKEN", token.as_str()),
        ("RUNWARDEN_KEY", "k-0123456789"),
    ];
    let plant = run_config(dir.path(), &cfg, &key, &["plant", "--probe-id", "job-7"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    assert_ne!(svc.snapshot(), before);
    // Someone adds a name in the plant's form, without the key.
    svc.add(
        "runwarden-job-7-cache-key-00000000000000000000000000000000-0000000000000000",
        b"x",
    );
    let recover = run_config(dir.path(), &cfg, &key, &["recover", "--probe-id", "job-7"]);
    assert_eq!(verdicts(&recover), ["fail"; 4], "{}", recover.report);
    let notices = recover.report["notices"].to_string();
    assert!(notices.contains("forged-marker"), "{notices}");
    let clean = run_config(dir.path(), &cfg, &key, &["cleanup", "--probe-id", "job-7"]);
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    let (nodes, props) = svc.snapshot();
    let forged = "/runwarden-job-7-cache-key-00000000000000000000000000000000-0000000000000000";
    assert!(
        nodes.contains_key(forged),
        "the forged name is not the plant's"
    );
    let mut after = nodes.clone();
    after.remove(forged);
    assert_eq!((after, props), before);
}
