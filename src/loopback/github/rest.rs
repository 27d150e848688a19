//! The REST side: `/api/repos/{owner}/{repo}/…`, the objects of
//! `github-api`'s carriers and the artifacts' listing, download and
//! deletion, each behind the permission GitHub asks for it. This file
//! holds the permission check, paging and the shared helpers, and the
//! releases and repository variables; the other kinds are in
//! rest_issues.rs (labels, comments, milestones), rest_commits.rs (git
//! objects, commit statuses, check runs), rest_deploy.rs (deployments,
//! environments) and rest_artifacts.rs.

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
        "administration",
        "security_events"
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

pub(super) fn message(status: u16, text: &str) -> Reply {
    Reply::json(
        status,
        json!({ "message": text, "documentation_url": "https://docs.github.com/rest", "status": status.to_string() }),
    )
}

pub(super) fn invalid(text: &str) -> Reply {
    Reply::json(
        422,
        json!({ "message": "Validation Failed", "errors": [{ "message": text }], "status": "422" }),
    )
}

pub(super) fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One page of a listing that says `total_count` (`wrap` names the array).
pub fn page_of(items: Vec<Value>, url: &str, port: u16, wrap: &str) -> Reply {
    page(items, url, port, 100, Some(wrap))
}

/// One page of `items` with GitHub's `Link` header; `wrap` names the
/// field the page goes in (with `total_count`), else the body is the array.
pub(super) fn page(
    items: Vec<Value>,
    url: &str,
    port: u16,
    max: usize,
    wrap: Option<&str>,
) -> Reply {
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
    reply.paged()
}

/// One request to an object route, after its permission was granted.
pub(super) struct Call<'a> {
    pub method: &'a str,
    pub repo: &'a str,
    /// The path after `/repos/{owner}/{repo}/`, percent-decoded.
    pub p: &'a [&'a str],
    pub body: &'a Value,
    pub url: &'a str,
    pub port: u16,
    /// Push access: sees draft releases.
    pub can_write_contents: bool,
    /// Who the token writes as.
    pub login: String,
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
    let reply = if st.shifter.is_on() && method == "GET" {
        // Every numbered listing, shifted: the shift reads the listing as
        // this server has it, page by page.
        let mut shifter = std::mem::take(&mut st.shifter);
        let origin = format!("http://127.0.0.1:{port}");
        let reply = shifter.serve(&origin, url, &mut |u| {
            let rest = u.split('?').next().unwrap_or("");
            let rest = rest.strip_prefix("/api/repos/").unwrap_or(rest);
            checked(st, method, rest, u, auth, body, port)
        });
        st.shifter = shifter;
        reply
    } else {
        checked(st, method, rest, url, auth, body, port)
    };
    // GitHub sends a request id with every response; the toolkit quotes
    // it in its errors.
    let n = st.log.len();
    reply.with("X-GitHub-Request-Id", &format!("0000:{n:06X}:STANDIN"))
}

