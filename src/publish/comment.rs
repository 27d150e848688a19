//! The sticky pull request comment: one per pull request and config,
//! found again by its hidden marker among the comments the token's own
//! identity wrote (anyone can write a comment that carries the marker),
//! updated in place and never duplicated. It says what changed since the
//! state it remembers; under `on-change` a comment whose verdicts did not
//! change is left alone (no request at all).

use super::{CommentMode, Options, Outcome, Target, refused};
use crate::github::{Api, ApiError};
use crate::output::review::{self, CommentContext};
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
    let marker = review::marker(report);
    let list = format!("/repos/{}/issues/{pr}/comments", target.repository);
    // The oldest comment of ours with the marker: the one the first run
    // made (a duplicate, should one exist, is left as it is).
    let mut ours: Option<(u64, String)> = None;
    let listed = api.list(
        &list,
        None,
        "listing the pull request's comments",
        &mut |c| {
            let mine = c["user"]["login"]
                .as_str()
                .is_some_and(|l| l.eq_ignore_ascii_case(&login));
            let body = c["body"].as_str().unwrap_or("");
            if ours.is_none()
                && mine
                && body.contains(&marker)
                && let Some(id) = c["id"].as_u64()
            {
                ours = Some((id, body.to_string()));
            }
        },
    );
    if let Err(e) = listed {
        return refused("reading the pull request's comments", &e, FALLBACK, target);
    }
    let before = ours.as_ref().and_then(|(_, b)| review::comment_state(b));
    let now = review::verdicts(report);
    let changed = match &before {
        Some(b) => b.verdicts != now,
        None => true,
    };
    let cx = CommentContext {
        sha: target.head_sha.as_deref(),
        run_url: target.run_url.as_deref(),
    };
    let body = review::comment(report, before.as_ref(), &cx);
    match (ours, opts.comment) {
        (Some((id, _)), CommentMode::OnChange) if !changed => {
            Outcome::Done(format!("comment {id} left alone: no verdict changed"))
        }
        (Some((id, _)), _) => {
            let path = format!("/repos/{}/issues/comments/{id}", target.repository);
            match api.call(
                Method::PATCH,
                &path,
                Some(&json!({ "body": body })),
                "updating the comment",
            ) {
                Ok(_) => Outcome::Done(format!("comment {id} updated")),
                Err(e) => refused("updating the comment", &e, FALLBACK, target),
            }
        }
        (None, CommentMode::OnChange) if report.exit_code() == 0 => {
            Outcome::Skipped("the run is green and there is no earlier comment to update".into())
        }
        (None, _) => {
            match api.call(
                Method::POST,
                &list,
                Some(&json!({ "body": body })),
                "creating the comment",
            ) {
                Ok(a) => Outcome::Done(format!(
                    "comment {} created on #{pr}",
                    a.json["id"].as_u64().unwrap_or(0)
                )),
                Err(e) => refused("creating the comment", &e, FALLBACK, target),
            }
        }
    }
}
