//! Watch mode: every artifact of the repository from the REST listing run
//! B starts from, and which carriers a new or removed artifact would
//! carry. An artifact is its name and id (names repeat across runs).

use super::{ActionsArtifacts, Artifact, Item};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};

impl ActionsArtifacts {
    pub(super) fn snapshot_listing(
        &self,
        _ctx: &WatchCtx,
        sink: &mut Sink<'_>,
    ) -> Result<(), SnapshotError> {
        let api = self
            .api()
            .map_err(|why| SnapshotError::Failed(format!("no listing of the artifacts ({why})")))?;
        let mut all = Vec::new();
        let mut malformed = false;
        api.list(
            &format!("{}/actions/artifacts", self.repo_path()),
            Some("artifacts"),
            &format!("listing the artifacts of {}", self.repo()),
            &mut |a| match Item::of(a) {
                Some(Item { id, name }) => all.push(listed(
                    vec![component(name.as_bytes()), id.to_string()],
                    "artifact",
                    &[("size", a["size_in_bytes"].to_string())],
                )),
                None => malformed = true,
            },
        )
        .map_err(|e| SnapshotError::Failed(e.text()))?;
        if malformed {
            return Err(SnapshotError::Failed(
                "an artifact of the listing lacks its id or name".into(),
            ));
        }
        emit_sorted(all, sink)
    }
}

/// A new artifact carries its name, its files' paths and their content;
/// a removed one its name.
pub(super) fn carriers_of(c: &Change, _before: &Before) -> Vec<Artifact> {
    match c.kind {
        ChangeKind::Created => vec![Artifact::Content, Artifact::FilePath, Artifact::Name],
        ChangeKind::Removed | ChangeKind::Renamed(_) => vec![Artifact::Name],
        ChangeKind::Changed(_) => vec![Artifact::Content],
    }
}
