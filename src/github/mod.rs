//! GitHub's REST API as the surfaces that write and read GitHub's own
//! objects reach it (`actions-artifacts`, `github-api`): one authenticated
//! call, a listing read to its end, and the one rule that tells GitHub's
//! access control from everything else.
//!
//! What GitHub's answers mean is [`REST`]'s (and a Twirp service's,
//! [`TWIRP`]'s) to say, through [`crate::http::answer`]: a 403 is GitHub's
//! own only with GitHub's JSON error body (a `message`) and no sign of a
//! rate limit, and it refuses the token a permission only when its message
//! says so ([`missing_permission`]); the permission GitHub says it wanted
//! (`X-Accepted-GitHub-Permissions`) is kept for the detail. A rate limit
//! is waited out when GitHub says how long (`retry-after`, at most
//! [`MAX_WAIT`]) and is otherwise an error;
//! 401, 404 on a write, 422, 5xx and anything without GitHub's body are
//! errors. Listings follow GitHub's `Link: <…>; rel="next"` to the end,
//! never to another host (the token goes only to the configured API), and
//! a listing that says `total_count` must hand over that many. The config
//! keys the GitHub surfaces share are `options.rs`'s.

mod answers;
mod contents;
mod options;

pub use answers::{REST, TWIRP, from_github, missing_permission, twirp_code};
pub use contents::file_at;
pub use options::{
    GITHUB_COM_RESULTS, Runtime, api_token, api_url_option, check_repository, repository_option,
    runtime, to_github_only, twirp_url,
};

use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Class};
use crate::http::{Client, Failure, Request, Response};
use ::http::Method;
use serde_json::Value;
use std::collections::HashSet;
use std::time::Duration;

/// The longest `retry-after` honoured (the HTTP client's, which waits out
/// a 429 itself: what reaches here is GitHub's rate-limit 403).
pub const MAX_WAIT: Duration = crate::http::MAX_RETRY_AFTER;

/// Pages a listing may take before it is an error.
const MAX_PAGES: usize = 1_000_000;

/// Rate-limit waits per call.
const RATE_RETRIES: u32 = 3;

/// Page size of every listing (GitHub's maximum for most lists; variables
/// allow 30 and say so by paging on).
pub const PER_PAGE: usize = 100;

/// One API: where, and with which token (named by its source for people).
pub struct Api<'a> {
    pub client: &'a Client,
    /// The API base URL, without a trailing `/`.
    pub base: &'a str,
    pub token: &'a str,
    /// The environment variable the token came from.
    pub source: &'a str,
}

/// What an API call came to, when it was not the answer wanted.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// GitHub's own 403 (or GraphQL `FORBIDDEN`). `permission`: it refuses
    /// the token a permission ([`REST`]'s rule): a closed route; else it
    /// is some other rule of GitHub's, which proves nothing closed.
    /// `wanted` is `X-Accepted-GitHub-Permissions`, when it said.
    Denied {
        message: String,
        wanted: Option<String>,
        permission: bool,
    },
    /// HTTP 404 with GitHub's body: no such object (or one the token may
    /// not see: GitHub answers both alike).
    NotFound(String),
    /// Anything else: the text says what, safe to print.
    Failed(String),
}

impl ApiError {
    /// Whether this is GitHub refusing the token a permission: the
    /// answer GitHub gives a token that lacks one ("Resource not
    /// accessible by integration", or "… by personal access token"), not
    /// a 403 of a feature that is off (code scanning without GitHub Code
    /// Security), which closes nothing the token could open.
    pub fn is_permission_refusal(&self) -> bool {
        matches!(
            self,
            ApiError::Denied {
                permission: true,
                ..
            }
        )
    }

    /// For a detail: "HTTP 403 Resource not accessible by integration
    /// (GitHub wants issues=write; pull_requests=write)".
    pub fn text(&self) -> String {
        match self {
            ApiError::Denied {
                message, wanted, ..
            } => match wanted {
                Some(w) => format!(
                    "HTTP 403 {message} (GitHub wants {})",
                    escape::bytes(w.as_bytes())
                ),
                None => format!("HTTP 403 {message}"),
            },
            ApiError::NotFound(m) | ApiError::Failed(m) => m.clone(),
        }
    }
}

