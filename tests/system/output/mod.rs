//! Outputs (src/output/): functions over a report. These build reports by
//! hand, including hostile text, and check what is printed. The outputs
//! with tests of their own are submodules, as in src/output/: the fleet
//! table, GitHub Actions output and SARIF.

mod comment;
mod fleet;
mod github;
mod sarif;

use crate::common::{finding, report_of};
use runwarden::output;
use runwarden::report::{Finding, Leftover, Report};
use runwarden::verdict::Verdict;

fn report(findings: Vec<Finding>, left: Vec<Leftover>) -> Report {
    let mut r = report_of(findings);
    r.cleanup.left = left;
    r
}

/// The brief table (a terminal's): one line per surface, open carriers
/// named and counted, a pointer to how to close them, who A and B ran as;
/// lines that carry surface data fit the width, and stay one line.
#[test]
fn the_brief_table_is_one_line_per_surface_and_fits() {
    let mut hostile = finding("file-name", Verdict::Fail, "x");
    hostile.surface = "evil\n::error::x".into();
    hostile.channel = "evil\n::error::x:file-name".into();
    let mut r = report(
        vec![
            finding("file-content", Verdict::Fail, "found"),
            finding("file-name", Verdict::Fail, "found"),
            finding("mtime", Verdict::Pass, "nothing"),
            finding("xattr", Verdict::Error, "no xattrs here"),
            finding("file-size", Verdict::Authorized, "found"),
            hostile,
        ],
        vec![],
    );
    r.runs.a_uid = Some(1000);
    let t = output::table::render_brief(&r, 160);
    let first = t.lines().next().unwrap();
    assert!(first.starts_with("s (filesystem)"), "{t}");
    assert!(
        first.contains("2 of 5 open; 1 declared open; 1 errors (no xattrs here); 1 closed — open: file-content, file-name"),
        "{t}"
    );
    assert!(t.contains("close it: https://github.com/runwarden/action/blob/main/docs/surfaces/filesystem.md#close-it"));
    assert!(
        t.contains("runs A and B both ran as uid 1000: `--run-b-as UID[:GID]`"),
        "{t}"
    );
    assert!(t.contains("every channel: -v, or --format table-wide"));
    assert!(
        t.contains("3 fail, 1 error, 1 authorized, 0 skipped, 1 pass"),
        "{t}"
    );
    for line in t
        .lines()
        .filter(|l| !l.contains("close it: ") && !l.starts_with("runs A"))
    {
        assert!(line.chars().count() <= 160, "{line}");
        assert!(!line.trim_start().starts_with("::"), "{line}");
    }
    r.runs.b_uid = Some(1001);
    assert!(
        output::table::render_brief(&r, 80).contains("run A ran as uid 1000, run B as uid 1001")
    );
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

/// On a terminal the verdict words are coloured, and only they: the
/// columns stay aligned and the rest of each row is unchanged.
#[test]
fn verdicts_are_coloured_and_nothing_else() {
    let table =
        "VERDICT  CHANNEL\nFAIL     a:b  x\nPASS     a:c  y\nERROR    a:d  z\nsummary line\n";
    let c = runwarden::output::table::colour(table);
    assert!(c.contains("\x1b[31mFAIL\x1b[0m     a:b  x\n"), "{c:?}");
    assert!(c.contains("\x1b[32mPASS\x1b[0m     a:c  y\n"), "{c:?}");
    assert!(c.contains("\x1b[31mERROR\x1b[0m    a:d  z\n"), "{c:?}");
    assert!(c.starts_with("VERDICT  CHANNEL\n") && c.ends_with("summary line\n"));
    let plain: String = c
        .replace("\x1b[31m", "")
        .replace("\x1b[32m", "")
        .replace("\x1b[0m", "");
    assert_eq!(plain, table);
}

/// A PASS is worded as it means: in watch mode "not used" (docs/watch.md),
/// and a runner-persistence PASS, which found no earlier probe's beacon,
/// is never "closed" (0.11.0's short table said "6 closed" for a watch
/// and "1 closed" for runner-persistence).
#[test]
fn the_short_table_words_a_pass_as_its_mode_means_it() {
    use runwarden::report::Mode;
    let mut r = report(
        vec![
            finding("mtime", Verdict::Pass, "nothing"),
            finding("runner-persistence", Verdict::Pass, "no beacon"),
        ],
        vec![],
    );
    let t = output::table::render_brief(&r, 160);
    let first = t.lines().next().unwrap();
    assert!(
        first.contains("1 closed; no earlier probe's beacon found"),
        "{t}"
    );
    r.mode = Mode::Watch;
    let t = output::table::render_brief(&r, 160);
    let first = t.lines().next().unwrap();
    assert!(first.contains("2 not used"), "{t}");
    assert!(!t.contains("closed"), "{t}");
    // A FAIL in watch mode is a carrier the command used, not one shown
    // open (the trial read "4 of 10 open" after a watch).
    let mut w = r.clone();
    w.findings.push(finding("xattr", Verdict::Fail, "written"));
    w.findings
        .push(finding("file-size", Verdict::Authorized, "written"));
    let t = output::table::render_brief(&w, 160);
    let first = t.lines().next().unwrap();
    assert!(
        first.contains("1 of 4 used; 1 declared used") && first.contains("— used: xattr"),
        "{t}"
    );
    assert!(!first.contains("open"), "{t}");
    // Watch deletes nothing: no word of deleted refs (0.11.0 said "the
    // refs are deleted" while the command's branch was still there).
    r.findings[0].surface_type = "git-remote".into();
    r.cleanup.deleted = 1;
    r.cleanup.deleted_on.insert(r.findings[0].surface.clone());
    for t in [
        output::table::render(&r),
        output::table::render_brief(&r, 160),
    ] {
        assert!(!t.contains("refs are deleted"), "{t}");
    }
    r.mode = Mode::Probe;
    assert!(output::table::render(&r).contains("refs are deleted"));
    // Deleted entries of another surface say nothing of the git remote's
    // (0.11.0 said so when the push had failed and a directory's plants
    // were deleted).
    r.cleanup.deleted_on = ["elsewhere".to_string()].into();
    assert!(!output::table::render(&r).contains("refs are deleted"));
}

/// Piped output says which uid runs A and B ran as, as the terminal's brief
/// table does (0.11.0 said it only on a terminal).
#[test]
fn the_full_table_says_who_runs_a_and_b_ran_as() {
    let mut r = report(vec![finding("mtime", Verdict::Pass, "nothing")], vec![]);
    r.runs.a_uid = Some(0);
    r.runs.b_uid = Some(65534);
    let t = output::table::render(&r);
    assert!(t.contains("run A ran as uid 0, run B as uid 65534"), "{t}");
}

/// A terminal's brief table groups gaps of one kind and reason into one
/// line, so the findings stay in view; the full table lists each (0.11.0
/// ended every two-surface run with seven gap lines, six of them paths).
#[test]
fn the_brief_table_groups_gaps_of_one_kind_and_the_full_one_lists_each() {
    use runwarden::report::{Coverage, Exposure, ExposureStatus};
    let mut r = report(vec![finding("mtime", Verdict::Pass, "nothing")], vec![]);
    let gap = |id: &str| Exposure {
        id: id.into(),
        what: "a directory".into(),
        status: ExposureStatus::NotTested,
        channels: vec![],
        reason: Some("no channel of the config tests it".into()),
        stanza: None,
    };
    let mut exposures: Vec<Exposure> = ["/root", "/tmp", "/dev/shm", "/var/cache", "/opt"]
        .iter()
        .map(|p| gap(&format!("path:{p}")))
        .collect();
    exposures.push(gap("runner-persistence"));
    r.coverage = Some(Coverage {
        runner: "not-actions".into(),
        permissions: vec![],
        permissions_source: String::new(),
        gaps: 6,
        exposures,
        required: false,
    });
    let brief = output::table::render_brief(&r, 200);
    assert!(
        brief.contains("5 path exposures: no channel of the config tests it (-v lists each)"),
        "{brief}"
    );
    assert!(!brief.contains("path:/var/cache"), "{brief}");
    assert!(brief.contains("runner-persistence: no channel"), "{brief}");
    let full = output::table::render(&r);
    assert!(full.contains("path:/var/cache"), "{full}");
}
