//! `runwarden publish` (src/publish/) against the loopback GitHub
//! (src/loopback/github/, proven against npm `@octokit/rest` in
//! tests/system/loopback/github_rest.rs): a check run with every finding
//! annotated in batches of 50, the sticky comment created, updated with
//! what changed and left alone when nothing did, the SARIF upload as code
//! scanning takes it (valid against the official schema), and a read-only
//! token that gives notices while the step's exit code stays the probe's.
//! These simulate a runner (GITHUB_* set on purpose).

use crate::common;
use crate::common::hostile::{self, Hostile};
use crate::common::*;
use runwarden::loopback::github::{GitHubServer, Processing, WRITE_ALL};
use runwarden::report::{Finding, Report};
use runwarden::verdict::Verdict;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const REPO: &str = "octo/repo";
/// The pull request's head, where the check run goes.
const HEAD: &str = "1111111111111111111111111111111111111111";
/// The merge commit the workflow checked out (GITHUB_SHA).
const MERGE: &str = "2222222222222222222222222222222222222222";
const PR: u64 = 7;

/// A checkout with a config, a workflow and the event of pull request 7.
struct Checkout {
    root: tempfile::TempDir,
}

impl Checkout {
    fn new() -> Checkout {
        let root = tempfile::tempdir().unwrap();
        let p = root.path();
        std::fs::create_dir_all(p.join(".github/workflows")).unwrap();
        let config = "version: 1\nsurfaces:\n  - name: s\n    type: filesystem\n    path: /tmp\n";
        std::fs::write(p.join(".github/runwarden.yml"), config).unwrap();
        std::fs::write(
            p.join(".github/workflows/ci.yml"),
            "on: pull_request\njobs:\n  probe:\n    runs-on: ubuntu-24.04\n    steps:\n      - uses: runwarden/action@v1\n",
        )
        .unwrap();
        let event = json!({ "pull_request": { "number": PR,
            "head": { "sha": HEAD, "repo": { "full_name": REPO } } } });
        std::fs::write(p.join("event.json"), event.to_string()).unwrap();
        Checkout { root }
    }

    fn path(&self) -> &Path {
        self.root.path()
    }

    /// Writes `report` as the report file.
    fn report(&self, report: &Report) -> std::path::PathBuf {
        let f = self.path().join("runwarden-report.json");
        std::fs::write(&f, serde_json::to_string(report).unwrap()).unwrap();
        f
    }

    /// A runner's environment for this checkout and server.
    fn cmd(&self, svc: &GitHubServer, token: &str) -> Command {
        let mut c = bin();
        c.current_dir(self.path())
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_API_URL", svc.api_url())
            .env("GITHUB_REPOSITORY", REPO)
            .env("GITHUB_SHA", MERGE)
            .env("GITHUB_REF", format!("refs/pull/{PR}/merge"))
            .env("GITHUB_EVENT_NAME", "pull_request")
            .env("GITHUB_EVENT_PATH", self.path().join("event.json"))
            .env("GITHUB_WORKSPACE", self.path())
            .env("GITHUB_SERVER_URL", "https://github.com")
            .env("GITHUB_RUN_ID", "99")
            .env("GITHUB_RUN_ATTEMPT", "1")
            .env(
                "GITHUB_WORKFLOW_REF",
                format!("{REPO}/.github/workflows/ci.yml@refs/pull/{PR}/merge"),
            )
            .env("GITHUB_TOKEN", token);
        c
    }
}

struct Run {
    code: i32,
    out: String,
}

fn run(mut c: Command, token: &str) -> Run {
    let o = c.output().unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // The action masks secrets first (`::add-mask::` is how the runner
    // learns them); nothing else may show the token.
    let shown: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with("::add-mask::"))
        .collect();
    assert!(
        !shown.join("\n").contains(token),
        "the token leaked:\n{out}"
    );
    Run {
        code: o.status.code().unwrap_or(-1),
        out,
    }
}

fn server() -> GitHubServer {
    let svc = GitHubServer::start().unwrap();
    svc.add("commit", REPO, json!({ "sha": HEAD }));
    svc.add("commit", REPO, json!({ "sha": MERGE }));
    svc
}

/// The filesystem carriers, the catalogue's ten.
fn fs_carrier(i: usize) -> &'static str {
    ALL_CARRIERS
        .get(i % 10)
        .copied()
        .unwrap_or("runner-persistence")
}

/// The server, a permissive token and a checkout.
fn fixture() -> (GitHubServer, String, Checkout) {
    let svc = server();
    let token = svc.token(WRITE_ALL);
    (svc, token, Checkout::new())
}

/// A finding of surface `s` declared at line 3 of the config.
fn at_config(carrier: &str, verdict: Verdict, detail: &str) -> Finding {
    let mut f = finding(carrier, verdict, detail);
    f.location = Some(runwarden::plan::Location {
        path: ".github/runwarden.yml".into(),
        line: 3,
        column: 5,
    });
    f
}

fn report(findings: Vec<Finding>) -> Report {
    let mut r = report_of(findings);
    r.config.path = Some(".github/runwarden.yml".into());
    r
}

