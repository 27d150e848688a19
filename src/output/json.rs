//! The JSON report, as written to `--report` and printed by `--format json`.

use crate::escape;
use crate::report::Report;

/// Pretty JSON, with `##[` escaped inside strings so the document is safe
/// to print in an Actions log (the file gets the same bytes).
pub fn render(report: &Report) -> String {
    let text = serde_json::to_string_pretty(report).expect("report serializes");
    escape::json(&text) + "\n"
}
