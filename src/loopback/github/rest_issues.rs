//! The REST objects behind `issues` (or `pull_requests`) permission:
//! labels, issue comments and milestones.

use super::rest::{
    Call, create, find, invalid, list, message, num, one, page, remove, str_of, update,
};
use super::{Reply, State};
use serde_json::json;

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    let (repo, body) = (c.repo, c.body);
    Some(match (c.method, c.p) {
        ("GET", ["labels"]) => page(list(st, "label", repo, |_| true), c.url, c.port, 100, None),
        ("POST", ["labels"]) => create_label(st, c),
        ("GET", ["labels", name]) => one(st, find(st, "label", repo, "name", &json!(name))),
        // `new_name` renames; names are unique regardless of case.
        ("PATCH", ["labels", name]) => update_label(st, c, name),
        ("DELETE", ["labels", name]) => {
            let at = find(st, "label", repo, "name", &json!(name));
            remove(st, at)
        }
        ("GET", ["issues", n, "comments"]) => {
            let n = num(n);
            let items = list(st, "comment", repo, |f| f["issue"] == n);
            page(items, c.url, c.port, 100, None)
        }
        ("POST", ["issues", n, "comments"]) => {
            let text = str_of(body, "body");
            if text.is_empty() || text.chars().count() > 65536 {
                return Some(invalid("body is required and at most 65536 characters"));
            }
            let f = json!({ "issue": num(n), "body": text, "user": { "login": c.login } });
            Reply::json(201, create(st, "comment", repo, f))
        }
        ("GET", ["issues", "comments", id]) => one(st, find(st, "comment", repo, "id", &num(id))),
        ("PATCH", ["issues", "comments", id]) => update_comment(st, c, id),
        ("DELETE", ["issues", "comments", id]) => {
            let at = find(st, "comment", repo, "id", &num(id));
            remove(st, at)
        }
        ("GET", ["milestones"]) => {
            let q = super::super::query(c.url);
            let state = q.get("state").cloned().unwrap_or_else(|| "open".into());
            let items = list(st, "milestone", repo, |f| {
                state == "all" || f["state"].as_str() == Some(state.as_str())
            });
            page(items, c.url, c.port, 100, None)
        }
        ("POST", ["milestones"]) => create_milestone(st, c),
        ("GET", ["milestones", n]) => one(st, find(st, "milestone", repo, "number", &num(n))),
        ("PATCH", ["milestones", n]) => update_milestone(st, c, n),
        ("DELETE", ["milestones", n]) => {
            let at = find(st, "milestone", repo, "number", &num(n));
            remove(st, at)
        }
        _ => return None,
    })
}

/// `POST labels`.
fn create_label(st: &mut State, c: &Call) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let name = str_of(body, "name");
    if name.is_empty() || str_of(body, "description").chars().count() > 100 {
        return invalid("name is required; description is at most 100 characters");
    }
    // GitHub's own answer (github/docs#32156 quotes it).
    if name.chars().count() > 50 {
        return invalid("name is too long (maximum is 50 characters)");
    }
    if find(st, "label", repo, "name", &json!(name)).is_some() {
        return invalid("already_exists");
    }
    let f = json!({ "name": name, "color": body["color"].as_str().unwrap_or("ededed"),
        "description": body["description"].clone(), "default": false });
    Reply::json(201, create(st, "label", repo, f))
}

/// `PATCH labels/{name}`.
fn update_label(st: &mut State, c: &Call, name: &str) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let Some(i) = find(st, "label", repo, "name", &json!(name)) else {
        return message(404, "Not Found");
    };
    if str_of(body, "description").chars().count() > 100 {
        return invalid("description is at most 100 characters");
    }
    let new = str_of(body, "new_name");
    if !new.is_empty() {
        if find(st, "label", repo, "name", &json!(new)).is_some_and(|j| j != i) {
            return invalid("already_exists");
        }
        st.objects[i].fields["name"] = json!(new);
    }
    Reply::json(200, update(st, i, body, &["color", "description"]))
}

/// `PATCH issues/comments/{id}`.
fn update_comment(st: &mut State, c: &Call, id: &str) -> Reply {
    let body = c.body;
    match find(st, "comment", c.repo, "id", &num(id)) {
        // Only its author edits a comment (an admin could; these
        // tokens are no admins).
        Some(i) if st.objects[i].fields["user"]["login"] != json!(c.login) => {
            message(403, "Resource not accessible by integration")
        }
        Some(i) if !str_of(body, "body").is_empty() => {
            if str_of(body, "body").chars().count() > 65536 {
                return invalid("body is at most 65536 characters");
            }
            Reply::json(200, update(st, i, body, &["body"]))
        }
        Some(_) => invalid("body is required"),
        None => message(404, "Not Found"),
    }
}

/// `POST milestones`.
fn create_milestone(st: &mut State, c: &Call) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let title = str_of(body, "title");
    if title.is_empty() || find(st, "milestone", repo, "title", &json!(title)).is_some() {
        return invalid("title is required and unique");
    }
    let state = body["state"].as_str().unwrap_or("open");
    if !["open", "closed"].contains(&state) {
        return invalid("state is open or closed");
    }
    let f = json!({ "title": title, "state": state,
        "description": body["description"].clone(), "due_on": body["due_on"].clone() });
    let mut f = create(st, "milestone", repo, f);
    // Its number is its id here, as `add` makes it.
    f["number"] = f["id"].clone();
    let last = st.objects.len() - 1;
    st.objects[last].fields["number"] = f["id"].clone();
    Reply::json(201, f)
}

/// `PATCH milestones/{number}`.
fn update_milestone(st: &mut State, c: &Call, n: &str) -> Reply {
    let (repo, body) = (c.repo, c.body);
    let Some(i) = find(st, "milestone", repo, "number", &num(n)) else {
        return message(404, "Not Found");
    };
    if !body["state"].is_null() && !["open", "closed"].contains(&str_of(body, "state")) {
        return invalid("state is open or closed");
    }
    let title = str_of(body, "title");
    if find(st, "milestone", repo, "title", &json!(title)).is_some_and(|j| j != i) {
        return invalid("title is unique");
    }
    let keys = ["title", "state", "description", "due_on"];
    Reply::json(200, update(st, i, body, &keys))
}
