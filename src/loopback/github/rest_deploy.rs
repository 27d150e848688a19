//! The REST objects of deployments: deployments, their statuses (which
//! decide whether a deployment is active) and environments.

use super::rest::{
    Call, create, find, invalid, is_sha, list, message, no_content, num, one, page, str_of, update,
};
use super::{Reply, State};
use serde_json::{Value, json};

const STATES: &[&str] = &[
    "error",
    "failure",
    "inactive",
    "in_progress",
    "queued",
    "pending",
    "success",
];

/// The state of a deployment's latest status (None: it has none).
fn latest_state(st: &State, repo: &str, id: &Value) -> Option<String> {
    list(st, "deployment-status", repo, |f| f["deployment"] == *id)
        .last()
        .map(|s| str_of(s, "state").to_string())
}

fn status_of(st: &mut State, repo: &str, deployment: &Value, state: &str, body: &Value) -> Value {
    let f = json!({ "deployment": deployment, "state": state,
        "description": body["description"].as_str().unwrap_or(""),
        "environment": body["environment"].clone(), "log_url": body["log_url"].clone(),
        "environment_url": body["environment_url"].clone(), "target_url": body["target_url"].clone() });
    create(st, "deployment-status", repo, f)
}

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    let repo = c.repo;
    Some(match (c.method, c.p) {
        ("GET", ["deployments"]) => list_deployments(st, c),
        ("POST", ["deployments"]) => create_deployment(st, c),
        ("GET", ["deployments", id]) => one(st, find(st, "deployment", repo, "id", &num(id))),
        ("POST", ["deployments", id, "statuses"]) => create_status(st, c, id),
        ("GET", ["deployments", id, "statuses"]) => {
            let id = num(id);
            if find(st, "deployment", repo, "id", &id).is_none() {
                return Some(message(404, "Not Found"));
            }
            let mut items = list(st, "deployment-status", repo, |f| f["deployment"] == id);
            // Newest first.
            items.reverse();
            page(items, c.url, c.port, 100, None)
        }
        ("GET", ["deployments", id, "statuses", sid]) => {
            let at = find(st, "deployment-status", repo, "id", &num(sid))
                .filter(|&i| st.objects[i].fields["deployment"] == num(id));
            one(st, at)
        }
        // Only an inactive deployment (latest status `inactive`), unless it
        // is the repository's only one; its statuses go with it.
        ("DELETE", ["deployments", id]) => delete_deployment(st, repo, id),
        ("GET", ["environments"]) => page(
            list(st, "environment", repo, |_| true),
            c.url,
            c.port,
            100,
            Some("environments"),
        ),
        ("GET", ["environments", name]) => {
            one(st, find(st, "environment", repo, "name", &json!(name)))
        }
        // Creates or updates; answers 200 with the environment either way.
        ("PUT", ["environments", name]) => put_environment(st, c, name),
        ("DELETE", ["environments", name]) => {
            match find(st, "environment", repo, "name", &json!(name)) {
                Some(i) => {
                    st.objects.remove(i);
                    no_content()
                }
                None => message(404, "Not Found"),
            }
        }
        _ => return None,
    })
}

/// `GET deployments`: those the query's `sha`, `ref`, `task` and
/// `environment` select.
fn list_deployments(st: &State, c: &Call) -> Reply {
    let q = super::super::query(c.url);
    let mut items = list(st, "deployment", c.repo, |f| {
        ["sha", "ref", "task", "environment"]
            .iter()
            .all(|k| q.get(*k).is_none_or(|v| f[*k] == *v))
    });
    // Newest first.
    items.reverse();
    page(items, c.url, c.port, 100, None)
}

