//! The fleet table (src/output/fleet.rs) and `runwarden merge`: reports of
//! several runner labels merged into one table, channel by label.

use crate::common;
use crate::common::{bin, finding, report_of};
use runwarden::output::fleet::{self, Column};
use runwarden::verdict::Verdict;

fn labelled(label: &str, verdicts: [Verdict; 2]) -> runwarden::report::Report {
    let mut r = report_of(vec![
        finding("file-name", verdicts[0], "x"),
        finding("mtime", verdicts[1], "y"),
    ]);
    r.label = Some(label.into());
    r
}

#[test]
fn one_row_per_channel_one_column_per_label_and_hostile_labels_are_inert() {
    let a = labelled("self-hosted-a", [Verdict::Fail, Verdict::Pass]);
    let b = labelled("x|y\n::error::z [l](u)", [Verdict::Pass, Verdict::Error]);
    let t = fleet::render(&[
        Column {
            heading: "self-hosted-a".into(),
            report: &a,
        },
        Column {
            heading: b.label.clone().unwrap(),
            report: &b,
        },
    ]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[0],
        "## runwarden fleet: 2 of 2 runner labels with open undeclared channels, errors or leftovers"
    );
    let rows: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with('|'))
        .collect();
    assert_eq!(rows.len(), 2 + 2 + 1, "{t}");
    for r in &rows {
        assert_eq!(
            common::markdown::separators(r),
            4,
            "a label broke the table: {r}"
        );
        assert!(
            !r.trim_start().starts_with("::") && !r.contains("##["),
            "{r}"
        );
    }
    common::markdown::assert_inert(&t);
    assert!(
        rows[2].contains("**FAIL**") && rows[2].contains("PASS"),
        "{t}"
    );
    assert!(rows[3].contains("ERROR"), "{t}");
    assert!(rows[4].ends_with("| 1 / 0 | 0 / 1 |"), "{t}");
}

#[test]
fn merge_reads_a_directory_of_reports_and_fails_when_any_does() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (label, v)) in [
        ("pool-a", [Verdict::Pass, Verdict::Pass]),
        ("pool-b", [Verdict::Fail, Verdict::Pass]),
    ]
    .into_iter()
    .enumerate()
    {
        // The layout download-artifact makes: one directory per artifact.
        let sub = dir.path().join(format!("runwarden-report-{i}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(
            sub.join("runwarden-report.json"),
            serde_json::to_string(&labelled(label, v)).unwrap(),
        )
        .unwrap();
    }
    let summary = dir.path().join("summary.md");
    let out = bin()
        .arg("merge")
        .arg(dir.path())
        .args(["--format", "github"])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| channel | pool-a | pool-b |"), "{text}");
    assert!(text.contains("1 of 2 runner labels"), "{text}");
    assert_eq!(std::fs::read_to_string(&summary).unwrap(), text);
    // Something that is not a report is an error, not an empty column.
    std::fs::write(dir.path().join("junk.json"), "{}").unwrap();
    let out = bin().arg("merge").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// For a terminal, `merge` prints plain columns: no Markdown, no HTML
/// entities, hostile labels escaped for one line of a log.
#[test]
fn the_plain_table_has_no_markdown_and_hostile_labels_stay_on_their_line() {
    let a = labelled("pool-a", [Verdict::Fail, Verdict::Pass]);
    let b = labelled("x|y\n::error::z", [Verdict::Pass, Verdict::Error]);
    let t = fleet::render_plain(&[
        Column {
            heading: "pool-a".into(),
            report: &a,
        },
        Column {
            heading: b.label.clone().unwrap(),
            report: &b,
        },
    ]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 1 + 1 + 2 + 1, "{t}");
    assert!(
        lines[1].starts_with("CHANNEL") && lines[1].contains("pool-a"),
        "{t}"
    );
    assert!(!t.contains('|') || t.contains("x|y"), "{t}");
    assert!(!t.contains("**") && !t.contains("&#"), "{t}");
    assert!(
        lines.iter().all(|l| !l.trim_start().starts_with("::")),
        "{t}"
    );
    assert!(
        lines[2].contains("FAIL") && lines[2].contains("PASS"),
        "{t}"
    );
    assert!(lines[4].starts_with("fail / error"), "{t}");
    // And `merge` without --format prints it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("r.json"),
        serde_json::to_string(&a).unwrap(),
    )
    .unwrap();
    let out = bin().arg("merge").arg(dir.path()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("runwarden fleet:") && text.contains("CHANNEL"),
        "{text}"
    );
}

/// A watch report (what a command did) and a probe report (what could
/// carry) are not merged into one table, nor is a cleanup report.
#[test]
fn merge_refuses_to_mix_watch_and_probe_reports() {
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe.json");
    let watch = dir.path().join("watch.json");
    let cleanup = dir.path().join("cleanup.json");
    std::fs::write(
        &probe,
        serde_json::to_string(&labelled("a", [Verdict::Pass; 2])).unwrap(),
    )
    .unwrap();
    let mut w = labelled("b", [Verdict::Fail, Verdict::Pass]);
    w.mode = runwarden::report::Mode::Watch;
    std::fs::write(&watch, serde_json::to_string(&w).unwrap()).unwrap();
    let mut c = labelled("c", [Verdict::Pass; 2]);
    c.mode = runwarden::report::Mode::Cleanup;
    std::fs::write(&cleanup, serde_json::to_string(&c).unwrap()).unwrap();
    let out = bin().arg("merge").arg(&probe).arg(&watch).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is a watch report") && err.contains("merge each kind on its own"),
        "{err}"
    );
    let out = bin()
        .arg("merge")
        .arg(&probe)
        .arg(&cleanup)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a cleanup report"));
    // Watch reports together are one kind.
    let out = bin().arg("merge").arg(&watch).arg(&watch).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
