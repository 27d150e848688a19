//! Watch mode: the directory as the watched command left it, and which
//! carriers a change would carry.
//!
//! The snapshot walks the whole tree (run B lists only the top, but a
//! command writes anywhere under it), through directory descriptors with
//! no-follow semantics, without crossing into another filesystem, in
//! [`key_order`]: each directory's names are sorted (memory holds the
//! largest directory's names, never the tree) and a directory comes after
//! its children. Each entry records what recovery looks at: its type, size
//! and mtime, its xattrs' names and values (digests), a symlink's target
//! (digest) and the first [`CONTENT_WINDOW`] bytes of a regular file
//! (digest, unless `content-reads: false`). Access times are left alone
//! (`O_NOATIME` where allowed) and nothing is followed or opened that is
//! not a regular file.

use super::{CONTENT_WINDOW, Fs, Instance, fill};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{self, Sink, SnapshotError, WatchCtx, component};
use crate::sys::Stat;
use crate::{escape, sys};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The first 16 bytes of a SHA-256, in hex: enough to tell two states of
/// one entry apart, short enough for a snapshot of a million entries.
fn digest(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn failed(what: &str, path: &[String], e: &io::Error) -> SnapshotError {
    SnapshotError::Failed(format!("{what} {}: {e}", escape::line(&path.join("/"))))
}

impl Instance {
    fn walk(
        &self,
        dir: &OwnedFd,
        dev: u64,
        key: &mut Vec<String>,
        ctx: &WatchCtx,
        sink: &mut Sink<'_>,
        window: &mut [u8],
    ) -> Result<(), SnapshotError> {
        let listing = sys::open_listing(dir).map_err(|e| failed("cannot list", key, &e))?;
        let mut names: Vec<(String, OsString)> = Vec::new();
        for r in sys::DirIter::new(&listing).map_err(|e| failed("cannot list", key, &e))? {
            let (name, _) = r.map_err(|e| failed("cannot list", key, &e))?;
            names.push((component(name.as_bytes()), name));
        }
        drop(listing);
        names.sort_unstable();
        for (shown, name) in names {
            let st = match sys::lstat_at(dir, &name) {
                Ok(st) => st,
                // Gone between the listing and the look: not there now.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    key.push(shown);
                    return Err(failed("cannot stat", key, &e));
                }
            };
            if ctx.skip.contains(&(st.dev, st.ino)) {
                continue;
            }
            key.push(shown);
            let mut attrs = BTreeMap::new();
            let is_dir = st.file_type() == libc::S_IFDIR;
            if is_dir && st.dev == dev {
                match sys::open_dir_at(dir, &name) {
                    Ok(sub) => match self.walk(&sub, dev, key, ctx, sink, window) {
                        Ok(()) => {}
                        // A directory this user may not list: its own
                        // entry says so, and what is inside is not seen
                        // (the report counts these).
                        Err(SnapshotError::Failed(_))
                            if sys::open_listing(&sub)
                                .is_err_and(|e| e.raw_os_error() == Some(libc::EACCES)) =>
                        {
                            attrs.insert("unlisted".into(), "EACCES".into());
                        }
                        Err(e) => return Err(e),
                    },
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        key.pop();
                        continue;
                    }
                    Err(e) => return Err(failed("cannot open", key, &e)),
                }
            } else if is_dir {
                attrs.insert("mount-point".into(), "not entered".into());
            }
            let entry = self.entry_of(dir, &name, &st, key.clone(), attrs, window)?;
            sink(entry).map_err(|e| SnapshotError::Failed(format!("writing the snapshot: {e}")))?;
            key.pop();
        }
        Ok(())
    }

    fn entry_of(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        key: Vec<String>,
        mut attrs: BTreeMap<String, String>,
        window: &mut [u8],
    ) -> Result<snapshot::Entry, SnapshotError> {
        let kind = match st.file_type() {
            libc::S_IFREG => "file",
            libc::S_IFDIR => "dir",
            libc::S_IFLNK => "symlink",
            _ => "special",
        };
        attrs.insert(
            "mtime".into(),
            format!("{}.{:09}", st.mtime_sec, st.mtime_nsec),
        );
        // The change time moves with every write and cannot be set back:
        // a change that restored everything else still shows here.
        attrs.insert(
            "ctime".into(),
            format!("{}.{:09}", st.ctime_sec, st.ctime_nsec),
        );
        if kind == "file" {
            attrs.insert("size".into(), st.size.to_string());
            if self.s.content_reads && st.size > 0 {
                attrs.insert("head".into(), self.head(dir, name, st, window));
            }
        }
        if kind == "symlink" {
            let t =
                sys::readlink_at(dir, name).map_err(|e| failed("cannot read link", &key, &e))?;
            attrs.insert("target".into(), digest(&[&t]));
        }
        // The l* calls through the directory's /proc link: never follows
        // the entry, never opens it (FIFOs and sockets are safe).
        let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
        // An xattr that cannot be read is recorded as such (its state is
        // then the error), never taken for no xattr at all.
        let unread = |e: &io::Error| format!("unread: {}", sys::errno_name(e).unwrap_or("error"));
        match xattr::list(&path) {
            Ok(names) => {
                let mut names: Vec<OsString> = names.collect();
                if !names.is_empty() {
                    names.sort();
                    let mut all: Vec<Vec<u8>> = Vec::new();
                    for n in &names {
                        all.push(n.as_bytes().to_vec());
                        all.push(match xattr::get(&path, n) {
                            Ok(v) => v.unwrap_or_default(),
                            Err(e) => unread(&e).into_bytes(),
                        });
                    }
                    let parts: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
                    attrs.insert("xattr-names".into(), digest(&parts));
                    let parts: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
                    attrs.insert("xattrs".into(), digest(&parts));
                }
            }
            // No xattrs here at all (the filesystem has none).
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => {}
            Err(e) => {
                attrs.insert("xattr-names".into(), unread(&e));
            }
        }
        Ok(snapshot::Entry {
            key,
            kind: kind.into(),
            attrs,
            id: Some(format!("{}:{}", st.dev, st.ino)),
            at: Some(crate::timefmt::rfc3339(st.mtime_sec)),
        })
    }

    /// A digest of the first window of a regular file, or why it could not
    /// be read (an `EACCES` file's state is then its size and mtime).
    fn head(&self, dir: &OwnedFd, name: &OsStr, st: &Stat, window: &mut [u8]) -> String {
        let mut f = match sys::open_read_at(dir, name) {
            Ok(f) => f,
            Err(e) => return format!("unread: {}", sys::errno_name(&e).unwrap_or("error")),
        };
        match sys::file_stat(&f) {
            Ok(now) if now.is_reg() && now.ino == st.ino && now.dev == st.dev => {}
            _ => return "unread: replaced".into(),
        }
        match fill(&mut f, window) {
            Ok(n) => digest(&[&window[..n]]),
            Err(e) => format!("unread: {}", sys::errno_name(&e).unwrap_or("error")),
        }
    }

    pub(super) fn key_of_path(&self, path: &Path) -> Option<Vec<String>> {
        let rest = path.strip_prefix(&self.s.path).ok()?;
        Some(
            rest.components()
                .map(|c| component(c.as_os_str().as_bytes()))
                .collect(),
        )
    }
}

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

