//! GitHub's REST API as the surfaces that write and read GitHub's own
//! objects reach it (`actions-artifacts`, `github-api`): one authenticated
//! call, a listing read to its end, and the one rule that tells GitHub's
//! access control from everything else.
//!
//! A refusal is GitHub's own only when it is HTTP 403 with GitHub's JSON
//! error body (a `message`) and no sign of a rate limit: then the
//! permission GitHub says it wanted (`X-Accepted-GitHub-Permissions`) is
//! kept for the detail. A rate limit is waited out when GitHub says how
//! long (`retry-after`, at most [`MAX_WAIT`]) and is otherwise an error;
//! 401, 404 on a write, 422, 5xx and anything without GitHub's body are
//! errors. Listings follow GitHub's `Link: <…>; rel="next"` to the end,
//! never to another host (the token goes only to the configured API), and
//! a listing that says `total_count` must hand over that many.

use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{Client, Failure, Request, Response, check_url};
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
    /// GitHub's access control: its 403 with its error body. `wanted` is
    /// `X-Accepted-GitHub-Permissions`, when it said.
    Denied {
        message: String,
        wanted: Option<String>,
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
        matches!(self, ApiError::Denied { message, .. } if message.contains("Resource not accessible by"))
    }

    /// For a detail: "HTTP 403 Resource not accessible by integration
    /// (GitHub wants issues=write; pull_requests=write)".
    pub fn text(&self) -> String {
        match self {
            ApiError::Denied { message, wanted } => match wanted {
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
        Request::new(method, url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .secret_header("authorization", format!("Bearer {}", self.token))
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
        let githubs = from_github(&resp.headers, v.as_ref());
        Err(Judged::Error(match (resp.status, message) {
            (403, Some(_)) if githubs => ApiError::Denied {
                message: shown,
                wanted: header("x-accepted-github-permissions").map(str::to_string),
            },
            (403, _) => ApiError::Failed(format!(
                "{what} at {host}: HTTP 403 without GitHub's error body (a proxy or a firewall?) {shown}"
            )),
            (401, _) => ApiError::Failed(format!(
                "{what}: {host} did not accept the token ({}): HTTP 401 {shown}",
                escape::bytes(self.source.as_bytes())
            )),
            (404, Some(_)) => ApiError::NotFound(format!("{what} at {host}: HTTP 404 {shown}")),
            (s, _) => ApiError::Failed(format!("{what} at {host}: HTTP {s} {shown}")),
        }))
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

    /// Reads a listing to its end, handing every item to `each`: `path`
    /// with `per_page`, then every `rel="next"` link. `items` is the field
    /// holding the array (`None`: the body is the array). Returns how many
    /// distinct items there were (by `id`). When the first page says
    /// `total_count`, fewer distinct items than it counted is an error: one
    /// may have been skipped.
    pub fn list(
        &self,
        path: &str,
        items: Option<&str>,
        what: &str,
        each: &mut dyn FnMut(&Value),
    ) -> Result<usize, ApiError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = self.url(&format!("{path}{sep}per_page={PER_PAGE}"))?;
        let origin = crate::http::origin(self.base);
        let mut seen = HashSet::new();
        let mut counted: Option<u64> = None;
        let mut distinct = HashSet::new();
        let mut n = 0usize;
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
                if distinct.insert(identity) {
                    each(item);
                    n += 1;
                }
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
                    url = next;
                }
            }
        }
        if let Some(c) = counted
            && (n as u64) < c
        {
            return Err(ApiError::Failed(format!(
                "{what} at {}: it counted {c} but handed over {n}: items went while it was \
                 read, so one may have been skipped",
                self.host()
            )));
        }
        Ok(n)
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

/// `owner/name`, each part non-empty and URL-safe (else `Invalid`).
pub fn check_repository(r: &str) -> Result<(), Fault> {
    let ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    match r.split_once('/') {
        Some((o, n)) if ok(o) && ok(n) => Ok(()),
        _ => Err(Fault::invalid("must be `owner/name`")),
    }
}

/// The `api-url` key: the REST API base URL, else `GITHUB_API_URL`, else
/// github.com's; without a trailing `/`.
pub fn api_url_option(opts: &mut Options<'_>) -> Result<String, ConfigError> {
    let url = match opts.string("api-url")? {
        Some((u, pos)) => {
            check_url(&u).map_err(|m| opts.error(pos, format!("`api-url`: {m}")))?;
            u
        }
        None => opts
            .env("GITHUB_API_URL")
            .unwrap_or_else(|| "https://api.github.com".into()),
    };
    Ok(url.trim_end_matches('/').to_string())
}

/// The `repository` key (`owner/name`), else `GITHUB_REPOSITORY`.
pub fn repository_option(opts: &mut Options<'_>) -> Result<Option<String>, ConfigError> {
    Ok(match opts.string("repository")? {
        Some((r, pos)) => {
            check_repository(&r).map_err(|m| opts.error(pos, format!("`repository`: {m}")))?;
            Some(r)
        }
        None => opts
            .env("GITHUB_REPOSITORY")
            .filter(|r| check_repository(r).is_ok()),
    })
}

/// The REST token: from the variable `named` (an `api-token-env` key),
/// else `GITHUB_TOKEN`, else `GH_TOKEN`. `Ok((found, looked_in))`, where
/// `found` is (variable, value) and `looked_in` names every variable
/// tried, for the reason when none is set.
pub fn api_token(opts: &Options<'_>, named: Option<String>) -> (Option<(String, String)>, String) {
    let sources: Vec<String> = match named {
        Some(n) => vec![n],
        None => vec!["GITHUB_TOKEN".into(), "GH_TOKEN".into()],
    };
    let found = sources
        .iter()
        .find_map(|n| opts.env(n).map(|v| (n.clone(), v)));
    (found, sources.join(" / "))
}

/// The results service of github.com (the cache and artifact services),
/// which a `run:` step holding only the id-token request token can still
/// reach: the URL is public.
pub const GITHUB_COM_RESULTS: &str = "https://results-receiver.actions.githubusercontent.com/";

/// The URL of one Twirp method of the results service, as the toolkit's
/// clients (`@actions/cache`, `@actions/artifact`) build it: the path
/// `/twirp/<service>/<method>` on the results URL's origin, whatever path
/// that URL has (it was checked when the config was read).
pub fn twirp_url(results_url: &str, service: &str, method: &str) -> String {
    let origin = crate::http::origin(results_url).unwrap_or_default();
    format!("{origin}/{}/{method}", service.trim_matches('/'))
}

/// The runtime token and the results service URL, as the surfaces that
/// write through the results service read them.
pub struct Runtime {
    /// (variable, value).
    pub token: Option<(String, String)>,
    /// The service's base URL, ending in `/`.
    pub results_url: Option<String>,
    /// Why there is no token or no URL: the surface's carriers are
    /// SKIPPED with it.
    pub missing: Option<String>,
}

/// The `token-env` and `results-url` keys: the configured variable, else
/// what node actions get (`ACTIONS_RUNTIME_TOKEN`), else what a `run:` step
/// gets with `id-token: write` (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`, the same
/// system token); the URL from the key, else `ACTIONS_RESULTS_URL`, else
/// github.com's public one when the token is there. `service` names the
/// service in the reason ("cache service").
pub fn runtime(
    opts: &mut Options<'_>,
    token_env: Option<String>,
    service: &str,
) -> Result<Runtime, ConfigError> {
    let sources: Vec<String> = match &token_env {
        Some(n) => vec![n.clone()],
        None => vec![
            "ACTIONS_RUNTIME_TOKEN".into(),
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN".into(),
        ],
    };
    let token = sources
        .iter()
        .find_map(|n| opts.env(n).map(|v| (n.clone(), v)));
    let results_url = match opts.string("results-url")? {
        Some((u, pos)) => {
            check_url(&u).map_err(|m| opts.error(pos, format!("`results-url`: {m}")))?;
            Some(u)
        }
        None => opts.env("ACTIONS_RESULTS_URL").or_else(|| {
            // A run step is not given the URL, but github.com's is
            // public: an agent holding the token can use it.
            let on_github_com = opts
                .env("GITHUB_SERVER_URL")
                .is_some_and(|s| s.trim_end_matches('/') == "https://github.com");
            (on_github_com && token.is_some()).then(|| GITHUB_COM_RESULTS.to_string())
        }),
    };
    let results_url = results_url.map(|u| if u.ends_with('/') { u } else { format!("{u}/") });
    let missing = match (&token, &results_url) {
        (None, _) if token_env.is_some() => Some(format!(
            "no runtime token: `token-env` names {}, which is unset or empty",
            sources[0]
        )),
        (None, _) => Some(
            "no runtime token: a composite action or `run:` step gets no ACTIONS_RUNTIME_TOKEN \
             (and ACTIONS_ID_TOKEN_REQUEST_TOKEN only with `id-token: write`); use the action, \
             or grant id-token: write"
                .into(),
        ),
        (Some(_), None) => Some(format!(
            "no {service} URL: ACTIONS_RESULTS_URL is unset; set `results-url`"
        )),
        _ => None,
    };
    Ok(Runtime {
        token,
        results_url,
        missing,
    })
}

/// Whether an error answer is GitHub's own: its JSON error body carries a
/// `message` and GitHub's `documentation_url`, or the response GitHub's
/// `x-github-request-id`. A gateway in front (an API Gateway's or a
/// CloudFront's `{"message":"Forbidden"}`) has neither, and its 403 says
/// nothing of what the token may do.
pub fn from_github(headers: &::http::HeaderMap, body: Option<&Value>) -> bool {
    let message = body.is_some_and(|v| v["message"].is_string());
    let documented = body.is_some_and(|v| v["documentation_url"].is_string());
    message && (documented || headers.contains_key("x-github-request-id"))
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
