//! The one redaction layer: every byte from a child process (runs A, B and
//! cleanup, git) or a server passes through [`text`], [`bytes`] or
//! [`value`] before it is stored anywhere (a detail, a notice, an error,
//! the report, the receipt, the summary, SARIF, annotations, outputs).
//!
//! The secret set is process-wide and only grows: every credential
//! runwarden uses or finds is added where it enters ([`add`] for a bare
//! secret, [`add_basic`] for a user and password, [`add_header`] for a
//! header value such as a checkout's `extraheader`). Each secret is
//! removed in every form it can take in a message:
//! - raw;
//! - base64 (standard and URL-safe alphabets), also as a substring of a
//!   longer encoded string at any of the three byte alignments (a token
//!   inside `base64("x-access-token:" + token)`);
//! - percent-encoded (upper- and lowercase hex), as in a URL;
//! - JSON-escaped, where that differs from raw.
//!
//! URL userinfo (`scheme://user:password@`) is removed wherever it
//! appears, known or not.
//!
//! Secrets shorter than [`MIN_LEN`] are not registered: removing a
//! three-letter word everywhere would mangle every message (documented in
//! LIMITATIONS.md).

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;
use std::sync::{LazyLock, RwLock};

/// The shortest secret that is removed.
pub const MIN_LEN: usize = 6;

/// What a removed secret is replaced with.
pub const MASK: &str = "***";

struct Set {
    /// Every form of every secret, deduplicated.
    forms: Vec<String>,
    /// One automaton over `forms` (leftmost-longest: a secret containing
    /// another is removed whole); `None` while there is none.
    matcher: Option<AhoCorasick>,
}

static SET: LazyLock<RwLock<Set>> = LazyLock::new(|| {
    RwLock::new(Set {
        forms: Vec::new(),
        matcher: None,
    })
});

/// The forms a secret takes in messages (see the module doc).
pub fn forms(secret: &str) -> Vec<String> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    let mut out = vec![secret.to_string()];
    let raw = secret.as_bytes();
    for engine in [&STANDARD, &URL_SAFE] {
        for shift in 0..3usize {
            // Encoded behind `shift` filler bytes, the characters that
            // depend on the secret's bytes alone run from bit 8*shift to
            // the end of its last whole sextet.
            let mut buf = vec![0u8; shift];
            buf.extend_from_slice(raw);
            let enc = engine.encode(&buf);
            let first = (8 * shift).div_ceil(6);
            let last = (8 * (shift + raw.len())) / 6;
            if last > first {
                out.push(enc[first..last].to_string());
            }
        }
        // The whole encoding, padding included.
        out.push(engine.encode(raw));
    }
    let pct = |upper: bool| -> String {
        raw.iter()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                    (*b as char).to_string()
                } else if upper {
                    format!("%{b:02X}")
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect()
    };
    out.push(pct(true));
    out.push(pct(false));
    if let Ok(json) = serde_json::to_string(secret) {
        out.push(json.trim_matches('"').to_string());
    }
    // A form shorter than a real secret (the encoded middle of a short
    // one) would match ordinary text.
    out.retain(|f| f.len() >= MIN_LEN);
    out.sort();
    out.dedup();
    out
}

/// Adds one secret (ignored when shorter than [`MIN_LEN`]).
pub fn add(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_LEN {
        return;
    }
    let new = forms(secret);
    let mut set = SET.write().unwrap_or_else(|e| e.into_inner());
    let before = set.forms.len();
    for f in new {
        if !set.forms.contains(&f) {
            set.forms.push(f);
        }
    }
    if set.forms.len() != before {
        set.matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&set.forms)
            .ok();
    }
}

/// Adds basic-auth credentials: the password, and `user:password` (whose
/// base64 is what goes on the wire).
pub fn add_basic(user: &str, password: &str) {
    add(password);
    add(&format!("{user}:{password}"));
}

/// Adds an HTTP header value that carries a credential
/// (`Authorization: basic <base64>`, `Bearer <token>`, or a bare token):
/// the whole value, each word of it, and for basic credentials the
/// decoded `user:password` and password.
pub fn add_header(value: &str) {
    add(value);
    let words: Vec<&str> = value.split_whitespace().collect();
    // Every word but a header's name and an auth scheme, which are
    // everywhere and no secret.
    let plain = |w: &str| {
        w.ends_with(':')
            || ["basic", "bearer", "token", "digest", "negotiate"]
                .iter()
                .any(|s| w.eq_ignore_ascii_case(s))
    };
    for w in words.iter().filter(|w| !plain(w)) {
        add(w);
    }
    let basic = words
        .windows(2)
        .find(|p| p[0].eq_ignore_ascii_case("basic"))
        .map(|p| p[1]);
    if let Some(b64) = basic
        && let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(b64)
        && let Ok(text) = String::from_utf8(decoded)
    {
        match text.split_once(':') {
            Some((u, p)) => add_basic(u, p),
            None => add(&text),
        }
    }
}

/// `text` with every registered secret and any URL userinfo removed.
pub fn text(text: &str) -> String {
    let set = SET.read().unwrap_or_else(|e| e.into_inner());
    let masked = match &set.matcher {
        Some(m) if m.is_match(text) => m.replace_all(text, &vec![MASK; set.forms.len()]),
        _ => text.to_string(),
    };
    userinfo(&masked)
}

