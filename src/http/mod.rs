//! A small blocking HTTP client for surfaces that speak HTTP (the Actions
//! cache's Twirp API and signed blob URLs, GitHub's REST API).
//!
//! It drives octocrab's client (rustls, the OS's root certificates) on a
//! current-thread runtime of its own, because surfaces are synchronous.
//! Every call is bounded: connect, read and write timeouts, a deadline for
//! the whole exchange, and at most [`ATTEMPTS`] tries, retried only when the
//! server could not have acted (no connection) or said so (429; for reads
//! also 502, 503, 504, which a gateway may send after the service behind
//! it acted on a write).
//!
//! Secrets: octocrab is built without credentials, so it attaches none on
//! its own; each request carries exactly the headers its caller gives, and
//! credential headers are marked sensitive. Errors never quote a URL (a
//! signed URL is a credential) or a header: they say what broke in words
//! taken from the error chain, passed through [`crate::redact`].
//!
//! What an answer means (made, refused by the server's access control, a
//! conflict, not the server's own answer, failed) is [`answer`]'s to say.

pub mod answer;

use crate::fault::Fault;
use http_body_util::BodyExt;
use octocrab::Octocrab;
use std::time::Duration;

/// Tries per call, the first included.
pub const ATTEMPTS: u32 = 3;

/// The longest `retry-after` a busy server (a 429 or 503 here, GitHub's
/// rate-limit 403 in `src/github.rs`) is waited out for; longer is an
/// error now rather than a probe that hangs.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How long the server asks to wait (`retry-after` in seconds).
pub fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// Answers that say "not now" before any body: retried (the last one is a
/// failure, never an answer a caller could take for the service's word).
const RETRY_ON: [u16; 4] = [429, 502, 503, 504];

/// A blocking client with one runtime.
pub struct Client {
    oc: Octocrab,
    rt: tokio::runtime::Runtime,
    /// The deadline for one whole exchange (headers and body).
    deadline: Duration,
    user_agent: String,
    /// Hosts that stayed unreachable through every attempt, with why: later
    /// calls to them fail at once instead of waiting through the retries
    /// again.
    down: std::cell::RefCell<std::collections::HashMap<String, String>>,
}

/// One request. `url` is absolute.
pub struct Request<'a> {
    pub method: http::Method,
    pub url: &'a str,
    pub headers: Vec<(&'static str, String)>,
    /// Header values that are credentials (sent as sensitive, never shown).
    pub secret_headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl<'a> Request<'a> {
    pub fn new(method: http::Method, url: &'a str) -> Request<'a> {
        Request {
            method,
            url,
            headers: vec![],
            secret_headers: vec![],
            body: vec![],
        }
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// A credential header: marked sensitive, never in an error.
    pub fn secret_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.secret_headers.push((name, value.into()));
        self
    }

    pub fn json(mut self, body: &serde_json::Value) -> Self {
        self.body = serde_json::to_vec(body).expect("JSON values serialize");
        self.headers
            .push(("content-type", "application/json".to_string()));
        self
    }

    pub fn bytes(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }
}

/// A response whose body was read whole (small answers: JSON).
pub struct Response {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// Status and size only: a body may hold a signed URL.
impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Response(HTTP {}, {} bytes)",
            self.status,
            self.body.len()
        )
    }
}

impl Response {
    /// The body as JSON; `Broken` when it is not.
    pub fn json(&self) -> Result<serde_json::Value, Fault> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Fault::broken(format!(
                "the answer (HTTP {}) is not JSON: {e}",
                self.status
            ))
        })
    }
}

/// Why a call got no answer. The text is safe to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No connection could be made (refused, no route, name not found,
    /// TLS failed): the surface is unreachable.
    Unreachable(String),
    /// Connected, but the exchange did not finish in time or broke.
    Broken(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(m) | Failure::Broken(m) => f.write_str(m),
        }
    }
}

/// Why: a caller that decides on the kind of a fault (unreachable or
/// broken) gets it from the transport unchanged.
impl From<Failure> for Fault {
    fn from(f: Failure) -> Fault {
        match f {
            Failure::Unreachable(m) => Fault::Unreachable(m),
            Failure::Broken(m) => Fault::Broken(m),
        }
    }
}

/// The largest body [`Client::send`] reads whole: JSON answers are small.
/// Bodies that may be large go through [`Client::stream`], which has no cap.
const MAX_WHOLE_BODY: usize = 16 << 20;

