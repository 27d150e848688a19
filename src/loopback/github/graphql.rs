//! GitHub's GraphQL endpoint (`POST /api/graphql`) for discussions, as
//! ../shared/reference/github-coverage-facts.md §4 describes them. It is
//! no GraphQL server: it takes exactly the documents `github-api`'s
//! `discussion` carrier and the proof against `@octokit/graphql` send,
//! recognised by their root field (`repository` with
//! `discussionCategories` or `discussions`, `node`, `createDiscussion`,
//! `deleteDiscussion`, `viewer`), and answers any other with a GraphQL
//! error.
//! Answers carry every field of an object whatever the selection asks.
//!
//! Access follows the REST side's permission map: reading discussions
//! and their categories needs `discussions: read`, the two mutations
//! `discussions: write`, and a
//! token without them gets GitHub's refusal, HTTP 200 with an error of
//! type `FORBIDDEN` ("Resource not accessible by integration"). A
//! repository's categories are Announcements, General and Q&A unless a
//! test disables discussions ([`State::discussions_off`]).

use super::rest::{create, list};
use super::{Reply, State};
use serde_json::{Value, json};

/// The categories every repository has: (id, name, slug, answerable).
const CATEGORIES: [(&str, &str, &str, bool); 3] = [
    ("DIC_kwDOannounce", "Announcements", "announcements", false),
    ("DIC_kwDOgeneral0", "General", "general", false),
    ("DIC_kwDOquestion", "Q&A", "q-a", true),
];

fn errors(message: &str, kind: Option<&str>, field: Option<&str>) -> Reply {
    let mut e = json!({ "message": message, "locations": [{ "line": 1, "column": 1 }] });
    if let Some(k) = kind {
        e["type"] = json!(k);
    }
    let data = match field {
        Some(f) => {
            e["path"] = json!([f]);
            json!({ f: null })
        }
        None => Value::Null,
    };
    Reply::json(200, json!({ "data": data, "errors": [e] }))
}

/// A discussion as GraphQL shows it.
fn shown(f: &Value) -> Value {
    json!({
        "id": f["node_id"], "number": f["number"], "title": f["title"], "body": f["body"],
        "author": { "login": f["author"] }, "category": { "id": f["category"] },
        "createdAt": f["created_at"], "url": f["url"],
    })
}

