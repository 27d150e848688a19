//! SARIF 2.1.0 for GitHub code scanning: a function over the report.
//!
//! One rule per surface type and carrier (`runwarden/<type>/<carrier>`).
//! FAIL is an `error` result, ERROR a `warning`, AUTHORIZED a `note` with an
//! external suppression naming the declaration; SKIPPED and PASS are not
//! results, FAIL first (code scanning keeps 5,000 per run). Every result
//! has a repo-relative location (the surface's entry in the config, a
//! fallback for a discovered config, else a stable stand-in: none is ever
//! dropped for want of one) and the
//! `primaryLocationLineHash` fingerprint computed the way
//! github/codeql-action computes it.

pub use super::repo::Context;
use crate::report::Report;
use crate::surface::{self, Persistence};
use crate::verdict::Verdict;
use crate::wire::percent_decode as decode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;

const DOCS: &str = "https://github.com/runwarden/action/blob/main/docs";

/// `runwarden/<surface-type>/<carrier>`.
pub fn rule_id(surface_type: &str, carrier: &str) -> String {
    format!("runwarden/{surface_type}/{carrier}")
}

fn severity(p: Persistence) -> &'static str {
    match p {
        Persistence::Durable => "8.0",
        Persistence::UntilGc | Persistence::UntilEvicted | Persistence::Unknown => "7.0",
        Persistence::Transient => "5.5",
    }
}

fn rule(surface_type: &str, c: &surface::Carrier) -> Value {
    let id = rule_id(surface_type, c.name);
    let doc = format!("{DOCS}/surfaces/{surface_type}.md#{}", c.name);
    let full = format!(
        "{} ({surface_type} surface). runwarden plants a fresh random nonce this way in one run and recovers it in a later, separate run: a recovered nonce proves the two runs can communicate through the surface, whatever a firewall allows. Persistence: {}.",
        capitalize(c.description),
        c.persistence.as_str()
    );
    let help = format!(
        "Two runs that should be isolated can pass messages through this carrier. Close it (see {doc}: per-run storage, permissions or a read-only credential for agent jobs), or, if the channel is intended, declare it in the runwarden config under `declared:` as `<surface>:{}`; a declared channel is reported as authorized and stays in the record.",
        c.name
    );
    let markdown = format!(
        "Two runs that should be isolated can pass messages through **{surface_type} `{}`**: {}.\n\n**Fix:** close the channel ([how]({doc})), or, if it is intended, declare it in the runwarden config:\n\n```yaml\ndeclared:\n  - <surface>:{}\n```\n\nA declared channel is reported as authorized and stays in the record.",
        c.name, c.description, c.name
    );
    json!({
        "id": id,
        "name": format!("{}/{}", surface_type, c.name),
        "shortDescription": { "text": format!("Open channel: {surface_type} {}", c.name) },
        "fullDescription": { "text": truncate(&full, 1024) },
        "help": { "text": help, "markdown": markdown },
        "helpUri": doc,
        "defaultConfiguration": { "level": "error" },
        "properties": {
            "tags": ["security", "ci", "isolation", "covert-channel"],
            "precision": "very-high",
            "problem.severity": "error",
            "security-severity": severity(c.persistence),
        },
    })
}

/// The run's property bag: where the config came from when that is news
/// ([`Report::config_warning`]).
fn run_properties(report: &Report) -> serde_json::Value {
    let mut p = serde_json::Map::new();
    if let Some(w) = report.config_warning() {
        p.insert("runwarden/config-warning".into(), json!(w));
    }
    // Each run's trust, and the direction of an open channel from an
    // untrusted run to a trusted one.
    if let Some(t) = &report.trust {
        p.insert("runwarden/trust".into(), json!(t));
    }
    serde_json::Value::Object(p)
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// `s` cut to `max` characters, the last one `…` when it was cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max - 1).collect::<String>() + "…"
    }
}

/// The results a run keeps; the rest are left out (and [`left_out`] says
/// how many). Why 5,000 and not the 25,000 code scanning accepts: it
/// stores only 5,000 per run, documented as "prioritized by severity",
/// which github/docs#38085 reports it does not do. So runwarden picks them
/// itself, FAIL first.
pub const MAX_RESULTS: usize = 5_000;

