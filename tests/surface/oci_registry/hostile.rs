//! Answers that are not the registry's own, from a front before the
//! loopback control (which demands the bearer flow): an HTML 404 or 403,
//! a catalog that does not page or pages to another origin, an upload
//! `Location` on another origin, a tags list without its witness, a token
//! realm over plain http on another host. Each is ERROR, never a PASS,
//! and no credential goes where the registry named.

use super::{CARRIERS, config};
use crate::common::hostile::{Reply, Req};
use crate::common::*;
use runwarden::http::{Client, Request};
use runwarden::loopback::Listener;
use runwarden::loopback::oci::OciServer;
use std::sync::Mutex;
use std::time::Duration;

/// Passes `req` to `upstream` with every header both ways (the bearer
/// challenge, `Location`, `Link` and the digest are the protocol here).
fn forward(upstream: &str, req: &Req) -> Reply {
    let client = Client::new(Duration::from_secs(10), Duration::from_secs(30), vec![]).unwrap();
    let url = format!("{upstream}{}", req.url);
    let mut r = Request::new(req.method.parse().unwrap(), &url).bytes(req.body.clone());
    for name in ["authorization", "content-type", "accept"] {
        if let Some(v) = req.header(name) {
            r = r.header(name, v.to_string());
        }
    }
    let resp = client.send(&r).unwrap();
    let skip = ["content-length", "transfer-encoding", "connection", "date"];
    Reply {
        status: resp.status,
        headers: resp
            .headers
            .iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body: resp.body,
    }
}

type Answer = fn(&Req, &dyn Fn(&Req) -> Reply) -> Reply;

fn front(upstream: String, answer: Answer) -> Listener {
    Listener::start(move |mut req, _| {
        let mut body = Vec::new();
        let _ = std::io::Read::read_to_end(req.as_reader(), &mut body);
        let r = Req {
            method: req.method().as_str().to_string(),
            url: req.url().to_string(),
            headers: req
                .headers()
                .iter()
                .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_string()))
                .collect(),
            body,
        };
        let reply = answer(&r, &|r: &Req| forward(&upstream, r));
        let mut resp = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
        for (k, v) in &reply.headers {
            if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                resp.add_header(h);
            }
        }
        let _ = req.respond(resp);
    })
    .unwrap()
}

/// A read of a plant's manifest by tag (run B's; cleanup reads by digest).
fn read_by_tag(r: &Req) -> bool {
    r.method == "GET" && r.path().contains("/manifests/") && !r.path().contains("sha256:")
}

/// Requests that reached the other origin, and whether any had
/// credentials.
static ELSEWHERE: Mutex<Vec<bool>> = Mutex::new(vec![]);
static ELSEWHERE_PORT: Mutex<u16> = Mutex::new(0);

type Case = (
    &'static str,
    Answer,
    &'static [(&'static str, &'static str)],
);

