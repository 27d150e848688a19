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
//! GraphQL's refusal is its own ([`super::graphql`]), and the detail names
//! it with the permission GitHub said it wanted. Discussions turned off
//! (`hasDiscussionsEnabled: false`) are SKIPPED with that reason.
//!
//! An entry is `{carrier, title, body, id, author, tag}`
//! ([`entry::Discussion`]): `id` the discussion's node id GitHub gave and
//! `author` its author's login (null in the intent journalled before the
//! mutation).

use super::answers::node;
use super::entry::{self, Entry, Needle, Planted};
use super::graphql::{
    self, CATEGORIES, CREATE, Category, DELETE, LIST, NODE, Repository, VIEWER, graphql,
};
use super::recover::Wanted;
use super::{Gh, GitHubApi, carriers, read_outcome};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::nonce::Nonce;
use crate::surface::{CleanupOutcome, Job, Journal, PlantOutcome, RecoverOutcome, RunCtx};
use serde_json::{Value, json};

/// Pages a discussions listing may take before it is an error.
const MAX_PAGES: usize = 100_000;

/// The body run A writes.
fn body(ctx: &RunCtx<'_>, hex: &str) -> String {
    format!("runwarden probe {}\n\n{hex}", ctx.probe_id)
}

/// The entry of a plant of `nonce` (`made`: the node id and its author's
/// login, as GitHub's answer to the plant gave them; `None` for the
/// intent).
pub fn entry(ctx: &RunCtx<'_>, nonce: &Nonce, made: Option<(&str, &str)>) -> Entry {
    Entry::Discussion(entry::Discussion {
        carrier: Gh::Discussion.name().to_string(),
        title: carriers::nonce_name(ctx, nonce),
        body: body(ctx, &nonce.hex()),
        id: made.map(|m| m.0.to_string()),
        author: made.map(|m| m.1.to_string()),
        tag: carriers::entry_tag(ctx, Gh::Discussion, &nonce.hex()),
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

/// The entry this probe's plant journals for what discussion entry `e`
/// names: rebuilt from the nonce its title carries and its node id (in
/// GitHub's form), tag and all (the caller compares the two); `Invalid`
/// when it names no such plant.
pub fn wanted(ctx: &RunCtx<'_>, e: &entry::Discussion) -> Result<Entry, Fault> {
    let not = Fault::invalid;
    let nonce = carriers::nonce_in_name(ctx, Some(&e.title))
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    let made = match (e.id.as_deref(), e.author.as_deref()) {
        (None, None) => None,
        (Some(id), Some(a)) if valid_id(id) && valid_login(a) => Some((id, a)),
        _ => return Err(not("its id or author is not in GitHub's form")),
    };
    Ok(entry(ctx, &nonce, made))
}

impl GitHubApi {
    fn graphql_url(&self) -> String {
        super::graphql_url(&self.settings.api_url)
    }

    fn owner_name(&self) -> Value {
        let r = self.settings.repository.as_deref().unwrap_or("/");
        let (o, n) = r.split_once('/').unwrap_or((r, ""));
        json!({ "owner": o, "name": n })
    }

    /// Run A: the repository's id and categories, the intent, the
    /// mutation, the entry with the discussion's id.
    pub(super) fn plant_discussion(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Gh>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Needle> {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let url = self.graphql_url();
        let what = format!("asking {} for its discussion categories", self.repo());
        let repo = match graphql(&api, &url, CATEGORIES, self.owner_name(), &what) {
            Ok(d) => Repository::of(&d),
            // The token may not read discussions (the categories need
            // `discussions: read`): the write, which needs a category's id,
            // cannot be tried, and a refusal of this read is not one of the
            // very write: untested, never closed, never a failed job.
            Err(e) if e.is_permission_refusal() => {
                return PlantOutcome::Unsupported {
                    reason: format!(
                        "{what}: GitHub refused it ({}); the write needs a category's id, so it \
                         was not tried, and nothing shows the carrier closed or open here (give \
                         the job discussions: write to test it)",
                        e.text()
                    ),
                };
            }
            Err(e) => return PlantOutcome::Error { reason: e.text() },
        };
        if repo.has_discussions_enabled == Some(false) {
            return PlantOutcome::Unsupported {
                reason: format!("Discussions are turned off for {}", self.repo()),
            };
        }
        let cats = repo.discussion_categories.and_then(|c| c.nodes);
        let (Some(repo_id), Some(cats)) = (repo.id.as_deref(), cats) else {
            return PlantOutcome::Error {
                reason: format!("{what}: the answer holds no repository id or categories"),
            };
        };
        let cats: Vec<Category> = cats.iter().map(node).collect();
        let (cat_id, cat_name, fallback) = match self.category(&cats) {
            Ok(c) => c,
            Err(reason) => return PlantOutcome::Error { reason },
        };
        let intent = entry(ctx, &job.nonce, None);
        journal.record(&intent);
        let vars = json!({
            "repositoryId": repo_id, "categoryId": cat_id,
            "title": carriers::nonce_name(ctx, &job.nonce), "body": body(ctx, &job.nonce.hex()),
        });
        let what = format!("creating a discussion in {}", self.repo());
        match graphql(&api, &url, CREATE, vars, &what) {
            Ok(d) => {
                let made: graphql::Discussion = node(&d["createDiscussion"]["discussion"]);
                let id = made.id.as_deref().filter(|i| valid_id(i));
                let author = Some(made.login()).filter(|l| valid_login(l));
                if let (Some(id), Some(author)) = (id, author) {
                    journal.record(&entry(ctx, &job.nonce, Some((id, author))));
                }
                PlantOutcome::Planted {
                    needle: Needle::Planted(Planted::of(&job.nonce)),
                    persistence: None,
                    detail: format!(
                        "a discussion in the category {} of {}, written with {} through GraphQL",
                        escape::bytes(cat_name.as_bytes()),
                        self.repo(),
                        escape::bytes(self.settings.token_source.as_bytes())
                    ),
                }
            }
            // A refusal in a category runwarden fell back to may be the
            // category's rule (no new discussions but from maintainers),
            // not the token's permission: untested here, not closed.
            Err(e @ ApiError::Denied { .. }) if fallback => {
                journal.retract(&intent);
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
                journal.retract(&intent);
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
    fn category<'a>(&self, cats: &'a [Category]) -> Result<(&'a str, &'a str, bool), String> {
        let slug = |c: &Category, s: &str| c.slug.as_deref() == Some(s);
        let category = match self.settings.discussion_category.as_deref() {
            Some(want) => cats.iter().find(|c| {
                slug(c, want)
                    || c.name
                        .as_deref()
                        .is_some_and(|n| n.eq_ignore_ascii_case(want))
            }),
            None => cats.iter().find(|c| slug(c, "general")).or(cats.first()),
        };
        let fallback = self.settings.discussion_category.is_none()
            && category.is_some_and(|c| !slug(c, "general"));
        if let Some((id, name)) =
            category.and_then(|c| Some((c.id.as_deref()?, c.name.as_deref()?)))
        {
            return Ok((id, name, fallback));
        }
        let names: Vec<String> = cats
            .iter()
            .filter_map(|c| c.name.as_deref())
            .map(|n| escape::bytes(n.as_bytes()))
            .collect();
        Err(format!(
            "no discussion category {} in {}: it has {}",
            escape::bytes(
                self.settings
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
            Ok(d) if Repository::of(&d).id.is_some() => CleanupOutcome::Gone,
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
        each: &mut dyn FnMut(&graphql::Discussion),
    ) -> Result<usize, ApiError> {
        let url = self.graphql_url();
        let mut after: Option<String> = None;
        let mut n = 0usize;
        let mut counted = None;
        for _ in 0..MAX_PAGES {
            let mut vars = self.owner_name();
            vars["after"] = json!(after);
            let repo = Repository::of(&graphql(api, &url, LIST, vars, what)?);
            if repo.has_discussions_enabled == Some(false) {
                return Err(ApiError::Failed(format!(
                    "{what}: Discussions are turned off now"
                )));
            }
            let page = repo.discussions.unwrap_or_default();
            let Some(nodes) = page.nodes else {
                return Err(ApiError::Failed(format!(
                    "{what}: the answer holds no discussions"
                )));
            };
            counted = counted.or(page.total_count);
            for d in &nodes {
                each(&node(d));
                n += 1;
            }
            let info = page.page_info.unwrap_or_default();
            match (info.has_next_page, info.end_cursor) {
                (Some(true), Some(c)) if after.as_ref() != Some(&c) => after = Some(c),
                (Some(true), _) => {
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
        let needle = w.needle.nonce().hex();
        let needle = needle.as_str();
        let holds = |d: &graphql::Discussion| {
            [("title", &d.title), ("body", &d.body)]
                .into_iter()
                .find(|(_, t)| t.as_deref().is_some_and(|t| t.contains(needle)))
                .map(|(k, _)| k)
        };
        let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
        let source = self.settings.read_token_source.clone();
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
                // The same token's two listings disagree: not current.
                Ok(_) if seen && self.reads_as_writer() => (
                    RecoverOutcome::NotFound {
                        detail: String::new(),
                    },
                    false,
                ),
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
                "the plant, which neither run B's token nor the writer's lists yet, or which the one token both use lists only in its second listing",
                &c,
            )
        }
    }

    /// Cleanup: read back by the id GitHub gave the plant, deleted only
    /// when it holds what was planted and is by the author GitHub named.
    /// For an intent (no answer came) or a cleanup by probe id, those
    /// holding the plant's text that the write token's actor wrote; a
    /// copy by anyone else is listed, not removed.
    pub(super) fn clean_discussion(&self, e: &entry::Discussion) -> CleanupOutcome {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return CleanupOutcome::Left { reason: f.into() },
        };
        let title = e.title.as_str();
        let want = e.body.clone();
        let url = self.graphql_url();
        let mut ids: Vec<String> = vec![];
        let mut left: Option<String> = None;
        // What was planted, by the author GitHub named.
        let same = |d: &graphql::Discussion| {
            d.title.as_deref() == Some(title)
                && d.body.as_deref() == Some(want.as_str())
                && same_actor(d.login(), e.author.as_deref().unwrap_or(""))
        };
        match e.id.as_deref() {
            Some(id) => {
                match graphql(
                    &api,
                    &url,
                    NODE,
                    json!({ "id": id }),
                    "reading the discussion back",
                ) {
                    Ok(d) if d["node"].is_null() => return CleanupOutcome::Gone,
                    Ok(d) if same(&node(&d["node"])) => ids.push(id.to_string()),
                    // GitHub says NOT_FOUND too for a node the token may
                    // not see: gone only while the repository still
                    // answers the token.
                    Err(ApiError::NotFound(n)) => return self.gone_unless_hidden(&api, &url, &n),
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
                    Ok(d) => node::<graphql::Author>(&d["viewer"])
                        .login
                        .unwrap_or_default(),
                    Err(err) => return CleanupOutcome::Left { reason: err.text() },
                };
                let mut copies: Vec<String> = vec![];
                let r = self.discussions(&api, "finding the plant to delete", &mut |d| {
                    let Some(id) = d.id.as_deref().filter(|i| valid_id(i)) else {
                        return;
                    };
                    if d.title.as_deref() != Some(title) || d.body.as_deref() != Some(want.as_str())
                    {
                        return;
                    }
                    if same_actor(d.login(), &me) {
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
