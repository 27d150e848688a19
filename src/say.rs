//! What runwarden says on stderr: each message one line of a log,
//! redacted, cut to [`MAX_LINE`] characters and escaped
//! ([`crate::escape::line`]); on a terminal, fitted to its width. Below
//! every module that speaks (the engine, watch mode, the command line), so
//! that none prints a message any other way.

/// The most characters a line runwarden logs carries: a line can hold
/// surface text (a relayed label, a name), which is never a flood.
pub const MAX_LINE: usize = 4_000;

/// `msg` as one line of a log: redacted, cut to [`MAX_LINE`] characters,
/// escaped ([`crate::escape::line`]).
pub fn log_line(msg: &str) -> String {
    crate::escape::line(&crate::escape::clip(&crate::redact::text(msg), MAX_LINE))
}

/// `msg` on stderr, after `runwarden: `. On a terminal it is fitted to its
/// width (the text hanging under itself); elsewhere it stays one line, as
/// a log's records are (and an Actions log reads a workflow command from
/// one line).
pub fn error(msg: &str) {
    let line = format!("runwarden: {}", log_line(msg));
    match crate::sys::terminal_width(libc::STDERR_FILENO) {
        Some(w) => {
            for l in crate::wrap::line(&line, w, 0, "runwarden: ".len()) {
                eprintln!("{l}");
            }
        }
        None => eprintln!("{line}"),
    }
}