/// What the real gzip reads back of `gz`.
fn gunzip(gz: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut p = Command::new("gzip")
        .args(["-dc"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(gz).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// Requests to paths containing `part`, as (method, path).
fn requests(svc: &GitHubServer, part: &str) -> Vec<String> {
    svc.requests()
        .into_iter()
        .filter(|(_, u)| u.contains(part))
        .map(|(m, u)| format!("{m} {}", u.split('?').next().unwrap_or("")))
        .collect()
}

#[test]
fn a_check_run_carries_all_120_findings_in_three_requests() {
    let (svc, token, co) = fixture();
    // 12 surfaces of the 10 filesystem carriers: 100 FAIL, then 20 ERROR.
    let mut findings: Vec<Finding> = (0..120)
        .map(|i| {
            let verdict = if i < 100 {
                Verdict::Fail
            } else {
                Verdict::Error
            };
            let mut f = at_config(fs_carrier(i), verdict, &format!("found {i}"));
            f.surface = format!("s{}", i / 10);
            f.channel = format!("{}:{}", f.surface, f.carrier);
            f
        })
        .collect();
    let mut pass = at_config("xattr", Verdict::Pass, "nothing found");
    pass.surface = "p".into();
    pass.channel = "p:xattr".into();
    findings.push(pass);
    let f = co.report(&report(findings));
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--pr-comment", "never", "--report"])
        .arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(
        requests(&svc, "check-runs"),
        [
            "POST /api/repos/octo/repo/check-runs",
            "PATCH /api/repos/octo/repo/check-runs/3",
            "PATCH /api/repos/octo/repo/check-runs/3",
        ]
    );
    let runs = svc.objects("check-run");
    assert_eq!(runs.len(), 1);
    let cr = &runs[0];
    assert_eq!(cr["name"], "runwarden");
    assert_eq!(cr["head_sha"], HEAD, "on the pull request's head");
    assert_eq!(cr["status"], "completed");
    assert_eq!(cr["conclusion"], "failure");
    assert_eq!(cr["output"]["annotations_count"], 120);
    let notes = cr["output"]["annotations"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .all(|n| n["path"] == ".github/runwarden.yml" && n["start_line"] == 3)
    );
    assert_eq!(
        notes
            .iter()
            .filter(|n| n["annotation_level"] == "failure")
            .count(),
        100
    );
    assert_eq!(
        notes
            .iter()
            .filter(|n| n["annotation_level"] == "warning")
            .count(),
        20
    );
    assert!(
        notes[0]["title"]
            .as_str()
            .unwrap()
            .contains("s0:file-content")
    );
    let title = cr["output"]["title"].as_str().unwrap();
    assert_eq!(title, "100 undeclared channels open, 20 errors");
    assert!(
        cr["output"]["summary"]
            .as_str()
            .unwrap()
            .contains("| FAIL |")
    );
    assert!(r.out.contains("120 annotations in 3 requests"), "{}", r.out);
}

#[test]
fn conclusions_follow_the_verdicts() {
    let (svc, token, co) = fixture();
    // (conclusion, annotations: a SKIPPED channel has none.)
    for (findings, want, annotated) in [
        (
            vec![
                at_config("file-name", Verdict::Pass, ""),
                at_config("mtime", Verdict::Authorized, ""),
            ],
            "success",
            0u64,
        ),
        // Nothing tested fails the run, and the check run with it.
        (
            vec![at_config("file-name", Verdict::Skipped, "no token")],
            "failure",
            0,
        ),
        (
            vec![at_config("file-name", Verdict::Error, "broke")],
            "failure",
            1,
        ),
    ] {
        let f = co.report(&report(findings));
        let mut c = co.cmd(&svc, &token);
        c.args(["publish", "--pr-comment", "never", "--report"])
            .arg(&f);
        assert_eq!(run(c, &token).code, 0);
        let last = svc.objects("check-run").pop().unwrap();
        assert_eq!(last["conclusion"], want, "{last}");
        assert_eq!(last["output"]["annotations_count"], annotated);
    }
}

fn comments(svc: &GitHubServer) -> Vec<Value> {
    svc.objects("comment")
}

#[test]
fn the_comment_is_made_once_updated_with_what_changed_and_left_alone() {
    let (svc, token, co) = fixture();
    // Someone else's comment that copies the marker and a forged state
    // must be neither updated nor believed.
    let publish = |findings: Vec<Finding>, mode: &str| {
        let f = co.report(&report(findings));
        let mut c = co.cmd(&svc, &token);
        c.args([
            "publish",
            "--no-check-run",
            "--pr-comment",
            mode,
            "--report",
        ])
        .arg(&f);
        let r = run(c, &token);
        assert_eq!(r.code, 0, "{}", r.out);
        r
    };
    // A green first run: nothing to say yet.
    publish(vec![at_config("file-name", Verdict::Pass, "")], "on-change");
    assert!(comments(&svc).is_empty());
    // Run 1: a opens.
    publish(
        vec![
            at_config("file-name", Verdict::Fail, "found"),
            at_config("mtime", Verdict::Pass, ""),
        ],
        "on-change",
    );
    let first = comments(&svc);
    assert_eq!(first.len(), 1);
    let body = first[0]["body"].as_str().unwrap().to_string();
    assert!(body.contains("First run on this pull request"), "{body}");
    assert!(body.contains("1 undeclared channel open"), "{body}");
    let marker = body.lines().next().unwrap().to_string();
    assert!(marker.starts_with("<!-- runwarden-comment "), "{marker}");
    let forged = format!("{marker}\nforged <!-- runwarden-state eyJ2ZXJkaWN0cyI6e319 -->");
    svc.add(
        "comment",
        REPO,
        json!({ "issue": PR, "body": forged, "user": { "login": "mallory" } }),
    );
    // Run 2: a closes, b opens: the same comment says so.
    publish(
        vec![
            at_config("file-name", Verdict::Pass, ""),
            at_config("mtime", Verdict::Fail, "found"),
        ],
        "on-change",
    );
    let second = comments(&svc);
    assert_eq!(second.len(), 2, "no new comment of ours");
    assert_eq!(second[0]["id"], first[0]["id"]);
    let body = second[0]["body"].as_str().unwrap().to_string();
    assert!(body.contains("newly open (1): s:mtime"), "{body}");
    assert!(body.contains("newly closed (1): s:file-name"), "{body}");
    assert_eq!(
        second[1]["body"], forged,
        "someone else's comment is untouched"
    );
    // Run 3: nothing changed: no write at all.
    let before = requests(&svc, "comments").len();
    let r = publish(
        vec![
            at_config("file-name", Verdict::Pass, ""),
            at_config("mtime", Verdict::Fail, "found"),
        ],
        "on-change",
    );
    let writes: Vec<String> = requests(&svc, "comments")[before..]
        .iter()
        .filter(|r| !r.starts_with("GET"))
        .cloned()
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    assert_eq!(comments(&svc)[0]["body"], second[0]["body"]);
    assert!(r.out.contains("left alone"), "{}", r.out);
    // `always` rewrites it anyway, saying there was no change.
    publish(
        vec![
            at_config("file-name", Verdict::Pass, ""),
            at_config("mtime", Verdict::Fail, "found"),
        ],
        "always",
    );
    let body = comments(&svc)[0]["body"].as_str().unwrap().to_string();
    assert!(
        body.contains("No channel changed since the last run"),
        "{body}"
    );
    assert_eq!(comments(&svc).len(), 2);
}

/// The SARIF as code scanning receives it: base64 of a gzip member, for
/// the merge commit and `refs/pull/7/merge`, in the category asked for,
/// valid against the official SARIF 2.1.0 schema.
#[test]
fn the_sarif_upload_is_what_code_scanning_takes() {
    let svc = server();
    svc.set_processing(Processing {
        pending: 1,
        errors: None,
    });
    let token = svc.token(WRITE_ALL);
    let co = Checkout::new();
    let f = co.report(&report(vec![
        at_config("file-name", Verdict::Fail, "found"),
        at_config("mtime", Verdict::Pass, ""),
    ]));
    let mut c = co.cmd(&svc, &token);
    c.args([
        "publish",
        "--no-check-run",
        "--pr-comment",
        "never",
        "--upload-sarif",
    ])
    .args(["--category", "isolation/linux", "--report"])
    .arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(r.out.contains("code scanning processed it"), "{}", r.out);
    let up = svc.sarifs();
    assert_eq!(up.len(), 1);
    let fields = &up[0].fields;
    assert_eq!(fields["commit_sha"], MERGE);
    assert_eq!(fields["ref"], format!("refs/pull/{PR}/merge"));
    assert_eq!(fields["tool_name"], "runwarden");
    let root = std::path::absolute(co.path()).unwrap();
    assert_eq!(fields["checkout_uri"], format!("file://{}", root.display()));
    assert_eq!(fields["started_at"], "2026-11-30T00:00:00Z");
    // The real gzip reads it back.
    let sarif = co.path().join("uploaded.sarif");
    let text = gunzip(&up[0].gzip);
    std::fs::write(&sarif, &text).unwrap();
    let v: Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(
        v["runs"][0]["automationDetails"]["id"],
        "isolation/linux/99-1"
    );
    assert_eq!(v["runs"][0]["results"].as_array().unwrap().len(), 1);
    let schema = npm_file(
        "@microsoft/jest-sarif",
        "1.0.0-beta.0",
        "lib/schemas/sarif-2.1.0-rtm.5.json",
    );
    if let Some(e) = schema_errors(&schema, &sarif) {
        panic!("the uploaded SARIF is invalid:\n{e}");
    }
}

#[test]
fn processing_that_failed_is_an_error_with_its_reasons() {
    let svc = server();
    svc.set_processing(Processing {
        pending: 0,
        errors: Some(vec![
            "locationFromSarifResult: expected artifact location".into(),
        ]),
    });
    let token = svc.token(WRITE_ALL);
    let co = Checkout::new();
    let f = co.report(&report(vec![at_config("file-name", Verdict::Pass, "")]));
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--no-check-run", "--upload-sarif", "--report"])
        .arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(
        r.out.contains("::error title=runwarden sarif upload::")
            && r.out.contains("expected artifact location"),
        "{}",
        r.out
    );
}

/// Every filesystem carrier, declared: a probe of a shared directory
/// that is green.
fn declare_all_filesystem_carriers() -> String {
    let out = bin()
        .args(["carriers", "--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = v["surface_types"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["type"] == "filesystem")
        .unwrap();
    let mut d = "declared:\n".to_string();
    for c in fs["carriers"].as_array().unwrap() {
        d += &format!("  - s:{}\n", c["carrier"].as_str().unwrap());
    }
    d
}

/// The action with a read-only token (a fork's pull request: every
/// permission read at most): every write is a notice naming the
/// permission, nothing is written, and the step's exit code is the
/// probe's: 0 for a green probe, 1 for an open channel.
#[test]
fn a_read_only_token_gives_notices_and_the_probes_exit_code() {
    let svc = server();
    let read: Vec<(&str, &str)> = WRITE_ALL.iter().map(|(k, _)| (*k, "read")).collect();
    let token = svc.token(&read);
    let co = Checkout::new();
    // A fork: the event's head repository is not this one.
    let event = json!({ "pull_request": { "number": PR,
        "head": { "sha": HEAD, "repo": { "full_name": "mallory/repo" } } } });
    std::fs::write(co.path().join("event.json"), event.to_string()).unwrap();
    let shared = tempfile::tempdir().unwrap();
    for (declared, want) in [(true, 0), (false, 1)] {
        let extra = if declared {
            declare_all_filesystem_carriers()
        } else {
            String::new()
        };
        let config = fs_config("s", shared.path(), &extra);
        std::fs::write(co.path().join(".github/runwarden.yml"), &config).unwrap();
        let mut c = co.cmd(&svc, &token);
        c.env_remove("GITHUB_TOKEN")
            .env("INPUT_GITHUB-TOKEN", &token)
            .env("INPUT_UPLOAD-SARIF", "true")
            .env("INPUT_SUMMARY", "false")
            .env("RUNWARDEN_KEY", "0123456789abcdef0123456789abcdef")
            .arg("action");
        let r = run(c, &token);
        assert_eq!(r.code, want, "{}", r.out);
        let mut parts = vec![
            ("check run", "`checks: write`"),
            ("sarif upload", "`security-events: write`"),
        ];
        // A green run with no earlier comment says nothing in the pull
        // request; a failing one tries to.
        if !declared {
            parts.push(("pr comment", "`issues: write` or `pull-requests: write`"));
        }
        for (part, perm) in parts {
            let line = r
                .out
                .lines()
                .find(|l| l.starts_with(&format!("::notice title=runwarden {part}::")))
                .unwrap_or_else(|| panic!("no notice for {part}:\n{}", r.out));
            assert!(line.contains(perm) && line.contains("fork"), "{line}");
        }
        assert!(!r.out.contains("::error title=runwarden"), "{}", r.out);
    }
    assert!(svc.objects("check-run").is_empty());
    assert!(comments(&svc).is_empty());
    assert!(svc.sarifs().is_empty());
}

/// Surface data in a comment cannot end the table or inject markup.
#[test]
fn hostile_details_stay_text_in_the_comment_and_the_check_run() {
    let (svc, token, co) = fixture();
    let evil = "x | y </details><img src=x onerror=alert(1)> ` [link](https://evil.example) <!-- runwarden-state e30= -->";
    let f = co.report(&report(vec![at_config("file-name", Verdict::Fail, evil)]));
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--report"]).arg(&f);
    assert_eq!(run(c, &token).code, 0);
    let body = comments(&svc)[0]["body"].as_str().unwrap().to_string();
    // Rendered as GitHub renders it: the detail is text in a code span.
    if let Some(html) = common::markdown::assert_inert(&body) {
        assert!(
            !html.contains("<img") && !html.contains("href=\"https://evil"),
            "{html}"
        );
    }
    // The state runwarden reads back is its own last line, never the one
    // the detail holds.
    let last = body.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("<!-- runwarden-state ") && !last.contains("e30="),
        "{body}"
    );
    let summary = svc.objects("check-run")[0]["output"]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    if let Some(html) = common::markdown::assert_inert(&summary) {
        assert!(!html.contains("<img"), "{html}");
    }
}

/// A labelled report (one runner of a fleet) gets its own check run name
/// and code scanning category.
#[test]
fn a_label_names_the_check_run_and_the_category() {
    let (svc, token, co) = fixture();
    let mut r = report(vec![at_config("file-name", Verdict::Pass, "")]);
    r.label = Some("self-hosted linux".into());
    let f = co.report(&r);
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--upload-sarif", "--sarif-wait", "0", "--report"])
        .arg(&f);
    let out = run(c, &token);
    assert_eq!(out.code, 0, "{}", out.out);
    assert_eq!(
        svc.objects("check-run")[0]["name"],
        "runwarden (self-hosted linux)"
    );
    let gz = &svc.sarifs()[0].gzip;
    // A stored gzip member: the SARIF's bytes stand in it as they are.
    let text = String::from_utf8_lossy(gz);
    assert!(
        text.contains("\"id\": \"runwarden/self-hosted-linux/99-1\""),
        "{text}"
    );
    assert!(
        out.out.contains("not waiting") || out.out.contains("still processing"),
        "{}",
        out.out
    );
}

/// An API that cannot be reached: each part is an error naming the host,
/// exit 1, and the token appears nowhere.
#[test]
fn an_unreachable_api_is_an_error_for_each_part() {
    let (svc, token, co) = fixture();
    let f = co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = co.cmd(&svc, &token);
    c.env("GITHUB_API_URL", format!("http://127.0.0.1:{port}/api"))
        .args(["publish", "--upload-sarif", "--report"])
        .arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 1, "{}", r.out);
    for part in ["check run", "pr comment", "sarif upload"] {
        let line = r
            .out
            .lines()
            .find(|l| l.starts_with(&format!("::error title=runwarden {part}::")))
            .unwrap_or_else(|| panic!("no error for {part}:\n{}", r.out));
        assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    }
}

/// The action publishes after its probe with the job's token: the check
/// run is there, and the step's exit code is still the probe's.
#[test]
fn the_action_publishes_after_its_probe() {
    let (svc, token, co) = fixture();
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(
        co.path().join(".github/runwarden.yml"),
        fs_config("s", shared.path(), ""),
    )
    .unwrap();
    let mut c = co.cmd(&svc, &token);
    c.env_remove("GITHUB_TOKEN")
        .env("INPUT_GITHUB-TOKEN", &token)
        .env("INPUT_SUMMARY", "false")
        .env("RUNWARDEN_KEY", "0123456789abcdef0123456789abcdef")
        .arg("action");
    let r = run(c, &token);
    assert_eq!(r.code, 1, "{}", r.out);
    let cr = &svc.objects("check-run")[0];
    assert_eq!(cr["conclusion"], "failure");
    assert_eq!(cr["output"]["annotations_count"], 9, "{cr}");
    assert_eq!(
        cr["output"]["annotations"][0]["path"], ".github/runwarden.yml",
        "{cr}"
    );
    assert_eq!(comments(&svc).len(), 1);
    // `mode: publish` publishes the report again from another job: the
    // comment is left alone (nothing changed), the exit code is 0.
    let mut c = co.cmd(&svc, &token);
    c.env_remove("GITHUB_TOKEN")
        .env("INPUT_GITHUB-TOKEN", &token)
        .env("INPUT_MODE", "publish")
        .arg("action");
    let r = run(c, &token);
    assert_eq!(r.code, 0, "{}", r.out);
    assert_eq!(svc.objects("check-run").len(), 2);
    assert_eq!(comments(&svc).len(), 1);
}

/// A secondary rate limit with `retry-after` is waited out, as GitHub's
/// 403 (the check run is created once) and as a 429 (the listing is read
/// on the second try); a proxy's 403 without GitHub's marks is an error,
/// never a notice that the permission is missing.
#[test]
fn rate_limits_are_waited_out_and_a_proxys_403_is_an_error() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static POSTS: AtomicUsize = AtomicUsize::new(0);
    static LISTS: AtomicUsize = AtomicUsize::new(0);
    let (svc, token, co) = fixture();
    let front = Hostile::start(&svc.results_url(), |r, pass| {
        if r.method == "POST"
            && r.path().ends_with("/check-runs")
            && POSTS.fetch_add(1, Ordering::SeqCst) == 0
        {
            return hostile::Reply::json(
                403,
                json!({ "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api" }),
            )
            .with_header("retry-after", "1")
            .with_header("x-github-request-id", "0000:1:LIMIT");
        }
        // A 429 with `retry-after` on the first listing: waited out.
        if r.method == "GET"
            && r.path().ends_with("/comments")
            && LISTS.fetch_add(1, Ordering::SeqCst) == 0
        {
            return hostile::Reply::json(
                429,
                json!({ "message": "You have exceeded a secondary rate limit.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api" }),
            )
            .with_header("retry-after", "1");
        }
        if r.method == "POST" && r.path().ends_with("/comments") {
            // A gateway in front: its 403 is not GitHub's.
            return hostile::Reply::json(403, json!({ "message": "Forbidden" }));
        }
        pass(r)
    });
    let f = co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    let mut c = co.cmd(&svc, &token);
    c.env("GITHUB_API_URL", format!("{}/api", front.base()))
        .args(["publish", "--report"])
        .arg(&f);
    let r = run(c, &token);
    assert_eq!(POSTS.load(Ordering::SeqCst), 2, "{}", r.out);
    assert_eq!(LISTS.load(Ordering::SeqCst), 2, "{}", r.out);
    assert_eq!(svc.objects("check-run").len(), 1, "{}", r.out);
    assert!(r.out.contains("1 annotation in 1 request"), "{}", r.out);
    assert_eq!(r.code, 1, "{}", r.out);
    let line = r
        .out
        .lines()
        .find(|l| l.starts_with("::error title=runwarden pr comment::"))
        .unwrap_or_else(|| panic!("the proxy's 403 is no refusal:\n{}", r.out));
    assert!(line.contains("without GitHub's error body"), "{line}");
    assert!(comments(&svc).is_empty());
}

/// A GitHub App's token comments as its bot, which `GET /user` does not
/// tell: the first comment says so (a notice naming `comment-author`), and
/// with `--comment-author` the next run updates it. A user's token (a PAT)
/// is asked who it is and finds its own comment.
#[test]
fn an_app_token_is_told_to_name_its_bot_and_a_pat_finds_its_own() {
    let svc = server();
    let app = svc.app_token(WRITE_ALL, "warden-app[bot]");
    let co = Checkout::new();
    let failing = co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    let publish = |token: &str, extra: &[&str]| {
        let mut c = co.cmd(&svc, token);
        c.args(["publish", "--no-check-run", "--report"])
            .arg(&failing)
            .args(extra);
        run(c, token)
    };
    let r = publish(&app, &[]);
    assert_eq!(r.code, 0, "{}", r.out);
    let line = r
        .out
        .lines()
        .find(|l| l.starts_with("::notice title=runwarden pr comment::"))
        .unwrap_or_else(|| panic!("no notice:\n{}", r.out));
    assert!(line.contains("comment-author: warden-app[bot]"), "{line}");
    let first = comments(&svc);
    assert_eq!(first.len(), 1);
    let ok = co.report(&report(vec![at_config("file-name", Verdict::Pass, "")]));
    let mut c = co.cmd(&svc, &app);
    c.args([
        "publish",
        "--no-check-run",
        "--comment-author",
        "warden-app[bot]",
        "--report",
    ])
    .arg(&ok);
    let r = run(c, &app);
    assert_eq!(r.code, 0, "{}", r.out);
    assert!(
        r.out
            .contains(&format!("comment {} updated", first[0]["id"])),
        "{}",
        r.out
    );
    assert_eq!(comments(&svc).len(), 1);

    let pat = svc.user_token(WRITE_ALL, "octocat");
    co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    let r = publish(&pat, &[]);
    assert!(r.out.contains("created"), "{}", r.out);
    let r = publish(&pat, &["--pr-comment", "always"]);
    assert!(r.out.contains("updated"), "{}", r.out);
    let by_octocat = comments(&svc)
        .iter()
        .filter(|c| c["user"]["login"] == "octocat")
        .count();
    assert_eq!(by_octocat, 1);
}

/// With a marker key the state is signed: a comment of the same identity
/// (another workflow's `github-actions[bot]`) that copies the marker is
/// not ours, so it is neither updated nor believed.
#[test]
fn with_a_key_only_a_signed_comment_is_ours() {
    let (svc, token, co) = fixture();
    let f = co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    let key = "0123456789abcdef0123456789abcdef";
    let publish = |mode: &str, pr: &str| {
        let mut c = co.cmd(&svc, &token);
        c.env("RUNWARDEN_KEY", key)
            .args([
                "publish",
                "--no-check-run",
                "--pr",
                pr,
                "--pr-comment",
                mode,
                "--report",
            ])
            .arg(&f);
        let r = run(c, &token);
        assert_eq!(r.code, 0, "{}", r.out);
        r
    };
    let on = |pr: u64| -> Vec<Value> {
        comments(&svc)
            .into_iter()
            .filter(|c| c["issue"] == pr)
            .collect()
    };
    // A signed comment on another pull request shows what ours look like.
    publish("on-change", "8");
    let body = on(8)[0]["body"].as_str().unwrap().to_string();
    let marker = body.lines().next().unwrap();
    let state_start = body.rfind("<!-- runwarden-state ").unwrap();
    let payload = body[state_start..].split_whitespace().nth(2).unwrap();
    // Another workflow, commenting as the same github-actions[bot], posts
    // an imitation on #7 first: marker, state, but no signature.
    let forged = format!("{marker}\nforged\n<!-- runwarden-state {payload} -->\n");
    svc.add(
        "comment",
        REPO,
        json!({ "issue": PR, "body": forged, "user": { "login": "github-actions[bot]" } }),
    );
    publish("on-change", "7");
    let all = on(PR);
    assert_eq!(
        all.len(),
        2,
        "a signed comment of its own beside the imitation"
    );
    assert_eq!(all[0]["body"], forged, "the imitation is untouched");
    assert!(all[1]["body"].as_str().unwrap().contains("First run"));
    let r = publish("on-change", "7");
    assert!(r.out.contains("left alone"), "{}", r.out);
    assert_eq!(on(PR).len(), 2, "then found again by its signature");
}

/// A job without the checkout: the SARIF would leave every result out and
/// code scanning would close their alerts, so it is not uploaded.
#[test]
fn no_sarif_upload_without_the_files_results_point_at() {
    let (svc, token, co) = fixture();
    let f = co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    let empty = tempfile::tempdir().unwrap();
    let mut c = co.cmd(&svc, &token);
    c.env("GITHUB_WORKSPACE", empty.path())
        .env_remove("GITHUB_WORKFLOW_REF")
        .current_dir(empty.path())
        .args([
            "publish",
            "--no-check-run",
            "--pr-comment",
            "never",
            "--upload-sarif",
            "--report",
        ])
        .arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 1, "{}", r.out);
    assert!(
        r.out.contains("not uploaded: 1 findings have no file"),
        "{}",
        r.out
    );
    assert!(svc.sarifs().is_empty());
}

/// What `publish` will not do: publish from a `workflow_run` without being
/// told the commit (its GITHUB_SHA is the default branch's), or a report
/// whose findings runwarden could not have made.
#[test]
fn workflow_run_needs_the_commit_and_forged_reports_are_refused() {
    let (svc, token, co) = fixture();
    let f = co.report(&report(vec![at_config(
        "file-name",
        Verdict::Fail,
        "found",
    )]));
    let mut c = co.cmd(&svc, &token);
    c.env("GITHUB_EVENT_NAME", "workflow_run")
        .args(["publish", "--report"])
        .arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 2, "{}", r.out);
    assert!(r.out.contains("workflow_run"), "{}", r.out);
    let mut forged = at_config("file-name", Verdict::Fail, "found");
    forged.carrier = "x](https://evil.example)".into();
    forged.channel = format!("s:{}", forged.carrier);
    let f = co.report(&report(vec![forged]));
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--report"]).arg(&f);
    let r = run(c, &token);
    assert_eq!(r.code, 2, "{}", r.out);
    assert!(r.out.contains("not one runwarden makes"), "{}", r.out);
    assert!(svc.objects("check-run").is_empty() && comments(&svc).is_empty());
}

