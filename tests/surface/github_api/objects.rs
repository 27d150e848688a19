//! `type: github-api` against the loopback GitHub (src/loopback/github/,
//! which tests/system/loopback/github_rest.rs proves against the real
//! client, npm `@octokit/rest`): a permissive token opens every carrier,
//! the restricted default (`contents: read`) closes them with the
//! permission named, a dead API is an error, permanent carriers are skipped
//! unless accepted, run B with another token, cleanup leaves nothing (but
//! the permanent objects and the one environment, both listed), no token
//! value in any output.

use super::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use serde_json::json;

const CARRIERS: [&str; 9] = [
    "label-name",
    "label-description",
    "issue-comment",
    "milestone-title",
    "release-draft",
    "deployment",
    "actions-variable",
    "commit-status",
    "check-run",
];

fn config(extra: &str) -> String {
    format!("version: 1\nsurfaces:\n  - name: github\n    type: github-api\n    issue: 42\n{extra}")
}

fn verdicts(p: &Probe) -> Vec<String> {
    CARRIERS
        .iter()
        .map(|c| p.verdict(&format!("github:{c}")))
        .collect()
}

/// Every object but the commit, the permanent ones and the environment.
fn leftovers(svc: &GitHubServer) -> Vec<String> {
    svc.all_objects()
        .into_iter()
        .filter(|(k, _)| {
            ![
                "commit",
                "status",
                "check-run",
                "environment",
                "deployment-status",
            ]
            .contains(k)
        })
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}

#[test]
fn a_permissive_token_opens_every_carrier_and_cleanup_leaves_nothing_it_can_delete() {
    let svc = server();
    for i in 0..120 {
        // Foreign objects over two pages.
        svc.add(
            "label",
            REPO,
            json!({ "name": format!("bug-{i}"), "description": "x" }),
        );
        svc.add(
            "comment",
            REPO,
            json!({ "issue": 42, "body": format!("lgtm {i}") }),
        );
    }
    svc.add("variable", REPO, json!({ "name": "FOREIGN", "value": "v" }));
    let before = leftovers(&svc);
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config("    permanent: true\n"),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(verdicts(&p), ["fail"; 9], "{}\n{}", p.report, p.stderr);
    assert_eq!(p.code, 1);
    assert_eq!(leftovers(&svc), before, "cleanup left or took something");
    // The permanent ones stay, and cleanup says so.
    assert_eq!(svc.objects("status").len(), 1);
    assert_eq!(svc.objects("check-run").len(), 1);
    assert!(
        p.stdout.contains("GitHub offers no way to delete it"),
        "{}",
        p.stdout
    );
    no_secrets(&p, &[&token]);
}

