//! Watch mode: the projects the simple index's root lists (the listing run
//! B starts from), and which carrier a new or removed one would carry.
//! Versions, descriptions and file names are on each project's own page,
//! which watch mode does not read: those carriers are SKIPPED.

use super::protocol::project_of;
use super::{Instance, Pypi};
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::RecoverOutcome;

impl crate::surface::Watchable for Instance {
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let mut all = Vec::new();
        let scanned = self
            .scan(&self.s.simple_url, "text/html", &[], &mut |h| {
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

    /// A project listed or gone carries its name.
    fn carriers_of(&self, _c: &Change, _before: &Before) -> Vec<&'static str> {
        vec![Pypi::ProjectName.name()]
    }

    fn unwatched(&self, carrier: &str) -> Option<&'static str> {
        (Pypi::parse(carrier) != Some(Pypi::ProjectName)).then_some(
            "versions, descriptions and file names are on each project's page, which watch mode does not read",
        )
    }
}
