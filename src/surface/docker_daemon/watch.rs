//! Watch mode: the daemon's objects as its listings show them (every
//! image tag, dangling images by id, volumes, containers and networks by
//! name, each with its id and a digest of its labels), and which carriers
//! a new, removed or changed one would carry.

use super::names::Kind;
use super::{Dk, DockerDaemon};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Entry, Sink, SnapshotError, component, emit_sorted, listed};
use sha2::{Digest, Sha256};

/// The attribute an entry's labels are compared by (a digest: a label may
/// hold megabytes).
const LABELS: &str = "labels";

/// The digest of no labels at all.
fn no_labels() -> String {
    crate::state::snapshot::hex(Sha256::new_with_prefix(b"{}"))
}

/// The carriers watch mode cannot see, and why.
pub(super) const UNWATCHED: &[(Dk, &str)] = &[
    (
        Dk::VolumeContent,
        "a volume's files are not in the daemon's listings, which watch mode compares",
    ),
    (
        Dk::EventHistory,
        "watch mode compares the daemon's listings, not its event history",
    ),
    (
        Dk::RunnerPersistence,
        "a beacon is what an earlier probe leaves; watch mode reports the command's own writes under their carriers",
    ),
];

impl DockerDaemon {
    /// Every object of every listing, sorted and streamed to `sink`.
    pub(super) fn snapshot_objects(&self, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let mut all: Vec<Entry> = Vec::new();
        for kind in [Kind::Image, Kind::Volume, Kind::Container, Kind::Network] {
            super::list::list(&self.api, kind, &mut |item| {
                let labels = serde_json::to_vec(&item.labels).unwrap_or_default();
                let attrs = [
                    ("id", item.id.clone()),
                    (
                        LABELS,
                        crate::state::snapshot::hex(Sha256::new_with_prefix(&labels)),
                    ),
                ];
                // A dangling image is known by its id alone.
                let names = if item.names.is_empty() {
                    vec![item.id.clone()]
                } else {
                    item.names.clone()
                };
                for n in names {
                    all.push(listed(
                        vec![kind.as_str().into(), component(n.as_bytes())],
                        kind.as_str(),
                        &attrs,
                    ));
                }
            })
            .map_err(|f| SnapshotError::Failed(f.fault().to_string()))?;
        }
        emit_sorted(all, sink)
    }
}

/// A new or removed object carries its name (an image's, its tag) and,
/// with labels, its labels; a change of labels the label carrier; an
/// image tag moved to another image the tag carrier.
pub(super) fn carriers_of(c: &Change, _before: &Before) -> Vec<Dk> {
    let e = c.entry();
    let (name, label) = match e.key.first().map(String::as_str) {
        Some("image") => (Dk::ImageTag, Dk::ImageLabel),
        Some("volume") => (Dk::VolumeName, Dk::VolumeLabel),
        Some("container") => (Dk::ContainerName, Dk::ContainerLabel),
        Some("network") => (Dk::NetworkName, Dk::NetworkName),
        _ => return vec![],
    };
    let labelled = e.attrs.get(LABELS).is_some_and(|l| *l != no_labels());
    let mut out = vec![];
    match &c.kind {
        ChangeKind::Created | ChangeKind::Removed | ChangeKind::Renamed(_) => {
            out.push(name);
            if labelled {
                out.push(label);
            }
        }
        ChangeKind::Changed(attrs) => {
            if attrs.iter().any(|a| a == "id") {
                out.push(name);
            }
            if attrs.iter().any(|a| a == LABELS) {
                out.push(label);
            }
        }
    }
    out
}