fn checked(
    st: &mut State,
    method: &str,
    rest: &str,
    url: &str,
    auth: &str,
    body: &[u8],
    port: u16,
) -> Reply {
    let parts: Vec<String> = rest.split('/').map(crate::wire::percent_decode).collect();
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
        ["releases", ..] | ["git", ..] | ["contents", ..] | ["branches", ..] => {
            need("contents", !read)
        }
        ["deployments", ..] => need("deployments", !read),
        // Environments are read with `actions` and written with
        // `administration` (docs: "Actions" read; "Administration" write).
        ["environments", ..] if read => need("actions", false),
        ["environments", _] => need("administration", true),
        ["actions", "variables", ..] => need("actions_variables", !read),
        ["statuses", _] | ["commits", _, "statuses" | "status"] => need("statuses", !read),
        ["check-runs", ..] | ["commits", _, "check-runs"] => need("checks", !read),
        ["actions", "artifacts" | "runs" | "jobs" | "workflows", ..] => need("actions", !read),
        ["dispatches"] => need("contents", true),
        ["code-scanning", ..] => need("security_events", !read),
        _ => return message(404, "Not Found"),
    };
    if !allowed(&perms, need) {
        return message(403, "Resource not accessible by integration")
            .with("X-Accepted-GitHub-Permissions", &header_of(need));
    }
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let push = allowed(&perms, need_contents_write());
    let call = Call {
        method,
        repo: &repo,
        p: &p,
        body: &body,
        url,
        port,
        can_write_contents: push,
        login: login_of(st, token.unwrap_or("")),
    };
    let reply = super::rest_issues::route(st, &call)
        .or_else(|| super::rest_commits::route(st, &call))
        .or_else(|| super::rest_deploy::route(st, &call))
        .or_else(|| super::rest_scanning::route(st, &call))
        .or_else(|| super::rest_runs::route(st, &call))
        .or_else(|| super::rest_dispatch::route(st, &call))
        .or_else(|| repo_objects(st, &call))
        .unwrap_or_else(|| super::rest_artifacts::route(st, method, &repo, &p, url, port));
    reply.with("X-Accepted-GitHub-Permissions", &header_of(need))
}

/// `GET /user`: who the token is. A token this server minted is an
/// installation token, like `GITHUB_TOKEN`, which GitHub answers with its
/// 403 (an integration is no user).
pub fn user(st: &State, auth: &str) -> Reply {
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "));
    let reply = match token {
        Some(t) if st.tokens.contains_key(t) => match st.logins.get(t) {
            Some((login, true)) => Reply::json(200, json!({ "login": login, "type": "User" })),
            _ => message(403, "Resource not accessible by integration"),
        },
        _ => message(401, "Requires authentication"),
    };
    reply.with(
        "X-GitHub-Request-Id",
        &format!("0000:{:06X}:STANDIN", st.log.len()),
    )
}

/// Who `token` writes as: its login, else `github-actions[bot]`.
pub(super) fn login_of(st: &State, token: &str) -> String {
    st.logins
        .get(token)
        .map(|(l, _)| l.clone())
        .unwrap_or_else(|| "github-actions[bot]".into())
}

fn need_contents_write() -> Need {
    need("contents", true)
}

