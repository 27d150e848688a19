//! Run A's ways out: resolving, connecting, the GET, the proxy, TLS and
//! the DNS lookups a delivery attempt is made of, each within the
//! attempt's [`DEADLINE`], and what each came to: the network's answer
//! (the carrier is planted) or nothing that says anything about the
//! network (the plant failed).

use super::NetworkEgress;
use crate::escape;
use crate::rendezvous::dns;
use crate::timed::Timed;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

/// How long one attempt may take, all of it (resolving, connecting, the
/// proxy, TLS, the request and its answer).
pub(super) const DEADLINE: Duration = Duration::from_secs(10);

/// What an attempt came to.
pub(super) enum Attempt {
    /// The network's answer, whatever it was: the carrier is planted.
    Network(String),
    /// Nothing that says anything about the network: the plant failed.
    Local(String),
}

use Attempt::{Local, Network};

/// What a network error means, for the detail.
pub(super) fn what(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
            "connection reset".into()
        }
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("timed out (within {} s)", DEADLINE.as_secs())
        }
        _ => crate::redact::text(&e.to_string()),
    }
}

/// Every address of `host:port`; a name that does not resolve here says
/// nothing about what the network lets out (give an address).
pub(super) fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, Attempt> {
    match (host, port).to_socket_addrs() {
        Ok(a) => {
            let all: Vec<SocketAddr> = a.collect();
            if all.is_empty() {
                Err(Local(format!("{} has no address here", escape::line(host))))
            } else {
                Ok(all)
            }
        }
        Err(e) => Err(Local(format!(
            "{} does not resolve here ({}): the carrier cannot be tried; name the rendezvous by its address",
            escape::line(host),
            what(&e)
        ))),
    }
}

/// Connects to the first address of `host:port` that answers, within
/// what is left of `until`.
pub(super) fn connect(host: &str, port: u16, until: Instant) -> Result<Timed, Attempt> {
    let mut last = None;
    for a in resolve(host, port)? {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&a, left) {
            Ok(s) => return Ok(Timed::new(s, left)),
            Err(e) => last = Some(what(&e)),
        }
    }
    Err(Network(last.unwrap_or_else(|| {
        format!("timed out (within {} s)", DEADLINE.as_secs())
    })))
}

/// The status of an HTTP answer (its head read within the stream's
/// deadline, at most 4 KiB).
fn status(stream: &mut impl Read) -> io::Result<u16> {
    let head = crate::timed::read_head(stream, 4096)?.unwrap_or_default();
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other("no HTTP answer"))
}

/// One GET of `target`; the rendezvous answers a delivery 204, and any
/// other answer is something else's (a redirect, a block page).
pub(super) fn deliver_get(
    stream: &mut (impl Read + Write),
    host: &str,
    target: &str,
    via: &str,
) -> Attempt {
    let sent = write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: runwarden\r\nConnection: close\r\n\r\n"
    )
    .and_then(|()| stream.flush());
    match sent.and_then(|()| status(stream)) {
        Ok(204) => Network(format!("delivered (HTTP 204{via})")),
        Ok(s) => Local(format!(
            "answered HTTP {s}{via}, not the rendezvous's 204: something else answers there (a redirect, a block page): point the config at the rendezvous itself"
        )),
        Err(e) => Network(format!("{}{via}", what(&e))),
    }
}

/// A proxy URL's host, port and `user:password`.
struct ProxyUrl {
    host: String,
    port: u16,
    userinfo: Option<String>,
}

fn parse_proxy(url: &str) -> Option<ProxyUrl> {
    let rest = match url.split_once("://") {
        Some(("http", r)) => r,
        Some(_) => return None,
        None => url,
    };
    let authority = rest.split('/').next()?;
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(crate::wire::percent_decode(u)), h),
        None => (None, authority),
    };
    let (host, port) = match hostport.strip_prefix('[') {
        Some(v6) => {
            let (h, rest) = v6.split_once(']')?;
            (
                h,
                rest.strip_prefix(':')
                    .map_or(Some(80), |p| p.parse().ok())?,
            )
        }
        None => match hostport.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (hostport, 80),
        },
    };
    (!host.is_empty()).then(|| ProxyUrl {
        host: host.to_string(),
        port,
        userinfo,
    })
}

/// The rendezvous URL's port.
pub(super) fn url_port(url: &str, https: bool) -> u16 {
    url.split_once("://")
        .and_then(|(_, r)| r.split('/').next())
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(if https { 443 } else { 80 })
}

/// TLS over `tcp` to `host`, with the OS's root certificates.
fn tls(
    tcp: Timed,
    host: &str,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, Timed>, Attempt> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(Local(
            "no root certificates on this runner: TLS cannot be tried".into(),
        ));
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Local(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| Local(e.to_string()))?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|e| Local(e.to_string()))?;
    Ok(rustls::StreamOwned::new(conn, tcp))
}

