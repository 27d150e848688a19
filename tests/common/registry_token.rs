//! A token service for distribution's `auth: token` on loopback: the
//! bearer flow ghcr.io, Docker Hub and Harbor use, for the real
//! `docker-registry` of [`super::registries::DockerRegistry::token_auth`].
//! It takes basic auth for two users, `pusher` (every action asked for)
//! and `reader` (pull, and the catalog), and answers `{"token": …}`: a
//! JWT signed RS256 with a fresh key by `openssl`, whose `kid` is the
//! libtrust key id distribution looks the key up by.

use base64::Engine as _;
use runwarden::loopback::Listener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const SERVICE: &str = "rw-test-registry";
pub const ISSUER: &str = "rw-test-issuer";

/// Who may ask, and with which password.
pub const USERS: [(&str, &str); 2] = [("pusher", "push-pass-51c0"), ("reader", "read-pass-3f7a")];

pub struct TokenServer {
    /// The realm the registry names (`http://127.0.0.1:PORT/token`).
    pub realm: String,
    /// The certificate bundle the registry trusts.
    pub cert: PathBuf,
    _listener: Listener,
}

fn b64url(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

/// Runs `openssl args` with `input` on stdin; its stdout.
fn openssl(args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut c = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl runs");
    c.stdin.take().unwrap().write_all(input).unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "openssl {args:?} failed");
    out.stdout
}

/// libtrust's key id: the SHA-256 of the DER public key, its first 240
/// bits in base32, in groups of four joined by `:`.
fn key_id(cert: &Path) -> String {
    use sha2::Digest as _;
    let pem = openssl(
        &["x509", "-in", cert.to_str().unwrap(), "-pubkey", "-noout"],
        b"",
    );
    let der = openssl(&["pkey", "-pubin", "-outform", "DER"], &pem);
    let hash = sha2::Sha256::digest(&der);
    let b32 = base32(&hash[..30]);
    b32.as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(":")
}

/// RFC 4648 base32 without padding (30 bytes: 48 characters).
fn base32(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    let (mut buf, mut bits) = (0u32, 0);
    for &b in data {
        buf = (buf << 8) | b as u32;
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(A[((buf >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(A[((buf << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// The user a request's basic auth names, if its password is right.
fn user_of(req: &tiny_http::Request) -> Option<&'static str> {
    let auth = runwarden::loopback::header(req, "authorization")?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(auth.strip_prefix("Basic ")?)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    USERS
        .iter()
        .find(|(n, w)| *n == u && *w == p)
        .map(|(n, _)| *n)
}

/// The access a user gets for one `scope` (`type:name:actions`).
fn access(user: &str, scope: &str) -> Option<serde_json::Value> {
    let (kind, rest) = scope.split_once(':')?;
    let (name, actions) = rest.rsplit_once(':')?;
    let granted: Vec<&str> = actions
        .split(',')
        .filter(|a| user == "pusher" || *a == "pull" || kind == "registry")
        .collect();
    Some(serde_json::json!({ "type": kind, "name": name, "actions": granted }))
}

impl TokenServer {
    pub fn start(dir: &Path) -> TokenServer {
        let key = dir.join("token-key.pem");
        let cert = dir.join("token-cert.pem");
        let ok = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=rw-token",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success());
        let kid = key_id(&cert);
        let key_path = key.to_str().unwrap().to_string();
        let listener = Listener::start(move |req, _| {
            let q = runwarden::loopback::query(req.url());
            let Some(user) = user_of(&req) else {
                let _ = req.respond(tiny_http::Response::from_string("{}").with_status_code(401));
                return;
            };
            let scope = q.get("scope").cloned().unwrap_or_default();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let header = serde_json::json!({ "typ": "JWT", "alg": "RS256", "kid": kid });
            let claims = serde_json::json!({
                "iss": ISSUER, "sub": user, "aud": SERVICE,
                "exp": now + 300, "nbf": now - 10, "iat": now,
                "jti": runwarden::nonce::Nonce::generate().unwrap().hex(),
                "access": access(user, &scope).into_iter().collect::<Vec<_>>(),
            });
            let body = format!(
                "{}.{}",
                b64url(header.to_string().as_bytes()),
                b64url(claims.to_string().as_bytes())
            );
            let sig = openssl(&["dgst", "-sha256", "-sign", &key_path], body.as_bytes());
            let token = format!("{body}.{}", b64url(&sig));
            let answer = serde_json::json!({ "token": token }).to_string();
            let _ = req.respond(tiny_http::Response::from_string(answer).with_status_code(200));
        })
        .unwrap();
        TokenServer {
            realm: format!("{}/token", listener.base()),
            cert,
            _listener: listener,
        }
    }
}
