//! `runwarden rendezvous`: the server outside the runner's network that
//! the `network-egress` surface delivers nonces to (run A) and asks, with
//! a token, which nonces arrived (run B).
//!
//! It is meant to face the internet, so everything it takes is bounded,
//! and it serves HTTP itself ([`http`]) rather than through a library that
//! reads whatever a client sends:
//! - it records only what has the nonce's form (32 hex digits) and one of
//!   the surface's carrier names, and answers nothing that reflects input
//!   beyond that form;
//! - memory is constant: at most `max_nonces` nonces (10,000 by default),
//!   each at most [`store::MAX_ARRIVALS`] arrivals, none older than
//!   `max_age` (an hour); an HTTP connection's head is read by one thread
//!   that waits on all of them at once, within a deadline from the accept
//!   and limits per client address ([`intake`]), so slow clients hold no
//!   worker and keep no complete request out (past a limit the oldest
//!   unfinished head makes room); reads are answered ahead of
//!   deliveries; raw TCP connections
//!   are handled by a fixed number of workers, each with one deadline for
//!   the whole exchange, behind a short queue (more are turned away at
//!   once);
//! - an HTTP request is its head only (at most 2 KiB; a body is never
//!   read); raw TCP reads one line of at most 128 bytes; a DNS answer is
//!   never larger than its query, names outside the zone get no answer,
//!   and answers are rate-limited (no amplification, no open reflector);
//! - reads need the token (`Authorization: Bearer`), compared in constant
//!   time; deliveries need nothing (the runner has no secret to give), so
//!   a read also says what would make a miss untrustworthy: since when the
//!   rendezvous remembers, for how long, and when it last dropped a nonce
//!   for space or turned a delivery away.
//!
//! Routes: `GET /d/<carrier>/<nonce>` (a delivery, 204), `GET
//! /v1/seen/<nonce>` (with the token: `{"seen": [{"carrier", "at"}],
//! "now_ms", "since_ms", "max_age", "evicted_ms", "dropped_ms", "serves":
//! {"http_port", "tcp", "dns_zone"}}`: what could have arrived at all), `GET /`
//! (200, for health checks). Raw TCP: a line `runwarden <carrier>
//! <nonce>`. DNS (UDP): a query for `<nonce>.q.<zone>` (through a
//! resolver: `dns-query`) or `<nonce>.d.<zone>` (straight here:
//! `dns-direct`), answered NOERROR with no records.

pub mod dns;
mod http;
pub mod intake;
pub mod store;

use crate::fault::Fault;
use std::io::Read;
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;

/// The carriers a rendezvous records: the `network-egress` surface's.
pub const CARRIERS: &[&str] = &[
    "https-direct",
    "https-proxy",
    "http-plain",
    "dns-query",
    "dns-direct",
    "tcp-raw",
];

/// Workers for raw TCP connections.
const WORKERS: usize = 8;
/// Connections waiting for a worker; more are turned away at once.
const QUEUE: usize = 64;
/// How long one connection may take, all of it.
const CONN_DEADLINE: Duration = Duration::from_secs(5);
/// DNS answers per second, at most (deliveries are still recorded).
const DNS_ANSWERS_PER_SECOND: u32 = 1000;

/// Where to listen, and for whom.
#[derive(Debug, Clone)]
pub struct Options {
    /// HTTP (deliveries and reads): `ADDR:PORT`.
    pub http: String,
    /// DNS over UDP, when given.
    pub dns: Option<String>,
    /// Raw TCP, when given.
    pub tcp: Option<String>,
    /// The zone DNS deliveries come under (`rv.example.org`).
    pub zone: Option<String>,
    /// The read token.
    pub token: String,
    pub max_nonces: usize,
    pub max_age: Duration,
}

/// A running rendezvous; stops when dropped.
pub struct Rendezvous {
    pub http_port: u16,
    pub dns_port: Option<u16>,
    pub tcp_port: Option<u16>,
    pub store: Arc<Mutex<Store>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The TCP listeners' addresses, to wake their accept loops.
    wake: Vec<std::net::SocketAddr>,
}

