//! `type: pypi-index` against a real devpi-server on loopback: every
//! carrier open for the user who may upload, closed for the one who may
//! not, ERROR with the server down; foreign projects unchanged; the
//! description read from the JSON view or from the distribution; cleanup
//! by probe id; no password in any output. And, through a hostile front
//! before the loopback index, answers that are not the index's own (a
//! wrong URL's 404, a login page, metadata without a description, a linked
//! file gone, a 403 for a file that exists): errors, never a pass; and the
//! derived project's page read when the root does not list it.

use crate::common::hostile::{Answer, Hostile, Reply};
use crate::common::registries::Devpi;
use crate::common::*;
use runwarden::loopback::pypi::PypiServer;
use std::path::Path;

const CARRIERS: [&str; 4] = ["project-name", "version", "description", "file-name"];

fn config(d: &Devpi, json: bool) -> String {
    let mut c = format!(
        "version: 1\nsurfaces:\n  - name: pypi\n    type: pypi-index\n    upload-url: {0}\n    simple-url: {0}+simple/\n    username-env: PYPI_USER\n    password-env: PYPI_PASS\n",
        d.index()
    );
    if json {
        c += &format!("    json-url: \"{}{{project}}\"\n", d.index());
    }
    c
}

/// `run_config` as `user` (PYPI_USER, PYPI_PASS).
fn run(
    dir: &Path,
    config: &str,
    user: &(String, String),
    extra: &[(&str, &str)],
    args: &[&str],
) -> Probe {
    let mut env = vec![
        ("PYPI_USER", user.0.as_str()),
        ("PYPI_PASS", user.1.as_str()),
    ];
    env.extend_from_slice(extra);
    run_config(dir, config, &env, args)
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("pypi:{c}")))
        .collect()
}

fn foreign(d: &Devpi) {
    d.upload("requests-mirror", "2.31.0", "an ordinary project");
    d.upload(
        "Odd.Name_with--chars",
        "1.0.post1",
        "odd \u{202e} <b>description</b>",
    );
    d.upload(
        "runwarden-other-project-name-0123456789abcdef0123456789abcdef-0123456789abcdef",
        "0.0.0",
        "not ours",
    );
}

#[test]
fn every_carrier_is_open_to_the_uploader_and_closed_to_the_reader() {
    let d = Devpi::start();
    foreign(&d);
    let before = d.snapshot();
    let dir = tempfile::tempdir().unwrap();
    for json in [true, false] {
        let p = run(dir.path(), &config(&d, json), &d.uploader, &[], &["probe"]);
        assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
        assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
        for c in CARRIERS {
            assert_control_sound(p.finding(&format!("pypi:{c}")));
        }
        let d_detail = p.finding("pypi:description")["detail"].to_string();
        let expect = if json { "the metadata of" } else { "PKG-INFO" };
        assert!(d_detail.contains(expect), "{d_detail}");
        assert_eq!(
            p.report["cleanup"]["left"],
            serde_json::json!([]),
            "{}",
            p.report["cleanup"]
        );
        let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
        assert!(!all.contains("up-pass-51c2"));
    }
    assert_eq!(d.snapshot(), before);

    let p = run(dir.path(), &config(&d, true), &d.reader, &[], &["probe"]);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 4], "{}", p.report);
    let detail = p.finding("pypi:version")["detail"].to_string();
    assert!(detail.contains("refused the upload (HTTP 403"), "{detail}");
    assert_eq!(d.snapshot(), before);
}

