//! Run A: one entry per carrier, each created write-ahead (its intent
//! journalled before the syscall, taken back if the syscall fails,
//! recorded in full after), a refusal read from the syscall that plants
//! the carrier.

use super::{
    Entry, Instance, Intent, Kind, XATTR_KEY, derived_mtime, derived_size, marker_text,
    persistence_of, planted_name,
};
use crate::surface::{PlantJob, PlantOutcome, RUNNER_PERSISTENCE, RunCtx};
use crate::sys::Stat;
use crate::{escape, sys};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use xattr::FileExt as _;

/// How a plant step failed, mapped onto the outcome it means.
pub(super) fn plant_error(what: &str, e: io::Error) -> PlantOutcome {
    let code = sys::errno_name(&e).unwrap_or("error");
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => PlantOutcome::Refused {
            reason: format!("{what} refused by the filesystem ({code}): {e}"),
        },
        _ => PlantOutcome::Failed {
            reason: format!("{what} failed ({code}): {e}"),
        },
    }
}

/// mkdir(2), symlink(2) and mknod(2) say EPERM when the filesystem does
/// not support that kind of entry: the carrier cannot exist here (a
/// security module's EPERM reads the same; either way nothing was
/// planted), while EACCES is the directory's access control.
pub(super) fn unsupported_on_eperm(kinds: &str, what: &str, e: io::Error) -> PlantOutcome {
    match e.raw_os_error() {
        Some(libc::EPERM) => PlantOutcome::Unsupported {
            reason: format!("the filesystem (or a security module) allows no {kinds} here: {e}"),
        },
        _ => plant_error(what, e),
    }
}

impl Intent {
    pub(super) fn journal(dir_st: &Stat, name: &OsStr, kind: Kind) -> Value {
        let intent = Intent {
            name: name.to_string_lossy().into_owned(),
            kind,
            dir_dev: dir_st.dev,
            dir_ino: dir_st.ino,
            uid: sys::euid(),
            after: sys::now_coarse(),
        };
        json!({ "intent": intent })
    }
}

