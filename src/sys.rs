//! Thin safe wrappers over the Linux syscalls std does not expose.
//!
//! Everything that touches entries inside a surface directory goes through
//! a directory file descriptor and the `*at` calls with `AT_SYMLINK_NOFOLLOW`
//! / `O_NOFOLLOW`, so a name swapped for a symlink between two calls is never
//! followed.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
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

/// Makes a child process die (SIGKILL) when the thread that spawned it
/// exits: a run that is killed must not leave its git push finishing after
/// cleanup ran, and a killed probe must not leave its runs behind. For
/// `CommandExt::pre_exec`: only async-signal-safe calls.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Makes this process die (SIGKILL) when the thread that started it
/// exits: what [`die_with_parent`] does from a pre-exec hook, done by the
/// child itself so that its parent can spawn it without forking. The
/// caller checks afterwards that its parent is still the one it expects
/// (it may have died before this took hold).
pub fn die_with_parent_thread() -> Result<(), String> {
    // SAFETY: prctl with an option and a signal number.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(format!(
            "cannot ask to die with the probe: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Which of `fds` (`None`: not watched) are readable (data, or their end)
/// within `timeout`; none when it passed or a signal came first (poll is
/// never restarted). An error is poll's own (never a signal).
pub fn poll_readable(fds: &[Option<i32>], timeout: std::time::Duration) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.unwrap_or(-1),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: a valid array of pollfds (a negative fd is ignored), its
    // length, a timeout.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(pfds
        .iter()
        .map(|p| n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0)
        .collect())
}

/// Waits until process `pid` (a child not yet reaped) has exited, or until
/// `deadline`. It says nothing: the caller reaps (or kills) next either
/// way, and where the kernel has no pidfd (before Linux 5.3) it returns at
/// once for the caller to poll.
///
/// Why a pidfd: it becomes readable the moment the process exits, so the
/// wait ends then, not at the next tick of a polling loop.
pub fn wait_exit(pid: u32, deadline: std::time::Instant) {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return;
    }
    // SAFETY: the syscall returned a fresh descriptor we now own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // Interrupted by a signal: wait on for what is left, not anew.
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd, its count, a timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
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

/// Raises this process's open-file limit to its hard limit, for a walk
/// that holds one directory descriptor per level; the limit it had, to put
/// back with [`restore_nofile`] (a command started later must not inherit
/// the raised one).
pub fn raise_nofile() -> Option<libc::rlimit> {
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a resource and an rlimit to fill, then to set.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        let old = lim;
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        Some(old)
    }
}

/// Puts back the limit [`raise_nofile`] returned.
pub fn restore_nofile(old: Option<libc::rlimit>) {
    if let Some(lim) = old {
        // SAFETY: a resource and a limit we read before.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

/// `SO_RXQ_OVFL` (asm-generic/socket.h; the value on x86_64 and aarch64):
/// each datagram received then carries the count of datagrams the socket
/// has dropped so far for want of buffer.
const SO_RXQ_OVFL: libc::c_int = 40;

/// Asks the kernel to count what `sock` drops (see [`recv_counting`]).
pub fn count_drops(sock: &std::net::UdpSocket) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a socket we own, an int option and its size.
    check(unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_RXQ_OVFL,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// One datagram into `buf` (its length and sender), and how many the
/// socket had dropped by then (0 until it drops one; [`count_drops`]
/// must have been asked).
pub fn recv_counting(
    sock: &std::net::UdpSocket,
    buf: &mut [u8],
) -> io::Result<(usize, std::net::SocketAddr, u32)> {
    // SAFETY: recvmsg with buffers that outlive the call; the control
    // messages are walked with the CMSG macros over the space given.
    unsafe {
        let mut from: libc::sockaddr_storage = std::mem::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = [0u64; 8];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&mut from as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut dropped = 0u32;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_RXQ_OVFL {
                dropped = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<u32>());
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        let addr = match from.ss_family as libc::c_int {
            libc::AF_INET => {
                let a = *(&from as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>();
                std::net::SocketAddr::from((
                    u32::from_be(a.sin_addr.s_addr).to_be_bytes(),
                    u16::from_be(a.sin_port),
                ))
            }
            libc::AF_INET6 => {
                let a = *(&from as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>();
                std::net::SocketAddr::from((a.sin6_addr.s6_addr, u16::from_be(a.sin6_port)))
            }
            _ => return Err(io::Error::other("a datagram from no address")),
        };
        Ok((n as usize, addr, dropped))
    }
}

#[cfg(test)]
mod drop_tests {
    use super::*;

    #[test]
    fn a_flooded_socket_says_how_many_it_dropped() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let small: libc::c_int = 1024;
        // SAFETY: a socket we own, an int option and its size.
        unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        count_drops(&rx).unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            let _ = tx.send_to(&[7u8; 400], rx.local_addr().unwrap());
        }
        // What was queued came before the drops; the next datagram queued
        // after them carries their count.
        let mut buf = [0u8; 512];
        rx.set_nonblocking(true).unwrap();
        while recv_counting(&rx, &mut buf).is_ok() {}
        rx.set_nonblocking(false).unwrap();
        tx.send_to(&[8u8; 10], rx.local_addr().unwrap()).unwrap();
        let (n, from, dropped) = recv_counting(&rx, &mut buf).unwrap();
        assert_eq!((n, from), (10, tx.local_addr().unwrap()));
        assert!(dropped > 0, "{dropped}");
    }
}
