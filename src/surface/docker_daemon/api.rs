//! The Docker Engine API, spoken directly over the daemon's socket (a unix
//! socket, or TCP as `DOCKER_HOST=tcp://…` names it, with TLS when asked:
//! [`super::tls`]): no `docker`
//! CLI, so nothing is built into a shell string and no credential helper
//! runs.
//!
//! One connection per call, HTTP/1.1 through hyper (already in the tree
//! under octocrab) on a current-thread runtime. Every call is bounded: the
//! connection by [`CONNECT`], the whole exchange (headers and every body
//! read) by [`EXCHANGE`]. The API version is negotiated once per instance
//! from `GET /_ping` and `GET /version`: the newest both sides speak, never
//! below the daemon's `MinAPIVersion` or [`OLDEST`].
//!
//! Bodies stream: [`Api::stream`] hands a blocking reader to the caller, so
//! a listing of a daemon with 100,000 images is parsed as it arrives and a
//! volume's archive is searched as it arrives.

use crate::fault::Fault;
use crate::http::answer::{self, Answer, Class, Server};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};

/// How long connecting to the daemon may take.
const CONNECT: Duration = Duration::from_secs(10);

/// How long one whole exchange may take, every body read included (an
/// import of a tiny image, a volume's archive).
const EXCHANGE: Duration = Duration::from_secs(120);

/// The oldest API version runwarden speaks (Docker 20.10), and the newest
/// it has been checked against. The routes and fields it uses are the same
/// across that range.
pub(super) const OLDEST: (u32, u32) = (1, 41);
pub(super) const NEWEST: (u32, u32) = (1, 51);

/// The largest JSON answer read whole (an inspect, an error); listings
/// stream and have no cap.
const MAX_WHOLE: usize = 16 << 20;

/// Where the daemon listens.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Host {
    /// `unix:///var/run/docker.sock`.
    Unix(PathBuf),
    /// `tcp://host:port` (with TLS when the settings ask for it).
    Tcp(String),
}

impl Host {
    /// Parses a `DOCKER_HOST`-style address. `Invalid` for any other
    /// scheme (ssh, npipe) or an empty address.
    pub fn parse(s: &str) -> Result<Host, Fault> {
        if let Some(p) = s.strip_prefix("unix://") {
            if !p.starts_with('/') {
                return Err(Fault::invalid(
                    "a unix socket address needs an absolute path (unix:///var/run/docker.sock)",
                ));
            }
            return Ok(Host::Unix(PathBuf::from(p)));
        }
        if let Some(a) = s.strip_prefix("tcp://") {
            let a = a.trim_end_matches('/');
            let ok = a.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty()
                    && p.parse::<u16>().is_ok_and(|p| p > 0)
                    && !h.contains('/')
                    && !h.contains('@')
            });
            if !ok {
                return Err(Fault::invalid(
                    "a tcp address needs a host and a port (tcp://127.0.0.1:2375)",
                ));
            }
            return Ok(Host::Tcp(a.to_string()));
        }
        Err(Fault::invalid(
            "the daemon's address must be unix:///path or tcp://host:port (ssh:// and npipe:// are not supported)",
        ))
    }

    /// The address for people (already escaped).
    pub fn shown(&self) -> String {
        match self {
            Host::Unix(p) => format!(
                "unix://{}",
                crate::escape::bytes(p.as_os_str().as_encoded_bytes())
            ),
            Host::Tcp(a) => format!("tcp://{}", crate::escape::bytes(a.as_bytes())),
        }
    }
}

/// Why a call got no answer from the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Failure {
    /// The socket's own permissions kept this user out (EACCES): the
    /// daemon's access control, for every operation alike.
    Denied(String),
    /// No daemon answered, or the exchange broke.
    Fault(Fault),
}

impl From<Fault> for Failure {
    fn from(f: Fault) -> Failure {
        Failure::Fault(f)
    }
}

