//! A hostile HTTP front for the surface tests: a loopback server that
//! answers each request itself (an HTML page with 200, a proxy's 403, a
//! rate limit, a search that lies) or passes it, as it is or changed, to
//! the real service behind it. What a surface must take for an error, not
//! for the service's word.

use runwarden::http::{Client, Request};
use runwarden::loopback::Listener;
use std::time::Duration;

/// One request as the front received it.
#[derive(Clone, Debug)]
pub struct Req {
    pub method: String,
    /// Path and query, as sent.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.url.split('?').next().unwrap_or("")
    }
}

/// An answer to give back.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    pub fn json(status: u16, v: serde_json::Value) -> Reply {
        Reply::new(status, "application/json", v.to_string())
    }

    pub fn html(status: u16, text: &str) -> Reply {
        Reply::new(status, "text/html", text)
    }

    pub fn with_header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn json_body(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a front answers one request: itself, or through `pass` to the
/// service behind it.
pub type Answer = fn(&Req, &dyn Fn(&Req) -> Reply) -> Reply;

/// The request headers passed on to the service (everything a surface
/// sends that a service reads).
const PASSED: [&str; 6] = [
    "authorization",
    "content-type",
    "accept",
    "depth",
    "x-ms-blob-type",
    "x-ms-version",
];

/// Passes `req` to `upstream` (a base URL without a trailing `/`).
pub fn forward(upstream: &str, req: &Req) -> Reply {
    let client = Client::new(Duration::from_secs(10), Duration::from_secs(30), vec![]).unwrap();
    let url = format!("{upstream}{}", req.url);
    let mut r = Request::new(req.method.parse().unwrap(), &url).bytes(req.body.clone());
    for name in PASSED {
        if let Some(v) = req.header(name) {
            r = r.header(name, v);
        }
    }
    let resp = client
        .send(&r)
        .expect("the service behind the front answers");
    let headers = resp
        .headers
        .iter()
        .filter(|(k, _)| k.as_str() == "content-type" || k.as_str().starts_with("x-"))
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    Reply {
        status: resp.status,
        headers,
        body: resp.body,
    }
}

/// The front; serves until dropped.
pub struct Hostile {
    pub port: u16,
    _listener: Listener,
}

impl Hostile {
    /// Serves every request with `answer(req, pass)`, where `pass` hands
    /// a request (this one or a changed one) to `upstream` and returns its
    /// answer.
    pub fn start(
        upstream: &str,
        answer: impl Fn(&Req, &dyn Fn(&Req) -> Reply) -> Reply + Send + 'static,
    ) -> Hostile {
        let upstream = upstream.trim_end_matches('/').to_string();
        let listener = Listener::start(move |mut req, _port| {
            let mut body = Vec::new();
            let _ = std::io::Read::read_to_end(req.as_reader(), &mut body);
            let r = Req {
                method: req.method().as_str().to_string(),
                url: req.url().to_string(),
                headers: req
                    .headers()
                    .iter()
                    .map(|h| (h.field.as_str().to_string(), h.value.as_str().to_string()))
                    .collect(),
                body,
            };
            let reply = answer(&r, &|r: &Req| forward(&upstream, r));
            let mut resp =
                tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
            for (k, v) in &reply.headers {
                if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                    resp.add_header(h);
                }
            }
            let _ = req.respond(resp);
        })
        .unwrap();
        Hostile {
            port: listener.port,
            _listener: listener,
        }
    }

    /// The front's base URL (no trailing `/`).
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}
