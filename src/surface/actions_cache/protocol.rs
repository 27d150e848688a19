//! The cache service as both runs reach it: Twirp calls with the runtime
//! token (only the service's own JSON is its answer; only its
//! `permission_denied` a refusal), the REST listing read to its
//! `total_count`, a key's lookup, an archive searched as it arrives.

use super::{ActionsCache, ListError, Listed, MAX_PAGES, PER_PAGE, TWIRP, Twirp, scopes_of};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Class};
use crate::http::{Failure, Request};
use crate::scan::Needles;
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// One page of the REST listing (its entries read one by one: one that
/// lacks a field is an error of its own).
#[derive(Deserialize)]
struct Page {
    actions_caches: Vec<Value>,
    total_count: u64,
}

/// `CreateCacheEntry`'s request.
#[derive(Serialize)]
pub(super) struct Reserve<'a> {
    pub key: &'a str,
    pub version: &'a str,
}

/// `FinalizeCacheEntryUpload`'s request (proto3 JSON: an int64 is a
/// string).
#[derive(Serialize)]
pub(super) struct Finalize<'a> {
    pub key: &'a str,
    pub size_bytes: String,
    pub version: &'a str,
}

/// `GetCacheEntryDownloadURL`'s request: a key, the prefixes to fall back
/// on, the version.
#[derive(Serialize)]
pub(super) struct Lookup<'a> {
    pub key: &'a str,
    pub restore_keys: &'a [&'a str],
    pub version: &'a str,
}

/// A service URL's origin, for people (escaped; never userinfo).
pub(super) use crate::github::host_of;

impl ActionsCache {
    pub(super) fn client(&self) -> Result<&crate::http::Client, Fault> {
        self.client.get()
    }

    pub(super) fn service(&self) -> String {
        self.settings
            .results_url
            .as_deref()
            .map(host_of)
            .unwrap_or_else(|| "?".into())
    }

    /// The scopes the runtime token claims, for details.
    pub(super) fn token_scopes(&self) -> Vec<(String, u8)> {
        self.settings
            .token
            .as_deref()
            .and_then(scopes_of)
            .unwrap_or_default()
    }

    pub(super) fn readable(&self) -> String {
        let r: Vec<String> = self
            .token_scopes()
            .iter()
            .filter(|(_, p)| p & 1 != 0)
            .map(|(s, _)| escape::bytes(s.as_bytes()))
            .collect();
        if r.is_empty() {
            "no scope it claims".into()
        } else {
            r.join(", ")
        }
    }

    /// One Twirp call: the service's answer, or why there is none
    /// (`Unsupported` without a runtime token, `Unreachable`, `Broken` for
    /// an answer that is not the service's word).
    pub(super) fn twirp(&self, method: &str, body: &impl Serialize) -> Result<Twirp, Fault> {
        let (Some(base), Some(token)) = (&self.settings.results_url, &self.settings.token) else {
            return Err(Fault::unsupported(
                self.settings.no_token.clone().unwrap_or_default(),
            ));
        };
        let url = crate::github::twirp_url(base, TWIRP, method);
        let req = Request::new(Method::POST, &url)
            .json(&serde_json::to_value(body).expect("requests serialize"))
            .header("accept", "application/json")
            .secret_header("authorization", format!("Bearer {token}"));
        let resp = self.client()?.send(&req).map_err(|f| match f {
            Failure::Unreachable(m) => Fault::Unreachable(format!(
                "cannot reach the cache service {}: {m}",
                self.service()
            )),
            Failure::Broken(m) => Fault::broken(format!(
                "{method} at the cache service {}: {m}",
                self.service()
            )),
        })?;
        // Only a JSON object is the service's answer: an HTML page, an
        // empty or cut body came from something else (a proxy, a login).
        let v = resp.json().ok().filter(Value::is_object);
        let raw = |v: &Value| {
            v["message"]
                .as_str()
                .or(v["msg"].as_str())
                .unwrap_or("")
                .to_string()
        };
        let msg = escape::bytes(v.as_ref().map(raw).unwrap_or_default().as_bytes());
        let service = self.service();
        let class = answer::classify(&(&resp).into(), &crate::github::TWIRP);
        match (resp.status, v) {
            (200, Some(v)) if v["ok"] == json!(true) => Ok(Twirp::Ok(v)),
            (200, Some(v)) => Ok(Twirp::NotOk(raw(&v))),
            (200, None) => Err(Fault::broken(format!(
                "{method} at {service}: HTTP 200 with a body that is not a JSON object, \
                 so not the cache service's answer"
            ))),
            // (Twirp's `permission_denied` 403: crate::github::TWIRP.)
            _ if class == Class::Refused => {
                Ok(Twirp::Denied(format!("HTTP 403 permission_denied {msg}")))
            }
            (403, _) => Err(Fault::broken(format!(
                "{method} at {service}: HTTP 403 without Twirp's permission_denied \
                 (a proxy or a firewall?) {msg}"
            ))),
            (401, _) => Err(Fault::broken(format!(
                "the cache service did not accept the runtime token ({}): HTTP 401 {msg}",
                self.settings.token_source.as_deref().unwrap_or("?"),
            ))),
            (s, _) => Err(Fault::broken(format!("{method}: HTTP {s} {msg}"))),
        }
    }

