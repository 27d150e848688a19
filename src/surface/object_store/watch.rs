//! Watch mode on a bucket: what run B's listings see, as one snapshot (the
//! objects' keys, the uploads, and the delete markers of a bucket that
//! keeps versions), and which carrier a change between two snapshots
//! carries. What an object holds (its content, metadata, tags) is not
//! read: those carriers are SKIPPED in watch mode (`Surface::WATCH`).

use super::surface::ListError;
use super::{Obj, ObjectStore};
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, component, emit_sorted, listed};

impl ObjectStore {
    /// Every key under the prefix, every upload, every delete marker.
    pub(super) fn snapshot_all(&self, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let failed = |e: ListError| match e {
            ListError::Denied(m) | ListError::Failed(m) => SnapshotError::Failed(m),
            ListError::Absent(m) => SnapshotError::Unsupported(m),
        };
        let mut all = Vec::new();
        self.list_keys(&mut |k| {
            all.push(listed(
                vec!["objects".into(), component(k.as_bytes())],
                "object",
                &[],
            ));
        })
        .map_err(failed)?;
        let uploads = self.list_uploads(&mut |k, id| {
            all.push(listed(
                vec![
                    "uploads".into(),
                    component(k.as_bytes()),
                    component(id.as_bytes()),
                ],
                "upload",
                &[],
            ));
        });
        // A store without uploads or versions has none to show.
        match uploads {
            Ok(_) | Err(ListError::Absent(_)) => {}
            Err(e) => return Err(failed(e)),
        }
        let mut markers = vec![];
        let versions =
            self.list_markers(&mut |k, id| markers.push((k.to_string(), id.to_string())));
        match versions {
            Ok(_) | Err(ListError::Absent(_)) => {}
            Err(e) => return Err(failed(e)),
        }
        for (k, id) in markers {
            all.push(listed(
                vec![
                    "markers".into(),
                    component(k.as_bytes()),
                    component(id.as_bytes()),
                ],
                "marker",
                &[],
            ));
        }
        emit_sorted(all, sink)
    }
}

/// A new or removed key carries `object-key`; an upload,
/// `multipart-upload`; a delete marker (an object written and deleted in
/// a bucket that keeps versions), `object-version`.
pub(super) fn changes_of(c: &Change, _before: &Before) -> Vec<Obj> {
    match c.entry().kind.as_str() {
        "upload" => vec![Obj::MultipartUpload],
        "marker" => vec![Obj::ObjectVersion],
        _ => vec![Obj::ObjectKey],
    }
}
