//! Seeing reads of the canaries: the detectors' watches, collecting their
//! events, and the check that a canary is still the one placed (one
//! removed, replaced or changed may have been read unseen).

use super::*;

impl Armed {
    pub(super) fn watch(&mut self, d: Detector) -> io::Result<()> {
        match d {
            Detector::Fanotify => {
                // SAFETY: flags only; returns a new descriptor or -1.
                let fd = unsafe {
                    libc::fanotify_init(
                        libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
                        (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_LARGEFILE) as u32,
                    )
                };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: a fresh descriptor we now own.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                for c in &self.canaries {
                    let p = cpath(&c.path)?;
                    // SAFETY: a fanotify descriptor, flags, a mask and a
                    // NUL-terminated path.
                    let r = unsafe {
                        libc::fanotify_mark(
                            fd.as_raw_fd(),
                            libc::FAN_MARK_ADD | libc::FAN_MARK_DONT_FOLLOW,
                            libc::FAN_OPEN | libc::FAN_ACCESS,
                            libc::AT_FDCWD,
                            p.as_ptr(),
                        )
                    };
                    if r != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                self.fd = Some(fd);
                Ok(())
            }
            Detector::Inotify => {
                // SAFETY: flags only.
                let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: a fresh descriptor we now own.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                for (i, c) in self.canaries.iter().enumerate() {
                    let p = cpath(&c.path)?;
                    // SAFETY: an inotify descriptor, a path and a mask.
                    let wd = unsafe {
                        libc::inotify_add_watch(
                            fd.as_raw_fd(),
                            p.as_ptr(),
                            libc::IN_OPEN | libc::IN_ACCESS | libc::IN_DONT_FOLLOW,
                        )
                    };
                    if wd < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    self.wds.insert(wd, i);
                }
                self.fd = Some(fd);
                Ok(())
            }
            Detector::Atime => {
                // Under `noatime` nothing moves: no detection at all.
                for c in &self.canaries {
                    let p = cpath(&c.path)?;
                    // SAFETY: all-zero is a valid statvfs.
                    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                    // SAFETY: a path and a statvfs to fill.
                    if unsafe { libc::statvfs(p.as_ptr(), &mut st) } == 0
                        && st.f_flag & libc::ST_NOATIME != 0
                    {
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
    /// error: a read may have been lost.
    pub fn collect(&mut self) -> Result<Vec<Read>, String> {
        match self.detector {
            Detector::Fanotify => self.drain_fanotify()?,
            Detector::Inotify => self.drain_inotify()?,
            Detector::Atime => {
                for c in &self.canaries {
                    let read = std::fs::symlink_metadata(&c.path)
                        .is_ok_and(|m| (m.atime(), m.atime_nsec()) != c.atime);
                    let seen = Read {
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
                self.reads.push(Read {
                    path: c.path.clone(),
                    pid: None,
                    how,
                });
            }
        }
        if self.overflowed {
            return Err("the event queue overflowed: a read may have been lost".into());
        }
        Ok(self.reads.clone())
    }

    /// One read of the (non-blocking) event descriptor; none when it has
    /// nothing more.
    fn drain(&self, buf: &mut [u8]) -> Option<usize> {
        let fd = self.fd.as_ref()?;
        // SAFETY: a descriptor we own and a buffer of that length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        (n > 0).then_some(n as usize)
    }

    fn drain_fanotify(&mut self) -> Result<(), String> {
        let me = std::process::id();
        let mut buf = vec![0u8; 64 * 1024];
        while let Some(n) = self.drain(&mut buf) {
            let mut at = 0;
            let size = std::mem::size_of::<libc::fanotify_event_metadata>();
            while at + size <= n {
                // SAFETY: the kernel wrote whole records; read_unaligned
                // copes with any alignment of the buffer.
                let m: libc::fanotify_event_metadata =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                if m.event_len == 0 || m.vers != libc::FANOTIFY_METADATA_VERSION {
                    return Err("fanotify spoke a version this build does not read".into());
                }
                if m.mask & libc::FAN_Q_OVERFLOW != 0 {
                    self.overflowed = true;
                }
                if m.fd >= 0 {
                    // SAFETY: the event's descriptor is ours to close.
                    let ev = unsafe { OwnedFd::from_raw_fd(m.fd) };
                    let f = std::fs::File::from(ev);
                    if let Ok(st) = f.metadata()
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
                        let r = Read {
                            path: c.path.clone(),
                            pid: Some(m.pid as u32),
                            how,
                        };
                        note(&mut self.reads, r);
                    }
                }
                at += m.event_len as usize;
            }
        }
        Ok(())
    }

    fn drain_inotify(&mut self) -> Result<(), String> {
        let mut buf = vec![0u8; 64 * 1024];
        while let Some(n) = self.drain(&mut buf) {
            let mut at = 0;
            let size = std::mem::size_of::<libc::inotify_event>();
            while at + size <= n {
                // SAFETY: whole records; read_unaligned copes with any
                // alignment.
                let e: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
                if e.mask & libc::IN_Q_OVERFLOW != 0 {
                    self.overflowed = true;
                }
                if let Some(&i) = self.wds.get(&e.wd) {
                    let how = if e.mask & libc::IN_ACCESS != 0 {
                        "access"
                    } else {
                        "open"
                    };
                    let r = Read {
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
fn note(reads: &mut Vec<Read>, r: Read) {
    match reads
        .iter_mut()
        .find(|x| x.path == r.path && x.pid == r.pid)
    {
        Some(x) if r.how == "access" => x.how = "access",
        Some(_) => {}
        None => reads.push(r),
    }
}
