//! `type: pypi-index` against a real devpi-server on loopback: every
//! carrier open for the user who may upload, closed for the one who may
//! not, ERROR with the server down; foreign projects unchanged; the
//! description read from the JSON view or from the distribution; cleanup
//! by probe id; no password in any output.

use crate::common::registries::Devpi;
use crate::common::*;
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
            assert_eq!(p.finding(&format!("pypi:{c}"))["control"], "recovered");
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
    assert_eq!(d.snapshot().len(), before.len() + 4);
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
