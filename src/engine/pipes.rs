//! A run's stdout (events, one JSON object a line) and stderr (its own
//! words, copied to ours redacted), read on the orchestrator's thread as
//! they fill: poll(2) on both, no reader threads.

use crate::sys;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Bytes read per pipe per wakeup.
const CHUNK: usize = 64 * 1024;

/// Reads at most this many chunks of stderr once stdout has ended.
const TAIL_READS: usize = 64;

pub(super) struct Pipes {
    out: Option<std::process::ChildStdout>,
    err: Option<std::process::ChildStderr>,
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    /// What each read lands in (kept: a wakeup allocates nothing).
    chunk: Vec<u8>,
}

impl Pipes {
    pub(super) fn new(
        out: Option<std::process::ChildStdout>,
        err: Option<std::process::ChildStderr>,
    ) -> Pipes {
        Pipes {
            out,
            err,
            out_buf: Vec::new(),
            err_buf: Vec::new(),
            chunk: vec![0u8; CHUNK],
        }
    }

    /// Waits up to `timeout` for either pipe, reads what is there, hands
    /// every complete stdout line to `line` and copies complete stderr
    /// lines out. False once stdout has ended (the run closed it: it
    /// exited, or is about to).
    pub(super) fn wait(&mut self, timeout: Duration, line: &mut dyn FnMut(&str)) -> bool {
        self.read_ready(timeout, line);
        if self.out.is_none() && self.err.is_some() {
            self.finish_err();
        }
        self.out.is_some()
    }

    /// Reads what both pipes hold right now, chunk after chunk, until
    /// nothing more is there (at most 64 chunks: a run that keeps writing
    /// is not read forever).
    pub(super) fn take_ready(&mut self, line: &mut dyn FnMut(&str)) {
        for _ in 0..64 {
            if !self.read_ready(Duration::ZERO, line) {
                break;
            }
        }
    }

    /// One wait and read; whether anything was read.
    fn read_ready(&mut self, timeout: Duration, line: &mut dyn FnMut(&str)) -> bool {
        if self.out.is_none() {
            return false;
        }
        let fds = [
            self.out.as_ref().map(|p| p.as_raw_fd()),
            self.err.as_ref().map(|p| p.as_raw_fd()),
        ];
        let ready = match sys::poll_readable(&fds, timeout) {
            Ok(r) => r,
            // Not a signal (those come back as "nothing ready"): do not
            // spin on it until the deadline.
            Err(_) => {
                std::thread::sleep(timeout.min(Duration::from_millis(10)));
                return false;
            }
        };
        let chunk = &mut self.chunk;
        let mut any = false;
        if ready[0]
            && let Some(out) = self.out.as_mut()
        {
            any = true;
            match out.read(chunk) {
                Ok(n) if n > 0 => self.out_buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => self.out = None,
            }
            // Whole lines only; a last line without its newline is not an
            // event (the run died writing it).
            let mut start = 0;
            while let Some(i) = memchr::memchr(b'\n', &self.out_buf[start..]) {
                let l = &self.out_buf[start..start + i];
                line(String::from_utf8_lossy(l).trim_end_matches('\r'));
                start += i + 1;
            }
            self.out_buf.drain(..start);
        }
        if ready[1]
            && let Some(err) = self.err.as_mut()
        {
            any = true;
            // Bytes, whatever they hold: a line that is not UTF-8 must not
            // stop the reading, or the run would block on a full pipe.
            match err.read(chunk) {
                Ok(n) if n > 0 => self.err_buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => {
                    self.err = None;
                    self.err_buf.push(b'\n');
                }
            }
            self.copy_err_lines();
        }
        any
    }

    /// Copies the complete lines of stderr out, redacted.
    fn copy_err_lines(&mut self) {
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &self.err_buf[start..]) {
            let l = &self.err_buf[start..=start + i];
            if l.len() > 1 {
                let _ = std::io::stderr().write_all(&crate::redact::bytes(l));
            }
            start += i + 1;
        }
        self.err_buf.drain(..start);
    }

    /// The events have ended: the run exited, or closed stdout to exit.
    /// What it said on stderr by now is taken; a process it left that
    /// still holds stderr (a credential cache daemon) is not waited for.
    fn finish_err(&mut self) {
        for _ in 0..TAIL_READS {
            let fd = self.err.as_ref().map(|p| p.as_raw_fd());
            if !sys::poll_readable(&[fd], Duration::ZERO).is_ok_and(|r| r[0]) {
                break;
            }
            let Some(err) = self.err.as_mut() else { break };
            match err.read(&mut self.chunk) {
                Ok(n) if n > 0 => self.err_buf.extend_from_slice(&self.chunk[..n]),
                _ => break,
            }
        }
        self.err_buf.push(b'\n');
        self.copy_err_lines();
        self.err_buf.clear();
        self.err = None;
    }
}
