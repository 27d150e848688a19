//! Code scanning's analyses and alerts, derived from the uploads code
//! scanning processed (rest_scanning.rs): one analysis per SARIF run,
//! `category` from `runs[].automationDetails.id`, `tool` from
//! `tool.driver`; the alerts of a ref are the results of the newest
//! analysis of each set (ref + tool + category). Deleting follows
//! ../shared/reference/github-coverage-facts.md §2: only the newest of a
//! set is `deletable` (else 400 `Analysis specified is not deletable.`),
//! and the last of a set only with `confirm_delete` (else its 400).
//!
//! The SARIF is read from the upload's gzip member, which this stand-in
//! inflates only where its deflate blocks are stored (what runwarden and
//! node's `zlib.gzipSync(…, {level: 0})` send): a compressed member makes
//! the upload `failed`, saying so.

use super::rest::{Call, find, list, message, num, one, page};
use super::{Object, Reply, State};
use serde_json::{Value, json};

/// The SARIF in a gzip member of stored deflate blocks; `Err` says why
/// not.
pub(super) fn inflate_stored(gz: &[u8]) -> Result<Vec<u8>, String> {
    let bad = || "not a gzip member".to_string();
    if gz.len() < 18 || gz[..3] != [0x1f, 0x8b, 8] {
        return Err(bad());
    }
    let flags = gz[3];
    let mut at = 10;
    if flags & 4 != 0 {
        let n = usize::from(u16::from_le_bytes([gz[at], gz[at + 1]]));
        at += 2 + n;
    }
    for bit in [8u8, 16] {
        if flags & bit != 0 {
            at += gz
                .get(at..)
                .and_then(|r| r.iter().position(|b| *b == 0))
                .ok_or_else(bad)?
                + 1;
        }
    }
    if flags & 2 != 0 {
        at += 2;
    }
    let mut out = Vec::new();
    loop {
        let head = *gz.get(at).ok_or_else(bad)?;
        if head & 0b110 != 0 {
            return Err("the stand-in inflates only stored deflate blocks (gzip level 0)".into());
        }
        let len = gz.get(at + 1..at + 3).ok_or_else(bad)?;
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let data = gz.get(at + 5..at + 5 + len).ok_or_else(bad)?;
        out.extend_from_slice(data);
        at += 5 + len;
        if head & 1 == 1 {
            return Ok(out);
        }
    }
}

/// What processing an upload makes of its SARIF: one analysis per run
/// (each keeping its results under `_results`, never shown), or the
/// errors that make it `failed`.
pub(super) fn analyses_of(gzip: &[u8], fields: &Value) -> Result<Vec<Value>, Vec<String>> {
    let text = inflate_stored(gzip).map_err(|e| vec![e])?;
    let sarif: Value =
        serde_json::from_slice(&text).map_err(|e| vec![format!("the SARIF is not JSON: {e}")])?;
    let Some(runs) = sarif["runs"].as_array() else {
        return Err(vec!["the SARIF has no runs".into()]);
    };
    Ok(runs
        .iter()
        .map(|run| {
            let driver = &run["tool"]["driver"];
            let tool = driver["name"]
                .as_str()
                .or(fields["tool_name"].as_str())
                .unwrap_or("API");
            let rules = driver["rules"].as_array().cloned().unwrap_or_default();
            let results = run["results"].as_array().cloned().unwrap_or_default();
            json!({
                "ref": fields["ref"], "commit_sha": fields["commit_sha"],
                "analysis_key": "(api upload)", "environment": "{}",
                "category": run["automationDetails"]["id"].as_str().unwrap_or(""),
                "error": "", "results_count": results.len(), "rules_count": rules.len(),
                "tool": { "name": tool, "version": driver["version"], "guid": null },
                "warning": "", "_results": results, "_rules": rules,
            })
        })
        .collect())
}