impl Failure {
    /// The failure as a fault (a denial is `Unsupported`: no look can be
    /// had here, as for the other surfaces' refused listings).
    pub fn fault(self) -> Fault {
        match self {
            Failure::Denied(r) => Fault::Unsupported(r),
            Failure::Fault(f) => f,
        }
    }
}

/// How the daemon answers ([`crate::http::answer`]): its access control
/// (an authorization plugin; a socket proxy that filters the API, which
/// stands in for it) refuses with 401 or 403. Every answer counts as the
/// daemon's own: on its socket nothing else answers, and a socket proxy's
/// refusal is the access control this runner has. No answer of its is a
/// conflict that closes nothing (a name taken is someone else's object:
/// an error).
const DAEMON: Server<'static> = Server {
    refusals: &[401, 403],
    own: &answer::any,
    refuses: &answer::any,
    exists: &answer::none,
};

/// What the daemon's status `status` means.
pub(super) fn class(status: u16) -> Class {
    answer::classify(&Answer::status(status), &DAEMON)
}

/// An answer read whole.
pub(super) struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as JSON; `Broken` when it is not.
    pub fn json(&self) -> Result<serde_json::Value, Fault> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Fault::broken(format!(
                "the daemon's answer (HTTP {}) is not JSON: {e}",
                self.status
            ))
        })
    }

    /// The daemon's own error message (`{"message": …}`), escaped and cut
    /// short, or the status alone.
    pub fn message(&self) -> String {
        let text = serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| {
                String::from_utf8_lossy(&self.body[..self.body.len().min(200)]).into_owned()
            });
        let text: String = text.chars().take(200).collect();
        format!(
            "HTTP {}: {}",
            self.status,
            crate::escape::bytes(text.trim().as_bytes())
        )
    }
}

/// What a request may carry.
pub(super) enum Body<'a> {
    None,
    Json(&'a serde_json::Value),
    Tar(Vec<u8>),
}

/// A streamed answer: the status, and the body as a blocking reader.
pub(super) struct Streamed<'a> {
    pub status: u16,
    pub body: BodyReader<'a>,
}

/// The daemon at `host`, with its negotiated API version.
pub(super) struct Api {
    host: Host,
    /// TLS for a `tcp://` daemon: the client configuration and the name
    /// its certificate must carry.
    tls: Option<(
        std::sync::Arc<rustls::ClientConfig>,
        rustls::pki_types::ServerName<'static>,
    )>,
    rt: tokio::runtime::Runtime,
    /// `v1.41`: the path prefix every call but the negotiation takes,
    /// settled at the first call.
    version: std::cell::OnceCell<String>,
}

