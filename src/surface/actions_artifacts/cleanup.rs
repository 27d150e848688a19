//! Cleanup's two routes to delete an artifact: by id through the REST API
//! (`actions: write`), and through the results service in the run that
//! uploaded it.

use super::{ActionsArtifacts, Entry, Named, TwirpError};
use crate::github::{Api, ApiError};
use crate::surface::CleanupOutcome;
use ::http::Method;
use serde_json::json;

impl ActionsArtifacts {
    /// Deletes every artifact named `name` (only `id` when the journal
    /// has it): `Err` when the API would not.
    pub(super) fn delete_rest(
        &self,
        api: &Api<'_>,
        name: &str,
        id: Option<u64>,
    ) -> Result<CleanupOutcome, String> {
        let rp = self.repo_path();
        let mut ids = vec![];
        if let Some(id) = id {
            match api.call(
                Method::GET,
                &format!("{rp}/actions/artifacts/{id}"),
                None,
                "reading the artifact before deleting it",
            ) {
                Ok(a) if a.json["name"].as_str() == Some(name) => ids.push(id),
                Ok(_) => {
                    return Ok(CleanupOutcome::Left {
                        reason: format!("artifact {id} now has another name: not the plant"),
                    });
                }
                Err(ApiError::NotFound(_)) => {}
                Err(e) => return Err(e.text()),
            }
        }
        // No id, or nothing under it: the listing by name decides whether
        // it is gone (an unsigned receipt's entry with a made-up id would
        // otherwise count the plant gone).
        if ids.is_empty() {
            let path = format!(
                "{rp}/actions/artifacts?name={}",
                crate::wire::percent_encode(name)
            );
            // One that matches but names no id cannot be deleted, and
            // is no "gone": left, and said.
            let mut no_id = false;
            api.list(
                &path,
                Some("artifacts"),
                "finding the artifact to delete",
                &mut |a| {
                    if a["name"].as_str() == Some(name) {
                        match a["id"].as_u64() {
                            Some(i) => ids.push(i),
                            None => no_id = true,
                        }
                    }
                },
            )
            .map_err(|e| e.text())?;
            if no_id {
                return Err("the listing names the artifact without its id".into());
            }
        }
        if ids.is_empty() {
            return Ok(CleanupOutcome::Gone);
        }
        for i in ids {
            match api.call(
                Method::DELETE,
                &format!("{rp}/actions/artifacts/{i}"),
                None,
                "deleting the artifact",
            ) {
                Ok(_) | Err(ApiError::NotFound(_)) => {}
                Err(e) => return Err(e.text()),
            }
        }
        Ok(CleanupOutcome::Removed)
    }

    /// `DeleteArtifact` with the runtime token of the run that uploaded.
    pub(super) fn delete_twirp(&self, e: &Entry, name: &str) -> Result<CleanupOutcome, String> {
        let (Some(run), Some(job)) = (e.run.as_deref(), e.job.as_deref()) else {
            return Err("the journal entry names no run".into());
        };
        let mine = self
            .settings
            .token
            .as_deref()
            .and_then(crate::wire::jwt_backend_ids);
        if mine.as_ref().map(|m| m.0.as_str()) != Some(run) {
            return Err("this run's runtime token is not the uploading run's".into());
        }
        let body = Named {
            workflow_run_backend_id: run,
            workflow_job_run_backend_id: job,
            name,
        };
        match self.twirp("DeleteArtifact", &body) {
            Ok(v) if v["ok"] == json!(true) => Ok(CleanupOutcome::Removed),
            Ok(_) => Err("DeleteArtifact answered not ok".into()),
            Err(TwirpError::NotFound) => Ok(CleanupOutcome::Gone),
            Err(TwirpError::Denied(m) | TwirpError::Failed(m)) => Err(m),
        }
    }
}
