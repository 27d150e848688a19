//! The snapshot watch mode takes of a directory tree.
//!
//! It walks the whole tree (run B lists only the top, but a command writes
//! anywhere under it), through directory descriptors with no-follow
//! semantics, without crossing into another filesystem, in
//! [`snapshot::key_order`]: each directory's names are sorted (memory holds
//! the largest directory's names, never the tree) and a directory comes
//! after its children. Each entry records what recovery looks at: its
//! type, size and times, its xattrs' names and values (digests), a
//! symlink's target (digest) and the first [`super::CONTENT_WINDOW`] bytes of a
//! regular file (digest, unless `content-reads: false`). Access times are
//! left alone (`O_NOATIME` where allowed) and nothing is followed or
//! opened that is not a regular file.
//!
//! The second snapshot asks the first about each entry before reading it
//! ([`WatchCtx::earlier`]): one that its stat shows unchanged (see
//! [`unchanged_since`]) keeps what the first read of it, so a second
//! snapshot reads only what changed: one stat per entry.
//!
//! Why one thread: the walk was tried spread over both cores of a 2-core
//! machine (a directory's stats, then a run of its entries' reads, on
//! every core): two snapshots of 200,000 entries took 1.6 s instead of
//! 1.25 s, the kernel time doubled by threads looking up names in the same
//! directory and the same `/proc/self/fd` link, and the entries built on
//! one thread and freed on another.

use super::{Filesystem, fill};
use crate::nonce::to_hex;
use crate::state::snapshot::{self, Sink, SnapshotError, WatchCtx, component};
use crate::sys::Stat;
use crate::{escape, sys};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// The first 16 bytes of a SHA-256: enough to tell two states of one
/// entry apart, short enough for a snapshot of a million entries.
type Short = [u8; 16];

fn digest(parts: &[&[u8]]) -> Short {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&h.finalize()[..16]);
    out
}

fn failed(what: &str, path: &[String], e: &io::Error) -> SnapshotError {
    SnapshotError::Failed(format!("{what} {}: {e}", escape::line(&path.join("/"))))
}

/// What could not be read, as a snapshot records it (its state is then
/// the error, never taken for nothing at all).
fn unread(why: &str) -> String {
    format!("unread: {why}")
}

fn errno(e: &io::Error) -> &'static str {
    sys::errno_name(e).unwrap_or("error")
}

/// What a snapshot reads of an entry besides its stat, on any thread.
struct Extras {
    head: Option<Result<Short, &'static str>>,
    target: Option<io::Result<Short>>,
    xattrs: Xattrs,
}