/// A connection's byte stream, whichever socket it is.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl Api {
    /// `Broken` when no runtime can be made.
    pub fn new(host: Host, tls: Option<&super::tls::Tls>) -> Result<Api, Fault> {
        let tls = match (tls, &host) {
            (Some(t), Host::Tcp(a)) => Some((t.config()?, super::tls::server_name(a)?)),
            (Some(_), Host::Unix(_)) => {
                return Err(Fault::invalid(
                    "TLS is for a daemon on tcp://, not a unix socket",
                ));
            }
            (None, _) => None,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Fault::broken(format!("cannot start the runtime: {e}")))?;
        Ok(Api {
            host,
            tls,
            rt,
            version: Default::default(),
        })
    }

    /// The negotiated version prefix (`/v1.41`), negotiating on first use.
    pub fn version(&self) -> Result<&str, Failure> {
        // Only a version is kept: a failure (a daemon not up yet) is
        // asked again by the next call.
        if let Some(v) = self.version.get() {
            return Ok(v);
        }
        let v = self.negotiate()?;
        Ok(self.version.get_or_init(|| v))
    }

    fn negotiate(&self) -> Result<String, Failure> {
        // The ping's `Api-Version` header is what the docker CLI negotiates
        // from; `/version` adds the oldest version the daemon takes. A
        // refusal of either is no refusal of any carrier (neither plants
        // nor reads): negotiation then goes on with what the other said,
        // or it is an error.
        let deadline = Instant::now() + EXCHANGE;
        let ping = self.send("GET", "/_ping", Body::None, deadline)?;
        let ping_max = ping
            .headers()
            .get("api-version")
            .and_then(|v| v.to_str().ok())
            .and_then(version_of);
        let v = self.raw("GET", "/version", Body::None)?;
        let doc = if v.ok() { v.json().ok() } else { None };
        let parse = |k: &str| {
            doc.as_ref()
                .and_then(|d| d[k].as_str())
                .and_then(version_of)
        };
        let Some(max) = parse("ApiVersion").or(ping_max) else {
            return Err(Failure::Fault(Fault::broken(format!(
                "the daemon named no API version (its ping's Api-Version header, its /version answering {}): is this a Docker daemon?",
                v.message()
            ))));
        };
        // (Without /version's word, the oldest the daemon takes is taken
        // to be runwarden's oldest: a daemon that refuses it says so on
        // the first call, an error.)
        let min = parse("MinAPIVersion").unwrap_or(OLDEST);
        let chosen = max.min(NEWEST);
        if chosen < OLDEST.max(min) {
            return Err(Failure::Fault(Fault::broken(format!(
                "the daemon speaks API {}.{} to {}.{}, runwarden {}.{} to {}.{}: no version in common",
                min.0, min.1, max.0, max.1, OLDEST.0, OLDEST.1, NEWEST.0, NEWEST.1
            ))));
        }
        Ok(format!("/v{}.{}", chosen.0, chosen.1))
    }

    /// `method` on `path` (under the negotiated version), read whole.
    pub fn call(&self, method: &str, path: &str, body: Body<'_>) -> Result<Reply, Failure> {
        let full = format!("{}{path}", self.version()?);
        self.raw(method, &full, body)
    }

    /// `method` on `path` (under the negotiated version), its body handed
    /// over as it arrives.
    pub fn stream(
        &self,
        method: &str,
        path: &str,
        body: Body<'_>,
    ) -> Result<Streamed<'_>, Failure> {
        self.stream_for(method, path, body, EXCHANGE)
    }

    /// [`Api::stream`], the whole exchange bounded by `within` (a stream
    /// that does not end on its own: the event history).
    pub fn stream_for(
        &self,
        method: &str,
        path: &str,
        body: Body<'_>,
        within: Duration,
    ) -> Result<Streamed<'_>, Failure> {
        let full = format!("{}{path}", self.version()?);
        let deadline = Instant::now() + within;
        let resp = self.send(method, &full, body, deadline)?;
        Ok(Streamed {
            status: resp.status().as_u16(),
            body: BodyReader {
                rt: &self.rt,
                body: resp.into_body(),
                buf: Bytes::new(),
                deadline,
            },
        })
    }

    fn raw(&self, method: &str, path: &str, body: Body<'_>) -> Result<Reply, Failure> {
        let deadline = Instant::now() + EXCHANGE;
        let resp = self.send(method, path, body, deadline)?;
        let status = resp.status().as_u16();
        let mut reader = BodyReader {
            rt: &self.rt,
            body: resp.into_body(),
            buf: Bytes::new(),
            deadline,
        };
        let mut body = Vec::new();
        (&mut reader)
            .take(MAX_WHOLE as u64 + 1)
            .read_to_end(&mut body)
            .map_err(|e| Fault::broken(format!("reading the daemon's answer: {e}")))?;
        if body.len() > MAX_WHOLE {
            return Err(Failure::Fault(Fault::broken(
                "the daemon's answer is over 16 MiB",
            )));
        }
        Ok(Reply { status, body })
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: Body<'_>,
        deadline: Instant,
    ) -> Result<hyper::Response<Incoming>, Failure> {
        let (ctype, bytes) = match body {
            Body::None => (None, Vec::new()),
            Body::Json(v) => (Some("application/json"), v.to_string().into_bytes()),
            Body::Tar(t) => (Some("application/x-tar"), t),
        };
        let host = match &self.host {
            Host::Unix(_) => "docker".to_string(),
            Host::Tcp(a) => a.clone(),
        };
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", host)
            .header(
                "user-agent",
                format!("runwarden/{}", env!("CARGO_PKG_VERSION")),
            );
        if let Some(t) = ctype {
            req = req.header("content-type", t);
        }
        let req = req
            .body(Full::new(Bytes::from(bytes)))
            .map_err(|e| Fault::invalid(format!("a request runwarden could not build: {e}")))?;
        self.rt.block_on(async {
            let io = tokio::time::timeout(CONNECT, self.connect())
                .await
                .map_err(|_| {
                    Failure::Fault(Fault::Unreachable(format!(
                        "no answer from {} within {} s",
                        self.host.shown(),
                        CONNECT.as_secs()
                    )))
                })??;
            let exchange = async {
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                        .await
                        .map_err(|e| Fault::broken(format!("talking to the daemon: {e}")))?;
                tokio::spawn(async move {
                    // The connection's errors reach the caller through the
                    // response or its body.
                    let _ = conn.await;
                });
                sender
                    .send_request(req)
                    .await
                    .map_err(|e| Fault::broken(format!("talking to the daemon: {e}")))
            };
            tokio::time::timeout_at(deadline.into(), exchange)
                .await
                .map_err(|_| {
                    Failure::Fault(Fault::broken(format!(
                        "the daemon did not answer within {} s",
                        EXCHANGE.as_secs()
                    )))
                })?
                .map_err(Failure::Fault)
        })
    }

    async fn connect(&self) -> Result<Box<dyn Stream>, Failure> {
        let shown = self.host.shown();
        match &self.host {
            Host::Unix(p) => match tokio::net::UnixStream::connect(p).await {
                Ok(s) => Ok(Box::new(s)),
                Err(e) => Err(connect_failure(e, &shown)),
            },
            Host::Tcp(a) => {
                let tcp = tokio::net::TcpStream::connect(a.as_str())
                    .await
                    .map_err(|e| connect_failure(e, &shown))?;
                let Some((config, name)) = &self.tls else {
                    return Ok(Box::new(tcp));
                };
                // A handshake that fails (the daemon's certificate, or
                // this client's, not accepted) is an error, never a
                // refusal: nothing tells the daemon's access control from
                // a wrong certificate directory.
                match tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name.clone(), tcp)
                    .await
                {
                    Ok(s) => Ok(Box::new(s)),
                    Err(e) => Err(Failure::Fault(Fault::Unreachable(format!(
                        "TLS with the daemon at {shown} failed: {e}"
                    )))),
                }
            }
        }
    }
}