/// 0, 50, 51 and 100 annotations: one request per 50, at least one.
#[test]
fn annotations_go_fifty_to_a_request() {
    let (svc, token, co) = fixture();
    for (n, want) in [(0usize, 1usize), (50, 1), (51, 2), (100, 2)] {
        let findings: Vec<Finding> = (0..n.max(1))
            .map(|i| {
                let verdict = if i < n { Verdict::Fail } else { Verdict::Pass };
                let mut f = at_config(fs_carrier(i), verdict, "x");
                f.surface = format!("s{}", i / 10);
                f.channel = format!("{}:{}", f.surface, f.carrier);
                f
            })
            .collect();
        let f = co.report(&report(findings));
        let before = requests(&svc, "check-runs").len();
        let mut c = co.cmd(&svc, &token);
        c.args(["publish", "--pr-comment", "never", "--report"])
            .arg(&f);
        let r = run(c, &token);
        assert_eq!(r.code, 0, "{}", r.out);
        assert_eq!(
            requests(&svc, "check-runs").len() - before,
            want,
            "{n} annotations"
        );
        let cr = svc.objects("check-run").pop().unwrap();
        assert_eq!(cr["output"]["annotations_count"], n, "{cr}");
        assert_eq!(cr["status"], "completed");
    }
}

