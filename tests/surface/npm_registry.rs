//! `type: npm-registry` against a real Verdaccio on loopback: every carrier
//! open for the user who may publish, closed for the one who may only
//! read, ERROR with the server down; foreign packages (scoped, odd names)
//! unchanged; cleanup by probe id; no token in any output.

use crate::common::registries::Verdaccio;
use crate::common::*;

const CARRIERS: [&str; 5] = [
    "package-name",
    "version",
    "readme",
    "dist-tag",
    "tarball-content",
];

fn config(url: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: npm\n    type: npm-registry\n    url: {}\n    token-env: NPM_TOKEN\n",
        serde_json::to_string(url).unwrap()
    )
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("npm:{c}")))
        .collect()
}

fn foreign(v: &Verdaccio) {
    v.publish("left-pad", "1.3.0", "pads");
    v.publish(
        "@odd/pkg.with_chars~x",
        "2.0.0-beta.1",
        "odd \u{202e} readme <b>",
    );
    v.publish(
        "runwarden-other-package-name-0123456789abcdef0123456789abcdef-0123456789abcdef",
        "0.0.0",
        "not ours",
    );
}

#[test]
fn every_carrier_is_open_to_the_publisher_and_closed_to_the_reader() {
    let v = Verdaccio::start();
    foreign(&v);
    let before = v.packages();
    let dir = tempfile::tempdir().unwrap();
    let p = run_config(
        dir.path(),
        &config(&v.url),
        &[("NPM_TOKEN", &v.publisher)],
        &["probe"],
    );
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["fail"; 5], "{}", p.report);
    for c in CARRIERS {
        assert_eq!(p.finding(&format!("npm:{c}"))["control"], "recovered");
    }
    assert_eq!(
        p.report["cleanup"]["left"],
        serde_json::json!([]),
        "{}",
        p.report["cleanup"]
    );
    assert_eq!(
        v.packages(),
        before,
        "foreign packages changed, or a plant is left"
    );
    let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
    assert!(!all.contains(&v.publisher));

    let p = run_config(
        dir.path(),
        &config(&v.url),
        &[("NPM_TOKEN", &v.reader)],
        &["probe"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 5], "{}", p.report);
    let d = p.finding("npm:readme")["detail"].to_string();
    assert!(d.contains("refused the publish"), "{d}");
    assert_eq!(v.packages(), before);
    assert!(!format!("{}{}", p.stdout, p.report).contains(&v.reader));

    // A token the registry does not know: every write and read refused.
    // Nothing was published, so nothing is left to report either (each
    // journal entry was taken back when its publish was refused).
    let p = run_config(
        dir.path(),
        &config(&v.url),
        &[("NPM_TOKEN", "not-a-token")],
        &["probe"],
    );
    assert_eq!(verdicts(&p), ["pass"; 5], "{}", p.report);
    assert_eq!(
        p.report["cleanup"]["left"],
        serde_json::json!([]),
        "{}",
        p.report["cleanup"]
    );
    assert_eq!(p.code, 0, "{}", p.stdout);
    assert_eq!(v.packages(), before);
}

#[test]
fn a_dead_registry_is_an_error_and_cleanup_by_probe_id_unpublishes_the_plant() {
    let v = Verdaccio::start();
    foreign(&v);
    let before = v.packages();
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("NPM_TOKEN", v.publisher.as_str()),
        ("RUNWARDEN_KEY", "k-npm-123456"),
    ];
    let plant = run_config(
        dir.path(),
        &config(&v.url),
        &env,
        &["plant", "--probe-id", "npm-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    assert_eq!(v.packages().len(), before.len() + 5);
    let recover = run_config(
        dir.path(),
        &config(&v.url),
        &env,
        &["recover", "--probe-id", "npm-1"],
    );
    assert_eq!(verdicts(&recover), ["fail"; 5], "{}", recover.report);
    let clean = run_config(
        dir.path(),
        &config(&v.url),
        &env,
        &["cleanup", "--probe-id", "npm-1"],
    );
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(v.packages(), before);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = run_config(
        dir.path(),
        &config(&format!("http://127.0.0.1:{port}/")),
        &[("NPM_TOKEN", "x")],
        &["probe"],
    );
    assert_eq!(p.code, 1);
    assert_eq!(verdicts(&p), ["error"; 5], "{}", p.report);
}
