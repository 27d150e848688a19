//! `type: network-egress` against a real `runwarden rendezvous` (the
//! library's server on its own addresses): every carrier open to it FAILs,
//! through a CONNECT proxy too; ports nobody listens on are PASS with what
//! run A saw; a rendezvous run B cannot read is ERROR; no proxy and no zone
//! are SKIPPED with why; no token or proxy password in any output. And, as
//! root, inside a network namespace whose only way out is a veth to the
//! rendezvous's host, with the namespace's own resolver (the rendezvous).

use crate::common::*;
use runwarden::loopback::proxy::Proxy;
use runwarden::rendezvous::{Options, Rendezvous};
use std::time::Duration;

const TOKEN: &str = "read-token-0123456789abcdef";
use runwarden::rendezvous::CARRIERS;

fn rendezvous(ip: &str, dns: Option<&str>, tcp: bool) -> Rendezvous {
    let r = Rendezvous::start(&Options {
        http: format!("{ip}:0"),
        dns: dns.map(String::from),
        tcp: tcp.then(|| format!("{ip}:0")),
        zone: Some("rv.test".into()),
        token: TOKEN.into(),
        max_nonces: 1000,
        max_age: Duration::from_secs(3600),
    })
    .unwrap();
    // A rendezvous that started as run A tried may have restarted in
    // between, as far as run B can tell (give or take its read's round
    // trip, long on a loaded machine): let it have been up a while.
    std::thread::sleep(Duration::from_millis(1500));
    r
}

/// A config for `rv` at `ip`; `ports` overrides the plain, TCP and DNS
/// ports.
fn config(ip: &str, rv: &Rendezvous, ports: Option<(u16, u16, u16)>, zone: bool) -> String {
    let (plain, tcp, dns) = ports.unwrap_or((
        rv.http_port,
        rv.tcp_port.unwrap_or(1),
        rv.dns_port.unwrap_or(1),
    ));
    format!(
        "version: 1\nsurfaces:\n  - name: egress\n    type: network-egress\n    rendezvous: http://{ip}:{}/\n    allow-http: true\n    token-env: RV_TOKEN\n    plain-port: \"{plain}\"\n    tcp-port: \"{tcp}\"\n    dns-port: \"{dns}\"\n{}",
        rv.http_port,
        if zone { "    dns-zone: rv.test\n" } else { "" }
    )
}

fn verdicts(p: &Probe) -> Vec<(String, String)> {
    CARRIERS
        .iter()
        .map(|c| (c.to_string(), p.verdict(&format!("egress:{c}"))))
        .collect()
}

fn want(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    CARRIERS
        .iter()
        .map(|c| {
            let v = pairs
                .iter()
                .find(|(k, _)| k == c)
                .map_or("pass", |(_, v)| *v);
            (c.to_string(), v.to_string())
        })
        .collect()
}

#[test]
fn every_carrier_open_to_the_rendezvous_fails_through_a_proxy_too() {
    let dir = tempfile::tempdir().unwrap();
    let rv = rendezvous("127.0.0.1", Some("127.0.0.1:0"), true);
    let proxy = Proxy::start().unwrap();
    let proxy_url = format!("http://agent:pr0xy-pa55word@127.0.0.1:{}", proxy.port);
    let p = run_config(
        dir.path(),
        &config("127.0.0.1", &rv, None, true),
        &[("RV_TOKEN", TOKEN), ("HTTPS_PROXY", &proxy_url)],
        &["probe"],
    );
    // The machine's resolver does not send rv.test here: dns-query is
    // closed on this host, and says what run A saw.
    assert_eq!(
        verdicts(&p),
        want(&[
            ("https-direct", "fail"),
            ("https-proxy", "fail"),
            ("http-plain", "fail"),
            ("dns-direct", "fail"),
            ("tcp-raw", "fail"),
        ]),
        "{}\n{}",
        p.stdout,
        p.stderr
    );
    assert_eq!(p.code, 1);
    assert!(
        p.finding("egress:https-proxy")["detail"]
            .as_str()
            .unwrap()
            .contains("through the proxy"),
        "{}",
        p.report
    );
    let report = p.report.to_string();
    for secret in [TOKEN, "pr0xy-pa55word"] {
        assert!(
            !p.stdout.contains(secret) && !p.stderr.contains(secret) && !report.contains(secret),
            "{secret} printed"
        );
    }
}

