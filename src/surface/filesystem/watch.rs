//! Watch mode: the directory as the watched command left it (the walk is
//! [`super::snap`]'s), and which carriers a change would carry.

use super::snap::{Trust, Walk};
use super::{CONTENT_WINDOW, Filesystem, Fs};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use crate::sys;

/// The name carrier of an entry of this kind.
fn name_carrier(kind: &str) -> Fs {
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
fn made_during(e: &crate::state::snapshot::Entry, before: &Before) -> bool {
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

impl Filesystem {
    /// The directory, walked ([`super::snap`]) and streamed to `sink`.
    pub(super) fn snapshot_tree(
        &self,
        ctx: &WatchCtx,
        sink: &mut Sink<'_>,
    ) -> Result<(), SnapshotError> {
        let root = self
            .open_surface()
            .map_err(|e| SnapshotError::Failed(format!("cannot open {}: {e}", self.path_text())))?;
        let dev = sys::fstat(&root)
            .map_err(|e| SnapshotError::Failed(format!("cannot stat {}: {e}", self.path_text())))?
            .dev;
        let mut walk = Walk {
            dev,
            ctx,
            trust: Trust::of(&root),
            sink,
            window: vec![0u8; CONTENT_WINDOW],
            at: (0, String::new()),
        };
        self.walk(&root, &mut Vec::new(), &mut walk)
    }
}

/// The carriers a change would carry: a new or removed entry its name
/// (and, when it has them, its content, size, link target and xattrs,
/// and an mtime set on purpose); a rename its name; a changed entry
/// what changed (`mtime` alone only when nothing recovery reads
/// changed with it).
pub(super) fn carriers_of(c: &Change, before: &Before) -> Vec<Fs> {
    let e = c.entry();
    let mut out = Vec::new();
    let has = |k: &str| e.attrs.contains_key(k);
    match &c.kind {
        ChangeKind::Created | ChangeKind::Removed => {
            out.push(name_carrier(&e.kind));
            // A new file's size is a message as much as its content.
            if e.kind == "file" && e.attrs.get("size").is_some_and(|s| s != "0") {
                out.extend([Fs::FileContent, Fs::FileSize]);
            }
            // An mtime from before the watch began, or after it ended, was
            // set on purpose.
            if matches!(c.kind, ChangeKind::Created) && !made_during(e, before) {
                out.push(Fs::Mtime);
            }
            if e.kind == "symlink" {
                out.push(Fs::SymlinkTarget);
            }
            if has("xattr-names") {
                out.extend([Fs::XattrName, Fs::Xattr]);
            }
        }
        ChangeKind::Renamed(attrs) | ChangeKind::Changed(attrs) => {
            if matches!(c.kind, ChangeKind::Renamed(_)) {
                out.push(name_carrier(&e.kind));
            }
            let big = e
                .attrs
                .get("size")
                .and_then(|s| s.parse::<usize>().ok())
                .is_some_and(|s| s > CONTENT_WINDOW);
            for a in attrs {
                match a.as_str() {
                    "head" => out.push(Fs::FileContent),
                    "size" => out.extend([Fs::FileSize, Fs::FileContent]),
                    "target" => out.push(Fs::SymlinkTarget),
                    "xattr-names" => out.push(Fs::XattrName),
                    "xattrs" => out.push(Fs::Xattr),
                    _ => {}
                }
            }
            // Where the head digest cannot tell (no content reads, an
            // unreadable file, content past the window), content may change
            // with the times alone.
            let blind = e.kind == "file"
                && e.attrs.get("size").is_some_and(|s| s != "0")
                && (big || e.attrs.get("head").is_none_or(|h| h.starts_with("unread")));
            if attrs.iter().any(|a| a == "mtime") && out.is_empty() {
                out.push(Fs::Mtime);
                if blind {
                    out.push(Fs::FileContent);
                }
            }
            // The change time alone: a write whose every other trace was
            // set back (a same-size rewrite with its mtime restored), or a
            // change no carrier models (a mode, a link count). A file's is
            // taken for its content; a directory's is its entries', which
            // are reported themselves.
            if matches!(c.kind, ChangeKind::Changed(_))
                && attrs.iter().all(|a| a == "ctime")
                && e.kind == "file"
            {
                out.push(Fs::FileContent);
            }
        }
    }
    out
}
