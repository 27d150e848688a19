//! Cleanup's steps: each journalled entry removed only while it is still
//! the one planted; an intent's entry only with the intended type, owner
//! and age; by probe id, the proof that an entry is ours (its carrier, or a
//! plant's unfinished state); and the form of a plant's name.

use super::scan::mtime_matches;
use super::{
    CONTENT_WINDOW, Entry, Filesystem, Fs, Intent, Kind, XATTR_KEY, derived_mtime, derived_size,
    marker_text, read_small,
};
use crate::fault::Fault;
use crate::marker::Checked;
use crate::surface::{CleanupOutcome, Job, RunCtx};
use crate::sys::Stat;
use crate::{marker, sys};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;

impl Filesystem {
    pub(super) fn clean_entry(&self, e: &Entry) -> CleanupOutcome {
        if let Some(why) = &e.unverified {
            return CleanupOutcome::Left {
                reason: format!("{why}: not provably ours, left alone"),
            };
        }
        // Entries can come from a receipt file: only a plain name of
        // runwarden's own form, directly in the surface, is ever removed.
        if e.name.contains('/') || !e.name.starts_with(".runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden entry name: left alone".into(),
            };
        }
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("cannot open {}: {err}", self.path_text()),
                };
            }
        };
        match sys::fstat(&dir) {
            Ok(st) if st.dev == e.dir_dev && st.ino == e.dir_ino => {}
            Ok(_) => {
                return CleanupOutcome::Left {
                    reason: "the surface path now names another directory than the one planted in"
                        .into(),
                };
            }
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("fstat: {err}"),
                };
            }
        }
        let name = OsStr::new(&e.name);
        let st = match sys::lstat_at(&dir, name) {
            Ok(st) => st,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return CleanupOutcome::Gone,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("lstat: {err}"),
                };
            }
        };
        let born = match sys::birth_at(&dir, name) {
            Ok(b) => b,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("statx: {err}"),
                };
            }
        };
        if Kind::of(&st) != Some(e.kind) || st.dev != e.dev || st.ino != e.ino || born != e.btime {
            return CleanupOutcome::Left {
                reason: "replaced since it was planted (type, inode or birth time differs): not ours to remove"
                    .into(),
            };
        }
        // Linux has no unlink-by-inode; the window between this check and
        // the unlink is one syscall, and unlinkat never follows a symlink.
        match sys::unlink_at(&dir, name, e.kind == Kind::Dir) {
            Ok(()) => CleanupOutcome::Removed,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => CleanupOutcome::Gone,
            Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => CleanupOutcome::Left {
                reason: "the planted directory is no longer empty: someone put entries into it"
                    .into(),
            },
            Err(err) => CleanupOutcome::Left {
                reason: format!("unlink: {err}"),
            },
        }
    }

    /// Removes the entry an intent named, when run A stopped before
    /// recording it in full: only if the name is there, in the same
    /// directory, with the intended type, owned by the intent's uid, and
    /// born (or, where the filesystem keeps no birth time, changed) no
    /// earlier than a second before the intent. Anything else with that
    /// name is someone else's.
    pub(super) fn cleanup_intent(&self, i: &Intent) -> CleanupOutcome {
        let left = |reason: String| CleanupOutcome::Left { reason };
        if i.name.contains('/') || !i.name.starts_with(".runwarden-") {
            return left("not a runwarden entry name: left alone".into());
        }
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(err) => return left(format!("cannot open {}: {err}", self.path_text())),
        };
        match sys::fstat(&dir) {
            Ok(st) if st.dev == i.dir_dev && st.ino == i.dir_ino => {}
            Ok(_) => {
                return left(
                    "the surface path now names another directory than the one planted in".into(),
                );
            }
            Err(err) => return left(format!("fstat: {err}")),
        }
        let name = OsStr::new(&i.name);
        let st = match sys::lstat_at(&dir, name) {
            Ok(st) => st,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return CleanupOutcome::Gone,
            Err(err) => return left(format!("lstat: {err}")),
        };
        let born = match sys::birth_at(&dir, name) {
            Ok(b) => b.unwrap_or((st.ctime_sec, st.ctime_nsec as u32)),
            Err(err) => return left(format!("statx: {err}")),
        };
        // The kernel stamps inodes with its coarse clock; a second of slack
        // covers any tick between the intent and the syscall.
        let after = (i.after.0 - 1, i.after.1 as u32);
        // The owner is this run's uid (run A's), never the journal's word.
        if Kind::of(&st) != Some(i.kind) || st.uid != sys::euid() || born < after {
            return left(
                "named like the entry run A was creating when it stopped, but of another type, owner or age: not ours to remove"
                    .into(),
            );
        }
        match sys::unlink_at(&dir, name, i.kind == Kind::Dir) {
            Ok(()) => CleanupOutcome::Removed,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => CleanupOutcome::Gone,
            Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => {
                left("the planted directory is no longer empty: someone put entries into it".into())
            }
            Err(err) => left(format!("unlink: {err}")),
        }
    }

    /// Whether an entry named like `job`'s plant (of `carrier`) is that
    /// plant: its carrier proves it, or it is ours and in the state a
    /// plant passes through before its carrier is set. `Invalid` when
    /// neither (not provably ours).
    pub(super) fn verify_planted(
        &self,
        ctx: &RunCtx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        carrier: Fs,
        job: &Job<Fs>,
    ) -> Result<(), Fault> {
        let proven = self.carrier_proves(ctx, dir, name, st, carrier, job);
        if proven.is_err() && st.uid == sys::euid() && self.unfinished(dir, name, st, carrier, job)
        {
            // Run A stopped between creating the entry and setting its
            // carrier: the derived name, our own uid, and the exact state
            // a plant passes through.
            return Ok(());
        }
        proven
    }

    /// Whether an entry is in the state a plant of `job` leaves between
    /// creating it and setting its carrier: empty (or, for file-content,
    /// a prefix of the marker text), with no user xattr yet.
    pub(super) fn unfinished(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        carrier: Fs,
        job: &Job<Fs>,
    ) -> bool {
        if !st.is_reg() {
            return false;
        }
        let no_xattrs = || {
            xattr::list(self.settings.path.join(name))
                .map(|mut k| !k.any(|k| k.as_encoded_bytes().starts_with(b"user.")))
                .unwrap_or(false)
        };
        match carrier {
            Fs::FileContent => {
                let full = marker_text(&job.nonce.hex());
                matches!(read_small(dir, name, CONTENT_WINDOW), Ok(Some(b)) if full.as_bytes().starts_with(&b))
            }
            // A time never set back: the plant's futimens has not run (a
            // set mtime lies years before the entry's last change).
            Fs::Mtime => st.size == 0 && st.mtime_sec + 1 >= st.ctime_sec && no_xattrs(),
            Fs::Xattr | Fs::XattrName | Fs::FileSize | Fs::RunnerPersistence => {
                st.size == 0 && no_xattrs()
            }
            Fs::FileName | Fs::DirectoryName | Fs::SymlinkTarget | Fs::SpecialFileName => false,
        }
    }

    /// Whether an entry named like `job`'s plant (of `carrier`) shows,
    /// through its own carrier, that it is that plant: `Invalid` when it
    /// does not.
    pub(super) fn carrier_proves(
        &self,
        ctx: &RunCtx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        carrier: Fs,
        job: &Job<Fs>,
    ) -> Result<(), Fault> {
        let hex = job.nonce.hex();
        let no = |what: &str| {
            Err(Fault::invalid(format!(
                "named like this probe's {carrier} plant, but {what}"
            )))
        };
        match carrier {
            // The nonce is in the name itself.
            Fs::FileName | Fs::DirectoryName | Fs::SpecialFileName => Ok(()),
            Fs::FileContent => match read_small(dir, name, CONTENT_WINDOW) {
                Ok(Some(b)) if memchr::memmem::find(&b, hex.as_bytes()).is_some() => Ok(()),
                _ => no("its content does not hold the nonce"),
            },
            Fs::SymlinkTarget => match sys::readlink_at(dir, name) {
                Ok(t) if t == hex.as_bytes() => Ok(()),
                _ => no("its target is not the nonce"),
            },
            Fs::Xattr | Fs::XattrName => {
                let path = self.settings.path.join(name);
                let ok = if carrier == Fs::Xattr {
                    matches!(xattr::get(&path, XATTR_KEY), Ok(Some(v)) if v == hex.as_bytes())
                } else {
                    matches!(xattr::get(&path, format!("user.{hex}")), Ok(Some(_)))
                };
                if ok {
                    Ok(())
                } else {
                    no("it lacks the nonce's xattr")
                }
            }
            Fs::Mtime => {
                let (sec, nsec) = derived_mtime(&job.nonce);
                if mtime_matches((st.mtime_sec, st.mtime_nsec), (sec, nsec), true) {
                    Ok(())
                } else {
                    no("its mtime is not the nonce's")
                }
            }
            Fs::FileSize => {
                if st.size == derived_size(&job.nonce) {
                    Ok(())
                } else {
                    no("its size is not the nonce's")
                }
            }
            Fs::RunnerPersistence => match read_small(dir, name, marker::BEACON_MAX) {
                Ok(Some(b)) => match ctx.key.check_beacon(&b) {
                    Checked::Valid(body) if body.probe_id == ctx.probe_id => Ok(()),
                    _ => no("it is not a valid beacon of this probe"),
                },
                _ => no("it cannot be read"),
            },
        }
    }
}

