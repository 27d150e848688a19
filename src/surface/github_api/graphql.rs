//! GitHub's GraphQL API as the discussion carrier reaches it (the only
//! API that has discussions): the documents runwarden sends, where the
//! endpoint is, and one call, whose answer is its `data`, GitHub's refusal
//! or an error.
//!
//! GraphQL answers 200 with `errors`: an error of type `FORBIDDEN` in an
//! answer of GitHub's (its request id) is the refusal, with the permission
//! GitHub said it wanted; an id that names nothing is GitHub's
//! `NOT_FOUND`; every other error is an error.

use super::answers::lenient;
use crate::escape;
use crate::github::{Api, ApiError};
use ::http::Method;
use serde::Deserialize;
use serde_json::{Value, json};

/// The repository's id, whether it has discussions, and its categories.
pub const CATEGORIES: &str = "query($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id hasDiscussionsEnabled discussionCategories(first: 100) { nodes { id name slug } } } }";

/// One page of the repository's discussions.
pub const LIST: &str = "query($owner: String!, $name: String!, $after: String) { repository(owner: $owner, name: $name) { hasDiscussionsEnabled discussions(first: 100, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { id number title body author { login } } } } }";

/// The plant: a discussion in a category.
pub const CREATE: &str = "mutation($repositoryId: ID!, $categoryId: ID!, $title: String!, $body: String!) { createDiscussion(input: {repositoryId: $repositoryId, categoryId: $categoryId, title: $title, body: $body}) { discussion { id number title body author { login } } } }";

/// A discussion read back by its node id.
pub const NODE: &str =
    "query($id: ID!) { node(id: $id) { ... on Discussion { id title body author { login } } } }";

/// A discussion deleted by its node id.
pub const DELETE: &str =
    "mutation($id: ID!) { deleteDiscussion(input: {id: $id}) { discussion { id } } }";

/// Who the write token writes as (cleanup by probe id compares it with
/// a discussion's author): `viewer` answers installation tokens too,
/// where REST's `GET /user` refuses them.
pub const VIEWER: &str = "query { viewer { login } }";

/// Every document runwarden sends, for the stand-in's proof against the
/// real client: the categories, the listing, the mutation that plants,
/// the read back, the delete, the viewer.
pub const DOCUMENTS: [&str; 6] = [CATEGORIES, LIST, CREATE, NODE, DELETE, VIEWER];

/// The GraphQL endpoint of a REST API base, as GitHub places it:
/// `https://api.github.com` → `…/graphql`, a GHES `…/api/v3` →
/// `…/api/graphql`.
pub fn graphql_url(api_url: &str) -> String {
    match api_url.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{api_url}/graphql"),
    }
}

/// One GraphQL call: its `data`, GitHub's refusal (`FORBIDDEN`, in an
/// answer that carries GitHub's request id), or an error.
pub fn graphql(
    api: &Api<'_>,
    url: &str,
    query: &str,
    vars: Value,
    what: &str,
) -> Result<Value, ApiError> {
    let req = json!({ "query": query, "variables": vars });
    let a = api.call_url(Method::POST, url, Some(&req), what)?;
    let errors = a.json["errors"].as_array().cloned().unwrap_or_default();
    let text = |e: &Value| escape::bytes(e["message"].as_str().unwrap_or("").as_bytes());
    if let Some(e) = errors.iter().find(|e| e["type"] == "FORBIDDEN") {
        if !a.headers.contains_key("x-github-request-id") {
            return Err(ApiError::Failed(format!(
                "{what}: a FORBIDDEN error without GitHub's request id, so not GitHub's answer"
            )));
        }
        let wanted = a
            .headers
            .get("x-accepted-github-permissions")
            .and_then(|h| h.to_str().ok())
            .map(str::to_string);
        // (GraphQL says it in a 200's body: the same rule of GitHub's as a
        // REST 403's, crate::github::REST.)
        let permission = e["message"]
            .as_str()
            .is_some_and(crate::github::missing_permission);
        return Err(ApiError::Denied {
            message: format!("GraphQL FORBIDDEN {}", text(e)),
            wanted,
            permission,
        });
    }
    // GitHub's answer for an id that names nothing (a discussion already
    // deleted): an error of type NOT_FOUND, which cleanup takes as gone.
    let gone = |e: &Value| {
        e["type"] == "NOT_FOUND"
            && e["path"].as_array().is_some_and(|p| p.len() == 1)
            && e["path"][0]
                .as_str()
                .is_some_and(|f| a.json["data"][f].is_null())
    };
    if !errors.is_empty() {
        let all = errors.iter().map(text).collect::<Vec<_>>().join("; ");
        if errors.iter().all(gone) {
            return Err(ApiError::NotFound(format!(
                "{what}: GraphQL NOT_FOUND {all}"
            )));
        }
        return Err(ApiError::Failed(format!("{what}: GraphQL errors: {all}")));
    }
    match &a.json["data"] {
        Value::Null => Err(ApiError::Failed(format!(
            "{what}: the answer holds no data"
        ))),
        d => Ok(d.clone()),
    }
}

// (Every field below is read with `lenient`, as REST's answers are.)

/// What an answer says of the repository (`CATEGORIES`, `LIST`).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Repository {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub has_discussions_enabled: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub discussion_categories: Option<Nodes>,
    #[serde(default, deserialize_with = "lenient")]
    pub discussions: Option<Page>,
}

impl Repository {
    /// The repository `data` names (nothing said, when it names none).
    pub fn of(data: &Value) -> Repository {
        Repository::deserialize(&data["repository"]).unwrap_or_default()
    }
}

/// A list of nodes, each read on its own.
#[derive(Deserialize, Default)]
pub struct Nodes {
    #[serde(default, deserialize_with = "lenient")]
    pub nodes: Option<Vec<Value>>,
}

/// One page of discussions: its nodes, how many there are in all, and
/// where the next page starts.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    #[serde(default, deserialize_with = "lenient")]
    pub nodes: Option<Vec<Value>>,
    #[serde(default, deserialize_with = "lenient")]
    pub total_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub page_info: Option<PageInfo>,
}

/// Whether there is a next page, and its cursor.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PageInfo {
    #[serde(default, deserialize_with = "lenient")]
    pub has_next_page: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub end_cursor: Option<String>,
}

/// A discussion category: its id, name and slug.
#[derive(Deserialize, Default)]
pub struct Category {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub slug: Option<String>,
}

/// A discussion: its node id, title, body and author.
#[derive(Deserialize, Default)]
pub struct Discussion {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub title: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub body: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub author: Option<Author>,
}

/// Who wrote a discussion, or who the token is (`viewer`).
#[derive(Deserialize, Default)]
pub struct Author {
    #[serde(default, deserialize_with = "lenient")]
    pub login: Option<String>,
}

impl Discussion {
    /// Its author's login ("" when the answer names none).
    pub fn login(&self) -> &str {
        self.author
            .as_ref()
            .and_then(|a| a.login.as_deref())
            .unwrap_or("")
    }
}
