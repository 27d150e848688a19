//! Thin safe wrappers over the Linux syscalls std does not expose: files
//! and directories here, processes and signals in [`process`], fanotify,
//! inotify and mount flags in [`notify`], UDP drop counts in [`udp`], a
//! thread's own working directory in [`cwd`]. The
//! crate's only `unsafe` code is in this module.
//!
//! Everything that touches entries inside a surface directory goes through
//! a directory file descriptor and the `*at` calls with `AT_SYMLINK_NOFOLLOW`
//! / `O_NOFOLLOW`, so a name swapped for a symlink between two calls is never
//! followed.

mod cwd;
mod notify;
pub mod poll;
mod process;
mod udp;

pub use cwd::PrivateCwd;
pub use notify::{
    fanotify_event, fanotify_event_file, fanotify_init_notif, fanotify_mark_reads, inotify_event,
    inotify_init_nonblock, inotify_watch_reads, noatime_mount,
};
pub use process::{
    become_subreaper, child_running, die_with_parent, die_with_parent_thread, poll_readable,
    raise_nofile, record_signals, recorded_signal, restore_nofile, send_signal, send_signal_group,
    wait_exit, yield_to_others,
};
pub use udp::{count_drops, recv_counting};

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The parts of `struct stat` runwarden uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub dev: u64,
    pub ino: u64,
    pub mode: u32,
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
    pub uid: u32,
    pub ctime_sec: i64,
    pub ctime_nsec: i64,
}

impl Stat {
    pub fn file_type(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
    pub fn is_reg(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }
    pub fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }
}

fn from_raw(st: &libc::stat) -> Stat {
    Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        mode: st.st_mode,
        size: st.st_size as u64,
        mtime_sec: st.st_mtime,
        mtime_nsec: st.st_mtime_nsec,
        uid: st.st_uid,
        ctime_sec: st.st_ctime,
        ctime_nsec: st.st_ctime_nsec,
    }
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains NUL"))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens a directory for `*at` calls with `O_PATH`: search permission on
/// the way there is all it needs, so a directory that may be written but
/// not listed (`0333`, a `1733` drop box) is still reachable, and whether
/// a plant or a read is refused is decided by the syscall that does it.
/// The configured path itself may be a symlink (like /tmp on some
/// systems); entries inside are never followed.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = cstr(path.as_os_str())?;
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the directory `dir` (an [`open_dir`] descriptor) for listing: the
/// one operation that needs read permission on it.
pub fn open_listing(dir: &OwnedFd) -> io::Result<OwnedFd> {
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn fstat(fd: &OwnedFd) -> io::Result<Stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(from_raw(&st))
}

/// `lstat` of a name in a directory: never follows a symlink.
pub fn lstat_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Stat> {
    let c = cstr(name)?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(from_raw(&st))
}

/// Creates a new regular file; fails if the name exists (never overwrites,
/// never follows a symlink).
pub fn create_file_at(dir: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<std::fs::File> {
    let c = cstr(name)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd =
        check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, mode as libc::c_uint) })?;
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Opens an existing entry for reading without following a symlink, without
/// blocking (a FIFO swapped in after the caller's lstat cannot hang us) and
/// without becoming its controlling terminal. Tries `O_NOATIME` first so a
/// scan leaves foreign files' access times alone where the kernel allows it.
pub fn open_read_at(dir: &OwnedFd, name: &OsStr) -> io::Result<std::fs::File> {
    let c = cstr(name)?;
    let base =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    let mut fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), base | libc::O_NOATIME) };
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
        fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), base) };
    }
    let fd = check(fd)?;
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Sets the mode of the entry `name` in `dir` (a file, a directory or a
/// FIFO) through a descriptor of its own, never following a symlink and
/// never blocking on a FIFO: what a sender does after creating its plant,
/// whatever a default ACL or umask made of the mode it asked for.
pub fn chmod_at(dir: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let c = cstr(name)?;
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: openat with a valid directory descriptor and a C string; the
    // descriptor it returns is owned by the File from here on.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) })?;
    // SAFETY: `fd` is fresh and owned by nothing else.
    let f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

pub fn mkdir_at(dir: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cstr(name)?;
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) }).map(|_| ())
}

pub fn mkfifo_at(dir: &OwnedFd, name: &OsStr, mode: u32) -> io::Result<()> {
    let c = cstr(name)?;
    check(unsafe { libc::mkfifoat(dir.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) }).map(|_| ())
}

pub fn symlink_at(target: &OsStr, dir: &OwnedFd, name: &OsStr) -> io::Result<()> {
    let t = cstr(target)?;
    let c = cstr(name)?;
    check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), c.as_ptr()) }).map(|_| ())
}

