//! A working directory of this thread's own, for a walk that reads an
//! entry's xattrs by its bare name: `llistxattr(name)` from inside the
//! directory looks up one name, where `/proc/self/fd/<dir>/<name>` looks
//! up five (and a magic link), a sixth of a watch's time on a tree of
//! 200,000 entries. Linux has no `*xattrat` call before 6.13.
//!
//! The thread first stops sharing its working directory with the process
//! (`unshare(CLONE_FS)`), so moving it never moves another thread's; it
//! moves only into directories the walk holds open (`fchdir`: no path,
//! nothing followed), and is moved back where it was when dropped.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// This thread's working directory, moved by a walk; back where it was
/// once dropped.
pub struct PrivateCwd {
    home: OwnedFd,
}

impl PrivateCwd {
    /// `Err` where the thread cannot have a working directory of its own
    /// (a seccomp policy refusing `unshare`), or its own is gone: the
    /// caller then reads through `/proc/self/fd`.
    pub fn new() -> io::Result<PrivateCwd> {
        // SAFETY: unshare(CLONE_FS) takes no pointers; it affects only the
        // calling thread's filesystem context.
        super::check(unsafe { libc::unshare(libc::CLONE_FS) })?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the descriptor returned is owned here.
        let fd = super::check(unsafe { libc::open(c".".as_ptr(), flags) })?;
        // SAFETY: `fd` is fresh and owned by nothing else.
        let home = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(PrivateCwd { home })
    }

    /// Moves this thread into `dir` (which needs search permission).
    pub fn enter(&self, dir: &OwnedFd) -> io::Result<()> {
        // SAFETY: fchdir on a descriptor the caller holds open.
        super::check(unsafe { libc::fchdir(dir.as_raw_fd()) }).map(|_| ())
    }
}

impl Drop for PrivateCwd {
    fn drop(&mut self) {
        // SAFETY: fchdir on the descriptor this value owns.
        if unsafe { libc::fchdir(self.home.as_raw_fd()) } != 0 {
            // The way back was taken away (the command made the old
            // directory unsearchable): never stay inside the walked tree,
            // where a relative path would then resolve.
            // SAFETY: a valid C string.
            unsafe { libc::chdir(c"/".as_ptr()) };
        }
    }
}
