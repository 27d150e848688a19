//! The network-egress surface type's operations: its config and settings,
//! its control, run A's delivery attempt per carrier, and run B's question
//! to the rendezvous per carrier. It journals nothing: finding, owning and
//! cleaning have nothing to do.

use super::deliver::{Attempt, DEADLINE, connect, deliver_get, resolve, what};
use super::{Egress, Entry, NetworkEgress, Settings, Sought, host_of, port};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, check_url};
use crate::surface::routes::{Kind, Proof, Recovered, Route};
use crate::surface::{
    About, CleanupOutcome, Control, Job, Journal, Notice, PlantOutcome, RunCtx, Want, Watch,
};
use Attempt::{Local, Network};
use std::io::Write;
use std::time::Instant;

/// Run B's one route ([`crate::surface::routes`]): the rendezvous's
/// record of what reached it, asked for the nonce.
const RENDEZVOUS: &str = "rendezvous";

/// Why the rendezvous's silence is current: `NetworkEgress::seen` counts
/// a miss only when the record reaches back to when run A tried (no
/// restart, expiry, eviction or turned-away delivery since).
const KEPT: &str = "the rendezvous's own record, kept since run A tried";

impl crate::surface::Surface for NetworkEgress {
    const NAME: &'static str = "network-egress";
    const DESCRIPTION: &'static str = "what the runner's network lets out: each carrier delivers its nonce to a rendezvous outside it (`runwarden rendezvous`), which run B asks with a read token";
    const KEYS: &'static [&'static str] = &[
        "rendezvous",
        "token-env",
        "allow-http",
        "dns-zone",
        "plain-port",
        "tcp-port",
        "dns-port",
    ];
    const WATCH: Watch<Egress> =
        Watch::No("a delivery leaves the runner: watch mode sees no listing of it");
    const ROUTES: &'static [Route<Egress>] = &[Route {
        name: RENDEZVOUS,
        kind: Kind::ById,
        carriers: Egress::ALL,
    }];
    type Carrier = Egress;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Sought;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
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
        let Some(token_env) = crate::surface::env_name(&mut opts, "token-env")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "a network-egress surface needs `token-env:` (the variable holding the rendezvous's read token, for run B)",
            ));
        };
        crate::github::to_github_only(&opts, "token-env", &token_env, &url)?;
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
        Ok(Settings {
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
        })
    }

    fn about(s: &Settings) -> About<Egress> {
        let mut about = About::new(format!("to {}", escape::bytes(s.url.as_bytes())))
            .fact("rendezvous", escape::bytes(s.url.as_bytes()));
        if let Some(v) = &s.token_env {
            about = about.fact("read-token", escape::line(v));
        }
        about = about.fact(
            "dns-zone",
            s.dns_zone.as_deref().map_or("none".into(), escape::line),
        );
        if s.proxy.is_none() {
            about = about.unavailable_of(
                Egress::HttpsProxy,
                "no HTTPS_PROXY or HTTP_PROXY is set: there is no proxy to go through",
            );
        }
        if s.dns_zone.is_none() {
            let why = "no `dns-zone` in the config: the rendezvous answers DNS only for its zone";
            about = about
                .unavailable_of(Egress::DnsQuery, why)
                .unavailable_of(Egress::DnsDirect, why);
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
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
        Ok(Control::served(s, (rv, proxy)))
    }

    fn open(s: Settings) -> Result<NetworkEgress, Fault> {
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
        Ok(NetworkEgress {
            settings: s,
            client: LazyClient::new(secrets),
        })
    }

    /// Run A: one delivery attempt per carrier, the whole of it within
    /// [`DEADLINE`]. What the network answered (delivered, refused, reset,
    /// timed out, unreachable) plants the carrier, with what run A saw in the
    /// detail: run B's question to the rendezvous decides the verdict, since a
    /// connection that seemed to fail may still have delivered. What says
    /// nothing about the network (a proxy variable that is no URL, no root
    /// certificates, a name that does not resolve here, an answer that is not
    /// the rendezvous's) is a plant that failed: ERROR, never a PASS.
    fn plant_one(
        &self,
        _ctx: &RunCtx<'_>,
        job: &Job<Egress>,
        _journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Sought> {
        // Nothing is created that outlives the rendezvous's memory: there
        // is no journal entry to make.
        let carrier = job.carrier;
        let hex = job.nonce.hex();
        // When run A began to try, before anything could arrive: run B
        // checks the rendezvous remembered from before then.
        let at_ms = crate::rendezvous::store::now_ms();
        let until = Instant::now() + DEADLINE;
        let target = format!("{}d/{carrier}/{hex}", self.path_prefix());
        let host = self.settings.host.as_str();
        let attempt = match carrier {
            Egress::HttpsDirect => self.direct(&target, until),
            Egress::HttpPlain => match connect(host, self.settings.plain_port, until) {
                Ok(mut s) => deliver_get(
                    &mut s,
                    host,
                    &target,
                    &format!(", port {}", self.settings.plain_port),
                ),
                Err(a) => a,
            },
            Egress::HttpsProxy => self.through_proxy(&target, until),
            Egress::TcpRaw => match connect(host, self.settings.tcp_port, until) {
                Ok(mut s) => match s
                    .write_all(format!("runwarden {carrier} {hex}\n").as_bytes())
                    .and_then(|()| s.stream.shutdown(std::net::Shutdown::Write))
                {
                    Ok(()) => Network(format!("sent on port {}", self.settings.tcp_port)),
                    Err(e) => Network(what(&e)),
                },
                Err(a) => a,
            },
            Egress::DnsQuery => match self.resolvers() {
                Ok(rs) => self.lookup(&rs, &hex, "q", until),
                Err(a) => a,
            },
            Egress::DnsDirect => match resolve(host, self.settings.dns_port) {
                Ok(addrs) => self.lookup(&addrs, &hex, "d", until),
                Err(a) => a,
            },
        };
        match attempt {
            Network(d) => PlantOutcome::Planted {
                needle: Sought::Tried {
                    nonce: job.nonce,
                    at_ms: Some(at_ms),
                },
                persistence: None,
                detail: format!("run A's attempt: {d}"),
            },
            Local(reason) => PlantOutcome::Error { reason },
        }
    }

    fn recover(
        &self,
        _ctx: &RunCtx<'_>,
        wanted: &[Want<Egress, Sought>],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<Recovered> {
        wanted
            .iter()
            .map(|w| {
                // A plant's needle says when run A tried; a needle derived
                // in a later job (no receipt) is the nonce alone.
                let (nonce, at) = match &w.needle {
                    Sought::Tried { nonce, at_ms } => (nonce, *at_ms),
                    Sought::Nonce(nonce) => (nonce, None),
                };
                let o = self.seen(&nonce.hex(), at, w.carrier);
                match (&w.needle, at) {
                    // The rendezvous's record is current for a miss only
                    // back to when run A tried: a plant's needle without
                    // that time (no plant reports one) shows nothing.
                    (Sought::Tried { .. }, None) => o.into(),
                    // (A derived needle's miss is the kernel's no-receipt
                    // rule's to judge: never a PASS.)
                    _ => Recovered::via(o, RENDEZVOUS, Proof::Protocol(KEPT)),
                }
            })
            .collect()
    }

    fn find(
        &self,
        _ctx: &RunCtx<'_>,
        _jobs: &[Job<Egress>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        Ok(vec![].into())
    }

    fn owns(&self, _ctx: &RunCtx<'_>, _entry: &Entry) -> Result<(), Fault> {
        Err(Fault::invalid(
            "network-egress journals nothing: no entry is runwarden's",
        ))
    }

    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        match *entry {}
    }
}