/// Reads a symlink's target (never follows it).
pub fn readlink_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Vec<u8>> {
    let c = cstr(name)?;
    let mut buf = vec![0u8; 4096];
    loop {
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = n as usize;
        if n < buf.len() {
            buf.truncate(n);
            return Ok(buf);
        }
        // Targets are bounded by PATH_MAX on Linux; grow once or twice.
        if buf.len() >= 1 << 16 {
            return Err(io::Error::other("symlink target too long"));
        }
        buf.resize(buf.len() * 2, 0);
    }
}

/// Removes a name (`rmdir` semantics when `dir_entry`): never recursive.
pub fn unlink_at(dir: &OwnedFd, name: &OsStr, dir_entry: bool) -> io::Result<()> {
    let c = cstr(name)?;
    let flags = if dir_entry { libc::AT_REMOVEDIR } else { 0 };
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), flags) }).map(|_| ())
}

/// Sets the modification time of an open file, leaving its access time.
pub fn set_mtime(file: &std::fs::File, sec: i64, nsec: i64) -> io::Result<()> {
    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        libc::timespec {
            tv_sec: sec as libc::time_t,
            tv_nsec: nsec as _,
        },
    ];
    check(unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) }).map(|_| ())
}

/// Sets the access time of an open file, leaving its modification time.
pub fn set_atime(file: &std::fs::File, sec: i64, nsec: i64) -> io::Result<()> {
    let times = [
        libc::timespec {
            tv_sec: sec as libc::time_t,
            tv_nsec: nsec as _,
        },
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
    ];
    // SAFETY: an open descriptor and two timespecs.
    check(unsafe { libc::futimens(file.as_raw_fd(), times.as_ptr()) }).map(|_| ())
}

/// One `read` of a descriptor into `buf`: the count of bytes read (0 at
/// its end, or for a non-blocking one with nothing to give, an error
/// `WouldBlock`).
pub fn read_fd(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: a descriptor we hold and a buffer of that length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// The capacity of a pipe (`F_GETPIPE_SZ`); `None` when `fd` is not one or
/// the kernel does not say.
pub fn pipe_capacity(fd: BorrowedFd<'_>) -> Option<usize> {
    // SAFETY: F_GETPIPE_SZ on a descriptor we hold returns its capacity or -1.
    let room = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETPIPE_SZ) };
    (room > 0).then_some(room as usize)
}

pub fn file_stat(file: &std::fs::File) -> io::Result<Stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstat(file.as_raw_fd(), &mut st) })?;
    Ok(from_raw(&st))
}

/// The filesystem magic number (`statfs.f_type`) of the filesystem holding
/// an open file descriptor.
pub fn fs_magic(fd: &OwnedFd) -> io::Result<i64> {
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatfs(fd.as_raw_fd(), &mut sf) })?;
    Ok(sf.f_type as i64)
}

pub const TMPFS_MAGIC: i64 = 0x0102_1994;
pub const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// Sets the process umask; runs A and B set it so the modes runwarden asks
/// for are the modes it gets.
pub fn set_umask(mask: u32) {
    unsafe {
        libc::umask(mask as libc::mode_t);
    }
}

/// Sets an environment variable of this process, for a process that has
/// one thread: the caller has joined (or never started) every other one.
///
/// Why a wrapper: `std::env::set_var` is unsafe (edition 2024) because
/// another thread reading the environment at the same time (getenv, or
/// libc on its behalf) may read freed memory.
pub fn set_env_single_threaded(key: &str, value: impl AsRef<OsStr>) {
    // SAFETY: by this function's contract the calling thread is the
    // process's only one, so nothing reads the environment while it
    // changes.
    unsafe { std::env::set_var(key, value) };
}

/// The width of the terminal on `fd` (stdout, stderr), in columns (none
/// when it is not a terminal, or it does not say).
pub fn terminal_width(fd: libc::c_int) -> Option<usize> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which lives for the
    // call; on error it writes nothing.
    let r = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// This process's effective uid.
pub fn euid() -> u32 {
    unsafe { libc::geteuid() }
}

/// The time the kernel stamps new inodes with (the coarse real-time
/// clock, which can lag the precise one by a tick): what an entry's birth
/// time is compared with.
pub fn now_coarse() -> (i64, i64) {
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
    (ts.tv_sec as i64, ts.tv_nsec as i64)
}

pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// Changes the owner of a path (no symlink following); used to hand run
/// B's own directory to the uid it runs as.
pub fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let c = cstr(path.as_os_str())?;
    check(unsafe { libc::lchown(c.as_ptr(), uid, gid) }).map(|_| ())
}

