//! Run A: each carrier's object created with the write token, journalled
//! before the request and again with its id once GitHub gave one; taken
//! back only when GitHub refused the write.

use super::{Gh, Instance, carriers};
use crate::escape;
use crate::github::ApiError;
use crate::surface::{PlantJob, PlantOutcome, RunCtx};
use ::http::Method;
use serde_json::Value;

impl Instance {
    pub(super) fn plant_carrier(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Gh,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let req = match carriers::plant_request(&self.s, ctx, carrier, &job.nonce) {
            Ok(r) => r,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let what = format!("planting {carrier} in {}", self.repo());
        created(req.entry.clone());
        match api.call(Method::POST, &req.path, Some(&req.body), &what) {
            Ok(a) => {
                // The id GitHub gave, so cleanup reads back this object.
                if let Some(key) = req.entry["key"].as_str()
                    && req.entry["ref"].is_null()
                    && !a.json[key].is_null()
                {
                    let mut full = req.entry.clone();
                    full["ref"] = a.json[key].clone();
                    created(full);
                }
                PlantOutcome::Planted {
                    needle: carriers::needle(&self.s, carrier, &job.nonce),
                    persistence: None,
                    detail: self.planted_detail(carrier),
                }
            }
            Err(e @ ApiError::Denied { .. }) => {
                created(crate::surface::retraction(&req.entry));
                self.refused(&e)
            }
            Err(e) => PlantOutcome::Error { reason: e.text() },
        }
    }

    fn planted_detail(&self, carrier: Gh) -> String {
        let source = escape::bytes(self.s.token_source.as_bytes());
        let repo = self.repo();
        let commit = self.s.commit.as_deref().unwrap_or("?");
        match carrier {
            Gh::IssueComment => format!(
                "a comment on #{} of {repo} (issue from {}), written with {source}",
                self.s.issue.unwrap_or(0),
                self.s.issue_source
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

impl Instance {
    /// A plant GitHub answered 403: refused (closed) only when it is
    /// GitHub refusing the token a permission
    /// ([`ApiError::is_permission_refusal`]), saying the token by its
    /// source and GitHub's answer; any other 403 (SAML enforcement, an IP
    /// allow list, a feature that is off) proves nothing closed: failed.
    /// The one place every github-api carrier's plant decides this.
    pub(super) fn refused(&self, e: &ApiError) -> PlantOutcome {
        let token = escape::bytes(self.s.token_source.as_bytes());
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