/// Ports the rendezvous does not serve (no `--tcp`, no `--dns`, a
/// `plain-port` it does not listen on): on loopback, where egress is
/// plainly open, run A's refused connections prove nothing, and no such
/// carrier is a PASS; the read says what the rendezvous serves.
#[test]
fn ports_the_rendezvous_does_not_serve_are_never_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let rv = rendezvous("127.0.0.1", None, false);
    // Three ports nobody listens on.
    use crate::common::registries::free_port;
    let (plain, tcp, dns) = (free_port(), free_port(), free_port());
    let p = run_config(
        dir.path(),
        &config("127.0.0.1", &rv, Some((plain, tcp, dns)), true),
        &[("RV_TOKEN", TOKEN)],
        &["probe"],
    );
    assert_eq!(
        verdicts(&p),
        want(&[
            ("https-direct", "fail"),
            ("https-proxy", "skipped"),
            ("http-plain", "error"),
            ("tcp-raw", "error"),
            ("dns-direct", "error"),
            ("dns-query", "error"),
        ]),
        "{}",
        p.stdout
    );
    let detail = |c: &str| p.finding(&format!("egress:{c}"))["detail"].to_string();
    assert!(
        detail("http-plain").contains(&format!("not on `plain-port` {plain}")),
        "{}",
        detail("http-plain")
    );
    assert!(
        detail("tcp-raw").contains("does not serve raw TCP (start it with `--tcp"),
        "{}",
        detail("tcp-raw")
    );
    assert!(
        detail("dns-direct").contains("does not answer DNS for"),
        "{}",
        detail("dns-direct")
    );
}

#[test]
fn a_rendezvous_run_b_cannot_read_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let rv = rendezvous("127.0.0.1", None, true);
    let cfg = config("127.0.0.1", &rv, None, false);
    // A token that is not the rendezvous's.
    let p = run_config(
        dir.path(),
        &cfg,
        &[("RV_TOKEN", "not-the-token-at-all")],
        &["probe"],
    );
    let d = p.finding("egress:tcp-raw")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(p.verdict("egress:tcp-raw"), "error", "{d}");
    assert!(d.contains("refused run B's read token"), "{d}");
    // No token at all.
    let p = run_config(dir.path(), &cfg, &[], &["probe"]);
    assert_eq!(p.verdict("egress:tcp-raw"), "error");
    // Gone: nothing to ask.
    drop(rv);
    let p = run_config(dir.path(), &cfg, &[("RV_TOKEN", TOKEN)], &["probe"]);
    let d = p.finding("egress:https-direct")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(p.verdict("egress:https-direct"), "error", "{d}");
    assert!(d.contains("cannot reach the rendezvous"), "{d}");
    assert_eq!(p.code, 1);
}

#[test]
fn no_proxy_and_no_zone_are_skipped_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let rv = rendezvous("127.0.0.1", None, true);
    let p = run_config(
        dir.path(),
        &config("127.0.0.1", &rv, None, false),
        &[("RV_TOKEN", TOKEN)],
        &["probe"],
    );
    for (c, why) in [
        ("https-proxy", "no HTTPS_PROXY"),
        ("dns-query", "dns-zone"),
        ("dns-direct", "dns-zone"),
    ] {
        assert_eq!(p.verdict(&format!("egress:{c}")), "skipped");
        assert!(
            p.finding(&format!("egress:{c}"))["detail"]
                .as_str()
                .unwrap()
                .contains(why)
        );
    }
}

/// A network namespace joined to this one by a veth pair, removed on drop.
struct Netns {
    name: String,
    host_ip: String,
}

fn ip(args: &[&str]) {
    let st = std::process::Command::new("ip")
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "ip {args:?}");
}

impl Netns {
    fn new() -> Netns {
        // One id per namespace, not per process: the tests that make one
        // run in parallel threads, and two of the same name collide.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 3;
        let id = (std::process::id() % 3000) * 3 + n;
        let name = format!("rw-egress-{id}");
        let (h, n) = (format!("rwh{id}"), format!("rwn{id}"));
        let net = format!("10.{}.{}", 100 + id / 250 % 100, id % 250);
        // A leftover of a killed run, if any (quiet: usually there is none).
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .output();
        ip(&["netns", "add", &name]);
        ip(&["link", "add", &h, "type", "veth", "peer", "name", &n]);
        ip(&["link", "set", &n, "netns", &name]);
        ip(&["addr", "add", &format!("{net}.1/24"), "dev", &h]);
        ip(&["link", "set", &h, "up"]);
        ip(&[
            "netns",
            "exec",
            &name,
            "ip",
            "addr",
            "add",
            &format!("{net}.2/24"),
            "dev",
            &n,
        ]);
        ip(&["netns", "exec", &name, "ip", "link", "set", &n, "up"]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        // `ip netns exec` mounts /etc/netns/NAME/resolv.conf over the
        // namespace's /etc/resolv.conf: its system resolver.
        let etc = format!("/etc/netns/{name}");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            format!("{etc}/resolv.conf"),
            format!("nameserver {net}.1\n"),
        )
        .unwrap();
        Netns {
            name,
            host_ip: format!("{net}.1"),
        }
    }
}

