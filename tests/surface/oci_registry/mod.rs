//! `type: oci-registry` against a real `docker-registry` (distribution
//! 2.8) on loopback: every carrier open to the user who may push (the
//! control recovered), foreign repositories, tags, a digest two foreign
//! tags share and a dangling manifest identical before and after; PASS
//! (refused) on a read-only registry; ERROR on a dead port; a declared
//! channel AUTHORIZED; plant, recover and cleanup across jobs and by probe
//! id; a forged receipt naming foreign manifests removes nothing; no
//! credential in any output. And the loopback control and the real
//! registry, driven by the same client, give the same outcomes.

use crate::common::registries::{DockerRegistry, free_port};
use crate::common::*;
use runwarden::marker::Key;
use runwarden::surface::{self, PlantJob, PlantOutcome, RecoverOutcome, RunCtx, Wanted};
use serde_json::{Value, json};
use std::collections::BTreeMap;

mod cleanup;
mod hostile;
mod packages;

pub(crate) const CARRIERS: [&str; 4] = [
    "repository-name",
    "tag-name",
    "manifest-annotation",
    "blob-content",
];

pub(crate) fn config(url: &str, extra: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: registry\n    type: oci-registry\n    registry: {}\n    repository: ci/runwarden\n    username: pusher\n    token-env: REGISTRY_TOKEN\n    repository-name: true\n{extra}",
        serde_json::to_string(url).unwrap()
    )
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("registry:{c}")))
        .collect()
}

/// Foreign objects: two tags on one digest, a dangling manifest, a
/// repository under the namespace, one in runwarden's form of another
/// probe.
fn foreign(r: &DockerRegistry) -> String {
    let d = r.manifest("team/app", Some("v1"), "app v1");
    r.manifest("team/app", Some("latest"), "app v1");
    r.manifest("team/app", Some("v2"), "app v2");
    let dangling = r.manifest("team/app", None, "dangling");
    r.manifest("ci/runwarden/foreign", Some("x"), "under the namespace");
    r.manifest(
        "ci/runwarden/runwarden-other-tag-name-0123456789abcdef",
        Some("runwarden-witness"),
        "another probe's form",
    );
    assert_eq!(r.digest("team/app", "latest"), d);
    dangling
}

/// Everything that is not this run's (the probe's names start with
/// `ci/runwarden/runwarden-` and a probe id other than `other`).
fn theirs(repo: &str) -> bool {
    !repo.starts_with("ci/runwarden/runwarden-") || repo.contains("runwarden-other-")
}

#[test]
fn every_carrier_is_open_to_the_pusher_and_foreign_objects_stay() {
    let r = DockerRegistry::start();
    let dangling = foreign(&r);
    let before = r.snapshot(&theirs);
    let dir = tempfile::tempdir().unwrap();
    let p = run_config(
        dir.path(),
        &config(&r.url, ""),
        &[("REGISTRY_TOKEN", r.password)],
        &["probe"],
    );
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
    for c in CARRIERS {
        assert_control_sound(p.finding(&format!("registry:{c}")));
    }
    assert_eq!(
        p.report["cleanup"]["left"],
        json!([]),
        "{}",
        p.report["cleanup"]
    );
    let kept = p.report["cleanup"]["kept"].to_string();
    assert!(kept.contains("repository-name"), "{kept}");
    assert_eq!(r.snapshot(&theirs), before, "foreign objects changed");
    assert_eq!(
        r.digest("team/app", &dangling),
        dangling,
        "the dangling manifest went"
    );
    // What stays of the plant: emptied repositories of its own names.
    for repo in r.catalog().into_iter().filter(|n| !theirs(n)) {
        let tags = r.get(&format!("/v2/{repo}/tags/list"))["tags"].clone();
        assert_eq!(tags, Value::Null, "{repo} still has tags");
    }
    let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
    assert!(!all.contains(r.password));

    // Without `repository-name: true`, that carrier is SKIPPED.
    let cfg = config(&r.url, "").replace("    repository-name: true\n", "");
    let p = run_config(
        dir.path(),
        &cfg,
        &[("REGISTRY_TOKEN", r.password)],
        &["probe"],
    );
    assert_eq!(
        verdicts(&p),
        ["skipped", "fail", "fail", "fail"],
        "{}",
        p.report
    );
    assert_eq!(r.snapshot(&theirs), before);

    // A declared channel is AUTHORIZED.
    let cfg = config(&r.url, "declared:\n  - registry:blob-content\n");
    let p = run_config(
        dir.path(),
        &cfg,
        &[("REGISTRY_TOKEN", r.password)],
        &["probe"],
    );
    assert_eq!(
        p.verdict("registry:blob-content"),
        "authorized",
        "{}",
        p.report
    );
    assert_eq!(p.verdict("registry:tag-name"), "fail");

    // A wrong password: the registry's 401 UNAUTHORIZED is the
    // credentials not accepted, no refusal of a carrier: ERROR, nothing
    // left.
    let p = run_config(
        dir.path(),
        &config(&r.url, ""),
        &[("REGISTRY_TOKEN", "wrong")],
        &["probe"],
    );
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
    assert_eq!(p.report["cleanup"]["left"], json!([]));
    assert_eq!(r.snapshot(&theirs), before);
}

