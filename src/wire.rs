//! Small readers and writers of wire formats that both the surfaces and the
//! loopback services use: JWT claims (the runtime token), JSON string
//! arrays and percent-encoding.
//!
//! Why a module of its own: the loopback services must not import surface
//! internals, nor the surfaces a loopback service, so what both read lives
//! below both.

use crate::fault::Fault;
use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::Value;

/// Unpadded base64url, as JWT parts are written.
pub fn b64url(input: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(input)
}

/// A JWT part: unpadded base64url; padding and the standard alphabet are
/// tolerated too.
pub fn b64url_decode(s: &str) -> Option<Vec<u8>> {
    let s: String = s
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
}

/// A JWT's claims, read without verifying it (runwarden reports what a
/// token claims; only the service that minted it can verify it).
pub fn jwt_claims(token: &str) -> Option<Value> {
    let payload = b64url_decode(token.split('.').nth(1)?)?;
    serde_json::from_slice(&payload)
        .ok()
        .filter(Value::is_object)
}

/// The cache scopes a runtime token claims, (ref, permission) in order,
/// from its `ac` claim; `None` when it is not such a token.
pub fn jwt_scopes(token: &str) -> Option<Vec<(String, u8)>> {
    let claims = jwt_claims(token)?;
    let ac: Vec<Value> = serde_json::from_str(claims["ac"].as_str()?).ok()?;
    Some(
        ac.iter()
            .filter_map(|s| {
                Some((
                    s["Scope"].as_str()?.to_string(),
                    s["Permission"].as_u64()? as u8,
                ))
            })
            .collect(),
    )
}

/// The (workflow run, job run) backend ids a runtime token carries, read
/// as `@actions/artifact` reads them: the first scope of the space
/// separated `scp` claim that starts `Actions.Results` must be
/// `Actions.Results:<run>:<job>`.
pub fn jwt_backend_ids(token: &str) -> Option<(String, String)> {
    let claims = jwt_claims(token)?;
    let scp = claims["scp"].as_str()?;
    let scope = scp
        .split(' ')
        .find(|s| s.split(':').next() == Some("Actions.Results"))?;
    let parts: Vec<&str> = scope.split(':').collect();
    match parts.as_slice() {
        [_, run, job] if !run.is_empty() && !job.is_empty() => {
            Some((run.to_string(), job.to_string()))
        }
        _ => None,
    }
}

/// The strings of a JSON array (anything else: none), as documents from
/// surfaces and requests to loopback services hold them.
pub fn string_array(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// What [`percent_encode`] leaves as it is: unreserved characters and `/`.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// Percent-encodes a path or query value: unreserved characters and `/`
/// stay, everything else (spaces, `&`, `=`, `+`, `#`, `%`, non-ASCII)
/// becomes `%XX`.
pub fn percent_encode(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

/// Percent-encodes one path segment: like [`percent_encode`], and `/` too,
/// so no value can become more than one segment; an empty segment, `.`
/// and `..` (which a server or proxy would resolve, encoded or not) are
/// refused (`Invalid`).
pub fn percent_segment(s: &str) -> Result<String, Fault> {
    if s.is_empty() || s == "." || s == ".." {
        return Err(Fault::invalid(format!(
            "{} cannot be one path segment",
            crate::escape::bytes(s.as_bytes())
        )));
    }
    Ok(percent_encode(s).replace('/', "%2F"))
}

/// A path or URL: percent-decoded (`+` stays `+`; a `%` not followed by
/// two hex digits stays as it is; bytes that are not UTF-8 become U+FFFD).
pub fn percent_decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}