enum Xattrs {
    /// None here (or the filesystem has none).
    None,
    Some {
        names: Short,
        all: Short,
    },
    Unread(&'static str),
}

/// An entry's times as a snapshot records them.
struct Times {
    mtime: String,
    ctime: String,
}

fn times(st: &Stat) -> Times {
    Times {
        mtime: format!("{}.{:09}", st.mtime_sec, st.mtime_nsec),
        ctime: format!("{}.{:09}", st.ctime_sec, st.ctime_nsec),
    }
}

/// The attributes an unchanged entry keeps from the first snapshot.
const READ_ATTRS: [&str; 4] = ["head", "target", "xattr-names", "xattrs"];

/// What the walk may take on trust of the filesystem it walks.
#[derive(Clone, Copy)]
pub(super) struct Trust {
    /// The filesystem moves an entry's change time with every change of
    /// its content, size, times, link or xattrs, to the clock's present.
    ctime: bool,
}

/// Filesystems whose change time is the kernel's own, set at every write:
/// ext2/3/4, XFS, Btrfs, tmpfs. On any other (a FUSE or network
/// filesystem may keep times its own way) every entry is read again.
const CTIME_KEPT: [i64; 4] = [0xEF53, 0x5846_5342, 0x9123_683E, sys::TMPFS_MAGIC];

impl Trust {
    pub(super) fn of(root: &OwnedFd) -> Trust {
        Trust {
            ctime: sys::fs_magic(root).is_ok_and(|m| CTIME_KEPT.contains(&m)),
        }
    }
}

/// Whether the entry the first snapshot recorded (`e`) is the one `st`
/// shows, unchanged: the same inode, kind, size, mtime and change time,
/// and a change time from well before the first snapshot began (`since`).
/// No user can set a change time: any write since would have moved it to
/// a moment after `since`, which even a clock of two-second steps shows
/// as different. An entry changed in the same second as the first look,
/// or just before, is read again.
fn unchanged_since(e: &snapshot::Entry, st: &Stat, since: i64) -> bool {
    // Compared as the strings the entry would hold, without making them.
    st.ctime_sec.saturating_add(2) < since
        && e.kind == kind_of(st)
        && e.id.as_deref().is_some_and(|id| id_is(id, st))
        && e.attrs
            .get("mtime")
            .is_some_and(|v| time_is(v, st.mtime_sec, st.mtime_nsec))
        && e.attrs
            .get("ctime")
            .is_some_and(|v| time_is(v, st.ctime_sec, st.ctime_nsec))
        && (st.file_type() != libc::S_IFREG
            || e.attrs.get("size").is_some_and(|v| int_is(v, st.size)))
}

/// Whether the first snapshot's entry `e` is exactly what this walk would
/// record for `st` now: unchanged (as [`unchanged_since`] decides), and
/// holding nothing but what the walk would keep or make of it (no
/// `unlisted`, no `mount-point`: the caller has neither now).
fn as_recorded(e: &snapshot::Entry, st: &Stat, since: i64) -> bool {
    let is_file = st.file_type() == libc::S_IFREG;
    unchanged_since(e, st, since)
        && e.at.is_some()
        && e.attrs.keys().all(|k| {
            matches!(k.as_str(), "mtime" | "ctime")
                || (k == "size" && is_file)
                || READ_ATTRS.contains(&k.as_str())
        })
}

/// Whether `v` is [`times`]'s text of (`sec`, `nsec`).
fn time_is(v: &str, sec: i64, nsec: i64) -> bool {
    v.split_once('.')
        .is_some_and(|(s, n)| n.len() == 9 && int_is(s, sec) && n.parse() == Ok(nsec))
}

/// Whether `v` is [`id_of`]'s text of `st`.
fn id_is(v: &str, st: &Stat) -> bool {
    v.split_once(':')
        .is_some_and(|(d, i)| int_is(d, st.dev) && int_is(i, st.ino))
}

/// Whether `v` is exactly the decimal text of `n` (`Display`'s: no sign
/// but a minus, no leading zero), so that the comparison is the one of
/// the strings it stands for.
fn int_is<T: std::str::FromStr + PartialEq>(v: &str, n: T) -> bool {
    let digits = v.strip_prefix('-').unwrap_or(v);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && v != "-0";
    canonical && v.parse::<T>().is_ok_and(|x| x == n)
}

/// The kind of entry a snapshot records for `st`.
fn kind_of(st: &Stat) -> &'static str {
    match st.file_type() {
        libc::S_IFREG => "file",
        libc::S_IFDIR => "dir",
        libc::S_IFLNK => "symlink",
        _ => "special",
    }
}

fn id_of(st: &Stat) -> String {
    format!("{}:{}", st.dev, st.ino)
}

