//! `runwarden rendezvous` (src/rendezvous/) as an operator runs it, facing
//! whoever can reach it: it records only what has a nonce's form and a
//! carrier's name; reads need the token; a request with a body, a long URL
//! or another method is refused unread; a DNS answer is never larger than
//! its query, and names outside its zone get none; raw TCP takes a short
//! line; a flood of nonces keeps only the newest and says so to readers;
//! it will not start without a long enough token.

use crate::common::registries::free_port;
use crate::common::*;
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const TOKEN: &str = "rendezvous-token-0123456789";

struct Server {
    child: Child,
    http: u16,
    dns: u16,
    tcp: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_udp() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(max_nonces: &str) -> Server {
    let (http, dns, tcp) = (free_port(), free_udp(), free_port());
    let child = bin()
        .args(["rendezvous", "--token-env", "RV_TOKEN", "--zone", "rv.test"])
        .args(["--listen", &format!("127.0.0.1:{http}")])
        .args(["--dns", &format!("127.0.0.1:{dns}")])
        .args(["--tcp", &format!("127.0.0.1:{tcp}")])
        .args(["--max-nonces", max_nonces])
        .env("RV_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Ready once both TCP listeners answer (the TCP one is bound last).
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", http)).is_ok()
            && TcpStream::connect(("127.0.0.1", tcp)).is_ok()
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        child,
        http,
        dns,
        tcp,
    }
}

/// One raw HTTP exchange: the status and the body.
fn http(port: u16, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn get(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    http(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: rv\r\n{auth}Connection: close\r\n\r\n"),
    )
}

fn seen(port: u16, nonce: &str) -> usize {
    let (status, body) = get(port, &format!("/v1/seen/{nonce}"), Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["seen"].as_array().unwrap().len()
}

fn nonce(i: u32) -> String {
    format!("{i:032x}")
}

#[test]
fn it_records_nonces_only_and_reads_need_the_token() {
    let s = start("1000");
    let n = nonce(1);
    assert_eq!(get(s.http, &format!("/d/tcp-raw/{n}"), None).0, 204);
    // Not a nonce, not a carrier: refused, nothing reflected.
    let (status, body) = get(s.http, "/d/tcp-raw/<script>", None);
    assert_eq!(status, 400);
    assert!(!body.contains("script"));
    assert_eq!(get(s.http, &format!("/d/smtp/{n}"), None).0, 400);
    // Reads: the token, or nothing.
    assert_eq!(get(s.http, &format!("/v1/seen/{n}"), None).0, 401);
    assert_eq!(
        get(
            s.http,
            &format!("/v1/seen/{n}"),
            Some("rendezvous-token-0123456780")
        )
        .0,
        401
    );
    assert_eq!(seen(s.http, &n), 1);
    assert_eq!(seen(s.http, &nonce(2)), 0);
    // A body, a long URL, another method: refused unread.
    let (status, _) = http(
        s.http,
        &format!(
            "GET /d/tcp-raw/{n} HTTP/1.1\r\nHost: rv\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\nxx"
        ),
    );
    assert_eq!(status, 413);
    assert_eq!(get(s.http, &format!("/{}", "a".repeat(300)), None).0, 414);
    let (status, _) = http(
        s.http,
        &format!("DELETE /d/tcp-raw/{n} HTTP/1.1\r\nHost: rv\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(status, 405);
}

fn dns_query(id: u16, name: &str) -> Vec<u8> {
    runwarden::rendezvous::dns::query(id, name)
}

#[test]
fn dns_answers_are_never_larger_than_queries_and_other_zones_get_none() {
    let s = start("1000");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = nonce(7);
    let mut buf = [0u8; 512];
    for name in [
        format!("{n}.d.rv.test"),
        format!("{n}.q.RV.TEST"),
        "q.rv.test".into(),
    ] {
        let mut q = dns_query(0x4242, &name);
        // An EDNS record asking for a large answer: never honoured.
        q[11] = 1;
        q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        sock.send_to(&q, ("127.0.0.1", s.dns)).unwrap();
        let (len, _) = sock.recv_from(&mut buf).unwrap();
        assert!(len <= q.len(), "{name}: {len} > {}", q.len());
        assert_eq!(&buf[..2], &[0x42, 0x42]);
        // NOERROR, no records: the name "exists", so a resolver that
        // minimises its questions goes on to the full name.
        assert_eq!(buf[3] & 0x0f, 0, "{name}");
        assert_eq!(&buf[6..12], &[0; 6], "{name}");
    }
    // Outside the zone: no answer at all (no open reflector).
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    sock.send_to(&dns_query(9, "example.org"), ("127.0.0.1", s.dns))
        .unwrap();
    assert!(sock.recv_from(&mut buf).is_err());
    // One nonce, two carriers.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(seen(s.http, &n), 2);
    // An answer sent to it is not a query: no reply.
    let mut resp = dns_query(1, &format!("{}.d.rv.test", nonce(8)));
    resp[2] |= 0x80;
    sock.send_to(&resp, ("127.0.0.1", s.dns)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(sock.recv_from(&mut buf).is_err());
    assert_eq!(seen(s.http, &nonce(8)), 0);
}

#[test]
fn raw_tcp_takes_one_short_line_and_a_flood_keeps_only_the_newest() {
    let s = start("100");
    let mut c = TcpStream::connect(("127.0.0.1", s.tcp)).unwrap();
    c.write_all(format!("runwarden tcp-raw {}\n", nonce(5)).as_bytes())
        .unwrap();
    drop(c);
    // A line longer than the server reads: not a delivery.
    let mut c = TcpStream::connect(("127.0.0.1", s.tcp)).unwrap();
    let _ = c.write_all(format!("runwarden tcp-raw {}{}\n", "0".repeat(200), nonce(6)).as_bytes());
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(seen(s.http, &nonce(5)), 1);
    assert_eq!(seen(s.http, &nonce(6)), 0);
    // 1,000 nonces into a rendezvous that keeps 100.
    for i in 1000..2000 {
        assert_eq!(
            get(s.http, &format!("/d/http-plain/{}", nonce(i)), None).0,
            204
        );
    }
    assert_eq!(seen(s.http, &nonce(1000)), 0);
    assert_eq!(seen(s.http, &nonce(1999)), 1);
    assert_eq!(seen(s.http, &nonce(5)), 0);
    // And a reader is told: a miss after the flood proves nothing.
    let (_, body) = get(s.http, &format!("/v1/seen/{}", nonce(5)), Some(TOKEN));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v["evicted_ms"].as_i64().is_some(), "{body}");
}

#[test]
fn it_will_not_start_without_a_long_enough_token() {
    let mut c = bin();
    let out = c
        .args([
            "rendezvous",
            "--listen",
            "127.0.0.1:0",
            "--token-env",
            "RV_TOKEN",
        ])
        .env("RV_TOKEN", "short")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bin()
        .args([
            "rendezvous",
            "--listen",
            "127.0.0.1:0",
            "--token-env",
            "RV_UNSET",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RV_UNSET"));
}

/// 500 connections from 127.0.0.2–127.0.0.254 that trickle their heads a
/// byte every 0.1 s hold no worker: 6 of 6 reads from 127.0.0.1 are
/// answered, each within network-egress's own 10 s deadline
/// (src/rendezvous/intake.rs).
/// A thread that sends each of `slow` one byte of a head every 100 ms,
/// never finishing it, until `stop`.
fn trickle(mut slow: Vec<TcpStream>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let head = b"GET /d/http-plain/";
        let mut i = 0;
        while !stop.load(Ordering::SeqCst) {
            for c in &mut slow {
                let _ = c.write_all(&head[i % head.len()..][..1]);
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
    })
}

#[test]
fn slow_clients_from_many_addresses_cannot_starve_reads() {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let s = start("100");
    let to: SocketAddr = format!("127.0.0.1:{}", s.http).parse().unwrap();
    let mut slow = Vec::new();
    for i in 0..500u32 {
        let from = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + (i % 253) as u8));
        slow.push(runwarden::sys::poll::connect_from(from, to, Duration::from_secs(5)).unwrap());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = trickle(slow, stop.clone());
    std::thread::sleep(Duration::from_millis(500));
    for n in 0..6 {
        let t = std::time::Instant::now();
        assert_eq!(seen(s.http, &nonce(n)), 0);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "read {n} took {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    stop.store(true, Ordering::SeqCst);
    trickle.join().unwrap();
}

/// Run B's own address (a persistent runner: runs A and B share one IP)
/// trickling more than `PER_ADDRESS` heads that never finish: B's
/// complete, authenticated reads are still answered, whether the head is
/// there when the connection is taken in or comes a moment later, and so
/// is run A's delivery from that address; and making room for them turns
/// nothing away that could have been a delivery since run A tried (the
/// slow heads were older than `GRACE`), so a miss still counts
/// (src/rendezvous/intake.rs).
#[test]
fn slow_clients_from_the_readers_own_address_cannot_starve_its_reads() {
    use runwarden::rendezvous::intake::{GRACE, PER_ADDRESS};
    let s = start("100");
    let mut slow = Vec::new();
    for _ in 0..PER_ADDRESS {
        slow.push(TcpStream::connect(("127.0.0.1", s.http)).unwrap());
    }
    // The surplus once `start`'s probes are surely gone, so that the
    // address is at its limit whichever connection went first.
    std::thread::sleep(Duration::from_millis(200));
    for _ in 0..8 {
        slow.push(TcpStream::connect(("127.0.0.1", s.http)).unwrap());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let trickle = trickle(slow, stop.clone());
    // Past the grace, well within the slow heads' deadline (5 s).
    std::thread::sleep(GRACE + Duration::from_millis(300));
    // A read whose head comes in its first packet, and one whose head
    // comes a moment after the connection (so it needs a place to wait).
    let read = |nonce: &str, late: bool| {
        let t = std::time::Instant::now();
        let mut c = TcpStream::connect(("127.0.0.1", s.http)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if late {
            std::thread::sleep(Duration::from_millis(100));
        }
        let head = format!(
            "GET /v1/seen/{nonce} HTTP/1.1\r\nHost: rv\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
        );
        let _ = c.write_all(head.as_bytes());
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        assert!(text.starts_with("HTTP/1.1 200 "), "late {late}: {text:?}");
        // Only a hang fails this (the old intake refused the read at
        // once; a fixed one answers in milliseconds).
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        let body = text.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str::<serde_json::Value>(body).unwrap()
    };
    for late in [false, true] {
        assert_eq!(read(&nonce(1), late)["seen"], serde_json::json!([]));
    }
    // Run A, from the same address.
    let at = runwarden::rendezvous::store::now_ms();
    assert_eq!(
        get(s.http, &format!("/d/http-plain/{}", nonce(1)), None).0,
        204
    );
    for late in [false, true, false, true] {
        assert_eq!(read(&nonce(1), late)["seen"].as_array().unwrap().len(), 1);
        let v = read(&nonce(2), late);
        assert_eq!(v["seen"], serde_json::json!([]));
        // What run B would take a miss on: nothing turned away since run A
        // tried (with room for its margin), only the surplus at the start.
        assert!(
            v["dropped_ms"].as_i64().is_none_or(|d| d + 1000 < at),
            "{v}"
        );
    }
    stop.store(true, Ordering::SeqCst);
    trickle.join().unwrap();
}
