//! `type: network-egress`: what the runner's network lets out, proven from
//! outside. Run A tries to deliver each carrier's nonce to a rendezvous
//! (`runwarden rendezvous`, src/rendezvous/) through that carrier: HTTPS
//! straight to it, through the environment's proxy, plain HTTP on another
//! port, a DNS lookup through the system resolver, DNS straight to it, raw
//! TCP. Run B asks the rendezvous, with a read token, which nonces
//! arrived. A nonce that arrived is an open channel, whatever A saw of
//! its attempt (a connection that seemed to fail may still have
//! delivered); one that did not is PASS with what A saw (refused, reset,
//! timed out) in the detail.
//!
//! Nothing is planted anywhere that lasts beyond the rendezvous's own
//! memory (bounded, an hour): there is nothing to clean up. The control
//! instance is a loopback rendezvous with its own proxy
//! ([`crate::loopback::proxy`]) and its own resolver address (the
//! rendezvous itself), driven by the same delivery and recovery code.

mod deliver;
mod surface;

use super::RecoverOutcome;
use super::carrier::carriers;
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, Request};
use crate::nonce::Nonce;
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

carriers! {
    /// The network's carriers: ways out to the rendezvous.
    pub enum Egress {
        HttpsDirect = "https-direct", Transient, "the nonce in the path of a request straight to the rendezvous URL, whatever proxy the environment names";
        HttpsProxy = "https-proxy", Transient, "the nonce in a request to the rendezvous through the environment's HTTPS_PROXY or HTTP_PROXY (CONNECT)";
        HttpPlain = "http-plain", Transient, "the nonce in a plain HTTP request to the rendezvous's host on another port (`plain-port`, 80)";
        DnsQuery = "dns-query", Transient, "a lookup of <nonce>.q.<dns-zone> through the system resolver: the exfiltration that passes firewalls allowing DNS";
        DnsDirect = "dns-direct", Transient, "a DNS query for <nonce>.d.<dns-zone> over UDP straight to the rendezvous (`dns-port`, 53), bypassing the resolver";
        TcpRaw = "tcp-raw", Transient, "the nonce on a raw TCP connection to the rendezvous's host (`tcp-port`, 7474)";
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The rendezvous's base URL, ending in `/`: deliveries and reads.
    url: String,
    /// Its host, for the other carriers.
    host: String,
    /// The variable holding run B's read token.
    token_env: Option<String>,
    /// The read token, taken from `token_env` when the config is read (the
    /// runs get no environment); `None` when it was not set.
    token: Option<String>,
    plain_port: u16,
    tcp_port: u16,
    dns_zone: Option<String>,
    dns_port: u16,
    /// The control's resolver, instead of the system's.
    resolver: Option<String>,
    /// The proxy `https-proxy` goes through: the environment's
    /// `HTTPS_PROXY` (else `HTTP_PROXY`, either case) when the config is
    /// read, or the control's own.
    proxy: Option<String>,
    control: bool,
}

/// A journal entry: there is none. Nothing a delivery makes outlives the
/// rendezvous's memory, so run A journals nothing, and no journal line
/// parses as one of these (cleanup leaves every line alone).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Entry {}

impl std::fmt::Display for Entry {
    fn fmt(&self, _f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

/// What recovery looks for: a plant's nonce with when run A began to try
/// (`{"nonce", "at_ms"}`, Unix milliseconds, this machine's clock), or a
/// needle derived in a later job (no receipt): the nonce alone.
#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Sought {
    Tried {
        nonce: Nonce,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_ms: Option<i64>,
    },
    Nonce(Nonce),
}

impl super::Needle for Sought {
    fn of_nonce(nonce: &Nonce) -> Option<Sought> {
        Some(Sought::Nonce(*nonce))
    }
}

/// An open network, with the rendezvous outside it.
pub struct NetworkEgress {
    settings: Settings,
    client: LazyClient,
}

/// The host of an `http(s)://` URL.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_string())
}

fn port(opts: &mut Options<'_>, key: &str, default: u16) -> Result<u16, ConfigError> {
    match opts.string(key)? {
        None => Ok(default),
        Some((v, pos)) => v
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| opts.error(pos, format!("`{key}`: a port, 1 to 65535"))),
    }
}

impl NetworkEgress {
    /// Run B's read token (`Unsupported` when there is none here).
    fn token(&self) -> Result<String, Fault> {
        self.settings.token.clone().ok_or_else(|| {
            Fault::unsupported(format!(
                "${} (`token-env`) was not set: run B has no read token for the rendezvous",
                escape::line(self.settings.token_env.as_deref().unwrap_or(""))
            ))
        })
    }

