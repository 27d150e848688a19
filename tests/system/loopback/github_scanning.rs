//! The loopback GitHub's code scanning analyses and alerts
//! (src/loopback/github/rest_analyses.rs) proven against the real client,
//! npm `@octokit/rest` (through github_rest.rs's driver): an upload
//! processed into an analysis whose category is the SARIF's
//! `automationDetails.id`, listed by ref and by upload, and alerts from
//! its results; only the newest analysis of a set is deletable, the last
//! of a set only with `confirm_delete` (GitHub's two 400 messages), the
//! answer naming the next of the set; a token without
//! `security_events` is refused with the permission named.

use super::github_rest::{assert_refused, octokit, status};
use base64::Engine as _;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer, WRITE_ALL};
use serde_json::json;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

/// A SARIF of one run in `category`, one result of rule `rule`, gzipped
/// (stored blocks) and base64'd as the upload takes it.
fn sarif(category: &str, rule: &str, message: &str) -> String {
    let s = json!({ "version": "2.1.0", "runs": [{
        "tool": { "driver": { "name": "probe-tool", "rules": [{ "id": rule }] } },
        "automationDetails": { "id": category },
        "results": [{ "ruleId": rule, "level": "note", "message": { "text": message },
            "locations": [{ "physicalLocation": { "artifactLocation": { "uri": "a.txt" },
                "region": { "startLine": 3 } } }] }],
    }]});
    base64::engine::general_purpose::STANDARD
        .encode(runwarden::archive::gzip_stored(s.to_string().as_bytes()))
}

#[test]
fn analyses_and_alerts_from_uploads_and_githubs_delete_rules() {
    let svc = GitHubServer::start().unwrap();
    let token = svc.token(WRITE_ALL);
    let up = |sarif: String| {
        json!({ "call": "codeScanning.uploadSarif",
                "params": { "commit_sha": SHA, "ref": "refs/heads/dev", "sarif": sarif } })
    };
    let r = octokit(
        &svc,
        &token,
        json!([
            up(sarif("cat-a", "rule-1", "first")),
            up(sarif("cat-a", "rule-1", "second")),
            up(sarif("cat-b", "rule-2", "other")),
            { "call": "codeScanning.listRecentAnalyses", "params": { "ref": "refs/heads/dev" } },
            { "call": "codeScanning.listRecentAnalyses", "params": { "sarif_id": "$0.data.id" } },
            { "call": "codeScanning.listRecentAnalyses", "params": { "ref": "refs/heads/main" } },
            { "call": "codeScanning.listAlertsForRepo", "params": { "ref": "refs/heads/dev" } },
            { "call": "codeScanning.getAnalysis", "params": { "analysis_id": "$4.data.0.id" } },
        ]),
    );
    for up in &r[..3] {
        assert_eq!(status(up), 202, "{up}");
    }
    let all = r[3]["data"].as_array().unwrap();
    assert_eq!(all.len(), 3, "{}", r[3]);
    // Newest first; the newest of each set is deletable.
    let cats: Vec<_> = all
        .iter()
        .map(|a| a["category"].as_str().unwrap())
        .collect();
    assert_eq!(cats, ["cat-b", "cat-a", "cat-a"]);
    let deletable: Vec<_> = all
        .iter()
        .map(|a| a["deletable"].as_bool().unwrap())
        .collect();
    assert_eq!(deletable, [true, true, false]);
    assert!(
        all.iter()
            .all(|a| a["tool"]["name"] == "probe-tool" && a["commit_sha"] == SHA)
    );
    assert!(all.iter().all(|a| a.get("_results").is_none()));
    let by_upload = r[4]["data"].as_array().unwrap();
    assert_eq!(by_upload.len(), 1, "{}", r[4]);
    assert_eq!(by_upload[0]["sarif_id"], r[0]["data"]["id"]);
    assert_eq!(r[5]["data"], json!([]), "{}", r[5]);
    // Alerts: the newest analysis of each set's results.
    let alerts = r[6]["data"].as_array().unwrap();
    let texts: Vec<_> = alerts
        .iter()
        .map(|a| {
            a["most_recent_instance"]["message"]["text"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(texts, ["other", "second"], "{}", r[6]);
    assert_eq!(alerts[1]["rule"]["id"], "rule-1");
    assert_eq!(alerts[1]["most_recent_instance"]["category"], "cat-a");
    assert_eq!(
        alerts[1]["most_recent_instance"]["location"]["path"],
        "a.txt"
    );
    assert_eq!(r[7]["data"]["sarif_id"], r[0]["data"]["id"], "{}", r[7]);

    let (newest_a, oldest_a) = (all[1]["id"].clone(), all[2]["id"].clone());
    let r = octokit(
        &svc,
        &token,
        json!([
            { "call": "codeScanning.deleteAnalysis", "params": { "analysis_id": oldest_a } },
            { "call": "codeScanning.deleteAnalysis", "params": { "analysis_id": newest_a } },
            { "call": "codeScanning.deleteAnalysis", "params": { "analysis_id": oldest_a } },
            { "call": "codeScanning.deleteAnalysis",
              "params": { "analysis_id": oldest_a, "confirm_delete": "true" } },
            { "call": "codeScanning.listRecentAnalyses", "params": { "ref": "refs/heads/dev" } },
        ]),
    );
    assert_eq!(status(&r[0]), 400, "{}", r[0]);
    assert_eq!(
        r[0]["error"]["data"]["message"],
        "Analysis specified is not deletable."
    );
    assert_eq!(status(&r[1]), 200, "{}", r[1]);
    assert!(r[1]["data"]["next_analysis_url"].is_null(), "{}", r[1]);
    assert!(
        r[1]["data"]["confirm_delete_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/analyses/{oldest_a}?confirm_delete=true")),
        "{}",
        r[1]
    );
    assert_eq!(status(&r[2]), 400, "{}", r[2]);
    assert!(
        r[2]["error"]["data"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Analysis is last of its type"),
        "{}",
        r[2]
    );
    assert_eq!(status(&r[3]), 200, "{}", r[3]);
    assert!(r[3]["data"]["confirm_delete_url"].is_null());
    assert_eq!(r[4]["data"].as_array().unwrap().len(), 1, "{}", r[4]);

    let weak = svc.token(CONTENTS_READ);
    let r = octokit(
        &svc,
        &weak,
        json!([
            { "call": "codeScanning.listRecentAnalyses", "params": { "ref": "refs/heads/dev" } },
            { "call": "codeScanning.listAlertsForRepo", "params": { "ref": "refs/heads/dev" } },
        ]),
    );
    assert_refused(&r[0], "security_events=read");
    assert_refused(&r[1], "security_events=read");
}