/// One repository probed by two surfaces of one config: each surface's
/// agreed names (a label, a variable) carry a tag of its name, so neither
/// collides with the other and both are open (issue 38, hole 5: on 0.11.0
/// the second surface's label-description and actions-variable were
/// ERROR, the names taken).
#[test]
fn two_surfaces_on_one_repository_do_not_collide() {
    let svc = server();
    let before = leftovers(&svc);
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let second = config("")
        .replace("version: 1\nsurfaces:\n", "")
        .replace("name: github", "name: again");
    let p = run(
        dir.path(),
        &svc,
        &(config("") + &second),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    for surface in ["github", "again"] {
        for c in ["label-description", "milestone-title", "actions-variable"] {
            let v = p.verdict(&format!("{surface}:{c}"));
            assert_eq!(v, "fail", "{surface}:{c}\n{}", p.report);
        }
    }
    assert_eq!(leftovers(&svc), before, "cleanup left or took something");
}

#[test]
fn the_restricted_default_closes_every_carrier_and_names_the_permission() {
    let svc = server();
    let token = svc.token(CONTENTS_READ);
    let dir = tempfile::tempdir().unwrap();
    let p = run(
        dir.path(),
        &svc,
        &config("    permanent: true\n"),
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    assert_eq!(verdicts(&p), ["pass"; 9], "{}\n{}", p.report, p.stderr);
    let d = p.finding("github:label-name")["detail"].to_string();
    assert!(d.contains("issues=write; pull_requests=write"), "{d}");
    let d = p.finding("github:actions-variable")["detail"].to_string();
    assert!(d.contains("actions_variables=write"), "{d}");
    // The surface's facts say what the token's answers showed.
    let facts = &p.report["surfaces"][0]["facts"];
    // (Code-scanning and the run traces are skipped here, and so is
    // discussion: the token may not read its categories, which the write
    // needs first.)
    assert_eq!(facts["writes-refused"], CARRIERS.join(", "), "{}", p.report);
    assert_eq!(p.verdict("github:discussion"), "skipped", "{}", p.report);
    assert!(leftovers(&svc).is_empty(), "{:?}", leftovers(&svc));
    no_secrets(&p, &[&token]);
}

#[test]
fn permanent_carriers_are_skipped_unless_accepted_and_no_issue_skips_comments() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let cfg = "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n";
    let p = run(
        dir.path(),
        &svc,
        cfg,
        &[("GITHUB_TOKEN", &token)],
        &["probe"],
    );
    let v = verdicts(&p);
    assert_eq!(v[2], "skipped", "{}", p.report);
    assert_eq!(&v[7..], ["skipped", "skipped"], "{}", p.report);
    assert!(svc.objects("status").is_empty() && svc.objects("check-run").is_empty());
    let d = p.finding("github:commit-status")["detail"].to_string();
    assert!(d.contains("permanent: true"), "{d}");
    assert!(leftovers(&svc).is_empty(), "{:?}", leftovers(&svc));
}

#[test]
fn the_event_names_the_pull_request_for_comments() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("event.json");
    std::fs::write(&event, r#"{"pull_request":{"number":7}}"#).unwrap();
    let cfg = "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n";
    let p = run(
        dir.path(),
        &svc,
        cfg,
        &[
            ("GITHUB_TOKEN", &token),
            ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
        ],
        &["probe"],
    );
    assert_eq!(p.verdict("github:issue-comment"), "fail", "{}", p.report);
    assert!(
        crate::common::unwrapped(&p.stdout).contains("#7 (from the event)"),
        "{}",
        p.stdout
    );
}

#[test]
fn a_dead_api_is_an_error_and_no_token_skips() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    // The runner's API itself is dead (a config's `api-url` elsewhere
    // would not get the job's token).
    let dead = format!("http://127.0.0.1:{port}/api");
    let cfg = config(&format!("    api-url: {dead}\n"));
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &[("GITHUB_TOKEN", &token), ("GITHUB_API_URL", &dead)],
        &["probe"],
    );
    assert_eq!(&verdicts(&p)[..7], ["error"; 7], "{}", p.report);
    assert_eq!(p.code, 1);
    no_secrets(&p, &[&token]);
    let p = run(dir.path(), &svc, &config(""), &[], &["probe"]);
    assert_eq!(verdicts(&p), ["skipped"; 9], "{}", p.report);
}

