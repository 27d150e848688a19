//! Watch mode: the names a PROPFIND of depth 1 lists (the listing run B
//! reads), and which carriers a new or removed one would carry. A cache
//! read through an `index-url` is read as text, not as names: it has no
//! snapshot.

use super::protocol::ListError;
use super::{Http, Instance};
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};

impl crate::surface::Watchable for Instance {
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        if self.s.index_url.is_some() {
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

    /// A new or removed resource carries its path (`cache-key`); a
    /// collection its name.
    fn carriers_of(&self, c: &Change, _before: &Before) -> Vec<&'static str> {
        let carrier = match c.entry().kind.as_str() {
            "collection" => Http::CollectionName,
            _ => Http::CacheKey,
        };
        vec![carrier.name()]
    }

    fn unwatched(&self, carrier: &str) -> Option<&'static str> {
        match Http::parse(carrier)? {
            Http::NegativeLookup => Some("a remembered miss leaves nothing in the listing"),
            Http::Property => {
                Some("dead properties are not in the depth-1 listing watch mode reads")
            }
            Http::CacheKey | Http::CollectionName => None,
        }
    }
}
