//! Watch mode: every entry of the repository's cache from the REST
//! listing run B reads, and which carriers a new or removed entry would
//! carry. The listing is sorted in memory before it is streamed (a cache
//! holds thousands of entries at most: 10 GB per repository). (What the
//! listing cannot see is [`super::ActionsCache`]'s `WATCH`.)

use super::{ActionsCache, Cache, ListError};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{
    Entry, Sink, SnapshotError, WatchCtx, component, emit_sorted, listed,
};

impl ActionsCache {
    pub(super) fn snapshot_listing(
        &self,
        _ctx: &WatchCtx,
        sink: &mut Sink<'_>,
    ) -> Result<(), SnapshotError> {
        let mut all: Vec<Entry> = Vec::new();
        self.list(None, &mut |l| {
            all.push(listed(
                vec![
                    component(l.key.as_bytes()),
                    component(l.version.as_bytes()),
                    component(l.scope.as_bytes()),
                ],
                "cache-entry",
                &[("id", l.id.to_string())],
            ))
        })
        .map_err(|e| match e {
            ListError::Denied(r) => {
                SnapshotError::Failed(format!("the cache listing was refused: {r}"))
            }
            ListError::Failed(r) => SnapshotError::Failed(r),
        })?;
        emit_sorted(all, sink)
    }
}

/// A cache entry carries its key, its version and its archive; one saved
/// again under the same key and version (after a delete) its archive.
pub(super) fn carriers_of(c: &Change, _before: &Before) -> Vec<Cache> {
    match c.kind {
        ChangeKind::Created => vec![Cache::Content, Cache::Key, Cache::Version],
        ChangeKind::Removed | ChangeKind::Renamed(_) => vec![Cache::Key],
        ChangeKind::Changed(_) => vec![Cache::Content],
    }
}
