//! Loopback services that speak a surface's protocol: the known-open
//! control instances of the network surfaces, and the servers their tests
//! run against where no real one exists here.
//!
//! Each listens on a fresh `127.0.0.1` port, serves on one thread until it
//! is dropped, and accepts only credentials it minted with fresh random
//! secrets, so another local process cannot write into a probe's control.
//! [`actions_cache`] is GitHub's cache service (v2) and REST cache API,
//! [`build_cache`] a remote build cache (Bazel, Gradle, Nx, Turborepo),
//! [`dav`] a WebDAV cache, [`docker`] a Docker daemon (on a unix socket),
//! [`github`] GitHub's REST objects and artifact service, [`npm`] an npm
//! registry, [`oci`] an OCI registry, [`pypi`] a PyPI index
//! with an upload endpoint, [`proxy`] a CONNECT proxy, [`s3`] an S3
//! bucket. [`knobs`] are the
//! faults of their read routes the conformance suite turns on.

pub mod actions_cache;
pub mod build_cache;
pub mod dav;
pub mod docker;
pub mod github;
pub mod knobs;
pub mod npm;
pub mod oci;
pub mod proxy;
pub mod pypi;
pub mod s3;

use crate::fault::Fault;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A listening loopback port and the thread serving it.
pub struct Listener {
    pub port: u16,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    /// Listens on a fresh loopback port and hands every request to `serve`
    /// (one at a time: these services hold a handful of entries).
    /// `Broken` when it cannot listen.
    pub fn start(
        serve: impl Fn(tiny_http::Request, u16) + Send + 'static,
    ) -> Result<Listener, Fault> {
        let server = tiny_http::Server::http("127.0.0.1:0")
            .map_err(|e| Fault::broken(format!("cannot listen on loopback: {e}")))?;
        if server.server_addr().to_ip().is_none() {
            return Err(Fault::broken("the loopback listener has no port"));
        }
        Ok(Listener::on(server, serve))
    }

