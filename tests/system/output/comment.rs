//! The sticky pull request comment (src/output/comment.rs) at scale: it
//! leads with the changes and the counts, one row per surface, the full
//! table collapsed, and stays under GitHub's 65,536 characters at
//! thousands of channels, saying what it cut.

use crate::common::{finding, markdown, report_of};
use runwarden::marker::Key;
use runwarden::output::comment::{CommentContext, Earlier, comment};
use runwarden::verdict::Verdict;

#[test]
fn thousands_of_channels_fit_grouped_with_the_table_collapsed() {
    let mut findings = vec![];
    for s in 0..60 {
        for c in 0..100 {
            let verdict = match c % 4 {
                0 => Verdict::Fail,
                1 => Verdict::Pass,
                2 => Verdict::Error,
                _ => Verdict::Authorized,
            };
            let mut f = finding(
                &format!("carrier-{c}"),
                verdict,
                &"a long detail ".repeat(8),
            );
            f.surface = format!("surface-{s}");
            f.channel = format!("surface-{s}:carrier-{c}");
            findings.push(f);
        }
    }
    let report = report_of(findings);
    let key = Key::new(None);
    let cx = CommentContext {
        sha: None,
        run_url: None,
        key: &key,
        at: "octo/app#1",
    };
    let body = comment(&report, Earlier::None, &cx);
    assert!(
        body.chars().count() < 65_536,
        "{} characters",
        body.chars().count()
    );
    let table = body
        .find("| Surface | Open (undeclared)")
        .expect("a row per surface");
    let details = body
        .find("<details><summary>")
        .expect("the full table, collapsed");
    assert!(table < details, "surfaces first");
    assert!(body[..table].contains("**1500** fail"), "the counts lead");
    let row = body[table..]
        .lines()
        .find(|l| l.starts_with("| surface-0 (filesystem) | 25: carrier-0, carrier-4,"))
        .expect("surface-0's row");
    assert!(
        row.contains(", … 5 more |"),
        "long lists are cut and counted: {row}"
    );
    assert!(
        body.contains("more rows are in the job summary and the report."),
        "the cut is said"
    );
    assert!(
        body.contains("#close-it"),
        "each surface links to how to close it"
    );
    assert!(
        body.contains("<!-- runwarden-state "),
        "the state survives the cut"
    );
    markdown::assert_inert(&body);
}