/// `POST deployments`: a deployment of `ref` to its environment (made if
/// missing).
fn create_deployment(st: &mut State, c: &Call) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let git_ref = str_of(body, "ref");
    if git_ref.is_empty() {
        return invalid("ref is required");
    }
    let env = body["environment"]
        .as_str()
        .unwrap_or("production")
        .to_string();
    if find(st, "environment", repo, "name", &json!(env)).is_none() {
        // GitHub makes the environment a deployment names.
        let e = json!({ "name": env, "protection_rules": [] });
        create(st, "environment", repo, e);
    }
    let production = body["production_environment"]
        .as_bool()
        .unwrap_or(env == "production");
    let f = json!({ "ref": git_ref, "sha": is_sha(git_ref).then_some(git_ref),
        "task": body["task"].as_str().unwrap_or("deploy"),
        "environment": env, "original_environment": env, "payload": body["payload"].clone(),
        "description": body["description"].clone(),
        "transient_environment": body["transient_environment"].as_bool().unwrap_or(false),
        "production_environment": production });
    Reply::json(201, create(st, "deployment", repo, f))
}

/// `POST deployments/{id}/statuses`.
fn create_status(st: &mut State, c: &Call, id: &str) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let Some(i) = find(st, "deployment", repo, "id", &num(id)) else {
        return message(404, "Not Found");
    };
    let state = str_of(body, "state").to_string();
    if !STATES.contains(&state.as_str()) {
        return invalid("state is not valid");
    }
    if str_of(body, "description").chars().count() > 140 {
        return invalid("description is at most 140 characters");
    }
    let dep = st.objects[i].fields.clone();
    if state == "success" && body["auto_inactive"].as_bool() != Some(false) {
        auto_inactive(st, repo, &dep);
    }
    Reply::json(201, status_of(st, repo, &dep["id"], &state, body))
}

/// `DELETE deployments/{id}`.
fn delete_deployment(st: &mut State, repo: &str, id: &str) -> Reply {
    let id = num(id);
    let Some(i) = find(st, "deployment", repo, "id", &id) else {
        return message(404, "Not Found");
    };
    let only = list(st, "deployment", repo, |_| true).len() == 1;
    if !only && latest_state(st, repo, &id).as_deref() != Some("inactive") {
        return invalid(
            "We cannot delete an active deployment unless it is the only deployment in a given environment.",
        );
    }
    st.objects.remove(i);
    st.objects
        .retain(|o| !(o.kind == "deployment-status" && o.fields["deployment"] == id));
    no_content()
}

/// `PUT environments/{name}`.
fn put_environment(st: &mut State, c: &Call, name: &str) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let wait = &body["wait_timer"];
    if !wait.is_null() && wait.as_u64().is_none_or(|w| w > 43200) {
        return invalid("wait_timer is 0 to 43200 minutes");
    }
    if body["reviewers"].as_array().is_some_and(|r| r.len() > 6) {
        return invalid("at most 6 reviewers");
    }
    let i = match find(st, "environment", repo, "name", &json!(name)) {
        Some(i) => i,
        None => {
            let e = json!({ "name": name, "protection_rules": [] });
            create(st, "environment", repo, e);
            st.objects.len() - 1
        }
    };
    let keys = [
        "wait_timer",
        "prevent_self_review",
        "reviewers",
        "deployment_branch_policy",
    ];
    Reply::json(200, update(st, i, body, &keys))
}

/// `auto_inactive` (default true): a `success` status makes the prior
/// successful deployments to the same environment inactive, unless they
/// are transient or production deployments.
fn auto_inactive(st: &mut State, repo: &str, dep: &Value) {
    let prior: Vec<Value> = list(st, "deployment", repo, |f| {
        f["environment"] == dep["environment"]
            && f["id"].as_u64() < dep["id"].as_u64()
            && f["transient_environment"] != json!(true)
            && f["production_environment"] != json!(true)
    })
    .into_iter()
    .map(|f| f["id"].clone())
    .filter(|id| latest_state(st, repo, id).as_deref() == Some("success"))
    .collect();
    for id in prior {
        status_of(st, repo, &id, "inactive", &json!({}));
    }
}
