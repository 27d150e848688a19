//! Coverage (src/coverage/): the exposures each of three environments
//! has, and exactly which of them a run left untested: a GitHub-hosted
//! runner with a permissive token, one with the restricted token, and a
//! self-hosted runner with a Docker socket. The job's permissions come
//! from the workflow file at `GITHUB_WORKFLOW_SHA`, read from the loopback
//! GitHub; `--require-coverage` fails on a gap and passes once each gap is
//! declared.

use crate::common::*;
use runwarden::coverage::permissions::levels_of;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use serde_json::{Value, json};
use std::path::Path;

const REPO: &str = "octo/repo";
const SHA: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";
const WORKFLOW_SHA: &str = "f00dfeed00000000000000000000000000000001";

/// The loopback GitHub with the commit and the workflow file `text` at
/// `WORKFLOW_SHA`.
fn server(workflow: &str) -> GitHubServer {
    let svc = GitHubServer::start().unwrap();
    svc.add("commit", REPO, json!({ "sha": SHA }));
    svc.add(
        "file",
        REPO,
        json!({ "path": ".github/workflows/ci.yml", "ref": WORKFLOW_SHA, "text": workflow }),
    );
    svc
}

/// A probe as the job `probe` of `ci.yml` on a runner of `kind`, with
/// `HOME` an empty directory and `TMPDIR` the test's.
fn run(
    dir: &Path,
    svc: &GitHubServer,
    token: &str,
    kind: &str,
    config: &str,
    extra: &[(&str, &str)],
    args: &[&str],
) -> Probe {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let home = home.to_string_lossy().into_owned();
    let api = svc.api_url();
    let mut env: Vec<(&str, &str)> = vec![
        ("GITHUB_ACTIONS", "true"),
        ("RUNNER_ENVIRONMENT", kind),
        ("GITHUB_API_URL", &api),
        ("GITHUB_REPOSITORY", REPO),
        ("GITHUB_REPOSITORY_OWNER", "octo"),
        ("GITHUB_SHA", SHA),
        (
            "GITHUB_WORKFLOW_REF",
            "octo/repo/.github/workflows/ci.yml@refs/heads/main",
        ),
        ("GITHUB_WORKFLOW_SHA", WORKFLOW_SHA),
        ("GITHUB_JOB", "probe"),
        ("GITHUB_TOKEN", token),
        ("HOME", &home),
        ("DOCKER_HOST", "unix:///nonexistent/docker.sock"),
    ];
    // The config as committed at the workflow's commit: what runwarden
    // reads in Actions.
    svc.add(
        "file",
        REPO,
        json!({ "path": "runwarden.yml", "ref": WORKFLOW_SHA, "text": config }),
    );
    let workspace = dir.to_string_lossy().into_owned();
    env.push(("GITHUB_WORKSPACE", &workspace));
    env.extend_from_slice(extra);
    let mut all = vec!["probe"];
    all.extend_from_slice(args);
    run_config(dir, config, &env, &all)
}

/// The config: the repository's objects (issue 42), `/dev/shm`
/// declared, and `extra`; the test's HOME and TMPDIR as filesystem
/// surfaces with `fs` (they are open: the run fails), else declared.
fn config(dir: &Path, fs: bool, extra: &str) -> String {
    let (home, tmp) = (dir.join("home"), dir.to_path_buf());
    let (home, tmp) = (home.to_string_lossy(), tmp.to_string_lossy());
    let mut c = "version: 1\nsurfaces:\n  - name: github\n    type: github-api\n    issue: 42\n"
        .to_string();
    if fs {
        c += &format!(
            "  - name: home\n    type: filesystem\n    path: {home:?}\n  - name: temp\n    type: filesystem\n    path: {tmp:?}\n"
        );
    }
    c += "declared:\n  - exposure: path:/dev/shm\n    reason: shared memory of this test machine\n";
    // The machine's own (see `machines`), whether it has them or not.
    c += &format!(
        "  - exposure: {:?}\n    reason: this test machine's\n  - exposure: docker-socket:unix:///var/run/docker.sock\n    reason: this test machine's\n  - exposure: path:/tmp\n    reason: this test machine's\n",
        format!("path:{}", passwd_home())
    );
    if !fs {
        c += &format!(
            "  - exposure: {:?}\n    reason: the test's own\n  - exposure: {:?}\n    reason: the test's own\n",
            format!("path:{home}"),
            format!("path:{tmp}")
        );
    }
    c + extra
}