    /// Serves `server` (listening already: on loopback, or on a unix
    /// socket, whose port is 0) with `serve`.
    pub fn on(
        server: tiny_http::Server,
        serve: impl Fn(tiny_http::Request, u16) + Send + 'static,
    ) -> Listener {
        let server = Arc::new(server);
        let port = server.server_addr().to_ip().map_or(0, |a| a.port());
        let srv = server.clone();
        let thread = std::thread::spawn(move || {
            for req in srv.incoming_requests() {
                serve(req, port);
            }
        });
        Listener {
            port,
            server,
            thread: Some(thread),
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A loopback service: its state, and the listener that serves it until
/// dropped. Each service is a type alias of this with its own state and
/// its own `start`.
pub struct Service<S> {
    pub port: u16,
    pub state: Arc<Mutex<S>>,
    _listener: Listener,
}

impl<S: Send + 'static> Service<S> {
    /// Serves `state` with `handler` on a fresh loopback port (`Broken`
    /// when it cannot listen).
    pub fn serve(
        state: S,
        handler: fn(tiny_http::Request, &Mutex<S>, u16),
    ) -> Result<Service<S>, Fault> {
        let state = Arc::new(Mutex::new(state));
        let st = state.clone();
        let listener = Listener::start(move |req, port| handler(req, &st, port))?;
        Ok(Service {
            port: listener.port,
            state,
            _listener: listener,
        })
    }

    /// Serves `state` with `handler` on `server`, which listens already
    /// (a unix socket).
    pub fn serve_on(
        server: tiny_http::Server,
        state: S,
        handler: fn(tiny_http::Request, &Mutex<S>, u16),
    ) -> Result<Service<S>, Fault> {
        let state = Arc::new(Mutex::new(state));
        let st = state.clone();
        let listener = Listener::on(server, move |req, port| handler(req, &st, port));
        Ok(Service {
            port: listener.port,
            state,
            _listener: listener,
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, S> {
        lock(&self.state)
    }
}

pub use knobs::{Knob, Knobs};

impl<S: Knobs + Send + 'static> Service<S> {
    /// What turns this service's faults on and off, apart from the service
    /// itself (for the conformance suite, through a control).
    pub fn knobs(&self) -> Box<dyn Fn(Knob, bool) -> bool + Send + Sync> {
        let st = self.state.clone();
        Box::new(move |k, on| lock(&st).knob(k, on))
    }
}

/// 32 random hex digits: a token or signature only this service knows
/// (`Broken` without randomness).
pub fn secret() -> Result<String, Fault> {
    crate::nonce::Nonce::generate()
        .map(|n| n.hex())
        .map_err(|e| Fault::broken(format!("no randomness: {e}")))
}

/// A poisoned lock still holds consistent state (every change is one
/// insert, push or remove): serve on.
pub fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// A request header's value.
pub fn header(req: &tiny_http::Request, name: &str) -> Option<String> {
    req.headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

/// The request body, read whole.
pub fn body(req: &mut tiny_http::Request) -> Vec<u8> {
    let mut body = Vec::new();
    let _ = std::io::Read::read_to_end(req.as_reader(), &mut body);
    body
}

pub fn respond(req: tiny_http::Request, status: u16, body: Vec<u8>, headers: &[(&str, &str)]) {
    let mut resp = tiny_http::Response::from_data(body).with_status_code(status);
    for (k, v) in headers {
        if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
            resp.add_header(h);
        }
    }
    let _ = req.respond(resp);
}

/// An answer built while a service's state is locked and sent once the
/// lock is released, so a handler can return it from anywhere and a slow
/// client never holds the state. [`Reply::send`] answers exactly as
/// [`respond`] (and [`Reply::json`] as [`json`]) would.
pub struct Reply {
    status: u16,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
    /// A page of a listing paged by number, which a page shift
    /// ([`knobs::Shifter`]) may stand between.
    paged: bool,
}

impl Reply {
    /// `status` with `body` and these headers, in order.
    pub fn new(status: u16, body: Vec<u8>, headers: &[(&str, &str)]) -> Reply {
        Reply {
            status,
            body,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            paged: false,
        }
    }

    /// `status` with `body` of this content type.
    pub fn raw(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply::new(status, body, &[("Content-Type", content_type)])
    }

    /// The same answer with one more header.
    pub fn with(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    /// The same answer, marked a page of a listing paged by number.
    pub fn paged(mut self) -> Reply {
        self.paged = true;
        self
    }

    /// `status` with no body and no headers.
    pub fn empty(status: u16) -> Reply {
        Reply::new(status, vec![], &[])
    }

    /// `status` with `v` as a JSON body.
    pub fn json(status: u16, v: serde_json::Value) -> Reply {
        Reply::new(
            status,
            v.to_string().into_bytes(),
            &[("Content-Type", "application/json")],
        )
    }

    /// Answers `req` (call it after the state's lock is released).
    pub fn send(self, req: tiny_http::Request) {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        respond(req, self.status, self.body, &headers);
    }
}

/// The query of a URL, percent-decoded.
pub fn query(url: &str) -> HashMap<String, String> {
    url.split_once('?')
        .map(|(_, q)| {
            q.split('&')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), form_decode(v)))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A query value: percent-decoded, `+` is a space.
fn form_decode(s: &str) -> String {
    crate::wire::percent_decode(&s.replace('+', "%20"))
}

/// The bearer token or basic-auth user of a request's Authorization
/// header, checked against `tokens` (token -> who) and `passwords` (user
/// -> password): the name of who is asking, if anyone.
pub fn who(
    req: &tiny_http::Request,
    tokens: &HashMap<String, String>,
    passwords: &HashMap<String, String>,
) -> Option<String> {
    use base64::Engine as _;
    let auth = header(req, "authorization")?;
    if let Some(t) = auth.strip_prefix("Bearer ") {
        return tokens.get(t).cloned();
    }
    let b = auth.strip_prefix("Basic ")?;
    let raw = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    (passwords.get(u).map(String::as_str) == Some(p)).then(|| u.to_string())
}