#[test]
fn run_b_reads_with_its_own_token_across_jobs() {
    let svc = server();
    let writer = permissive(&svc);
    // B may read issues and deployments, not variables or contents.
    let reader = svc.token(&[
        ("issues", "read"),
        ("deployments", "read"),
        ("checks", "read"),
        ("statuses", "read"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("    permanent: true\n    read-token-env: READ_TOKEN\n");
    let env = [
        ("GITHUB_TOKEN", writer.as_str()),
        ("READ_TOKEN", reader.as_str()),
    ];
    let plant = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["plant", "--probe-id", "gh-12345678901-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["recover", "--probe-id", "gh-12345678901-1"],
    );
    assert_eq!(
        verdicts(&p),
        [
            "fail", "fail", "fail", "fail", "pass", "fail", "pass", "fail", "fail"
        ],
        "{}",
        p.report
    );
    // A draft release is invisible to a token that may not push: listed,
    // not found (the listing ran; drafts are not in it).
    let d = p.finding("github:release-draft")["detail"].to_string();
    assert!(d.contains("none holds it") || d.contains("refused"), "{d}");
    let c = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["cleanup", "--probe-id", "gh-12345678901-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(leftovers(&svc).is_empty(), "{:?}", leftovers(&svc));
    no_secrets(&p, &[&writer, &reader]);
}

/// A probe of label-name and label-description only (`permanent` off, no
/// issue: the rest is SKIPPED) with the API reached through `front`.
fn probe_through(front: &crate::common::hostile::Hostile, token: &str) -> Probe {
    let dir = tempfile::tempdir().unwrap();
    let cfg = "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n";
    let env = [
        ("GITHUB_API_URL", format!("{}/api", front.base())),
        ("GITHUB_REPOSITORY", REPO.to_string()),
        ("GITHUB_TOKEN", token.to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run_config(dir.path(), cfg, &env, &["probe"])
}

fn label_verdicts(p: &Probe) -> Vec<String> {
    vec![
        p.verdict("github:label-name"),
        p.verdict("github:label-description"),
    ]
}

/// Answers that are not GitHub's own are errors, never a pass: an HTML
/// page with 200, a proxy's 403 without GitHub's body, a rate limit GitHub
/// does not lift in time, a listing that counts more than it hands over,
/// a next page on another host; a rate limit with a short `retry-after`
/// is waited out.
#[test]
fn answers_that_are_not_githubs_are_errors_never_a_pass() {
    use crate::common::hostile::{Hostile, Reply, Req};
    let svc = server();
    let token = permissive(&svc);
    let up = svc.api_url().trim_end_matches("/api").to_string();
    let labels = "/api/repos/octo/repo/labels";

    // A sign-in page with 200 for the listing.
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.method == "GET" && r.path() == labels {
            Reply::html(200, "<html>sign in</html>")
        } else {
            pass(r)
        }
    });
    let p = probe_through(&front, &token);
    // label-name's only route broke; label-description's other route,
    // its agreed name, found it: a found nonce stands.
    assert_eq!(label_verdicts(&p), ["error", "fail"], "{}", p.report);
    assert!(svc.objects("label").is_empty(), "cleanup left a label");

    // A proxy's 403 (no GitHub body) to the write: no refusal.
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.method == "POST" {
            Reply::html(403, "Forbidden by proxy")
        } else {
            pass(r)
        }
    });
    let p = probe_through(&front, &token);
    assert_eq!(label_verdicts(&p), ["error", "error"], "{}", p.report);

    // GitHub's own 403, but a rate limit with no time to wait: an error.
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.method == "POST" {
            Reply::json(403, json!({ "message": "API rate limit exceeded" }))
                .with_header("x-ratelimit-remaining", "0")
        } else {
            pass(r)
        }
    });
    let p = probe_through(&front, &token);
    assert_eq!(label_verdicts(&p), ["error", "error"], "{}", p.report);

    // A secondary rate limit with retry-after: 1, once: waited out.
    let once = std::sync::atomic::AtomicBool::new(false);
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.method == "POST" && !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            Reply::json(
                403,
                json!({ "message": "You have exceeded a secondary rate limit" }),
            )
            .with_header("retry-after", "1")
        } else {
            pass(r)
        }
    });
    let p = probe_through(&front, &token);
    assert_eq!(label_verdicts(&p), ["fail", "fail"], "{}", p.report);

    // A listing that counts more than it hands over (check runs say
    // total_count, and the listing is their only route): one may have
    // been skipped.
    let dir = tempfile::tempdir().unwrap();
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        let reply = pass(r);
        if r.method == "GET" && r.path().ends_with("/check-runs") {
            return Reply::json(200, json!({ "total_count": 999, "check_runs": [] }));
        }
        reply
    });
    let env = [
        ("GITHUB_API_URL", format!("{}/api", front.base())),
        ("GITHUB_REPOSITORY", REPO.to_string()),
        ("GITHUB_SHA", SHA.to_string()),
        ("GITHUB_TOKEN", token.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cfg =
        "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n    permanent: true\n";
    let p = run_config(dir.path(), cfg, &env, &["probe"]);
    assert_eq!(p.verdict("github:check-run"), "error", "{}", p.report);
    let d = p.finding("github:check-run")["detail"].to_string();
    assert!(d.contains("counted 999 but handed over 0"), "{d}");

    // A next page on another host: the token never follows it.
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        let reply = pass(r);
        if r.method == "GET" && r.path() == labels {
            // An empty first page whose next is elsewhere.
            drop(reply);
            return Reply::json(200, json!([])).with_header(
                "Link",
                "<http://127.0.0.2:1/api/repos/octo/repo/labels?page=2>; rel=\"next\"",
            );
        }
        reply
    });
    let p = probe_through(&front, &token);
    assert_eq!(label_verdicts(&p)[0], "error", "{}", p.report);
    let d = p.finding("github:label-name")["detail"].to_string();
    assert!(d.contains("another host"), "{d}");
    no_secrets(&p, &[&token]);
}

