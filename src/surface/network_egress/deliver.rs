//! Run A: one delivery attempt per carrier, each bounded by [`TIMEOUT`]
//! per step. Whatever the attempt came to, the carrier is planted: the
//! detail says what run A saw (delivered, refused, reset, timed out), and
//! run B's question to the rendezvous decides the verdict, since a
//! connection that seemed to fail may still have delivered.

use super::*;
use crate::rendezvous::dns;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// How long each step of an attempt (resolve and connect, send, answer)
/// may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// What a network error means, for the detail.
fn what(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
            "connection reset".into()
        }
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("timed out after {} s", TIMEOUT.as_secs())
        }
        _ => crate::redact::text(&e.to_string()),
    }
}

/// Resolves `host:port` and connects to the first address that answers.
fn connect(host: &str, port: u16) -> io::Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, TIMEOUT) {
            Ok(s) => {
                s.set_read_timeout(Some(TIMEOUT))?;
                s.set_write_timeout(Some(TIMEOUT))?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One HTTP/1.1 GET of `target` over `stream`; the answer's status.
fn get(stream: &mut dyn ReadWrite, host: &str, target: &str) -> io::Result<u16> {
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: runwarden\r\nConnection: close\r\n\r\n"
    )?;
    stream.flush()?;
    status_line(stream)
}

/// The status of an HTTP answer's first line (at most 1 KiB read).
fn status_line(stream: &mut dyn ReadWrite) -> io::Result<u16> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while buf.len() < 1024 && !buf.ends_with(b"\r\n") {
        if stream.read(&mut byte)? == 0 {
            break;
        }
        buf.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&buf);
    line.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("no HTTP answer"))
}

/// A byte stream both ways (TCP, TLS over TCP).
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A proxy URL's host, port and `user:password`.
struct ProxyUrl {
    host: String,
    port: u16,
    userinfo: Option<String>,
}

fn parse_proxy(url: &str) -> Option<ProxyUrl> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let authority = rest.split('/').next()?;
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(crate::loopback::percent_decode(u)), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, p.parse().ok()?),
        _ => (hostport, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| ProxyUrl {
        host: host.to_string(),
        port,
        userinfo,
    })
}

/// The rendezvous URL's port.
fn url_port(url: &str, https: bool) -> u16 {
    url.split_once("://")
        .and_then(|(_, r)| r.split('/').next())
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(if https { 443 } else { 80 })
}

/// TLS over `tcp` to `host`, with the OS's root certificates.
fn tls(tcp: TcpStream, host: &str) -> io::Result<Box<dyn ReadWrite>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(io::Error::other)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::other(e.to_string()))?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(io::Error::other)?;
    Ok(Box::new(rustls::StreamOwned::new(conn, tcp)))
}

