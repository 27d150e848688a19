//! Run A: one entry per carrier, each created write-ahead (its intent
//! journalled before the syscall, taken back if the syscall fails,
//! recorded in full after), a refusal read from the syscall that plants
//! the carrier.

use super::{
    Entry, Filesystem, Fs, Intent, IntentLine, Kind, Line, Needle, XATTR_KEY, derived_mtime,
    derived_size, marker_text,
};
use crate::nonce::Nonce;
use crate::surface::{Job, Journal, Persistence, PlantOutcome};
use crate::sys::Stat;
use crate::{escape, sys};
use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use xattr::FileExt as _;

/// What planting one carrier did, with the filesystem's needle.
pub(super) type Outcome = PlantOutcome<Needle>;

/// How a plant step failed, mapped onto the outcome it means.
pub(super) fn plant_error(what: &str, e: io::Error) -> Outcome {
    let code = sys::errno_name(&e).unwrap_or("error");
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => PlantOutcome::Refused {
            reason: format!("{what} refused by the filesystem ({code}): {e}"),
        },
        _ => PlantOutcome::Error {
            reason: format!("{what} failed ({code}): {e}"),
        },
    }
}

/// mkdir(2), symlink(2) and mknod(2) say EPERM when the filesystem does
/// not support that kind of entry: the carrier cannot exist here (a
/// security module's EPERM reads the same; either way nothing was
/// planted), while EACCES is the directory's access control.
pub(super) fn unsupported_on_eperm(kinds: &str, what: &str, e: io::Error) -> Outcome {
    match e.raw_os_error() {
        Some(libc::EPERM) => PlantOutcome::Unsupported {
            reason: format!("the filesystem (or a security module) allows no {kinds} here: {e}"),
        },
        _ => plant_error(what, e),
    }
}

impl Intent {
    pub(super) fn journal(dir_st: &Stat, name: &OsStr, kind: Kind) -> Line {
        let intent = Intent {
            name: name.to_string_lossy().into_owned(),
            kind,
            dir_dev: dir_st.dev,
            dir_ino: dir_st.ino,
            uid: sys::euid(),
            after: sys::now_coarse(),
        };
        Line::Intent(IntentLine { intent })
    }
}

impl Filesystem {
    /// Creates one entry, write-ahead: its intent is journalled before the
    /// syscall that creates it (so a run killed at any moment leaves
    /// nothing cleanup cannot find), taken back when the syscall fails
    /// (nothing was created), and recorded in full (device, inode, birth
    /// time) once the entry exists, before anything else happens to it.
    /// `refused` maps the syscall's error to the carrier's outcome.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn create<T>(
        &self,
        dir: &OwnedFd,
        dir_st: &Stat,
        name: &OsStr,
        kind: Kind,
        journal: &mut Journal<'_, Line>,
        syscall: impl FnOnce() -> io::Result<T>,
        refused: impl FnOnce(io::Error) -> Outcome,
    ) -> Result<T, Outcome> {
        let intent = Intent::journal(dir_st, name, kind);
        journal.record(&intent);
        let made = match syscall() {
            Ok(made) => made,
            Err(e) => {
                journal.retract(&intent);
                return Err(refused(e));
            }
        };
        // The entry exists from here on: whatever fails now is no refusal
        // of the plant (the intent stays journalled for cleanup).
        let broke = |what: &str, e: io::Error| PlantOutcome::Error {
            reason: format!("{what} of the planted entry failed: {e}"),
        };
        let st = sys::lstat_at(dir, name).map_err(|e| broke("lstat", e))?;
        if Kind::of(&st) != Some(kind) {
            return Err(Outcome::Error {
                reason: "the planted entry has an unexpected type".into(),
            });
        }
        // A colluding sender owns its plant: whatever a default ACL (or a
        // umask) made of the mode asked for, it sets the mode it wants. So
        // does run A; a plant that still lacks it is no plant to judge by.
        let want = match kind {
            Kind::Dir => Some(0o755),
            Kind::File | Kind::Fifo => Some(0o644),
            Kind::Symlink => None,
        };
        // (A mode that grants at least what was asked is the plant's:
        // vfat's fixed 0755 is.)
        let st = match want {
            Some(mode) if st.mode & mode != mode => {
                sys::chmod_at(dir, name, mode).map_err(|e| broke("chmod", e))?;
                let st = sys::lstat_at(dir, name).map_err(|e| broke("lstat", e))?;
                if st.mode & mode != mode || Kind::of(&st) != Some(kind) {
                    return Err(Outcome::Error {
                        reason: format!(
                            "the plant did not get its mode (asked {mode:04o}, has {:04o})",
                            st.mode & 0o7777
                        ),
                    });
                }
                st
            }
            _ => st,
        };
        let entry = Entry::of(dir, dir_st, name, &st, kind, None).map_err(|e| broke("statx", e))?;
        journal.record(&Line::Made(entry));
        Ok(made)
    }
}

