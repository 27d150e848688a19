//! SARIF (src/output/sarif.rs) as GitHub code scanning takes it: valid
//! against the official SARIF 2.1.0 schema, and meeting each field GitHub
//! requires. These simulate a runner (GITHUB_* set on purpose).

use crate::common::markdown;
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The official schema, from the npm package `@microsoft/jest-sarif`.
fn schema() -> PathBuf {
    // Once per test binary: the tests run in parallel threads.
    static SCHEMA: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            npm_file(
                "@microsoft/jest-sarif",
                "1.0.0-beta.0",
                "lib/schemas/sarif-2.1.0-rtm.5.json",
            )
        })
        .clone()
}

fn assert_schema_valid(sarif: &Path) {
    if let Some(e) = schema_errors(&schema(), sarif) {
        panic!("SARIF invalid against the 2.1.0 schema:\n{e}");
    }
}

/// A repository checkout with a config at .github/runwarden.yml.
struct Repo {
    root: tempfile::TempDir,
}

impl Repo {
    fn new(config: &str) -> Repo {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(".github/workflows")).unwrap();
        std::fs::write(root.path().join(".github/runwarden.yml"), config).unwrap();
        std::fs::write(
            root.path().join(".github/workflows/ci.yml"),
            "on: push\njobs:\n  probe:\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: runwarden/action@v1\n",
        )
        .unwrap();
        std::fs::write(root.path().join("README.md"), "# project\n").unwrap();
        Repo { root }
    }

    fn probe(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
        let out = bin()
            .current_dir(self.root.path())
            .env("GITHUB_WORKSPACE", self.root.path())
            .env("GITHUB_RUN_ID", "123")
            .env("GITHUB_RUN_ATTEMPT", "2")
            .envs(env.iter().copied())
            .args(["probe", "--sarif", "out.sarif"])
            .args(args)
            .output()
            .unwrap();
        let path = self.root.path().join("out.sarif");
        assert_schema_valid(&path);
        let v = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        (
            out.status.code().unwrap(),
            v,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

#[test]
fn sarif_meets_every_github_requirement() {
    let shared = tempfile::tempdir().unwrap();
    let cfg = fs_config(
        "shared-tmp",
        shared.path(),
        "declared:\n  - shared-tmp:xattr\n",
    );
    let repo = Repo::new(&cfg);
    let (code, s, err) = repo.probe(&["--config", ".github/runwarden.yml"], &[]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(s["version"], "2.1.0");
    assert!(s["$schema"].as_str().unwrap().contains("sarif"));
    let run = &s["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "runwarden");
    assert_eq!(run["automationDetails"]["id"], "runwarden/123-2");
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    assert_eq!(run["invocations"][0]["executionSuccessful"], true);

    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), ALL_CARRIERS.len() + 1);
    for (r, c) in rules
        .iter()
        .zip(ALL_CARRIERS.iter().chain(&["runner-persistence"]))
    {
        assert_eq!(r["id"], format!("runwarden/filesystem/{c}"));
        assert!(!r["shortDescription"]["text"].as_str().unwrap().is_empty());
        assert!(
            r["fullDescription"]["text"]
                .as_str()
                .unwrap()
                .chars()
                .count()
                <= 1024
        );
        assert!(r["help"]["text"].as_str().unwrap().contains("declared:"));
        assert!(
            r["help"]["markdown"]
                .as_str()
                .unwrap()
                .contains("declared:")
        );
        assert_eq!(r["defaultConfiguration"]["level"], "error");
        let tags: Vec<&str> = r["properties"]["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        assert!(tags.contains(&"security"));
        assert!(r["properties"]["precision"].is_string());
        let sev: f64 = r["properties"]["security-severity"]
            .as_str()
            .expect("a string")
            .parse()
            .unwrap();
        assert!((0.1..=10.0).contains(&sev));
        assert!(
            r["helpUri"]
                .as_str()
                .unwrap()
                .ends_with(&format!("docs/surfaces/filesystem.md#{c}"))
        );
    }

    let results = run["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        9,
        "8 FAIL + 1 AUTHORIZED; PASS and SKIPPED are not results"
    );
    let hashes = runwarden::output::sarif::line_hashes(&cfg);
    for r in results {
        let rule = &rules[r["ruleIndex"].as_u64().unwrap() as usize];
        assert_eq!(rule["id"], r["ruleId"]);
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], ".github/runwarden.yml");
        assert_eq!(loc["region"]["startLine"], 3);
        assert_eq!(loc["region"]["startColumn"], 5);
        assert_eq!(
            r["partialFingerprints"]["primaryLocationLineHash"],
            hashes[&3].as_str()
        );
        assert!(!r["message"]["text"].as_str().unwrap().is_empty());
        if r["ruleId"] == "runwarden/filesystem/xattr" {
            assert_eq!(r["level"], "note");
            assert_eq!(r["suppressions"][0]["kind"], "external");
            assert_eq!(
                r["suppressions"][0]["justification"],
                "declared in .github/runwarden.yml:7"
            );
        } else {
            assert_eq!(r["level"], "error");
            assert!(r.get("suppressions").is_none());
        }
    }
}

#[test]
fn errors_are_warnings_and_execution_is_unsuccessful() {
    let cfg = fs_config("gone", Path::new("/nonexistent/runwarden-test"), "");
    let repo = Repo::new(&cfg);
    let (code, s, _) = repo.probe(&["--config", ".github/runwarden.yml"], &[]);
    assert_eq!(code, 1);
    let run = &s["runs"][0];
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 10);
    assert!(results.iter().all(|r| r["level"] == "warning"));
}

