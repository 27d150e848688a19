//! The poisoning drill (src/trust.rs): a plant by an untrusted run (a
//! `pull_request_target` run of a fork's pull request) recovered by a
//! trusted one (a push to the protected `main`), against the loopback
//! GitHub for the API's record of the planting run and the branch's
//! protection. An open channel leads every output with the direction;
//! run A's trust is the API's record, not the receipt's claim.

use super::run;
use crate::common::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use serde_json::json;
use std::path::Path;

const REPO: &str = "octo/app";

/// A job of `event` in run `run_id` of octo/app, its payload written to
/// `dir`, with the loopback API and a token that may read contents.
fn job(
    dir: &Path,
    gh: &GitHubServer,
    token: &str,
    event: &str,
    payload: serde_json::Value,
    run_id: &str,
) -> Vec<(String, String)> {
    let path = dir.join(format!("event-{run_id}.json"));
    std::fs::write(&path, payload.to_string()).unwrap();
    [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_REPOSITORY", REPO),
        ("GITHUB_WORKFLOW", "drill"),
        ("GITHUB_RUN_ID", run_id),
        ("GITHUB_RUN_ATTEMPT", "1"),
        ("GITHUB_JOB", "drill"),
        ("GITHUB_EVENT_NAME", event),
        ("GITHUB_EVENT_PATH", path.to_str().unwrap()),
        ("GITHUB_REF", "refs/heads/main"),
        ("GITHUB_API_URL", &gh.api_url()),
        ("GITHUB_TOKEN", token),
        ("RUNWARDEN_KEY", "drill-key-51e0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// A completed run of drill-plant.yml on `event` from a fork's pull
/// request, as the API records it (its ref is the base branch, main);
/// its id.
fn planting_run(gh: &GitHubServer, event: &str) -> u64 {
    gh.add(
        "workflow-run",
        REPO,
        json!({
            "event": event, "head_branch": "main", "status": "completed",
            "path": ".github/workflows/drill-plant.yml",
            "repository": { "full_name": REPO },
            "head_repository": { "full_name": "stranger/app" },
            "actor": { "type": "User" },
        }),
    )
}

fn env(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn a_write_by_an_untrusted_run_read_by_a_trusted_one_leads_every_output() {
    let gh = GitHubServer::start().unwrap();
    // (contents: read for the branch's protection, actions: read for the
    // planting run's record.)
    let token = gh.token(&[("contents", "read"), ("actions", "read")]);
    gh.add("branch", REPO, json!({ "name": "main", "protected": true }));
    // The planting run, as the API records it: a fork's pull request on
    // pull_request_target (its ref is the base branch, main).
    let planting = planting_run(&gh, "pull_request_target");
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("c.yml"), fs_config("shared", &shared, "")).unwrap();
    let fork = json!({
        "repository": { "full_name": REPO },
        "pull_request": { "head": { "repo": { "full_name": "stranger/app" } } },
        "sender": { "type": "User" },
    });
    let id = planting.to_string();
    let a = job(work.path(), &gh, &token, "pull_request_target", fork, &id);
    let plant = run(
        work.path(),
        &["plant", "--config", "c.yml", "--probe-id", "drill-1"],
        &env(&a),
    );
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let push = json!({ "repository": { "full_name": REPO }, "sender": { "type": "User" } });
    let b = job(work.path(), &gh, &token, "push", push, "200");
    let sarif = work.path().join("r.sarif");
    let summary = work.path().join("summary.md");
    let mut env_b = env(&b);
    env_b.push(("GITHUB_STEP_SUMMARY", summary.to_str().unwrap()));
    let rec = run(
        work.path(),
        &[
            "recover",
            "--config",
            "c.yml",
            "--probe-id",
            "drill-1",
            "--sarif",
            sarif.to_str().unwrap(),
            "--format",
            "github",
        ],
        &env_b,
    );
    assert_eq!(rec.code, 1, "{}\n{}", rec.stdout, rec.stderr);
    let line =
        "a write by a pull_request_target run from a fork reached a push run on main: poisoning";
    let t = &rec.report["trust"];
    // Outside the drill run A's trust is its receipt's claim, said so.
    let line = format!(
        "{line} (run A's trust as its receipt claims it: only the drill's own look at the planting run confirms it)"
    );
    assert_eq!(t["poisoning"], line.as_str(), "{t}");
    assert_eq!(t["a"]["class"], "untrusted");
    assert!(
        t["a"]["source"]
            .as_str()
            .unwrap()
            .starts_with("claimed by the plant's receipt; unconfirmed"),
        "{t}"
    );
    assert_eq!(t["b"]["class"], "trusted");
    assert_eq!(t["b"]["why"], "push on the protected branch main");
    let s = std::fs::read_to_string(&summary).unwrap();
    // Each run's trust, said under it.
    assert!(
        s.contains("Run A: ` untrusted (")
            && s.contains("; run B: ` trusted (push on the protected branch main"),
        "{s}"
    );
    // (Its words are rendered as surface text is: a code span.)
    assert!(s.contains(&format!("**Poisoning:** ` {line} `.")), "{s}");
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    assert_eq!(
        sarif["runs"][0]["properties"]["runwarden/trust"]["poisoning"],
        line
    );
    // The table leads with it.
    let table = run(
        work.path(),
        &["recover", "--config", "c.yml", "--probe-id", "drill-1"],
        &env(&b),
    );
    assert!(
        unwrapped(&table.stdout).starts_with(&format!("POISONING: {line}\n")),
        "{}",
        table.stdout
    );
    // Any receipt's run is only a claim (the plant job writes the
    // receipt): said so whatever run it names.
    let unknown = job(
        work.path(),
        &gh,
        &token,
        "pull_request_target",
        json!({}),
        "999999",
    );
    let plant = run(
        work.path(),
        &["plant", "--config", "c.yml", "--probe-id", "drill-2"],
        &env(&unknown),
    );
    assert_eq!(plant.code, 0, "{}", plant.stderr);
    let rec = run(
        work.path(),
        &["recover", "--config", "c.yml", "--probe-id", "drill-2"],
        &env(&b),
    );
    let a = &rec.report["trust"]["a"];
    assert!(
        a["source"]
            .as_str()
            .unwrap()
            .starts_with("claimed by the plant's receipt"),
        "{a}"
    );
    assert!(
        rec.report["trust"]["poisoning"]
            .as_str()
            .unwrap()
            .contains("as its receipt claims it"),
        "{}",
        rec.report["trust"]
    );
}

/// Where the untrusted run's writes are refused, no channel is open: no
/// poisoning line, each run's trust said all the same.
#[test]
fn a_closed_store_says_each_runs_trust_and_no_poisoning() {
    let gh = GitHubServer::start().unwrap();
    let token = gh.token(CONTENTS_READ);
    gh.add("branch", REPO, json!({ "name": "main", "protected": true }));
    let work = tempfile::tempdir().unwrap();
    let fork = json!({
        "repository": { "full_name": REPO },
        "pull_request": { "head": { "repo": { "full_name": "stranger/app" } } },
    });
    let a = job(work.path(), &gh, &token, "pull_request", fork, "7");
    // (A surface with nothing planted: an empty config's probe is refused;
    // the trust of a probe's two runs is this job's.)
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("c.yml"), fs_config("shared", &shared, "")).unwrap();
    let p = run(work.path(), &["probe", "--config", "c.yml"], &env(&a));
    let t = &p.report["trust"];
    assert_eq!(t["a"]["class"], "untrusted", "{t}");
    assert_eq!(t["a"]["fork"], true);
    assert!(t.get("poisoning").is_none(), "{t}");
}

/// The drill as docs/recipes/poisoning-drill.md runs it, against the
/// loopback GitHub (runs, branches, the receipt artifact), the loopback
/// Actions cache, a loopback build cache and SeaweedFS: a plant by a
/// `pull_request_target` run with `--drill`, its receipt uploaded as the
/// run's artifact, recovered by a `schedule` run on the protected main
/// with `--planted-by` (the planting run found by listing its workflow's
/// runs, the receipt read through the API), cleaned up by the same. Open
/// stores FAIL with the poisoning line; where the untrusted run's writes
/// are refused (a read-only cache token, a bucket identity and a cache
/// credential that may not write) nothing is open; a receipt altered on
/// its way is refused by the key.
#[test]
fn the_drill_fails_open_stores_with_the_direction_and_passes_closed_ones() {
    use crate::common::seaweed::{self, Seaweed};
    use runwarden::loopback::actions_cache::CacheServer;
    use runwarden::loopback::build_cache::BuildCacheServer;
    let gh = GitHubServer::start().unwrap();
    // (actions: write, as the recipe's recovering job has it: its cleanup
    // deletes the receipt artifact.)
    let token = gh.token(&[("contents", "read"), ("actions", "write")]);
    gh.add("branch", REPO, json!({ "name": "main", "protected": true }));
    let cache = CacheServer::start().unwrap();
    let cache_api = cache.api_token(true);
    let build = BuildCacheServer::start().unwrap();
    let build_token = build.token().unwrap();
    let s3 = Seaweed::start();
    let work = tempfile::tempdir().unwrap();
    let bucket = s3.config("bucket", "drill/");
    let cfg = format!(
        "{bucket}  - name: cache\n    type: actions-cache\n    api-url: {}\n    api-token-env: CACHE_API\n  - name: turbo\n    type: build-cache\n    protocol: gradle\n    url: http://127.0.0.1:{}/cache/\n    token-env: BC_TOKEN\n",
        cache.api_url(),
        build.port
    );
    std::fs::write(work.path().join("c.yml"), &cfg).unwrap();
    let fork = json!({
        "repository": { "full_name": REPO },
        "pull_request": { "head": { "repo": { "full_name": "stranger/app" } } },
    });
    let schedule = json!({ "repository": { "full_name": REPO } });
    // One drill: a planting run of drill-plant.yml (as the API records
    // it), its plant with `runtime`, `s3` keys and the build cache's
    // writes `refused`, its receipt uploaded; then the recovering run.
    let drill = |runtime: &str, s3_keys: &seaweed::Keys, refused: bool| {
        let planting = planting_run(&gh, "pull_request_target");
        let id = planting.to_string();
        let mut a = job(
            work.path(),
            &gh,
            &token,
            "pull_request_target",
            fork.clone(),
            &id,
        );
        a.extend(
            [
                ("ACTIONS_RUNTIME_TOKEN", runtime.to_string()),
                ("ACTIONS_RESULTS_URL", cache.results_url()),
                ("CACHE_API", cache_api.clone()),
                ("BC_TOKEN", build_token.clone()),
                ("S3_AK", s3_keys.access.to_string()),
                ("S3_SK", s3_keys.secret.to_string()),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        build.lock().refuse_writes_under = refused.then(|| "/".to_string());
        let receipt = work.path().join(format!("receipt-{id}.json"));
        let p = run(
            work.path(),
            &[
                "plant",
                "--config",
                "c.yml",
                "--drill",
                "release",
                "--receipt",
                receipt.to_str().unwrap(),
            ],
            &env(&a),
        );
        build.lock().refuse_writes_under = None;
        // The upload step: the receipt as the planting run's artifact.
        let bytes = std::fs::read(&receipt).unwrap();
        let zip = runwarden::archive::zip_stored(&[("runwarden-receipt.json", &bytes)]);
        gh.add_artifact(REPO, planting, "runwarden-receipt-release", &zip);
        (p, id)
    };
    let mut b = job(
        work.path(),
        &gh,
        &token,
        "schedule",
        schedule.clone(),
        "900",
    );
    b.extend(
        [
            (
                "ACTIONS_RUNTIME_TOKEN",
                cache.runtime_token(&[("refs/heads/main", 3)]),
            ),
            ("ACTIONS_RESULTS_URL", cache.results_url()),
            ("CACHE_API", cache_api.clone()),
            ("BC_TOKEN", build_token.clone()),
            ("S3_AK", seaweed::WRITER.access.to_string()),
            ("S3_SK", seaweed::WRITER.secret.to_string()),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    );
    // The recipe's workflows run these very commands (its names: the
    // drill, the planting workflow, the receipt's artifact).
    let recipe = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/recipes/poisoning-drill.md"),
    )
    .unwrap();
    for said in [
        "mode: plant\n          drill: release",
        "mode: recover\n          drill: release\n          planted-by: drill-plant.yml",
        "mode: cleanup\n          probe-id: ${{ steps.recover.outputs.probe-id }}",
        "name: runwarden-receipt-release",
        "name: drill-plant\non:\n  pull_request_target:\n    types: [labeled]",
    ] {
        assert!(recipe.contains(said), "the recipe does not say {said:?}");
    }
    let recover = &[
        "recover",
        "--config",
        "c.yml",
        "--drill",
        "release",
        "--planted-by",
        "drill-plant.yml",
    ];
    // The recipe's cleanup: the very plant recover read, by its probe id.
    let cleanup = |id: &str| {
        let probe = format!("drill-release-{id}");
        run(
            work.path(),
            &["cleanup", "--config", "c.yml", "--probe-id", &probe],
            &env(&b),
        )
    };

    // Open: a write token for the base branch's cache (as before GitHub
    // scoped such runs read-only), the writer's keys, a writing token.
    let (p, id) = drill(
        &cache.runtime_token(&[("refs/heads/main", 3)]),
        &seaweed::WRITER,
        false,
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    let r = run(work.path(), recover, &env(&b));
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    for c in [
        "bucket:object-content",
        "cache:cache-key",
        "turbo:entry-content",
    ] {
        assert_eq!(r.verdict(c), "fail", "{c}: {}", r.report);
    }
    let line = "a write by a pull_request_target run from a fork reached a schedule run on main: poisoning";
    assert_eq!(
        r.report["trust"]["poisoning"], line,
        "{}",
        r.report["trust"]
    );
    assert!(
        unwrapped(&r.stdout).starts_with(&format!("POISONING: {line}")),
        "{}",
        r.stdout
    );
    assert_eq!(r.report["probe_id"], format!("drill-release-{id}"));
    let via = r.report["cross_job"]["receipt_via"].as_str().unwrap();
    assert!(
        via.starts_with(&format!("artifact runwarden-receipt-release of run {id}")),
        "{via}"
    );
    // A token that may not delete the receipt artifact: cleanup removes
    // nothing (else a later recover would read this plant again, cleaned).
    let reader = gh.token(&[("contents", "read"), ("actions", "read")]);
    let mut weak = b.clone();
    weak.retain(|(k, _)| k != "GITHUB_TOKEN");
    weak.push(("GITHUB_TOKEN".into(), reader));
    let probe = format!("drill-release-{id}");
    let c = run(
        work.path(),
        &["cleanup", "--config", "c.yml", "--probe-id", &probe],
        &env(&weak),
    );
    assert_eq!(c.code, 2, "{}\n{}", c.stdout, c.stderr);
    assert!(c.stderr.contains("removes nothing"), "{}", c.stderr);
    assert!(!cache.entries().is_empty() && !build.is_empty());
    let c = cleanup(&id);
    assert_eq!(c.code, 0, "{}\n{}", c.stdout, c.stderr);
    assert!(cache.entries().is_empty() && build.is_empty());
    // The plant is cleaned up and its receipt artifact deleted: recovering
    // it again (a nightly run with no new drill) finds nothing to recover,
    // never a store that reads as closed.
    assert!(
        !gh.artifacts().iter().any(|a| a.run_id.to_string() == id),
        "the receipt artifact stays: {}",
        c.stderr
    );
    let again = run(work.path(), recover, &env(&b));
    assert_eq!(again.code, 2, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stderr.contains("nothing to recover"),
        "{}",
        again.stderr
    );

    // Closed: GitHub's read-only cache token for such runs, the reader's
    // keys, a build cache that refuses the writes.
    let (p, closed) = drill(
        &cache.runtime_token(&[("refs/heads/main", 1)]),
        &seaweed::READER,
        true,
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    // A fork's pull request that made drill-plant.yml run on
    // pull_request (its own copy), with a receipt of its own making: a
    // newer completed run of the workflow, passed over.
    let fork_run = planting_run(&gh, "pull_request");
    let junk = runwarden::archive::zip_stored(&[("runwarden-receipt.json", b"{}")]);
    gh.add_artifact(REPO, fork_run, "runwarden-receipt-release", &junk);
    let r = run(work.path(), recover, &env(&b));
    assert_eq!(r.report["probe_id"], format!("drill-release-{closed}"));
    for c in [
        "bucket:object-content",
        "cache:cache-key",
        "turbo:entry-content",
    ] {
        assert_eq!(r.verdict(c), "pass", "{c}: {}", r.report);
    }
    assert!(
        r.report["trust"].get("poisoning").is_none(),
        "{}",
        r.report["trust"]
    );
    assert_eq!(r.report["trust"]["a"]["class"], "untrusted");
    assert_eq!(r.report["trust"]["b"]["class"], "trusted");
    let _ = cleanup(&closed);

    // A receipt altered on its way (the artifact is the untrusted run's
    // upload): refused whole, by the key.
    let (_, id) = drill(
        &cache.runtime_token(&[("refs/heads/main", 3)]),
        &seaweed::WRITER,
        false,
    );
    let art = gh
        .artifacts()
        .into_iter()
        .find(|a| a.run_id.to_string() == id)
        .unwrap();
    let mut receipt: serde_json::Value = serde_json::from_slice(
        &runwarden::archive::unzip(art.data.as_ref().unwrap(), 1 << 20, &|_| true).unwrap()[0].1,
    )
    .unwrap();
    receipt["surfaces"][0]["plants"] = json!([]);
    let forged = serde_json::to_vec(&receipt).unwrap();
    let zip = runwarden::archive::zip_stored(&[("runwarden-receipt.json", &forged)]);
    gh.add_artifact(REPO, id.parse().unwrap(), "runwarden-receipt-release", &zip);
    let r = run(work.path(), recover, &env(&b));
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("MAC") || r.stderr.contains("signature"),
        "{}",
        r.stderr
    );
    let _ = cleanup(&id);
}

/// A drill's receipt is an untrusted run's upload: without a key anyone
/// who knows the probe id could forge it, so it is not read at all.
#[test]
fn a_drill_without_a_key_reads_no_receipt() {
    let gh = GitHubServer::start().unwrap();
    let token = gh.token(&[("contents", "read"), ("actions", "read")]);
    planting_run(&gh, "pull_request_target");
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(work.path().join("c.yml"), fs_config("shared", &shared, "")).unwrap();
    let b = job(work.path(), &gh, &token, "schedule", json!({}), "5");
    let unkeyed: Vec<(&str, &str)> = env(&b)
        .into_iter()
        .filter(|(k, _)| *k != "RUNWARDEN_KEY")
        .collect();
    let r = run(
        work.path(),
        &[
            "recover",
            "--config",
            "c.yml",
            "--drill",
            "release",
            "--planted-by",
            "drill-plant.yml",
        ],
        &unkeyed,
    );
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("RUNWARDEN_KEY"), "{}", r.stderr);
}
