//! The registry API v2 as both runs speak it: bounded requests with the
//! surface's credentials and the bearer token flow, blob uploads and
//! manifest pushes, manifests read back, the tags list and the catalog
//! read page by page (`Link`) to their end, and a blob searched as it
//! arrives.

use super::OciRegistry;
use super::auth::parse_challenge;
use super::plant::WriteError;
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Answer, Class, Server};
use crate::http::{Request, Response};
use crate::scan::Needles;
use ::http::Method;
use serde_json::Value;

/// Catalog entries asked for per page: the spec's default page, well
/// under distribution's `maxentries` (1000; more is a 400).
const PAGE: usize = 100;

/// A listing that has not ended after this many pages is an error.
const MAX_PAGES: usize = 10_000;

/// Names one listing may hold in all (each kept as a 128-bit hash to
/// tell a page that repeats them): more is an error, so a listing's
/// memory is bounded (16 MiB of hashes).
pub(super) const MAX_NAMES: usize = 1_000_000;

/// The start of a streamed answer kept to judge it when it is not the
/// blob (the registry's error body is a few hundred bytes).
const ERROR_BODY: usize = 64 * 1024;

/// Media types a manifest read accepts: the registry then answers with
/// what it stores, never a conversion (whose digest would differ).
pub(super) const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";

/// Whether an answer is the registry's own: its JSON error body
/// (`{"errors": [...]}`). A page without one comes from something in
/// front of it (a proxy, an SSO gate, a WAF).
pub(super) fn registrys_own(r: &Response) -> bool {
    own_body(&r.into())
}

/// Whether an answer's body is the registry's error body (`{"errors":
/// [...]}`).
fn own_body(a: &Answer<'_>) -> bool {
    a.json().is_some_and(|v| v["errors"].is_array())
}

/// The statuses a registry's access control refuses with: 403, a 401 whose
/// challenge says the token's scope does not cover the request, and
/// distribution's read-only 405.
const REFUSALS: &[u16] = &[401, 403, 405];

/// The statuses that answer who may do what (a refusal, or credentials not
/// accepted): an answer with one is told apart by [`OciRegistry::class`].
pub(super) const AUTH: [u16; 2] = [401, 403];

/// Whether a `WWW-Authenticate: Bearer` challenge says
/// `error="insufficient_scope"`.
fn insufficient_scope(headers: &::http::HeaderMap) -> bool {
    headers
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(parse_challenge)
        .any(|c| c.error.as_deref() == Some("insufficient_scope"))
}

