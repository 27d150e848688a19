//! Outputs (src/output/): functions over a report. These build reports by
//! hand, including hostile text, and check what is printed.

use runwarden::output;
use runwarden::plan::ConfigSource;
use runwarden::report::{Cleanup, Finding, Leftover, Report, Runs, Summary, Tool};
use runwarden::surface::Persistence;
use runwarden::verdict::{Control, Verdict};

fn finding(carrier: &str, verdict: Verdict, detail: &str) -> Finding {
    Finding {
        channel: format!("s:{carrier}"),
        surface: "s".into(),
        surface_type: "filesystem".into(),
        carrier: carrier.into(),
        verdict,
        persistence: Persistence::Durable,
        declared: verdict == Verdict::Authorized,
        control: Control::Recovered,
        detail: detail.into(),
        location: None,
        declared_at: None,
        scope: None,
    }
}

fn report(findings: Vec<Finding>, left: Vec<Leftover>) -> Report {
    Report {
        schema: runwarden::report::SCHEMA.into(),
        tool: Tool::default(),
        probe_id: "p".into(),
        started_at: "2026-11-30T00:00:00Z".into(),
        finished_at: "2026-11-30T00:00:01Z".into(),
        config: ConfigSource {
            path: Some("rw.yml".into()),
            embedded_default: false,
        },
        runs: Runs {
            a: "a".into(),
            b: "b".into(),
            b_uid: None,
        },
        summary: Summary::of(&findings),
        findings,
        cleanup: Cleanup { removed: 0, left },
    }
}

#[test]
fn table_puts_the_worst_first_and_escapes_every_cell() {
    let r = report(
        vec![
            finding("mtime", Verdict::Pass, "nothing"),
            finding(
                "xattr",
                Verdict::Fail,
                "x\n::set-output name=a::b ##[error]y %0A",
            ),
            finding("file-name", Verdict::Error, "broke"),
        ],
        vec![Leftover {
            surface: "s".into(),
            control: false,
            entry: "\"e\\n::x\"".into(),
            reason: "r\n::warning::z".into(),
        }],
    );
    let t = output::table::render(&r);
    let verdicts: Vec<&str> = t
        .lines()
        .skip(1)
        .take(3)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(verdicts, ["FAIL", "ERROR", "PASS"]);
    for line in t.lines() {
        assert!(
            !line.trim_start().starts_with("::") && !line.contains("##["),
            "{line}"
        );
    }
    assert!(
        t.contains("x%0A::set-output name=a::b %23#[error]y %250A"),
        "{t}"
    );
    assert!(t.contains("cleanup left 1 planted entries in place"));
    assert!(t.contains("1 fail, 1 error, 0 authorized, 0 skipped, 1 pass"));
}

#[test]
fn json_round_trips_and_is_log_safe() {
    let r = report(
        vec![finding("xattr", Verdict::Fail, "##[error]forged\n::x")],
        vec![],
    );
    let text = output::json::render(&r);
    assert!(!text.contains("##["));
    assert!(text.lines().all(|l| !l.trim_start().starts_with("::")));
    let back: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(back.findings[0].detail, "##[error]forged\n::x");
    assert_eq!(back.summary, r.summary);
    assert_eq!(r.exit_code(), 1);
    assert_eq!(
        report(vec![finding("x", Verdict::Authorized, "")], vec![]).exit_code(),
        0
    );
    let left = Leftover {
        surface: "s".into(),
        control: false,
        entry: "e".into(),
        reason: "r".into(),
    };
    assert_eq!(
        report(vec![finding("x", Verdict::Pass, "")], vec![left]).exit_code(),
        1,
        "leftovers fail the run"
    );
}
