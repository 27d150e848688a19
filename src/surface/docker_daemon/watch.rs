//! What watch mode compares of the daemon's objects: their labels by a
//! digest (a label may hold megabytes), and the carriers it cannot see.

use super::Dk;
use sha2::{Digest, Sha256};

/// The attribute an entry's labels are compared by (a digest: a label may
/// hold megabytes).
pub(super) const LABELS: &str = "labels";

/// The digest of no labels at all.
pub(super) fn no_labels() -> String {
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