/// As [`text`], for bytes that may not be UTF-8 (a git line, a name).
pub fn bytes(input: &[u8]) -> Vec<u8> {
    let set = SET.read().unwrap_or_else(|e| e.into_inner());
    let masked = match &set.matcher {
        Some(m) if m.is_match(input) => {
            m.replace_all_bytes(input, &vec![MASK.as_bytes(); set.forms.len()])
        }
        _ => input.to_vec(),
    };
    drop(set);
    if memchr::memmem::find(&masked, b"://").is_none() {
        return masked;
    }
    // Userinfo is removed from bytes that are not UTF-8 too (at the cost
    // of their invalid sequences, shown as U+FFFD).
    userinfo(&String::from_utf8_lossy(&masked)).into_bytes()
}

/// Whether `text` holds anything [`text`] would change: a secret or a URL
/// (which may carry userinfo). Checked first, so the strings of every
/// event are not copied for nothing.
fn dirty(text: &str) -> bool {
    text.contains("://") || holds_secret(text)
}

/// Every string (keys too) of a JSON value, redacted in place: the events
/// the runs send, before the orchestrator keeps any of them.
pub fn value(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if dirty(s) => *s = text(s),
        Value::Array(a) => a.iter_mut().for_each(value),
        Value::Object(o) => {
            let dirty: Vec<String> = o.keys().filter(|k| dirty(k)).cloned().collect();
            for k in dirty {
                if let Some(inner) = o.remove(&k) {
                    o.insert(text(&k), inner);
                }
            }
            o.values_mut().for_each(value);
        }
        _ => {}
    }
}

/// Whether `text` holds a registered secret in any form (for tests and
/// assertions that nothing slipped through).
pub fn holds_secret(text: &str) -> bool {
    let set = SET.read().unwrap_or_else(|e| e.into_inner());
    set.matcher.as_ref().is_some_and(|m| m.is_match(text))
}

/// The `user:password` part of a URL, if any.
pub fn url_userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    authority.rsplit_once('@').map(|(info, _)| info)
}

/// A URL without its userinfo, and that userinfo.
pub fn split_userinfo(url: &str) -> (String, Option<String>) {
    match url_userinfo(url) {
        Some(info) => {
            let (scheme, rest) = url.split_once("://").expect("has a scheme");
            let host_on = &rest[info.len() + 1..];
            (format!("{scheme}://{host_on}"), Some(info.to_string()))
        }
        None => (url.to_string(), None),
    }
}

/// Replaces the userinfo of every URL in `text` with `***`.
pub fn userinfo(text: &str) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '\'' || c == '"'
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(MASK);
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_removed() {
        assert_eq!(url_userinfo("https://u:p@h/x"), Some("u:p"));
        assert_eq!(url_userinfo("https://h/x@y"), None);
        assert_eq!(
            userinfo("fatal: unable to access 'https://user:tok@host:8080/r.git/': 403"),
            "fatal: unable to access 'https://***@host:8080/r.git/': 403"
        );
        assert_eq!(userinfo("file:///a/b c"), "file:///a/b c");
        assert_eq!(
            split_userinfo("https://x:y@h:1/p"),
            ("https://h:1/p".to_string(), Some("x:y".to_string()))
        );
    }

    #[test]
    fn every_form_is_removed() {
        let token = "ghs_RedactMe0123456789abcdef";
        add(token);
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        for prefix in ["", "x", "xy", "x-access-token:"] {
            // Whatever the alignment, the token's part of the encoding
            // (all but a character or two at its edges) is gone.
            let enc = STANDARD.encode(format!("{prefix}{token}"));
            let masked = text(&enc);
            assert!(masked.contains(MASK), "{prefix}: {masked}");
            assert!(
                masked.len() + 30 <= enc.len() + MASK.len(),
                "{prefix}: {masked}"
            );
            let enc = URL_SAFE_NO_PAD.encode(format!("{prefix}{token}/?"));
            assert!(holds_secret(&enc), "{prefix}");
        }
        assert_eq!(text(&format!("a {token} b")), "a *** b");
        let weird = "p@ss/w0rd:%é\"x";
        add(weird);
        let pct: String = weird
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect();
        assert!(!text(&pct).contains("w0rd"), "{}", text(&pct));
        let json = serde_json::to_string(weird).unwrap();
        assert!(!text(&json).contains("w0rd"), "{}", text(&json));
    }

    #[test]
    fn basic_headers_yield_their_parts() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("someone:hunter2hunter2");
        add_header(&format!("AUTHORIZATION: basic {b64}"));
        assert_eq!(text("pw hunter2hunter2!"), "pw ***!");
        assert!(!text(&format!("h {b64}")).contains(&b64));
        // The user name alone is not a secret.
        assert_eq!(text("someone"), "someone");
        // Nor the header's name or scheme.
        assert_eq!(text("AUTHORIZATION: basic x"), "AUTHORIZATION: basic x");
    }

    #[test]
    fn short_secrets_are_not_registered() {
        add("abc");
        assert_eq!(text("abc abcdef"), "abc abcdef");
    }

    #[test]
    fn json_values_are_walked() {
        add("zzsecretzz");
        let mut v = serde_json::json!({ "a": ["x zzsecretzz"], "zzsecretzz": 1 });
        value(&mut v);
        assert_eq!(v, serde_json::json!({ "a": ["x ***"], "***": 1 }));
    }
}
