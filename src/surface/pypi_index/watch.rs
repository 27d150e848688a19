//! Watch mode: the projects the simple index's root lists (the listing run
//! B starts from). A project listed or gone carries its name. Versions,
//! descriptions and file names are on each project's own page, which watch
//! mode does not read: those carriers are SKIPPED.

use super::PypiIndex;
use super::protocol::project_of;
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::RecoverOutcome;

/// Why watch mode cannot see every carrier but project-name.
pub(super) const ON_PROJECT_PAGES: &str = "versions, descriptions and file names are on each project's page, which watch mode does not read";

impl PypiIndex {
    pub(super) fn snapshot_root(
        &self,
        _ctx: &WatchCtx,
        sink: &mut Sink<'_>,
    ) -> Result<(), SnapshotError> {
        let mut all = Vec::new();
        let scanned = self
            .scan(&self.settings.simple_url, "text/html", &[], &mut |h| {
                if let Some(name) = project_of(h) {
                    all.push(listed(vec![component(name.as_bytes())], "project", &[]));
                }
            })
            .map_err(|o| match o {
                RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason } => {
                    SnapshotError::Failed(reason)
                }
                RecoverOutcome::Found { detail } | RecoverOutcome::NotFound { detail } => {
                    SnapshotError::Failed(detail)
                }
            })?;
        if scanned.is_none() {
            return Err(SnapshotError::Failed(format!(
                "the simple index {} is not there (404)",
                self.shown()
            )));
        }
        emit_sorted(all, sink)
    }
}