/// A printable name of an errno-carrying error, e.g. "EACCES".
pub fn errno_name(e: &io::Error) -> Option<&'static str> {
    Some(match e.raw_os_error()? {
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EROFS => "EROFS",
        libc::ENOENT => "ENOENT",
        libc::ENOTDIR => "ENOTDIR",
        libc::EEXIST => "EEXIST",
        libc::ENOSPC => "ENOSPC",
        libc::EDQUOT => "EDQUOT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EFBIG => "EFBIG",
        libc::ELOOP => "ELOOP",
        libc::ENXIO => "ENXIO",
        libc::EIO => "EIO",
        _ => return None,
    })
}

/// Streams the entries of an open directory (`readdir`), without `.` and
/// `..`, with the `d_type` hint (`DT_UNKNOWN` where the filesystem gives
/// none). Memory stays constant however many entries there are.
pub struct DirIter {
    dirp: *mut libc::DIR,
    done: bool,
}

impl DirIter {
    pub fn new(dir: &OwnedFd) -> io::Result<DirIter> {
        // fdopendir takes ownership of its fd, so give it a duplicate.
        let fd = check(unsafe { libc::fcntl(dir.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?;
        let dirp = unsafe { libc::fdopendir(fd) };
        if dirp.is_null() {
            let e = io::Error::last_os_error();
            unsafe { libc::close(fd) };
            return Err(e);
        }
        // The duplicate shares the offset of `dir`: start from the top.
        unsafe { libc::rewinddir(dirp) };
        Ok(DirIter { dirp, done: false })
    }
}

impl Iterator for DirIter {
    type Item = io::Result<(std::ffi::OsString, u8)>;

    fn next(&mut self) -> Option<Self::Item> {
        use std::os::unix::ffi::OsStringExt;
        while !self.done {
            unsafe { *libc::__errno_location() = 0 };
            let ent = unsafe { libc::readdir(self.dirp) };
            if ent.is_null() {
                self.done = true;
                let e = io::Error::last_os_error();
                return if e.raw_os_error().unwrap_or(0) != 0 {
                    Some(Err(e))
                } else {
                    None
                };
            }
            let (name, dtype) = unsafe {
                let name = std::ffi::CStr::from_ptr((*ent).d_name.as_ptr())
                    .to_bytes()
                    .to_vec();
                (name, (*ent).d_type)
            };
            if name == b"." || name == b".." {
                continue;
            }
            return Some(Ok((std::ffi::OsString::from_vec(name), dtype)));
        }
        None
    }
}

impl Drop for DirIter {
    fn drop(&mut self) {
        unsafe { libc::closedir(self.dirp) };
    }
}

/// The birth time (seconds, nanoseconds) of a name in a directory, where
/// the filesystem records one (ext4, xfs, btrfs, tmpfs do). Inode numbers
/// are reused at once after a delete, so cleanup checks this too before it
/// removes anything. Called through the raw syscall so it works the same
/// with glibc and musl.
pub fn birth_at(dir: &OwnedFd, name: &OsStr) -> io::Result<Option<(i64, u32)>> {
    let c = cstr(name)?;
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let ret = unsafe {
        libc::syscall(
            libc::SYS_statx,
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BTIME,
            &mut stx as *mut libc::statx,
        )
    };
    if ret < 0 {
        let e = io::Error::last_os_error();
        // Kernels before 4.11 have no statx, and some seccomp profiles
        // refuse it (EPERM) or a filesystem cannot answer it: no birth time
        // to compare.
        return if matches!(
            e.raw_os_error(),
            Some(libc::ENOSYS | libc::EPERM | libc::EINVAL | libc::EOPNOTSUPP)
        ) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    if stx.stx_mask & libc::STATX_BTIME == 0 {
        return Ok(None);
    }
    Ok(Some((stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec)))
}

/// Opens the subdirectory `name` of `dir` like [`open_dir`] (`O_PATH`),
/// never following a symlink: a name swapped for one fails (`ENOTDIR` or
/// `ELOOP`) instead of leading elsewhere.
pub fn open_dir_at(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a file runwarden reads that others could have replaced (its own
/// files in a directory a watched command could write, a receipt handed
/// over from another job): never through a symlink, never blocking on a
/// FIFO, and only a regular file.
pub fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(f)
}

/// The whole of a regular file ([`open_regular`]) of at most `max` bytes;
/// a larger one is an error, read no further than `max` + 1 bytes.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::new();
    open_regular(path)?.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(out)
}

/// Takes `file`'s exclusive advisory lock without waiting: `Ok(true)`
/// taken, `Ok(false)` someone holds it. (`flock` locks belong to an open
/// file: a second open of the same file by this process does not share
/// the first one's.)
pub fn try_lock(file: &std::fs::File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor this File owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        e => Err(e),
    }
}
