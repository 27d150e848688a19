//! `type: actions-artifacts` against the loopback GitHub
//! (src/loopback/github/, which tests/system/loopback/github_artifacts.rs
//! proves against the real client, npm `@actions/artifact`): every carrier
//! open with `actions: read`, closed for a `contents: read` token with the
//! permission named, no runtime token, a dead API, run B in another
//! workflow run, cleanup among foreign artifacts, and no credential in any
//! output.

use crate::common::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use std::path::Path;

const CARRIERS: [&str; 3] = ["artifact-name", "artifact-content", "artifact-file-path"];

const CONFIG: &str = "version: 1\nsurfaces:\n  - name: artifacts\n    type: actions-artifacts\n";

const REPO: &str = "octo/repo";

/// A step of workflow run `runtime`'s job holding `api` as GITHUB_TOKEN.
fn run(
    dir: &Path,
    svc: &GitHubServer,
    runtime: Option<&str>,
    api: Option<&str>,
    args: &[&str],
) -> Probe {
    let mut env = vec![
        ("ACTIONS_RESULTS_URL".to_string(), svc.results_url()),
        ("GITHUB_API_URL".to_string(), svc.api_url()),
        ("GITHUB_REPOSITORY".to_string(), REPO.to_string()),
        (
            "RUNWARDEN_KEY".to_string(),
            "0123456789abcdef0123456789abcdef".to_string(),
        ),
    ];
    env.extend(runtime.map(|t| ("ACTIONS_RUNTIME_TOKEN".to_string(), t.to_string())));
    env.extend(api.map(|t| ("GITHUB_TOKEN".to_string(), t.to_string())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    run_config(dir, CONFIG, &env, args)
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("artifacts:{c}")))
        .collect()
}

fn names(svc: &GitHubServer) -> Vec<String> {
    let mut n: Vec<String> = svc.artifacts().into_iter().map(|a| a.name).collect();
    n.sort();
    n
}

#[test]
fn every_carrier_is_open_with_actions_read_and_cleanup_takes_only_the_plants() {
    let svc = GitHubServer::start().unwrap();
    for i in 0..150 {
        // Foreign artifacts over two pages, some in runwarden's own form.
        let name = match i % 3 {
            0 => format!("build-{i}"),
            1 => format!("runwarden-other-artifact-name-{i:032x}-0123456789abcdef"),
            _ => format!("weird name ;&?=% {i}"),
        };
        svc.add_artifact(REPO, 7, &name, b"PK\x05\x06foreign");
    }
    let before = names(&svc);
    let runtime = svc.runtime_token(REPO, 1);
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, Some(&runtime), Some(&api), &["probe"]);
    assert_eq!(verdicts(&p), ["fail"; 3], "{}\n{}", p.report, p.stderr);
    assert_eq!(p.code, 1);
    let d = p.finding("artifacts:artifact-content")["detail"].to_string();
    assert!(d.contains("downloaded through the REST API"), "{d}");
    assert_eq!(names(&svc), before, "cleanup left or took something");
    no_secrets(&p, &[&runtime, &api, &svc.lock().sig.clone()]);
}

#[test]
fn a_contents_read_token_closes_every_carrier_and_names_the_permission() {
    let svc = GitHubServer::start().unwrap();
    let runtime = svc.runtime_token(REPO, 1);
    let api = svc.token(CONTENTS_READ);
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, Some(&runtime), Some(&api), &["probe"]);
    assert_eq!(verdicts(&p), ["pass"; 3], "{}\n{}", p.report, p.stderr);
    let d = p.finding("artifacts:artifact-name")["detail"].to_string();
    assert!(d.contains("actions=read"), "{d}");
    // The REST token may not delete; the uploading run's runtime token
    // may, through the results service.
    assert!(svc.artifacts().is_empty(), "{:?}", names(&svc));
    no_secrets(&p, &[&runtime, &api]);
}

#[test]
fn no_runtime_token_skips_with_the_reason_and_no_api_token_too() {
    let svc = GitHubServer::start().unwrap();
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    let p = run(dir.path(), &svc, None, Some(&api), &["probe"]);
    assert_eq!(verdicts(&p), ["skipped"; 3], "{}", p.report);
    let d = p.finding("artifacts:artifact-name")["detail"].to_string();
    assert!(d.contains("ACTIONS_RUNTIME_TOKEN"), "{d}");
    let runtime = svc.runtime_token(REPO, 1);
    let p = run(dir.path(), &svc, Some(&runtime), None, &["probe"]);
    assert_eq!(verdicts(&p), ["skipped"; 3], "{}", p.report);
    assert!(svc.artifacts().is_empty());
}

