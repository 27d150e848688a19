//! What run A's plant of a carrier's object reports: what was planted
//! where, the id in GitHub's answer, and what a 403 to a plant is (the one
//! place every github-api carrier's plant decides it).

use super::entry::{Needle, Ref};
use super::{Gh, GitHubApi, carriers};
use crate::escape;
use crate::github::ApiError;
use crate::surface::PlantOutcome;
use serde_json::Value;

impl GitHubApi {
    pub(super) fn planted_detail(&self, carrier: Gh) -> String {
        let source = escape::bytes(self.settings.token_source.as_bytes());
        let repo = self.repo();
        let commit = self.settings.commit.as_deref().unwrap_or("?");
        match carrier {
            Gh::IssueComment => format!(
                "a comment on #{} of {repo} (issue from {}), written with {source}",
                self.settings.issue.unwrap_or(0),
                self.settings.issue_source
            ),
            Gh::Deployment => format!(
                "a deployment of {commit} to the environment {} of {repo}, written with \
                 {source}; GitHub makes the environment with the first deployment and runwarden \
                 leaves it (it carries no nonce; deleting it needs administration: write)",
                carriers::ENVIRONMENT
            ),
            Gh::CommitStatus | Gh::CheckRun => format!(
                "a {} on commit {commit} (GITHUB_SHA or `commit`) of {repo}, written with \
                 {source}; GitHub offers no delete, so it stays",
                if carrier == Gh::CheckRun {
                    "check run"
                } else {
                    "commit status"
                }
            ),
            _ => format!("{carrier} object created in {repo} with {source}"),
        }
    }
}

/// What GitHub answered for an object's key field, as a journal line
/// holds it: its id (a number) or a name. Anything else, or nothing, is
/// not journalled (cleanup then finds the object by what it holds).
pub(super) fn ref_of(v: &Value) -> Option<Ref> {
    match v {
        Value::Number(n) => n.as_u64().map(Ref::Id),
        Value::String(s) => Some(Ref::Name(s.clone())),
        _ => None,
    }
}

impl GitHubApi {
    /// A plant GitHub answered 403: refused (closed) only when it is
    /// GitHub refusing the token a permission
    /// ([`ApiError::is_permission_refusal`]), saying the token by its
    /// source and GitHub's answer; any other 403 (SAML enforcement, an IP
    /// allow list, a feature that is off) proves nothing closed: failed.
    /// The one place every github-api carrier's plant decides this.
    pub(super) fn refused(&self, e: &ApiError) -> PlantOutcome<Needle> {
        let token = escape::bytes(self.settings.token_source.as_bytes());
        if e.is_permission_refusal() {
            PlantOutcome::Refused {
                reason: format!("GitHub refused the write token ({token}): {}", e.text()),
            }
        } else {
            PlantOutcome::Error {
                reason: format!(
                    "GitHub answered the write token ({token}) with a refusal that names no \
                     missing permission, which proves nothing closed: {}",
                    e.text()
                ),
            }
        }
    }
}