/// One entry, stat taken, before it is read.
struct Job {
    key: Vec<String>,
    st: Stat,
    times: Times,
    /// Its identity (`dev:ino`), as the snapshot records it.
    id: String,
    /// What the first snapshot read of it, when it is unchanged.
    kept: Option<Vec<(&'static str, String)>>,
}

/// The walk of one tree: where it streams, and what it may take as read.
pub(super) struct Walk<'w, 's> {
    pub(super) dev: u64,
    pub(super) ctx: &'w WatchCtx,
    pub(super) trust: Trust,
    pub(super) sink: &'w mut Sink<'s>,
    pub(super) window: Vec<u8>,
    /// The last mtime given as RFC 3339 (see [`at_of`]).
    pub(super) at: (i64, String),
    /// This thread's own working directory, moved into each directory
    /// whose entries' xattrs are read (by bare name); `None` where the
    /// thread cannot have one (xattrs are then read through
    /// `/proc/self/fd`).
    pub(super) cwd: Option<sys::PrivateCwd>,
    /// Whether `cwd` is the directory being walked now.
    pub(super) inside: bool,
}

impl Filesystem {
    pub(super) fn walk(
        &self,
        dir: &OwnedFd,
        key: &mut Vec<String>,
        w: &mut Walk<'_, '_>,
    ) -> Result<(), SnapshotError> {
        w.inside = false;
        let listing = sys::open_listing(dir).map_err(|e| failed("cannot list", key, &e))?;
        let mut names: Vec<(String, OsString)> = Vec::new();
        for r in sys::DirIter::new(&listing).map_err(|e| failed("cannot list", key, &e))? {
            let (name, _) = r.map_err(|e| failed("cannot list", key, &e))?;
            names.push((component(name.as_bytes()), name));
        }
        drop(listing);
        names.sort_unstable();
        for (shown, name) in &names {
            let st = match sys::lstat_at(dir, name) {
                Ok(st) => st,
                // Gone between the listing and the look: not there now.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    key.push(shown.clone());
                    return Err(failed("cannot stat", key, &e));
                }
            };
            if w.ctx.skip.contains(&(st.dev, st.ino)) {
                continue;
            }
            key.push(shown.clone());
            let mut attrs = BTreeMap::new();
            let is_dir = st.file_type() == libc::S_IFDIR;
            if is_dir && st.dev == w.dev {
                match sys::open_dir_at(dir, name) {
                    Ok(sub) => {
                        let walked = self.walk(&sub, key, w);
                        // Wherever the walk below left this thread, it is
                        // not in `dir`.
                        w.inside = false;
                        match walked {
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
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        key.pop();
                        continue;
                    }
                    Err(e) => return Err(failed("cannot open", key, &e)),
                }
            } else if is_dir {
                attrs.insert("mount-point".into(), "not entered".into());
            }
            // (Asked of the first snapshot only now: a directory's
            // children come before it.) An entry exactly as the first
            // snapshot recorded it is taken as it is: nothing built.
            if attrs.is_empty()
                && w.trust.ctime
                && w.ctx.unchanged(key, |e| as_recorded(e, &st, w.ctx.since))
            {
                key.pop();
                continue;
            }
            let job = self.job(key.clone(), st, w);
            let extras = job.kept.is_none().then(|| {
                let by_name = w.enter(dir);
                self.extras(dir, name, &st, &mut w.window, by_name)
            });
            let entry = entry_of(job, attrs, extras, &mut w.at)?;
            (w.sink)(entry)
                .map_err(|e| SnapshotError::Failed(format!("writing the snapshot: {e}")))?;
            key.pop();
        }
        Ok(())
    }

    /// An entry to read, with what the first snapshot read of it when it
    /// is unchanged since. Asked in key order.
    fn job(&self, key: Vec<String>, st: Stat, w: &Walk<'_, '_>) -> Job {
        let t = times(&st);
        let id = id_of(&st);
        let kept = if w.trust.ctime {
            w.ctx
                .earlier(&key, |e| {
                    unchanged_since(e, &st, w.ctx.since).then(|| {
                        READ_ATTRS
                            .iter()
                            .filter_map(|k| Some((*k, e.attrs.get(*k)?.clone())))
                            .collect()
                    })
                })
                .flatten()
        } else {
            None
        };
        Job {
            key,
            st,
            times: t,
            id,
            kept,
        }
    }

    /// What the snapshot reads of an entry besides its stat; its xattrs
    /// `by_name` when this thread's working directory is `dir`.
    fn extras(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        window: &mut [u8],
        by_name: bool,
    ) -> Extras {
        let kind = kind_of(st);
        let head = (kind == "file" && self.settings.content_reads && st.size > 0)
            .then(|| self.head(dir, name, st, window));
        let target =
            (kind == "symlink").then(|| sys::readlink_at(dir, name).map(|t| digest(&[&t])));
        // The l* calls, by the bare name from inside the directory or
        // through its /proc link: never follows the entry, never opens it
        // (FIFOs and sockets are safe).
        let path = if by_name {
            PathBuf::from(name)
        } else {
            PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name)
        };
        let xattrs = match xattr::list(&path) {
            Ok(names) => {
                let mut names: Vec<OsString> = names.collect();
                if names.is_empty() {
                    Xattrs::None
                } else {
                    names.sort();
                    let mut all: Vec<Vec<u8>> = Vec::new();
                    for n in &names {
                        all.push(n.as_bytes().to_vec());
                        all.push(match xattr::get(&path, n) {
                            Ok(v) => v.unwrap_or_default(),
                            Err(e) => unread(errno(&e)).into_bytes(),
                        });
                    }
                    let parts: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
                    let names = digest(&parts);
                    let parts: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
                    Xattrs::Some {
                        names,
                        all: digest(&parts),
                    }
                }
            }
            // No xattrs here at all (the filesystem has none).
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => Xattrs::None,
            Err(e) => Xattrs::Unread(errno(&e)),
        };
        Extras {
            head,
            target,
            xattrs,
        }
    }