#[test]
fn the_discovered_config_points_at_the_workflow_or_a_real_file() {
    let repo = Repo::new("unused: true\n");
    std::fs::remove_file(repo.root.path().join(".github/runwarden.yml")).unwrap();
    let tmp = repo.root.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let tmp_s = tmp.to_string_lossy().into_owned();
    // A fixture home: discovery must never probe this machine's.
    let home = repo.root.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let home_s = home.to_string_lossy().into_owned();
    let workflow = [
        ("TMPDIR", tmp_s.as_str()),
        ("HOME", home_s.as_str()),
        (
            "GITHUB_WORKFLOW_REF",
            "o/r/.github/workflows/ci.yml@refs/heads/main",
        ),
    ];
    let (_, s, err) = repo.probe(&[], &workflow);
    assert!(err.contains("using the discovered config"), "{err}");
    for r in s["runs"][0]["results"].as_array().unwrap() {
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], ".github/workflows/ci.yml");
        assert_eq!(
            loc["region"]["startLine"], 6,
            "the step that runs runwarden"
        );
    }
    let (_, s, _) = repo.probe(&[], &[("TMPDIR", tmp_s.as_str())]);
    let uris: Vec<&Value> = s["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        .collect();
    assert!(
        !uris.is_empty() && uris.iter().all(|u| *u == "README.md"),
        "{uris:?}"
    );
}

