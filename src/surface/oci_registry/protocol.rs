//! The registry API v2 as both runs speak it: bounded requests with the
//! surface's credentials and the bearer token flow, blob uploads and
//! manifest pushes, manifests read back, the tags list and the catalog
//! read page by page (`Link`) to their end, and a blob searched as it
//! arrives.

use super::Instance;
use super::auth::parse_challenge;
use super::plant::WriteError;
use crate::escape;
use crate::fault::Fault;
use crate::http::{Request, Response};
use crate::scan::Needles;
use ::http::Method;
use serde_json::Value;

/// Catalog entries asked for per page: the spec's default page, well
/// under distribution's `maxentries` (1000; more is a 400).
const PAGE: usize = 100;

/// A listing that has not ended after this many pages is an error.
const MAX_PAGES: usize = 10_000;

/// Media types a manifest read accepts: the registry then answers with
/// what it stores, never a conversion (whose digest would differ).
pub(super) const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";

/// Whether an answer is the registry's own: its JSON error body
/// (`{"errors": [...]}`) or an auth challenge. A 401/403 page without
/// either comes from something in front of it (a proxy, an SSO gate).
pub(super) fn registrys_own(r: &Response) -> bool {
    r.headers.contains_key("www-authenticate")
        || serde_json::from_slice::<Value>(&r.body).is_ok_and(|v| v["errors"].is_array())
}

/// The first error code of the registry's error body, for messages.
fn error_code(r: &Response) -> String {
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

impl Instance {
    /// Why the registry did not take a write (`what`, for people): its
    /// access control (a 401/403 of its own, read-only mode's 405 with an
    /// `Allow` without the method), or a failure.
    pub(super) fn write_error(&self, what: &str, method: &Method, r: &Response) -> WriteError {
        let allow = r
            .headers
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match r.status {
            401 | 403 if registrys_own(r) => {
                let scope = r
                    .headers
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_challenge)
                    .and_then(|c| c.error)
                    .is_some_and(|e| e == "insufficient_scope");
                WriteError::Refused(format!(
                    "the registry refused the {what} (HTTP {}{})",
                    r.status,
                    if scope {
                        ", insufficient_scope: the token does not cover it"
                    } else {
                        ""
                    }
                ))
            }
            405 if allow
                .as_ref()
                .is_some_and(|a| !a.to_ascii_uppercase().contains(method.as_str())) =>
            {
                WriteError::Refused(format!(
                    "the registry refused the {what} (HTTP 405: it allows only {}; read-only)",
                    escape::bytes(allow.unwrap_or_default().as_bytes())
                ))
            }
            s => WriteError::Failed {
                reason: format!("{what}: HTTP {s}{}", error_code(r)),
                client: (400..500).contains(&s),
            },
        }
    }

    /// Why a read did not answer 200: the registry's access control
    /// (Denied) or a failure.
    pub(super) fn read_error(&self, what: &str, r: &Response) -> crate::surface::RecoverOutcome {
        use crate::surface::RecoverOutcome;
        match r.status {
            401 | 403 if registrys_own(r) => RecoverOutcome::Denied {
                reason: format!("the registry refused {what} (HTTP {})", r.status),
            },
            s => RecoverOutcome::Failed {
                reason: format!("{what}: HTTP {s}{}", error_code(r)),
            },
        }
    }

    /// Uploads `data` to `repo` unless the repository has it; whether it
    /// did (a write was taken).
    pub(super) fn put_blob(&self, repo: &str, data: &[u8]) -> Result<bool, WriteError> {
        let failed = |f: Fault| WriteError::Failed {
            reason: f.into(),
            client: false,
        };
        let digest = super::plant::digest_of(data);
        let url = self.at(&format!("/v2/{repo}/blobs/{digest}"));
        let head = self.call(Method::HEAD, &url, "*/*", None).map_err(failed)?;
        match head.status {
            200 => return Ok(false),
            404 => {}
            _ => return Err(self.write_error("push (its blob check)", &Method::HEAD, &head)),
        }
        let start = self.at(&format!("/v2/{repo}/blobs/uploads/"));
        let r = self
            .call(Method::POST, &start, "*/*", None)
            .map_err(failed)?;
        if r.status != 202 {
            return Err(self.write_error("blob upload", &Method::POST, &r));
        }
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
            .map_err(|f| RecoverOutcome::Failed { reason: f.into() })?;
        match r.status {
            200 => Ok(Some(r.body)),
            404 if registrys_own(&r) => Ok(None),
            404 => Err(RecoverOutcome::Failed {
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
        let failed = |why: String| RecoverOutcome::Failed {
            reason: format!("listing {what}: {why}"),
        };
        let mut seen = std::collections::HashSet::new();
        let mut url = first.to_string();
        for page in 0..MAX_PAGES {
            let r = self
                .call(Method::GET, &url, "application/json", None)
                .map_err(|f| RecoverOutcome::Failed { reason: f.into() })?;
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
                if seen.insert(n.to_string()) {
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
    /// arrives (`Ok(None)`: the registry has no such blob). A redirect to
    /// another origin (a storage backend) is followed without credentials.
    pub(super) fn blob_holds(
        &self,
        repo: &str,
        digest: &str,
        needle: &str,
    ) -> Result<Option<bool>, crate::surface::RecoverOutcome> {
        use crate::surface::RecoverOutcome;
        let failed = |f: Fault| RecoverOutcome::Failed {
            reason: f.context("pulling the blob").into_reason(),
        };
        let key = repo.to_string();
        let mut url = self.at(&format!("/v2/{repo}/blobs/{digest}"));
        let mut ours = true;
        for hop in 0..4 {
            let mut needles = Needles::new(vec![needle.to_string()]);
            let req = Request::new(Method::GET, &url);
            let req = if ours { self.authed(req, &key) } else { req };
            let (status, headers) = self
                .client()
                .map_err(failed)?
                .stream(&req, &mut |c| {
                    needles.feed(c);
                    Ok(())
                })
                .map_err(|f| failed(self.failure(&Method::GET, f)))?;
            match status {
                200 => return Ok(Some(needles.found(0))),
                404 if ours => return Ok(None),
                401 if ours && hop == 0 && self.challenged(&headers, &key).map_err(failed)? => {}
                301 | 302 | 303 | 307 | 308 => {
                    let Some(loc) = headers.get("location").and_then(|v| v.to_str().ok()) else {
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
                401 | 403 if ours => {
                    return Err(RecoverOutcome::Denied {
                        reason: format!("the registry refused the blob (HTTP {status})"),
                    });
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
        RecoverOutcome::Denied { reason } | RecoverOutcome::Failed { reason } => reason,
        RecoverOutcome::Found { detail } | RecoverOutcome::NotFound { detail } => detail,
    }
}