    /// The API token and repository the listing needs; `Unsupported`
    /// (why not) without them.
    pub(super) fn rest(&self) -> Result<(&str, &str), Fault> {
        match (
            &self.settings.api_token,
            &self.settings.repository,
            &self.settings.no_listing,
        ) {
            (Some(t), Some(r), None) => Ok((t, r)),
            (_, _, why) => Err(Fault::unsupported(why.clone().unwrap_or_default())),
        }
    }

    pub(super) fn rest_request<'u>(
        &self,
        method: Method,
        url: &'u str,
        token: &str,
    ) -> Request<'u> {
        Request::new(method, url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .secret_header("authorization", format!("Bearer {token}"))
    }

    pub(super) fn api_host(&self) -> String {
        host_of(&self.settings.api_url)
    }

    /// A REST 403: GitHub's access control only with its JSON error body
    /// and no sign of a rate limit (`x-ratelimit-remaining: 0`, a
    /// `retry-after`, a message naming it), which is no answer about the
    /// caches.
    pub(super) fn refusal(
        &self,
        resp: &crate::http::Response,
        v: Option<&Value>,
        repo: &str,
    ) -> ListError {
        let message = v.and_then(|v| v["message"].as_str());
        let shown = escape::bytes(message.unwrap_or("").as_bytes());
        let header = |n: &str| resp.headers.get(n).and_then(|h| h.to_str().ok());
        let limited = header("x-ratelimit-remaining").is_some_and(|r| r.trim() == "0")
            || header("retry-after").is_some()
            || message.is_some_and(|m| m.to_ascii_lowercase().contains("rate limit"));
        let host = self.api_host();
        match answer::classify(&resp.into(), &crate::github::REST) {
            Class::NotTheServer => ListError::Failed(format!(
                "listing the caches of {repo} at {host}: HTTP 403 without GitHub's error body \
                 (a proxy or a firewall?)"
            )),
            _ if limited => ListError::Failed(format!(
                "listing the caches of {repo} at {host}: rate limited (HTTP 403 {shown})"
            )),
            Class::Refused => ListError::Denied(format!(
                "the API token ({}) may not list the caches of {repo}: HTTP 403 {shown}",
                self.settings.api_token_source.as_deref().unwrap_or("?")
            )),
            // GitHub's own 403 that names no missing permission (SAML
            // enforcement, an IP allow list): no closed route.
            _ => ListError::Failed(format!(
                "listing the caches of {repo} at {host}: GitHub refused it for a reason that is \
                 not the token's permission (HTTP 403 {shown})"
            )),
        }
    }

    /// Lists every entry (or every entry whose key starts with `prefix`),
    /// handing each to `each` once; returns how many there were. The API
    /// pages by number: a listing of more than one page is read again,
    /// whole, until two passes agree ([`crate::route::complete`]).
    pub(super) fn list(
        &self,
        prefix: Option<&str>,
        each: &mut dyn FnMut(&Listed),
    ) -> Result<usize, ListError> {
        let done = crate::route::read_whole(|_, item| self.list_pass(prefix, item), each)?;
        done.map_err(|d| {
            let (_, repo) = self.rest().unwrap_or(("", ""));
            ListError::Failed(d.why(&format!(
                "the listing of the caches of {repo} at {}",
                self.api_host()
            )))
        })
    }

    /// One whole pass of the listing, page by page: every entry, and how
    /// it paged.
    fn list_pass(
        &self,
        prefix: Option<&str>,
        each: &mut dyn FnMut(&str, &Listed),
    ) -> Result<crate::route::Ended, ListError> {
        let (token, repo) = self.rest().map_err(|f| ListError::Failed(f.into()))?;
        let client = self.client().map_err(|f| ListError::Failed(f.into()))?;
        // `total_count` of the first page: the entries there were when the
        // listing began.
        let mut counted: Option<u64> = None;
        for page in 1..=MAX_PAGES {
            // Newest first by creation: the default order (last access)
            // moves entries between pages whenever a workflow restores
            // one; new entries only push older ones down (seen twice,
            // never skipped), and the plant, made moments ago, is on the
            // first pages.
            let mut url = format!(
                "{}/repos/{repo}/actions/caches?per_page={PER_PAGE}&page={page}&sort=created_at&direction=desc",
                self.settings.api_url
            );
            if let Some(p) = prefix {
                url.push_str("&key=");
                url.push_str(&crate::wire::percent_encode(p));
            }
            let resp = client
                .send(&self.rest_request(Method::GET, &url, token))
                .map_err(|f| {
                    ListError::Failed(format!("listing caches at {}: {f}", self.api_host()))
                })?;
            let v = resp.json().ok().filter(Value::is_object);
            let failed = |what: String| {
                ListError::Failed(format!(
                    "listing the caches of {repo} at {}: {what}",
                    self.api_host()
                ))
            };
            match resp.status {
                200 => {}
                403 => return Err(self.refusal(&resp, v.as_ref(), repo)),
                s => {
                    let msg = v.as_ref().and_then(|v| v["message"].as_str());
                    let msg = escape::bytes(msg.unwrap_or("").as_bytes());
                    return Err(failed(format!("HTTP {s} {msg}")));
                }
            }
            let Some(Page {
                actions_caches: list,
                total_count,
            }) = v.as_ref().and_then(|v| Page::deserialize(v).ok())
            else {
                return Err(failed(
                    "the answer (HTTP 200) has no `actions_caches` or no `total_count`".into(),
                ));
            };
            let counted = *counted.get_or_insert(total_count);
            for e in &list {
                let Ok(entry) = Listed::deserialize(e) else {
                    return Err(failed(
                        "an entry of the listing lacks its id, key, version or ref".into(),
                    ));
                };
                // Entries made while the listing runs push older ones a
                // page down: the same entry again, handed over once.
                each(&entry.id.to_string(), &entry);
            }
            if list.len() < PER_PAGE {
                // Fewer distinct entries than the first page counted: one
                // went while it was read, and one may have been skipped.
                return Ok(crate::route::Ended {
                    paging: if page == 1 {
                        crate::route::Paging::Whole
                    } else {
                        crate::route::Paging::Numbered
                    },
                    counted: Some(counted),
                });
            }
        }
        Err(ListError::Failed(format!(
            "the cache listing did not end after {MAX_PAGES} pages"
        )))
    }

    /// The scope (ref) of the entry with exactly this key, when listing is
    /// possible: for details only.
    pub(super) fn scope_of(&self, key: &str) -> Option<String> {
        let mut scope = None;
        self.list(Some(key), &mut |e| {
            if e.key == key && scope.is_none() {
                scope = Some(e.scope.clone());
            }
        })
        .ok()?;
        scope
    }

    /// Downloads a signed URL's archive (no token: the URL is the
    /// credential) and says whether it holds `needle`, searched as it
    /// arrives. `Unreachable` or `Broken` when it cannot be read.
    pub(super) fn archive_holds(&self, url: &str, needle: &str) -> Result<bool, Fault> {
        let mut needles = Needles::new(vec![needle.to_string()]);
        let status = self
            .client()?
            .search(&Request::new(Method::GET, url), &mut needles)
            .map_err(|f| Fault::from(f).context("downloading the restored archive"))?;
        if status != 200 {
            return Err(Fault::broken(format!(
                "downloading the restored archive: HTTP {status}"
            )));
        }
        Ok(needles.found(0))
    }
}

pub(super) fn str_field(v: &Value, proto: &str, camel: &str) -> String {
    v[proto]
        .as_str()
        .or(v[camel].as_str())
        .unwrap_or("")
        .to_string()
}