#[test]
fn a_read_only_registry_passes_refused_and_a_dead_one_is_an_error() {
    let r = DockerRegistry::read_only();
    let dir = tempfile::tempdir().unwrap();
    let p = run_config(
        dir.path(),
        &config(&r.url, ""),
        &[("REGISTRY_TOKEN", r.password)],
        &["probe"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 4], "{}", p.report);
    for c in CARRIERS {
        let d = p.finding(&format!("registry:{c}"))["detail"].to_string();
        assert!(d.contains("refused") && d.contains("405"), "{c}: {d}");
    }
    assert_eq!(p.report["cleanup"]["left"], json!([]));
    assert!(!format!("{}{}{}", p.stdout, p.stderr, p.report).contains(r.password));

    let p = run_config(
        dir.path(),
        &config(&format!("http://127.0.0.1:{}", free_port()), ""),
        &[("REGISTRY_TOKEN", "x")],
        &["probe"],
    );
    assert_eq!(p.code, 1);
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
}

#[test]
fn plant_recover_cleanup_across_jobs_and_a_forged_receipt_removes_nothing() {
    let r = DockerRegistry::start();
    foreign(&r);
    let before = r.snapshot(&theirs);
    let dir = tempfile::tempdir().unwrap();
    let env = [("REGISTRY_TOKEN", r.password)];
    let cfg = config(&r.url, "");
    let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "oci-1"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let recover = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "oci-1"]);
    assert_eq!(verdicts(&recover), ["fail"; 4], "{}", recover.report);

    // The receipt, edited: foreign manifests (and their digests) named as
    // plants, under the namespace and outside it.
    let path = dir.path().join("runwarden-receipt-oci-1.json");
    let mut receipt: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let app = r.digest("team/app", "v1");
    let under = r.digest("ci/runwarden/foreign", "x");
    let entries = receipt["surfaces"][0]["entries"].as_array_mut().unwrap();
    let ours = entries.clone();
    let mut forged: Vec<Value> = vec![
        json!({ "carrier": "tag-name", "repository": "team/app", "tags": ["v1"], "digest": app, "nonce": "0".repeat(32), "blobs": [] }),
        json!({ "carrier": "tag-name", "repository": "ci/runwarden/foreign", "tags": ["x"], "digest": under, "nonce": "0".repeat(32), "blobs": [] }),
    ];
    // Our own entries, each pointed at a foreign digest or blob.
    for e in &ours {
        let mut f = e.clone();
        if f.get("digest").is_some() {
            f["digest"] = json!(under);
            forged.push(f.clone());
            f["digest"] = e["digest"].clone();
            f["blobs"] = json!([crate::common::registries::EMPTY_DIGEST]);
            forged.push(f);
        }
    }
    entries.clear();
    entries.extend(forged);
    std::fs::write(dir.path().join("forged.json"), receipt.to_string()).unwrap();
    let c = run_config(
        dir.path(),
        &cfg,
        &env,
        &["cleanup", "--receipt", "forged.json"],
    );
    assert_eq!(
        c.code, 1,
        "a forged receipt never cleans green\n{}",
        c.stdout
    );
    assert_eq!(
        r.snapshot(&theirs),
        before,
        "a forged receipt removed something"
    );
    let recover = run_config(dir.path(), &cfg, &env, &["recover", "--probe-id", "oci-1"]);
    assert_eq!(
        verdicts(&recover),
        ["fail"; 4],
        "the plant went: {}",
        recover.report
    );

    // Cleanup by probe id (no receipt) finds and removes the plant.
    std::fs::remove_file(&path).unwrap();
    let clean = run_config(dir.path(), &cfg, &env, &["cleanup", "--probe-id", "oci-1"]);
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(r.snapshot(&theirs), before);
    for repo in r
        .catalog()
        .into_iter()
        .filter(|n| n.contains("runwarden-oci-1-"))
    {
        assert_eq!(
            r.get(&format!("/v2/{repo}/tags/list"))["tags"],
            Value::Null,
            "{repo}"
        );
    }
}