/// A successful answer: status and JSON body (`Null` when empty).
pub struct Answer {
    pub status: u16,
    pub json: Value,
    pub headers: ::http::HeaderMap,
}

/// `base` + `path`, when `path` is a path on `base`: so that no path (a
/// journal entry's, a relayed answer's) can name another host (`@host/…`,
/// `//host/…`) or climb out of the API's base (`..`, `%2e%2e`, `%2f`) with
/// the token attached. `Err` (`Invalid`): the path, escaped for a message.
pub fn join(base: &str, path: &str) -> Result<String, Fault> {
    let route = path.split_once('?').map_or(path, |(r, _)| r);
    let lower = route.to_ascii_lowercase();
    let fine = route.starts_with('/')
        && !route.starts_with("//")
        && !route.split('/').any(|seg| seg == "." || seg == "..")
        && !["%2e", "%2f", "%5c", "%40"]
            .iter()
            .any(|e| lower.contains(e))
        && !path
            .bytes()
            .any(|b| b.is_ascii_control() || b" @\\#".contains(&b) || !b.is_ascii());
    if fine {
        Ok(format!("{base}{path}"))
    } else {
        Err(Fault::invalid(escape::bytes(path.as_bytes())))
    }
}

impl<'a> Api<'a> {
    fn request<'u>(&self, method: Method, url: &'u str) -> Request<'u> {
        let r = Request::new(method, url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28");
        // An empty token is an anonymous reader (what anyone can read of
        // a public repository).
        if self.token.is_empty() {
            r
        } else {
            r.secret_header("authorization", format!("Bearer {}", self.token))
        }
    }

    /// The absolute URL of an API path (`/repos/…`) on the configured
    /// host ([`join`]).
    pub fn url(&self, path: &str) -> Result<String, ApiError> {
        join(self.base, path).map_err(|path| {
            ApiError::Failed(format!(
                "refused to call {} with the path {path}: not a path on it",
                self.host()
            ))
        })
    }

    fn host(&self) -> String {
        host_of(self.base)
    }

    /// One call: `what` names it for errors ("creating a label"). 2xx is
    /// the answer; everything else is an [`ApiError`].
    pub fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Answer, ApiError> {
        self.call_url(method, &self.url(path)?, body, what)
    }

    /// [`Api::call`] on an absolute URL (GraphQL's endpoint, which is not
    /// under the REST base on GHES): the token goes to it, so it must be
    /// the configured API's.
    pub fn call_url(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Answer, ApiError> {
        let mut req = self.request(method, url);
        if let Some(b) = body {
            req = req.json(b);
        }
        for attempt in 0..=RATE_RETRIES {
            let resp = self.client.send(&req).map_err(|f| match f {
                Failure::Unreachable(m) => {
                    ApiError::Failed(format!("{what}: cannot reach {}: {m}", self.host()))
                }
                Failure::Broken(m) => ApiError::Failed(format!("{what} at {}: {m}", self.host())),
            })?;
            match self.judge(&resp, what) {
                Err(Judged::Wait(d)) if attempt < RATE_RETRIES => std::thread::sleep(d),
                Err(Judged::Wait(_)) => {
                    return Err(ApiError::Failed(format!(
                        "{what} at {}: still rate limited after {RATE_RETRIES} waits",
                        self.host()
                    )));
                }
                Err(Judged::Error(e)) => return Err(e),
                Ok(a) => return Ok(a),
            }
        }
        unreachable!("the loop returns")
    }

    fn judge(&self, resp: &Response, what: &str) -> Result<Answer, Judged> {
        let v: Option<Value> = if resp.body.iter().all(u8::is_ascii_whitespace) {
            Some(Value::Null)
        } else {
            resp.json().ok()
        };
        let header = |n: &str| resp.headers.get(n).and_then(|h| h.to_str().ok());
        let message = v
            .as_ref()
            .and_then(|v| v["message"].as_str())
            .map(str::to_string);
        let shown = escape::bytes(message.as_deref().unwrap_or("").as_bytes());
        let host = self.host();
        if (200..300).contains(&resp.status) {
            return match v {
                Some(json) => Ok(Answer {
                    status: resp.status,
                    json,
                    headers: resp.headers.clone(),
                }),
                None => Err(Judged::Error(ApiError::Failed(format!(
                    "{what} at {host}: HTTP {} with a body that is not JSON, so not GitHub's answer",
                    resp.status
                )))),
            };
        }
        let limited = header("x-ratelimit-remaining").is_some_and(|r| r.trim() == "0")
            || header("retry-after").is_some()
            || message
                .as_deref()
                .is_some_and(|m| m.to_ascii_lowercase().contains("rate limit"));
        if matches!(resp.status, 403 | 429) && limited {
            let wait = crate::http::retry_after(&resp.headers);
            return match wait {
                Some(d) if d <= MAX_WAIT => Err(Judged::Wait(d)),
                _ => Err(Judged::Error(ApiError::Failed(format!(
                    "{what} at {host}: rate limited (HTTP {} {shown}), and GitHub asks for a \
                     wait longer than {} s or names none",
                    resp.status,
                    MAX_WAIT.as_secs()
                )))),
            };
        }
        let denied = |permission| ApiError::Denied {
            message: shown.clone(),
            wanted: header("x-accepted-github-permissions").map(str::to_string),
            permission,
        };
        Err(Judged::Error(
            match (answer::classify(&resp.into(), &REST), resp.status) {
                (Class::Refused, _) => denied(true),
                (Class::Failed, 403) if message.is_some() => denied(false),
                (_, 403) => ApiError::Failed(format!(
                    "{what} at {host}: HTTP 403 without GitHub's error body (a proxy or a firewall?) {shown}"
                )),
                (_, 401) => ApiError::Failed(format!(
                    "{what}: {host} did not accept the token ({}): HTTP 401 {shown}",
                    escape::bytes(self.source.as_bytes())
                )),
                (Class::Absent, _) if message.is_some() => {
                    ApiError::NotFound(format!("{what} at {host}: HTTP 404 {shown}"))
                }
                (_, s) => ApiError::Failed(format!("{what} at {host}: HTTP {s} {shown}")),
            },
        ))
    }

    /// A call GitHub answers with a redirect (an artifact's zip): the
    /// `Location`, which carries its own signature and gets no token.
    pub fn redirect(&self, path: &str, what: &str) -> Result<String, ApiError> {
        let url = self.url(path)?;
        let resp = self
            .client
            .send(&self.request(Method::GET, &url))
            .map_err(|f| ApiError::Failed(format!("{what} at {}: {f}", self.host())))?;
        if resp.status == 302 {
            return match resp.headers.get("location").and_then(|h| h.to_str().ok()) {
                Some(l) if crate::http::check_url(l).is_ok() => Ok(l.to_string()),
                _ => Err(ApiError::Failed(format!(
                    "{what} at {}: HTTP 302 without a usable Location",
                    self.host()
                ))),
            };
        }
        match self.judge(&resp, what) {
            Ok(a) => Err(ApiError::Failed(format!(
                "{what} at {}: HTTP {} where GitHub redirects to the download",
                self.host(),
                a.status
            ))),
            Err(Judged::Wait(_)) => Err(ApiError::Failed(format!(
                "{what} at {}: rate limited",
                self.host()
            ))),
            Err(Judged::Error(e)) => Err(e),
        }
    }

    /// Reads a listing to its end, handing every item to `each` once:
    /// `path` with `per_page`, then every `rel="next"` link. `items` is the
    /// field holding the array (`None`: the body is the array). Returns how
    /// many distinct items (by `id`) the listing holds. A listing paged by
    /// number is read again, whole, until two passes agree
    /// ([`crate::route::complete`]): one whose passes never agree, or whose
    /// every pass counted (`total_count`) more than it handed over, is an
    /// error: an item may have been skipped.
    pub fn list(
        &self,
        path: &str,
        items: Option<&str>,
        what: &str,
        each: &mut dyn FnMut(&Value),
    ) -> Result<usize, ApiError> {
        let done =
            crate::route::read_whole(|_, item| self.list_pass(path, items, what, item), each)?;
        done.map_err(|d| ApiError::Failed(d.why(&format!("{what} at {}", self.host()))))
    }

    /// One whole pass of a listing: every item with its identity (its
    /// `id`, else the item itself), and how it paged.
    fn list_pass(
        &self,
        path: &str,
        items: Option<&str>,
        what: &str,
        each: &mut dyn FnMut(&str, &Value),
    ) -> Result<crate::route::Ended, ApiError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = self.url(&format!("{path}{sep}per_page={PER_PAGE}"))?;
        let origin = crate::http::origin(self.base);
        let mut seen = HashSet::new();
        let mut counted: Option<u64> = None;
        let mut paging: Option<crate::route::Paging> = None;
        loop {
            // Bounded, not capped: a listing that never ends is an error,
            // never a look that found nothing (a million pages is far past
            // any repository's labels, comments or artifacts).
            if seen.len() >= MAX_PAGES {
                return Err(ApiError::Failed(format!(
                    "{what} at {}: the listing did not end after {MAX_PAGES} pages",
                    self.host()
                )));
            }
            if !seen.insert(url.clone()) {
                return Err(ApiError::Failed(format!(
                    "{what} at {}: the listing links back to a page it already gave",
                    self.host()
                )));
            }
            let a = self.call_url(Method::GET, &url, None, what)?;
            let list = match items {
                Some(k) => a.json[k].as_array(),
                None => a.json.as_array(),
            };
            let Some(list) = list else {
                return Err(ApiError::Failed(format!(
                    "{what} at {}: the answer (HTTP {}) holds no list{}",
                    self.host(),
                    a.status,
                    items.map(|k| format!(" `{k}`")).unwrap_or_default()
                )));
            };
            if counted.is_none() {
                counted = a.json["total_count"].as_u64();
            }
            for item in list {
                // An item pushed a page down by a newer one comes twice:
                // handed over once, counted once, so a count reached with
                // repeats cannot hide one that was skipped.
                let identity = match &item["id"] {
                    Value::Null => item.to_string(),
                    id => id.to_string(),
                };
                each(&identity, item);
            }
            match next_link(&a.headers) {
                None => break,
                Some(next) => {
                    // The token goes only to the configured API.
                    if crate::http::origin(&next) != origin {
                        return Err(ApiError::Failed(format!(
                            "{what} at {}: the next page is on another host",
                            self.host()
                        )));
                    }
                    // The weaker kind wins: one page by number makes the
                    // pass one paged by number.
                    let kind = crate::route::Paging::of_next(&next);
                    if paging != Some(crate::route::Paging::Numbered) {
                        paging = Some(kind);
                    }
                    url = next;
                }
            }
        }
        Ok(crate::route::Ended {
            paging: paging.unwrap_or(crate::route::Paging::Whole),
            counted,
        })
    }
}

