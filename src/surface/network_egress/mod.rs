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

use super::carrier::carriers;
use super::{
    Carrier, CleanupOutcome, Control, Notice, PlantJob, PlantOutcome, RecoverOutcome, RunCtx,
    SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, Request, check_url};
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub struct NetworkEgress;

carriers! {
    /// The network's carriers: ways out to the rendezvous.
    enum Egress {
        HttpsDirect = "https-direct", Transient, "the nonce in the path of a request straight to the rendezvous URL, whatever proxy the environment names";
        HttpsProxy = "https-proxy", Transient, "the nonce in a request to the rendezvous through the environment's HTTPS_PROXY or HTTP_PROXY (CONNECT)";
        HttpPlain = "http-plain", Transient, "the nonce in a plain HTTP request to the rendezvous's host on another port (`plain-port`, 80)";
        DnsQuery = "dns-query", Transient, "a lookup of <nonce>.q.<dns-zone> through the system resolver: the exfiltration that passes firewalls allowing DNS";
        DnsDirect = "dns-direct", Transient, "a DNS query for <nonce>.d.<dns-zone> over UDP straight to the rendezvous (`dns-port`, 53), bypassing the resolver";
        TcpRaw = "tcp-raw", Transient, "the nonce on a raw TCP connection to the rendezvous's host (`tcp-port`, 7474)";
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct Settings {
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

struct Instance {
    s: Settings,
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

impl SurfaceType for NetworkEgress {
    fn name(&self) -> &'static str {
        "network-egress"
    }

    fn description(&self) -> &'static str {
        "what the runner's network lets out: each carrier delivers its nonce to a rendezvous outside it (`runwarden rendezvous`), which run B asks with a read token"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "rendezvous",
            "token-env",
            "allow-http",
            "dns-zone",
            "plain-port",
            "tcp-port",
            "dns-port",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let Some((url, pos)) = opts.string("rendezvous")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "a network-egress surface needs `rendezvous:` (the URL of a `runwarden rendezvous` outside the runner's network)",
            ));
        };
        check_url(&url).map_err(|m| opts.error(pos, format!("`rendezvous`: {m}")))?;
        if url.contains('?') || url.contains('#') || url.contains('@') {
            return Err(opts.error(
                pos,
                "`rendezvous`: a base URL, with no credentials, query or fragment",
            ));
        }
        let host = host_of(&url).ok_or_else(|| opts.error(pos, "`rendezvous`: no host"))?;
        // Run B sends its read token there, and believes the answer: over
        // plain HTTP anything on the way could read the one and forge the
        // other. Loopback, or an explicit `allow-http: true` (a lab).
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !url.starts_with("https://") && !loopback && opts.bool("allow-http")? != Some(true) {
            return Err(opts.error(
                pos,
                "`rendezvous`: https:// (run B sends its read token there); `allow-http: true` allows plain HTTP on purpose",
            ));
        }
        let Some(token_env) = super::env_name(&mut opts, "token-env")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "a network-egress surface needs `token-env:` (the variable holding the rendezvous's read token, for run B)",
            ));
        };
        let dns_zone = match opts.string("dns-zone")? {
            Some((z, p)) => {
                let z = z.trim_end_matches('.').to_ascii_lowercase();
                if z.is_empty()
                    || z.len() > 200
                    || !z.split('.').all(|l| {
                        !l.is_empty()
                            && l.len() <= 63
                            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    })
                {
                    return Err(opts.error(p, "`dns-zone`: a domain name (`rv.example.org`)"));
                }
                Some(z)
            }
            None => None,
        };
        let token = opts.env(&token_env).filter(|t| !t.is_empty());
        let proxy = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"]
            .iter()
            .find_map(|v| opts.env(v).filter(|p| !p.is_empty()));
        let s = Settings {
            url: if url.ends_with('/') {
                url
            } else {
                format!("{url}/")
            },
            host,
            token_env: Some(token_env),
            token,
            plain_port: port(&mut opts, "plain-port", 80)?,
            tcp_port: port(&mut opts, "tcp-port", 7474)?,
            dns_zone,
            dns_port: port(&mut opts, "dns-port", 53)?,
            resolver: None,
            proxy,
            control: false,
        };
        Ok(serde_json::to_value(s).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, Fault> {
        let token = crate::loopback::secret()?;
        let rv = crate::rendezvous::Rendezvous::start(&crate::rendezvous::Options {
            http: "127.0.0.1:0".into(),
            dns: Some("127.0.0.1:0".into()),
            tcp: Some("127.0.0.1:0".into()),
            zone: Some("rendezvous.test".into()),
            token: token.clone(),
            max_nonces: 100,
            max_age: std::time::Duration::from_secs(3600),
        })?;
        let proxy = crate::loopback::proxy::Proxy::start()?;
        let dns_port = rv
            .dns_port
            .ok_or_else(|| Fault::broken("the control rendezvous has no DNS port"))?;
        let s = Settings {
            url: format!("http://127.0.0.1:{}/", rv.http_port),
            host: "127.0.0.1".into(),
            token_env: None,
            token: Some(token),
            plain_port: rv.http_port,
            tcp_port: rv
                .tcp_port
                .ok_or_else(|| Fault::broken("the control rendezvous has no TCP port"))?,
            dns_zone: Some("rendezvous.test".into()),
            dns_port,
            resolver: Some(format!("127.0.0.1:{dns_port}")),
            proxy: Some(proxy.url()),
            control: true,
        };
        Ok(Control::served(
            serde_json::to_value(s).expect("settings serialize"),
            (rv, proxy),
        ))
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        let mut f = vec![("rendezvous", escape::bytes(s.url.as_bytes()))];
        if let Some(v) = &s.token_env {
            f.push(("read-token", escape::line(v)));
        }
        f.push((
            "dns-zone",
            s.dns_zone.as_deref().map_or("none".into(), escape::line),
        ));
        f
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn crate::surface::Instance>, Fault> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|e| Fault::invalid(format!("bad network-egress settings: {e}")))?;
        // The token and a proxy's credentials are secrets from here on.
        let mut secrets: Vec<String> = s.token.iter().cloned().collect();
        if let Some(p) = &s.proxy {
            let authority = p.split("://").last().unwrap_or(p);
            if let Some((raw, _)) = authority.split('/').next().unwrap_or("").rsplit_once('@') {
                secrets.push(raw.to_string());
                secrets.push(crate::wire::percent_decode(raw));
            }
        }
        secrets.iter().for_each(|t| crate::redact::add(t));
        Ok(Box::new(Instance {
            s,
            client: LazyClient::new(secrets),
        }))
    }
}

