//! UDP sockets that count what the kernel drops for want of buffer
//! (`SO_RXQ_OVFL`): the rendezvous's DNS listener.

use super::check;
use std::io;
use std::os::fd::AsRawFd;

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
