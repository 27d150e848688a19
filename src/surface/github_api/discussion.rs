//! `discussion`: a discussion whose title (`rw-<probe>-<nonce>`) and body
//! carry the nonce, through GitHub's GraphQL API, the only one that has
//! discussions (../shared/reference/github-coverage-facts.md §4). Run A
//! asks the repository for its id and categories and creates the
//! discussion (`createDiscussion`) in the configured category; run B
//! lists the repository's discussions (`first: 100`, paged by cursor) and
//! searches titles and bodies; cleanup reads it back by its id (`node`)
//! and deletes it (`deleteDiscussion`) only when it still holds what was
//! planted.
//!
//! GraphQL answers 200 with `errors`: an error of type `FORBIDDEN` in an
//! answer of GitHub's (its request id) is the refusal, and the detail
//! names it with the permission GitHub said it wanted; every other error
//! is an error. Discussions turned off (`hasDiscussionsEnabled: false`)
//! are SKIPPED with that reason.
//!
//! An entry is `{carrier, title, body, id, tag}`: `id` the discussion's
//! node id GitHub gave (null in the intent journalled before the
//! mutation).

use super::recover::needle_text;
use super::{Gh, Instance, carriers, read_outcome};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::nonce::Nonce;
use crate::surface::{CleanupOutcome, PlantJob, PlantOutcome, RecoverOutcome, RunCtx, Wanted};
use ::http::Method;
use serde_json::{Value, json};

/// Pages a discussions listing may take before it is an error.
const MAX_PAGES: usize = 100_000;

const CATEGORIES: &str = "query($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { id hasDiscussionsEnabled discussionCategories(first: 100) { nodes { id name slug } } } }";

const LIST: &str = "query($owner: String!, $name: String!, $after: String) { repository(owner: $owner, name: $name) { hasDiscussionsEnabled discussions(first: 100, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { id number title body author { login } } } } }";

const CREATE: &str = "mutation($repositoryId: ID!, $categoryId: ID!, $title: String!, $body: String!) { createDiscussion(input: {repositoryId: $repositoryId, categoryId: $categoryId, title: $title, body: $body}) { discussion { id number title body author { login } } } }";

const NODE: &str =
    "query($id: ID!) { node(id: $id) { ... on Discussion { id title body author { login } } } }";

const DELETE: &str =
    "mutation($id: ID!) { deleteDiscussion(input: {id: $id}) { discussion { id } } }";

/// Every document runwarden sends, for the stand-in's proof against the
/// real client: the categories, the listing, the mutation that plants,
/// the read back, the delete.
/// Who the write token writes as (cleanup by probe id compares it with
/// a discussion's author): `viewer` answers installation tokens too,
/// where REST's `GET /user` refuses them.
const VIEWER: &str = "query { viewer { login } }";

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

/// The body run A writes.
fn body(ctx: &RunCtx<'_>, hex: &str) -> String {
    format!("runwarden probe {}\n\n{hex}", ctx.probe_id)
}

/// The entry of a plant of `nonce` (`made`: the node id and its author's
/// login, as GitHub's answer to the plant gave them; `None` for the
/// intent).
pub fn entry(ctx: &RunCtx<'_>, nonce: &Nonce, made: Option<(&str, &str)>) -> Value {
    json!({
        "carrier": Gh::Discussion.name(),
        "title": carriers::nonce_name(ctx, nonce),
        "body": body(ctx, &nonce.hex()),
        "id": made.map(|m| m.0),
        "author": made.map(|m| m.1),
        "tag": carriers::entry_tag(ctx, Gh::Discussion, &nonce.hex()),
    })
}

/// A login as one actor: GitHub's GraphQL names a bot `github-actions` as
/// a discussion's author and `github-actions[bot]` as the viewer; no
/// user's login holds `[`, so the two are one actor.
fn same_actor(a: &str, b: &str) -> bool {
    fn base(l: &str) -> &str {
        l.strip_suffix("[bot]").unwrap_or(l)
    }
    !a.is_empty() && base(a) == base(b)
}