/// A relayed report (the probe job hands its report to a publish job) is
/// untrusted end to end: its channels, surface types, fact keys and values,
/// label and details render inert in the comment and the check run, as
/// cmark-gfm renders them.
#[test]
fn a_relayed_report_renders_inert_everywhere_reviewers_look() {
    let (svc, token, co) = fixture();
    let evil = "@acme/security-team www.attacker.example #1 octo/app#2 deadbeefcafe ![i](https://x.example/i.png) [l](https://x.example) <img src=x> </details> <!-- c --> |row|";
    // (Findings of a channel, type or carrier runwarden does not make are
    // refused whole: the rest of the report is what can carry text.)
    let mut r = report(vec![at_config("file-name", Verdict::Fail, evil)]);
    r.label = Some(evil.into());
    r.surfaces.push(runwarden::report::SurfaceFacts {
        surface: evil.into(),
        surface_type: evil.into(),
        facts: [(evil.to_string(), evil.to_string())].into_iter().collect(),
    });
    r.surfaces.push(runwarden::report::SurfaceFacts {
        surface: "_pwn_".into(),
        surface_type: "__x__".into(),
        facts: [(":shipit:".to_string(), "w".to_string())]
            .into_iter()
            .collect(),
    });
    let path = co.report(&r);
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--report"]).arg(&path);
    let out = run(c, &token);
    assert_eq!(out.code, 0, "{}", out.out);
    let body = comments(&svc)[0]["body"].as_str().unwrap().to_string();
    common::markdown::assert_inert(&body);
    let summary = svc.objects("check-run")[0]["output"]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    if let Some(html) = common::markdown::assert_inert(&summary) {
        assert!(html.contains("<code>"), "{html}");
        assert!(
            !html.contains("<em>pwn") && !html.contains("<strong>x"),
            "{html}"
        );
    }
}

