//! A loopback S3 bucket: the object-store control. Path-style requests to
//! `/{bucket}/{key}`: `PUT` (with `x-amz-meta-*` and `x-amz-tagging`),
//! `GET`, `HEAD`, `DELETE`, `GET ?tagging`, `POST ?uploads` (a multipart
//! upload started), `DELETE ?uploadId=` (aborted); on the bucket,
//! `GET ?list-type=2` (ListObjectsV2, paged by continuation token) and
//! `GET ?uploads` (ListMultipartUploads). Answers are S3's XML, errors
//! S3's `<Error><Code>`.
//!
//! It accepts only the access key it minted (the `Credential=` of a SigV4
//! `Authorization` header); it does not check the signature itself: it
//! is the probe's own control, on loopback, and its key is a fresh
//! random secret no other process knows. Read-only, it refuses every
//! write with `AccessDenied`, as a bucket policy does.

use super::{Reply, lock};
use crate::fault::Fault;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// One stored object.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    pub body: Vec<u8>,
    /// `x-amz-meta-*` headers, by name after the prefix.
    pub meta: BTreeMap<String, String>,
    pub tags: BTreeMap<String, String>,
}

#[derive(Default)]
pub struct State {
    pub bucket: String,
    pub objects: BTreeMap<String, Object>,
    /// Upload id -> key.
    pub uploads: BTreeMap<String, String>,
    access_key: String,
    pub read_only: bool,
    /// As AWS answers an identity that may not list the bucket: a read of
    /// a key that does not exist is `AccessDenied` (403), not 404.
    pub missing_denied: bool,
    /// How many keys a listing page holds (S3's is 1,000).
    pub page: usize,
    /// While listings lag: the keys and uploads they show (what existed
    /// when the lag began); reads by name still find the rest.
    lag: Option<(Vec<String>, Vec<String>)>,
    next_upload: u64,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        match knob {
            super::Knob::Lag => {
                self.lag = on.then(|| {
                    (
                        self.objects.keys().cloned().collect(),
                        self.uploads.keys().cloned().collect(),
                    )
                })
            }
            // A lifecycle rule that expires everything: objects and
            // uploads alike are gone.
            super::Knob::Evict if on => {
                self.objects.clear();
                self.uploads.clear();
            }
            super::Knob::Evict => {}
            _ => return false,
        }
        true
    }
}

/// The bucket; [`S3Server::start`] starts one.
pub type S3Server = super::Service<State>;

impl super::Service<State> {
    /// A bucket named `bucket`, answering only the key it mints.
    pub fn start(bucket: &str, read_only: bool) -> Result<S3Server, Fault> {
        let state = State {
            bucket: bucket.into(),
            read_only,
            page: 1000,
            access_key: format!("RW{}", super::secret()?.to_uppercase()),
            ..State::default()
        };
        super::Service::serve(state, serve)
    }

    /// `http://127.0.0.1:PORT` (path-style requests).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The access key it accepts (its secret is never checked).
    pub fn access_key(&self) -> String {
        self.lock().access_key.clone()
    }

