//! Waiting on many sockets at once (poll(2)), and connecting from a chosen
//! local address: std has neither.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::time::Duration;

/// Which of `fds` have something to read (or are closed or broken), after
/// waiting at most `timeout` for one to. An interrupted wait is no
/// readiness.
pub fn readable(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs that
    // lives across the call; poll(2) only writes their `revents`.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(pfds.iter().map(|p| p.revents != 0).collect())
}

/// A TCP connection to `to` from the local address `from` (port chosen by
/// the kernel), within `timeout`: what a test needs to stand for many
/// clients (127.0.0.2, 127.0.0.3, …) on one machine.
pub fn connect_from(from: IpAddr, to: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let domain = if from.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket(2) with constant arguments; the descriptor it
    // returns is owned by the TcpStream below from here on.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nobody else owns.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let (storage, len) = sockaddr(SocketAddr::new(from, 0));
    // SAFETY: `storage` holds a sockaddr of `len` bytes for this family.
    let r = unsafe { libc::bind(stream.as_raw_fd(), (&raw const storage).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let (storage, len) = sockaddr(to);
    // SAFETY: as for bind; a connect that fails leaves the socket to be
    // closed with the stream. (Blocking: on loopback it is at once.)
    let r = unsafe { libc::connect(stream.as_raw_fd(), (&raw const storage).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(stream)
}

fn sockaddr(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than, and aligned for,
            // sockaddr_in.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&raw mut storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}