impl Rendezvous {
    /// Binds every socket and starts serving. `Invalid` for options it
    /// cannot serve by (a short token, DNS without a zone), `Broken` when
    /// a socket cannot be set up.
    pub fn start(opts: &Options) -> Result<Rendezvous, Fault> {
        if opts.token.len() < 16 {
            return Err(Fault::invalid(
                "the read token must be at least 16 characters",
            ));
        }
        let io = |e: std::io::Error| Fault::broken(e.to_string());
        // Every pending connection is a descriptor: the soft limit (often
        // 1,024) would turn connections away before the intake's own
        // limits could act. (The limit is given back when the process
        // ends; the rendezvous runs on its own.)
        let _ = crate::sys::raise_nofile();
        let store = Arc::new(Mutex::new(Store::new(opts.max_nonces, opts.max_age)));
        let stop = Arc::new(AtomicBool::new(false));
        // Every socket first: a bind that fails leaves no thread behind.
        let http = TcpListener::bind(&opts.http)
            .map_err(|e| Fault::broken(format!("cannot listen on {} (HTTP): {e}", opts.http)))?;
        let http_addr = http.local_addr().map_err(io)?;
        let dns = match &opts.dns {
            Some(addr) => {
                let zone = opts
                    .zone
                    .clone()
                    .ok_or_else(|| Fault::invalid("--dns needs --zone: the zone it answers for"))?;
                let sock = UdpSocket::bind(addr)
                    .map_err(|e| Fault::broken(format!("cannot listen on {addr} (DNS): {e}")))?;
                sock.set_read_timeout(Some(Duration::from_millis(200)))
                    .map_err(io)?;
                // Deliveries the socket drops under a flood are counted,
                // so that a reader knows a miss after one proves nothing.
                crate::sys::count_drops(&sock)
                    .map_err(|e| Fault::broken(format!("cannot count dropped datagrams: {e}")))?;
                Some((sock, zone))
            }
            None => None,
        };
        let dns_port = match &dns {
            Some((sock, _)) => Some(sock.local_addr().map_err(io)?.port()),
            None => None,
        };
        let tcp = match &opts.tcp {
            Some(addr) => Some(
                TcpListener::bind(addr)
                    .map_err(|e| Fault::broken(format!("cannot listen on {addr} (TCP): {e}")))?,
            ),
            None => None,
        };
        let tcp_addr = match &tcp {
            Some(l) => Some(l.local_addr().map_err(io)?),
            None => None,
        };
        // What a read says of this instance: since when it remembers, and
        // for how long, so that run B can tell a restart or an expiry from
        // a nonce that never came.
        let memory = http::Memory {
            since_ms: store::now_ms(),
            max_age: opts.max_age.as_secs(),
            tcp: tcp.is_some(),
            zone: dns
                .as_ref()
                .map(|(_, z)| z.trim_end_matches('.').to_ascii_lowercase()),
            http_port: http_addr.port(),
        };
        let mut threads = Vec::new();
        let (st, token) = (store.clone(), Arc::new(opts.token.clone()));
        threads.extend(intake::serve(
            http,
            &store,
            &stop,
            http::MAX_HEAD,
            move |r| http::serve(r, &st, &token, &memory),
        ));
        if let Some((sock, zone)) = dns {
            let (st, stop) = (store.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                serve_dns(sock, &zone, &st, &stop)
            }));
        }
        if let Some(listener) = tcp {
            let st = store.clone();
            threads.extend(pool(listener, &store, &stop, move |c| serve_tcp(c, &st)));
        }
        let wake = [Some(http_addr), tcp_addr].into_iter().flatten().collect();
        Ok(Rendezvous {
            http_port: http_addr.port(),
            dns_port,
            tcp_port: tcp_addr.map(|a| a.port()),
            store,
            stop,
            threads,
            wake,
        })
    }

    /// Serves until the process is asked to stop (SIGINT, SIGTERM).
    pub fn serve_until_stopped(&self) {
        while crate::signals::received().is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake each accept loop so it sees the stop; workers end when the
        // queue closes, each within its connection's deadline.
        for a in &self.wake {
            let _ = TcpStream::connect_timeout(a, Duration::from_millis(200));
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Accepts on `listener` and hands each connection to one of [`WORKERS`]
/// workers through a queue of [`QUEUE`]; a connection that finds the
/// queue full is closed at once, and the store notes it.
fn pool(
    listener: TcpListener,
    store: &Arc<Mutex<Store>>,
    stop: &Arc<AtomicBool>,
    handle: impl Fn(TcpStream) + Send + Sync + 'static,
) -> Vec<std::thread::JoinHandle<()>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<TcpStream>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    let handle = Arc::new(handle);
    let mut threads = Vec::new();
    for _ in 0..WORKERS {
        let (rx, handle) = (rx.clone(), handle.clone());
        threads.push(std::thread::spawn(move || {
            loop {
                let next = crate::loopback::lock(&rx).recv();
                match next {
                    Ok(conn) => handle(conn),
                    Err(_) => return,
                }
            }
        }));
    }
    let (stop, store) = (stop.clone(), store.clone());
    threads.push(std::thread::spawn(move || {
        for conn in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            match conn {
                Ok(c) => {
                    if tx.try_send(c).is_err() {
                        crate::loopback::lock(&store).dropped();
                    }
                }
                // Out of descriptors: wait rather than spin.
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }));
    threads
}

/// The nonce of a delivery: exactly 32 lowercase hex digits.
pub fn parse_nonce(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// One of [`CARRIERS`], as the static name (never the input's bytes).
pub fn carrier_of(s: &str) -> Option<&'static str> {
    CARRIERS.iter().copied().find(|c| *c == s)
}

/// One raw TCP delivery: `runwarden <carrier> <nonce>\n`, at most 128
/// bytes within [`CONN_DEADLINE`] all told; nothing is written back.
fn serve_tcp(conn: TcpStream, store: &Mutex<Store>) {
    let mut conn = crate::timed::Timed::new(conn, CONN_DEADLINE);
    let mut buf = [0u8; 128];
    let mut n = 0;
    while n < buf.len() && !buf[..n].contains(&b'\n') {
        match conn.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let text = String::from_utf8_lossy(&buf[..n]);
    let mut words = text.split_whitespace();
    if let (Some("runwarden"), Some(c), Some(nonce)) = (words.next(), words.next(), words.next())
        && let (Some(c), Some(nonce)) = (carrier_of(c), parse_nonce(nonce))
    {
        crate::loopback::lock(store).record(nonce, c);
    }
}

fn serve_dns(sock: UdpSocket, zone: &str, store: &Mutex<Store>, stop: &AtomicBool) {
    let mut buf = [0u8; 512];
    let (mut second, mut answered) = (std::time::Instant::now(), 0u32);
    let mut dropped = 0u32;
    while !stop.load(Ordering::SeqCst) {
        let Ok((n, from, drops)) = crate::sys::recv_counting(&sock, &mut buf) else {
            continue;
        };
        if drops != dropped {
            dropped = drops;
            crate::loopback::lock(store).dropped();
        }
        let Some(q) = dns::parse_query(&buf[..n]) else {
            continue;
        };
        // Outside the zone: no answer at all (no open reflector).
        if !dns::in_zone(&q.name, zone) {
            continue;
        }
        if let Some((nonce, carrier)) = dns::delivery(&q.name, zone) {
            crate::loopback::lock(store).record(nonce, carrier);
        }
        if second.elapsed() >= Duration::from_secs(1) {
            (second, answered) = (std::time::Instant::now(), 0);
        }
        if answered < DNS_ANSWERS_PER_SECOND {
            answered += 1;
            let _ = sock.send_to(&dns::answer(&buf[..n], &q, dns::NOERROR), from);
        }
    }
}
