//! The REST side of artifacts: the repository's and a run's listings,
//! one artifact, its zip (a redirect to a signed blob URL, as GitHub
//! answers) and its deletion.

use super::{Artifact, Reply, State};
use serde_json::{Value, json};

fn listed(a: &Artifact, port: u16) -> Value {
    let base = format!(
        "http://127.0.0.1:{port}/api/repos/{}/actions/artifacts/{}",
        a.repo, a.id
    );
    json!({
        "id": a.id,
        "node_id": format!("MDg6QXJ0aWZhY3Q{}", a.id),
        "name": a.name,
        "size_in_bytes": a.data.as_ref().map(Vec::len).unwrap_or(0),
        "url": base,
        "archive_download_url": format!("{base}/zip"),
        "expired": false,
        "created_at": "2026-11-30T00:00:00Z",
        "updated_at": "2026-11-30T00:00:00Z",
        "expires_at": "2027-02-28T00:00:00Z",
        "digest": a.digest,
        "workflow_run": { "id": a.run_id, "repository_id": 1, "head_repository_id": 1,
            "head_branch": "main", "head_sha": "0000000000000000000000000000000000000000" },
    })
}

fn not_found() -> Reply {
    Reply::json(404, json!({ "message": "Not Found", "status": "404" }))
}

pub fn route(st: &mut State, method: &str, repo: &str, p: &[&str], url: &str, port: u16) -> Reply {
    let q = super::super::query(url);
    let name = q.get("name").cloned();
    let lag_after = st.lag_after.filter(|_| name.is_none());
    let visible = |run: Option<u64>| -> Vec<Value> {
        let mut v: Vec<&Artifact> = st
            .artifacts
            .iter()
            .filter(|a| a.finalized && a.repo == repo)
            .filter(|a| lag_after.is_none_or(|n| a.id <= n))
            .filter(|a| run.is_none_or(|r| a.run_id == r))
            .filter(|a| name.as_ref().is_none_or(|n| &a.name == n))
            .collect();
        // Newest first, as GitHub lists them.
        v.sort_by_key(|a| std::cmp::Reverse(a.id));
        v.into_iter().map(|a| listed(a, port)).collect()
    };
    let id_of = |s: &str| s.parse::<u64>().ok();
    match (method, p) {
        ("GET", ["actions", "artifacts"]) => {
            let items = visible(None);
            super::rest::page_of(items, url, port, "artifacts")
        }
        ("GET", ["actions", "runs", run, "artifacts"]) => match id_of(run) {
            Some(r) => {
                let items = visible(Some(r));
                super::rest::page_of(items, url, port, "artifacts")
            }
            None => not_found(),
        },
        ("GET", ["actions", "artifacts", id]) => {
            match st
                .artifacts
                .iter()
                .find(|a| a.finalized && a.repo == repo && Some(a.id) == id_of(id))
            {
                Some(a) => Reply::json(200, listed(a, port)),
                None => not_found(),
            }
        }
        ("GET", ["actions", "artifacts", id, "zip"]) => {
            match st
                .artifacts
                .iter()
                .find(|a| a.finalized && a.repo == repo && Some(a.id) == id_of(id))
            {
                Some(a) => {
                    let location = format!(
                        "http://127.0.0.1:{port}{}{}?sv=2025-01-05&sr=b&se=2026-11-30T00%3A01%3A00Z&sig={}",
                        super::artifacts::BLOB,
                        a.id,
                        st.sig
                    );
                    Reply::raw(302, "text/plain", vec![]).with("Location", &location)
                }
                None => not_found(),
            }
        }
        ("DELETE", ["actions", "artifacts", id]) => {
            match st
                .artifacts
                .iter()
                .position(|a| a.finalized && a.repo == repo && Some(a.id) == id_of(id))
            {
                Some(i) => {
                    st.artifacts.remove(i);
                    Reply::raw(204, "application/json", vec![])
                }
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}
