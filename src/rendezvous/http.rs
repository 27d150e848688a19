//! The rendezvous's HTTP: one request per connection, its head only (at
//! most [`MAX_HEAD`] bytes, read by [`super::intake`] within its deadline
//! from the accept), never a body, always `Connection: close`. Answers are fixed JSON: nothing a
//! client sent is written back.

use super::intake::Request;
use super::store::{Store, now_ms};
use super::{CONN_DEADLINE, carrier_of, parse_nonce};
use std::io::Write;
use std::sync::Mutex;

/// The longest request head taken (a delivery's is under 200 bytes).
pub(super) const MAX_HEAD: usize = 2048;
/// The longest request target taken.
const MAX_URL: usize = 200;

/// Since when this instance remembers (Unix ms), for how long (s), and
/// what it serves besides HTTP (raw TCP; DNS, for which zone): a reader
/// learns from it whether a carrier could have arrived at all.
#[derive(Clone)]
pub(super) struct Memory {
    pub since_ms: i64,
    pub max_age: u64,
    pub tcp: bool,
    pub zone: Option<String>,
    /// The port its HTTP listener is bound to.
    pub http_port: u16,
}

/// Whether `given` is the token, in time that does not depend on where
/// they differ (only on the token's length).
fn token_ok(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in b.iter().enumerate() {
        diff |= x ^ a.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

fn reply(conn: &mut impl Write, status: u16, body: &str) {
    let reason = match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        _ => "Request Header Fields Too Large",
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.flush();
}

/// Answers one request whose head [`super::intake`] read (the answer is
/// written within [`CONN_DEADLINE`]).
pub(super) fn serve(req: Request, store: &Mutex<Store>, token: &str, memory: &Memory) {
    let mut conn = crate::timed::Timed::new(req.conn, CONN_DEADLINE);
    let Some(head) = req.head else {
        return reply(&mut conn, 431, "{}");
    };
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let header = |name: &str| {
        text.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    // No route takes a body: one announced is refused, and never read.
    let has_body =
        header("content-length").is_some_and(|v| v != "0") || header("transfer-encoding").is_some();
    if has_body {
        return reply(&mut conn, 413, "{}");
    }
    if target.len() > MAX_URL {
        return reply(&mut conn, 414, "{}");
    }
    if method != "GET" {
        return reply(&mut conn, 405, "{}");
    }
    let path = target.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        [""] => reply(&mut conn, 200, "{\"service\":\"runwarden rendezvous\"}"),
        ["d", carrier, nonce] => match (carrier_of(carrier), parse_nonce(nonce)) {
            (Some(c), Some(n)) => {
                crate::loopback::lock(store).record(n, c);
                reply(&mut conn, 204, "")
            }
            _ => reply(&mut conn, 400, "{}"),
        },
        ["v1", "seen", nonce] => {
            let auth = header("authorization").unwrap_or_default();
            if !token_ok(auth.strip_prefix("Bearer ").unwrap_or(""), token) {
                return reply(&mut conn, 401, "{}");
            }
            let Some(n) = parse_nonce(nonce) else {
                return reply(&mut conn, 400, "{}");
            };
            let mut st = crate::loopback::lock(store);
            let seen: Vec<serde_json::Value> = st
                .seen(&n)
                .iter()
                .map(|a| serde_json::json!({"carrier": a.carrier, "at": a.at}))
                .collect();
            let body = serde_json::json!({
                "seen": seen,
                "now_ms": now_ms(),
                "since_ms": memory.since_ms,
                "max_age": memory.max_age,
                "evicted_ms": st.evicted_ms,
                "dropped_ms": st.dropped_ms,
                "serves": { "http_port": memory.http_port, "tcp": memory.tcp, "dns_zone": memory.zone },
            });
            drop(st);
            reply(&mut conn, 200, &body.to_string())
        }
        _ => reply(&mut conn, 404, "{}"),
    }
}
