//! Processes: dying with the parent, waiting on descriptors and exits,
//! and the open-file limit.

use super::check;
use crate::fault::Fault;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

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
/// (it may have died before this took hold). `Unsupported`: the kernel
/// (or a sandbox) refused it.
pub fn die_with_parent_thread() -> Result<(), Fault> {
    // SAFETY: prctl with an option and a signal number.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(Fault::unsupported(format!(
            "cannot ask to die with the probe: {}",
            io::Error::last_os_error()
        )));
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

/// Sends signal `sig` to process `pid` (a child of ours). Whether it
/// arrived is not asked: the process may have ended already, and the
/// caller reaps it either way.
pub fn send_signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill takes a pid and a signal number and touches no memory
    // of ours.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Sends signal `sig` to every process of the process group `pgid` (a
/// child of ours that leads its own group, and what it started). Whether
/// it arrived is not asked, as with [`send_signal`].
pub fn send_signal_group(pgid: u32, sig: libc::c_int) {
    // SAFETY: kill takes a (negated: a group's) pid and a signal number
    // and touches no memory of ours.
    unsafe { libc::kill(-(pgid as libc::pid_t), sig) };
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): the
/// processes its descendants leave behind are reparented to it instead
/// of to init.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with an option and plain integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }).map(|_| ())
}

/// Whether the child `pid` is still running; one that has ended is reaped
/// by this (`waitpid` with `WNOHANG`, which never blocks). A pid that is
/// not a child of ours is not running.
pub fn child_running(pid: u32) -> bool {
    let mut status = 0;
    // SAFETY: a pid, a status to fill and WNOHANG: never blocks.
    unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) == 0 }
}

/// The latest of the signals [`record_signals`] handles that came, as its
/// number (0: none yet).
static RECORDED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RECORDED.store(sig, Ordering::SeqCst);
}

/// Installs, for each of `sigs`, a handler that only records the signal
/// (read with [`recorded_signal`]), with `SA_RESTART`. Children get the
/// default dispositions back at exec.
pub fn record_signals(sigs: &[libc::c_int]) {
    for &sig in sigs {
        // SAFETY: an all-zero sigaction is valid; the handler is
        // async-signal-safe (one atomic store), the mask is initialised
        // by sigemptyset, and sigaction only reads what we pass.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal [`record_signals`] recorded, if one came (the latest one).
pub fn recorded_signal() -> Option<libc::c_int> {
    match RECORDED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(n),
    }
}

/// Lowers this thread's priority (nice 10; Linux keeps a nice value per
/// thread, and the processes the thread starts inherit it): its work then
/// runs in the time other work leaves, never instead of it.
pub fn yield_to_others() -> std::io::Result<()> {
    // SAFETY: gettid and setpriority take no pointers.
    let tid = unsafe { libc::gettid() };
    let ret = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 10) };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