impl crate::surface::Watchable for Instance {
    fn snapshot(&self, ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let root = self
            .open_surface()
            .map_err(|e| SnapshotError::Failed(format!("cannot open {}: {e}", self.path_text())))?;
        let dev = sys::fstat(&root)
            .map_err(|e| SnapshotError::Failed(format!("cannot stat {}: {e}", self.path_text())))?
            .dev;
        let mut window = vec![0u8; CONTENT_WINDOW];
        let mut key = Vec::new();
        self.walk(&root, dev, &mut key, ctx, sink, &mut window)
    }

    /// The carriers a change would carry: a new or removed entry its name
    /// (and, when it has them, its content, size, link target and xattrs,
    /// and an mtime set on purpose); a rename its name; a changed entry
    /// what changed (`mtime` alone only when nothing recovery reads
    /// changed with it).
    fn carriers_of(&self, c: &Change, before: &Before) -> Vec<&'static str> {
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
        let mut out: Vec<&'static str> = out.into_iter().map(Fs::name).collect();
        out.sort();
        out.dedup();
        out
    }

    fn unwatched(&self, carrier: &str) -> Option<&'static str> {
        (Fs::parse(carrier) == Some(Fs::RunnerPersistence)).then_some(
            "a beacon is what an earlier probe leaves; watch mode reports the command's own writes under their carriers",
        )
    }

    fn key_of(&self, path: &Path) -> Option<Vec<String>> {
        self.key_of_path(path)
    }
}