impl Instance {
    /// Run B's read token (`Unsupported` when there is none here).
    fn token(&self) -> Result<String, Fault> {
        self.s.token.clone().ok_or_else(|| {
            Fault::unsupported(format!(
                "${} (`token-env`) was not set: run B has no read token for the rendezvous",
                escape::line(self.s.token_env.as_deref().unwrap_or(""))
            ))
        })
    }

    /// What the rendezvous says arrived of one nonce, tried by run A at
    /// `at_ms` (Unix milliseconds, this machine's clock) when the plant
    /// says. `carrier`: the nonce's (`None`: not one of this surface's).
    fn seen(&self, hex: &str, at_ms: Option<i64>, carrier: Option<Egress>) -> RecoverOutcome {
        let failed = |reason: String| RecoverOutcome::Error { reason };
        let token = match self.token() {
            Ok(t) => t,
            Err(e) => return failed(e.into_reason()),
        };
        let client = match self.client.get() {
            Ok(c) => c,
            Err(e) => return failed(e.into_reason()),
        };
        let url = format!("{}v1/seen/{hex}", self.s.url);
        let shown = escape::bytes(self.s.url.as_bytes());
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
                self.s.dns_zone.as_deref(),
                self.s.plain_port,
                deliver::url_port(&self.s.url, self.s.url.starts_with("https://")),
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
    carrier: Option<Egress>,
    zone: Option<&str>,
    plain_port: u16,
    url_port: u16,
) -> Option<String> {
    if serves.is_null() {
        return matches!(
            carrier,
            Some(Egress::TcpRaw | Egress::DnsQuery | Egress::DnsDirect | Egress::HttpPlain)
        )
        .then(|| "does not say what it serves (an older rendezvous)".to_string());
    }
    match carrier? {
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

impl crate::surface::Instance for Instance {
    fn unavailable(&self, carrier: &str) -> Option<String> {
        match Egress::parse(carrier)? {
            Egress::HttpsProxy if self.s.proxy.is_none() => {
                Some("no HTTPS_PROXY or HTTP_PROXY is set: there is no proxy to go through".into())
            }
            Egress::DnsQuery | Egress::DnsDirect if self.s.dns_zone.is_none() => Some(
                "no `dns-zone` in the config: the rendezvous answers DNS only for its zone".into(),
            ),
            _ => None,
        }
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        _created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        // Nothing is created that outlives the rendezvous's memory: there
        // is no journal entry to make.
        let _ = ctx;
        match Egress::parse(&job.carrier) {
            Some(carrier) => self.deliver(carrier, job),
            None => PlantOutcome::Error {
                reason: format!(
                    "not a carrier of network-egress: {}",
                    escape::line(&job.carrier)
                ),
            },
        }
    }

    fn recover(
        &self,
        _ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        wanted
            .iter()
            .map(|w| {
                // A plant's needle says when run A tried; a needle derived
                // in a later job (no receipt) is the nonce alone.
                let (nonce, at) = match w.needle.get("nonce") {
                    Some(n) => (n.clone(), w.needle.get("at_ms").and_then(Value::as_i64)),
                    None => (w.needle.clone(), None),
                };
                match serde_json::from_value::<crate::nonce::Nonce>(nonce) {
                    Ok(n) => self.seen(&n.hex(), at, Egress::parse(&w.carrier)),
                    Err(_) => RecoverOutcome::Error {
                        reason: "the plant's needle is not a nonce".into(),
                    },
                }
            })
            .collect()
    }

    fn find_planted(&self, _ctx: &RunCtx<'_>, _jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        Ok(vec![])
    }

    fn owns(&self, _ctx: &RunCtx<'_>, _entry: &Value) -> Result<(), Fault> {
        Err(Fault::invalid(
            "network-egress journals nothing: no entry is runwarden's",
        ))
    }

    fn cleanup(&self, _entry: &Value) -> CleanupOutcome {
        CleanupOutcome::Superseded
    }

    fn watch(&self) -> Result<&dyn super::Watchable, &'static str> {
        Err("a delivery leaves the runner: watch mode sees no listing of it")
    }

    fn describe(&self, _entry: &Value) -> String {
        format!("a delivery to {}", escape::bytes(self.s.url.as_bytes()))
    }
}
