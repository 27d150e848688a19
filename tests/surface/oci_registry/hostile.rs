//! Answers that are not the registry's own, from a front before the
//! loopback control (which demands the bearer flow): an HTML 404 or 403,
//! a catalog that does not page or pages to another origin, an upload
//! `Location` on another origin, a tags list without its witness, a token
//! realm over plain http on another host. Each is ERROR, never a PASS,
//! and no credential goes where the registry named. And what is not a
//! refusal: an nginx `auth_basic` front's 401, a front's 405 page, the
//! token service refusing, a realm on another host not named by
//! `token-realm`, a refusal after the nonce was written, a refused blob
//! check (the push goes on); nor a look: a tags list that does not know
//! the agreed repository, another manifest under the agreed tag, a layer
//! not served.

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

/// The front's own port (for a realm pointed at it).
static FRONT_PORT: Mutex<u16> = Mutex::new(0);

/// The registry's own refusal (its access control, as ghcr.io answers).
fn denied() -> Reply {
    Reply::json(
        403,
        serde_json::json!({ "errors": [{ "code": "DENIED", "message": "requested access to the resource is denied" }] }),
    )
}

/// `a` with every `WWW-Authenticate` realm's origin made `to`.
fn realm_to(mut a: Reply, to: &str) -> Reply {
    for (k, v) in a.headers.iter_mut() {
        if k.eq_ignore_ascii_case("www-authenticate")
            && let Some(start) = v.find("realm=\"")
        {
            let rest = &v[start + 7..];
            let end = rest.find("/token").unwrap_or(0);
            *v = format!("{}realm=\"{to}{}", &v[..start], &rest[end..]);
        }
    }
    a
}

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
    let cases: Vec<Case> = vec![
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
        // nginx's `auth_basic` before the registry: its 401 is no refusal.
        (
            "basic auth front",
            |r, pass| {
                if r.path().starts_with("/v2/") {
                    return Reply::html(401, "<html>401 Authorization Required</html>")
                        .with_header("WWW-Authenticate", "Basic realm=\"registry\"");
                }
                pass(r)
            },
            &[
                ("repository-name", "error"),
                ("tag-name", "error"),
                ("manifest-annotation", "error"),
                ("blob-content", "error"),
            ],
        ),
        // A front's 405 page, even with an `Allow`, is not read-only mode.
        (
            "html 405",
            |r, pass| {
                if r.method == "POST" || r.method == "PUT" {
                    return Reply::html(405, "<html>Not Allowed</html>")
                        .with_header("Allow", "GET, HEAD");
                }
                pass(r)
            },
            &[
                ("repository-name", "error"),
                ("tag-name", "error"),
                ("blob-content", "error"),
            ],
        ),
        // The token service refusing (a WAF, a rate limit, a bad
        // password) is not the registry refusing a carrier.
        (
            "token service refuses",
            |r, pass| {
                if r.path() == "/token" {
                    return Reply::html(403, "<html>Request blocked</html>");
                }
                let port = *runwarden::loopback::lock(&FRONT_PORT);
                realm_to(pass(r), &format!("http://127.0.0.1:{port}"))
            },
            &[
                ("repository-name", "error"),
                ("tag-name", "error"),
                ("manifest-annotation", "error"),
                ("blob-content", "error"),
            ],
        ),
        // A realm on another host gets the credentials only when named.
        (
            "realm elsewhere over https",
            |r, pass| {
                let port = *runwarden::loopback::lock(&ELSEWHERE_PORT);
                realm_to(pass(r), &format!("https://localhost:{port}"))
            },
            &[("tag-name", "error"), ("blob-content", "error")],
        ),
        // Refusals after the nonce was written: the witness tag, the
        // manifest that makes blob-content's layer readable, the manifest
        // of a repository already in the catalog.
        (
            "refused after the nonce",
            |r, pass| {
                let p = r.path();
                if r.method == "PUT"
                    && p.contains("/manifests/")
                    && (p.contains("/runwarden-witness")
                        || p.contains("-blob-content-")
                        || p.contains("-repository-name-"))
                {
                    return denied();
                }
                pass(r)
            },
            &[
                ("tag-name", "error"),
                ("blob-content", "error"),
                ("repository-name", "fail"),
                ("manifest-annotation", "fail"),
            ],
        ),
        // The blob check is a read: its refusal says nothing of the push.
        (
            "blob check refused",
            |r, pass| {
                if r.method == "HEAD" && r.path().contains("/blobs/") {
                    return denied();
                }
                pass(r)
            },
            &[
                ("repository-name", "fail"),
                ("tag-name", "fail"),
                ("manifest-annotation", "fail"),
                ("blob-content", "fail"),
            ],
        ),
        // The agreed repository unknown to the tags list: not current.
        (
            "tags list 404",
            |r, pass| {
                if r.path().ends_with("/tags/list") {
                    return Reply::json(
                        404,
                        serde_json::json!({ "errors": [{ "code": "NAME_UNKNOWN", "message": "repository name not known to registry" }] }),
                    );
                }
                pass(r)
            },
            &[("tag-name", "error")],
        ),
        // Another manifest under the agreed tag (a tenant's re-tag).
        (
            "re-tagged",
            |r, pass| {
                let mut a = pass(r);
                if read_by_tag(r) && a.status == 200 {
                    let mut v = a.json_body();
                    v["annotations"] = serde_json::json!({ "note": "theirs" });
                    a.body = v.to_string().into_bytes();
                    a.headers
                        .retain(|(k, _)| !k.eq_ignore_ascii_case("docker-content-digest"));
                }
                a
            },
            &[
                ("manifest-annotation", "error"),
                ("blob-content", "error"),
                ("tag-name", "fail"),
            ],
        ),
        // The layer the manifest names, not served: no look at it.
        (
            "blob 404",
            |r, pass| {
                if r.method == "GET" && r.path().contains("/blobs/sha256:") {
                    return Reply::json(
                        404,
                        serde_json::json!({ "errors": [{ "code": "BLOB_UNKNOWN", "message": "blob unknown to registry" }] }),
                    );
                }
                pass(r)
            },
            &[("blob-content", "error"), ("manifest-annotation", "fail")],
        ),
        // A front's 403 page on the blob is not the registry refusing it.
        (
            "blob 403 page",
            |r, pass| {
                if r.method == "GET" && r.path().contains("/blobs/sha256:") {
                    return Reply::html(403, "<html>Forbidden</html>");
                }
                pass(r)
            },
            &[("blob-content", "error")],
        ),
    ];
    for (name, answer, want) in cases {
        let svc = OciServer::start().unwrap();
        let (user, password) = svc.user().unwrap();
        let f = front(svc.url(), answer);
        *runwarden::loopback::lock(&FRONT_PORT) = f.port;
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

/// Cleanup's foreign-tag check: a listed tag whose manifest does not
/// answer, and a tags list that does not show the plant's own tags, each
/// leave the plant in place (named), never a delete on a guess.
#[test]
fn cleanup_leaves_a_plant_its_tags_check_cannot_clear() {
    let cases: [(&str, Answer, &str); 2] = [
        (
            "a ghost tag",
            |r, pass| {
                let mut a = pass(r);
                if r.path().ends_with("/tags/list") && a.status == 200 {
                    let mut v = a.json_body();
                    let mut tags = v["tags"].as_array().cloned().unwrap_or_default();
                    tags.push(serde_json::json!("ghost"));
                    v["tags"] = serde_json::json!(tags);
                    a.body = v.to_string().into_bytes();
                }
                if r.path().ends_with("/manifests/ghost") {
                    return Reply::json(
                        404,
                        serde_json::json!({ "errors": [{ "code": "MANIFEST_UNKNOWN", "message": "manifest unknown" }] }),
                    );
                }
                a
            },
            "ghost",
        ),
        (
            "a tags list without the plant's tags",
            |r, pass| {
                let mut a = pass(r);
                if r.method == "GET" && r.path().ends_with("/tags/list") && a.status == 200 {
                    let mut v = a.json_body();
                    v["tags"] = serde_json::json!(["latest"]);
                    a.body = v.to_string().into_bytes();
                }
                if r.path().ends_with("/manifests/latest") {
                    return Reply::json(
                        404,
                        serde_json::json!({ "errors": [{ "code": "MANIFEST_UNKNOWN", "message": "manifest unknown" }] }),
                    );
                }
                a
            },
            "does not show the plant's own tags",
        ),
    ];
    for (name, answer, why) in cases {
        let svc = OciServer::start().unwrap();
        let (user, password) = svc.user().unwrap();
        let f = front(svc.url(), answer);
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(&f.base(), "    consistency-wait: 1\n")
            .replace("repository: ci/runwarden", "repository: control/runwarden")
            .replace("username: pusher", &format!("username: {user}"));
        let env = [("REGISTRY_TOKEN", password.as_str())];
        let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "oci-h"]);
        assert_eq!(plant.code, 0, "{name}: {}\n{}", plant.stdout, plant.stderr);
        let clean = run_config(dir.path(), &cfg, &env, &["cleanup", "--probe-id", "oci-h"]);
        assert_eq!(
            clean.code, 1,
            "{name}: left is no green cleanup\n{}",
            clean.stdout
        );
        assert!(clean.stdout.contains(why), "{name}: {}", clean.stdout);
    }
}