/// Adds the analyses of upload `sarif_id` of `repo`.
pub(super) fn add(st: &mut State, repo: &str, sarif_id: &str, analyses: Vec<Value>) {
    for mut a in analyses {
        let id = st.next_id();
        a["id"] = json!(id);
        a["sarif_id"] = json!(sarif_id);
        a["created_at"] = json!(format!("2026-11-30T00:{:02}:{:02}Z", id / 60 % 60, id % 60));
        st.objects.push(Object {
            kind: "analysis",
            repo: repo.into(),
            fields: a,
        });
    }
}

fn same_set(a: &Value, b: &Value) -> bool {
    a["ref"] == b["ref"] && a["tool"]["name"] == b["tool"]["name"] && a["category"] == b["category"]
}

/// Every analysis of `repo` (all: `lagging` off), newest first, as GitHub
/// shows them (`deletable`: the newest of its set; no `_` fields).
fn analyses(st: &State, repo: &str, lagging: bool) -> Vec<Value> {
    let all: Vec<Value> = if lagging {
        list(st, "analysis", repo, |_| true)
    } else {
        st.objects
            .iter()
            .filter(|o| o.kind == "analysis" && o.repo == repo)
            .map(|o| o.fields.clone())
            .collect()
    };
    let mut shown: Vec<Value> = all
        .iter()
        .map(|a| {
            let newest = all
                .iter()
                .filter(|b| same_set(a, b))
                .all(|b| b["id"].as_u64() <= a["id"].as_u64());
            let mut a = a.clone();
            a["deletable"] = json!(newest);
            a
        })
        .collect();
    shown.sort_by_key(|a| std::cmp::Reverse(a["id"].as_u64()));
    shown
}

fn public(mut a: Value) -> Value {
    if let Some(o) = a.as_object_mut() {
        o.retain(|k, _| !k.starts_with('_'));
    }
    a
}

