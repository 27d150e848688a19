//! A TCP stream with one deadline for everything done on it: each read or
//! write may take only what is left of it, so a peer that trickles a byte
//! at a time cannot stretch an exchange past its bound (a per-call timeout
//! alone would restart with every byte).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub struct Timed {
    pub stream: TcpStream,
    until: Instant,
    /// The whole bound, for messages.
    pub limit: Duration,
}

impl Timed {
    pub fn new(stream: TcpStream, limit: Duration) -> Timed {
        Timed {
            stream,
            until: Instant::now() + limit,
            limit,
        }
    }

    fn left(&self) -> io::Result<Duration> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"))
        } else {
            Ok(left)
        }
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.stream.set_write_timeout(Some(left))?;
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// Reads an HTTP head (through the blank line) of at most `max` bytes;
/// `None` when it is longer or the stream ends first. Reads in chunks, at
/// most `max + 1` bytes in all.
pub fn read_head(s: &mut impl Read, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 512];
    while head.len() <= max {
        // Never more than one byte past `max`: enough to know it is over.
        let want = (max + 1 - head.len()).min(buf.len());
        let n = s.read(&mut buf[..want])?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            head.truncate(end + 4);
            return Ok(Some(head));
        }
    }
    Ok(None)
}
