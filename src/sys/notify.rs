//! Seeing reads of files: fanotify and inotify descriptors, the records
//! read from them, and whether a mount updates access times (`statvfs`).
//! What the watch's canary detectors are built on.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::check;

/// A new fanotify descriptor for notifications only (`FAN_CLASS_NOTIF`),
/// non-blocking and close-on-exec; the descriptors its events carry are
/// opened read-only, close-on-exec. Needs CAP_SYS_ADMIN.
pub fn fanotify_init_notif() -> io::Result<OwnedFd> {
    // SAFETY: flags only; returns a new descriptor or -1.
    let fd = check(unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_NOTIF | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
            (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_LARGEFILE) as u32,
        )
    })?;
    // SAFETY: a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Marks `path` (not followed if it is a symlink) on the fanotify
/// descriptor `fd` for opens and reads (`FAN_OPEN | FAN_ACCESS`).
pub fn fanotify_mark_reads(fd: &OwnedFd, path: &CStr) -> io::Result<()> {
    // SAFETY: a fanotify descriptor, flags, a mask and a NUL-terminated
    // path.
    let r = unsafe {
        libc::fanotify_mark(
            fd.as_raw_fd(),
            libc::FAN_MARK_ADD | libc::FAN_MARK_DONT_FOLLOW,
            libc::FAN_OPEN | libc::FAN_ACCESS,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The fanotify event record at the start of `buf` (bytes read from a
/// fanotify descriptor); `None` when `buf` is shorter than one.
pub fn fanotify_event(buf: &[u8]) -> Option<libc::fanotify_event_metadata> {
    if buf.len() < std::mem::size_of::<libc::fanotify_event_metadata>() {
        return None;
    }
    // SAFETY: `buf` holds at least one record's bytes (checked above), the
    // record is plain integers (any bit pattern is valid), and
    // read_unaligned copes with any alignment of the buffer.
    Some(unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) })
}

/// The file a fanotify event carries (`None` for an event without one,
/// such as a queue overflow), now owned by the caller and closed when it
/// is dropped.
///
/// The kernel opens one descriptor per event for the reader: call this at
/// most once per event read from a fanotify descriptor, and never for a
/// record that did not come from one.
pub fn fanotify_event_file(m: &libc::fanotify_event_metadata) -> Option<std::fs::File> {
    if m.fd < 0 {
        return None;
    }
    // SAFETY: the event's descriptor was opened by the kernel for this
    // reader and nothing else owns it (the contract above): ours to close.
    let fd = unsafe { OwnedFd::from_raw_fd(m.fd) };
    Some(std::fs::File::from(fd))
}

/// A new inotify descriptor, non-blocking and close-on-exec.
pub fn inotify_init_nonblock() -> io::Result<OwnedFd> {
    // SAFETY: flags only; returns a new descriptor or -1.
    let fd = check(unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) })?;
    // SAFETY: a fresh descriptor we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watches `path` (not followed if it is a symlink) on the inotify
/// descriptor `fd` for opens and reads (`IN_OPEN | IN_ACCESS`); the watch
/// descriptor that its events name.
pub fn inotify_watch_reads(fd: &OwnedFd, path: &CStr) -> io::Result<i32> {
    // SAFETY: an inotify descriptor, a NUL-terminated path and a mask.
    check(unsafe {
        libc::inotify_add_watch(
            fd.as_raw_fd(),
            path.as_ptr(),
            libc::IN_OPEN | libc::IN_ACCESS | libc::IN_DONT_FOLLOW,
        )
    })
}

/// The inotify event record at the start of `buf` (without the name that
/// may follow it); `None` when `buf` is shorter than one.
pub fn inotify_event(buf: &[u8]) -> Option<libc::inotify_event> {
    if buf.len() < std::mem::size_of::<libc::inotify_event>() {
        return None;
    }
    // SAFETY: `buf` holds at least one record's bytes (checked above), the
    // record is plain integers (any bit pattern is valid), and
    // read_unaligned copes with any alignment of the buffer.
    Some(unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) })
}

/// Whether `path` is on a `noatime` mount (where reads never move an
/// access time). A path `statvfs` cannot answer for counts as not.
pub fn noatime_mount(path: &CStr) -> bool {
    // SAFETY: all-zero is a valid statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs to fill.
    let r = unsafe { libc::statvfs(path.as_ptr(), &mut st) };
    r == 0 && st.f_flag & libc::ST_NOATIME != 0
}