impl Instance {
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
        created: &mut dyn FnMut(Value),
        syscall: impl FnOnce() -> io::Result<T>,
        refused: impl FnOnce(io::Error) -> PlantOutcome,
    ) -> Result<T, PlantOutcome> {
        let intent = Intent::journal(dir_st, name, kind);
        created(intent.clone());
        let made = match syscall() {
            Ok(made) => made,
            Err(e) => {
                created(crate::surface::retraction(&intent));
                return Err(refused(e));
            }
        };
        // The entry exists from here on: whatever fails now is no refusal
        // of the plant (the intent stays journalled for cleanup).
        let broke = |what: &str, e: io::Error| PlantOutcome::Failed {
            reason: format!("{what} of the planted entry failed: {e}"),
        };
        let st = sys::lstat_at(dir, name).map_err(|e| broke("lstat", e))?;
        if Kind::of(&st) != Some(kind) {
            return Err(PlantOutcome::Failed {
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
                    return Err(PlantOutcome::Failed {
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
        created(entry);
        Ok(made)
    }

    pub(super) fn plant_carrier(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let (carrier, nonce) = (job.carrier.as_str(), &job.nonce);
        // Reaching the directory is not planting: a refusal here (a parent
        // run A may not search) says nothing about the directory's own
        // access control, so it is no PASS. Each carrier's refusal is
        // decided by the syscall that plants it, below.
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(e) => {
                return PlantOutcome::Failed {
                    reason: format!(
                        "surface unreachable: run A cannot reach {}: {e}",
                        self.path_text()
                    ),
                };
            }
        };
        let dir_st = match sys::fstat(&dir) {
            Ok(s) => s,
            Err(e) => {
                return PlantOutcome::Failed {
                    reason: format!("fstat of surface: {e}"),
                };
            }
        };
        let persistence = persistence_of(&dir);
        let where_ = if persistence.is_some() {
            " (tmpfs: until reboot)"
        } else {
            ""
        };
        let hex = nonce.hex();
        let Some((name, _)) = planted_name(carrier, ctx.probe_id, &hex) else {
            return PlantOutcome::Failed {
                reason: format!("unknown carrier {carrier}"),
            };
        };
        let planted = |needle: Value, detail: String| PlantOutcome::Planted {
            needle,
            persistence,
            detail: format!("{detail}{where_}"),
        };
        let text_needle = json!({ "text": hex });

        // Each arm creates exactly one entry whose only nonce-bearing
        // attribute is the carrier's own.
        let result: Result<PlantOutcome, PlantOutcome> = (|| {
            let create = |name: &OsStr, created: &mut dyn FnMut(Value)| {
                self.create(
                    &dir,
                    &dir_st,
                    name,
                    Kind::File,
                    created,
                    || sys::create_file_at(&dir, name, 0o644),
                    |e| plant_error("creating a file", e),
                )
            };
            // A directory, symlink or FIFO named `name`: EPERM from these
            // syscalls means the filesystem allows no such entry here.
            let node = |kind: Kind,
                        (kinds, what): (&str, &str),
                        make: &dyn Fn() -> io::Result<()>,
                        created: &mut dyn FnMut(Value)| {
                self.create(&dir, &dir_st, &name, kind, created, make, |e| {
                    unsupported_on_eperm(kinds, what, e)
                })
            };
            match carrier {
                "file-content" => {
                    let mut f = create(&name, created)?;
                    f.write_all(marker_text(&hex).as_bytes())
                        .map_err(|e| plant_error("writing file content", e))?;
                    Ok(planted(
                        text_needle,
                        "a 56-byte file with the nonce on line 2".into(),
                    ))
                }
                "file-name" => {
                    create(&name, created)?;
                    Ok(planted(
                        text_needle,
                        "an empty file named after the nonce".into(),
                    ))
                }
                "directory-name" => {
                    node(
                        Kind::Dir,
                        ("directories", "creating a directory"),
                        &|| sys::mkdir_at(&dir, &name, 0o755),
                        created,
                    )?;
                    Ok(planted(
                        text_needle,
                        "an empty directory named after the nonce".into(),
                    ))
                }
                "symlink-target" => {
                    node(
                        Kind::Symlink,
                        ("symlinks", "creating a symlink"),
                        &|| sys::symlink_at(OsStr::new(&hex), &dir, &name),
                        created,
                    )?;
                    Ok(planted(
                        text_needle,
                        "a dangling symlink whose target is the nonce".into(),
                    ))
                }
                "xattr" | "xattr-name" => {
                    let f = create(&name, created)?;
                    let (key, value) = if carrier == "xattr" {
                        (XATTR_KEY.to_string(), hex.as_bytes())
                    } else {
                        (format!("user.{hex}"), &b"1"[..])
                    };
                    match f.set_xattr(&key, value) {
                        Ok(()) => Ok(planted(
                            text_needle,
                            if carrier == "xattr" {
                                format!("{XATTR_KEY} holds the nonce")
                            } else {
                                "an xattr named user.<nonce>".into()
                            },
                        )),
                        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTSUP)) => {
                            Err(PlantOutcome::Unsupported {
                                reason: format!(
                                    "the filesystem does not support user.* extended attributes: {e}"
                                ),
                            })
                        }
                        Err(e) => Err(plant_error("setting an extended attribute", e)),
                    }
                }
                "mtime" => {
                    let f = create(&name, created)?;
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
                    Ok(planted(
                        json!({ "mtime": [st.mtime_sec, st.mtime_nsec] }),
                        format!(
                            "mtime {}.{:09} ({precision} precision stored)",
                            st.mtime_sec, st.mtime_nsec
                        ),
                    ))
                }
                "file-size" => {
                    let f = create(&name, created)?;
                    match f.set_len(derived_size(nonce)) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::EFBIG) => {
                            return Err(PlantOutcome::Unsupported {
                                reason: format!(
                                    "the filesystem refuses a sparse 4-8 GiB file: {e}"
                                ),
                            });
                        }
                        Err(e) => return Err(plant_error("setting the file size", e)),
                    }
                    let st = sys::file_stat(&f).map_err(|e| plant_error("stat", e))?;
                    Ok(planted(
                        json!({ "size": st.size }),
                        format!("a sparse file of {} bytes", st.size),
                    ))
                }
                "special-file-name" => {
                    node(
                        Kind::Fifo,
                        ("FIFOs", "creating a FIFO"),
                        &|| sys::mkfifo_at(&dir, &name, 0o644),
                        created,
                    )?;
                    Ok(planted(text_needle, "a FIFO named after the nonce".into()))
                }
                RUNNER_PERSISTENCE => {
                    let Some(beacon) = &job.beacon else {
                        return Err(PlantOutcome::Failed {
                            reason: "no beacon to plant".into(),
                        });
                    };
                    let mut f = create(&name, created)?;
                    f.write_all(beacon.as_bytes())
                        .map_err(|e| plant_error("writing the beacon", e))?;
                    Ok(planted(
                        json!({ "beacons": true }),
                        format!(
                            "a signed beacon {}; recovery looks for beacons of other probes",
                            escape::bytes(name.as_bytes())
                        ),
                    ))
                }
                other => Err(PlantOutcome::Failed {
                    reason: format!("unknown carrier {other}"),
                }),
            }
        })();
        result.unwrap_or_else(|o| o)
    }
}