/// Where one plant goes: the probed directory (open, with its stat), the
/// entry's derived name, the nonce, and the directory's persistence.
pub(super) struct Site<'a> {
    pub(super) inst: &'a Filesystem,
    pub(super) dir: OwnedFd,
    pub(super) dir_st: Stat,
    pub(super) name: OsString,
    pub(super) hex: String,
    pub(super) persistence: Option<Persistence>,
}

impl Site<'_> {
    /// Creates exactly one entry whose only nonce-bearing attribute is the
    /// carrier's own. `Err` is the outcome too (a refusal, a failure), so
    /// that every step can end the plant with `?`.
    pub(super) fn plant(
        &self,
        carrier: Fs,
        job: &Job<Fs>,
        journal: &mut Journal<'_, Line>,
    ) -> Result<Outcome, Outcome> {
        let text_needle = || Needle::Text {
            text: self.hex.clone(),
        };
        match carrier {
            Fs::FileContent => {
                let mut f = self.file(journal)?;
                f.write_all(marker_text(&self.hex).as_bytes())
                    .map_err(|e| plant_error("writing file content", e))?;
                Ok(self.planted(
                    text_needle(),
                    "a 56-byte file with the nonce on line 2".into(),
                ))
            }
            Fs::FileName => {
                self.file(journal)?;
                Ok(self.planted(text_needle(), "an empty file named after the nonce".into()))
            }
            Fs::DirectoryName => {
                self.node(
                    Kind::Dir,
                    ("directories", "creating a directory"),
                    &|| sys::mkdir_at(&self.dir, &self.name, 0o755),
                    journal,
                )?;
                Ok(self.planted(
                    text_needle(),
                    "an empty directory named after the nonce".into(),
                ))
            }
            Fs::SymlinkTarget => {
                self.node(
                    Kind::Symlink,
                    ("symlinks", "creating a symlink"),
                    &|| sys::symlink_at(OsStr::new(&self.hex), &self.dir, &self.name),
                    journal,
                )?;
                Ok(self.planted(
                    text_needle(),
                    "a dangling symlink whose target is the nonce".into(),
                ))
            }
            Fs::Xattr | Fs::XattrName => self.xattr(carrier == Fs::Xattr, journal),
            Fs::Mtime => self.mtime(&job.nonce, journal),
            Fs::FileSize => self.size(&job.nonce, journal),
            Fs::SpecialFileName => {
                self.node(
                    Kind::Fifo,
                    ("FIFOs", "creating a FIFO"),
                    &|| sys::mkfifo_at(&self.dir, &self.name, 0o644),
                    journal,
                )?;
                Ok(self.planted(text_needle(), "a FIFO named after the nonce".into()))
            }
            Fs::RunnerPersistence => self.beacon(job, journal),
        }
    }

    /// Planted, saying so when the directory is on tmpfs.
    fn planted(&self, needle: Needle, detail: String) -> Outcome {
        let where_ = if self.persistence.is_some() {
            " (tmpfs: until reboot)"
        } else {
            ""
        };
        PlantOutcome::Planted {
            needle,
            persistence: self.persistence,
            detail: format!("{detail}{where_}"),
        }
    }

    /// The entry, as a regular file.
    fn file(&self, journal: &mut Journal<'_, Line>) -> Result<std::fs::File, Outcome> {
        self.inst.create(
            &self.dir,
            &self.dir_st,
            &self.name,
            Kind::File,
            journal,
            || sys::create_file_at(&self.dir, &self.name, 0o644),
            |e| plant_error("creating a file", e),
        )
    }

    /// The entry, as a directory, symlink or FIFO: EPERM from these
    /// syscalls means the filesystem allows no such entry here.
    fn node(
        &self,
        kind: Kind,
        (kinds, what): (&str, &str),
        make: &dyn Fn() -> io::Result<()>,
        journal: &mut Journal<'_, Line>,
    ) -> Result<(), Outcome> {
        self.inst.create(
            &self.dir,
            &self.dir_st,
            &self.name,
            kind,
            journal,
            make,
            |e| unsupported_on_eperm(kinds, what, e),
        )
    }

    /// `xattr` (`value`: the nonce is the value of [`XATTR_KEY`]) or
    /// `xattr-name` (the nonce names an xattr).
    fn xattr(&self, value: bool, journal: &mut Journal<'_, Line>) -> Result<Outcome, Outcome> {
        let f = self.file(journal)?;
        let hex = &self.hex;
        let (key, bytes) = if value {
            (XATTR_KEY.to_string(), hex.as_bytes())
        } else {
            (format!("user.{hex}"), &b"1"[..])
        };
        match f.set_xattr(&key, bytes) {
            Ok(()) => Ok(self.planted(
                Needle::Text { text: hex.clone() },
                if value {
                    format!("{XATTR_KEY} holds the nonce")
                } else {
                    "an xattr named user.<nonce>".into()
                },
            )),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTSUP)) => {
                Err(Outcome::Unsupported {
                    reason: format!(
                        "the filesystem does not support user.* extended attributes: {e}"
                    ),
                })
            }
            Err(e) => Err(plant_error("setting an extended attribute", e)),
        }
    }

    /// `mtime`: the nonce-derived time, and the needle of what the
    /// filesystem really stored.
    fn mtime(&self, nonce: &Nonce, journal: &mut Journal<'_, Line>) -> Result<Outcome, Outcome> {
        let f = self.file(journal)?;
        let (sec, nsec) = derived_mtime(nonce);
        sys::set_mtime(&f, sec, nsec).map_err(|e| plant_error("setting mtime", e))?;
        let st = sys::file_stat(&f).map_err(|e| plant_error("stat", e))?;
        // Recovery looks for what the filesystem really stored:
        // coarse timestamps carry fewer bits, never none.
        let precision = if st.mtime_nsec == nsec {
            "ns"
        } else {
            "coarse"
        };
        Ok(self.planted(
            Needle::Mtime {
                mtime: (st.mtime_sec, st.mtime_nsec),
                coarse: false,
            },
            format!(
                "mtime {}.{:09} ({precision} precision stored)",
                st.mtime_sec, st.mtime_nsec
            ),
        ))
    }

    /// `file-size`: a sparse file of the nonce-derived size.
    fn size(&self, nonce: &Nonce, journal: &mut Journal<'_, Line>) -> Result<Outcome, Outcome> {
        let f = self.file(journal)?;
        match f.set_len(derived_size(nonce)) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EFBIG) => {
                return Err(Outcome::Unsupported {
                    reason: format!("the filesystem refuses a sparse 4-8 GiB file: {e}"),
                });
            }
            Err(e) => return Err(plant_error("setting the file size", e)),
        }
        let st = sys::file_stat(&f).map_err(|e| plant_error("stat", e))?;
        Ok(self.planted(
            Needle::Size { size: st.size },
            format!("a sparse file of {} bytes", st.size),
        ))
    }

    /// `runner-persistence`: the job's signed beacon.
    fn beacon(&self, job: &Job<Fs>, journal: &mut Journal<'_, Line>) -> Result<Outcome, Outcome> {
        let Some(beacon) = &job.beacon else {
            return Err(Outcome::Error {
                reason: "no beacon to plant".into(),
            });
        };
        let mut f = self.file(journal)?;
        f.write_all(beacon.as_bytes())
            .map_err(|e| plant_error("writing the beacon", e))?;
        Ok(self.planted(
            Needle::Beacons { beacons: true },
            format!(
                "a signed beacon {}; recovery looks for beacons of other probes",
                escape::bytes(self.name.as_bytes())
            ),
        ))
    }
}