/// Why a connection could not be made: the socket's permissions (this
/// user may not open it: the daemon's access control), or no daemon.
fn connect_failure(e: std::io::Error, shown: &str) -> Failure {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => Failure::Denied(format!(
            "this user may not open the daemon's socket {shown} (permission denied)"
        )),
        _ => Failure::Fault(Fault::Unreachable(format!("no daemon at {shown}: {e}"))),
    }
}

/// A response body as a blocking [`Read`], each read bounded by the
/// exchange's deadline.
pub(super) struct BodyReader<'a> {
    rt: &'a tokio::runtime::Runtime,
    body: Incoming,
    buf: Bytes,
    deadline: Instant,
}

impl Read for BodyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.buf.is_empty() {
            let frame = self
                .rt
                .block_on(async {
                    // (Inside the runtime: a timer is made only there.)
                    tokio::time::timeout_at(self.deadline.into(), self.body.frame()).await
                })
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the daemon's answer did not end in time",
                    )
                })?;
            match frame {
                None => return Ok(0),
                Some(Err(e)) => {
                    return Err(std::io::Error::other(format!(
                        "the daemon's answer broke: {e}"
                    )));
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.buf = data;
                    }
                }
            }
        }
        let n = out.len().min(self.buf.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        let _ = self.buf.split_to(n);
        Ok(n)
    }
}

/// `"1.41"` as `(1, 41)`.
pub(super) fn version_of(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A query value, percent-encoded.
pub(super) fn q(s: &str) -> String {
    crate::wire::percent_encode(s)
}
