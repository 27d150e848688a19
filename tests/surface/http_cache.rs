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
        assert_control_sound(p.finding(&format!("cache:{c}")));
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

/// A cache that evicts what run A stored before run B reads (issue 38,
/// hole 4's class): the property of an agreed resource that is gone is
/// ERROR, not current (0.11.0: PASS, "the agreed resource does not
/// exist"), and so are the carriers whose listing lost its witness.
#[test]
fn an_eviction_between_a_and_b_is_no_pass() {
    let svc = DavServer::start(false).unwrap();
    let token = svc.token().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &svc.url(),
        "    token-env: CACHE_TOKEN\n    consistency-wait: 0\n",
    );
    let env = [
        ("CACHE_TOKEN", token.as_str()),
        ("RUNWARDEN_KEY", "0123456789abcdef0123456789abcdef"),
    ];
    let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "dav-1"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    assert!(svc.knobs()(runwarden::loopback::Knob::Evict, true));
    let p = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "dav-1"]);
    for c in ["cache-key", "collection-name", "property"] {
        assert_eq!(
            p.verdict(&format!("cache:{c}")),
            "error",
            "{c}: {}",
            p.report
        );
    }
    let d = p.finding("cache:property")["detail"].to_string();
    assert!(d.contains("an eviction"), "{d}");
}

/// A cache that evicts its least recently used entries: the older plants
/// and the witness made before them go, the property's resource (made
/// last) stays. The listing still names that resource, but not the
/// earlier witness: cache-key is ERROR, the cache dropped older entries
/// (without the earlier witness: PASS).
#[test]
fn an_eviction_of_the_older_entries_is_no_pass() {
    let svc = DavServer::start(false).unwrap();
    let token = svc.token().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &svc.url(),
        "    token-env: CACHE_TOKEN\n    consistency-wait: 0\n",
    );
    let env = [
        ("CACHE_TOKEN", token.as_str()),
        ("RUNWARDEN_KEY", "0123456789abcdef0123456789abcdef"),
    ];
    let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "dav-2"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    svc.lock()
        .nodes
        .retain(|p, _| !p.contains("-cache-key-") && !p.contains("-witness-listing-before-"));
    let p = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "dav-2"]);
    assert_eq!(p.verdict("cache:cache-key"), "error", "{}", p.report);
    let d = p.finding("cache:cache-key")["detail"].to_string();
    assert!(d.contains("as an eviction does"), "{d}");
    assert_eq!(p.verdict("cache:property"), "fail", "{}", p.report);
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

/// runwarden 0.1.0's incident fixture (fixtures/artifactory_mailbox): a
/// read-through cache that remembers a miss, answers it again with no
/// cache header, and lists it in `/_index` with status 404. Served by
/// python3 until the returned handle is dropped.
struct Mailbox {
    child: std::process::Child,
    port: u16,
}

impl Mailbox {
    fn start() -> Mailbox {
        use std::io::BufRead;
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/artifactory_mailbox/server.py"
        );
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the fixture");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Mailbox {
            port: line.trim().parse().expect("the fixture prints its port"),
            child,
        }
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        // Closing its stdin stops it.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn a_cache_that_lists_remembered_misses_is_open_on_negative_lookup() {
    let mailbox = Mailbox::start();
    let base = format!("http://127.0.0.1:{}", mailbox.port);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        &format!("{base}/lookup/"),
        &format!("    index-url: {base}/_index\n"),
    );
    let p = run_config(dir.path(), &cfg, &[], &["probe"]);
    // 0.3.0 said PASS: it only asked for the name again (no cache header
    // there) and never searched the listing, which holds it.
    let f = p.finding("cache:negative-lookup");
    assert_eq!(f["verdict"], "fail", "{f}\n{}", p.stderr);
    assert!(f["detail"].as_str().unwrap().contains("lists it"), "{f}");
    assert_control_sound(f);
    assert_eq!(p.verdict("cache:cache-key"), "fail");
    assert_eq!(p.verdict("cache:collection-name"), "fail");
    // No PROPPATCH there: nothing to carry a property.
    assert_eq!(p.verdict("cache:property"), "skipped");
    // And no DELETE: the plants stay, each listed, and the run fails.
    assert!(!p.report["cleanup"]["left"].as_array().unwrap().is_empty());
    assert_eq!(p.code, 1);
}