/// A login as GitHub spells one (a bot's ends `[bot]`).
fn valid_login(l: &str) -> bool {
    !l.is_empty()
        && l.len() <= 64
        && l.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'[' | b']'))
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'=' | b':'))
}

/// Whether `e` is this probe's discussion entry: rebuilt from the nonce
/// its title carries and its node id (in GitHub's form), tag and all.
pub fn owned(ctx: &RunCtx<'_>, e: &Value) -> Result<(), Fault> {
    let not = Fault::invalid;
    let nonce = carriers::nonce_in_name(ctx, e["title"].as_str())
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    let made = match (&e["id"], &e["author"]) {
        (Value::Null, Value::Null) => None,
        (Value::String(id), Value::String(a)) if valid_id(id) && valid_login(a) => {
            Some((id.as_str(), a.as_str()))
        }
        _ => return Err(not("its id or author is not in GitHub's form")),
    };
    let want = entry(ctx, &nonce, made);
    carriers::same_entry(e, &want)
}

/// One GraphQL call: its `data`, GitHub's refusal (`FORBIDDEN`, in an
/// answer that carries GitHub's request id), or an error.
fn graphql(
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
        return Err(ApiError::Denied {
            message: format!("GraphQL FORBIDDEN {}", text(e)),
            wanted,
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

impl Instance {
    fn graphql_url(&self) -> String {
        graphql_url(&self.s.api_url)
    }

    fn owner_name(&self) -> Value {
        let r = self.s.repository.as_deref().unwrap_or("/");
        let (o, n) = r.split_once('/').unwrap_or((r, ""));
        json!({ "owner": o, "name": n })
    }

    /// Run A: the repository's id and categories, the intent, the
    /// mutation, the entry with the discussion's id.
    pub(super) fn plant_discussion(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let url = self.graphql_url();
        let what = format!("asking {} for its discussion categories", self.repo());
        let repo = match graphql(&api, &url, CATEGORIES, self.owner_name(), &what) {
            Ok(d) => d["repository"].clone(),
            Err(e) => return PlantOutcome::Error { reason: e.text() },
        };
        if repo["hasDiscussionsEnabled"] == json!(false) {
            return PlantOutcome::Unsupported {
                reason: format!("Discussions are turned off for {}", self.repo()),
            };
        }
        let (Some(repo_id), Some(cats)) = (
            repo["id"].as_str(),
            repo["discussionCategories"]["nodes"].as_array(),
        ) else {
            return PlantOutcome::Error {
                reason: format!("{what}: the answer holds no repository id or categories"),
            };
        };
        let (cat_id, cat_name, fallback) = match self.category(cats) {
            Ok(c) => c,
            Err(reason) => return PlantOutcome::Error { reason },
        };
        let intent = entry(ctx, &job.nonce, None);
        created(intent.clone());
        let vars = json!({
            "repositoryId": repo_id, "categoryId": cat_id,
            "title": carriers::nonce_name(ctx, &job.nonce), "body": body(ctx, &job.nonce.hex()),
        });
        let what = format!("creating a discussion in {}", self.repo());
        match graphql(&api, &url, CREATE, vars, &what) {
            Ok(d) => {
                let made = &d["createDiscussion"]["discussion"];
                let id = made["id"].as_str().filter(|i| valid_id(i));
                let author = made["author"]["login"].as_str().filter(|l| valid_login(l));
                if let (Some(id), Some(author)) = (id, author) {
                    created(entry(ctx, &job.nonce, Some((id, author))));
                }
                PlantOutcome::Planted {
                    needle: json!({ "text": job.nonce.hex() }),
                    persistence: None,
                    detail: format!(
                        "a discussion in the category {} of {}, written with {} through GraphQL",
                        escape::bytes(cat_name.as_bytes()),
                        self.repo(),
                        escape::bytes(self.s.token_source.as_bytes())
                    ),
                }
            }
            // A refusal in a category runwarden fell back to may be the
            // category's rule (no new discussions but from maintainers),
            // not the token's permission: untested here, not closed.
            Err(e @ ApiError::Denied { .. }) if fallback => {
                created(crate::surface::retraction(&intent));
                PlantOutcome::Error {
                    reason: format!(
                        "GitHub refused a discussion in the category {}, which runwarden fell \
                         back to (no `general`, none named), and that may be the category's \
                         rule, not the token's permission ({}): name one with \
                         `discussion-category`",
                        escape::bytes(cat_name.as_bytes()),
                        e.text()
                    ),
                }
            }
            Err(e @ ApiError::Denied { .. }) => {
                created(crate::surface::retraction(&intent));
                self.refused(&e)
            }
            Err(e) => PlantOutcome::Error { reason: e.text() },
        }
    }

    /// The category to plant in: the one `discussion-category` names,
    /// else `general`, else the first listed; its id, its name, and
    /// whether runwarden fell back to it (none named, no `general`). Why
    /// the last: such a category may take no new discussions from anyone
    /// but maintainers, and GitHub's FORBIDDEN for that is not known to
    /// differ from a permission's, so a refusal there proves nothing of
    /// the token.
    fn category<'a>(&self, cats: &'a [Value]) -> Result<(&'a str, &'a str, bool), String> {
        let category = match self.s.discussion_category.as_deref() {
            Some(want) => cats.iter().find(|c| {
                c["slug"] == want
                    || c["name"]
                        .as_str()
                        .is_some_and(|n| n.eq_ignore_ascii_case(want))
            }),
            None => cats
                .iter()
                .find(|c| c["slug"] == "general")
                .or(cats.first()),
        };
        let fallback = self.s.discussion_category.is_none()
            && category.is_some_and(|c| c["slug"] != "general");
        if let Some((id, name)) =
            category.and_then(|c| Some((c["id"].as_str()?, c["name"].as_str()?)))
        {
            return Ok((id, name, fallback));
        }
        let names: Vec<String> = cats
            .iter()
            .filter_map(|c| c["name"].as_str())
            .map(|n| escape::bytes(n.as_bytes()))
            .collect();
        Err(format!(
            "no discussion category {} in {}: it has {}",
            escape::bytes(
                self.s
                    .discussion_category
                    .as_deref()
                    .unwrap_or("at all")
                    .as_bytes()
            ),
            self.repo(),
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ))
    }

    /// A discussion GitHub names NOT_FOUND (`why`): gone when the
    /// repository's categories still answer the write token (it sees the
    /// repository, so it would see the discussion); else left, saying so.
    fn gone_unless_hidden(&self, api: &Api<'_>, url: &str, why: &str) -> CleanupOutcome {
        let what = format!("asking {} for its discussion categories", self.repo());
        match graphql(api, url, CATEGORIES, self.owner_name(), &what) {
            Ok(d) if d["repository"]["id"].is_string() => CleanupOutcome::Gone,
            Ok(_) => CleanupOutcome::Left {
                reason: format!("{why}, and the repository does not answer the write token"),
            },
            Err(e) => CleanupOutcome::Left {
                reason: format!("{why}, and {}", e.text()),
            },
        }
    }

    /// Every discussion of the repository, handed to `each`: how many.
    fn discussions(
        &self,
        api: &Api<'_>,
        what: &str,
        each: &mut dyn FnMut(&Value),
    ) -> Result<usize, ApiError> {
        let url = self.graphql_url();
        let mut after = Value::Null;
        let mut n = 0usize;
        let mut counted = None;
        for _ in 0..MAX_PAGES {
            let mut vars = self.owner_name();
            vars["after"] = after.clone();
            let d = graphql(api, &url, LIST, vars, what)?;
            let page = &d["repository"]["discussions"];
            if d["repository"]["hasDiscussionsEnabled"] == json!(false) {
                return Err(ApiError::Failed(format!(
                    "{what}: Discussions are turned off now"
                )));
            }
            let Some(nodes) = page["nodes"].as_array() else {
                return Err(ApiError::Failed(format!(
                    "{what}: the answer holds no discussions"
                )));
            };
            counted = counted.or(page["totalCount"].as_u64());
            for d in nodes {
                each(d);
                n += 1;
            }
            match (
                &page["pageInfo"]["hasNextPage"],
                &page["pageInfo"]["endCursor"],
            ) {
                (Value::Bool(true), c @ Value::String(_)) if *c != after => after = c.clone(),
                (Value::Bool(true), _) => {
                    return Err(ApiError::Failed(format!(
                        "{what}: a next page without a new cursor"
                    )));
                }
                _ => {
                    if let Some(c) = counted.filter(|c| (n as u64) < *c) {
                        return Err(ApiError::Failed(format!(
                            "{what}: it counted {c} but handed over {n}: one may have been skipped"
                        )));
                    }
                    return Ok(n);
                }
            }
        }
        Err(ApiError::Failed(format!(
            "{what}: the listing did not end after {MAX_PAGES} pages"
        )))
    }

    /// Run B: the listing with the read token; when it misses, whether the
    /// writer's token lists the plant (hidden from run B), until one of
    /// them shows it or the wait ends.
    pub(super) fn recover_discussion(&self, w: &Wanted) -> RecoverOutcome {
        let needle = match needle_text(w) {
            Ok(n) => n,
            Err(o) => return o,
        };
        let holds = |d: &Value| {
            ["title", "body"]
                .iter()
                .find(|k| d[**k].as_str().is_some_and(|t| t.contains(needle)))
        };
        let wait = std::time::Duration::from_millis(self.s.consistency_wait_ms);
        let source = self.s.read_token_source.clone();
        let c = crate::surface::listing::until_current(wait, || {
            let api = match self.api(true) {
                Ok(a) => a,
                Err(f) => {
                    return Ok::<_, std::convert::Infallible>((
                        RecoverOutcome::Error { reason: f.into() },
                        true,
                    ));
                }
            };
            let mut found = None;
            let r = self.discussions(&api, "listing the discussions", &mut |d| {
                if found.is_none() {
                    found = holds(d).map(|k| {
                        format!("listed through GraphQL: a discussion has the nonce in its {k}")
                    });
                }
            });
            let n = match (r, found) {
                (_, Some(detail)) => return Ok((RecoverOutcome::Found { detail }, true)),
                (Ok(n), None) => n,
                (Err(e), None) => return Ok((read_outcome(&e, &source), true)),
            };
            let mut seen = false;
            let writer = self
                .api(false)
                .map_err(|f| ApiError::Failed(f.into()))
                .and_then(|api| {
                    self.discussions(
                        &api,
                        "listing the discussions with the writer's token",
                        &mut |d| {
                            seen |= holds(d).is_some();
                        },
                    )
                });
            Ok(match writer {
                Ok(_) if seen => (
                    RecoverOutcome::NotFound {
                        detail: format!(
                            "listed all {n} discussions with {}; none holds it; hidden from run B: \
                             the writer's token lists it",
                            escape::bytes(source.as_bytes())
                        ),
                    },
                    true,
                ),
                Ok(_) => (
                    RecoverOutcome::NotFound {
                        detail: String::new(),
                    },
                    false,
                ),
                Err(e) => (
                    RecoverOutcome::Error {
                        reason: format!(
                            "run B's listing missed, and nothing shows it current: {}",
                            e.text()
                        ),
                    },
                    true,
                ),
            })
        });
        let c = match c {
            Ok(c) => c,
            Err(never) => match never {},
        };
        if c.current {
            c.value
        } else {
            crate::surface::listing::not_current(
                "the plant, which neither run B's token nor the writer's lists yet",
                &c,
            )
        }
    }

    /// Cleanup: read back by the id GitHub gave the plant, deleted only
    /// when it holds what was planted and is by the author GitHub named.
    /// For an intent (no answer came) or a cleanup by probe id, those
    /// holding the plant's text that the write token's actor wrote; a
    /// copy by anyone else is listed, not removed.
    pub(super) fn clean_discussion(&self, e: &Value) -> CleanupOutcome {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return CleanupOutcome::Left { reason: f.into() },
        };
        let title = e["title"].as_str().unwrap_or("");
        let want = e["body"].as_str().unwrap_or("").to_string();
        let url = self.graphql_url();
        let mut ids: Vec<String> = vec![];
        let mut left: Option<String> = None;
        match e["id"].as_str() {
            Some(id) => {
                match graphql(
                    &api,
                    &url,
                    NODE,
                    json!({ "id": id }),
                    "reading the discussion back",
                ) {
                    Ok(d) if d["node"].is_null() => return CleanupOutcome::Gone,
                    // GitHub says NOT_FOUND too for a node the token may
                    // not see: gone only while the repository still
                    // answers the token.
                    Err(ApiError::NotFound(n)) => return self.gone_unless_hidden(&api, &url, &n),
                    Ok(d)
                        if d["node"]["title"] == title
                            && d["node"]["body"] == want.as_str()
                            && same_actor(
                                d["node"]["author"]["login"].as_str().unwrap_or(""),
                                e["author"].as_str().unwrap_or(""),
                            ) =>
                    {
                        ids.push(id.to_string())
                    }
                    Ok(_) => {
                        return CleanupOutcome::Left {
                            reason: "changed since it was planted: not removed".into(),
                        };
                    }
                    Err(err) => return CleanupOutcome::Left { reason: err.text() },
                }
            }
            None => {
                // No answer came (an intent, or cleanup by probe id): a
                // discussion with the plant's text is the probe's only
                // when the write token's own actor wrote it; one by
                // anyone else is a copy, listed, not removed.
                let me = match graphql(&api, &url, VIEWER, json!({}), "asking who writes") {
                    Ok(d) => d["viewer"]["login"].as_str().unwrap_or("").to_string(),
                    Err(err) => return CleanupOutcome::Left { reason: err.text() },
                };
                let mut copies: Vec<String> = vec![];
                let r = self.discussions(&api, "finding the plant to delete", &mut |d| {
                    let Some(id) = d["id"].as_str().filter(|i| valid_id(i)) else {
                        return;
                    };
                    if d["title"] != title || d["body"] != want.as_str() {
                        return;
                    }
                    if same_actor(d["author"]["login"].as_str().unwrap_or(""), &me) {
                        ids.push(id.to_string());
                    } else {
                        copies.push(id.to_string());
                    }
                });
                if let Err(err) = r {
                    return CleanupOutcome::Left { reason: err.text() };
                }
                if !copies.is_empty() {
                    left = Some(format!(
                        "{} discussion(s) with the plant's text by another author than {}, \
                         not removed ({})",
                        copies.len(),
                        escape::bytes(me.as_bytes()),
                        copies.join(", ")
                    ));
                }
                if ids.is_empty() && left.is_none() {
                    return CleanupOutcome::Gone;
                }
            }
        }
        for id in ids {
            match graphql(
                &api,
                &url,
                DELETE,
                json!({ "id": id }),
                "deleting the discussion",
            ) {
                Ok(_) | Err(ApiError::NotFound(_)) => {}
                Err(err) => return CleanupOutcome::Left { reason: err.text() },
            }
        }
        match left {
            Some(reason) => CleanupOutcome::Left { reason },
            None => CleanupOutcome::Removed,
        }
    }
}