impl Netns {
    /// `runwarden probe` of `config` inside the namespace, as a run there
    /// starts it (the rendezvous token in the environment).
    fn probe(&self, config: &str) -> Probe {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("runwarden.yml");
        std::fs::write(&cfg, config).unwrap();
        let report = dir.path().join("report.json");
        let mut c = std::process::Command::new("ip");
        strip_runner_env(&mut c);
        let out = c
            .args([
                "netns",
                "exec",
                &self.name,
                env!("CARGO_BIN_EXE_runwarden"),
                "probe",
                "--config",
            ])
            .arg(&cfg)
            .arg("--report")
            .arg(&report)
            .env("RV_TOKEN", TOKEN)
            .env("TMPDIR", dir.path())
            .output()
            .unwrap();
        finish(out, &report)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.name));
    }
}

#[test]
fn inside_a_namespace_whose_only_way_out_is_the_rendezvous_host() {
    if needs_root("network namespaces") {
        return;
    }
    let ns = Netns::new();
    // DNS on port 53 of the host's end: the namespace's resolver is the
    // rendezvous itself, so a lookup through it delivers.
    let rv = rendezvous(&ns.host_ip, Some(&format!("{}:53", ns.host_ip)), true);
    let p = ns.probe(&config(&ns.host_ip, &rv, None, true));
    assert_eq!(
        verdicts(&p),
        want(&[
            ("https-direct", "fail"),
            ("https-proxy", "skipped"),
            ("http-plain", "fail"),
            ("dns-query", "fail"),
            ("dns-direct", "fail"),
            ("tcp-raw", "fail"),
        ]),
        "{}\n{}",
        p.stdout,
        p.stderr
    );
    // The namespace has no other way out: a rendezvous address outside
    // it is unreachable from there.
    drop(rv);
}

#[test]
fn a_rendezvous_restarted_after_the_plant_is_no_pass() {
    let dir = tempfile::tempdir().unwrap();
    let rv = rendezvous("127.0.0.1", None, true);
    let (http, tcp) = (rv.http_port, rv.tcp_port.unwrap());
    // Closed ports for the rest: nothing arrives, so only the restart
    // can tell a look from no look.
    let cfg = config("127.0.0.1", &rv, Some((1, tcp, 1)), false);
    let env = [("RV_TOKEN", TOKEN)];
    let p = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "egress-1"]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    // The same addresses, a new instance that remembers nothing.
    drop(rv);
    std::thread::sleep(Duration::from_millis(1100));
    let _rv = Rendezvous::start(&Options {
        http: format!("127.0.0.1:{http}"),
        dns: None,
        tcp: Some(format!("127.0.0.1:{tcp}")),
        zone: None,
        token: TOKEN.into(),
        max_nonces: 10,
        max_age: Duration::from_secs(3600),
    })
    .unwrap();
    let p = run_config(
        dir.path(),
        &cfg,
        &env,
        &["recover", "--probe-id", "egress-1"],
    );
    for c in ["http-plain", "tcp-raw"] {
        let d = p.finding(&format!("egress:{c}"))["detail"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(p.verdict(&format!("egress:{c}")), "error", "{d}");
        assert!(d.contains("restarted"), "{d}");
    }
}

