//! The watch's own directory: where it is, what else is in it, and how it
//! goes.
//!
//! The watched command runs as the same user and can reach it, so:
//! - it is never inside a watched surface ([`place`]): a directory the
//!   snapshots leave out would be a place to hide a message;
//! - anything in it runwarden did not write is reported ([`WorkDir::foreign`]),
//!   never silence;
//! - it is emptied through descriptors only, never following a link it did
//!   not make: a work directory swapped for a symlink is left alone, and
//!   nothing under the link's target is touched. Only runwarden's own files
//!   go (the snapshots, the saved watch, the canary journal), then the
//!   directory if that left it empty.

use crate::fault::Fault;
use crate::plan::Plan;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The canary journal: each path, before runwarden creates it.
pub(super) const JOURNAL: &str = "canaries.journal";

/// At most this many foreign names are listed.
const LISTED: usize = 20;

pub(super) fn own_file(name: &str) -> bool {
    name == super::saved::SAVED
        || name == JOURNAL
        || name
            .strip_suffix(".before")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

pub(super) struct WorkDir {
    pub path: PathBuf,
    pub keep: bool,
}

impl WorkDir {
    pub fn new(path: PathBuf) -> WorkDir {
        WorkDir { path, keep: false }
    }

    /// The directory's parent and the directory itself, opened without
    /// following the directory's own name if it was swapped for a link.
    fn open(&self) -> std::io::Result<(OwnedFd, OwnedFd, OsString)> {
        let parent = self.path.parent().unwrap_or(Path::new("/"));
        let name = self
            .path
            .file_name()
            .ok_or_else(|| std::io::Error::other("no name"))?
            .to_os_string();
        let p = crate::sys::open_dir(parent)?;
        let d = crate::sys::open_dir_at(&p, &name)?;
        Ok((p, d, name))
    }

    /// What is in it that runwarden did not write: names (escaped), the
    /// first [`LISTED`], then a count of the rest; or why it could not be
    /// looked at (a directory swapped for a link, or gone: `Broken`).
    pub fn foreign(&self) -> Result<Vec<String>, Fault> {
        let shown = crate::escape::bytes(self.path.as_os_str().as_encoded_bytes());
        let (_, dir, _) = self.open().map_err(|e| {
            Fault::broken(format!(
                "the work directory {shown} cannot be opened as itself: {e}"
            ))
        })?;
        let io = |e: std::io::Error| Fault::broken(e.to_string());
        let listing = crate::sys::open_listing(&dir).map_err(io)?;
        let mut out = Vec::new();
        let mut more = 0usize;
        for entry in crate::sys::DirIter::new(&listing).map_err(io)? {
            let (name, _) = entry.map_err(io)?;
            let ours = name.to_str().is_some_and(own_file)
                && crate::sys::lstat_at(&dir, &name)
                    .is_ok_and(|st| st.file_type() == libc::S_IFREG);
            if ours {
                continue;
            }
            if out.len() < LISTED {
                out.push(crate::escape::bytes(name.as_encoded_bytes()));
            } else {
                more += 1;
            }
        }
        if more > 0 {
            out.push(format!("and {more} more"));
        }
        Ok(out)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let Ok((parent, dir, name)) = self.open() else {
            return;
        };
        if let Ok(listing) = crate::sys::open_listing(&dir)
            && let Ok(entries) = crate::sys::DirIter::new(&listing)
        {
            let names: Vec<OsString> = entries.flatten().map(|(n, _)| n).collect();
            for n in names {
                let regular =
                    crate::sys::lstat_at(&dir, &n).is_ok_and(|st| st.file_type() == libc::S_IFREG);
                if n.to_str().is_some_and(own_file) && regular {
                    let _ = crate::sys::unlink_at(&dir, &n, false);
                }
            }
        }
        // The directory itself, only while its name still is this one.
        let same = match (
            crate::sys::fstat(&dir),
            crate::sys::lstat_at(&parent, &name),
        ) {
            (Ok(a), Ok(b)) => a.dev == b.dev && a.ino == b.ino,
            _ => false,
        };
        if same {
            let _ = crate::sys::unlink_at(&parent, &name, true);
        }
    }
}

/// The filesystem surfaces' paths, as they resolve.
fn watched(plan: &Plan) -> Vec<(String, PathBuf)> {
    plan.surfaces
        .iter()
        .filter(|sp| sp.type_name == "filesystem")
        .filter_map(|sp| {
            let p = sp.settings["path"].as_str()?;
            let real = std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
            Some((sp.name.clone(), real))
        })
        .collect()
}

/// Where the work directory goes: `wanted` (the `--work-dir`, or the
/// runner's temp in the action) unless it lies inside a watched surface,
/// else the first of the system temp, `/var/tmp` and `/dev/shm` that
/// exists and does not. `Err` (`Invalid`: the config and `--work-dir`
/// leave no place) when every one does. The second value says why `wanted`
/// was passed over, when it was.
pub(super) fn place(
    plan: &Plan,
    wanted: Option<&Path>,
) -> Result<(PathBuf, Option<String>), Fault> {
    let surfaces = watched(plan);
    let inside = |dir: &Path| -> Option<String> {
        let real = std::fs::canonicalize(dir).ok()?;
        surfaces
            .iter()
            .find(|(_, s)| real.starts_with(s))
            .map(|(n, _)| n.clone())
    };
    let mut candidates: Vec<PathBuf> = wanted.map(Path::to_path_buf).into_iter().collect();
    candidates.extend([
        std::env::temp_dir(),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
    ]);
    let mut passed = Vec::new();
    for c in candidates {
        if !c.is_dir() {
            continue;
        }
        match inside(&c) {
            None => {
                let why = (!passed.is_empty()).then(|| passed.join("; "));
                return Ok((c, why));
            }
            Some(s) => passed.push(format!(
                "{} is in the watched surface {s}",
                crate::escape::bytes(c.as_os_str().as_encoded_bytes())
            )),
        }
    }
    Err(Fault::invalid(format!(
        "no place for the watch's work directory outside the watched surfaces ({}): a directory the snapshots leave out would be a place to hide a message; pass --work-dir with one outside them",
        passed.join("; ")
    )))
}