#[test]
fn an_unwritable_sarif_path_is_exit_2_before_any_work() {
    let shared = tempfile::tempdir().unwrap();
    let cfg = shared.path().join("rw.yml");
    std::fs::write(&cfg, fs_config("s", &shared.path().join("d"), "")).unwrap();
    std::fs::create_dir(shared.path().join("d")).unwrap();
    let out = bin()
        .args(["probe", "--sarif", "/nonexistent-dir/x.sarif", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        std::fs::read_dir(shared.path().join("d"))
            .unwrap()
            .next()
            .is_none()
    );
}

/// Outside a repository (no workflow file, no README), with a discovered
/// config: every FAIL, ERROR and AUTHORIZED is a result, at the stable
/// pseudo-location, never at a file runwarden itself is writing.
#[test]
fn outside_a_repository_no_finding_is_dropped_and_none_points_at_a_temp_file() {
    let root = tempfile::tempdir().unwrap();
    let tmp = root.path().join("tmp");
    let home = root.path().join("home");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::create_dir(&home).unwrap();
    let out = bin()
        .current_dir(root.path())
        .env_remove("GITHUB_WORKSPACE")
        .env_remove("GITHUB_WORKFLOW_REF")
        .env("TMPDIR", &tmp)
        .env("HOME", &home)
        .args(["probe", "--sarif", "out.sarif", "--report", "r.json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sarif_path = root.path().join("out.sarif");
    assert_schema_valid(&sarif_path);
    let s: Value = serde_json::from_str(&std::fs::read_to_string(sarif_path).unwrap()).unwrap();
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join("r.json")).unwrap())
            .unwrap();
    let shown = ["fail", "error", "authorized"]
        .iter()
        .map(|k| r["summary"][k].as_u64().unwrap())
        .sum::<u64>();
    let results = s["runs"][0]["results"].as_array().unwrap();
    assert!(shown > 0);
    assert_eq!(results.len() as u64, shown, "a finding was dropped");
    for res in results {
        let loc = &res["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], ".github/runwarden.yml");
        assert_eq!(loc["region"]["startLine"], 1);
    }
}

/// Past the 5,000 results code scanning keeps per run, the SARIF keeps what fails
/// the run first, and says how many it left out.
#[test]
fn past_the_results_limit_fails_are_kept_and_the_cut_is_counted() {
    use runwarden::verdict::Verdict;
    let mut findings = vec![];
    for i in 0..5_002 {
        let v = if i < 3 {
            Verdict::Authorized
        } else {
            Verdict::Fail
        };
        findings.push(finding(&format!("c{i}"), v, "d"));
    }
    findings.push(finding("last", Verdict::Error, "d"));
    let report = report_of(findings);
    let dir = tempfile::tempdir().unwrap();
    let ctx = runwarden::output::sarif::Context {
        root: dir.path().into(),
        cwd: dir.path().into(),
        automation_id: "runwarden/1".into(),
        workflow: None,
    };
    let s: Value = serde_json::from_str(&runwarden::output::sarif::render(&report, &ctx)).unwrap();
    let results = s["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), runwarden::output::sarif::MAX_RESULTS);
    assert_eq!(runwarden::output::sarif::left_out(&report), 3);
    assert!(
        results.iter().all(|r| r["level"] != "note"),
        "AUTHORIZED goes first"
    );
    assert!(
        results.iter().any(|r| r["level"] == "warning"),
        "ERROR is kept"
    );
}

/// A declaration's `reason:` reaches the report, the SARIF suppression,
/// the table and the job summary, inert where it is Markdown.
#[test]
fn the_declaration_reason_reaches_every_output() {
    let shared = tempfile::tempdir().unwrap();
    let reason = "agents share xattrs, ask @acme/team (see #12)";
    let cfg = fs_config(
        "shared-tmp",
        shared.path(),
        &format!("declared:\n  - channel: shared-tmp:xattr\n    reason: \"{reason}\"\n"),
    );
    let repo = Repo::new(&cfg);
    let summary = repo.root.path().join("summary.md");
    let summary_s = summary.to_string_lossy().into_owned();
    let (_, s, err) = repo.probe(
        &[
            "--config",
            ".github/runwarden.yml",
            "--report",
            "r.json",
            "--format",
            "github",
        ],
        &[("GITHUB_STEP_SUMMARY", summary_s.as_str())],
    );
    let r: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.root.path().join("r.json")).unwrap())
            .unwrap();
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["channel"] == "shared-tmp:xattr")
        .unwrap();
    assert_eq!(f["verdict"], "authorized", "{err}");
    assert_eq!(f["declared_reason"], reason);
    let res = s["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "runwarden/filesystem/xattr")
        .unwrap();
    assert_eq!(
        res["suppressions"][0]["justification"],
        format!("declared in .github/runwarden.yml:7: {reason}")
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.contains("agents share xattrs"), "{md}");
    markdown::assert_inert(&md);
}

/// A credential written into a reason (the config is in the work tree, which
/// an earlier step can edit) reaches no output: the report and the SARIF
/// hold it redacted.
#[test]
fn a_credential_written_into_a_reason_is_redacted() {
    let shared = tempfile::tempdir().unwrap();
    let cfg = fs_config(
        "shared-tmp",
        shared.path(),
        "declared:\n  - channel: shared-tmp:xattr\n    reason: \"see rw-secret-value-8472\"\n",
    );
    let repo = Repo::new(&cfg);
    let secret = "rw-secret-value-8472";
    let (_, s, err) = repo.probe(
        &["--config", ".github/runwarden.yml", "--report", "r.json"],
        &[("RW_TEST_TOKEN", secret)],
    );
    let report = std::fs::read_to_string(repo.root.path().join("r.json")).unwrap();
    assert!(report.contains("\"declared_reason\""), "{err}");
    assert!(!report.contains(secret), "the report holds the credential");
    assert!(
        !s.to_string().contains(secret),
        "the SARIF holds the credential"
    );
    assert!(!err.contains(secret));
}