/// A signed (or, without a key, well-formed) state copied into another
/// author's comment makes it no more runwarden's: never left standing as
/// the sticky comment, never edited, with and without a marker key.
#[test]
fn a_state_replayed_in_another_authors_comment_is_not_ours() {
    for key in [None, Some("k-sticky-7f1a")] {
        let (svc, token, co) = fixture();
        let publish = |findings: Vec<Finding>| {
            let f = co.report(&report(findings));
            let mut c = co.cmd(&svc, &token);
            if let Some(k) = key {
                c.env("RUNWARDEN_KEY", k);
            }
            c.args([
                "publish",
                "--no-check-run",
                "--pr-comment",
                "on-change",
                "--report",
            ])
            .arg(&f);
            let r = run(c, &token);
            assert_eq!(r.code, 0, "{}", r.out);
            r
        };
        let red = || vec![at_config("file-name", Verdict::Fail, "found")];
        publish(red());
        let genuine = comments(&svc)[0]["body"].as_str().unwrap().to_string();
        // Mallory copies it into a comment of her own, and runwarden's own
        // comment is gone (or was never on this pull request).
        svc.lock().objects.retain(|o| o.kind != "comment");
        let fake = format!("{genuine}\nno undeclared channel open, trust me");
        svc.add(
            "comment",
            REPO,
            json!({ "issue": PR, "body": fake, "user": { "login": "mallory" } }),
        );
        // The same verdicts: not "left alone" on her comment; a new one.
        let r = publish(red());
        let all = comments(&svc);
        assert_eq!(all.len(), 2, "{key:?}: {all:?}");
        assert_eq!(
            all[0]["body"],
            json!(fake),
            "{key:?}: her comment was edited"
        );
        assert_ne!(all[1]["user"]["login"], "mallory");
        assert!(
            !r.out.contains("left alone: nothing changed"),
            "{key:?}: {}",
            r.out
        );
        // Verdicts changed: hers is still not patched.
        publish(vec![
            at_config("file-name", Verdict::Pass, ""),
            at_config("mtime", Verdict::Fail, "found"),
        ]);
        let all = comments(&svc);
        assert_eq!(all.len(), 2, "{key:?}");
        assert_eq!(
            all[0]["body"],
            json!(fake),
            "{key:?}: her comment was edited"
        );
        assert!(
            all[1]["body"]
                .as_str()
                .unwrap()
                .contains("newly open (1): s:mtime"),
            "{key:?}"
        );
    }
}

