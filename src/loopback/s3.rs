//! A loopback S3 bucket: the object-store control. Path-style requests to
//! `/{bucket}/{key}`: `PUT` (with `x-amz-meta-*` and `x-amz-tagging`),
//! `GET`, `HEAD`, `DELETE`, `GET ?tagging`, `POST ?uploads` (a multipart
//! upload started), `DELETE ?uploadId=` (aborted); on the bucket,
//! `GET ?list-type=2` (ListObjectsV2, paged by continuation token),
//! `GET ?uploads` (ListMultipartUploads), and, for a bucket that keeps
//! versions, `GET ?versioning`, `GET ?versions` (ListObjectVersions) and
//! `DELETE ?versionId=`: a PUT makes a version, a DELETE a delete marker. Answers are S3's XML, errors
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
    /// Its version, in a bucket that keeps them.
    pub version: Option<String>,
}

/// One version a bucket that keeps them holds: an object's or a delete
/// marker's.
#[derive(Clone, Debug, PartialEq)]
pub struct Version {
    pub key: String,
    pub id: String,
    pub marker: bool,
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
    /// Whether a delete by version id is refused (`AccessDenied`), as to
    /// an identity without `s3:DeleteObjectVersion`.
    pub versions_undeletable: bool,
    /// Whether a listing's later pages (a continuation token) are
    /// refused: an identity let in to the first page only.
    pub deny_later_pages: bool,
    /// Whether it keeps versions (the control's does), and those it holds.
    pub versioning: bool,
    pub versions: Vec<Version>,
    next_version: u64,
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
                        self.uploads
                            .keys()
                            .cloned()
                            .chain(self.versions.iter().map(|v| v.id.clone()))
                            .collect(),
                    )
                })
            }
            // A lifecycle rule that expires everything: objects and
            // uploads alike are gone.
            super::Knob::Evict if on => {
                self.objects.clear();
                self.uploads.clear();
                self.versions.clear();
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
    /// A bucket named `bucket`, answering only the key it mints; keeping
    /// versions when `versioning`.
    pub fn start(bucket: &str, read_only: bool) -> Result<S3Server, Fault> {
        S3Server::start_with(bucket, read_only, false)
    }

    pub fn start_with(bucket: &str, read_only: bool, versioning: bool) -> Result<S3Server, Fault> {
        let state = State {
            bucket: bucket.into(),
            read_only,
            versioning,
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
        ("GET", None) if has("versioning") => xml(if st.versioning {
            "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>".into()
        } else {
            "<VersioningConfiguration></VersioningConfiguration>".into()
        }),
        ("GET", None) if has("versions") => {
            list_versions(st, q.get("prefix").map(String::as_str).unwrap_or(""))
        }
        ("GET", None) => error(501, "NotImplemented"),
        (m, Some(k)) => {
            let ask = Ask {
                q: &q,
                uploads: has("uploads"),
                upload_id: has("uploadId"),
                tagging_read: has("tagging"),
                version_id: q.get("versionId").cloned(),
            };
            object(st, m, k, &ask, body, meta, tagging)
        }
        _ => error(501, "NotImplemented"),
    }
}

/// What a request on one object asks besides its method.
struct Ask<'a> {
    q: &'a std::collections::HashMap<String, String>,
    uploads: bool,
    upload_id: bool,
    tagging_read: bool,
    version_id: Option<String>,
}

/// The operations on one object (`k`): uploads started and aborted, tags
/// read, objects put, read, headed and deleted, versions deleted.
fn object(
    st: &mut State,
    method: &str,
    k: String,
    ask: &Ask<'_>,
    body: Vec<u8>,
    meta: Vec<(String, String)>,
    tagging: Option<String>,
) -> Reply {
    let (q, uploads, upload_id, tagging_read) =
        (ask.q, ask.uploads, ask.upload_id, ask.tagging_read);
    match method {
        "DELETE" if ask.version_id.is_some() && st.versions_undeletable => {
            error(403, "AccessDenied")
        }
        "DELETE" if ask.version_id.is_some() => {
            let id = ask.version_id.clone().unwrap_or_default();
            let before = st.versions.len();
            st.versions.retain(|v| !(v.key == k && v.id == id));
            if st
                .objects
                .get(&k)
                .is_some_and(|o| o.version.as_deref() == Some(id.as_str()))
            {
                st.objects.remove(&k);
            }
            if st.versions.len() < before || !st.versioning {
                Reply::empty(204)
            } else {
                error(404, "NoSuchVersion")
            }
        }
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
        "PUT" => put(st, k, body, meta, tagging),
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
                if let Some(v) = &o.version {
                    r = r.with("x-amz-version-id", v);
                }
                r
            }
            // (A HEAD's error has no body, as S3's.)
            None if st.missing_denied && method == "HEAD" => Reply::empty(403),
            None if st.missing_denied => error(403, "AccessDenied"),
            None if method == "HEAD" => Reply::empty(404),
            None => error(404, "NoSuchKey"),
        },
        "DELETE" => delete(st, k),
        _ => error(501, "NotImplemented"),
    }
}

/// A PUT of an object: a new version in a bucket that keeps them.
fn put(
    st: &mut State,
    k: String,
    body: Vec<u8>,
    meta: Vec<(String, String)>,
    tagging: Option<String>,
) -> Reply {
    let tags = tagging
        .map(|t| super::query(&format!("?{t}")).into_iter().collect())
        .unwrap_or_default();
    let version = st.versioning.then(|| {
        st.next_version += 1;
        format!("v{:08}", st.next_version)
    });
    if let Some(id) = &version {
        st.versions.push(Version {
            key: k.clone(),
            id: id.clone(),
            marker: false,
        });
    }
    st.objects.insert(
        k,
        Object {
            body,
            meta: meta.into_iter().collect(),
            tags,
            version: version.clone(),
        },
    );
    match version {
        Some(v) => Reply::empty(200).with("x-amz-version-id", &v),
        None => Reply::empty(200),
    }
}

/// A DELETE of an object without a version: a delete marker in a bucket
/// that keeps versions.
fn delete(st: &mut State, k: String) -> Reply {
    st.objects.remove(&k);
    if !st.versioning {
        return Reply::empty(204);
    }
    st.next_version += 1;
    let id = format!("v{:08}", st.next_version);
    st.versions.push(Version {
        key: k,
        id: id.clone(),
        marker: true,
    });
    Reply::empty(204)
        .with("x-amz-version-id", &id)
        .with("x-amz-delete-marker", "true")
}

/// ListObjectsV2 under `prefix`, a page of `st.page` keys, the next page
/// named by a continuation token (the last key handed over).
fn list_objects(st: &State, prefix: &str, after: Option<&str>) -> Reply {
    if after.is_some() && st.deny_later_pages {
        return error(403, "AccessDenied");
    }
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

/// ListObjectVersions under `prefix`, whole: every version and delete
/// marker.
fn list_versions(st: &State, prefix: &str) -> Reply {
    let mut out = format!(
        "<ListVersionsResult><Name>{}</Name><IsTruncated>false</IsTruncated>",
        xml_escape(&st.bucket)
    );
    for v in st.versions.iter().filter(|v| v.key.starts_with(prefix)) {
        if st
            .lag
            .as_ref()
            .is_some_and(|(_, shown)| !shown.contains(&v.id))
        {
            continue;
        }
        let kind = if v.marker { "DeleteMarker" } else { "Version" };
        out += &format!(
            "<{kind}><Key>{}</Key><VersionId>{}</VersionId></{kind}>",
            xml_escape(&v.key),
            v.id
        );
    }
    out += "</ListVersionsResult>";
    xml(out)
}