impl Client {
    /// `timeout` bounds connecting, each read and each write; `deadline`
    /// bounds a whole exchange. `secrets` are registered with
    /// [`crate::redact`], which every error passes through. `Broken` when
    /// no runtime or client can be made.
    pub fn new(
        timeout: Duration,
        deadline: Duration,
        secrets: Vec<String>,
    ) -> Result<Client, Fault> {
        secrets.iter().for_each(|s| crate::redact::add(s));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Fault::broken(format!("cannot start the HTTP runtime: {e}")))?;
        let oc = {
            let _guard = rt.enter();
            Octocrab::builder()
                .set_connect_timeout(Some(timeout))
                .set_read_timeout(Some(timeout))
                .set_write_timeout(Some(timeout))
                .build()
                .map_err(|e| {
                    Fault::broken(format!("cannot set up the HTTP client: {}", chain(&e)))
                })?
        };
        Ok(Client {
            oc,
            rt,
            deadline,
            user_agent: format!("runwarden/{}", env!("CARGO_PKG_VERSION")),
            down: Default::default(),
        })
    }

    /// Sends `req` and reads the whole answer (at most 16 MiB).
    pub fn send(&self, req: &Request<'_>) -> Result<Response, Failure> {
        let mut body = Vec::new();
        let (status, headers) = self.stream(req, &mut |chunk| {
            if body.len() + chunk.len() > MAX_WHOLE_BODY {
                return Err(Fault::broken("the answer is larger than 16 MiB"));
            }
            body.extend_from_slice(chunk);
            Ok(())
        })?;
        Ok(Response {
            status,
            headers,
            body,
        })
    }

    /// Sends `req` and hands the answer's body to `sink` as it arrives.
    /// Retries happen only before any body byte was handed over.
    pub fn stream(
        &self,
        req: &Request<'_>,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Fault>,
    ) -> Result<(u16, http::HeaderMap), Failure> {
        let host = origin(req.url).unwrap_or_default();
        if let Some(why) = self.down.borrow().get(&host) {
            return Err(Failure::Unreachable(why.clone()));
        }
        let mut last = None;
        let mut asked: Option<u64> = None;
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                // What the server asked for (at most MAX_RETRY_AFTER), else
                // 0.5 s, then 2 s: short, since every call also has a
                // deadline.
                let backoff = Duration::from_millis(500 << (2 * (attempt - 1)));
                let wait = asked.map(Duration::from_secs).unwrap_or(backoff);
                std::thread::sleep(wait);
            }
            let result = self.rt.block_on(async {
                tokio::time::timeout(self.deadline, self.once(req, sink)).await
            });
            match result {
                Err(_) => {
                    last = Some(Failure::Broken(format!(
                        "no complete answer within {} s",
                        self.deadline.as_secs()
                    )))
                }
                Ok(Ok(Ok(answer))) => return Ok(answer),
                Ok(Ok(Err((status, after)))) => {
                    // Busy or a gateway's failure, said before any body:
                    // nothing was handed over, so trying again is safe, after
                    // the wait the server asks for when it names one. A
                    // longer wait than we give is an error now, not a probe
                    // that hangs.
                    if let Some(a) = after.filter(|a| *a > MAX_RETRY_AFTER.as_secs()) {
                        last = Some(Failure::Broken(format!(
                            "HTTP {status}, asking to wait {a} s (more than {} s)",
                            MAX_RETRY_AFTER.as_secs()
                        )));
                        break;
                    }
                    asked = after;
                    last = Some(Failure::Broken(format!("HTTP {status}")));
                    continue;
                }
                Ok(Err(f)) => last = Some(f),
            }
            // Only a failure to connect is retried: anything later may have
            // been acted on, and a streamed body may be half handed over.
            if !matches!(last, Some(Failure::Unreachable(_))) {
                break;
            }
        }
        // A signed URL is a credential: nothing of it past the host may
        // appear in an error, whatever the error chain quoted.
        let hide = |m: String| {
            let mut m = m.replace(req.url, "<url>");
            if let Some((_, q)) = req.url.split_once('?') {
                m = m.replace(q, "<query>");
            }
            m
        };
        Err(match last.expect("at least one attempt") {
            Failure::Unreachable(m) => {
                let m = hide(m);
                self.down.borrow_mut().insert(host, m.clone());
                Failure::Unreachable(m)
            }
            Failure::Broken(m) => Failure::Broken(hide(m)),
        })
    }

    /// Sends `req` and searches its body for `needles` as it
    /// arrives (nothing is kept but a needle's length of it); the status.
    pub fn search(
        &self,
        req: &Request<'_>,
        needles: &mut crate::scan::Needles,
    ) -> Result<u16, Failure> {
        let (status, _) = self.stream(req, &mut |chunk| {
            needles.feed(chunk);
            Ok(())
        })?;
        Ok(status)
    }

    async fn once(
        &self,
        req: &Request<'_>,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Fault>,
    ) -> Result<Result<(u16, http::HeaderMap), (u16, Option<u64>)>, Failure> {
        let mut b = http::Request::builder()
            .method(req.method.clone())
            .uri(req.url)
            .header("user-agent", &self.user_agent);
        for (name, value) in &req.headers {
            b = b.header(*name, value);
        }
        for (name, value) in &req.secret_headers {
            let mut v = http::HeaderValue::from_str(value)
                .map_err(|_| Failure::Broken(format!("the {name} header is not valid")))?;
            v.set_sensitive(true);
            b = b.header(*name, v);
        }
        let request = b
            .body(req.body.clone())
            .map_err(|_| Failure::Broken("the request URL is not valid".into()))?;
        let response = self
            .oc
            .execute(request)
            .await
            .map_err(|e| self.classify(&e))?;
        let status = response.status().as_u16();
        // A gateway's 502/504 can come after the service behind it acted:
        // a write (a publish, an upload, MKCOL) is tried again only on a
        // 429, which says it was not taken; a read on any of them.
        let safe = matches!(req.method.as_str(), "GET" | "HEAD" | "OPTIONS" | "PROPFIND");
        if RETRY_ON.contains(&status) && (safe || status == 429) {
            let after = retry_after(response.headers()).map(|d| d.as_secs());
            return Ok(Err((status, after)));
        }
        let headers = response.headers().clone();
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                Failure::Broken(self.scrub(&format!("the answer broke off: {}", chain(&e))))
            })?;
            if let Some(data) = frame.data_ref() {
                // Whatever its kind, a sink's refusal breaks this exchange.
                sink(data).map_err(|f| Failure::Broken(f.into_reason()))?;
            }
        }
        Ok(Ok((status, headers)))
    }

    /// Unreachable when no connection was made (name lookup, TCP, TLS:
    /// the transport says so); Broken otherwise, e.g. a connection closed
    /// after the request went out, which the server may have acted on.
    fn classify(&self, e: &octocrab::Error) -> Failure {
        let text = self.scrub(&chain(e));
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(c) = cause {
            if c.downcast_ref::<hyper_util::client::legacy::Error>()
                .is_some_and(|h| h.is_connect())
            {
                return Failure::Unreachable(text);
            }
            cause = c.source();
        }
        Failure::Broken(text)
    }

    /// Removes every secret from `text` (the one redaction layer).
    fn scrub(&self, text: &str) -> String {
        crate::redact::text(text)
    }
}

