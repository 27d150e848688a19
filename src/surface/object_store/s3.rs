//! S3's REST protocol as the object-store surface speaks it: a request
//! addressed to the bucket (path-style `/{bucket}/{key}` or virtual-hosted
//! `{bucket}.host/{key}`), signed with SigV4 in the `Authorization` header
//! (AWS's own signer, `aws-sigv4`), sent through the surfaces' bounded
//! HTTP client, and its answer read: S3's XML error code, and the few
//! XML documents run B reads (the pages of a listing, an object's tags).
//!
//! Why the header and never a presigned URL: a presigned URL carries the
//! signature, and with a session token the token itself, in its query,
//! and a URL travels into places a header does not (an error chain, a
//! log). The client never quotes a URL in an error either.
//!
//! What an answer means is S3's documented rule: `AccessDenied` (403) is
//! the bucket policy or the identity's permissions refusing that very
//! request; `SignatureDoesNotMatch`, `InvalidAccessKeyId`,
//! `ExpiredToken` and the like (403 too) are a credential S3 did not
//! accept, never a refusal ([`Said`]).

use crate::fault::Fault;
use crate::http::{Failure, LazyClient, Request};
use serde::{Deserialize, Serialize};

/// Where the bucket is, as settings keep it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    /// `scheme://host[:port]`, no path.
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    /// `/{bucket}/{key}` (true) or `{bucket}.host/{key}`.
    pub path_style: bool,
}

/// The identity's keys, read from the variables the config names; never
/// printed.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keys {
    pub access: String,
    pub secret: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl Keys {
    /// Every credential string, for [`crate::redact`].
    pub fn secrets(&self) -> Vec<String> {
        let mut v = vec![self.secret.clone()];
        v.extend(self.session.clone());
        v
    }
}

/// A bucket and the identity that speaks to it.
pub struct S3 {
    pub bucket: Bucket,
    keys: Keys,
    client: LazyClient,
}

/// One request: the method, the object key (none for the bucket), the
/// query, extra headers (each signed) and the body.
pub struct Call<'a> {
    pub method: http::Method,
    pub key: Option<&'a str>,
    pub query: Vec<(&'static str, String)>,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl<'a> Call<'a> {
    pub fn new(method: http::Method, key: Option<&'a str>) -> Call<'a> {
        Call {
            method,
            key,
            query: vec![],
            headers: vec![],
            body: vec![],
        }
    }

    pub fn query(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }
}

/// What S3 said to a request, by its documented meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Said {
    /// 2xx.
    Done,
    /// 404 (`NoSuchKey`, `NoSuchUpload`, `NoSuchTagSet`, a HEAD's bare
    /// 404): what was asked for is not there. Not `NoSuchBucket`, which
    /// is [`Said::Failed`].
    Missing,
    /// `AccessDenied`: access control refused this very request.
    Denied,
    /// `NotImplemented` (501): the store has no such operation.
    Unsupported(String),
    /// Anything else, said in words (its code, never its message, which
    /// is the server's text).
    Failed(String),
}