    /// Every object as it is now.
    pub fn objects(&self) -> BTreeMap<String, Object> {
        self.lock().objects.clone()
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn error(status: u16, code: &str) -> Reply {
    Reply::raw(
        status,
        "application/xml",
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{code}</Message></Error>").into_bytes(),
    )
}

fn xml(body: String) -> Reply {
    Reply::raw(
        200,
        "application/xml",
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}").into_bytes(),
    )
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, _port: u16) {
    let method = req.method().as_str().to_ascii_uppercase();
    let url = req.url().to_string();
    let body = super::body(&mut req);
    let auth = super::header(&req, "authorization").unwrap_or_default();
    let meta: Vec<(String, String)> = req
        .headers()
        .iter()
        .filter_map(|h| {
            let name = h.field.as_str().as_str().to_ascii_lowercase();
            name.strip_prefix("x-amz-meta-")
                .map(|n| (n.to_string(), h.value.as_str().to_string()))
        })
        .collect();
    let tagging = super::header(&req, "x-amz-tagging");
    let mut st = lock(state);
    let reply = route(&mut st, &method, &url, &auth, body, meta, tagging);
    drop(st);
    reply.send(req);
}

/// Who may ask, the read-only refusal of writes, then one handler per
/// operation.
fn route(
    st: &mut State,
    method: &str,
    url: &str,
    auth: &str,
    body: Vec<u8>,
    meta: Vec<(String, String)>,
    tagging: Option<String>,
) -> Reply {
    let key_id = auth
        .split("Credential=")
        .nth(1)
        .and_then(|c| c.split('/').next())
        .unwrap_or("");
    if !auth.starts_with("AWS4-HMAC-SHA256 ") || key_id != st.access_key {
        return error(403, "InvalidAccessKeyId");
    }
    let path = url.split('?').next().unwrap_or("/");
    let q = super::query(url);
    let has = |k: &str| {
        url.split_once('?').is_some_and(|(_, qs)| {
            qs.split('&')
                .any(|p| p == k || p.starts_with(&format!("{k}=")))
        })
    };
    let rest = path.trim_start_matches('/');
    let (bucket, key) = match rest.split_once('/') {
        Some((b, k)) => (b, Some(crate::wire::percent_decode(k))),
        None => (rest, None),
    };
    if bucket != st.bucket {
        return error(404, "NoSuchBucket");
    }
    let writes = matches!(method, "PUT" | "POST" | "DELETE");
    if writes && st.read_only {
        return error(403, "AccessDenied");
    }
    match (method, key) {
        ("GET", None) if has("uploads") => {
            list_uploads(st, q.get("prefix").map(String::as_str).unwrap_or(""))
        }
        ("GET", None) if q.get("list-type").map(String::as_str) == Some("2") => list_objects(
            st,
            q.get("prefix").map(String::as_str).unwrap_or(""),
            q.get("continuation-token").map(String::as_str),
        ),
        ("GET", None) => error(501, "NotImplemented"),
        (m, Some(k)) => object(
            st,
            m,
            k,
            &q,
            has("uploads"),
            has("uploadId"),
            has("tagging"),
            body,
            meta,
            tagging,
        ),
        _ => error(501, "NotImplemented"),
    }
}

/// The operations on one object (`k`): uploads started and aborted, tags
/// read, objects put, read, headed and deleted.
#[allow(clippy::too_many_arguments)]
fn object(
    st: &mut State,
    method: &str,
    k: String,
    q: &std::collections::HashMap<String, String>,
    uploads: bool,
    upload_id: bool,
    tagging_read: bool,
    body: Vec<u8>,
    meta: Vec<(String, String)>,
    tagging: Option<String>,
) -> Reply {
    match method {
        "POST" if uploads => {
            st.next_upload += 1;
            let id = format!("upload-{}", st.next_upload);
            st.uploads.insert(id.clone(), k.clone());
            xml(format!(
                "<InitiateMultipartUploadResult><Bucket>{}</Bucket><Key>{}</Key><UploadId>{id}</UploadId></InitiateMultipartUploadResult>",
                xml_escape(&st.bucket),
                xml_escape(&k)
            ))
        }
        "DELETE" if upload_id => {
            let id = q.get("uploadId").cloned().unwrap_or_default();
            if st.uploads.get(&id) == Some(&k) {
                st.uploads.remove(&id);
                Reply::empty(204)
            } else {
                error(404, "NoSuchUpload")
            }
        }
        "GET" if tagging_read => match st.objects.get(&k) {
            Some(o) => {
                let tags: String = o
                    .tags
                    .iter()
                    .map(|(k, v)| {
                        format!(
                            "<Tag><Key>{}</Key><Value>{}</Value></Tag>",
                            xml_escape(k),
                            xml_escape(v)
                        )
                    })
                    .collect();
                xml(format!("<Tagging><TagSet>{tags}</TagSet></Tagging>"))
            }
            None if st.missing_denied => error(403, "AccessDenied"),
            None => error(404, "NoSuchKey"),
        },
        "PUT" => {
            let tags = tagging
                .map(|t| super::query(&format!("?{t}")).into_iter().collect())
                .unwrap_or_default();
            st.objects.insert(
                k,
                Object {
                    body,
                    meta: meta.into_iter().collect(),
                    tags,
                },
            );
            Reply::empty(200)
        }
        "GET" | "HEAD" => match st.objects.get(&k) {
            Some(o) => {
                let mut r = Reply::raw(
                    200,
                    "application/octet-stream",
                    if method == "GET" {
                        o.body.clone()
                    } else {
                        vec![]
                    },
                );
                for (n, v) in &o.meta {
                    r = r.with(&format!("x-amz-meta-{n}"), v);
                }
                r
            }
            // (A HEAD's error has no body, as S3's.)
            None if st.missing_denied && method == "HEAD" => Reply::empty(403),
            None if st.missing_denied => error(403, "AccessDenied"),
            None if method == "HEAD" => Reply::empty(404),
            None => error(404, "NoSuchKey"),
        },
        "DELETE" => {
            st.objects.remove(&k);
            Reply::empty(204)
        }
        _ => error(501, "NotImplemented"),
    }
}

/// ListObjectsV2 under `prefix`, a page of `st.page` keys, the next page
/// named by a continuation token (the last key handed over).
fn list_objects(st: &State, prefix: &str, after: Option<&str>) -> Reply {
    let keys: Vec<&String> = st
        .objects
        .keys()
        .filter(|k| k.starts_with(prefix))
        .filter(|k| st.lag.as_ref().is_none_or(|(shown, _)| shown.contains(k)))
        .filter(|k| after.is_none_or(|a| k.as_str() > a))
        .collect();
    let page: Vec<&&String> = keys.iter().take(st.page).collect();
    let truncated = keys.len() > page.len();
    let mut out = format!(
        "<ListBucketResult><Name>{}</Name><Prefix>{}</Prefix><KeyCount>{}</KeyCount><IsTruncated>{truncated}</IsTruncated>",
        xml_escape(&st.bucket),
        xml_escape(prefix),
        page.len()
    );
    for k in &page {
        let size = st.objects.get(k.as_str()).map_or(0, |o| o.body.len());
        out += &format!(
            "<Contents><Key>{}</Key><Size>{size}</Size></Contents>",
            xml_escape(k)
        );
    }
    if truncated && let Some(last) = page.last() {
        out += &format!(
            "<NextContinuationToken>{}</NextContinuationToken>",
            xml_escape(last)
        );
    }
    out += "</ListBucketResult>";
    xml(out)
}

/// ListMultipartUploads under `prefix`, whole.
fn list_uploads(st: &State, prefix: &str) -> Reply {
    let mut out = "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>".to_string();
    for (id, k) in &st.uploads {
        let shown = st.lag.as_ref().is_none_or(|(_, ups)| ups.contains(id));
        if k.starts_with(prefix) && shown {
            out += &format!(
                "<Upload><Key>{}</Key><UploadId>{id}</UploadId></Upload>",
                xml_escape(k)
            );
        }
    }
    out += "</ListMultipartUploadsResult>";
    xml(out)
}
