//! The sticky pull request comment: one per pull request, config and
//! label, found again by its hidden marker among the comments that are
//! ours (anyone can write a comment that carries the marker): those the
//! token's own identity (or `comment-author`) wrote, and with a marker key
//! only those whose state line carries the key's signature. The state is
//! bound to the repository and pull request (and, through the marker, to
//! the config and label): a state copied from elsewhere is not read. It is updated in
//! place, never duplicated, and says what changed since the state it
//! remembers; under `on-change` a comment whose verdicts and result did
//! not change is left alone (no request at all).

use super::{CommentMode, Options, Outcome, Target, refused};
use crate::escape;
use crate::github::{Api, ApiError};
use crate::output::comment::{self, CommentContext, Earlier, State, Stored};
use crate::report::Report;
use ::http::Method;
use serde_json::json;

/// Who `GITHUB_TOKEN` writes as.
pub const ACTIONS_BOT: &str = "github-actions[bot]";

const FALLBACK: &str = "`pull-requests: write` (or `issues: write`)";

/// The login comments are written as: the option, else who the token is
/// (`GET /user`, which answers for a user's token), else the Actions bot
/// (an installation token like `GITHUB_TOKEN` is no user, and GitHub
/// answers 403).
fn author(api: &Api<'_>, opts: &Options) -> Result<String, ApiError> {
    if let Some(a) = &opts.comment_author {
        return Ok(a.clone());
    }
    match api.call(Method::GET, "/user", None, "asking who the token is") {
        Ok(a) => Ok(a.json["login"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| ACTIONS_BOT.into())),
        Err(ApiError::Denied { .. }) | Err(ApiError::NotFound(_)) => Ok(ACTIONS_BOT.into()),
        Err(e) => Err(e),
    }
}

pub(super) fn publish(api: &Api<'_>, target: &Target, report: &Report, opts: &Options) -> Outcome {
    let Some(pr) = target.pr else {
        return Outcome::Skipped("not a pull request".into());
    };
    let login = match author(api, opts) {
        Ok(l) => l,
        Err(e) => return Outcome::Failed(e.text()),
    };
    let key = &opts.key;
    let marker = comment::marker(report);
    let at = format!("{}#{pr}", target.repository);
    let list = format!("/repos/{}/issues/{pr}/comments", target.repository);
    // The oldest comment that is ours: one the token's identity wrote
    // (whose state may be unreadable: edited by hand), and with a marker
    // key, only if its state carries the key's signature. Anything else
    // with the marker is someone else's, and left alone: a signed state
    // copied into another author's comment makes it no more ours.
    let mut ours: Option<(u64, Stored)> = None;
    let mut foreign: Vec<(u64, String)> = vec![];
    let listed = api.list(
        &list,
        None,
        "listing the pull request's comments",
        &mut |c| {
            let body = c["body"].as_str().unwrap_or("");
            let Some(id) = c["id"].as_u64() else { return };
            if ours.is_some() || !body.contains(&marker) {
                return;
            }
            let mine = c["user"]["login"]
                .as_str()
                .is_some_and(|l| l.eq_ignore_ascii_case(&login));
            match comment::comment_state(body, &marker, key, &at) {
                Stored::Trusted(s) if mine => ours = Some((id, Stored::Trusted(s))),
                // Without a key, ours whatever its state (edited by hand):
                // rewritten. With one, an unsigned state by this identity
                // is another workflow's imitation, and left alone.
                Stored::Untrusted if mine && !key.is_configured() => {
                    ours = Some((id, Stored::Untrusted))
                }
                Stored::Trusted(_) => {
                    let who = c["user"]["login"].as_str().unwrap_or("");
                    foreign.push((id, shown(who)));
                }
                _ => {}
            }
        },
    );
    if let Err(e) = listed {
        return refused("reading the pull request's comments", &e, FALLBACK, target);
    }
    let now = State::of(report, target.head_sha.as_deref());
    let cx = CommentContext {
        sha: target.head_sha.as_deref(),
        run_url: target.run_url.as_deref(),
        key,
        at: &at,
    };
    let (id, earlier) = match &ours {
        None => (None, Earlier::None),
        Some((id, Stored::Untrusted)) => (Some(*id), Earlier::Unreadable),
        Some((id, Stored::Trusted(s))) => (Some(*id), Earlier::State(s)),
    };
    let unchanged = matches!(&earlier, Earlier::State(s) if !s.differs(&now));
    let body = comment::comment(report, earlier, &cx);
    let done = write(api, target, report, opts, &login, id, unchanged, &body);
    if foreign.is_empty() {
        return done;
    }
    let others: Vec<String> = foreign
        .iter()
        .map(|(id, who)| format!("{id} by {who}"))
        .collect();
    let said = format!(
        "comment {} carries runwarden's state but was not written by {}: ignored",
        others.join(", "),
        shown(&login)
    );
    match done {
        Outcome::Done(m) | Outcome::Notice(m) => Outcome::Notice(format!("{m}; {said}")),
        other => other,
    }
}

/// Updates comment `id` (or creates one) with `body`.
#[allow(clippy::too_many_arguments)]
fn write(
    api: &Api<'_>,
    target: &Target,
    report: &Report,
    opts: &Options,
    login: &str,
    id: Option<u64>,
    unchanged: bool,
    body: &str,
) -> Outcome {
    let Some(pr) = target.pr else {
        return Outcome::Skipped("not a pull request".into());
    };
    let list = format!("/repos/{}/issues/{pr}/comments", target.repository);
    match (id, opts.comment) {
        (Some(id), CommentMode::OnChange) if unchanged => {
            Outcome::Done(format!("comment {id} left alone: nothing changed"))
        }
        (Some(id), _) => {
            let path = format!("/repos/{}/issues/comments/{id}", target.repository);
            let what = "updating the comment";
            match api.call(Method::PATCH, &path, Some(&json!({ "body": body })), what) {
                Ok(_) => Outcome::Done(format!("comment {id} updated")),
                Err(e) => refused(what, &e, FALLBACK, target),
            }
        }
        (None, CommentMode::OnChange) if report.exit_code() == 0 => {
            Outcome::Skipped("the run is green and there is no earlier comment to update".into())
        }
        (None, _) => {
            let what = "creating the comment";
            match api.call(Method::POST, &list, Some(&json!({ "body": body })), what) {
                Ok(a) => {
                    let id = a.json["id"].as_u64().unwrap_or(0);
                    let as_who = a.json["user"]["login"].as_str().unwrap_or("");
                    // Written as someone the next run will not look for
                    // (a GitHub App's token): it would write a new one.
                    if !as_who.eq_ignore_ascii_case(login) {
                        return Outcome::Notice(format!(
                            "comment {id} created on #{pr} as {}, but runs look for comments by \
                             {}: set `comment-author: {}` so the next run updates it instead \
                             of adding another",
                            shown(as_who),
                            shown(login),
                            shown(as_who),
                        ));
                    }
                    Outcome::Done(format!("comment {id} created on #{pr}"))
                }
                Err(e) => refused(what, &e, FALLBACK, target),
            }
        }
    }
}

/// A login as it is when it is one (letters, digits, `-`, `_` and an
/// App's `[bot]`), else escaped and quoted.
fn shown(login: &str) -> String {
    let plain = !login.is_empty()
        && login
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'[' | b']'));
    if plain {
        login.to_string()
    } else {
        escape::bytes(login.as_bytes())
    }
}