enum Judged {
    Wait(Duration),
    Error(ApiError),
}

/// The `rel="next"` URL of a `Link` header.
pub fn next_link(headers: &::http::HeaderMap) -> Option<String> {
    headers
        .get_all("link")
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(','))
        .find_map(|part| {
            let (url, params) = part.split_once(';')?;
            let rel_next = params
                .split(';')
                .any(|p| p.trim().replace(' ', "") == "rel=\"next\"");
            rel_next.then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
        })
}

/// A URL's origin, for people (escaped; never userinfo or a path, which
/// may hold a signature).
pub fn host_of(url: &str) -> String {
    escape::bytes(
        crate::http::origin(url)
            .unwrap_or_else(|| "?".into())
            .as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::join;

    #[test]
    fn a_path_never_leaves_the_api() {
        let base = "https://api.github.com";
        assert_eq!(
            join(base, "/repos/o/r/labels?per_page=100").unwrap(),
            "https://api.github.com/repos/o/r/labels?per_page=100"
        );
        for evil in [
            "@evil.example/x",
            "//evil.example/x",
            "evil",
            "/repos/o/r/labels/../../../x",
            "/repos/o/r/labels/%2e%2e/x",
            "/repos/o/r/labels/a%2Fb",
            "/repos/o/r/x\\y",
            "/repos/o/r/x#y",
            "/repos/o/r/a b",
            "/repos/o/r/%40evil",
        ] {
            assert!(join(base, evil).is_err(), "{evil}");
        }
    }
}