#[test]
fn answers_that_are_not_the_registrys_own_are_errors_never_a_pass() {
    // A listener on another origin, recording what reaches it.
    let other = Listener::start(move |req, _| {
        let auth = req.headers().iter().any(|h| h.field.equiv("authorization"));
        runwarden::loopback::lock(&ELSEWHERE).push(auth);
        let _ = req.respond(tiny_http::Response::empty(404));
    })
    .unwrap();
    *runwarden::loopback::lock(&ELSEWHERE_PORT) = other.port;
    let cases: [Case; 7] = [
        (
            "html 404",
            |r, pass| {
                if read_by_tag(r) {
                    return Reply::html(404, "<html>Not Found</html>");
                }
                pass(r)
            },
            &[
                ("manifest-annotation", "error"),
                ("blob-content", "error"),
                ("tag-name", "fail"),
            ],
        ),
        (
            "proxy 403 on push",
            |r, pass| {
                if r.method == "PUT" && r.path().contains("/manifests/") {
                    return Reply::html(403, "<html>Forbidden</html>");
                }
                pass(r)
            },
            &[
                ("tag-name", "error"),
                ("manifest-annotation", "error"),
                ("blob-content", "error"),
            ],
        ),
        (
            "catalog does not page",
            |r, pass| {
                if r.path() == "/v2/_catalog" {
                    let mut a = pass(&Req {
                        url: "/v2/_catalog?n=100".into(),
                        ..r.clone()
                    });
                    a.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("link"));
                    return a.with_header("Link", "</v2/_catalog?n=100>; rel=\"next\"");
                }
                pass(r)
            },
            &[("repository-name", "error"), ("tag-name", "fail")],
        ),
        (
            "catalog pages elsewhere",
            |r, pass| {
                if r.path() == "/v2/_catalog" {
                    let port = *runwarden::loopback::lock(&ELSEWHERE_PORT);
                    let mut a = pass(r);
                    if a.status != 200 {
                        return a;
                    }
                    a.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("link"));
                    let v = a.json_body();
                    let names: Vec<String> =
                        serde_json::from_value(v["repositories"].clone()).unwrap();
                    let kept: Vec<&String> = names
                        .iter()
                        .filter(|n| !n.contains("-repository-name-"))
                        .collect();
                    a.body = serde_json::json!({ "repositories": kept })
                        .to_string()
                        .into_bytes();
                    return a.with_header(
                        "Link",
                        &format!("<http://localhost:{port}/v2/_catalog?last=x>; rel=\"next\""),
                    );
                }
                pass(r)
            },
            &[("repository-name", "error")],
        ),
        (
            "upload elsewhere",
            |r, pass| {
                let mut a = pass(r);
                if r.method == "POST" {
                    let port = *runwarden::loopback::lock(&ELSEWHERE_PORT);
                    for (k, v) in a.headers.iter_mut() {
                        if k.eq_ignore_ascii_case("location") {
                            *v = format!("http://localhost:{port}{v}");
                        }
                    }
                }
                a
            },
            &[("tag-name", "error"), ("blob-content", "error")],
        ),
        (
            "tags without the witness",
            |r, pass| {
                if r.path().ends_with("/tags/list") {
                    let mut a = pass(r);
                    if a.status != 200 {
                        return a;
                    }
                    let mut v = a.json_body();
                    v["tags"] = serde_json::json!(["latest"]);
                    a.body = v.to_string().into_bytes();
                    return a;
                }
                pass(r)
            },
            &[("tag-name", "error"), ("manifest-annotation", "fail")],
        ),
        (
            "realm elsewhere over http",
            |r, pass| {
                let mut a = pass(r);
                for (k, v) in a.headers.iter_mut() {
                    if k.eq_ignore_ascii_case("www-authenticate") {
                        *v = v.replace("http://127.0.0.1:", "http://127.0.0.2:");
                    }
                }
                a
            },
            &[("tag-name", "error"), ("repository-name", "error")],
        ),
    ];
    for (name, answer, want) in cases {
        let svc = OciServer::start().unwrap();
        let (user, password) = svc.user().unwrap();
        let f = front(svc.url(), answer);
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&f.base(), "    consistency-wait: 1\n")
            .replace("repository: ci/runwarden", "repository: control/runwarden")
            .replace("username: pusher", &format!("username: {user}"));
        let p = run_config(
            dir.path(),
            &cfg,
            &[("REGISTRY_TOKEN", &password)],
            &["probe"],
        );
        for (c, v) in want {
            assert!(CARRIERS.contains(c));
            assert_eq!(
                p.verdict(&format!("registry:{c}")),
                *v,
                "{name}: {c}: {}",
                p.report
            );
        }
        assert!(
            !format!("{}{}{}", p.stdout, p.stderr, p.report).contains(&password),
            "{name}"
        );
    }
    let reached = runwarden::loopback::lock(&ELSEWHERE).clone();
    assert!(
        reached.iter().all(|auth| !auth),
        "a credential went to another origin: {reached:?}"
    );
}