/// Whether `name` of type `kind` is one a plant of `probe` makes (the
/// inverse of [`planted_name`](super::planted_name)): a beacon of this
/// probe, a fixed-name carrier's file or link, or a nonce-named file,
/// directory or FIFO.
pub(super) fn planted_form(name: &str, kind: Kind, ctx: &RunCtx<'_>) -> bool {
    let probe = ctx.probe_id;
    if name == format!("{}{probe}", marker::BEACON_PREFIX) {
        return kind == Kind::File;
    }
    let Some(rest) = name
        .strip_prefix(".runwarden-")
        .and_then(|r| r.strip_prefix(probe))
        .and_then(|r| r.strip_prefix('-'))
    else {
        return false;
    };
    // A fixed-name carrier's name ends in this surface's tag (none for a
    // run bound to no surface: 0.11.0's form, which the kernel asks about
    // apart).
    let stag = ctx.surface_tag();
    let fixed = match stag.as_str() {
        "" => Some(rest),
        t => rest.strip_suffix(t).and_then(|r| r.strip_suffix('-')),
    };
    match fixed.and_then(Fs::parse) {
        Some(Fs::FileContent | Fs::Xattr | Fs::XattrName | Fs::Mtime | Fs::FileSize) => {
            kind == Kind::File
        }
        Some(Fs::SymlinkTarget) => kind == Kind::Symlink,
        _ => {
            crate::surface::lower_hex(rest, 32)
                && matches!(kind, Kind::File | Kind::Dir | Kind::Fifo)
        }
    }
}