/// The index of the object of `kind` in `repo` whose `key` field is `v`.
pub(super) fn find(st: &State, kind: &str, repo: &str, key: &str, v: &Value) -> Option<usize> {
    st.objects.iter().position(|o| {
        o.kind == kind
            && o.repo == repo
            && match (&o.fields[key], v) {
                (Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
                (a, b) => a == b,
            }
    })
}

pub(super) fn list(
    st: &State,
    kind: &str,
    repo: &str,
    keep: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let shown = |o: &&super::Object| {
        st.lag_after
            .is_none_or(|n| o.fields["id"].as_u64().is_none_or(|id| id <= n))
    };
    st.objects
        .iter()
        .filter(|o| o.kind == kind && o.repo == repo && keep(&o.fields))
        .filter(shown)
        .map(|o| o.fields.clone())
        .collect()
}

pub(super) fn create(st: &mut State, kind: &'static str, repo: &str, mut fields: Value) -> Value {
    let id = st.next_id();
    fields["id"] = json!(id);
    fields["created_at"] = json!("2026-11-30T00:00:00Z");
    fields["updated_at"] = json!("2026-11-30T00:00:00Z");
    st.objects.push(Object {
        kind,
        repo: repo.into(),
        fields: fields.clone(),
    });
    fields
}

pub(super) fn no_content() -> Reply {
    Reply::raw(204, "application/json", vec![])
}

pub(super) fn remove(st: &mut State, at: Option<usize>) -> Reply {
    match at {
        Some(i) => {
            st.objects.remove(i);
            no_content()
        }
        None => message(404, "Not Found"),
    }
}

pub(super) fn one(st: &State, at: Option<usize>) -> Reply {
    match at {
        Some(i) => Reply::json(200, st.objects[i].fields.clone()),
        None => message(404, "Not Found"),
    }
}

pub(super) fn num(s: &str) -> Value {
    s.parse::<u64>().map(Value::from).unwrap_or(Value::Null)
}

pub(super) fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// Copies the fields of `body` named in `keys` that it sets onto object `i`.
pub(super) fn update(st: &mut State, i: usize, body: &Value, keys: &[&str]) -> Value {
    let f = &mut st.objects[i].fields;
    for k in keys {
        if !body[*k].is_null() {
            f[*k] = body[*k].clone();
        }
    }
    f["updated_at"] = json!("2026-11-30T00:00:01Z");
    f.clone()
}

/// Releases and repository variables.
fn repo_objects(st: &mut State, c: &Call) -> Option<Reply> {
    let (repo, body) = (c.repo, c.body);
    Some(match (c.method, c.p) {
        ("GET", ["releases"]) => {
            // Drafts only to those who may push.
            let items = list(st, "release", repo, |f| {
                c.can_write_contents || f["draft"] != json!(true)
            });
            page(items, c.url, c.port, 100, None)
        }
        ("POST", ["releases"]) => {
            if str_of(body, "tag_name").is_empty() {
                return Some(invalid("tag_name is required"));
            }
            let f = json!({ "tag_name": body["tag_name"].clone(), "name": body["name"].clone(),
                "body": body["body"].clone(), "draft": body["draft"].as_bool().unwrap_or(false),
                "prerelease": body["prerelease"].as_bool().unwrap_or(false) });
            Reply::json(201, create(st, "release", repo, f))
        }
        // Published releases only: a draft has no tag yet, even for a writer.
        ("GET", ["releases", "tags", tag]) => {
            let at = st.objects.iter().position(|o| {
                o.kind == "release"
                    && o.repo == repo
                    && o.fields["tag_name"] == *tag
                    && o.fields["draft"] != json!(true)
            });
            one(st, at)
        }
        ("GET", ["releases", id]) => one(st, find(st, "release", repo, "id", &num(id))),
        ("DELETE", ["releases", id]) => {
            let at = find(st, "release", repo, "id", &num(id));
            remove(st, at)
        }
        ("GET", ["actions", "variables"]) => page(
            list(st, "variable", repo, |_| true),
            c.url,
            c.port,
            30,
            Some("variables"),
        ),
        ("POST", ["actions", "variables"]) => {
            let name = str_of(body, "name").to_ascii_uppercase();
            if !variable_name(&name) || body["value"].as_str().is_none() {
                return Some(invalid(
                    "name is not a valid variable name, or value is missing",
                ));
            }
            if find(st, "variable", repo, "name", &json!(name)).is_some() {
                return Some(message(409, "Already exists"));
            }
            let f = json!({ "name": name, "value": body["value"].clone() });
            create(st, "variable", repo, f);
            Reply::json(201, json!({}))
        }
        ("GET", ["actions", "variables", name]) => {
            one(st, find(st, "variable", repo, "name", &json!(name)))
        }
        // Both fields optional; a new name is upper-cased like a created
        // one; 204 without a body.
        ("PATCH", ["actions", "variables", name]) => {
            let Some(i) = find(st, "variable", repo, "name", &json!(name)) else {
                return Some(message(404, "Not Found"));
            };
            let new = str_of(body, "name").to_ascii_uppercase();
            if !new.is_empty() {
                let taken = find(st, "variable", repo, "name", &json!(new));
                if !variable_name(&new) || taken.is_some_and(|j| j != i) {
                    return Some(invalid("name is not a valid variable name or is taken"));
                }
                st.objects[i].fields["name"] = json!(new);
            }
            if !body["value"].is_null() && body["value"].as_str().is_none() {
                return Some(invalid("value must be a string"));
            }
            update(st, i, body, &["value"]);
            no_content()
        }
        ("DELETE", ["actions", "variables", name]) => {
            let at = find(st, "variable", repo, "name", &json!(name));
            remove(st, at)
        }
        _ => return None,
    })
}

/// Letters, digits and `_`, not starting with a digit or `GITHUB_`.
fn variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with("GITHUB_")
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
