//! The REST objects hung on commits: git trees and commits (so a test can
//! make a commit the server knows), commit statuses and check runs; and
//! branches as `GET …/branches/{branch}` shows one (its `protected`), from
//! the `branch` objects a test adds.

use super::rest::{
    Call, create, find, invalid, is_sha, list, message, num, one, page, str_of, update,
};
use super::{Reply, State};
use serde_json::{Value, json};
use sha2::Digest as _;

fn commit_known(st: &State, repo: &str, sha: &str) -> bool {
    is_sha(sha) && find(st, "commit", repo, "sha", &json!(sha)).is_some()
}

/// At most this many statuses per sha and context (then a validation
/// error).
const MAX_STATUSES: usize = 1000;

const MAX_ANNOTATIONS: usize = 50;

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    let (repo, body) = (c.repo, c.body);
    Some(match (c.method, c.p) {
        ("GET", ["contents", path @ ..]) => contents(st, c, &path.join("/")),
        ("GET", ["branches", name @ ..]) if !name.is_empty() => {
            one(st, find(st, "branch", repo, "name", &json!(name.join("/"))))
        }
        ("POST", ["statuses", sha]) => {
            let state = str_of(body, "state");
            if !commit_known(st, repo, sha)
                || !["error", "failure", "pending", "success"].contains(&state)
            {
                return Some(invalid("No commit found for SHA, or state is not valid"));
            }
            let context = body["context"].as_str().unwrap_or("default").to_string();
            let same = list(st, "status", repo, |f| {
                f["sha"] == *sha && str_of(f, "context").eq_ignore_ascii_case(&context)
            });
            if same.len() >= MAX_STATUSES {
                return Some(invalid(
                    "This SHA and context has reached the maximum number of statuses.",
                ));
            }
            let f = json!({ "sha": sha, "state": state, "context": context,
                "description": body["description"].clone(), "target_url": body["target_url"].clone() });
            Reply::json(201, create(st, "status", repo, f))
        }
        ("GET", ["commits", sha, "statuses"]) => {
            let mut items = list(st, "status", repo, |f| f["sha"] == *sha);
            items.reverse();
            page(items, c.url, c.port, 100, None)
        }
        ("GET", ["commits", sha, "status"]) => combined(st, repo, sha),
        ("POST", ["check-runs"]) => check_run(st, repo, body),
        ("PATCH", ["check-runs", id]) => {
            let Some(i) = find(st, "check-run", repo, "id", &num(id)) else {
                return Some(message(404, "Not Found"));
            };
            let notes = body["output"]["annotations"].as_array().cloned();
            if notes.as_ref().is_some_and(|a| a.len() > MAX_ANNOTATIONS) {
                return Some(invalid("Only 50 annotations are allowed per request"));
            }
            let f = &mut st.objects[i].fields;
            // Annotations accumulate over updates.
            if let Some(a) = notes
                && let Some(all) = f["output"]["annotations"].as_array_mut()
            {
                all.extend(a);
                f["output"]["annotations_count"] = json!(all.len());
            }
            for k in ["title", "summary", "text"] {
                if !body["output"][k].is_null() {
                    f["output"][k] = body["output"][k].clone();
                }
            }
            let mut f = update(st, i, body, &["status", "conclusion", "name"]);
            // A conclusion completes the run.
            if !body["conclusion"].is_null() {
                f["status"] = json!("completed");
                st.objects[i].fields["status"] = json!("completed");
            }
            Reply::json(200, f)
        }
        ("GET", ["check-runs", id]) => one(st, find(st, "check-run", repo, "id", &num(id))),
        ("GET", ["check-runs", id, "annotations"]) => {
            let Some(i) = find(st, "check-run", repo, "id", &num(id)) else {
                return Some(message(404, "Not Found"));
            };
            let notes = st.objects[i].fields["output"]["annotations"].clone();
            let notes = notes.as_array().cloned().unwrap_or_default();
            page(notes, c.url, c.port, 100, None)
        }
        ("GET", ["commits", sha, "check-runs"]) => {
            let items = list(st, "check-run", repo, |f| f["head_sha"] == *sha);
            page(items, c.url, c.port, 100, Some("check_runs"))
        }
        ("POST", ["git", kind @ ("trees" | "commits")]) => {
            let mut seed = body.to_string();
            seed.push_str(&st.next_id().to_string());
            let sha =
                crate::nonce::to_hex(&sha2::Sha256::digest(seed.as_bytes()))[..40].to_string();
            if *kind == "commits" {
                if !body["tree"].as_str().is_some_and(is_sha) {
                    return Some(invalid("tree is not a valid sha"));
                }
                create(
                    st,
                    "commit",
                    repo,
                    json!({ "sha": sha, "message": body["message"].clone() }),
                );
            }
            Reply::json(201, json!({ "sha": sha }))
        }
        _ => return None,
    })
}