/// The number after `first:` in the document's `discussions(` selection.
fn first(query: &str) -> usize {
    query
        .split_once("discussions(")
        .and_then(|(_, rest)| rest.split_once("first:"))
        .map(|(_, n)| {
            n.trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
        .clamp(1, 100)
}

/// `POST /api/graphql`: the token, the document's root field, the
/// permission that field needs, then the field's own answer.
pub(super) fn serve(st: &mut State, auth: &str, body: &[u8]) -> Reply {
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "));
    let Some(perms) = token.and_then(|t| st.tokens.get(t)).cloned() else {
        return super::rest::message(401, "This endpoint requires you to be authenticated.");
    };
    let level = perms.get("discussions").map(String::as_str);
    let req: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let (Some(query), vars) = (req["query"].as_str(), &req["variables"]) else {
        return errors(
            "A query attribute must be specified and must be a string.",
            None,
            None,
        );
    };
    let Some((field, write)) = root_field(query) else {
        return errors(
            "the loopback GitHub takes only the discussion documents runwarden sends",
            None,
            None,
        );
    };
    if field == "viewer" {
        // Who the token is: no permission needed. GitHub names an
        // installation token's bot `<app>[bot]` here and `<app>` as a
        // discussion's author.
        let me = token
            .map(|t| super::rest::login_of(st, t))
            .unwrap_or_default();
        return Reply::json(200, json!({ "data": { "viewer": { "login": me } } }));
    }
    // The categories too need `discussions: read`: a token without it is
    // refused them (what the third security review saw GitHub do, a
    // step before the write).
    let may = matches!((write, level), (_, Some("write")) | (false, Some("read")));
    let wanted = if write {
        "discussions=write"
    } else {
        "discussions=read"
    };
    if !may {
        return errors(
            "Resource not accessible by integration",
            Some("FORBIDDEN"),
            Some(field),
        )
        .with("X-Accepted-GitHub-Permissions", wanted);
    }
    let reply = match field {
        "repository" => repository(st, query, vars),
        "node" => node(st, vars["id"].as_str().unwrap_or("")),
        "createDiscussion" => {
            let login = token
                .and_then(|t| st.logins.get(t))
                .map(|(l, _)| l.clone())
                .unwrap_or_else(|| "github-actions".into());
            create_discussion(st, vars, &login)
        }
        _ => delete_discussion(st, vars),
    };
    reply.with("X-Accepted-GitHub-Permissions", wanted)
}

/// The root field a document runwarden sends asks for, and whether it is
/// a mutation; `None` for any other document.
fn root_field(query: &str) -> Option<(&'static str, bool)> {
    Some(if query.contains("createDiscussion(") {
        ("createDiscussion", true)
    } else if query.contains("deleteDiscussion(") {
        ("deleteDiscussion", true)
    } else if query.contains("node(") && query.contains("on Discussion") {
        ("node", false)
    } else if query.contains("viewer") {
        ("viewer", false)
    } else if query.contains("repository(")
        && (query.contains("discussions(") || query.contains("discussionCategories("))
    {
        ("repository", false)
    } else {
        return None;
    })
}

/// `node(id:)`: the discussion of that node id, or GitHub's answer for an
/// id that names nothing.
fn node(st: &State, id: &str) -> Reply {
    match any_repo(st, id) {
        Some(i) => {
            let node = shown(&st.objects[i].fields);
            Reply::json(200, json!({ "data": { "node": node } }))
        }
        None => errors(
            &format!("Could not resolve to a node with the global id of '{id}'"),
            Some("NOT_FOUND"),
            Some("node"),
        ),
    }
}

/// `createDiscussion(input:)`, by `login`: GitHub's checks (the
/// repository, discussions on, the category, a title and a body), then
/// the discussion with its node id.
fn create_discussion(st: &mut State, vars: &Value, login: &str) -> Reply {
    let field = "createDiscussion";
    let input = &vars["input"];
    let get = |k: &str| vars[k].as_str().or(input[k].as_str()).unwrap_or("");
    let Some(repo) = get("repositoryId").strip_prefix(REPO_ID).map(String::from) else {
        return errors(
            "Could not resolve to a node with the global id of the repository",
            Some("NOT_FOUND"),
            Some(field),
        );
    };
    if st.discussions_off.contains(&repo) {
        return errors(
            "Discussions are disabled for this repository",
            Some("UNPROCESSABLE"),
            Some(field),
        );
    }
    if !CATEGORIES.iter().any(|c| c.0 == get("categoryId")) {
        return errors(
            "Could not resolve to a node with the global id of the category",
            Some("NOT_FOUND"),
            Some(field),
        );
    }
    if get("title").is_empty() || get("body").is_empty() {
        return errors(
            "Title and body can't be blank",
            Some("UNPROCESSABLE"),
            Some(field),
        );
    }
    let n = st.objects.iter().filter(|o| o.kind == "discussion").count() + 1;
    let mut f = create(
        st,
        "discussion",
        &repo,
        json!({ "title": get("title"), "body": get("body"), "category": get("categoryId"),
                "number": n, "author": login,
                "url": format!("https://github.com/{repo}/discussions/{n}") }),
    );
    let id = f["id"].clone();
    f["node_id"] = json!(format!("D_kwDOstandin{id}"));
    if let Some(o) = st
        .objects
        .iter_mut()
        .find(|o| o.kind == "discussion" && o.fields["id"] == id)
    {
        o.fields["node_id"] = f["node_id"].clone();
    }
    Reply::json(
        200,
        json!({ "data": { "createDiscussion": { "discussion": shown(&f) } } }),
    )
}

/// `deleteDiscussion(input:)`: the discussion removed, or GitHub's answer
/// for an id that names nothing.
fn delete_discussion(st: &mut State, vars: &Value) -> Reply {
    let id = vars["id"]
        .as_str()
        .or(vars["input"]["id"].as_str())
        .unwrap_or("");
    match any_repo(st, id) {
        Some(i) => {
            let f = st.objects.remove(i).fields;
            Reply::json(
                200,
                json!({ "data": { "deleteDiscussion": { "discussion": shown(&f) } } }),
            )
        }
        None => errors(
            &format!("Could not resolve to a node with the global id of '{id}'"),
            Some("NOT_FOUND"),
            Some("deleteDiscussion"),
        ),
    }
}

/// The index of the discussion whose node id is `id`, in any repository.
fn any_repo(st: &State, id: &str) -> Option<usize> {
    st.objects
        .iter()
        .position(|o| o.kind == "discussion" && o.fields["node_id"] == id)
}

/// What a repository's node id is here: this, then `owner/name`.
const REPO_ID: &str = "R_kgDOstandin:";

/// `repository(owner:, name:) { … }`: its id, whether discussions are on,
/// its categories, and a page of its discussions (newest first; the
/// cursor is the index after the page).
fn repository(st: &State, query: &str, vars: &Value) -> Reply {
    let repo = format!(
        "{}/{}",
        vars["owner"].as_str().unwrap_or(""),
        vars["name"].as_str().unwrap_or("")
    );
    let on = !st.discussions_off.contains(&repo);
    let mut all = list(st, "discussion", &repo, |_| true);
    all.reverse();
    let total = all.len();
    let from: usize = vars["after"]
        .as_str()
        .and_then(|c| c.strip_prefix("cursor:"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let n = first(query);
    let page: Vec<Value> = all.iter().skip(from).take(n).map(shown).collect();
    let end = from + page.len();
    let categories: Vec<Value> = CATEGORIES
        .iter()
        .map(|(id, name, slug, answerable)| {
            json!({ "id": id, "name": name, "slug": slug, "isAnswerable": answerable })
        })
        .collect();
    Reply::json(
        200,
        json!({ "data": { "repository": {
            "id": format!("{REPO_ID}{repo}"), "hasDiscussionsEnabled": on,
            "discussionCategories": { "nodes": categories },
            "discussions": {
                "totalCount": if on { total } else { 0 },
                "pageInfo": { "hasNextPage": on && end < total,
                              "endCursor": (on && !page.is_empty()).then(|| format!("cursor:{end}")) },
                "nodes": if on { page } else { vec![] },
            },
        } } }),
    )
}
