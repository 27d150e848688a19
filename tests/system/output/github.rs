//! GitHub Actions output (src/output/github.rs, `--format github`): hostile
//! names never start or forge a workflow command, annotation limits, the
//! job summary, outputs and masking. These simulate a runner.

use crate::common;
use crate::common::*;
use std::path::Path;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    summary: String,
    outputs: String,
}

fn run_github(root: &Path, config: &str, env: &[(&str, &str)]) -> Run {
    std::fs::create_dir_all(root.join(".github")).unwrap();
    std::fs::write(root.join(".github/runwarden.yml"), config).unwrap();
    let summary = root.join("summary.md");
    let outputs = root.join("outputs.txt");
    let out = bin()
        .current_dir(root)
        .env("GITHUB_WORKSPACE", root)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_OUTPUT", &outputs)
        .envs(env.iter().copied())
        .args([
            "probe",
            "--format",
            "github",
            "--config",
            ".github/runwarden.yml",
            "--report",
            "r.json",
        ])
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        summary: std::fs::read_to_string(summary).unwrap_or_default(),
        outputs: std::fs::read_to_string(outputs).unwrap_or_default(),
    }
}

const HOSTILE: &str = "x\n::set-output name=a::b ##[error]x %0A::warning::y,z:w";

#[test]
fn hostile_names_never_start_or_forge_a_command() {
    let root = tempfile::tempdir().unwrap();
    // A reachable directory and a missing one, both named with command
    // syntax: their paths reach details, annotations and the summary.
    let open = root.path().join(HOSTILE);
    std::fs::create_dir(&open).unwrap();
    let missing = root.path().join(format!("{HOSTILE}-missing"));
    let cfg = format!(
        "{}  - name: gone\n    type: filesystem\n    path: {}\n",
        fs_config("open", &open, ""),
        serde_json::to_string(&missing.to_string_lossy()).unwrap()
    );
    let r = run_github(root.path(), &cfg, &[]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let allowed = ["::add-mask::", "::error ", "::warning ", "::notice "];
    for line in r.stdout.lines().chain(r.stderr.lines()) {
        assert!(!line.contains("##["), "legacy command in: {line}");
        let t = line.trim_start();
        if t.starts_with("::") {
            assert!(
                allowed.iter().any(|a| t.starts_with(a)),
                "forged command: {line}"
            );
        }
    }
    assert!(r.stderr.lines().all(|l| !l.trim_start().starts_with("::")));
    let errors: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("::error "))
        .collect();
    let warnings: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("::warning "))
        .collect();
    assert_eq!(errors.len(), 9, "one per FAIL");
    assert_eq!(warnings.len(), 10, "one per ERROR");
    for a in errors.iter().chain(&warnings) {
        let (props, msg) = a.split_once(' ').unwrap().1.split_once("::").unwrap();
        // Properties: no raw separator inside a value.
        for p in props.split(',') {
            let (k, v) = p.split_once('=').unwrap();
            assert!(["file", "line", "col", "title"].contains(&k), "{p}");
            assert!(!v.contains(':') && !v.contains(','), "{p}");
        }
        assert!(props.contains("file=.github/runwarden.yml"), "{props}");
        assert!(!msg.contains('\n') && !msg.contains('\r'));
    }
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("%0A%3A%3Aset-output") || w.contains("::set-output")),
        "the path is in the message, escaped"
    );
    // The summary table: every row has exactly its six separators.
    // (The findings' table: the rows after its header, up to the first
    // line that is no row; the coverage section follows the findings of a
    // failing run.)
    let rows: Vec<&str> = r
        .summary
        .lines()
        .skip_while(|l| !l.starts_with("| Verdict"))
        .take_while(|l| l.starts_with('|'))
        .filter(|l| l.starts_with("| ") && !l.starts_with("| Verdict") && !l.starts_with("| ---"))
        .collect();
    assert_eq!(rows.len(), 20);
    for row in &rows {
        assert_eq!(common::markdown::separators(row), 6, "{row}");
        assert!(!row.contains("##["), "{row}");
    }
    common::markdown::assert_inert(&r.summary);
}