/// The combined status of a commit: the latest status per context, and
/// `failure` if any is error or failure, else `pending` if there are none
/// or one is pending, else `success`.
fn combined(st: &State, repo: &str, sha: &str) -> Reply {
    let mut latest: Vec<Value> = vec![];
    for s in list(st, "status", repo, |f| f["sha"] == *sha)
        .into_iter()
        .rev()
    {
        let ctx = str_of(&s, "context").to_ascii_lowercase();
        if !latest
            .iter()
            .any(|l| str_of(l, "context").eq_ignore_ascii_case(&ctx))
        {
            latest.push(s);
        }
    }
    let states: Vec<&str> = latest.iter().map(|s| str_of(s, "state")).collect();
    let state = if states.iter().any(|s| *s == "error" || *s == "failure") {
        "failure"
    } else if states.is_empty() || states.contains(&"pending") {
        "pending"
    } else {
        "success"
    };
    Reply::json(
        200,
        json!({ "state": state, "sha": sha, "total_count": latest.len(), "statuses": latest,
            "repository": { "full_name": repo } }),
    )
}

fn check_run(st: &mut State, repo: &str, body: &Value) -> Reply {
    let sha = str_of(body, "head_sha");
    if str_of(body, "name").is_empty() || !commit_known(st, repo, sha) {
        return invalid("name is required and head_sha must be a commit of this repository");
    }
    let output = &body["output"];
    let notes = output["annotations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if notes.len() > MAX_ANNOTATIONS {
        return invalid("Only 50 annotations are allowed per request");
    }
    if !output.is_null()
        && (output["title"].as_str().is_none() || output["summary"].as_str().is_none())
    {
        return invalid("output needs a title and a summary");
    }
    // A conclusion completes the run, whatever `status` said.
    let status = match body["conclusion"].is_null() {
        true => body["status"].as_str().unwrap_or("queued"),
        false => "completed",
    };
    let f = json!({ "name": body["name"].clone(), "head_sha": sha,
        "status": status, "conclusion": body["conclusion"].clone(),
        "external_id": body["external_id"].clone(),
        "output": { "title": output["title"].clone(), "summary": output["summary"].clone(),
            "text": output["text"].clone(), "annotations_count": notes.len(), "annotations": notes } });
    Reply::json(201, create(st, "check-run", repo, f))
}

/// A file at a commit (what coverage reads a workflow with): the contents
/// API's JSON, its content base64 in lines of 60 as GitHub sends it.
fn contents(st: &State, c: &Call, path: &str) -> Reply {
    let q = crate::loopback::query(c.url);
    let at = q.get("ref").cloned().unwrap_or_default();
    // (The newest of one path and ref: a test that adds it again
    // replaces it.)
    let file = st.objects.iter().rev().find(|o| {
        o.kind == "file" && o.repo == c.repo && o.fields["path"] == *path && o.fields["ref"] == *at
    });
    let Some(f) = file else {
        return message(404, "Not Found");
    };
    let b64 = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        str_of(&f.fields, "text").as_bytes(),
    );
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(60)
        .map(|c| std::str::from_utf8(c).unwrap_or(""))
        .collect();
    Reply::json(
        200,
        json!({ "type": "file", "encoding": "base64", "path": path,
            "content": lines.join("\n") + "\n" }),
    )
}