/// An error's causes, outermost first, without octocrab's own wrapper text
/// (which appends a backtrace): "client error (Connect): tcp connect
/// error: Connection refused (os error 111)".
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![];
    let mut cur = e.source();
    while let Some(c) = cur {
        let s = c.to_string();
        if !parts.iter().any(|p| p == &s) {
            parts.push(s);
        }
        cur = c.source();
    }
    if parts.is_empty() {
        // No cause: the wrapper's first line is all there is.
        parts.push(e.to_string().lines().next().unwrap_or("").to_string());
    }
    parts.join(": ")
}

/// A URL's origin, `scheme://host[:port]`, without any userinfo: what
/// "the same host" means (for the memory of unreachable hosts, and for
/// which URLs may get a surface's credentials), and the form in which a
/// service is named to people.
pub fn origin(url: &str) -> Option<String> {
    let u = url.parse::<http::Uri>().ok()?;
    let host = u.host()?;
    Some(match u.port_u16() {
        Some(p) => format!("{}://{host}:{p}", u.scheme_str()?),
        None => format!("{}://{host}", u.scheme_str()?),
    })
}

/// Connecting, and each read or write, of one call by a surface.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// One whole exchange by a surface (plants are a few KiB; a large
/// download still has two minutes).
pub const DEADLINE: Duration = Duration::from_secs(120);

/// A [`Client`] made on first use, with the surface's timeouts: the
/// orchestrator opens instances it never sends a request through.
pub struct LazyClient {
    cell: std::cell::OnceCell<Result<Client, Fault>>,
}

impl LazyClient {
    /// `secrets` (the credentials the surface sends) are registered with
    /// [`crate::redact`] now, in every process that opens the surface (the
    /// orchestrator too, which never sends a request through it).
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> LazyClient {
        secrets
            .into_iter()
            .for_each(|s| crate::redact::add(s.as_ref()));
        LazyClient {
            cell: std::cell::OnceCell::new(),
        }
    }

    /// The client, made now if it was not yet; `Broken` as in
    /// [`Client::new`].
    pub fn get(&self) -> Result<&Client, Fault> {
        self.cell
            .get_or_init(|| Client::new(IO_TIMEOUT, DEADLINE, vec![]))
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Whether `url` may be configured for a surface: http or https, and no
/// credentials in it (URLs are shown in reports; credentials come from
/// environment variables the config names). `Invalid` otherwise.
pub fn check_url(url: &str) -> Result<(), Fault> {
    let uri: http::Uri = url.parse().map_err(|_| Fault::invalid("not a valid URL"))?;
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(Fault::invalid(
            "no credentials in the URL: name the variables that hold them (`token-env`, or `username-env` and `password-env`)",
        ));
    }
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(()),
        _ => Err(Fault::invalid("must be an http:// or https:// URL")),
    }
}
