//! Watch mode: the names a PROPFIND of depth 1 lists (the listing run B
//! reads), and which carriers a new or removed one would carry. A cache
//! read through an `index-url` is read as text, not as names: it has no
//! snapshot. (What the listing cannot see is [`super::HttpCache`]'s
//! `WATCH`.)

use super::protocol::ListError;
use super::{Http, HttpCache};
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};

impl HttpCache {
    pub(super) fn snapshot_listing(
        &self,
        _ctx: &WatchCtx,
        sink: &mut Sink<'_>,
    ) -> Result<(), SnapshotError> {
        if self.settings.index_url.is_some() {
            return Err(SnapshotError::Unsupported(
                "the cache is read through its index-url, as text: watch mode needs the PROPFIND listing"
                    .into(),
            ));
        }
        let mut all = Vec::new();
        self.list(
            &mut |href| {
                // A collection's href ends in `/`.
                let kind = if href.ends_with('/') {
                    "collection"
                } else {
                    "resource"
                };
                all.push(listed(vec![component(href.as_bytes())], kind, &[]));
            },
            &mut |_| {},
        )
        .map_err(|e| match e {
            ListError::Unavailable(r) => SnapshotError::Unsupported(r),
            ListError::Denied(r) | ListError::Failed(r) => SnapshotError::Failed(r),
        })?;
        emit_sorted(all, sink)
    }
}

/// A new or removed resource carries its path (`cache-key`); a
/// collection its name.
pub(super) fn carriers_of(c: &Change, _before: &Before) -> Vec<Http> {
    let carrier = match c.entry().kind.as_str() {
        "collection" => Http::CollectionName,
        _ => Http::CacheKey,
    };
    vec![carrier]
}
