//! The REST side: `/api/repos/{owner}/{repo}/…`, the objects of
//! `github-api`'s carriers and the artifacts' listing, download and
//! deletion, each behind the permission GitHub asks for it.

use super::{Object, Reply, State};
use serde_json::{Value, json};

/// What a route needs: alternatives (any one suffices), each
/// (permission, level); `write` implies `read`.
type Need = &'static [(&'static str, &'static str)];

const ISSUES_READ: Need = &[("issues", "read"), ("pull_requests", "read")];
const ISSUES_WRITE: Need = &[("issues", "write"), ("pull_requests", "write")];

fn need(permission: &'static str, write: bool) -> Need {
    macro_rules! pick {
        ($($p:literal),*) => {
            match (permission, write) {
                $(($p, false) => &[($p, "read")], ($p, true) => &[($p, "write")],)*
                _ => &[],
            }
        };
    }
    pick!(
        "actions",
        "checks",
        "contents",
        "deployments",
        "statuses",
        "actions_variables",
        "administration"
    )
}

fn allowed(perms: &super::Permissions, need: Need) -> bool {
    need.iter()
        .any(|(p, level)| match perms.get(*p).map(String::as_str) {
            Some("write") => true,
            Some("read") => *level == "read",
            _ => false,
        })
}

fn header_of(need: Need) -> String {
    need.iter()
        .map(|(p, l)| format!("{p}={l}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn message(status: u16, text: &str) -> Reply {
    Reply::json(
        status,
        json!({ "message": text, "documentation_url": "https://docs.github.com/rest", "status": status.to_string() }),
    )
}

fn invalid(text: &str) -> Reply {
    Reply::json(
        422,
        json!({ "message": "Validation Failed", "errors": [{ "message": text }], "status": "422" }),
    )
}

fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One page of a listing that says `total_count` (`wrap` names the array).
pub fn page_of(items: Vec<Value>, url: &str, port: u16, wrap: &str) -> Reply {
    page(items, url, port, 100, Some(wrap))
}

/// One page of `items` with GitHub's `Link` header; `wrap` names the
/// field the page goes in (with `total_count`), else the body is the array.
fn page(items: Vec<Value>, url: &str, port: u16, max: usize, wrap: Option<&str>) -> Reply {
    let q = super::super::query(url);
    let per_page = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30usize)
        .clamp(1, max);
    let pageno = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    let total = items.len();
    let last = total.div_ceil(per_page).max(1);
    let chunk: Vec<Value> = items
        .into_iter()
        .skip((pageno - 1) * per_page)
        .take(per_page)
        .collect();
    let body = match wrap {
        Some(k) => json!({ "total_count": total, k: chunk }),
        None => Value::Array(chunk),
    };
    let mut reply = Reply::json(200, body);
    let link_to = |n: usize| {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let mut parts: Vec<String> = query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page="))
            .map(String::from)
            .collect();
        parts.push(format!("page={n}"));
        format!("<http://127.0.0.1:{port}{path}?{}>", parts.join("&"))
    };
    let mut links = vec![];
    if pageno < last {
        links.push(format!("{}; rel=\"next\"", link_to(pageno + 1)));
        links.push(format!("{}; rel=\"last\"", link_to(last)));
    }
    if pageno > 1 {
        links.push(format!("{}; rel=\"prev\"", link_to(pageno - 1)));
        links.push(format!("{}; rel=\"first\"", link_to(1)));
    }
    if !links.is_empty() {
        reply = reply.with("Link", &links.join(", "));
    }
    reply
}

pub fn route(
    st: &mut State,
    method: &str,
    rest: &str,
    url: &str,
    auth: &str,
    body: &[u8],
    port: u16,
) -> Reply {
    let parts: Vec<String> = rest.split('/').map(super::super::percent_decode).collect();
    if parts.len() < 3 {
        return message(404, "Not Found");
    }
    let repo = format!("{}/{}", parts[0], parts[1]);
    let p: Vec<&str> = parts[2..].iter().map(String::as_str).collect();
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "));
    let perms = match token.map(|t| st.tokens.get(t).cloned()) {
        None => return message(404, "Not Found"),
        Some(None) => return message(401, "Bad credentials"),
        Some(Some(p)) => p,
    };
    let read = method == "GET";
    let need: Need = match p.as_slice() {
        ["labels", ..] | ["issues", ..] | ["milestones", ..] if read => ISSUES_READ,
        ["labels", ..] | ["issues", ..] | ["milestones", ..] => ISSUES_WRITE,
        ["releases", ..] | ["git", ..] => need("contents", !read),
        ["deployments", ..] => need("deployments", !read),
        ["environments", _] if !read => need("administration", true),
        ["environments"] => need("actions", false),
        ["actions", "variables", ..] => need("actions_variables", !read),
        ["statuses", _] | ["commits", _, "statuses"] => need("statuses", !read),
        ["check-runs", ..] | ["commits", _, "check-runs"] => need("checks", !read),
        ["actions", "artifacts", ..] | ["actions", "runs", ..] => need("actions", !read),
        _ => return message(404, "Not Found"),
    };
    if !allowed(&perms, need) {
        return message(403, "Resource not accessible by integration")
            .with("X-Accepted-GitHub-Permissions", &header_of(need));
    }
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let can_write_contents = allowed(&perms, need_contents_write());
    let reply = objects(st, method, &repo, &p, &body, url, port, can_write_contents);
    reply.with("X-Accepted-GitHub-Permissions", &header_of(need))
}

fn need_contents_write() -> Need {
    need("contents", true)
}

/// The index of the object of `kind` in `repo` whose `key` field is `v`.
fn find(st: &State, kind: &str, repo: &str, key: &str, v: &Value) -> Option<usize> {
    st.objects.iter().position(|o| {
        o.kind == kind
            && o.repo == repo
            && match (&o.fields[key], v) {
                (Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
                (a, b) => a == b,
            }
    })
}

fn list(st: &State, kind: &str, repo: &str, keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    st.objects
        .iter()
        .filter(|o| o.kind == kind && o.repo == repo && keep(&o.fields))
        .map(|o| o.fields.clone())
        .collect()
}

fn create(st: &mut State, kind: &'static str, repo: &str, mut fields: Value) -> Value {
    let id = st.next_id();
    fields["id"] = json!(id);
    fields["created_at"] = json!("2026-11-30T00:00:00Z");
    st.objects.push(Object {
        kind,
        repo: repo.into(),
        fields: fields.clone(),
    });
    fields
}

fn remove(st: &mut State, at: Option<usize>) -> Reply {
    match at {
        Some(i) => {
            st.objects.remove(i);
            Reply::raw(204, "application/json", vec![])
        }
        None => message(404, "Not Found"),
    }
}

fn one(st: &State, at: Option<usize>) -> Reply {
    match at {
        Some(i) => Reply::json(200, st.objects[i].fields.clone()),
        None => message(404, "Not Found"),
    }
}

fn num(s: &str) -> Value {
    s.parse::<u64>().map(Value::from).unwrap_or(Value::Null)
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

fn commit_known(st: &State, repo: &str, sha: &str) -> bool {
    is_sha(sha) && find(st, "commit", repo, "sha", &json!(sha)).is_some()
}

#[allow(clippy::too_many_arguments)]
fn objects(
    st: &mut State,
    method: &str,
    repo: &str,
    p: &[&str],
    body: &Value,
    url: &str,
    port: u16,
    can_write_contents: bool,
) -> Reply {
    match (method, p) {
        ("GET", ["labels"]) => page(list(st, "label", repo, |_| true), url, port, 100, None),
        ("POST", ["labels"]) => {
            let name = str_of(body, "name");
            if name.is_empty() || str_of(body, "description").chars().count() > 100 {
                return invalid("name is required; description is at most 100 characters");
            }
            if find(st, "label", repo, "name", &json!(name)).is_some() {
                return invalid("already_exists");
            }
            let f = json!({ "name": name, "color": body["color"].as_str().unwrap_or("ededed"),
                "description": body["description"].clone(), "default": false });
            Reply::json(201, create(st, "label", repo, f))
        }
        ("GET", ["labels", name]) => one(st, find(st, "label", repo, "name", &json!(name))),
        ("DELETE", ["labels", name]) => {
            let at = find(st, "label", repo, "name", &json!(name));
            remove(st, at)
        }
        ("GET", ["issues", n, "comments"]) => {
            let n = num(n);
            page(
                list(st, "comment", repo, |f| f["issue"] == n),
                url,
                port,
                100,
                None,
            )
        }
        ("POST", ["issues", n, "comments"]) => {
            let text = str_of(body, "body");
            if text.is_empty() || text.chars().count() > 65536 {
                return invalid("body is required and at most 65536 characters");
            }
            let f = json!({ "issue": num(n), "body": text, "user": { "login": "github-actions[bot]" } });
            Reply::json(201, create(st, "comment", repo, f))
        }
        ("GET", ["issues", "comments", id]) => one(st, find(st, "comment", repo, "id", &num(id))),
        ("PATCH", ["issues", "comments", id]) => match find(st, "comment", repo, "id", &num(id)) {
            Some(i) if !str_of(body, "body").is_empty() => {
                st.objects[i].fields["body"] = body["body"].clone();
                Reply::json(200, st.objects[i].fields.clone())
            }
            Some(_) => invalid("body is required"),
            None => message(404, "Not Found"),
        },
        ("DELETE", ["issues", "comments", id]) => {
            let at = find(st, "comment", repo, "id", &num(id));
            remove(st, at)
        }
        ("GET", ["milestones"]) => {
            let q = super::super::query(url);
            let state = q.get("state").cloned().unwrap_or_else(|| "open".into());
            let items = list(st, "milestone", repo, |f| {
                state == "all" || f["state"].as_str() == Some(state.as_str())
            });
            page(items, url, port, 100, None)
        }
        ("POST", ["milestones"]) => {
            let title = str_of(body, "title");
            if title.is_empty() || find(st, "milestone", repo, "title", &json!(title)).is_some() {
                return invalid("title is required and unique");
            }
            let state = body["state"].as_str().unwrap_or("open");
            let id = st.next;
            let f = json!({ "number": id + 1, "title": title, "state": state,
                "description": body["description"].clone() });
            Reply::json(201, create(st, "milestone", repo, f))
        }
        ("GET", ["milestones", n]) => one(st, find(st, "milestone", repo, "number", &num(n))),
        ("DELETE", ["milestones", n]) => {
            let at = find(st, "milestone", repo, "number", &num(n));
            remove(st, at)
        }
        ("GET", ["releases"]) => {
            // Drafts only to those who may push.
            let items = list(st, "release", repo, |f| {
                can_write_contents || f["draft"] != json!(true)
            });
            page(items, url, port, 100, None)
        }
        ("POST", ["releases"]) => {
            if str_of(body, "tag_name").is_empty() {
                return invalid("tag_name is required");
            }
            let f = json!({ "tag_name": body["tag_name"].clone(), "name": body["name"].clone(),
                "body": body["body"].clone(), "draft": body["draft"].as_bool().unwrap_or(false),
                "prerelease": body["prerelease"].as_bool().unwrap_or(false) });
            Reply::json(201, create(st, "release", repo, f))
        }
        ("GET", ["releases", id]) => one(st, find(st, "release", repo, "id", &num(id))),
        ("DELETE", ["releases", id]) => {
            let at = find(st, "release", repo, "id", &num(id));
            remove(st, at)
        }
        ("GET", ["deployments"]) => {
            let mut items = list(st, "deployment", repo, |_| true);
            items.reverse();
            page(items, url, port, 100, None)
        }
        ("POST", ["deployments"]) => {
            if str_of(body, "ref").is_empty() {
                return invalid("ref is required");
            }
            let env = body["environment"]
                .as_str()
                .unwrap_or("production")
                .to_string();
            if find(st, "environment", repo, "name", &json!(env)).is_none() {
                // GitHub makes the environment a deployment names.
                create(st, "environment", repo, json!({ "name": env }));
            }
            let f = json!({ "ref": body["ref"].clone(), "task": body["task"].as_str().unwrap_or("deploy"),
                "environment": env, "payload": body["payload"].clone(),
                "description": body["description"].clone(), "state": "pending" });
            Reply::json(201, create(st, "deployment", repo, f))
        }
        ("GET", ["deployments", id]) => one(st, find(st, "deployment", repo, "id", &num(id))),
        ("POST", ["deployments", id, "statuses"]) => {
            let Some(i) = find(st, "deployment", repo, "id", &num(id)) else {
                return message(404, "Not Found");
            };
            let state = str_of(body, "state").to_string();
            if ![
                "error",
                "failure",
                "inactive",
                "in_progress",
                "queued",
                "pending",
                "success",
            ]
            .contains(&state.as_str())
            {
                return invalid("state is not valid");
            }
            st.objects[i].fields["state"] = json!(state);
            let f = json!({ "deployment": num(id), "state": state });
            Reply::json(201, create(st, "deployment-status", repo, f))
        }
        ("DELETE", ["deployments", id]) => {
            let at = find(st, "deployment", repo, "id", &num(id));
            let only = list(st, "deployment", repo, |_| true).len() == 1;
            match at {
                Some(i) if st.objects[i].fields["state"] != "inactive" && !only => invalid(
                    "We cannot delete an active deployment unless it is the only deployment in a given environment.",
                ),
                at => remove(st, at),
            }
        }
        ("GET", ["environments"]) => page(
            list(st, "environment", repo, |_| true),
            url,
            port,
            100,
            Some("environments"),
        ),
        ("DELETE", ["environments", name]) => {
            let at = find(st, "environment", repo, "name", &json!(name));
            remove(st, at)
        }
        ("GET", ["actions", "variables"]) => page(
            list(st, "variable", repo, |_| true),
            url,
            port,
            30,
            Some("variables"),
        ),
        ("POST", ["actions", "variables"]) => {
            let name = str_of(body, "name").to_ascii_uppercase();
            let ok = !name.is_empty()
                && !name.starts_with("GITHUB_")
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok || body["value"].as_str().is_none() {
                return invalid("name is not a valid variable name, or value is missing");
            }
            if find(st, "variable", repo, "name", &json!(name)).is_some() {
                return message(409, "Already exists");
            }
            create(
                st,
                "variable",
                repo,
                json!({ "name": name, "value": body["value"].clone() }),
            );
            Reply::json(201, json!({}))
        }
        ("GET", ["actions", "variables", name]) => {
            one(st, find(st, "variable", repo, "name", &json!(name)))
        }
        ("DELETE", ["actions", "variables", name]) => {
            let at = find(st, "variable", repo, "name", &json!(name));
            remove(st, at)
        }
        ("POST", ["statuses", sha]) => {
            let state = str_of(body, "state");
            if !commit_known(st, repo, sha)
                || !["error", "failure", "pending", "success"].contains(&state)
            {
                return invalid("No commit found for SHA, or state is not valid");
            }
            let f = json!({ "sha": sha, "state": state, "context": body["context"].as_str().unwrap_or("default"),
                "description": body["description"].clone(), "target_url": body["target_url"].clone() });
            Reply::json(201, create(st, "status", repo, f))
        }
        ("GET", ["commits", sha, "statuses"]) => {
            let mut items = list(st, "status", repo, |f| f["sha"] == *sha);
            items.reverse();
            page(items, url, port, 100, None)
        }
        ("POST", ["check-runs"]) => check_run(st, repo, body),
        ("PATCH", ["check-runs", id]) => {
            let Some(i) = find(st, "check-run", repo, "id", &num(id)) else {
                return message(404, "Not Found");
            };
            let notes = body["output"]["annotations"].as_array().cloned();
            if notes.as_ref().is_some_and(|a| a.len() > 50) {
                return invalid("Only 50 annotations are allowed per request");
            }
            let f = &mut st.objects[i].fields;
            if let Some(a) = notes
                && let Some(all) = f["output"]["annotations"].as_array_mut()
            {
                all.extend(a);
            }
            for k in ["status", "conclusion", "name"] {
                if !body[k].is_null() {
                    f[k] = body[k].clone();
                }
            }
            for k in ["title", "summary", "text"] {
                if !body["output"][k].is_null() {
                    f["output"][k] = body["output"][k].clone();
                }
            }
            Reply::json(200, f.clone())
        }
        ("GET", ["check-runs", id]) => one(st, find(st, "check-run", repo, "id", &num(id))),
        ("GET", ["commits", sha, "check-runs"]) => {
            let items = list(st, "check-run", repo, |f| f["head_sha"] == *sha);
            page(items, url, port, 100, Some("check_runs"))
        }
        ("POST", ["git", "trees"]) | ("POST", ["git", "commits"]) => {
            let mut seed = body.to_string();
            seed.push_str(&st.next_id().to_string());
            let sha =
                crate::nonce::to_hex(&sha2::Sha256::digest(seed.as_bytes()))[..40].to_string();
            if p[1] == "commits" {
                if !body["tree"].as_str().is_some_and(is_sha) {
                    return invalid("tree is not a valid sha");
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
        _ => super::rest_artifacts::route(st, method, repo, p, url, port),
    }
}

use sha2::Digest as _;

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
    if notes.len() > 50 {
        return invalid("Only 50 annotations are allowed per request");
    }
    if !output.is_null()
        && (output["title"].as_str().is_none() || output["summary"].as_str().is_none())
    {
        return invalid("output needs a title and a summary");
    }
    let f = json!({ "name": body["name"].clone(), "head_sha": sha,
        "status": body["status"].as_str().unwrap_or("queued"), "conclusion": body["conclusion"].clone(),
        "external_id": body["external_id"].clone(),
        "output": { "title": output["title"].clone(), "summary": output["summary"].clone(),
            "text": output["text"].clone(), "annotations": notes } });
    Reply::json(201, create(st, "check-run", repo, f))
}
