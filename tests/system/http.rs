//! The HTTP client (src/http.rs) against a real loopback server: bounded
//! retries, deadlines, and no URL or secret in any error.

use runwarden::http::{Client, Failure, Request};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A server answering the n-th request with `answer(n)` (status, delay).
fn server(answer: fn(usize) -> (u16, u64)) -> (String, Arc<AtomicUsize>) {
    server_with(move |n| {
        let (status, delay) = answer(n);
        (status, delay, None)
    })
}

/// As [`server`], with a `retry-after` header when the answer names one.
fn server_with(
    answer: impl Fn(usize) -> (u16, u64, Option<&'static str>) + Send + 'static,
) -> (String, Arc<AtomicUsize>) {
    let srv = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = srv.server_addr().to_ip().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for req in srv.incoming_requests() {
            let n = c.fetch_add(1, Ordering::SeqCst);
            let (status, delay, after) = answer(n);
            std::thread::sleep(Duration::from_millis(delay));
            let mut resp = tiny_http::Response::from_string("{}").with_status_code(status);
            if let Some(a) = after {
                resp.add_header(
                    tiny_http::Header::from_bytes(&b"retry-after"[..], a.as_bytes()).unwrap(),
                );
            }
            let _ = req.respond(resp);
        }
    });
    (format!("http://127.0.0.1:{port}"), count)
}

fn client(deadline: Duration) -> Client {
    Client::new(
        Duration::from_secs(5),
        deadline,
        vec!["s3cr3t-token".into()],
    )
    .unwrap()
}

#[test]
fn a_busy_server_is_retried_at_most_three_times() {
    let (base, count) = server(|n| (if n < 2 { 503 } else { 200 }, 0));
    let url = format!("{base}/x");
    let r = client(Duration::from_secs(10))
        .send(&Request::new(http::Method::GET, &url))
        .unwrap();
    assert_eq!((r.status, count.load(Ordering::SeqCst)), (200, 3));

    let (base, count) = server(|_| (503, 0));
    let url = format!("{base}/x");
    let err = client(Duration::from_secs(10))
        .send(&Request::new(http::Method::GET, &url))
        .unwrap_err();
    assert_eq!(err, Failure::Broken("HTTP 503".into()));
    assert_eq!(count.load(Ordering::SeqCst), 3);

    // A client error is an answer, not retried.
    let (base, count) = server(|_| (403, 0));
    let url = format!("{base}/x");
    let r = client(Duration::from_secs(10))
        .send(&Request::new(http::Method::GET, &url))
        .unwrap();
    assert_eq!((r.status, count.load(Ordering::SeqCst)), (403, 1));
}

#[test]
fn a_slow_answer_meets_the_deadline_and_is_not_retried() {
    let (base, count) = server(|_| (200, 3000));
    let url = format!("{base}/x");
    let t = Instant::now();
    let err = client(Duration::from_secs(1))
        .send(&Request::new(http::Method::POST, &url))
        .unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    assert!(
        matches!(err, Failure::Broken(ref m) if m.contains("within 1 s")),
        "{err:?}"
    );
    // The request may have been acted on: never sent twice.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn an_unreachable_host_says_so_without_the_url_or_a_secret() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/blob?sig=s3cr3t-signature");
    let err = client(Duration::from_secs(10))
        .send(
            &Request::new(http::Method::PUT, &url)
                .secret_header("authorization", "Bearer s3cr3t-token"),
        )
        .unwrap_err();
    let Failure::Unreachable(text) = &err else {
        panic!("{err:?}")
    };
    assert!(text.to_lowercase().contains("connect"), "{text}");
    assert!(!text.contains("s3cr3t") && !text.contains("sig="), "{text}");
    // The host stays down for this client: the next call fails at once,
    // with the same words, instead of waiting through the retries again.
    let c = client(Duration::from_secs(10));
    let _ = c.send(&Request::new(http::Method::GET, &url));
    let t = Instant::now();
    let again = c
        .send(&Request::new(
            http::Method::GET,
            &format!("http://127.0.0.1:{port}/other"),
        ))
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_millis(100));
    assert_eq!(again, err);
}

#[test]
fn a_connection_closed_without_an_answer_is_broken_and_not_retried() {
    // The request went out: the server may have acted on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let a = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            a.fetch_add(1, Ordering::SeqCst);
            let mut conn = conn.unwrap();
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut conn, &mut buf);
            drop(conn);
        }
    });
    let url = format!("http://127.0.0.1:{port}/x");
    let c = client(Duration::from_secs(10));
    let err = c
        .send(&Request::new(http::Method::POST, &url).bytes(b"{}".to_vec()))
        .unwrap_err();
    assert!(matches!(err, Failure::Broken(_)), "{err:?}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    // The host is not taken for down: the next call connects again.
    let _ = c.send(&Request::new(http::Method::GET, &url));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// A busy server's `retry-after` is what is waited (not the backoff); a
/// wait longer than runwarden gives (60 s) is an error at once, with no
/// second request.
#[test]
fn retry_after_is_honoured_and_a_long_one_is_an_error() {
    // Asked for 1 s (the backoff would be 0.5 s): it waits 1 s.
    let (base, count) = server_with(|n| {
        if n == 0 {
            (429, 0, Some("1"))
        } else {
            (200, 0, None)
        }
    });
    let url = format!("{base}/x");
    let started = Instant::now();
    let r = client(Duration::from_secs(10))
        .send(&Request::new(http::Method::POST, &url))
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(count.load(Ordering::SeqCst), 2);
    assert!(started.elapsed() >= Duration::from_millis(950));
    // Asked for 120 s: an error now.
    let (base, count) = server_with(|_| (429, 0, Some("120")));
    let url = format!("{base}/x");
    let e = client(Duration::from_secs(10))
        .send(&Request::new(http::Method::POST, &url))
        .unwrap_err();
    assert!(
        matches!(&e, Failure::Broken(m) if m.contains("wait 120 s")),
        "{e}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);
}
