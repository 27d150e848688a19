//! Cleanup: finding a probe's projects, and deleting each version A
//! uploaded after checking the project holds exactly A's files.

use super::protocol::{INDEX, excerpt, project_of, version_of};
use super::{Entry, Pypi, PypiIndex};
use crate::fault::Fault;
use crate::http::Request;
use crate::http::answer::{self, Class};
use crate::surface::carrier::CarrierSet;
use crate::surface::{CleanupOutcome, Job, RecoverOutcome, RunCtx};
use ::http::Method;

impl PypiIndex {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Pypi>],
    ) -> Result<Vec<Entry>, Fault> {
        let err = |o: RecoverOutcome| match o {
            RecoverOutcome::Error { reason } => Fault::Broken(reason),
            // The index's access control: no look can be had here.
            RecoverOutcome::Denied { reason } => Fault::Unsupported(reason),
            _ => Fault::broken("the simple index could not be read"),
        };
        // Only names whose tag verifies are kept while the root streams.
        let carriers: Vec<Pypi> = jobs.iter().map(|j| j.carrier).collect();
        let mut ours: Vec<String> = vec![];
        self.scan(&self.settings.simple_url, "text/html", &[], &mut |h| {
            let Some(name) = project_of(h) else { return };
            if Pypi::tagged(ctx, name, "").is_some_and(|c| carriers.contains(&c)) {
                ours.push(name.to_string());
            }
        })
        .map_err(err)?
        .ok_or_else(|| Fault::broken("the simple index is not there (404)"))?;
        let mut found = vec![];
        for name in &ours {
            let name = name.as_str();
            let files = self.files(name).map_err(err)?.unwrap_or_default();
            let mut versions: Vec<String> =
                files.iter().filter_map(|(f, _)| version_of(f)).collect();
            versions.dedup();
            for v in versions {
                let fs: Vec<String> = files
                    .iter()
                    .filter(|(f, _)| version_of(f).as_deref() == Some(v.as_str()))
                    .map(|(f, _)| f.clone())
                    .collect();
                found.push(Entry {
                    project: name.to_string(),
                    version: v,
                    files: fs,
                });
            }
        }
        Ok(found)
    }
}

impl PypiIndex {
    pub(super) fn clean_entry(&self, entry: &Entry) -> CleanupOutcome {
        let (project, version) = (entry.project.as_str(), entry.version.as_str());
        if !project.starts_with("runwarden-") || project.contains('/') || version.contains('/') {
            return CleanupOutcome::Left {
                reason: "not a runwarden project; nothing is deleted".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        // Checked before removal: the project holds exactly A's files.
        let mut have: Vec<String> = match self.files(project) {
            Ok(None) => return CleanupOutcome::Gone,
            Ok(Some(f)) => f.into_iter().map(|(n, _)| n).collect(),
            Err(RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason }) => {
                return left(reason);
            }
            Err(_) => return left("the project page could not be read".into()),
        };
        let mut want = entry.files.clone();
        have.sort();
        want.sort();
        if have.is_empty() {
            return CleanupOutcome::Gone;
        }
        if have != want {
            return left(
                "the project holds files A did not upload: someone else uploaded to it".into(),
            );
        }
        let url = format!("{}{project}/{version}", self.settings.upload_url);
        let req = self.settings.auth.apply(Request::new(Method::DELETE, &url));
        match self
            .client()
            .and_then(|c| c.send(&req).map_err(|f| self.failure(f)))
        {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if answer::classify(&(&r).into(), &INDEX) == Class::Refused => left(format!(
                "the index refused to delete it (HTTP {}: {}); it stays until someone with the right removes it",
                r.status,
                excerpt(&r.body)
            )),
            Ok(r) => left(format!(
                "the index offers no deletion runwarden knows (DELETE <upload-url><project>/<version>: HTTP {}); remove it by hand",
                r.status
            )),
            Err(f) => left(f.into_reason()),
        }
    }
}