#[test]
fn a_dead_api_is_an_error() {
    let svc = GitHubServer::start().unwrap();
    let runtime = svc.runtime_token(REPO, 1);
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let env = [
        ("ACTIONS_RESULTS_URL", svc.results_url()),
        ("GITHUB_API_URL", format!("http://127.0.0.1:{port}/api")),
        ("GITHUB_REPOSITORY", REPO.to_string()),
        ("ACTIONS_RUNTIME_TOKEN", runtime.clone()),
        ("GITHUB_TOKEN", api.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let p = run_config(dir.path(), CONFIG, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["error"; 3], "{}", p.report);
    assert_eq!(p.code, 1);
    no_secrets(&p, &[&runtime, &api]);
}

#[test]
fn run_b_in_another_workflow_run_finds_them_and_cleanup_by_probe_id_takes_them() {
    let svc = GitHubServer::start().unwrap();
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    let run1 = svc.runtime_token(REPO, 1);
    let plant = run(
        dir.path(),
        &svc,
        Some(&run1),
        Some(&api),
        &["plant", "--probe-id", "gh-1-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    assert_eq!(svc.artifacts().len(), 3);
    let run2 = svc.runtime_token(REPO, 2);
    let reader = svc.token(&[("actions", "read")]);
    let p = run(
        dir.path(),
        &svc,
        Some(&run2),
        Some(&reader),
        &["recover", "--probe-id", "gh-1-1"],
    );
    assert_eq!(verdicts(&p), ["fail"; 3], "{}\n{}", p.report, p.stderr);
    // The receipt gone: cleanup by probe id finds the plants by their tag.
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap().path();
        if f.to_string_lossy().contains("receipt") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let c = run(
        dir.path(),
        &svc,
        Some(&run2),
        Some(&api),
        &["cleanup", "--probe-id", "gh-1-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.artifacts().is_empty(), "{:?}", names(&svc));
}

/// Answers that are not the service's or GitHub's own are errors, never a
/// pass: a proxy's 403 to the upload (no Twirp `permission_denied`), a
/// zip answered in place instead of redirected, a listing whose items
/// lack their name.
#[test]
fn answers_that_are_not_the_services_are_errors_never_a_pass() {
    use crate::common::hostile::{Hostile, Reply, Req};
    let svc = GitHubServer::start().unwrap();
    let up = svc.results_url().trim_end_matches('/').to_string();
    let through = |front: &Hostile| {
        let runtime = svc.runtime_token(REPO, 1);
        let api = svc.token(&[("actions", "write")]);
        let dir = tempfile::tempdir().unwrap();
        let env = [
            ("ACTIONS_RESULTS_URL", format!("{}/", front.base())),
            ("GITHUB_API_URL", format!("{}/api", front.base())),
            ("GITHUB_REPOSITORY", REPO.to_string()),
            ("ACTIONS_RUNTIME_TOKEN", runtime.clone()),
            ("GITHUB_TOKEN", api.clone()),
        ];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let p = run_config(dir.path(), CONFIG, &env, &["probe"]);
        no_secrets(&p, &[&runtime, &api]);
        p
    };
    let front = Hostile::start(&up, |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.path().ends_with("/CreateArtifact") {
            Reply::html(403, "Forbidden by proxy")
        } else {
            pass(r)
        }
    });
    let p = through(&front);
    assert_eq!(verdicts(&p), ["error"; 3], "{}", p.report);
    let front = Hostile::start(&up, |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.path().ends_with("/zip") {
            Reply::new(200, "application/zip", "PK\x05\x06")
        } else {
            pass(r)
        }
    });
    let p = through(&front);
    let v = verdicts(&p);
    assert_eq!(&v[1..], ["error", "error"], "{}", p.report);
    let front = Hostile::start(&up, |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        let reply = pass(r);
        if r.method == "GET"
            && r.path() == "/api/repos/octo/repo/actions/artifacts"
            && !r.url.contains("name=")
        {
            let mut v = reply.json_body();
            if let Some(a) = v["artifacts"].as_array_mut() {
                for x in a {
                    x.as_object_mut().unwrap().remove("name");
                }
            }
            return Reply::json(200, v);
        }
        reply
    });
    let p = through(&front);
    assert_eq!(
        p.verdict("artifacts:artifact-name"),
        "error",
        "{}",
        p.report
    );
    assert!(svc.artifacts().is_empty(), "{:?}", names(&svc));
    // The zip redirects to a URL whose answer is a sign-in page with 200:
    // not the artifact's zip, so nothing is learnt from it.
    let port = std::sync::Arc::new(std::sync::OnceLock::<u16>::new());
    let at = port.clone();
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.path().ends_with("/zip") {
            let to = format!("http://127.0.0.1:{}/signed/x?sig=s", at.get().unwrap());
            Reply::new(302, "text/plain", "").with_header("Location", &to)
        } else if r.path().starts_with("/signed/") {
            Reply::html(200, "<html>sign in</html>")
        } else {
            pass(r)
        }
    });
    port.set(front.port).unwrap();
    let p = through(&front);
    let v = verdicts(&p);
    assert_eq!(&v[1..], ["error", "error"], "{}", p.report);
}

/// A `run:` step gets no ACTIONS_RUNTIME_TOKEN, but with `id-token: write`
/// it holds ACTIONS_ID_TOKEN_REQUEST_TOKEN, the same system token: an
/// agent shell can upload artifacts with it, so the surface probes with it.
#[test]
fn a_run_step_with_id_token_write_uploads_with_the_id_token_request_token() {
    let svc = GitHubServer::start().unwrap();
    let token = svc.runtime_token(REPO, 1);
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("ACTIONS_RESULTS_URL", svc.results_url()),
        ("GITHUB_API_URL", svc.api_url()),
        ("GITHUB_REPOSITORY", REPO.to_string()),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", token.clone()),
        ("GITHUB_TOKEN", api.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let p = run_config(dir.path(), CONFIG, &env, &["probe"]);
    assert_eq!(verdicts(&p), ["fail"; 3], "{}", p.report);
    assert!(
        p.stdout
            .contains("runtime-token ACTIONS_ID_TOKEN_REQUEST_TOKEN"),
        "{}",
        p.stdout
    );
    assert!(svc.artifacts().is_empty());
    no_secrets(&p, &[&token, &api]);
}

/// An upload that finishes while run B pages the artifacts by number, as
/// one ahead of the plant goes: `total_count` matches what the pass handed
/// over, yet the artifact-name plant at the page boundary was skipped.
/// The listing is read again until two passes agree: FAIL (0.11.0 said
/// PASS, its count check and listed witness satisfied).
#[test]
fn a_late_upload_that_keeps_the_count_does_not_hide_a_skipped_plant() {
    use runwarden::loopback::{Knob, Knobs as _};
    let svc = GitHubServer::start().unwrap();
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    let run1 = svc.runtime_token(REPO, 1);
    let id = ["--probe-id", "gh-1-1"];
    let plant = run(
        dir.path(),
        &svc,
        Some(&run1),
        Some(&api),
        &[&["plant"][..], &id].concat(),
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let named = svc
        .artifacts()
        .into_iter()
        .find(|a| a.name.contains("-artifact-name-"))
        .unwrap();
    {
        let mut st = svc.lock();
        st.shifter.aim = Some(named.id);
        assert!(st.knob(Knob::ShiftKeepingCount, true));
    }
    let run2 = svc.runtime_token(REPO, 2);
    let p = run(
        dir.path(),
        &svc,
        Some(&run2),
        Some(&api),
        &[&["recover"][..], &id].concat(),
    );
    assert_eq!(verdicts(&p), ["fail"; 3], "{}\n{}", p.report, p.stderr);
    svc.lock().knob(Knob::ShiftKeepingCount, false);
    let c = run(
        dir.path(),
        &svc,
        Some(&run2),
        Some(&api),
        &[&["cleanup"][..], &id].concat(),
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.artifacts().is_empty(), "{:?}", names(&svc));
}

/// An unsigned receipt whose entries name made-up artifact ids: nothing is
/// under them, and the listing by name shows the plants are not gone; they
/// are deleted, not counted gone (0.11.0 counted them gone and left them).
#[test]
fn an_entry_with_a_made_up_id_does_not_hide_the_plant() {
    let svc = GitHubServer::start().unwrap();
    let api = svc.token(&[("actions", "write")]);
    let dir = tempfile::tempdir().unwrap();
    let env_of = |runtime: &str| {
        vec![
            ("ACTIONS_RESULTS_URL".to_string(), svc.results_url()),
            ("GITHUB_API_URL".to_string(), svc.api_url()),
            ("GITHUB_REPOSITORY".to_string(), REPO.to_string()),
            ("ACTIONS_RUNTIME_TOKEN".to_string(), runtime.to_string()),
            ("GITHUB_TOKEN".to_string(), api.clone()),
            // No key: the receipt is not signed, so it can be edited.
            ("RUNWARDEN_KEY".to_string(), String::new()),
        ]
    };
    let go = |runtime: &str, args: &[&str]| {
        let env = env_of(runtime);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_config(dir.path(), CONFIG, &env, args)
    };
    let run1 = svc.runtime_token(REPO, 1);
    let plant = go(&run1, &["plant", "--probe-id", "gh-fz-2"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    assert_eq!(svc.artifacts().len(), 3);
    let path = dir.path().join("runwarden-receipt-gh-fz-2.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut forged = 0;
    for e in r["surfaces"][0]["entries"].as_array_mut().unwrap() {
        if e["id"].is_u64() {
            e["id"] = serde_json::json!(987_654_321u64 + forged);
            forged += 1;
        }
    }
    assert_eq!(forged, 3, "{r}");
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    let run2 = svc.runtime_token(REPO, 2);
    let c = go(
        &run2,
        &[
            "cleanup",
            "--probe-id",
            "gh-fz-2",
            "--receipt",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(svc.artifacts().is_empty(), "{:?}", names(&svc));
    assert!(c.stdout.contains(" 0 already gone"), "{}", c.stdout);
}
