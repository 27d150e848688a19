//! SIGINT/SIGTERM/SIGHUP: remembered, not obeyed at once, so that the
//! probe stops its child run and still cleans up what run A planted.

use std::sync::atomic::{AtomicI32, Ordering};

static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    RECEIVED.store(sig, Ordering::SeqCst);
}

/// Installs the handlers for the orchestrating process. Children get the
/// default dispositions back at exec.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The name of the first signal received, if any.
pub fn received() -> Option<&'static str> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(name(n)),
    }
}

/// A signal's name, for messages and reports (`SIGTERM`).
pub fn name(n: i32) -> &'static str {
    match n {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// The number of the first signal received, if any (to pass it on).
pub fn received_number() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(n),
    }
}