#[test]
fn a_cache_that_echoes_credentials_never_gets_them_printed() {
    use crate::common::hostile::{Hostile, Reply};
    use std::sync::{Arc, Mutex};
    let svc = DavServer::start(false).unwrap();
    svc.user("builder", "b-secret-5e1f");
    // The probe's name prefix, learnt from the first plant's path.
    let prefix: Arc<Mutex<Option<String>>> = Arc::default();
    let seen = prefix.clone();
    let front = Hostile::start(&svc.url(), move |r, pass| {
        let auth = r.header("authorization").unwrap_or("").to_string();
        let echo = echo_of(&auth);
        let decoded = echo
            .rsplit_once('(')
            .map(|(_, d)| d.trim_end_matches(')').to_string())
            .unwrap_or_default();
        if let Some(at) = r.url.find("runwarden-") {
            let name = &r.url[at..];
            let mut p = seen.lock().unwrap();
            if p.is_none() && name.len() > 23 {
                *p = Some(name[..23].to_string());
            }
        }
        match r.method.as_str() {
            // A refusal that quotes the credentials.
            "MKCOL" => Reply::new(403, "text/plain", format!("denied: {echo}")),
            // A server error that does too.
            "GET" if r.url.contains("-negative-lookup-") => {
                Reply::new(500, "text/plain", format!("oops: {echo}"))
            }
            // A listing with a name in the probe's form that carries them:
            // a forged-marker notice prints it.
            "PROPFIND" if !r.url.contains("runwarden-") => {
                let mut reply = pass(r);
                if let Some(p) = seen.lock().unwrap().clone() {
                    let forged = format!(
                        "<D:response><D:href>/{p}x-{}-{}-0000000000000000</D:href></D:response></D:multistatus>",
                        auth.replace(' ', "_"),
                        decoded
                    );
                    let text =
                        String::from_utf8_lossy(&reply.body).replace("</D:multistatus>", &forged);
                    reply.body = text.into_bytes();
                }
                reply
            }
            _ => pass(r),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("runwarden.yml");
    std::fs::write(&cfg_path, config(&format!("{}/", front.base()), CREDS)).unwrap();
    let files = ["r.json", "r.sarif", "summary.md", "out"].map(|f| dir.path().join(f));
    let out = bin()
        .args(["probe", "--config"])
        .arg(&cfg_path)
        .arg("--report")
        .arg(&files[0])
        .arg("--sarif")
        .arg(&files[1])
        .env("GITHUB_STEP_SUMMARY", &files[2])
        .env("GITHUB_OUTPUT", &files[3])
        .env("CACHE_USER", "builder")
        .env("CACHE_PASS", "b-secret-5e1f")
        .output()
        .unwrap();
    let p = finish(out, &files[0]);
    assert_eq!(p.verdict("cache:collection-name"), "pass", "{}", p.report);
    assert_eq!(p.verdict("cache:negative-lookup"), "error", "{}", p.report);
    let notices = p.report["notices"].to_string();
    assert!(
        notices.contains("forged-marker") && notices.contains("***"),
        "{notices}\n{}\n{}",
        p.report,
        p.stderr
    );
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let forms = [
        "b-secret-5e1f".to_string(),
        "builder:b-secret-5e1f".to_string(),
        b64.encode("builder:b-secret-5e1f"),
        b64.encode("b-secret-5e1f"),
    ];
    let mut texts: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            (
                f.display().to_string(),
                std::fs::read_to_string(f).unwrap_or_default(),
            )
        })
        .collect();
    texts.push(("stdout".into(), p.stdout.clone()));
    texts.push(("stderr".into(), p.stderr.clone()));
    for form in &forms {
        for (what, text) in &texts {
            assert!(!text.contains(form.as_str()), "{form} in {what}:\n{text}");
        }
    }
}

/// A hostile answer, and the verdicts it must give.
type Case = (
    &'static str,
    crate::common::hostile::Answer,
    &'static [(&'static str, &'static str)],
);

#[test]
fn answers_that_are_not_the_caches_own_are_errors_never_a_pass() {
    use crate::common::hostile::{Hostile, Reply};
    let cases: [Case; 4] = [
        // A server that takes PROPFIND for GET: a page, not a listing.
        (
            "propfind-as-get",
            |r, pass| {
                if r.method == "PROPFIND" && !r.url.contains("runwarden-") {
                    return Reply::html(200, "<html><body>index</body></html>");
                }
                pass(r)
            },
            &[("cache-key", "error"), ("collection-name", "error")],
        ),
        // A multistatus that names nothing, not even the collection.
        (
            "empty-207",
            |r, pass| {
                if r.method == "PROPFIND" && !r.url.contains("runwarden-") {
                    return Reply::new(
                        207,
                        "application/xml",
                        "<?xml version=\"1.0\"?><D:multistatus xmlns:D=\"DAV:\"></D:multistatus>",
                    );
                }
                pass(r)
            },
            &[("cache-key", "error"), ("collection-name", "error")],
        ),
        // A PUT answered 405: a wrong path, not a cache without writes.
        (
            "put-405",
            |r, pass| {
                if r.method == "PUT" {
                    return Reply::new(405, "text/plain", "Method Not Allowed");
                }
                pass(r)
            },
            &[("cache-key", "error"), ("property", "error")],
        ),
        // A PROPPATCH whose 207 says the property failed for a reason of
        // the server's own (a conflict), not its access control.
        (
            "proppatch-409",
            |r, pass| {
                if r.method == "PROPPATCH" {
                    return Reply::new(
                        207,
                        "application/xml",
                        "<?xml version=\"1.0\"?><D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>/x</D:href><D:propstat><D:prop><R:note xmlns:R=\"urn:runwarden:1\"/></D:prop><D:status>HTTP/1.1 409 Conflict</D:status></D:propstat></D:response></D:multistatus>",
                    );
                }
                pass(r)
            },
            &[("property", "error")],
        ),
    ];
    for (name, answer, want) in cases {
        let svc = DavServer::start(false).unwrap();
        let token = svc.token().unwrap();
        let front = Hostile::start(&svc.url(), answer);
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(
            &format!("{}/", front.base()),
            "    token-env: CACHE_TOKEN\n",
        );
        let p = run_config(dir.path(), &cfg, &[("CACHE_TOKEN", &token)], &["probe"]);
        for (c, v) in want {
            assert_eq!(
                p.verdict(&format!("cache:{c}")),
                *v,
                "{name}: {c}: {}",
                p.report
            );
        }
    }
}