#[test]
fn a_dead_index_is_an_error_and_cleanup_by_probe_id_deletes_the_plant() {
    let d = Devpi::start();
    foreign(&d);
    let before = d.snapshot();
    let dir = tempfile::tempdir().unwrap();
    let key = [("RUNWARDEN_KEY", "k-pypi-98765")];
    let plant = run(
        dir.path(),
        &config(&d, true),
        &d.uploader,
        &key,
        &["plant", "--probe-id", "py-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    // Four plants, and the project route's two witnesses.
    assert_eq!(d.snapshot().len(), before.len() + 6);
    let recover = run(
        dir.path(),
        &config(&d, true),
        &d.uploader,
        &key,
        &["recover", "--probe-id", "py-1"],
    );
    assert_eq!(verdicts(&recover), ["fail"; 4], "{}", recover.report);
    let clean = run(
        dir.path(),
        &config(&d, true),
        &d.uploader,
        &key,
        &["cleanup", "--probe-id", "py-1"],
    );
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(d.snapshot(), before);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dead = format!(
        "version: 1\nsurfaces:\n  - name: pypi\n    type: pypi-index\n    upload-url: http://127.0.0.1:{port}/\n    simple-url: http://127.0.0.1:{port}/+simple/\n"
    );
    let p = run(dir.path(), &dead, &d.uploader, &[], &["probe"]);
    assert_eq!(p.code, 1);
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
}

/// A config for the loopback index at `base` (no trailing `/`), with these
/// paths for the simple index and the JSON view.
fn front_config(base: &str, simple: &str, json: Option<&str>) -> String {
    let mut c = format!(
        "version: 1\nsurfaces:\n  - name: pypi\n    type: pypi-index\n    upload-url: {base}/\n    simple-url: {base}{simple}\n    username-env: PYPI_USER\n    password-env: PYPI_PASS\n"
    );
    if let Some(j) = json {
        c += &format!("    json-url: \"{base}{j}\"\n");
    }
    c
}

const LOGIN: &str = "<!DOCTYPE html><html><head><link href=\"/static/app.css\" rel=\"stylesheet\"></head><body><form action=\"/login\"><a href=\"/login?next=%2F\">Sign in</a></form></body></html>";

/// A simple-url path, a json-url path, a hostile front's answers, and the
/// verdicts they must give.
type Case = (
    &'static str,
    &'static str,
    Option<&'static str>,
    Answer,
    [&'static str; 4],
);

#[test]
fn answers_that_are_not_the_indexs_own_are_errors_never_a_pass() {
    let json = Some("/{project}/json");
    let cases: [Case; 9] = [
        // A wrong simple-url: 404 everywhere is no "no such project".
        (
            "wrong simple-url",
            "/wrong/+simple/",
            None,
            |r, pass| pass(r),
            ["error"; 4],
        ),
        // A wrong json-url while the project's page is there.
        (
            "wrong json-url",
            "/+simple/",
            Some("/nope/{project}/json"),
            |r, pass| pass(r),
            ["fail", "fail", "error", "fail"],
        ),
        // A sign-in page, with links, for every simple page.
        (
            "login page",
            "/+simple/",
            json,
            |r, pass| {
                if r.path().starts_with("/+simple") {
                    return Reply::html(200, LOGIN);
                }
                pass(r)
            },
            ["error", "error", "fail", "error"],
        ),
        // JSON, but no description in it.
        (
            "no description",
            "/+simple/",
            json,
            |r, pass| {
                if r.path().ends_with("/json") {
                    return Reply::json(200, serde_json::json!({ "info": { "name": "x" } }));
                }
                pass(r)
            },
            ["fail", "fail", "error", "fail"],
        ),
        // The files the page links are not there.
        (
            "files gone",
            "/+simple/",
            None,
            |r, pass| {
                if r.path().starts_with("/+f/") {
                    return Reply::html(404, "<html>Not Found</html>");
                }
                pass(r)
            },
            ["fail", "fail", "error", "fail"],
        ),
        // A 403 that says the file exists: a conflict, not a refusal.
        (
            "file exists",
            "/+simple/",
            json,
            |r, pass| {
                if r.method == "POST" {
                    return Reply::new(403, "text/plain", "403 Forbidden: File already exists.");
                }
                pass(r)
            },
            ["error"; 4],
        ),
        // Pages stale and the root lagging too (it lists none of the
        // probe's projects yet, only a foreign one): no route contradicts
        // another, and only the project route's witnesses, missing too,
        // show it is not current. (0.11.0: PASS for the three read by
        // name.)
        (
            "page stale, root lags",
            "/+simple/",
            json,
            |r, pass| {
                let p = r.path();
                if p.starts_with("/+simple/runwarden-") || p.starts_with("/runwarden-") {
                    return Reply::html(404, "<html>Not Found</html>");
                }
                if p == "/+simple/" {
                    return Reply::html(
                        200,
                        "<html><body><a href=\"requests/\">requests</a></body></html>",
                    );
                }
                pass(r)
            },
            ["error"; 4],
        ),
        // The root does not list the name (an index that lags) but lists
        // the other projects: B has no other route to a name that is the
        // message, so this is a PASS (LIMITATIONS: search indexes lag).
        (
            "root lags",
            "/+simple/",
            json,
            |r, pass| {
                let mut a = pass(r);
                if r.path() == "/+simple/" {
                    let text = String::from_utf8(a.body).unwrap();
                    a.body = text
                        .lines()
                        .filter(|l| !l.contains("-project-name-"))
                        .collect::<Vec<_>>()
                        .join("\n")
                        .into_bytes();
                }
                a
            },
            ["pass", "fail", "fail", "fail"],
        ),
        // A project page that reads as missing while the root lists the
        // project: the routes contradict each other (a stale page), no
        // look. (0.11.0 took it for a true miss: PASS, issue 38 hole 2.)
        (
            "version gone",
            "/+simple/",
            json,
            |r, pass| {
                if r.path().starts_with("/+simple/") && r.path().contains("-version-") {
                    return Reply::html(404, "<html>Not Found</html>");
                }
                pass(r)
            },
            ["fail", "error", "fail", "fail"],
        ),
    ];
    for (name, simple, json, answer, want) in cases {
        let svc = PypiServer::start().unwrap();
        let (user, pass) = svc.user().unwrap();
        let front = Hostile::start(&svc.upload_url(), answer);
        let dir = tempfile::tempdir().unwrap();
        let p = run(
            dir.path(),
            &front_config(&front.base(), simple, json),
            &(user, pass.clone()),
            &[],
            &["probe"],
        );
        assert_eq!(verdicts(&p), want, "{name}: {}", p.report);
        assert!(!format!("{}{}{}", p.stdout, p.stderr, p.report).contains(&pass));
        if name == "page stale, root lags" {
            let d = p.finding("pypi:version")["detail"].to_string();
            assert!(
                d.contains("the project-page route shows neither witness"),
                "{d}"
            );
        }
        if name == "version gone" {
            let d = p.finding("pypi:version")["detail"].to_string();
            assert!(d.contains("the routes contradict each other"), "{d}");
            // Nor does cleanup count it gone: it is still there.
            let left = p.report["cleanup"]["left"].to_string();
            assert!(left.contains("not confirmed gone"), "{left}");
            assert_eq!(p.report["cleanup"]["already_gone"], 0);
        }
        if name == "root lags" {
            let d = p.finding("pypi:project-name")["detail"].to_string();
            assert!(d.contains("none carries it"), "{d}");
        }
    }
}