/// Run B in another pull request, on another commit: it reads the issue and
/// commit run A wrote on (from the plant's receipt), not its own.
#[test]
fn run_b_on_another_pull_request_and_commit_reads_where_run_a_wrote() {
    let svc = server();
    let other = "b1b2c3d4e5f60718293a4b5c6d7e8f9012345678";
    svc.add("commit", REPO, json!({ "sha": other }));
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let (pr7, pr8) = (dir.path().join("e7.json"), dir.path().join("e8.json"));
    std::fs::write(&pr7, r#"{"pull_request":{"number":7}}"#).unwrap();
    std::fs::write(&pr8, r#"{"pull_request":{"number":8}}"#).unwrap();
    let cfg =
        "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n    permanent: true\n";
    let plant_env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("GITHUB_EVENT_PATH", pr7.to_str().unwrap()),
    ];
    let plant = run(
        dir.path(),
        &svc,
        cfg,
        &plant_env,
        &["plant", "--probe-id", "gh-77-1"],
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let recover_env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("GITHUB_EVENT_PATH", pr8.to_str().unwrap()),
        ("GITHUB_SHA", other),
    ];
    let p = run(
        dir.path(),
        &svc,
        cfg,
        &recover_env,
        &["recover", "--probe-id", "gh-77-1"],
    );
    for c in ["issue-comment", "commit-status", "check-run"] {
        assert_eq!(
            p.verdict(&format!("github:{c}")),
            "fail",
            "{c}: {}",
            p.report
        );
    }
    let c = run(
        dir.path(),
        &svc,
        cfg,
        &recover_env,
        &["cleanup", "--probe-id", "gh-77-1"],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
}

/// A gateway's 403 in front of GitHub (`{"message":"Forbidden"}`, without
/// GitHub's `documentation_url` or request id) is no refusal by GitHub:
/// ERROR, never PASS.
#[test]
fn a_gateways_403_with_a_message_is_no_refusal() {
    use crate::common::hostile::{Hostile, Reply, Req};
    let svc = server();
    let token = permissive(&svc);
    let up = svc.api_url().trim_end_matches("/api").to_string();
    let front = Hostile::start(&up, move |r: &Req, pass: &dyn Fn(&Req) -> Reply| {
        if r.method == "POST" {
            Reply::json(403, json!({ "message": "Forbidden" }))
        } else {
            pass(r)
        }
    });
    let p = probe_through(&front, &token);
    assert_eq!(label_verdicts(&p), ["error", "error"], "{}", p.report);
}

/// A listing that shifts while run B pages it by number: the label-name
/// plant, at a page boundary, is skipped on B's first pass. Shifted once,
/// the listing is read again until two passes agree and the plant is
/// found (FAIL; 0.11.0 said PASS, "hidden from run B", although B's token
/// is the writer's). Shifted on every pass: no look, ERROR, saying why.
#[test]
fn a_listing_that_shifts_while_paged_is_read_until_two_passes_agree() {
    use runwarden::loopback::{Knob, Knobs as _};
    for (knob, want) in [(Knob::ShiftOnce, "fail"), (Knob::ShiftEvery, "error")] {
        let svc = server();
        let token = permissive(&svc);
        let dir = tempfile::tempdir().unwrap();
        let cfg = "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n";
        let env = [("GITHUB_TOKEN", token.as_str())];
        let id = ["--probe-id", "gh-12345678901-1"];
        let plant = run(dir.path(), &svc, cfg, &env, &[&["plant"][..], &id].concat());
        assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
        // label-name's, planted first (label-description's has the
        // agreed name).
        let label = svc
            .objects("label")
            .into_iter()
            .min_by_key(|l| l["id"].as_u64())
            .unwrap();
        {
            let mut st = svc.lock();
            st.shifter.aim = label["id"].as_u64();
            assert!(st.knob(knob, true));
        }
        let p = run(
            dir.path(),
            &svc,
            cfg,
            &env,
            &[&["recover"][..], &id].concat(),
        );
        assert_eq!(
            p.verdict("github:label-name"),
            want,
            "{knob:?}: {}",
            p.report
        );
        let d = p.finding("github:label-name")["detail"].to_string();
        assert!(!d.contains("hidden from run B"), "{d}");
        if knob == Knob::ShiftEvery {
            assert!(d.contains("changed while it was read"), "{d}");
        }
        svc.lock().knob(knob, false);
        let c = run(
            dir.path(),
            &svc,
            cfg,
            &env,
            &[&["cleanup"][..], &id].concat(),
        );
        assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
        assert!(
            svc.objects("label").is_empty(),
            "{:?}",
            svc.objects("label")
        );
    }
}

/// docs/action.md's two-job workflow: the probe job holds `contents:
/// read` and `issues: read` (the agent's own block). One github-api
/// surface with its default carriers probes with PASS and SKIPPED only:
/// the configuration the docs recommend never fails the job with an
/// ERROR (0.11.0: `discussion` ERROR, its categories read refused before
/// the write; `run-annotation` ERROR where the jobs listing was refused).
#[test]
fn the_recommended_restricted_job_probes_with_pass_and_skipped_only() {
    let svc = server();
    let token = svc.token(&[("contents", "read"), ("issues", "read")]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n";
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_RUN_ID", "90"),
        ("GITHUB_RUN_ATTEMPT", "1"),
    ];
    let p = run(dir.path(), &svc, cfg, &env, &["probe"]);
    let bad: Vec<String> = p.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !matches!(f["verdict"].as_str(), Some("pass" | "skipped")))
        .map(|f| format!("{} {}: {}", f["channel"], f["verdict"], f["detail"]))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    assert_eq!(p.code, 0, "{}", p.stderr);
}

/// An unsigned receipt whose "fuller" entry for a plant names a made-up
/// id: cleanup finds nothing there, and the plant's text in the listing
/// shows it is not gone; it is removed, not reported gone (0.11.0 took
/// the intent as superseded and the milestone stayed, counted gone).
#[test]
fn a_fuller_entry_with_a_made_up_id_does_not_hide_the_plant() {
    let svc = server();
    let token = permissive(&svc);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config("");
    // No key: the receipt is not signed, so it can be edited.
    let env = [("GITHUB_TOKEN", token.as_str()), ("RUNWARDEN_KEY", "")];
    let p = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &["plant", "--probe-id", "gh-fz-1"],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    let milestones = |svc: &GitHubServer| svc.objects("milestone").len();
    assert_eq!(milestones(&svc), 1);
    let path = dir.path().join("runwarden-receipt-gh-fz-1.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let entries = r["surfaces"][0]["entries"].as_array_mut().unwrap();
    // Each fuller entry (with GitHub's id) gets a made-up id instead.
    let mut forged = 0;
    for e in entries.iter_mut() {
        if e["ref"].is_u64() && e["carrier"] == "milestone-title" {
            e["ref"] = json!(987_654_321u64);
            forged += 1;
        }
    }
    assert_eq!(forged, 1, "{r}");
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    let c = run(
        dir.path(),
        &svc,
        &cfg,
        &env,
        &[
            "cleanup",
            "--probe-id",
            "gh-fz-1",
            "--receipt",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert_eq!(
        milestones(&svc),
        0,
        "the milestone plant stayed, counted gone"
    );
    assert!(c.stdout.contains(" 0 already gone"), "{}", c.stdout);
}