/// The alerts of the newest analysis of each set, as GitHub lists them.
fn alerts(st: &State, repo: &str, shown: &[Value]) -> Vec<Value> {
    let mut out = vec![];
    for a in shown.iter().filter(|a| a["deletable"] == json!(true)) {
        let Some(full) = find(st, "analysis", repo, "id", &a["id"]) else {
            continue;
        };
        let full = &st.objects[full].fields;
        let rules = full["_rules"].as_array().cloned().unwrap_or_default();
        for (i, r) in full["_results"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let rule_id = r["ruleId"].as_str().unwrap_or("");
            let rule = rules.iter().find(|x| x["id"] == rule_id);
            let loc = &r["locations"][0]["physicalLocation"];
            let line = loc["region"]["startLine"].clone();
            let number = a["id"].as_u64().unwrap_or(0) * 1000 + i as u64 + 1;
            out.push(json!({
                "number": number, "state": "open", "created_at": a["created_at"],
                "html_url": format!("https://github.com/{repo}/security/code-scanning/{number}"),
                "rule": { "id": rule_id, "name": rule_id,
                    "severity": match r["level"].as_str() { Some("error") => "error", Some("note") => "note", _ => "warning" },
                    "description": rule.map_or(json!(""), |x| x["shortDescription"]["text"].clone()),
                    "tags": [] },
                "tool": a["tool"],
                "most_recent_instance": {
                    "ref": a["ref"], "analysis_key": a["analysis_key"], "environment": a["environment"],
                    "category": a["category"], "state": "open", "commit_sha": a["commit_sha"],
                    "message": { "text": r["message"]["text"] },
                    "location": { "path": loc["artifactLocation"]["uri"], "start_line": line,
                        "end_line": line, "start_column": 1, "end_column": 1 },
                },
            }));
        }
    }
    out
}

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    let q = super::super::query(c.url);
    // The default branch's, unless `ref` says.
    let git_ref = q
        .get("ref")
        .cloned()
        .unwrap_or_else(|| "refs/heads/main".into());
    let tool = q.get("tool_name");
    let keep = |a: &Value| tool.is_none_or(|t| a["tool"]["name"] == t.as_str());
    Some(match (c.method, c.p) {
        ("GET", ["code-scanning", "analyses"]) => {
            // A repository with no analysis at all answers 404 (seen in
            // liatrio/liatrio-otel-collector#395), not an empty list.
            if analyses(st, c.repo, false).is_empty() {
                return Some(message(404, "no analysis found"));
            }
            let sarif_id = q.get("sarif_id");
            // A query by upload shows every one, lag or not.
            let items = analyses(st, c.repo, sarif_id.is_none())
                .into_iter()
                .filter(|a| keep(a))
                .filter(|a| q.get("ref").is_none_or(|r| a["ref"] == r.as_str()))
                .filter(|a| sarif_id.is_none_or(|s| a["sarif_id"] == s.as_str()))
                .map(public)
                .collect();
            page(items, c.url, c.port, 100, None)
        }
        ("GET", ["code-scanning", "analyses", id]) => {
            let shown = analyses(st, c.repo, false);
            match shown.into_iter().find(|a| a["id"] == num(id)) {
                Some(a) => Reply::json(200, public(a)),
                None => one(st, None),
            }
        }
        ("DELETE", ["code-scanning", "analyses", id]) => {
            let shown = analyses(st, c.repo, false);
            let Some(a) = shown.iter().find(|a| a["id"] == num(id)) else {
                return Some(message(404, "Not Found"));
            };
            if a["deletable"] != json!(true) {
                return Some(message(400, "Analysis specified is not deletable."));
            }
            let rest: Vec<&Value> = shown
                .iter()
                .filter(|b| same_set(a, b) && b["id"] != a["id"])
                .collect();
            if rest.is_empty() && q.get("confirm_delete").is_none_or(|v| v != "true") {
                return Some(message(
                    400,
                    "Analysis is last of its type and deletion may result in the loss of historical alert data. Please specify confirm_delete.",
                ));
            }
            let at = find(st, "analysis", c.repo, "id", &a["id"]);
            if let Some(i) = at {
                st.objects.remove(i);
            }
            let url = |n: &Value| {
                format!(
                    "http://127.0.0.1:{}/api/repos/{}/code-scanning/analyses/{n}",
                    c.port, c.repo
                )
            };
            // The next of the set (rest is newest first): without
            // confirmation unless it is the last.
            let (next, confirm) = match rest.first() {
                None => (Value::Null, Value::Null),
                Some(n) if rest.len() == 1 => (
                    Value::Null,
                    json!(format!("{}?confirm_delete=true", url(&n["id"]))),
                ),
                Some(n) => (
                    json!(url(&n["id"])),
                    json!(format!("{}?confirm_delete=true", url(&n["id"]))),
                ),
            };
            Reply::json(
                200,
                json!({ "next_analysis_url": next, "confirm_delete_url": confirm }),
            )
        }
        ("GET", ["code-scanning", "alerts"]) => {
            let shown: Vec<Value> = analyses(st, c.repo, true)
                .into_iter()
                .filter(|a| a["ref"] == git_ref.as_str() && keep(a))
                .collect();
            let state = q.get("state");
            let items = alerts(st, c.repo, &shown)
                .into_iter()
                .filter(|a| state.is_none_or(|s| a["state"] == s.as_str()))
                .collect();
            page(items, c.url, c.port, 100, None)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn stored_gzip_inflates_and_compressed_is_refused() {
        let data = b"{\"runs\":[]}".repeat(10_000);
        let gz = crate::archive::gzip_stored(&data);
        assert_eq!(super::inflate_stored(&gz).unwrap(), data);
        let mut compressed = gz.clone();
        compressed[10] = 0b011;
        assert!(super::inflate_stored(&compressed).is_err());
        assert!(super::inflate_stored(b"not gzip at all, not at all").is_err());
    }
}