/// What one instance's plant and recovery come to, by carrier and kind.
fn outcomes(settings: &Value, probe_id: &str) -> BTreeMap<String, (String, String)> {
    let ty = surface::by_name("oci-registry").unwrap();
    let inst = ty.open(settings).unwrap();
    let key = Key::new(Some(b"same-verdicts-key".to_vec()));
    let ctx = RunCtx {
        probe_id,
        key: &key,
        surface: "test",
    };
    let jobs: Vec<PlantJob> = CARRIERS
        .iter()
        .map(|c| PlantJob {
            key: c.to_string(),
            carrier: c.to_string(),
            nonce: runwarden::nonce::Nonce::generate().unwrap(),
            scope: None,
            beacon: None,
        })
        .collect();
    let mut journal = vec![];
    let planted = inst.plant_all(&ctx, &jobs, &mut |e| journal.push(e));
    let wanted: Vec<Wanted> = jobs
        .iter()
        .zip(&planted)
        .filter_map(|(j, o)| match o {
            PlantOutcome::Planted { needle, .. } => Some(Wanted {
                key: j.key.clone(),
                carrier: j.carrier.clone(),
                needle: needle.clone(),
                scope: None,
            }),
            _ => None,
        })
        .collect();
    let recovered = inst.recover(&ctx, &wanted, &mut |_| {});
    let mut out = BTreeMap::new();
    for (w, o) in wanted.iter().zip(&recovered) {
        let kind = match o {
            RecoverOutcome::Found { .. } => "found",
            RecoverOutcome::NotFound { .. } => "not-found",
            RecoverOutcome::Denied { .. } => "denied",
            RecoverOutcome::Error { reason } => panic!("{}: {reason}", w.carrier),
        };
        out.insert(w.carrier.clone(), ("planted".to_string(), kind.to_string()));
    }
    let newest: Vec<Value> = journal.into_iter().rev().collect();
    for o in surface::cleanup_owned(&*inst, &ctx, &newest) {
        assert!(
            matches!(
                o,
                surface::CleanupOutcome::Removed
                    | surface::CleanupOutcome::Kept { .. }
                    | surface::CleanupOutcome::Superseded
            ),
            "{o:?}"
        );
    }
    out
}

#[test]
fn the_control_and_the_real_registry_give_the_same_outcomes() {
    let r = DockerRegistry::start();
    foreign(&r);
    let ty = surface::by_name("oci-registry").unwrap();
    let work = tempfile::tempdir().unwrap();
    let control = ty.control(&Value::Null, work.path()).unwrap();
    let mut real = control.settings.clone();
    real["registry"] = json!(r.url);
    real["repository"] = json!("ci/runwarden");
    real["auth"] = serde_json::to_value(surface::HttpAuth::basic_for_control(
        r.user.to_string(),
        r.password.to_string(),
    ))
    .unwrap();
    real["control"] = json!(false);
    let want: BTreeMap<String, (String, String)> = CARRIERS
        .iter()
        .map(|c| (c.to_string(), ("planted".into(), "found".into())))
        .collect();
    assert_eq!(outcomes(&control.settings, "same-1"), want);
    assert_eq!(outcomes(&real, "same-1"), want);
}

