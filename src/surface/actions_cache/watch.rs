//! Watch mode: every entry of the repository's cache from the REST
//! listing run B reads, and which carriers a new or removed entry would
//! carry. The listing is sorted in memory before it is streamed (a cache
//! holds thousands of entries at most: 10 GB per repository).

use super::{Cache, Instance, ListError};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{
    Entry, Sink, SnapshotError, WatchCtx, component, emit_sorted, listed,
};

impl crate::surface::Watchable for Instance {
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
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

    /// A cache entry carries its key, its version and its archive; one saved
    /// again under the same key and version (after a delete) its archive.
    fn carriers_of(&self, c: &Change, _before: &Before) -> Vec<&'static str> {
        match c.kind {
            ChangeKind::Created => vec![Cache::Content, Cache::Key, Cache::Version],
            ChangeKind::Removed | ChangeKind::Renamed(_) => vec![Cache::Key],
            ChangeKind::Changed(_) => vec![Cache::Content],
        }
        .into_iter()
        .map(Cache::name)
        .collect()
    }

    fn unwatched(&self, carrier: &str) -> Option<&'static str> {
        (Cache::parse(carrier) == Some(Cache::RestorePrefix)).then_some(
            "which entry a prefix restore returns is not in the listing; a new entry is reported under its key, version and content",
        )
    }
}