    /// What the rendezvous says arrived of one nonce, tried by run A at
    /// `at_ms` (Unix milliseconds, this machine's clock) when the plant
    /// says. `carrier`: the nonce's.
    fn seen(&self, hex: &str, at_ms: Option<i64>, carrier: Egress) -> RecoverOutcome {
        let failed = |reason: String| RecoverOutcome::Error { reason };
        let token = match self.token() {
            Ok(t) => t,
            Err(e) => return failed(e.into_reason()),
        };
        let client = match self.client.get() {
            Ok(c) => c,
            Err(e) => return failed(e.into_reason()),
        };
        let url = format!("{}v1/seen/{hex}", self.settings.url);
        let shown = escape::bytes(self.settings.url.as_bytes());
        let sent_ms = crate::rendezvous::store::now_ms();
        let resp = match client.send(
            &Request::new(Method::GET, &url)
                .secret_header("authorization", format!("Bearer {token}")),
        ) {
            Ok(r) => r,
            Err(f) => return failed(format!("run B cannot reach the rendezvous {shown}: {f}")),
        };
        let rtt_ms = crate::rendezvous::store::now_ms() - sent_ms;
        match resp.status {
            200 => {}
            401 => {
                return failed(format!(
                    "the rendezvous {shown} refused run B's read token (HTTP 401)"
                ));
            }
            s => return failed(format!("the rendezvous {shown} answered HTTP {s}")),
        }
        let v = resp.json().ok().unwrap_or(Value::Null);
        let num = |k: &str| v[k].as_i64();
        let (Some(seen), Some(now_ms), Some(since_ms), Some(max_age)) = (
            v["seen"].as_array(),
            num("now_ms"),
            num("since_ms"),
            num("max_age"),
        ) else {
            return failed(format!(
                "the rendezvous {shown} answered without `seen`, `now_ms`, `since_ms` and `max_age`: not a rendezvous"
            ));
        };
        if let (true, Some(at_ms)) = (seen.is_empty(), at_ms) {
            // Run A's attempt on the rendezvous's clock: the two clocks'
            // difference as this read saw it, give or take its round trip.
            let margin = rtt_ms + 250;
            let at = at_ms + (now_ms - (sent_ms + rtt_ms / 2));
            let doubt = if since_ms >= at - margin {
                Some("restarted after run A tried (it remembers nothing from before)".to_string())
            } else if now_ms - at >= max_age * 1000 - 60_000 {
                Some(format!(
                    "keeps nonces {max_age} s, and run A tried about that long ago"
                ))
            } else if num("evicted_ms").is_some_and(|e| e >= at - margin) {
                Some("dropped nonces for space since run A tried (a flood?)".to_string())
            } else if num("dropped_ms").is_some_and(|d| d >= at - margin) {
                Some(
                    "turned deliveries away unread since run A tried (all its workers busy)"
                        .to_string(),
                )
            } else {
                None
            };
            if let Some(why) = doubt {
                return failed(format!(
                    "the rendezvous {shown} {why}: not finding the nonce proves nothing"
                ));
            }
        }
        // A carrier the rendezvous does not serve could not arrive: run A's
        // refused or unanswered attempt then proves nothing of the network.
        if seen.is_empty()
            && let Some(why) = unserved(
                &v["serves"],
                carrier,
                self.settings.dns_zone.as_deref(),
                self.settings.plain_port,
                deliver::url_port(
                    &self.settings.url,
                    self.settings.url.starts_with("https://"),
                ),
            )
        {
            return failed(format!(
                "the rendezvous {shown} {why}: not finding the nonce proves nothing"
            ));
        }
        match seen.first() {
            Some(a) => RecoverOutcome::Found {
                detail: format!(
                    "the rendezvous received the nonce ({} at {})",
                    escape::line(a["carrier"].as_str().unwrap_or("?")),
                    escape::line(a["at"].as_str().unwrap_or("?"))
                ),
            },
            None => RecoverOutcome::NotFound {
                detail: format!("the rendezvous {shown} never received the nonce"),
            },
        }
    }
}

/// Why the rendezvous (by what its read says it serves) could not have
/// received `carrier`, if it could not.
fn unserved(
    serves: &Value,
    carrier: Egress,
    zone: Option<&str>,
    plain_port: u16,
    url_port: u16,
) -> Option<String> {
    if serves.is_null() {
        return matches!(
            carrier,
            Egress::TcpRaw | Egress::DnsQuery | Egress::DnsDirect | Egress::HttpPlain
        )
        .then(|| "does not say what it serves (an older rendezvous)".to_string());
    }
    match carrier {
        // Reached straight (the rendezvous URL's port is the one it is
        // bound to, so no front maps ports): then `plain-port` must be that
        // port. Behind a front, which ports it forwards is not the
        // rendezvous's to say.
        Egress::HttpPlain
            if serves["http_port"].as_u64() == Some(u64::from(url_port))
                && serves["http_port"].as_u64() != Some(u64::from(plain_port)) =>
        {
            Some(format!(
                "listens for HTTP on port {}, not on `plain-port` {plain_port} (serve it there, or set `plain-port` to where it listens)",
                serves["http_port"].as_u64().unwrap_or(0)
            ))
        }
        Egress::TcpRaw if serves["tcp"] != Value::Bool(true) => {
            Some("does not serve raw TCP (start it with `--tcp ADDR:PORT`)".into())
        }
        Egress::DnsQuery | Egress::DnsDirect if serves["dns_zone"].as_str() != zone => {
            Some(format!(
                "does not answer DNS for {} (start it with `--dns ADDR:PORT --zone {}`)",
                escape::bytes(zone.unwrap_or("").as_bytes()),
                escape::line(zone.unwrap_or("ZONE"))
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::Sought;
    use crate::nonce::Nonce;
    use crate::surface::Needle as _;
    use serde_json::json;

    #[test]
    fn needles_keep_their_wire_form() {
        let nonce = Nonce([7; 16]);
        let hex = nonce.hex();
        let planted = Sought::Tried {
            nonce,
            at_ms: Some(5),
        };
        assert_eq!(
            serde_json::to_value(&planted).unwrap(),
            json!({ "nonce": hex, "at_ms": 5 })
        );
        let derived = Sought::of_nonce(&nonce).unwrap();
        assert_eq!(serde_json::to_value(&derived).unwrap(), json!(hex));
        for (v, at) in [
            (json!({ "nonce": hex, "at_ms": 5 }), Some(5)),
            (json!({ "nonce": hex }), None),
            (json!(hex), None),
        ] {
            match serde_json::from_value::<Sought>(v).unwrap() {
                Sought::Tried { nonce: n, at_ms } => assert_eq!((n, at_ms), (nonce, at)),
                Sought::Nonce(n) => assert_eq!((n, None), (nonce, at)),
            }
        }
    }
}
