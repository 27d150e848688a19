//! A CONNECT proxy on loopback: what the `network-egress` control goes
//! through for its `https-proxy` carrier (the real instance goes through
//! the environment's proxy). It tunnels to any address asked, for as long
//! as the control lives; every step has a timeout.

use crate::fault::Fault;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(5);

pub struct Proxy {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// `Broken` when it cannot listen.
    pub fn start() -> Result<Proxy, Fault> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Fault::broken(format!("cannot listen on loopback: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Fault::broken(e.to_string()))?
            .port();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(c) = conn {
                    std::thread::spawn(move || tunnel(c));
                }
            }
        });
        Ok(Proxy {
            port,
            stop,
            thread: Some(thread),
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&([127, 0, 0, 1], self.port).into(), TIMEOUT);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tunnel(mut client: TcpStream) {
    let _ = client.set_read_timeout(Some(TIMEOUT));
    let _ = client.set_write_timeout(Some(TIMEOUT));
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while head.len() < 4096 && !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut first = text.lines().next().unwrap_or("").split_whitespace();
    let (Some("CONNECT"), Some(target)) = (first.next(), first.next()) else {
        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let upstream = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .and_then(|a| TcpStream::connect_timeout(&a, TIMEOUT).ok());
    let Some(upstream) = upstream else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let _ = upstream.set_read_timeout(Some(TIMEOUT));
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let (Ok(mut c2), Ok(mut u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let mut upstream = upstream;
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut upstream);
        let _ = upstream.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut u2, &mut client);
    let _ = client.shutdown(std::net::Shutdown::Write);
    let _ = up.join();
}