    /// A digest of the first window of a regular file, or why it could not
    /// be read (an `EACCES` file's state is then its size and mtime).
    fn head(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        window: &mut [u8],
    ) -> Result<Short, &'static str> {
        let mut f = sys::open_read_at(dir, name).map_err(|e| errno(&e))?;
        match sys::file_stat(&f) {
            Ok(now) if now.is_reg() && now.ino == st.ino && now.dev == st.dev => {}
            _ => return Err("replaced"),
        }
        // The size just seen bounds the read: a file that holds less than
        // the window is read in one call, without a second for its end.
        let want = window
            .len()
            .min(usize::try_from(st.size).unwrap_or(usize::MAX));
        fill(&mut f, &mut window[..want])
            .map(|n| digest(&[&window[..n]]))
            .map_err(|e| errno(&e))
    }
}

impl Walk<'_, '_> {
    /// Whether this thread's working directory is `dir` (moved there now if
    /// it was not).
    fn enter(&mut self, dir: &OwnedFd) -> bool {
        if !self.inside
            && let Some(cwd) = &self.cwd
        {
            self.inside = cwd.enter(dir).is_ok();
        }
        self.inside
    }
}

/// The entry a snapshot records: its stat, and what was read of it now
/// (`extras`) or kept from the first snapshot (`job.kept`).
fn entry_of(
    job: Job,
    mut attrs: BTreeMap<String, String>,
    extras: Option<Extras>,
    at: &mut (i64, String),
) -> Result<snapshot::Entry, SnapshotError> {
    let st = &job.st;
    let kind = kind_of(st);
    attrs.insert("mtime".into(), job.times.mtime);
    // The change time moves with every write and cannot be set back: a
    // change that restored everything else still shows here.
    attrs.insert("ctime".into(), job.times.ctime);
    if kind == "file" {
        attrs.insert("size".into(), st.size.to_string());
    }
    for (k, v) in job.kept.into_iter().flatten() {
        attrs.insert(k.into(), v);
    }
    if let Some(x) = extras {
        if let Some(h) = x.head {
            attrs.insert("head".into(), h.map_or_else(unread, |d| to_hex(&d)));
        }
        if let Some(t) = x.target {
            let t = t.map_err(|e| failed("cannot read link", &job.key, &e))?;
            attrs.insert("target".into(), to_hex(&t));
        }
        match x.xattrs {
            Xattrs::None => {}
            Xattrs::Some { names, all } => {
                attrs.insert("xattr-names".into(), to_hex(&names));
                attrs.insert("xattrs".into(), to_hex(&all));
            }
            Xattrs::Unread(why) => {
                attrs.insert("xattr-names".into(), unread(why));
            }
        }
    }
    Ok(snapshot::Entry {
        key: job.key,
        kind: kind.into(),
        attrs,
        id: Some(job.id),
        at: Some(at_of(at, st.mtime_sec)),
    })
}

/// The RFC 3339 time of `sec`, kept for the next entry: the entries of a
/// tree share their seconds in long runs.
fn at_of(last: &mut (i64, String), sec: i64) -> String {
    if last.0 != sec || last.1.is_empty() {
        *last = (sec, crate::timefmt::rfc3339(sec));
    }
    last.1.clone()
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_integer_compares_as_its_text() {
        use super::int_is;
        assert!(int_is("12", 12u64) && int_is("-3", -3i64) && int_is("0", 0i64));
        for v in ["012", "+12", "-0", "", "1 2", "12.0"] {
            assert!(!int_is(v, 12i64) && !int_is(v, 0i64), "{v}");
        }
    }
}
