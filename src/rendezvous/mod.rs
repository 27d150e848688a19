//! `runwarden rendezvous`: the server outside the runner's network that
//! the `network-egress` surface delivers nonces to (run A) and asks, with
//! a token, which nonces arrived (run B).
//!
//! It is meant to face the internet, so everything it takes is bounded:
//! - it records only what has the nonce's form (32 hex digits) and one of
//!   the surface's carrier names, and answers nothing that reflects input
//!   beyond that form;
//! - memory is constant: at most `max_nonces` nonces (10,000 by default),
//!   each at most [`store::MAX_ARRIVALS`] arrivals, none older than
//!   `max_age` (an hour);
//! - HTTP requests carry no body (one that says it has one is refused
//!   unread) and a short URL; raw TCP reads at most 128 bytes for at most
//!   5 seconds, on a fixed number of workers with a short queue (more
//!   connections are closed at once); a DNS answer is never larger than
//!   its query (no amplification);
//! - reads need the token (`Authorization: Bearer`), compared in constant
//!   time; deliveries need nothing (the runner has no secret to give).
//!
//! Routes: `GET /d/<carrier>/<nonce>` (a delivery, 204), `GET
//! /v1/seen/<nonce>` (with the token: `{"seen": [{"carrier", "at"}],
//! "since": <Unix seconds it started>, "max_age": <seconds kept>}`),
//! `GET /` (200, for health checks). Raw TCP: a line
//! `runwarden <carrier> <nonce>`. DNS (UDP): a query for
//! `<nonce>.q.<zone>` (through a resolver: `dns-query`) or
//! `<nonce>.d.<zone>` (straight here: `dns-direct`), answered NXDOMAIN.

pub mod dns;
pub mod store;

use std::io::{Read, Write};
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

/// The longest URL taken (a delivery is about 60 characters).
const MAX_URL: usize = 200;
/// Workers for HTTP requests and for raw TCP connections each.
const WORKERS: usize = 4;
/// Raw TCP connections waiting for a worker; more are closed at once.
const TCP_QUEUE: usize = 64;
/// How long a raw TCP connection may take to send its line.
const TCP_TIMEOUT: Duration = Duration::from_secs(5);

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
    http: Arc<tiny_http::Server>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    dns_addr: Option<std::net::SocketAddr>,
    tcp_addr: Option<std::net::SocketAddr>,
}

fn port_of(addr: &std::net::SocketAddr) -> u16 {
    addr.port()
}