impl NetworkEgress {
    /// The resolvers a lookup goes to: the control's own, else every
    /// `nameserver` of /etc/resolv.conf, in its order (the first three, as
    /// the system resolver takes them): a sender whose first nameserver is
    /// blocked falls back to the next, as glibc's resolver does.
    pub(super) fn resolvers(&self) -> Result<Vec<SocketAddr>, Attempt> {
        if let Some(r) = &self.settings.resolver {
            return r
                .parse()
                .map(|a| vec![a])
                .map_err(|_| Local(format!("bad resolver {r}")));
        }
        let conf = std::fs::read_to_string("/etc/resolv.conf")
            .map_err(|e| Local(format!("no system resolver: /etc/resolv.conf: {e}")))?;
        let all: Vec<SocketAddr> = conf
            .lines()
            .filter_map(|l| l.trim().strip_prefix("nameserver"))
            .filter_map(|a| a.trim().parse::<std::net::IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53))
            .take(3)
            .collect();
        if all.is_empty() {
            return Err(Local(
                "no system resolver: /etc/resolv.conf names no nameserver".into(),
            ));
        }
        Ok(all)
    }

    /// The rendezvous URL's path (`/`, or `/rv/` behind a proxy).
    pub(super) fn path_prefix(&self) -> String {
        let rest = self.settings.url.split_once("://").map_or("", |(_, r)| r);
        match rest.find('/') {
            Some(i) => rest[i..].to_string(),
            None => "/".into(),
        }
    }

    /// Straight to the rendezvous URL, with no proxy, within the same
    /// deadline as every carrier (no retries: the first answer is the
    /// network's).
    pub(super) fn direct(&self, target: &str, until: Instant) -> Attempt {
        let https = self.settings.url.starts_with("https://");
        let host = self.settings.host.as_str();
        let mut tcp = match connect(host, url_port(&self.settings.url, https), until) {
            Ok(t) => t,
            Err(a) => return a,
        };
        if https {
            match tls(tcp, host) {
                Ok(mut t) => deliver_get(&mut t, host, target, ""),
                Err(a) => a,
            }
        } else {
            deliver_get(&mut tcp, host, target, "")
        }
    }

    /// Through the proxy: CONNECT to the rendezvous, then (for an https
    /// URL) TLS, then the request.
    pub(super) fn through_proxy(&self, target: &str, until: Instant) -> Attempt {
        let Some(url) = self.settings.proxy.clone() else {
            return Local("no proxy".into());
        };
        let Some(p) = parse_proxy(&url) else {
            return Local("the proxy variable is not an http:// proxy URL".into());
        };
        let https = self.settings.url.starts_with("https://");
        let port = url_port(&self.settings.url, https);
        let mut tcp = match connect(&p.host, p.port, until) {
            Ok(t) => t,
            Err(Network(d)) => return Network(format!("the proxy: {d}")),
            Err(a) => return a,
        };
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
        let h = &self.settings.host;
        let asked = write!(
            tcp,
            "CONNECT {h}:{port} HTTP/1.1\r\nHost: {h}:{port}\r\n{auth}\r\n"
        )
        .and_then(|()| status(&mut tcp));
        match asked {
            Ok(200) => {}
            // The proxy wants credentials runwarden has not got (or not
            // these): that is no answer about what it lets out.
            Ok(407) => {
                return Local(
                    "the proxy asks for credentials (HTTP 407) the proxy variable does not hold"
                        .into(),
                );
            }
            Ok(s) => return Network(format!("the proxy refused the tunnel (HTTP {s})")),
            Err(e) => return Network(format!("the proxy: {}", what(&e))),
        }
        if https {
            match tls(tcp, h) {
                Ok(mut t) => deliver_get(&mut t, h, target, " through the proxy"),
                Err(a) => a,
            }
        } else {
            deliver_get(&mut tcp, h, target, " through the proxy")
        }
    }

    /// One DNS query for `<hex>.<tag>.<zone>` to each of `servers` in turn
    /// until one answers (any answer: the question is the message).
    pub(super) fn lookup(
        &self,
        servers: &[SocketAddr],
        hex: &str,
        tag: &str,
        until: Instant,
    ) -> Attempt {
        let Some(zone) = self.settings.dns_zone.as_deref() else {
            return Local("no dns-zone".into());
        };
        let q = dns::query(
            u16::from_be_bytes([hex.as_bytes()[0], hex.as_bytes()[1]]),
            &format!("{hex}.{tag}.{zone}"),
        );
        let mut missed: Vec<String> = Vec::new();
        for (i, server) in servers.iter().enumerate() {
            let bind = if server.is_ipv6() {
                "[::]:0"
            } else {
                "0.0.0.0:0"
            };
            let sock = match UdpSocket::bind(bind) {
                Ok(s) => s,
                Err(e) => return Local(format!("no UDP socket here: {e}")),
            };
            // Each address its share of what is left: one that stays
            // silent does not use up the others' time.
            let left =
                until.saturating_duration_since(Instant::now()) / (servers.len() - i).max(1) as u32;
            if left.is_zero() {
                break;
            }
            // Connected: a port nobody listens on comes back as
            // "connection refused" (ICMP), which an unconnected socket
            // never hears.
            let sent = sock
                .set_read_timeout(Some(left))
                .and_then(|()| sock.connect(server))
                .and_then(|()| sock.send(&q));
            if let Err(e) = sent {
                missed.push(format!("{server}: {}", what(&e)));
                continue;
            }
            let mut buf = [0u8; 512];
            let before = if missed.is_empty() {
                String::new()
            } else {
                format!(" (after {})", missed.join("; "))
            };
            match sock.recv(&mut buf) {
                // SERVFAIL, NOTIMP and REFUSED send glibc's resolver on to
                // the next server: a sender goes on too.
                Ok(n) if n >= 4 && matches!(buf[3] & 0x0f, 2 | 4 | 5) => {
                    missed.push(format!("{server} answered code {}", buf[3] & 0x0f));
                }
                Ok(n) if n >= 4 => {
                    return Network(format!(
                        "{server} answered (code {}){before}",
                        buf[3] & 0x0f
                    ));
                }
                Ok(_) => {
                    return Network(format!("{server} answered with a short packet{before}"));
                }
                Err(e) => missed.push(format!("{server}: {}", what(&e))),
            }
        }
        if missed.is_empty() {
            return Network("no time left to ask any server".into());
        }
        Network(missed.join("; "))
    }
}
