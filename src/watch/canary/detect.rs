//! Seeing reads of the canaries: the detectors' watches, collecting their
//! events, and the check that a canary is still the one placed (one
//! removed, replaced or changed may have been read unseen).

use super::{Access, Armed, Detector, REMOVED, REPLACED, TOUCHED, UNREACHABLE, cpath};
use crate::fault::Fault;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

impl Armed {
    pub(super) fn watch(&mut self, d: Detector) -> io::Result<()> {
        match d {
            Detector::Fanotify => {
                let fd = crate::sys::fanotify_init_notif()?;
                for c in &self.canaries {
                    let p = cpath(&c.path)?;
                    crate::sys::fanotify_mark_reads(&fd, &p)?;
                }
                self.fd = Some(fd);
                Ok(())
            }
            Detector::Inotify => {
                let fd = crate::sys::inotify_init_nonblock()?;
                for (i, c) in self.canaries.iter().enumerate() {
                    let p = cpath(&c.path)?;
                    let wd = crate::sys::inotify_watch_reads(&fd, &p)?;
                    self.wds.insert(wd, i);
                }
                self.fd = Some(fd);
                Ok(())
            }
            Detector::Atime => {
                // Under `noatime` nothing moves: no detection at all.
                for c in &self.canaries {
                    let p = cpath(&c.path)?;
                    if crate::sys::noatime_mount(&p) {
                        return Err(io::Error::other(format!(
                            "{} is on a noatime mount",
                            crate::escape::bytes(c.path.as_os_str().as_bytes())
                        )));
                    }
                }
                Ok(())
            }
        }
    }

    /// Every read of a canary so far. An overflow of the event queue is an
    /// error (`Broken`): a read may have been lost.
    pub fn collect(&mut self) -> Result<Vec<Access>, Fault> {
        match self.detector {
            Detector::Fanotify => self.drain_fanotify()?,
            Detector::Inotify => self.drain_inotify()?,
            Detector::Atime => {
                for c in &self.canaries {
                    let read = std::fs::symlink_metadata(&c.path)
                        .is_ok_and(|m| (m.atime(), m.atime_nsec()) != c.atime);
                    let seen = Access {
                        path: c.path.clone(),
                        pid: None,
                        how: "atime",
                    };
                    if read {
                        note(&mut self.reads, seen);
                    }
                }
            }
        }
        // Whatever the detector: a canary removed, replaced or changed
        // may have been read in a way the detector could not see (a read
        // then a delete; a read then its atime set back).
        for c in &self.canaries {
            let how = match std::fs::symlink_metadata(&c.path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Some(REMOVED),
                // Out of reach now (a parent made unreadable): what happened
                // to it cannot be seen.
                Err(_) => Some(UNREACHABLE),
                Ok(m) if (m.dev(), m.ino()) != (c.dev, c.ino) => Some(REPLACED),
                Ok(m) if (m.ctime(), m.ctime_nsec()) != c.ctime => Some(TOUCHED),
                Ok(_) => None,
            };
            if let Some(how) = how
                && !self.reads.iter().any(|r| r.path == c.path && r.how == how)
            {
                self.reads.push(Access {
                    path: c.path.clone(),
                    pid: None,
                    how,
                });
            }
        }
        if self.overflowed {
            return Err(Fault::broken(
                "the event queue overflowed: a read may have been lost",
            ));
        }
        Ok(self.reads.clone())
    }

    /// One read of the (non-blocking) event descriptor; none when it has
    /// nothing more.
    fn drain(&self, buf: &mut [u8]) -> Option<usize> {
        let fd = self.fd.as_ref()?;
        crate::sys::read_fd(fd, buf).ok().filter(|&n| n > 0)
    }

    fn drain_fanotify(&mut self) -> Result<(), Fault> {
        let me = std::process::id();
        let mut buf = vec![0u8; 64 * 1024];
        while let Some(n) = self.drain(&mut buf) {
            let mut at = 0;
            let size = std::mem::size_of::<libc::fanotify_event_metadata>();
            while at + size <= n {
                // The kernel wrote whole records: one is there (`at + size
                // <= n`), so the `else` is never taken.
                let Some(m) = crate::sys::fanotify_event(&buf[at..n]) else {
                    break;
                };
                if m.event_len == 0 || m.vers != libc::FANOTIFY_METADATA_VERSION {
                    return Err(Fault::unsupported(
                        "fanotify spoke a version this build does not read",
                    ));
                }
                if m.mask & libc::FAN_Q_OVERFLOW != 0 {
                    self.overflowed = true;
                }
                // Each event's descriptor taken once (and closed at the end
                // of this `if`).
                if let Some(f) = crate::sys::fanotify_event_file(&m)
                    && let Ok(st) = f.metadata()
                    && m.pid as u32 != me
                    && let Some(c) = self
                        .canaries
                        .iter()
                        .find(|c| c.dev == st.dev() && c.ino == st.ino())
                {
                    let how = if m.mask & libc::FAN_ACCESS != 0 {
                        "access"
                    } else {
                        "open"
                    };
                    let r = Access {
                        path: c.path.clone(),
                        pid: Some(m.pid as u32),
                        how,
                    };
                    note(&mut self.reads, r);
                }
                at += m.event_len as usize;
            }
        }
        Ok(())
    }

    fn drain_inotify(&mut self) -> Result<(), Fault> {
        let mut buf = vec![0u8; 64 * 1024];
        while let Some(n) = self.drain(&mut buf) {
            let mut at = 0;
            let size = std::mem::size_of::<libc::inotify_event>();
            while at + size <= n {
                // Whole records: one is there (`at + size <= n`), so the
                // `else` is never taken.
                let Some(e) = crate::sys::inotify_event(&buf[at..n]) else {
                    break;
                };
                if e.mask & libc::IN_Q_OVERFLOW != 0 {
                    self.overflowed = true;
                }
                if let Some(&i) = self.wds.get(&e.wd) {
                    let how = if e.mask & libc::IN_ACCESS != 0 {
                        "access"
                    } else {
                        "open"
                    };
                    let r = Access {
                        path: self.canaries[i].path.clone(),
                        pid: None,
                        how,
                    };
                    if e.mask & (libc::IN_OPEN | libc::IN_ACCESS) != 0 {
                        note(&mut self.reads, r);
                    }
                }
                at += size + e.len as usize;
            }
        }
        Ok(())
    }
}

/// Keeps one read per canary and process: an open then a read of it is
/// one read (`access`).
fn note(reads: &mut Vec<Access>, r: Access) {
    match reads
        .iter_mut()
        .find(|x| x.path == r.path && x.pid == r.pid)
    {
        Some(x) if r.how == "access" => x.how = "access",
        Some(_) => {}
        None => reads.push(r),
    }
}