/// The first error code of the registry's error body, for messages.
pub(super) fn error_code(r: &Response) -> String {
    serde_json::from_slice::<Value>(&r.body)
        .ok()
        .and_then(|v| {
            v["errors"][0]["code"]
                .as_str()
                .map(|c| format!(" {}", escape::bytes(c.as_bytes())))
        })
        .unwrap_or_default()
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(headers: &::http::HeaderMap) -> Option<String> {
    headers.get_all("link").iter().find_map(|v| {
        let v = v.to_str().ok()?;
        v.split(',').find_map(|part| {
            let (url, params) = part.split_once(';')?;
            params.contains("rel=\"next\"").then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
        })
    })
}

impl OciRegistry {
    /// What the registry's answer `r` to `method` means
    /// ([`crate::http::answer`]). Its access control refuses with:
    /// - a 403 with its JSON error body (`DENIED`, …);
    /// - to a request that carried a token the service issued, a 401 whose
    ///   Bearer challenge says `insufficient_scope` (the challenge is the
    ///   registry's own, whatever the body);
    /// - to a write, distribution's read-only 405 ([`OciRegistry::read_only`]).
    ///
    /// Any other 401 is the credentials not accepted (a mistyped or expired
    /// token; ghcr.io answers a token it does not take with `DENIED`
    /// "invalid token"), and a bare `WWW-Authenticate: Basic` with a page
    /// is a front (nginx's `auth_basic`): neither is a refusal of the
    /// carrier. No answer says a manifest or blob exists: a push of one
    /// that exists succeeds.
    pub(super) fn class(&self, r: &Response, method: Option<&Method>) -> Class {
        let scoped = |a: &Answer<'_>| a.status == 401 && a.headers.is_some_and(insufficient_scope);
        let read_only =
            |a: &Answer<'_>| a.status == 405 && method.is_some_and(|m| self.read_only(m, r));
        let own = |a: &Answer<'_>| own_body(a) || scoped(a) || read_only(a);
        let refuses = |a: &Answer<'_>| match a.status {
            401 => self.bearer_sent.get() && scoped(a),
            405 => read_only(a),
            _ => true,
        };
        let server = Server {
            refusals: REFUSALS,
            own: &own,
            refuses: &refuses,
            exists: &answer::none,
        };
        answer::classify(&r.into(), &server)
    }

    /// Why the registry refused `r` (a [`Class::Refused`] answer), for
    /// people.
    fn why_refused(r: &Response) -> String {
        match r.status {
            401 => "HTTP 401, insufficient_scope: the token does not cover it".to_string(),
            405 => format!(
                "HTTP 405: it allows only {}; read-only",
                escape::bytes(
                    r.headers
                        .get("allow")
                        .map(|v| v.as_bytes())
                        .unwrap_or_default()
                )
            ),
            s => format!("HTTP {s}{}", error_code(r)),
        }
    }

    /// Why a refusal status that is no refusal ([`OciRegistry::class`]) is
    /// an error, for people.
    fn not_refused(r: &Response) -> String {
        if registrys_own(r) {
            format!(
                "HTTP {}{}: the registry did not accept the credentials (mistyped or expired?), which proves nothing about its access control",
                r.status,
                error_code(r)
            )
        } else {
            format!(
                "HTTP {} without the registry's error body: a front before the registry answered (is `registry` the registry?)",
                r.status
            )
        }
    }

    /// Whether a 405 is distribution's read-only answer to `method`: an
    /// `Allow` without the method, a plain-text or JSON body (never a
    /// page), and the `Docker-Distribution-Api-Version` the registry
    /// answers with, once it has been seen.
    fn read_only(&self, method: &Method, r: &Response) -> bool {
        let header = |n: &str| r.headers.get(n).and_then(|v| v.to_str().ok());
        let allow_lacks = header("allow").is_some_and(|a| {
            a.split(',')
                .all(|m| !m.trim().eq_ignore_ascii_case(method.as_str()))
        });
        let plain = header("content-type").is_some_and(|t| {
            let t = t.to_ascii_lowercase();
            t.starts_with("text/plain") || t.starts_with("application/json")
        });
        let version = self.api_version.borrow().clone();
        let same_version =
            version.is_none_or(|v| header("docker-distribution-api-version") == Some(&v));
        allow_lacks && plain && same_version
    }

    /// Why the registry did not take a write (`what`, for people): its
    /// access control ([`OciRegistry::class`]), or a failure.
    pub(super) fn write_error(&self, what: &str, method: &Method, r: &Response) -> WriteError {
        match self.class(r, Some(method)) {
            Class::Refused => WriteError::Refused(format!(
                "the registry refused the {what} ({})",
                Self::why_refused(r)
            )),
            _ if AUTH.contains(&r.status) => WriteError::Failed {
                reason: format!("{what}: {}", Self::not_refused(r)),
                client: true,
            },
            _ => WriteError::Failed {
                reason: format!("{what}: HTTP {}{}", r.status, error_code(r)),
                client: (400..500).contains(&r.status),
            },
        }
    }

    /// Why a read did not answer 200: the registry's access control
    /// (Denied, [`OciRegistry::class`]) or a failure.
    pub(super) fn read_error(&self, what: &str, r: &Response) -> crate::surface::RecoverOutcome {
        use crate::surface::RecoverOutcome;
        match self.class(r, None) {
            Class::Refused => RecoverOutcome::Denied {
                reason: format!("the registry refused {what} ({})", Self::why_refused(r)),
            },
            _ if AUTH.contains(&r.status) => RecoverOutcome::Error {
                reason: format!("{what}: {}", Self::not_refused(r)),
            },
            _ => RecoverOutcome::Error {
                reason: format!("{what}: HTTP {}{}", r.status, error_code(r)),
            },
        }
    }

    /// Uploads `data` to `repo` unless the repository has it; whether it
    /// did (a write was taken). `started`: the upload was opened (a write
    /// taken, whatever follows).
    pub(super) fn put_blob(
        &self,
        repo: &str,
        data: &[u8],
        started: &mut bool,
    ) -> Result<bool, WriteError> {
        let failed = |f: Fault| WriteError::Failed {
            reason: f.into(),
            client: false,
        };
        let digest = super::plant::digest_of(data);
        let url = self.at(&format!("/v2/{repo}/blobs/{digest}"));
        let head = self.call(Method::HEAD, &url, "*/*", None).map_err(failed)?;
        // The check is a read (pull scope): whatever its access control
        // says of it says nothing about the write, which its own answer
        // judges.
        match head.status {
            200 => return Ok(false),
            s if s == 404 || AUTH.contains(&s) => {}
            s => {
                return Err(WriteError::Failed {
                    reason: format!("push (its blob check): HTTP {s}{}", error_code(&head)),
                    client: (400..500).contains(&s),
                });
            }
        }
        let start = self.at(&format!("/v2/{repo}/blobs/uploads/"));
        let r = self
            .call(Method::POST, &start, "*/*", None)
            .map_err(failed)?;
        if r.status != 202 {
            return Err(self.write_error("blob upload", &Method::POST, &r));
        }
        *started = true;
        let loc = r
            .headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| failed(Fault::broken("the upload answer names no Location")))?;
        let loc = self.resolve(loc).map_err(failed)?;
        let sep = if loc.contains('?') { '&' } else { '?' };
        let put = format!("{loc}{sep}digest={}", crate::wire::percent_encode(&digest));
        let r = self
            .call(
                Method::PUT,
                &put,
                "*/*",
                Some(("application/octet-stream", data)),
            )
            .map_err(failed)?;
        if r.status != 201 {
            return Err(self.write_error("blob upload", &Method::PUT, &r));
        }
        Ok(true)
    }

    /// Pushes `manifest` under `tag`; the registry must store it as is
    /// (its digest `digest`).
    pub(super) fn put_manifest(
        &self,
        repo: &str,
        tag: &str,
        manifest: &[u8],
        digest: &str,
    ) -> Result<(), WriteError> {
        let url = self.at(&format!("/v2/{repo}/manifests/{tag}"));
        let r = self
            .call(
                Method::PUT,
                &url,
                "*/*",
                Some((super::plant::MANIFEST_TYPE, manifest)),
            )
            .map_err(|f| WriteError::Failed {
                reason: f.into(),
                client: false,
            })?;
        if r.status != 201 {
            return Err(self.write_error("manifest push", &Method::PUT, &r));
        }
        let stored = r
            .headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok());
        if stored.is_some_and(|d| d != digest) {
            return Err(WriteError::Failed {
                reason: "the registry stored the manifest under another digest".into(),
                client: false,
            });
        }
        Ok(())
    }

    /// The manifest `reference` (a tag or digest) of `repo`, as stored:
    /// `Ok(None)` when the registry says there is none.
    pub(super) fn manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<Option<Vec<u8>>, crate::surface::RecoverOutcome> {
        use crate::surface::RecoverOutcome;
        let url = self.at(&format!("/v2/{repo}/manifests/{reference}"));
        let shown = escape::bytes(format!("{repo}:{reference}").as_bytes());
        let r = self
            .call(Method::GET, &url, ACCEPT, None)
            .map_err(|f| RecoverOutcome::Error { reason: f.into() })?;
        match r.status {
            200 => Ok(Some(r.body)),
            404 if registrys_own(&r) => Ok(None),
            404 => Err(RecoverOutcome::Error {
                reason: format!(
                    "reading {shown}: HTTP 404 without the registry's error body (is `registry` the registry?)"
                ),
            }),
            _ => Err(self.read_error(&format!("reading {shown}"), &r)),
        }
    }

    /// The digest `reference` of `repo` has, by HEAD (the registry's
    /// `Docker-Content-Digest`; the body's hash when it gives none).
    pub(super) fn digest_at(&self, repo: &str, reference: &str) -> Result<Option<String>, Fault> {
        let url = self.at(&format!("/v2/{repo}/manifests/{reference}"));
        let r = self.call(Method::HEAD, &url, ACCEPT, None)?;
        match r.status {
            200 => match r
                .headers
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
            {
                Some(d) => Ok(Some(d.to_string())),
                None => Ok(self
                    .manifest(repo, reference)
                    .map_err(|o| Fault::broken(outcome_reason(o)))?
                    .map(|b| super::plant::digest_of(&b))),
            },
            404 => Ok(None),
            s => Err(Fault::broken(format!(
                "reading the digest of {}: HTTP {s}",
                escape::bytes(format!("{repo}:{reference}").as_bytes())
            ))),
        }
    }

    /// Every name a paged listing (`/v2/_catalog`, a tags list) holds
    /// under `field`, each handed to `each` once; how many. `Ok(None)`:
    /// the registry says the repository is unknown (404). Pages by `Link`
    /// until there is none; a page of names all seen (a registry that
    /// does not page) is no full look.
    pub(super) fn list(
        &self,
        first: &str,
        field: &str,
        what: &str,
        each: &mut dyn FnMut(&str),
    ) -> Result<Option<usize>, crate::surface::RecoverOutcome> {
        use crate::surface::RecoverOutcome;
        let failed = |why: String| RecoverOutcome::Error {
            reason: format!("listing {what}: {why}"),
        };
        use sha2::{Digest, Sha256};
        // Hashes, not the names: a name may be long, and a registry may
        // list a million of them.
        let mut seen: std::collections::HashSet<[u8; 16]> = std::collections::HashSet::new();
        let mut url = first.to_string();
        for page in 0..MAX_PAGES {
            let r = self
                .call(Method::GET, &url, "application/json", None)
                .map_err(|f| RecoverOutcome::Error { reason: f.into() })?;
            if r.status == 404 && page == 0 && registrys_own(&r) {
                return Ok(None);
            }
            if r.status != 200 {
                return Err(self.read_error(&format!("listing {what}"), &r));
            }
            let v = r.json().map_err(|f| failed(f.into_reason()))?;
            // An emptied repository's tags are `null`.
            let names = match &v[field] {
                Value::Null => vec![],
                Value::Array(a) => a.clone(),
                _ => return Err(failed(format!("the answer has no `{field}` list"))),
            };
            let mut new = 0;
            for n in &names {
                let Some(n) = n.as_str() else {
                    return Err(failed(format!("a `{field}` entry that is not a string")));
                };
                let h: [u8; 16] = Sha256::digest(n.as_bytes())[..16]
                    .try_into()
                    .expect("16 bytes");
                if seen.insert(h) {
                    if seen.len() > MAX_NAMES {
                        return Err(failed(format!(
                            "more than {MAX_NAMES} names: too many to hold, so it is not read to its end"
                        )));
                    }
                    new += 1;
                    each(n);
                }
            }
            let Some(next) = next_link(&r.headers) else {
                return Ok(Some(seen.len()));
            };
            if new == 0 {
                return Err(failed(
                    "a page lists only names already listed: it does not page".into(),
                ));
            }
            url = self.resolve(&next).map_err(|f| failed(f.into_reason()))?;
        }
        Err(failed(format!("it did not end after {MAX_PAGES} pages")))
    }

    /// The first catalog page's URL.
    pub(super) fn catalog_url(&self) -> String {
        self.at(&format!("/v2/_catalog?n={PAGE}"))
    }

    /// Whether the blob `digest` of `repo` holds `needle`, searched as it
    /// arrives and hashed: bytes that are not the digest's are an error,
    /// and so is a 404 (the manifest names the blob: the registry not
    /// serving it is no answer about the nonce). A redirect to another
    /// origin (a storage backend) is followed without credentials.
    pub(super) fn blob_holds(
        &self,
        repo: &str,
        digest: &str,
        needle: &str,
    ) -> Result<bool, crate::surface::RecoverOutcome> {
        use crate::surface::RecoverOutcome;
        use sha2::{Digest, Sha256};
        let failed = |f: Fault| RecoverOutcome::Error {
            reason: f.context("pulling the blob").into_reason(),
        };
        let key = repo.to_string();
        let mut url = self.at(&format!("/v2/{repo}/blobs/{digest}"));
        let mut ours = true;
        for hop in 0..4 {
            let mut needles = Needles::new(vec![needle.to_string()]);
            let mut hash = Sha256::new();
            // The start of the body, kept to judge an answer that is not
            // the blob (its error body is small).
            let mut head = Vec::new();
            let req = Request::new(Method::GET, &url);
            let req = if ours { self.authed(req, &key) } else { req };
            let (status, headers) = self
                .client()
                .map_err(failed)?
                .stream(&req, &mut |c| {
                    needles.feed(c);
                    hash.update(c);
                    let room = ERROR_BODY.saturating_sub(head.len());
                    head.extend_from_slice(&c[..c.len().min(room)]);
                    Ok(())
                })
                .map_err(|f| failed(self.failure(&Method::GET, f)))?;
            let answer = Response {
                status,
                headers,
                body: head,
            };
            match status {
                200 => {
                    let got = format!("sha256:{}", crate::nonce::to_hex(&hash.finalize()));
                    if got != digest {
                        return Err(failed(Fault::broken(
                            "the registry served bytes that are not the blob's digest",
                        )));
                    }
                    return Ok(needles.found(0));
                }
                401 if ours
                    && hop == 0
                    && self.challenged(&answer.headers, &key).map_err(failed)? => {}
                301 | 302 | 303 | 307 | 308 => {
                    let loc = answer.headers.get("location").and_then(|v| v.to_str().ok());
                    let Some(loc) = loc else {
                        return Err(failed(Fault::broken("a redirect without a Location")));
                    };
                    url = match self.resolve(loc) {
                        Ok(u) => u,
                        Err(_) if loc.starts_with("https://") || loc.starts_with("http://") => {
                            ours = false;
                            loc.to_string()
                        }
                        Err(f) => return Err(failed(f)),
                    };
                }
                // Only the registry's own answer can refuse: a storage
                // backend's 403 (an expired signed URL) is an error.
                s if ours && AUTH.contains(&s) => return Err(self.read_error("the blob", &answer)),
                404 if ours && registrys_own(&answer) => {
                    return Err(failed(Fault::broken(format!(
                        "the registry has no blob {digest}{}, which the manifest names",
                        error_code(&answer)
                    ))));
                }
                s => return Err(failed(Fault::broken(format!("HTTP {s}")))),
            }
        }
        Err(failed(Fault::broken("too many redirects")))
    }
}

/// The reason of an outcome that is not a recovery.
pub(super) fn outcome_reason(o: crate::surface::RecoverOutcome) -> String {
    use crate::surface::RecoverOutcome;
    match o {
        RecoverOutcome::Denied { reason } | RecoverOutcome::Error { reason } => reason,
        RecoverOutcome::Found { detail } | RecoverOutcome::NotFound { detail } => detail,
    }
}