#[test]
fn a_foreign_tag_on_a_plants_digest_keeps_it_in_place() {
    let r = DockerRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let env = [("REGISTRY_TOKEN", r.password)];
    let cfg = config(&r.url, "");
    let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "oci-2"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    // Someone tags the manifest-annotation plant's manifest as their own.
    let (repo, tag) = plant_tag(&r, "runwarden-oci-2-manifest-annotation-");
    let accept = "accept: application/vnd.oci.image.manifest.v1+json";
    let (code, text) = r.api(
        "GET",
        &format!("/v2/{repo}/manifests/{tag}"),
        &[accept],
        None,
    );
    assert_eq!(code, 200);
    let body = text.split("\r\n\r\n").last().unwrap().as_bytes().to_vec();
    let planted = r.digest(&repo, &tag);
    let (code, text) = r.api(
        "PUT",
        &format!("/v2/{repo}/manifests/theirs"),
        &["content-type: application/vnd.oci.image.manifest.v1+json"],
        Some(&body),
    );
    assert_eq!(code, 201, "{text}");
    assert_eq!(r.digest(&repo, "theirs"), planted);
    let clean = run_config(dir.path(), &cfg, &env, &["cleanup", "--probe-id", "oci-2"]);
    assert_eq!(
        clean.code, 1,
        "a plant left is no green cleanup\n{}",
        clean.stdout
    );
    assert!(clean.stdout.contains("\"theirs\""), "{}", clean.stdout);
    assert!(clean.stdout.contains("share"), "{}", clean.stdout);
    assert_eq!(r.digest(&repo, "theirs"), planted, "their tag went");
    // Every other plant is gone: in the shared repository only that
    // plant's tag and theirs stay.
    for other in r.catalog().into_iter().filter(|n| *n != repo) {
        assert_eq!(
            r.get(&format!("/v2/{other}/tags/list"))["tags"],
            Value::Null,
            "{other}"
        );
    }
    let mut left: Vec<String> =
        serde_json::from_value(r.get(&format!("/v2/{repo}/tags/list"))["tags"].clone()).unwrap();
    left.sort();
    assert_eq!(left, [tag, "theirs".to_string()]);
}

/// The shared repository (`<namespace>/runwarden-plants`) and the tag of
/// one of its plants, found by the start of the tag.
pub(crate) fn plant_tag(r: &DockerRegistry, start: &str) -> (String, String) {
    let repo = "ci/runwarden/runwarden-plants".to_string();
    let tags = r.get(&format!("/v2/{repo}/tags/list"))["tags"].clone();
    let tag = tags
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|t| t.starts_with(start))
        .unwrap_or_else(|| panic!("no tag {start}… in {tags}"))
        .to_string();
    (repo, tag)
}

/// `discover` proposes one commented `oci-registry` entry for each
/// registry of `~/.docker/config.json`'s `auths`, from the keys alone.
#[test]
fn discover_proposes_the_docker_logins_registries_without_their_credentials() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    std::fs::create_dir_all(home.join(".docker")).unwrap();
    std::fs::write(
        home.join(".docker/config.json"),
        json!({ "auths": {
            "ghcr.io": { "auth": "dXNlcjpzZWNyZXQtdG9rZW4tOTk=" },
            "https://index.docker.io/v1/": { "auth": "aHViOmh1Yi1zZWNyZXQtMTE=", "identitytoken": "id-secret-42" },
            "http://ci:inline-secret-7@10.0.0.5:5000/v2/": {},
        }, "credsStore": "desktop" })
        .to_string(),
    )
    .unwrap();
    let out = bin()
        .arg("discover")
        .env("HOME", &home)
        .env("TMPDIR", root.path())
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for origin in [
        "https://ghcr.io",
        "https://registry-1.docker.io",
        "http://10.0.0.5:5000",
    ] {
        assert!(
            text.contains(&format!("  #   registry: \"{origin}\"\n")),
            "{origin}: {text}"
        );
    }
    assert!(text.contains("  #   type: oci-registry\n"), "{text}");
    for secret in [
        "dXNlcjpzZWNyZXQ",
        "aHViOmh1Yi1",
        "id-secret-42",
        "inline-secret-7",
        "ci:",
    ] {
        assert!(!text.contains(secret), "{secret}: {text}");
    }
    let cfg = root.path().join("proposed.yml");
    std::fs::write(&cfg, &text).unwrap();
    let check = bin().arg("check-config").arg(&cfg).output().unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Uncommented, each entry is a valid surface (only the oci-registry
    // entries: the checkout this runs in may have a remote, proposed
    // commented out too).
    let mut in_oci = false;
    let live: String = text
        .lines()
        .map(|l| match l.strip_prefix("  # ") {
            Some(rest) if rest.starts_with("- name: ") => {
                in_oci = rest.starts_with("- name: oci-registry");
                if in_oci {
                    format!("  {rest}\n")
                } else {
                    format!("{l}\n")
                }
            }
            Some(rest) if in_oci && rest.starts_with("  ") => format!("  {rest}\n"),
            _ => {
                in_oci &= l.starts_with("  # ") || l.starts_with("    ");
                format!("{l}\n")
            }
        })
        .collect();
    assert!(
        live.contains("\n  - name: oci-registry-3\n    type: oci-registry\n"),
        "{live}"
    );
    std::fs::write(&cfg, &live).unwrap();
    let check = bin().arg("check-config").arg(&cfg).output().unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}\n{live}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// The bearer token flow against the real registry behind a token