#[test]
fn annotations_stop_at_ten_per_kind_and_say_how_many_more() {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let cfg = format!(
        "{}  - name: b\n    type: filesystem\n    path: {}\n",
        fs_config("a", &a, ""),
        serde_json::to_string(&b).unwrap()
    );
    let r = run_github(root.path(), &cfg, &[]);
    assert_eq!(
        r.stdout
            .lines()
            .filter(|l| l.starts_with("::error "))
            .count(),
        10
    );
    let notice: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("::notice "))
        .collect();
    assert_eq!(notice.len(), 1);
    assert!(
        notice[0].contains("8 more fail findings are not annotated")
            && notice[0].contains("r.json"),
        "{}",
        notice[0]
    );
    // The mermaid diagram names both surfaces.
    assert!(
        r.summary.contains("```mermaid")
            && r.summary.contains("S0[(a)]")
            && r.summary.contains("S1[(b)]"),
        "{}",
        r.summary
    );
}

/// Parses `$GITHUB_OUTPUT` heredocs.
fn parse_outputs(text: &str) -> (Vec<(String, String)>, String) {
    let mut out = Vec::new();
    let mut lines = text.lines();
    let mut delimiter = String::new();
    while let Some(head) = lines.next() {
        let (name, delim) = head.split_once("<<").unwrap();
        delimiter = delim.to_string();
        let mut value = Vec::new();
        for l in lines.by_ref() {
            if l == delim {
                break;
            }
            value.push(l);
        }
        out.push((name.to_string(), value.join("\n")));
    }
    (out, delimiter)
}

#[test]
fn outputs_use_a_random_delimiter_and_tokens_are_masked_first() {
    let root = tempfile::tempdir().unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let cfg = fs_config("shared", &shared, "declared:\n  - shared:xattr\n");
    let r = run_github(root.path(), &cfg, &[("MY_API_TOKEN", "tok-1234-secret")]);
    assert_eq!(
        r.stdout.lines().next().unwrap(),
        "::add-mask::tok-1234-secret",
        "masking comes first"
    );
    let (outs, delim1) = parse_outputs(&r.outputs);
    let get = |k: &str| outs.iter().find(|(n, _)| n == k).unwrap().1.clone();
    assert_eq!(get("fail-count"), "8");
    assert_eq!(get("error-count"), "0");
    assert_eq!(get("report"), "r.json");
    assert!(get("open-channels").split(',').any(|c| c == "shared:xattr"));
    assert_eq!(get("open-channels").split(',').count(), 9);
    std::fs::remove_file(root.path().join("outputs.txt")).unwrap();
    let r2 = run_github(root.path(), &cfg, &[]);
    let (_, delim2) = parse_outputs(&r2.outputs);
    assert!(
        delim1.starts_with("runwarden_") && delim1 != delim2,
        "a fresh delimiter each run"
    );
    assert!(
        r.summary
            .contains("## runwarden: 8 open undeclared, 0 errors")
    );
}

#[test]
fn output_values_containing_the_delimiter_are_refused() {
    let outs = vec![("report", "a\nD\nevil<<x".to_string())];
    assert!(runwarden::output::github::output_file(&outs, "D").is_err());
    assert!(runwarden::output::github::output_file(&outs, "runwarden_abc").is_ok());
}

#[test]
fn the_summary_stays_under_one_mebibyte() {
    let f = finding(
        "file-name",
        runwarden::verdict::Verdict::Fail,
        &"|<x>|".repeat(500),
    );
    let report = report_of(vec![f; 5_000]);
    let s = runwarden::output::github::summary(&report, Some("r.json"));
    assert!(s.len() < 1024 * 1024, "{} bytes", s.len());
    assert!(s.contains("more findings are not shown here; the report in"));
}

