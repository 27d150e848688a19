//! Watch mode's reading of a change: which carrier a name of each kind
//! carries, and whether an entry's mtime is its own or one set on purpose.
//! (The snapshot's walk is [`super::snap`]'s.)

use super::Fs;
use crate::state::diff::Before;
use crate::sys;

/// The name carrier of an entry of this kind.
pub(super) fn name_carrier(kind: &str) -> Fs {
    match kind {
        "dir" => Fs::DirectoryName,
        "special" => Fs::SpecialFileName,
        _ => Fs::FileName,
    }
}

/// Whether an entry's mtime looks like its own: while the watch ran
/// (from its first snapshot to now, with two seconds' slack for coarse
/// clocks), and not after its change time (every write moves both; only a
/// time set by hand can put the mtime ahead).
pub(super) fn made_during(e: &crate::state::snapshot::Entry, before: &Before) -> bool {
    let time = |k: &str| -> Option<(i64, i64)> {
        let (s, n) = e.attrs.get(k)?.split_once('.')?;
        Some((s.parse().ok()?, n.parse().ok()?))
    };
    let now = sys::now_coarse().0;
    let in_window = time("mtime").is_none_or(|(t, _)| t >= before.since - 2 && t <= now + 2);
    let not_ahead = match (time("mtime"), time("ctime")) {
        (Some(m), Some(c)) => m <= c,
        _ => true,
    };
    in_window && not_ahead
}