/// An answer whose body was read whole (S3's answers to what the surface
/// asks are small: one page of a listing is at most 1,000 entries).
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The `<Code>` of S3's XML error body, when it has one.
    pub fn code(&self) -> Option<String> {
        let doc = parse(&self.body, &[]).ok()?;
        doc.top.get("Code").cloned()
    }

    /// What the answer means ([`Said`]).
    pub fn said(&self) -> Said {
        if (200..300).contains(&self.status) {
            return Said::Done;
        }
        let code = self.code();
        match (self.status, code.as_deref()) {
            (403, Some("AccessDenied")) => Said::Denied,
            (404, Some("NoSuchBucket")) => Said::Failed("the bucket does not exist (NoSuchBucket)".into()),
            (404, _) => Said::Missing,
            (501, c) => Said::Unsupported(format!(
                "the store does not implement this operation ({})",
                c.unwrap_or("HTTP 501")
            )),
            (403, None) => Said::Failed(
                "HTTP 403 without S3's error code (a HEAD has no body): a refusal cannot be told from a credential the store did not accept".into(),
            ),
            (s, Some(c)) => Said::Failed(format!("HTTP {s}, {}", crate::escape::line(&crate::escape::clip(c, 64)))),
            (s, None) => Said::Failed(format!("HTTP {s}")),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The characters a key or query value keeps as they are (RFC 3986's
/// unreserved); everything else is percent-encoded, `/` too in a query.
fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl S3 {
    pub fn new(bucket: Bucket, keys: Keys) -> S3 {
        let client = LazyClient::new(keys.secrets());
        S3 {
            bucket,
            keys,
            client,
        }
    }

    /// The URL of `key` (the bucket's own without one) with `query`,
    /// sorted as SigV4's canonical request has it.
    pub fn url(&self, key: Option<&str>, query: &[(&'static str, String)]) -> String {
        let b = &self.bucket;
        let (scheme, host) = b
            .endpoint
            .split_once("://")
            .unwrap_or(("https", &b.endpoint));
        let mut url = if b.path_style {
            format!("{scheme}://{host}/{}", encode(&b.bucket, false))
        } else {
            format!("{scheme}://{}.{host}", b.bucket)
        };
        match key {
            Some(k) => {
                url.push('/');
                url.push_str(&encode(k, true));
            }
            // The bucket itself: `/{bucket}` path-style, `/` hosted.
            None if !b.path_style => url.push('/'),
            None => {}
        }
        let mut q: Vec<(&str, String)> =
            query.iter().map(|(k, v)| (*k, encode(v, false))).collect();
        q.sort();
        if !q.is_empty() {
            let parts: Vec<String> = q
                .iter()
                .map(|(k, v)| {
                    // A subresource without a value (`?uploads`,
                    // `?versions`, `?tagging`) is sent bare.
                    if v.is_empty() {
                        k.to_string()
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            url.push('?');
            url.push_str(&parts.join("&"));
        }
        url
    }

    /// Signs and sends `call`; the whole answer (at most 16 MiB).
    pub fn send(&self, call: &Call<'_>) -> Result<Answer, Fault> {
        let url = self.url(call.key, &call.query);
        let signed = self.sign(call, &url)?;
        let mut req = Request::new(call.method.clone(), &url).bytes(call.body.clone());
        for (name, value) in &call.headers {
            req = req.header(name, value.clone());
        }
        for (name, value, sensitive) in signed {
            req = if sensitive {
                req.secret_header(name, value)
            } else {
                req.header(name, value)
            };
        }
        let r = self
            .client
            .get()?
            .send(&req)
            .map_err(|f: Failure| Fault::from(f))?;
        Ok(Answer {
            status: r.status,
            headers: r.headers,
            body: r.body,
        })
    }

    /// The SigV4 headers for `call` to `url`: (name, value, sensitive).
    fn sign(&self, call: &Call<'_>, url: &str) -> Result<Vec<(&'static str, String, bool)>, Fault> {
        use aws_sigv4::http_request::{
            PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest,
            SigningSettings, UriPathNormalizationMode, sign,
        };
        let creds = aws_credential_types::Credentials::new(
            self.keys.access.clone(),
            self.keys.secret.clone(),
            self.keys.session.clone(),
            None,
            "runwarden-config",
        );
        let identity = creds.into();
        // As S3 wants it: the path encoded once and never normalized (a
        // key may hold `//` or `.`), the payload's SHA-256 in its header.
        let mut settings = SigningSettings::default();
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.bucket.region)
            .name("s3")
            .time(std::time::SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| Fault::broken(format!("cannot sign the request: {e}")))?
            .into();
        let headers: Vec<(&str, &str)> =
            call.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let signable = SignableRequest::new(
            call.method.as_str(),
            url,
            headers.into_iter(),
            SignableBody::Bytes(&call.body),
        )
        .map_err(|e| Fault::broken(format!("cannot sign the request: {e}")))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| Fault::broken(format!("cannot sign the request: {e}")))?
            .into_parts();
        let (headers, _params) = instructions.into_parts();
        Ok(headers
            .into_iter()
            .map(|h| {
                (
                    h.name(),
                    h.value().to_string(),
                    h.sensitive() || h.name() == "authorization",
                )
            })
            .collect())
    }
}

/// An XML answer, flattened: the text of each element directly under the
/// root (`top`: `IsTruncated`, `NextContinuationToken`, an error's
/// `Code`), and for each element named in `items` found anywhere
/// (`Contents`, `Upload`, `Version`, `DeleteMarker`, `Tag`), the text of
/// each of its child elements, in document order.
#[derive(Debug, Default)]
pub struct Doc {
    pub top: std::collections::HashMap<String, String>,
    pub items: Vec<(String, std::collections::HashMap<String, String>)>,
}

/// The most items one document may hold: S3 hands over at most 1,000 a
/// page; a server that sends more is not read further.
const MAX_ITEMS: usize = 10_000;

/// Parses `body` ([`Doc`]). Text is unescaped as XML says; a document
/// that is not well formed is an error.
pub fn parse(body: &[u8], items: &[&str]) -> Result<Doc, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(body);
    reader.config_mut().trim_text(false);
    let mut doc = Doc::default();
    // The open elements' names, the root first.
    let mut path: Vec<String> = vec![];
    let mut text = String::new();
    let mut item: Option<(String, usize, std::collections::HashMap<String, String>)> = None;
    let mut buf = Vec::new();
    loop {
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("the answer is not well-formed XML: {e}"))?;
        match ev {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_string();
                if item.is_none() && items.contains(&name.as_str()) {
                    if doc.items.len() >= MAX_ITEMS {
                        return Err(format!("the answer lists more than {MAX_ITEMS} items"));
                    }
                    item = Some((name.clone(), path.len(), Default::default()));
                }
                path.push(name);
                text.clear();
            }
            Event::Empty(e) => {
                let name = e.local_name().as_ref().to_string();
                match &mut item {
                    Some((_, _, fields)) => {
                        fields.entry(name).or_default();
                    }
                    None if path.len() == 1 => {
                        doc.top.entry(name).or_default();
                    }
                    None => {}
                }
            }
            // Text holds no references: they come as their own events.
            Event::Text(t) => text.push_str(&t.xml10_content()),
            Event::CData(t) => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) => {
                let bad = || "the answer is not well-formed XML: an unknown entity".to_string();
                match r.resolve_char_ref().map_err(|_| bad())? {
                    Some(c) => text.push(c),
                    None => text.push_str(
                        quick_xml::escape::resolve_predefined_entity(&r.xml10_content())
                            .ok_or_else(bad)?,
                    ),
                }
            }
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                let depth = path.len();
                match &mut item {
                    Some((_, at, _)) if *at == depth => {
                        let (n, _, fields) = item.take().expect("open");
                        doc.items.push((n, fields));
                    }
                    Some((_, at, fields)) if depth == *at + 1 => {
                        fields.insert(name, std::mem::take(&mut text));
                    }
                    None if depth == 1 => {
                        doc.top.insert(name, std::mem::take(&mut text));
                    }
                    _ => {}
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(path_style: bool) -> S3 {
        S3::new(
            Bucket {
                endpoint: "http://127.0.0.1:9000".into(),
                bucket: "bkt".into(),
                region: "us-east-1".into(),
                path_style,
            },
            Keys {
                access: "AKID".into(),
                secret: "secret".into(),
                session: None,
            },
        )
    }

    #[test]
    fn urls_encode_keys_and_sort_the_query() {
        let q = [
            ("prefix", "a b/c".to_string()),
            ("list-type", "2".to_string()),
        ];
        assert_eq!(
            s3(true).url(Some("p/x y+z"), &q),
            "http://127.0.0.1:9000/bkt/p/x%20y%2Bz?list-type=2&prefix=a%20b%2Fc"
        );
        assert_eq!(
            s3(false).url(None, &[("uploads", String::new())]),
            "http://bkt.127.0.0.1:9000/?uploads"
        );
        assert_eq!(s3(true).url(None, &[]), "http://127.0.0.1:9000/bkt");
    }

    #[test]
    fn signing_puts_the_credential_in_a_sensitive_header_only() {
        let s = s3(true);
        let call = Call::new(http::Method::PUT, Some("k")).header("x-amz-meta-runwarden", "v");
        let url = s.url(Some("k"), &[]);
        let h = s.sign(&call, &url).unwrap();
        let auth = h.iter().find(|(n, _, _)| *n == "authorization").unwrap();
        assert!(
            auth.1.starts_with("AWS4-HMAC-SHA256 Credential=AKID/"),
            "{}",
            auth.1
        );
        assert!(auth.1.contains("x-amz-meta-runwarden"), "{}", auth.1);
        assert!(auth.2);
        assert!(h.iter().any(|(n, _, _)| *n == "x-amz-content-sha256"));
        assert!(!url.contains("secret") && !url.contains("Signature"));
    }

    #[test]
    fn a_session_token_goes_in_a_sensitive_header() {
        let mut s = s3(true);
        s.keys.session = Some("session-token-value".into());
        let call = Call::new(http::Method::GET, Some("k"));
        let url = s.url(Some("k"), &[]);
        let h = s.sign(&call, &url).unwrap();
        let token = h
            .iter()
            .find(|(n, _, _)| *n == "x-amz-security-token")
            .unwrap();
        assert_eq!(token.1, "session-token-value");
        assert!(token.2, "marked sensitive");
        assert!(
            s.keys
                .secrets()
                .contains(&"session-token-value".to_string())
        );
        assert!(!url.contains("session-token-value"));
    }

    #[test]
    fn listings_and_errors_parse_with_their_text_unescaped() {
        let page = br#"<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><IsTruncated>true</IsTruncated>
<Contents><Key>a&amp;b&lt;/Key&gt;</Key><Size>3</Size></Contents><Contents><Key>c</Key></Contents>
<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>"#;
        let d = parse(page, &["Contents"]).unwrap();
        assert_eq!(d.top["IsTruncated"], "true");
        assert_eq!(d.top["NextContinuationToken"], "tok");
        let keys: Vec<&str> = d.items.iter().map(|(_, f)| f["Key"].as_str()).collect();
        assert_eq!(keys, ["a&b</Key>", "c"]);
        let err = Answer {
            status: 403,
            headers: Default::default(),
            body: b"<Error><Code>AccessDenied</Code><Message>no</Message></Error>".to_vec(),
        };
        assert_eq!(err.said(), Said::Denied);
        let err = Answer {
            status: 403,
            headers: Default::default(),
            body: b"<Error><Code>SignatureDoesNotMatch</Code></Error>".to_vec(),
        };
        assert!(matches!(err.said(), Said::Failed(m) if m.contains("SignatureDoesNotMatch")));
        assert!(parse(b"<a><b></a>", &[]).is_err());
    }
}