/// Whether an exposure is this machine's, not the test's: the default
/// Docker socket (discovery looks there whatever DOCKER_HOST says) and
/// this user's home in /etc/passwd (whatever HOME says).
fn machines(id: &str) -> bool {
    id == "docker-socket:unix:///var/run/docker.sock"
        || id == "path:/tmp"
        || id == format!("path:{}", passwd_home())
}

/// This user's home in /etc/passwd (`/nonexistent` without one).
fn passwd_home() -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let uid = unsafe { libc::geteuid() }.to_string();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 7 && f[2] == uid).then(|| f[5].to_string())
        })
        .unwrap_or_else(|| "/nonexistent".into())
}

/// The ids of the exposures with `status` (but the machine's own).
fn with_status(p: &Probe, status: &str) -> Vec<String> {
    let mut v: Vec<String> = p.report["coverage"]["exposures"]
        .as_array()
        .unwrap_or_else(|| panic!("no coverage: {}", p.stderr))
        .iter()
        .filter(|e| e["status"] == status && !machines(e["id"].as_str().unwrap_or("")))
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn exposure<'a>(p: &'a Probe, id: &str) -> &'a Value {
    p.report["coverage"]["exposures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("no exposure {id}: {}", p.report["coverage"]))
}

#[test]
fn a_hosted_runner_with_a_permissive_token_lists_exactly_what_no_channel_tested() {
    let svc = server(
        "on: push\npermissions: write-all\njobs:\n  probe:\n    runs-on: ubuntu-latest\n    steps: []\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let token = svc.token(WRITE_ALL);
    let p = run(
        dir.path(),
        &svc,
        &token,
        "github-hosted",
        &config(dir.path(), true, ""),
        &[],
        &[],
    );
    assert_eq!(p.verdict("github:label-name"), "fail", "{}", p.stderr);
    let c = &p.report["coverage"];
    assert_eq!(c["runner"], "github-hosted");
    assert!(
        c["permissions_source"]
            .as_str()
            .unwrap()
            .contains("the workflow's permissions of job \"probe\""),
        "{c}"
    );
    assert_eq!(
        with_status(&p, "not-tested"),
        [
            "actions-artifacts",
            "actions-cache",
            "permission:actions",
            "permission:attestations",
            "permission:checks",
            "permission:packages",
            "permission:pages",
            "permission:repository-projects",
            "permission:security-events",
            "permission:statuses",
            "run-traces",
        ],
        "{c}"
    );
    assert_eq!(
        with_status(&p, "tested"),
        [
            format!("path:{}", dir.path().to_string_lossy()).as_str(),
            format!("path:{}/home", dir.path().to_string_lossy()).as_str(),
            "permission:contents",
            "permission:deployments",
            "permission:discussions",
            "permission:issues",
            "permission:pull-requests",
        ]
    );
    assert_eq!(with_status(&p, "declared"), ["path:/dev/shm"]);
    assert_eq!(c["gaps"], 11);
    // No runner persistence on a fresh VM.
    assert!(
        c["exposures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["id"] != "runner-persistence")
    );
    // Each gap says why, and the one a stanza would test carries it.
    let checks = exposure(&p, "permission:checks");
    assert!(
        checks["reason"]
            .as_str()
            .unwrap()
            .contains("github:check-run was skipped"),
        "{checks}"
    );
    assert!(
        checks["stanza"]
            .as_str()
            .unwrap()
            .contains("permanent: true")
    );
    let pages = exposure(&p, "permission:pages");
    assert!(pages["reason"].as_str().unwrap().contains("Pages enabled"));
    assert!(pages["stanza"].is_null());
    let sec = exposure(&p, "permission:security-events");
    assert!(
        sec["stanza"]
            .as_str()
            .unwrap()
            .contains("code-scanning: true")
    );
    let pk = exposure(&p, "permission:packages");
    assert!(
        pk["stanza"]
            .as_str()
            .unwrap()
            .contains("repository: octo\n")
    );
    // The outputs lead with the gaps: a clean run is never a plain green.
    assert!(crate::common::unwrapped(&p.stdout).contains("coverage (github-hosted runner): 11 exposures not tested: actions, attestations, checks, packages, pages, …"), "{}", p.stdout);
    // The workflow file was read at the workflow's commit, with the job's token.
    let log = svc.requests();
    assert!(
        log.iter().any(|(m, u)| m == "GET"
            && u.contains(&format!(
                "/contents/.github/workflows/ci.yml?ref={WORKFLOW_SHA}"
            ))),
        "{log:?}"
    );
}

#[test]
fn a_restricted_token_exposes_only_the_run_traces_and_require_coverage_fails_on_that_gap() {
    let svc = server(
        "on: push\npermissions:\n  contents: read\njobs:\n  probe:\n    runs-on: ubuntu-latest\n    steps: []\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let token = svc.token(CONTENTS_READ);
    let p = run(
        dir.path(),
        &svc,
        &token,
        "github-hosted",
        &config(dir.path(), false, ""),
        &[],
        &["--require-coverage"],
    );
    assert_eq!(p.verdict("github:label-name"), "pass", "{}", p.stderr);
    assert_eq!(
        with_status(&p, "not-tested"),
        ["actions-artifacts", "actions-cache", "run-traces"],
        "{}",
        p.report["coverage"]
    );
    let levels = p.report["coverage"]["permissions"].as_array().unwrap();
    let of = |k: &str| levels.iter().find(|l| l["key"] == k).unwrap()["level"].clone();
    assert_eq!(of("contents"), "read");
    assert_eq!(of("issues"), "none");
    assert_eq!(p.report["coverage"]["required"], true);
    // Every channel is closed, but a gap is a failure with the flag.
    assert_eq!(p.code, 1, "{}", p.stdout);
    // Declared, the gap is no gap.
    let declared = config(
        dir.path(),
        false,
        "  - exposure: run-traces\n    reason: tested by the cross-job workflow\n  - exposure: actions-cache\n    reason: no cache in this workflow\n  - exposure: actions-artifacts\n    reason: no artifacts in this workflow\n",
    );
    let p = run(
        dir.path(),
        &svc,
        &token,
        "github-hosted",
        &declared,
        &[],
        &["--require-coverage"],
    );
    assert_eq!(p.code, 0, "{}", p.stdout);
    assert_eq!(
        with_status(&p, "declared").len(),
        6,
        "{}",
        p.report["coverage"]
    );
}

#[test]
fn a_self_hosted_runner_with_a_docker_socket_shows_the_socket_and_persistence_untested() {
    // No permissions: in the workflow: every key is unknown, never guessed.
    let svc = server("on: push\njobs:\n  probe:\n    runs-on: self-hosted\n    steps: []\n");
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let host = format!("unix://{}", sock.to_string_lossy());
    let token = svc.token(WRITE_ALL);
    let p = run(
        dir.path(),
        &svc,
        &token,
        "self-hosted",
        &config(dir.path(), false, ""),
        &[("DOCKER_HOST", &host)],
        &[],
    );
    let c = &p.report["coverage"];
    assert_eq!(c["runner"], "self-hosted");
    assert!(
        c["permissions_source"]
            .as_str()
            .unwrap()
            .contains("neither the job nor the workflow sets"),
        "{c}"
    );
    let socket = exposure(&p, &format!("docker-socket:{host}"));
    assert_eq!(socket["status"], "not-tested");
    assert!(
        socket["stanza"]
            .as_str()
            .unwrap()
            .contains("type: docker-daemon"),
        "{socket}"
    );
    // A persistent runner: untested here (no surface reads beacons).
    let persist = exposure(&p, "runner-persistence");
    assert_eq!(persist["status"], "not-tested");
    assert!(
        persist["reason"]
            .as_str()
            .unwrap()
            .contains("plant --beacon"),
        "{persist}"
    );
    // Unknown levels are exposures; a write GitHub accepted shows the level.
    let levels = c["permissions"].as_array().unwrap();
    let of = |k: &str| levels.iter().find(|l| l["key"] == k).unwrap().clone();
    assert_eq!(of("deployments")["level"], "write", "{c}");
    assert_eq!(of("deployments")["from"], "api");
    assert_eq!(of("packages")["level"], "unknown");
    assert_eq!(exposure(&p, "permission:packages")["status"], "not-tested");
}

#[test]
fn the_job_level_wins_and_a_fork_pull_request_makes_write_unknown() {
    let wf = "permissions: write-all\njobs:\n  a:\n    permissions:\n      issues: write\n      contents: read\n  b: {}\n";
    let a = levels_of(wf, "a", false).unwrap();
    let of = |k: &runwarden::coverage::permissions::Known, key: &str| {
        k.levels.iter().find(|(x, _)| *x == key).unwrap().1
    };
    assert_eq!(
        (of(&a, "issues"), of(&a, "contents"), of(&a, "packages")),
        ("write", "read", "none")
    );
    let b = levels_of(wf, "b", false).unwrap();
    assert_eq!(of(&b, "packages"), "write");
    let fork = levels_of(wf, "b", true).unwrap();
    assert_eq!(of(&fork, "packages"), "unknown");
    assert!(levels_of(wf, "c", false).unwrap_err().contains("no job"));
    assert!(
        levels_of("jobs:\n  a: {}\n", "a", false)
            .unwrap_err()
            .contains("neither")
    );
    assert!(levels_of("permissions: 3\njobs:\n  a: {}\n", "a", false).is_err());
}

#[test]
fn a_gap_names_no_environment_text_in_the_headline_and_every_exposure_is_escaped() {
    let svc = server("on: push\npermissions:\n  contents: read\njobs:\n  probe: {}\n");
    let dir = tempfile::tempdir().unwrap();
    // A registry origin and a home of the environment's choosing.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let npmrc = home.join(".npmrc");
    std::fs::write(&npmrc, "registry=https://evil.example/@everyone\n").unwrap();
    let token = svc.token(CONTENTS_READ);
    let p = run(
        dir.path(),
        &svc,
        &token,
        "github-hosted",
        &config(dir.path(), false, ""),
        &[],
        &["--format", "github"],
    );
    let reg = exposure(&p, "registry:https://evil.example");
    assert_eq!(reg["status"], "not-tested");
    let title =
        runwarden::output::review::headline(&serde_json::from_value(p.report.clone()).unwrap());
    // (How many are declared depends on this machine: see `machines`.
    // `discussion` is SKIPPED with this token: its categories are
    // refused, and with them the write's chance.)
    assert!(
        title.starts_with("green, but 4 exposures not tested: run-traces, actions-cache, actions-artifacts, a registry, ")
            && title.ends_with(" declared untested (7 channels tested, none open undeclared)"),
        "{title}"
    );
    // The registry's URL path is not published: only its origin.
    assert_eq!(
        reg["stanza"].as_str().unwrap().matches("@everyone").count(),
        0,
        "{reg}"
    );
    let summary = runwarden::output::github::summary(
        &serde_json::from_value(p.report.clone()).unwrap(),
        None,
    );
    assert!(!summary.contains("@everyone"), "{summary}");
    markdown::assert_inert(&summary);
}

#[test]
fn a_recover_takes_the_plant_jobs_permissions_from_a_signed_receipt_only() {
    // The plant job writes; the recovering job may only read.
    let wf = "on: push\njobs:\n  probe:\n    permissions:\n      issues: write\n      contents: read\n  reader:\n    permissions:\n      contents: read\n";
    let svc = server(wf);
    let dir = tempfile::tempdir().unwrap();
    let token = svc.token(WRITE_ALL);
    let cfg = config(dir.path(), false, "");
    svc.add(
        "file",
        REPO,
        json!({ "path": "runwarden.yml", "ref": WORKFLOW_SHA, "text": cfg }),
    );
    let key = [("RUNWARDEN_KEY", "0123456789abcdef0123456789abcdef")];
    let workspace = dir.path().to_string_lossy().into_owned();
    let go = |cmd: &str, job: &str, extra: &[(&str, &str)]| {
        let home = dir.path().join("home").to_string_lossy().into_owned();
        let api = svc.api_url();
        let mut env: Vec<(&str, &str)> = vec![
            ("GITHUB_ACTIONS", "true"),
            ("RUNNER_ENVIRONMENT", "github-hosted"),
            ("GITHUB_API_URL", &api),
            ("GITHUB_REPOSITORY", REPO),
            ("GITHUB_SHA", SHA),
            (
                "GITHUB_WORKFLOW_REF",
                "octo/repo/.github/workflows/ci.yml@refs/heads/main",
            ),
            ("GITHUB_WORKFLOW_SHA", WORKFLOW_SHA),
            ("GITHUB_JOB", job),
            ("GITHUB_TOKEN", &token),
            ("HOME", &home),
            ("DOCKER_HOST", "unix:///nonexistent/docker.sock"),
            ("GITHUB_WORKSPACE", &workspace),
        ];
        env.extend_from_slice(extra);
        run_config(dir.path(), &cfg, &env, &[cmd, "--probe-id", "cov-1"])
    };
    let planted = go("plant", "probe", &key);
    assert_eq!(planted.code, 0, "{}", planted.stderr);
    let receipt: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("runwarden-receipt-cov-1.json")).unwrap(),
    )
    .unwrap();
    assert!(
        receipt["permissions"]
            .to_string()
            .contains(r#"{"from":"workflow","key":"issues","level":"write"}"#),
        "{receipt}"
    );
    let r = go("recover", "reader", &key);
    let c = &r.report["coverage"];
    assert!(
        c["permissions_source"]
            .as_str()
            .unwrap()
            .starts_with("the plant job's, from its receipt"),
        "{c}"
    );
    assert!(
        with_status(&r, "tested").contains(&"permission:issues".to_string()),
        "{c}"
    );
    // Unsigned, the receipt's word is nobody's: every key unknown.
    let unsigned = go("plant", "probe", &[]);
    assert_eq!(unsigned.code, 0, "{}", unsigned.stderr);
    let r = go("recover", "reader", &[]);
    assert!(r.report.is_object(), "{}", r.stderr);
    let c = &r.report["coverage"];
    assert!(
        c["permissions_source"]
            .as_str()
            .unwrap()
            .contains("not signed with a configured key"),
        "{c}"
    );
    // (But what GitHub's answers showed: run B read what the plant wrote
    // with the job's token, so that key was write.)
    let levels = c["permissions"].as_array().unwrap();
    assert!(
        levels
            .iter()
            .all(|l| l["level"] == "unknown" || l["from"] == "api"),
        "{c}"
    );
    assert!(
        levels
            .iter()
            .any(|l| l["key"] == "packages" && l["level"] == "unknown"),
        "{c}"
    );
}

#[test]
fn a_channel_tests_a_permission_only_with_the_jobs_own_token_on_its_own_repository() {
    let svc = server("on: push\npermissions: write-all\njobs:\n  probe: {}\n");
    let dir = tempfile::tempdir().unwrap();
    let token = svc.token(WRITE_ALL);
    // Another token (a PAT the config names): the carriers run, open, but
    // say nothing of what this job's GITHUB_TOKEN may do.
    let cfg = config(dir.path(), false, "").replace(
        "    issue: 42\n",
        "    issue: 42\n    token-env: OTHER_TOKEN\n    read-token-env: OTHER_TOKEN\n",
    );
    let p = run(
        dir.path(),
        &svc,
        &token,
        "github-hosted",
        &cfg,
        &[("OTHER_TOKEN", &token)],
        &[],
    );
    assert_eq!(p.verdict("github:label-name"), "fail", "{}", p.stderr);
    let tested = with_status(&p, "tested");
    assert!(
        !tested.iter().any(|t| t.starts_with("permission:")),
        "{tested:?}"
    );
    assert_eq!(exposure(&p, "permission:issues")["status"], "not-tested");
    // A reusable workflow's caller: which job ran cannot be told.
    let wf = "jobs:\n  probe:\n    uses: ./.github/workflows/called.yml\n    permissions:\n      packages: write\n";
    assert!(
        levels_of(wf, "probe", false)
            .unwrap_err()
            .contains("reusable workflow")
    );
}

/// A forgotten secret: an npm registry whose `token-env` is unset. Its
/// carriers stay SKIPPED, saying so (a fork's pull request gets no
/// secrets); `check-config` warns; the registry is a gap that
/// `--require-coverage` fails on; and a run in which nothing ran at all
/// exits 1 saying nothing was tested (0.11.0: valid, exit 0, no gap).
#[test]
fn a_forgotten_secret_is_a_gap_and_a_run_that_tested_nothing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let npm = "  - name: npm\n    type: npm-registry\n    url: https://npm.example.org/\n    token-env: NPM_TOKEN\n";
    let alone = format!("version: 1\nsurfaces:\n{npm}");
    let env = [("NPM_TOKEN", "")];

    let f = dir.path().join("alone.yml");
    std::fs::write(&f, &alone).unwrap();
    let out = bin()
        .arg("check-config")
        .arg(&f)
        .env_remove("NPM_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: surface npm: NPM_TOKEN (named in the config) is unset or empty: every carrier of it will be SKIPPED"),
        "{err}"
    );

    let p = run_config(dir.path(), &alone, &env, &["probe"]);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(p.stderr.contains("nothing was tested"), "{}", p.stderr);
    let verdicts: Vec<&str> = p.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["verdict"].as_str().unwrap())
        .collect();
    assert!(
        !verdicts.is_empty() && verdicts.iter().all(|v| *v == "skipped"),
        "{verdicts:?}"
    );
    let e = exposure(&p, "registry:https://npm.example.org");
    assert_eq!(e["status"], "not-tested", "{e}");
    assert!(e["reason"].as_str().unwrap().contains("NPM_TOKEN"), "{e}");

    // Beside a surface that ran (its channels declared): exit 0, the gap
    // listed, and counted by `--require-coverage`.
    let declared: String = ALL_CARRIERS
        .iter()
        .map(|c| format!("  - shared:{c}\n"))
        .collect();
    let both = format!(
        "version: 1\nsurfaces:\n{npm}  - name: shared\n    type: filesystem\n    path: {}\ndeclared:\n{declared}",
        serde_json::to_string(&shared).unwrap()
    );
    let p = run_config(dir.path(), &both, &env, &["probe"]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert!(!p.stderr.contains("nothing was tested"), "{}", p.stderr);
    assert_eq!(
        exposure(&p, "registry:https://npm.example.org")["status"],
        "not-tested"
    );
    let p = run_config(dir.path(), &both, &env, &["probe", "--require-coverage"]);
    assert_eq!(p.code, 1, "{}", p.stderr);
}