#[test]
fn an_answer_that_is_not_the_rendezvous_is_an_error_and_so_is_a_flood() {
    let dir = tempfile::tempdir().unwrap();
    // Port 80 of a host that redirects everything (as a TLS proxy's plain
    // port does by default): egress works, but no rendezvous heard it.
    let redirect = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = redirect.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut c in redirect.incoming().flatten() {
            // The whole request head, then the redirect.
            let mut head = Vec::new();
            let mut buf = [0u8; 256];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = c.write_all(b"HTTP/1.1 308 Permanent Redirect\r\nLocation: https://rv/\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let rv = Rendezvous::start(&Options {
        http: "127.0.0.1:0".into(),
        dns: None,
        tcp: Some("127.0.0.1:0".into()),
        zone: None,
        token: TOKEN.into(),
        max_nonces: 10,
        max_age: Duration::from_secs(3600),
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let cfg = config(
        "127.0.0.1",
        &rv,
        Some((port, rv.tcp_port.unwrap(), 1)),
        false,
    );
    let env = [("RV_TOKEN", TOKEN)];
    // The plant of http-plain failed: the receipt says so.
    let p = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "egress-2"]);
    assert!(p.stderr.contains("wrote the receipt"), "{}", p.stderr);
    // Someone floods the rendezvous, which keeps 10 nonces.
    for i in 0..50u32 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", rv.http_port)).unwrap();
        use std::io::{Read, Write};
        write!(s, "GET /d/tcp-raw/{i:032x} HTTP/1.1\r\nHost: rv\r\n\r\n").unwrap();
        let _ = s.read(&mut [0u8; 256]);
    }
    let p = run_config(
        dir.path(),
        &cfg,
        &env,
        &["recover", "--probe-id", "egress-2"],
    );
    let detail = |c: &str| {
        p.finding(&format!("egress:{c}"))["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(p.verdict("egress:http-plain"), "error");
    assert!(
        detail("http-plain").contains("HTTP 308"),
        "{}",
        detail("http-plain")
    );
    // tcp-raw's nonce was delivered, then pushed out by the flood: no
    // PASS for a miss the rendezvous cannot vouch for.
    assert_eq!(
        p.verdict("egress:tcp-raw"),
        "error",
        "{}",
        detail("tcp-raw")
    );
    assert!(
        detail("tcp-raw").contains("dropped nonces for space"),
        "{}",
        detail("tcp-raw")
    );
}

#[test]
fn a_plain_http_rendezvous_needs_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("runwarden.yml");
    std::fs::write(
        &cfg,
        "version: 1\nsurfaces:\n  - name: egress\n    type: network-egress\n    rendezvous: http://rv.example.org/\n    token-env: RV_TOKEN\n",
    )
    .unwrap();
    let out = bin().arg("check-config").arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("allow-http"));
}

/// The namespace's resolv.conf names a first nameserver the network turns
/// away (a `prohibit` route: what a firewall's reject does) and a second
/// that answers: a sender falls back to the second, as glibc's resolver
/// does, and so does run A; the detail says which answered.
#[test]
fn dns_query_tries_every_nameserver_the_system_would() {
    if needs_root("network namespaces") {
        return;
    }
    let ns = Netns::new();
    let blocked = format!("{}.9", ns.host_ip.rsplit_once('.').unwrap().0);
    std::fs::write(
        format!("/etc/netns/{}/resolv.conf", ns.name),
        format!("nameserver {blocked}\nnameserver {}\n", ns.host_ip),
    )
    .unwrap();
    ip(&[
        "netns",
        "exec",
        &ns.name,
        "ip",
        "route",
        "add",
        "prohibit",
        &format!("{blocked}/32"),
    ]);
    let rv = rendezvous(&ns.host_ip, Some(&format!("{}:53", ns.host_ip)), true);
    let p = ns.probe(&config(&ns.host_ip, &rv, None, true));
    assert_eq!(
        p.verdict("egress:dns-query"),
        "fail",
        "{}\n{}",
        p.stdout,
        p.stderr
    );
    let d = p.finding("egress:dns-query")["detail"].to_string();
    assert!(d.contains(&format!("{}:53 answered", ns.host_ip)), "{d}");
    assert!(d.contains(&format!("after {blocked}:53")), "{d}");
    drop(rv);
}

/// The closed case, with real parts: run A plants inside a network
/// namespace whose route to the rendezvous's host is prohibited (what a
/// firewall's reject does), run B reads from outside it, and the
/// rendezvous serves every carrier: each is PASS, with what run A saw.
#[test]
fn a_network_that_turns_every_carrier_away_is_pass() {
    if needs_root("network namespaces") {
        return;
    }
    let ns = Netns::new();
    let rv = rendezvous(&ns.host_ip, Some(&format!("{}:53", ns.host_ip)), true);
    ip(&[
        "netns",
        "exec",
        &ns.name,
        "ip",
        "route",
        "add",
        "prohibit",
        &format!("{}/32", ns.host_ip),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("runwarden.yml");
    std::fs::write(&cfg, config(&ns.host_ip, &rv, None, true)).unwrap();
    let mut c = std::process::Command::new("ip");
    strip_runner_env(&mut c);
    let out = c
        .args([
            "netns",
            "exec",
            &ns.name,
            env!("CARGO_BIN_EXE_runwarden"),
            "plant",
            "--probe-id",
            "eg-closed",
            "--config",
        ])
        .arg(&cfg)
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let p = run_config(
        dir.path(),
        &std::fs::read_to_string(&cfg).unwrap(),
        &[("RV_TOKEN", TOKEN)],
        &["recover", "--probe-id", "eg-closed"],
    );
    assert_eq!(
        verdicts(&p),
        want(&[("https-proxy", "skipped")]),
        "{}\n{}",
        p.stdout,
        p.stderr
    );
    drop(rv);
}