#[test]
fn the_summary_says_what_a_recover_rests_on_and_lists_notices_inertly() {
    use runwarden::report::{CrossJob, KeyKind, Mode, NoticeRecord};
    use runwarden::surface::NoticeKind;
    use runwarden::verdict::Verdict;
    let mut r = report_of(vec![finding("file-name", Verdict::Pass, "none")]);
    r.mode = Mode::Recover;
    r.probe_id = "nightly_7".into();
    r.key = KeyKind::DerivedDefault;
    r.cross_job = Some(CrossJob {
        receipt: None,
        planted_at: None,
        plant_origin: None,
        plant_complete: None,
        receipt_via: None,
        missing_receipt_allowed: false,
    });
    r.notices = (0..12)
        .map(|i| NoticeRecord {
            surface: "s".into(),
            kind: NoticeKind::ForgedMarker,
            entry: format!("\".runwarden-x|{i}\\n::error::y\""),
            detail: "a | b [c](d)".into(),
            beacon: None,
        })
        .collect();
    let s = runwarden::output::github::summary(&r, None);
    assert!(s.contains("(probe ` nightly_7 `)"), "{s}");
    assert!(
        s.contains("No plant receipt: nothing shows a plant happened"),
        "{s}"
    );
    assert!(s.contains("No key was configured"), "{s}");
    let rows: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("| forged-marker"))
        .collect();
    assert_eq!(rows.len(), 10, "{s}");
    for row in rows {
        assert_eq!(common::markdown::separators(row), 5, "{row}");
        assert!(!row.trim_start().starts_with("::"), "{row}");
    }
    common::markdown::assert_inert(&s);
    assert!(s.contains("2 more in the report's `notices`."), "{s}");
}

/// The job summary and the pull request comment open with the findings
/// when there are any to act on (the coverage after them), else with the
/// coverage; the config
/// that would test a gap is a YAML code block one can copy, never YAML
/// flattened into a table cell (0.11.0 opened with a 24-row "Not tested"
/// table before 22 findings, stanzas joined by ⏎).
#[test]
fn the_summary_and_the_comment_lead_with_findings_and_give_stanzas_as_code() {
    use runwarden::report::{Coverage, Exposure, ExposureStatus};
    use runwarden::verdict::Verdict;
    let stanza = "  - name: tmp\n    type: filesystem\n    path: \"/tmp/```x\"\n";
    let mut r = report_of(vec![finding("file-name", Verdict::Fail, "found")]);
    r.coverage = Some(Coverage {
        runner: "not-actions".into(),
        permissions: vec![],
        permissions_source: String::new(),
        gaps: 1,
        exposures: vec![Exposure {
            id: "path:/tmp".into(),
            what: "the temp directory".into(),
            status: ExposureStatus::NotTested,
            channels: vec![],
            reason: Some("no channel of the config tests it".into()),
            stanza: Some(stanza.into()),
        }],
        required: false,
    });
    let s = runwarden::output::github::summary(&r, None);
    let table = s.find("| Verdict").unwrap();
    let gaps = s.find("| Not tested").unwrap();
    assert!(table < gaps, "{s}");
    assert!(
        s.find("**Coverage:").unwrap() < table,
        "the gap count leads:\n{s}"
    );
    assert!(s.contains("````yaml\n  - name: tmp\n"), "{s}");
    assert!(!s.contains('⏎'), "{s}");
    common::markdown::assert_inert(&s);
    // The pull request comment in the same order: the gap count, the
    // surfaces and channels, then the gaps.
    let c = comment_of(&r);
    let surfaces = c.find("| s (filesystem) |").unwrap();
    assert!(c.find("**Coverage:").unwrap() < surfaces, "{c}");
    assert!(surfaces < c.find("| Not tested").unwrap(), "{c}");
    // Nothing to act on: the coverage section first.
    r.findings[0].verdict = Verdict::Pass;
    r.summary.fail = 0;
    r.summary.pass = 1;
    let s = runwarden::output::github::summary(&r, None);
    assert!(
        s.find("| Not tested").unwrap() < s.find("| Verdict").unwrap(),
        "{s}"
    );
    let c = comment_of(&r);
    assert!(c.contains("| Not tested"), "{c}");
}

/// The sticky comment of `r` on a first run.
fn comment_of(r: &runwarden::report::Report) -> String {
    use runwarden::output::comment::{CommentContext, Earlier, comment};
    let key = runwarden::marker::Key::new(None);
    let cx = CommentContext {
        sha: None,
        run_url: None,
        key: &key,
        at: "octo/app#1",
    };
    comment(r, Earlier::None, &cx)
}