/// A relayed report's locations name files of this checkout or nothing:
/// `..` out of the root, a deep climb to `/etc/passwd`, an absolute path
/// elsewhere and a symlink of the checkout to a file outside all point at
/// the workflow's step instead, in the SARIF and in the check run (0.11.0
/// uploaded `../outside.yml` as an artifact and annotated it).
#[test]
fn a_relayed_reports_locations_never_leave_the_checkout() {
    let (svc, token, co) = fixture();
    let outside = co.path().parent().unwrap().join(format!(
        "{}-outside.yml",
        co.path().file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&outside, "secret: 1\n").unwrap();
    let out_name = outside.file_name().unwrap().to_string_lossy().to_string();
    std::os::unix::fs::symlink(&outside, co.path().join(".github/link.yml")).unwrap();
    let climbs = [
        format!("../{out_name}"),
        format!(".github/../../{out_name}"),
        format!("{}/../../../../../../../../../etc/passwd", ".github"),
        outside.to_string_lossy().to_string(),
        ".github/link.yml".to_string(),
    ];
    let findings = climbs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut f = at_config(fs_carrier(i), Verdict::Fail, "found");
            f.location.as_mut().unwrap().path = p.clone();
            f
        })
        .collect();
    let f = co.report(&report(findings));
    let mut c = co.cmd(&svc, &token);
    c.args([
        "publish",
        "--pr-comment",
        "never",
        "--upload-sarif",
        "--report",
    ])
    .arg(&f);
    let r = run(c, &token);
    std::fs::remove_file(&outside).unwrap();
    assert_eq!(r.code, 0, "{}", r.out);
    let up = svc.sarifs();
    assert_eq!(up.len(), 1, "{}", r.out);
    let sarif = String::from_utf8(gunzip(&up[0].gzip)).unwrap();
    let v: Value = serde_json::from_str(&sarif).unwrap();
    let uris: Vec<&str> = v["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(uris, vec![".github/workflows/ci.yml"; 5], "{sarif}");
    let cr = svc.objects("check-run").pop().unwrap();
    let paths: Vec<&str> = cr["output"]["annotations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec![".github/workflows/ci.yml"; 5], "{cr}");
}

/// A relayed label of bidi controls, zero-width characters and 200 kB
/// reaches no log line as such: every line is escaped and cut, and the
/// check run's name holds a short, escaped label (0.11.0 printed
/// `check run: \`runwarden (<label>)\` on …` raw).
#[test]
fn a_relayed_label_floods_no_log_line_and_hides_nothing() {
    let (svc, token, co) = fixture();
    let mut r = report(vec![at_config("file-name", Verdict::Fail, "found")]);
    let label = format!("\u{202e}lmth.exe\u{200b}{}", "x".repeat(200_000));
    r.label = Some(label);
    let f = co.report(&r);
    let mut c = co.cmd(&svc, &token);
    c.args(["publish", "--pr-comment", "never", "--report"])
        .arg(&f);
    let out = run(c, &token);
    assert_eq!(out.code, 0, "{}", &out.out[..out.out.len().min(2000)]);
    for bad in ['\u{202e}', '\u{200b}'] {
        assert!(!out.out.contains(bad), "{bad:?} in the log");
    }
    let longest = out.out.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 4_200, "a log line of {longest} characters");
    assert!(
        out.out.contains("\\u{202e}lmth.exe\\u{200b}"),
        "{}",
        &out.out[..2000.min(out.out.len())]
    );
    let name = svc.objects("check-run")[0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(name.chars().count() < 140, "{name}");
    assert!(
        !name.contains('\u{202e}') && !name.contains('\u{200b}'),
        "{name}"
    );
}
