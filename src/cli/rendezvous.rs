//! `runwarden rendezvous`: serves the nonces `network-egress` delivers
//! (see src/rendezvous/ and docs/surfaces/network-egress.md) until
//! SIGINT or SIGTERM.

use super::{Failure, note};
use crate::escape;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct RendezvousArgs {
    /// HTTP for deliveries and reads (put a TLS proxy in front of it for
    /// the `https-*` carriers).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: String,
    /// DNS over UDP (`dns-query`, `dns-direct`); needs --zone.
    #[arg(long, value_name = "ADDR:PORT")]
    pub dns: Option<String>,
    /// Raw TCP (`tcp-raw`).
    #[arg(long, value_name = "ADDR:PORT")]
    pub tcp: Option<String>,
    /// The zone DNS deliveries come under (delegated to this server).
    #[arg(long, value_name = "ZONE")]
    pub zone: Option<String>,
    /// The variable holding the read token (at least 16 characters).
    #[arg(long, value_name = "VAR")]
    pub token_env: String,
    /// Nonces kept at most (the oldest go first).
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_nonces: u64,
    /// Seconds a nonce is kept.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub max_age: u64,
}

pub(super) fn rendezvous(args: RendezvousArgs) -> Result<i32, Failure> {
    let token = std::env::var(&args.token_env)
        .ok()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Failure::Other(format!(
                "${} is not set: the read token comes from there",
                escape::line(&args.token_env)
            ))
        })?;
    crate::redact::add(&token);
    crate::signals::install();
    let r = crate::rendezvous::Rendezvous::start(&crate::rendezvous::Options {
        http: args.listen.clone(),
        dns: args.dns.clone(),
        tcp: args.tcp.clone(),
        zone: args.zone.clone(),
        token,
        max_nonces: args.max_nonces as usize,
        max_age: Duration::from_secs(args.max_age),
    })?;
    note(&format!(
        "rendezvous: HTTP on port {}{}{}; keeping at most {} nonces for {} s",
        r.http_port,
        r.dns_port
            .map(|p| format!(", DNS on UDP port {p}"))
            .unwrap_or_default(),
        r.tcp_port
            .map(|p| format!(", raw TCP on port {p}"))
            .unwrap_or_default(),
        args.max_nonces,
        args.max_age
    ));
    r.serve_until_stopped();
    Ok(0)
}