/// The findings that are SARIF results, FAIL first, then ERROR, then
/// AUTHORIZED: when the limit cuts, what fails the run is kept.
fn resulting(report: &Report) -> Vec<&crate::report::Finding> {
    let rank = |v: Verdict| match v {
        Verdict::Fail => Some(0),
        Verdict::Error => Some(1),
        Verdict::Authorized => Some(2),
        Verdict::Skipped | Verdict::Pass => None,
    };
    let mut v: Vec<_> = report
        .findings
        .iter()
        .filter(|f| rank(f.verdict).is_some())
        .collect();
    v.sort_by_key(|f| rank(f.verdict));
    v
}

/// How many findings [`render`] leaves out of a report's SARIF (over
/// [`MAX_RESULTS`]); whoever writes the SARIF says so.
pub fn left_out(report: &Report) -> usize {
    resulting(report).len().saturating_sub(MAX_RESULTS)
}

/// The SARIF log for a report.
pub fn render(report: &Report, ctx: &Context) -> String {
    // Rules: every carrier of every surface type in the report, in the
    // registry's order, so rule indexes are stable for a given config.
    let mut rules = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for ty in surface::REGISTRY
        .iter()
        .filter(|t| report.findings.iter().any(|f| f.surface_type == t.name()))
    {
        for c in ty.carriers() {
            index.insert(rule_id(ty.name(), c.name), rules.len());
            rules.push(rule(ty.name(), c));
        }
    }
    let mut hashes: HashMap<String, HashMap<u64, String>> = HashMap::new();
    let mut results = Vec::new();
    for f in resulting(report) {
        let (level, title) = match f.verdict {
            Verdict::Fail => ("error", "Undeclared channel"),
            Verdict::Error => ("warning", "Probe error on channel"),
            Verdict::Authorized => ("note", "Declared channel"),
            Verdict::Skipped | Verdict::Pass => continue,
        };
        if results.len() == MAX_RESULTS {
            break;
        }
        let (uri, line, column) = ctx.sarif_location(f);
        let id = rule_id(&f.surface_type, &f.carrier);
        let side = f.side().map(|s| format!("@{s}")).unwrap_or_default();
        let line_hash = hashes
            .entry(uri.clone())
            .or_insert_with(|| file_hashes(&ctx.root, &uri))
            .get(&line)
            .cloned();
        let mut fingerprints = json!({ "runwardenChannel/v1": format!("{}{side}", f.channel) });
        if let Some(h) = line_hash {
            fingerprints["primaryLocationLineHash"] = json!(h);
        }
        let mut result = json!({
            "ruleId": id,
            "ruleIndex": index.get(&id).copied().unwrap_or(0),
            "level": level,
            "message": { "text": format!("{title} {}{side}: {}", f.channel, f.detail) },
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": { "uri": uri },
                    "region": { "startLine": line, "startColumn": column },
                },
            }],
            "partialFingerprints": fingerprints,
            "properties": {
                "channel": f.channel,
                "verdict": f.verdict.as_str(),
                "persistence": f.persistence.as_str(),
            },
        });
        if f.verdict == Verdict::Authorized {
            let at = f
                .declared_at
                .as_ref()
                .map(|d| format!("{}:{}", d.path, d.line))
                .unwrap_or_else(|| "the runwarden config".into());
            let why = f
                .declared_reason
                .as_deref()
                .map(|r| format!(": {}", truncate(&crate::escape::line(r), 500)))
                .unwrap_or_default();
            result["suppressions"] = json!([{
                "kind": "external",
                "justification": format!("declared in {at}{why}"),
            }]);
        }
        results.push(result);
    }
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "runwarden",
                "version": report.tool.version,
                "semanticVersion": report.tool.version,
                "informationUri": "https://github.com/runwarden/action",
                "rules": rules,
            }},
            "automationDetails": { "id": ctx.automation_id },
            "columnKind": "unicodeCodePoints",
            "invocations": [{
                "executionSuccessful": report.summary.error == 0,
                "startTimeUtc": report.started_at,
                "endTimeUtc": report.finished_at,
            }],
            "results": results,
            "properties": run_properties(report),
        }],
    });
    serde_json::to_string_pretty(&log).expect("sarif serializes") + "\n"
}

