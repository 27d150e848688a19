//! SIGINT/SIGTERM/SIGHUP: remembered, not obeyed at once, so that the
//! probe stops its child run and still cleans up what run A planted.

/// Installs the handlers for the orchestrating process. Children get the
/// default dispositions back at exec.
pub fn install() {
    crate::sys::record_signals(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
}

/// The name of the first signal received, if any.
pub fn received() -> Option<&'static str> {
    crate::sys::recorded_signal().map(name)
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
    crate::sys::recorded_signal()
}