impl Instance {
    /// The resolver a lookup goes to: the control's own, else the first
    /// `nameserver` of /etc/resolv.conf (what the system resolver asks).
    fn resolver(&self) -> Result<SocketAddr, String> {
        if let Some(r) = &self.s.resolver {
            return r.parse().map_err(|_| format!("bad resolver {r}"));
        }
        let conf = std::fs::read_to_string("/etc/resolv.conf")
            .map_err(|e| format!("no system resolver: /etc/resolv.conf: {e}"))?;
        conf.lines()
            .filter_map(|l| l.trim().strip_prefix("nameserver"))
            .filter_map(|a| a.trim().parse::<std::net::IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53))
            .next()
            .ok_or_else(|| "no system resolver: /etc/resolv.conf names no nameserver".into())
    }

    pub(super) fn deliver(&self, _ctx: &RunCtx<'_>, job: &PlantJob) -> PlantOutcome {
        let hex = job.nonce.hex();
        let path = format!("d/{}/{hex}", job.carrier);
        let attempt = match job.carrier.as_str() {
            "https-direct" => self.direct(&path),
            "http-plain" => connect(&self.s.host, self.s.plain_port)
                .and_then(|mut s| get(&mut s, &self.s.host, &format!("/{path}")))
                .map(|st| format!("HTTP {st} from port {}", self.s.plain_port))
                .map_err(|e| what(&e)),
            "https-proxy" => self.through_proxy(&path),
            "tcp-raw" => connect(&self.s.host, self.s.tcp_port)
                .and_then(|mut s| {
                    s.write_all(format!("runwarden tcp-raw {hex}\n").as_bytes())?;
                    s.shutdown(std::net::Shutdown::Write)
                })
                .map(|()| format!("sent on port {}", self.s.tcp_port))
                .map_err(|e| what(&e)),
            "dns-query" => match self.resolver() {
                Ok(r) => self.lookup(r, &hex, "q"),
                Err(e) => return PlantOutcome::Failed { reason: e },
            },
            "dns-direct" => match (self.s.host.as_str(), self.s.dns_port).to_socket_addrs() {
                Ok(mut a) => match a.next() {
                    Some(addr) => self.lookup(addr, &hex, "d"),
                    None => Err("the rendezvous's name has no address".into()),
                },
                Err(e) => Err(what(&e)),
            },
            other => {
                return PlantOutcome::Failed {
                    reason: format!("not a carrier of network-egress: {}", escape::line(other)),
                };
            }
        };
        // When run A tried: run B must know the rendezvous remembered
        // from before then (no restart since, no expiry).
        PlantOutcome::Planted {
            needle: serde_json::json!({ "nonce": hex, "at": crate::sys::now_coarse().0 }),
            persistence: None,
            detail: match attempt {
                Ok(d) => format!("run A's attempt: {d}"),
                Err(d) => format!("run A's attempt: {d}"),
            },
        }
    }

    /// Straight to the rendezvous URL, with no proxy (the HTTP client
    /// never reads the proxy variables).
    fn direct(&self, path: &str) -> Result<String, String> {
        let client = self.client.get()?;
        let url = format!("{}{path}", self.s.url);
        client
            .send(&Request::new(Method::GET, &url))
            .map(|r| format!("HTTP {}", r.status))
            .map_err(|f| f.to_string())
    }

    /// Through the proxy: CONNECT to the rendezvous, then (for an https
    /// URL) TLS, then the request.
    fn through_proxy(&self, path: &str) -> Result<String, String> {
        let url = self.s.proxy.clone().ok_or("no proxy")?;
        let p = parse_proxy(&url).ok_or("the proxy variable is not a URL")?;
        let https = self.s.url.starts_with("https://");
        let port = url_port(&self.s.url, https);
        let mut tcp = connect(&p.host, p.port).map_err(|e| format!("the proxy: {}", what(&e)))?;
        let auth = p
            .userinfo
            .map(|u| {
                use base64::Engine as _;
                format!(
                    "Proxy-Authorization: Basic {}\r\n",
                    base64::engine::general_purpose::STANDARD.encode(u)
                )
            })
            .unwrap_or_default();
        write!(
            tcp,
            "CONNECT {h}:{port} HTTP/1.1\r\nHost: {h}:{port}\r\n{auth}\r\n",
            h = self.s.host
        )
        .map_err(|e| format!("the proxy: {}", what(&e)))?;
        let status = status_line(&mut tcp).map_err(|e| format!("the proxy: {}", what(&e)))?;
        // The rest of the proxy's answer, up to the blank line.
        let mut tail = Vec::new();
        let mut b = [0u8; 1];
        while tail.len() < 4096 && !tail.ends_with(b"\r\n\r\n") && !tail.starts_with(b"\r\n") {
            if tcp.read(&mut b).map_err(|e| what(&e))? == 0 {
                break;
            }
            tail.push(b[0]);
        }
        if status != 200 {
            return Err(format!("the proxy refused the tunnel (HTTP {status})"));
        }
        let mut stream: Box<dyn ReadWrite> = if https {
            tls(tcp, &self.s.host).map_err(|e| format!("TLS through the proxy: {}", what(&e)))?
        } else {
            Box::new(tcp)
        };
        get(stream.as_mut(), &self.s.host, &format!("/{path}"))
            .map(|st| format!("HTTP {st} through the proxy"))
            .map_err(|e| format!("through the proxy: {}", what(&e)))
    }

    /// One DNS query for `<hex>.<tag>.<zone>` to `server`; waits for an
    /// answer (any: the question is the message).
    fn lookup(&self, server: SocketAddr, hex: &str, tag: &str) -> Result<String, String> {
        let zone = self.s.dns_zone.as_deref().ok_or("no dns-zone")?;
        let bind = if server.is_ipv6() {
            "[::]:0"
        } else {
            "0.0.0.0:0"
        };
        let sock = UdpSocket::bind(bind).map_err(|e| what(&e))?;
        sock.set_read_timeout(Some(TIMEOUT)).map_err(|e| what(&e))?;
        let id = u16::from_be_bytes([hex.as_bytes()[0], hex.as_bytes()[1]]);
        let q = dns::query(id, &format!("{hex}.{tag}.{zone}"));
        // Connected: a port nobody listens on comes back as "connection
        // refused" (ICMP), which an unconnected socket never hears.
        sock.connect(server).map_err(|e| what(&e))?;
        sock.send(&q).map_err(|e| what(&e))?;
        let mut buf = [0u8; 512];
        match sock.recv(&mut buf) {
            Ok(n) if n >= 4 => Ok(format!("{server} answered (code {})", buf[3] & 0x0f)),
            Ok(_) => Ok(format!("{server} answered with a short packet")),
            Err(e) => Err(format!("{server}: {}", what(&e))),
        }
    }
}