impl Rendezvous {
    pub fn start(opts: &Options) -> Result<Rendezvous, String> {
        if opts.token.len() < 16 {
            return Err("the read token must be at least 16 characters".into());
        }
        let store = Arc::new(Mutex::new(Store::new(opts.max_nonces, opts.max_age)));
        let stop = Arc::new(AtomicBool::new(false));
        let http = Arc::new(
            tiny_http::Server::http(&opts.http)
                .map_err(|e| format!("cannot listen on {} (HTTP): {e}", opts.http))?,
        );
        let http_port = http
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .ok_or("the HTTP listener has no port")?;
        let mut threads = Vec::new();
        let token = Arc::new(opts.token.clone());
        // What a read says of this instance: since when it remembers, and
        // for how long, so that run B knows a restart or an expiry from a
        // nonce that never came.
        let since = crate::sys::now_coarse().0;
        let memory = Arc::new((since, opts.max_age.as_secs()));
        for _ in 0..WORKERS {
            let (srv, st, tok, mem) = (http.clone(), store.clone(), token.clone(), memory.clone());
            threads.push(std::thread::spawn(move || {
                for req in srv.incoming_requests() {
                    serve_http(req, &st, &tok, *mem);
                }
            }));
        }
        let mut dns_addr = None;
        if let Some(addr) = &opts.dns {
            let zone = opts
                .zone
                .clone()
                .ok_or("--dns needs --zone: the zone it answers for")?;
            let sock =
                UdpSocket::bind(addr).map_err(|e| format!("cannot listen on {addr} (DNS): {e}"))?;
            sock.set_read_timeout(Some(Duration::from_millis(200)))
                .map_err(|e| e.to_string())?;
            dns_addr = Some(sock.local_addr().map_err(|e| e.to_string())?);
            let (st, stop) = (store.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                serve_dns(sock, &zone, &st, &stop)
            }));
        }
        let mut tcp_addr = None;
        if let Some(addr) = &opts.tcp {
            let listener = TcpListener::bind(addr)
                .map_err(|e| format!("cannot listen on {addr} (TCP): {e}"))?;
            tcp_addr = Some(listener.local_addr().map_err(|e| e.to_string())?);
            let (tx, rx) = std::sync::mpsc::sync_channel::<TcpStream>(TCP_QUEUE);
            let rx = Arc::new(Mutex::new(rx));
            for _ in 0..WORKERS {
                let (rx, st) = (rx.clone(), store.clone());
                threads.push(std::thread::spawn(move || {
                    loop {
                        let next = crate::loopback::lock(&rx).recv();
                        match next {
                            Ok(conn) => serve_tcp(conn, &st),
                            Err(_) => return,
                        }
                    }
                }));
            }
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    // A full queue: closed at once (dropped), never waited on.
                    if let Ok(c) = conn {
                        let _ = tx.try_send(c);
                    }
                }
            }));
        }
        Ok(Rendezvous {
            http_port,
            dns_port: dns_addr.as_ref().map(port_of),
            tcp_port: tcp_addr.as_ref().map(port_of),
            store,
            http,
            stop,
            threads,
            dns_addr,
            tcp_addr,
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
        for _ in 0..WORKERS {
            self.http.unblock();
        }
        // Wake the accept loop so it sees the stop.
        if let Some(a) = self.tcp_addr {
            let _ = TcpStream::connect_timeout(&a, Duration::from_millis(200));
        }
        let _ = self.dns_addr;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
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

/// Whether `given` is the token, in time that does not depend on where
/// they differ.
fn token_ok(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let mut diff = (a.len() != b.len()) as u8;
    for (i, x) in b.iter().enumerate() {
        diff |= x ^ a.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

fn reply(req: tiny_http::Request, status: u16, body: &str) {
    let resp = tiny_http::Response::from_string(body)
        .with_status_code(status)
        .with_header(
            tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
                .expect("a valid header"),
        );
    let _ = req.respond(resp);
}

fn serve_http(req: tiny_http::Request, store: &Mutex<Store>, token: &str, memory: (i64, u64)) {
    // No route takes a body: one announced is refused unread.
    let has_body = req.body_length().is_some_and(|n| n > 0)
        || crate::loopback::header(&req, "transfer-encoding").is_some();
    if has_body {
        return reply(req, 413, "{}");
    }
    if req.url().len() > MAX_URL {
        return reply(req, 414, "{}");
    }
    if *req.method() != tiny_http::Method::Get {
        return reply(req, 405, "{}");
    }
    let url = req.url().split('?').next().unwrap_or("").to_string();
    let parts: Vec<&str> = url.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        [""] => reply(req, 200, "{\"service\":\"runwarden rendezvous\"}"),
        ["d", carrier, nonce] => match (carrier_of(carrier), parse_nonce(nonce)) {
            (Some(c), Some(n)) => {
                crate::loopback::lock(store).record(n, c);
                reply(req, 204, "")
            }
            _ => reply(req, 400, "{}"),
        },
        ["v1", "seen", nonce] => {
            let auth = crate::loopback::header(&req, "authorization").unwrap_or_default();
            if !token_ok(auth.strip_prefix("Bearer ").unwrap_or(""), token) {
                return reply(req, 401, "{}");
            }
            let Some(n) = parse_nonce(nonce) else {
                return reply(req, 400, "{}");
            };
            let seen: Vec<serde_json::Value> = crate::loopback::lock(store)
                .seen(&n)
                .iter()
                .map(|a| serde_json::json!({"carrier": a.carrier, "at": a.at}))
                .collect();
            let (since, max_age) = memory;
            let body = serde_json::json!({ "seen": seen, "since": since, "max_age": max_age });
            reply(req, 200, &body.to_string())
        }
        _ => reply(req, 404, "{}"),
    }
}

/// One raw TCP delivery: `runwarden <carrier> <nonce>\n`, read for at most
/// [`TCP_TIMEOUT`] and 128 bytes; nothing is written back.
fn serve_tcp(mut conn: TcpStream, store: &Mutex<Store>) {
    let _ = conn.set_read_timeout(Some(TCP_TIMEOUT));
    let mut buf = [0u8; 128];
    let mut n = 0;
    while n < buf.len() {
        match conn.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if buf[..n].contains(&b'\n') {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&buf[..n]);
    let mut words = text.split_whitespace();
    if let (Some("runwarden"), Some(c), Some(nonce)) = (words.next(), words.next(), words.next())
        && let (Some(c), Some(nonce)) = (carrier_of(c), parse_nonce(nonce))
    {
        crate::loopback::lock(store).record(nonce, c);
    }
    let _ = conn.flush();
}

fn serve_dns(sock: UdpSocket, zone: &str, store: &Mutex<Store>, stop: &AtomicBool) {
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::SeqCst) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some(q) = dns::parse_query(&buf[..n]) else {
            continue;
        };
        let rcode = match dns::delivery(&q.name, zone) {
            Some((nonce, carrier)) => {
                crate::loopback::lock(store).record(nonce, carrier);
                dns::NXDOMAIN
            }
            None if dns::in_zone(&q.name, zone) => dns::NXDOMAIN,
            None => dns::REFUSED,
        };
        let _ = sock.send_to(&dns::answer(&buf[..n], &q, rcode), from);
    }
}