/// service: the pusher's tokens cover every plant (FAIL), the reader's
/// only pull, so every push is refused with `insufficient_scope` (PASS).
#[test]
fn the_bearer_token_flow_opens_to_the_pusher_and_refuses_the_reader() {
    use crate::common::registry_token::USERS;
    let r = DockerRegistry::token_auth();
    let dir = tempfile::tempdir().unwrap();
    let cfg =
        |user: &str| config(&r.url, "").replace("username: pusher", &format!("username: {user}"));
    let p = run_config(
        dir.path(),
        &cfg("pusher"),
        &[("REGISTRY_TOKEN", USERS[0].1)],
        &["probe"],
    );
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
    assert_eq!(
        p.report["cleanup"]["left"],
        json!([]),
        "{}",
        p.report["cleanup"]
    );
    let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
    assert!(
        !all.contains(USERS[0].1) && !all.contains("Bearer ey"),
        "{all}"
    );

    let p = run_config(
        dir.path(),
        &cfg("reader"),
        &[("REGISTRY_TOKEN", USERS[1].1)],
        &["probe"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    assert_eq!(verdicts(&p), ["pass"; 4], "{}", p.report);
    for c in CARRIERS {
        let d = p.finding(&format!("registry:{c}"))["detail"].to_string();
        assert!(d.contains("insufficient_scope"), "{c}: {d}");
    }
    assert!(!format!("{}{}{}", p.stdout, p.stderr, p.report).contains(USERS[1].1));

    // A mistyped password: the token service refuses it (401), which is
    // not the registry's access control: ERROR, never PASS.
    let p = run_config(
        dir.path(),
        &cfg("reader"),
        &[("REGISTRY_TOKEN", "mistyped")],
        &["probe"],
    );
    assert_eq!(verdicts(&p), ["error"; 4], "{}", p.report);
    let d = p.finding("registry:tag-name")["detail"].to_string();
    assert!(d.contains("token service"), "{d}");
}

/// A registry that does not delete: the plants stay, each listed as left
/// with its tags; nothing foreign changes.
#[test]
fn a_registry_without_delete_leaves_every_plant_listed() {
    let r = DockerRegistry::without_delete();
    foreign(&r);
    let before = r.snapshot(&theirs);
    let dir = tempfile::tempdir().unwrap();
    let p = run_config(
        dir.path(),
        &config(&r.url, ""),
        &[("REGISTRY_TOKEN", r.password)],
        &["probe"],
    );
    assert_eq!(verdicts(&p), ["fail"; 4], "{}", p.report);
    // (repository-name's plant and its catalog witness, and one plant of
    // each other carrier.)
    let left = p.report["cleanup"]["left"].as_array().unwrap();
    assert_eq!(left.len(), 5, "{}", p.report["cleanup"]);
    for l in left {
        let why = l["reason"].as_str().unwrap();
        assert!(
            why.contains("does not delete") && why.contains("HTTP 405"),
            "{why}"
        );
    }
    assert!(
        p.stdout.contains("runwarden-witness"),
        "the tags left are named: {}",
        p.stdout
    );
    assert_eq!(r.snapshot(&theirs), before);
}