/// Line fingerprints of a repository file (none if it cannot be read).
fn file_hashes(root: &Path, uri: &str) -> HashMap<u64, String> {
    let path = uri
        .split('/')
        .fold(root.to_path_buf(), |p, seg| p.join(decode(seg)));
    // A regular file only, never through a symlink, and no larger than a
    // config or workflow is: something else may have put a FIFO or a link
    // to /dev/zero where a file was expected (the stand-in location above
    // all, which nothing checked out).
    match crate::sys::read_regular(&path, 4 << 20) {
        Ok(bytes) => line_hashes(&String::from_utf8_lossy(&bytes)),
        Err(_) => HashMap::new(),
    }
}

/// The `primaryLocationLineHash` of every line of `text`, as
/// github/codeql-action's `fingerprints.ts` computes it: for each line, a
/// rolling polynomial hash (base 37, wrapping 64-bit) of the 100 characters
/// (UTF-16 code units) that start the line, with spaces and tabs skipped
/// and line endings normalised to `\n`, the end of the file marked by
/// 65535 and padded with zeros; the hash in hex, then `:` and how many
/// times that hash has occurred so far in the file.
pub fn line_hashes(text: &str) -> HashMap<u64, String> {
    const BLOCK: usize = 100;
    const BASE: u64 = 37;
    let first_mod = (0..BLOCK).fold(1u64, |m, _| m.wrapping_mul(BASE));
    struct State {
        window: [u64; BLOCK],
        starts: [Option<u64>; BLOCK],
        idx: usize,
        hash: u64,
        counts: HashMap<u64, u32>,
        out: HashMap<u64, String>,
    }
    let mut st = State {
        window: [0; BLOCK],
        starts: [None; BLOCK],
        idx: 0,
        hash: 0,
        counts: HashMap::new(),
        out: HashMap::new(),
    };
    let emit = |st: &mut State| {
        if let Some(line) = st.starts[st.idx].take() {
            let n = st.counts.entry(st.hash).or_insert(0);
            *n += 1;
            st.out.insert(line, format!("{:x}:{n}", st.hash));
        }
    };
    let push = |st: &mut State, c: u64| {
        let oldest = st.window[st.idx];
        st.window[st.idx] = c;
        st.hash = st
            .hash
            .wrapping_mul(BASE)
            .wrapping_add(c)
            .wrapping_sub(first_mod.wrapping_mul(oldest));
        st.idx = (st.idx + 1) % BLOCK;
    };
    let (mut line, mut line_start, mut prev_cr) = (0u64, true, false);
    let units = text
        .encode_utf16()
        .map(u64::from)
        .chain(std::iter::once(0xFFFF));
    for mut c in units {
        if c == u64::from(b' ') || c == u64::from(b'\t') || (prev_cr && c == u64::from(b'\n')) {
            prev_cr = false;
            continue;
        }
        prev_cr = c == u64::from(b'\r');
        if prev_cr {
            c = u64::from(b'\n');
        }
        emit(&mut st);
        if line_start {
            line += 1;
            st.starts[st.idx] = Some(line);
        }
        line_start = c == u64::from(b'\n');
        push(&mut st, c);
    }
    for _ in 0..BLOCK {
        emit(&mut st);
        push(&mut st, 0);
    }
    st.out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values computed with github/codeql-action's algorithm (its
    /// fingerprints.ts logic run on the same text): CRLF, tabs, trailing
    /// text, a non-BMP character and blank lines.
    #[test]
    fn line_hashes_match_codeql_action() {
        let text = "version: 1\r\nsurfaces:\n  - name: shared-tmp\n    type: filesystem\n\tpath: ${RUNNER_TEMP}/../shared  # ünïcödé 😀\n\n\ndeclared:\n  - shared-tmp:directory-name\n  - shared-tmp:directory-name\n";
        let h = line_hashes(text);
        let expect = [
            (1, "4fd8058bc3b859c6:1"),
            (2, "312e1c12f1ed56b5:1"),
            (3, "6ba510a7633813e9:1"),
            (4, "c73b2f1017910d43:1"),
            (5, "c7fccac95949dd9a:1"),
            (6, "9799b150fd3d6e69:1"),
            (7, "f1167aae9ac062c3:1"),
            (8, "e01f95365eadb3c5:1"),
            (9, "80efa9c804f1b429:1"),
            (10, "5c0cb673c38c3f6c:1"),
            (11, "c129715d7a2bc9a3:1"),
        ];
        assert_eq!(h.len(), expect.len());
        for (line, hash) in expect {
            assert_eq!(h[&line], hash, "line {line}");
        }
    }
}
