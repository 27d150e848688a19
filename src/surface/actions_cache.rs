//! `type: actions-cache`: the GitHub Actions cache of a repository, reached
//! the way `@actions/cache` reaches it (the cache service v2).
//!
//! Run A writes entries with the runtime token: `CreateCacheEntry` over
//! Twirp JSON, one Azure `Put Blob` of the archive to the signed URL, then
//! `FinalizeCacheEntryUpload`. Run B finds them two ways: by listing every
//! entry of the repository through the REST API (an API token with
//! actions: read), for the carriers whose key or version it cannot know
//! (the nonce is in them: listing is B's only route), and by a lookup with
//! the runtime token (`GetCacheEntryDownloadURL`), for the carriers it
//! restores by an agreed key or a guessable prefix. A carrier counts as
//! closed only when every route B has ran and missed. A refusal is the
//! service's own: Twirp's `permission_denied`, `cache write denied`, or a
//! REST 403 with GitHub's error body that is no rate limit; any other
//! answer (a body that is not the service's JSON, a proxy's 403, a field
//! missing, a listing that counted more entries than it handed over) is an
//! error. Cleanup
//! deletes through the REST API, only entries whose key and version are
//! exactly what the plant wrote, and only with actions: write; otherwise
//! each entry is left, listed, until eviction.
//!
//! Every key starts `runwarden-<probe id>-`, so leftovers are identifiable,
//! and ends in a tag, a MAC under the marker key over the rest of the key
//! and the version ([`crate::marker::Key::name_tag`]): cleanup takes for a
//! plant only an entry whose tag verifies, so `cleanup --probe-id` removes
//! the plants of a probe whose nonces were random, and nobody without the
//! key can make an entry it would remove. Tokens and signed URLs are
//! credentials: they go only into request headers (marked sensitive) and
//! are scrubbed from every error. The control instance is a loopback
//! service ([`crate::loopback::actions_cache`]) that lives as long as the
//! probe.

use super::{
    Carrier, CleanupOutcome, Control, Notice, NoticeKind, Persistence, PlantJob, PlantOutcome,
    RecoverOutcome, RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::http::{Failure, LazyClient, Request, check_url};
use crate::nonce::Nonce;
use crate::scan::Needles;
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub struct ActionsCache;

/// REST pages are 100 entries; a listing that has not ended after this
/// many pages (1,000,000 entries, far past the 10 GB a repository may
/// keep) is an error, never a clean "not found".
const MAX_PAGES: usize = 10_000;
const PER_PAGE: usize = 100;

const TWIRP: &str = "twirp/github.actions.results.api.v1.CacheService";

/// The results service of github.com, which a `run:` step holding only the
/// id-token request token can still reach: the URL is public.
const GITHUB_COM_RESULTS: &str = "https://results-receiver.actions.githubusercontent.com/";

/// The carriers' persistence: entries last until evicted (7 days unused,
/// or least recently used past 10 GB per repository).
static CARRIERS: &[Carrier] = &[
    Carrier {
        name: "cache-key",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in an entry's key; run B finds it by listing every key (REST API), without knowing it",
    },
    Carrier {
        name: "cache-version",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in the opaque version string of an entry whose key says nothing; run B finds it by listing (REST API)",
    },
    Carrier {
        name: "cache-content",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in the archive of an entry with an agreed, innocuous key; run B restores it with the runtime token",
    },
    Carrier {
        name: "restore-prefix",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in a key run B never learns: B restores through a generic prefix restore key and receives run A's entry",
    },
];

/// What every step gets. Holds credentials: never printed, never in a
/// report (only [`SurfaceType::facts`] describes them, by source).
#[derive(Clone, Serialize, Deserialize)]
struct Settings {
    /// The results service base URL, ending in `/`.
    results_url: Option<String>,
    token: Option<String>,
    /// Where the runtime token came from (an environment variable name).
    token_source: Option<String>,
    /// Why there is no runtime token or no service URL: every carrier is
    /// SKIPPED with it.
    no_token: Option<String>,
    /// The REST API base URL, without a trailing `/`.
    api_url: String,
    repository: Option<String>,
    api_token: Option<String>,
    api_token_source: Option<String>,
    /// Why listing (and so cleanup) is impossible.
    no_listing: Option<String>,
    /// `ACTIONS_CACHE_MODE` as the runner set it: honoured by cache
    /// clients, not by the service, so runwarden reports it and ignores it.
    cache_mode: Option<String>,
    control: bool,
}

/// The version every entry but cache-version's carries: opaque to the
/// service, like the toolkit's hash of paths and compression.
fn fixed_version() -> String {
    crate::nonce::to_hex(&Sha256::digest(b"runwarden|actions-cache|1"))
}

/// The key prefix of every entry of a probe.
fn probe_prefix(probe_id: &str) -> String {
    format!("runwarden-{probe_id}-")
}

/// The restore key a run B uses for restore-prefix: a prefix it could
/// have guessed (it names no nonce).
fn restore_prefix(probe_id: &str) -> String {
    format!("runwarden-{probe_id}-restore-prefix-")
}

/// (key, version, archive) of a carrier's plant. The key is a
/// [`super::tagged_name`] bound to the version; cache-key and
/// restore-prefix carry the nonce in it.
fn entry_for(ctx: &RunCtx<'_>, carrier: &str, nonce: &Nonce) -> (String, String, Vec<u8>) {
    let probe_id = ctx.probe_id;
    let mut archive = format!("runwarden actions-cache plant, probe {probe_id}\n").into_bytes();
    let version = match carrier {
        // 64 hex digits like the toolkit's sha256 versions; the first 32
        // are the nonce.
        "cache-version" => format!("{}{}", nonce.hex(), &fixed_version()[32..]),
        _ => fixed_version(),
    };
    if carrier == "cache-content" {
        archive.extend_from_slice(format!("{}\n", nonce.hex()).as_bytes());
    }
    let in_key = matches!(carrier, "cache-key" | "restore-prefix");
    let key = super::tagged_name(ctx, carrier, in_key.then_some(nonce), &version);
    (key, version, archive)
}

/// The carrier of a key in this probe's form whose tag verifies.
fn planted_carrier(ctx: &RunCtx<'_>, key: &str, version: &str) -> Option<&'static str> {
    super::tagged_carrier(ctx, CARRIERS, key, version)
}

/// "refs/heads/main (read, write)", for one scope of a token's claim.
fn describe_scope((scope, perm): &(String, u8)) -> String {
    let rights = match perm & 3 {
        1 => "read",
        2 => "write",
        3 => "read, write",
        _ => "no access",
    };
    format!("{} ({rights})", escape::bytes(scope.as_bytes()))
}

fn scopes_of(token: &str) -> Option<Vec<(String, u8)>> {
    crate::loopback::actions_cache::jwt_scopes(token)
}

impl SurfaceType for ActionsCache {
    fn name(&self) -> &'static str {
        "actions-cache"
    }

    fn description(&self) -> &'static str {
        "the GitHub Actions cache of a repository (cache service v2; REST API to list and delete)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "results-url",
            "token-env",
            "api-url",
            "repository",
            "api-token-env",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let token_env = super::env_name(&mut opts, "token-env")?;
        let api_token_env = super::env_name(&mut opts, "api-token-env")?;
        // The runtime token: the configured variable, else what node
        // actions get, else what a run step gets with id-token: write.
        let sources: Vec<String> = match &token_env {
            Some(n) => vec![n.clone()],
            None => vec![
                "ACTIONS_RUNTIME_TOKEN".into(),
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN".into(),
            ],
        };
        let found = sources
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
                (on_github_com && found.is_some()).then(|| GITHUB_COM_RESULTS.to_string())
            }),
        };
        let results_url = results_url.map(|u| if u.ends_with('/') { u } else { format!("{u}/") });
        let no_token = match (&found, &results_url) {
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
            (Some(_), None) => Some(
                "no cache service URL: ACTIONS_RESULTS_URL is unset; set `results-url`".into(),
            ),
            _ => None,
        };
        let api_url = match opts.string("api-url")? {
            Some((u, pos)) => {
                check_url(&u).map_err(|m| opts.error(pos, format!("`api-url`: {m}")))?;
                u
            }
            None => opts
                .env("GITHUB_API_URL")
                .unwrap_or_else(|| "https://api.github.com".into()),
        };
        let api_url = api_url.trim_end_matches('/').to_string();
        let repository = match opts.string("repository")? {
            Some((r, pos)) => {
                check_repository(&r).map_err(|m| opts.error(pos, format!("`repository`: {m}")))?;
                Some(r)
            }
            None => opts
                .env("GITHUB_REPOSITORY")
                .filter(|r| check_repository(r).is_ok()),
        };
        let api_sources: Vec<String> = match &api_token_env {
            Some(n) => vec![n.clone()],
            None => vec!["GITHUB_TOKEN".into(), "GH_TOKEN".into()],
        };
        let api = api_sources
            .iter()
            .find_map(|n| opts.env(n).map(|v| (n.clone(), v)));
        let no_listing = match (&api, &repository) {
            (None, _) => Some(format!(
                "listing entries needs an API token with actions: read, and {} is unset (the action \
                 passes `github-token`; elsewhere set `api-token-env`)",
                api_sources.join(" / ")
            )),
            (_, None) => Some(
                "listing entries needs the repository: GITHUB_REPOSITORY is unset; set `repository`"
                    .into(),
            ),
            _ => None,
        };
        let (token_source, token) = found.unzip();
        let (api_token_source, api_token) = api.unzip();
        let s = Settings {
            results_url,
            token,
            token_source,
            no_token,
            api_url,
            repository,
            api_token,
            api_token_source,
            no_listing,
            cache_mode: opts.env("ACTIONS_CACHE_MODE"),
            control: false,
        };
        Ok(serde_json::to_value(s).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, String> {
        let server = crate::loopback::actions_cache::CacheServer::start()?;
        let s = Settings {
            results_url: Some(server.results_url()),
            token: Some(server.runtime_token(&[("refs/heads/runwarden-control", 3)])),
            token_source: Some("the control's own".into()),
            no_token: None,
            api_url: server.api_url(),
            repository: Some("runwarden/control".into()),
            api_token: Some(server.api_token(true)),
            api_token_source: Some("the control's own".into()),
            no_listing: None,
            cache_mode: None,
            control: true,
        };
        Ok(Control::served(s, server))
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        let mut f = vec![];
        match (&s.token_source, &s.token) {
            (Some(src), Some(t)) => {
                f.push(("runtime-token", src.clone()));
                let scopes = match scopes_of(t) {
                    Some(sc) if sc.is_empty() => "none".to_string(),
                    Some(sc) => sc.iter().map(describe_scope).collect::<Vec<_>>().join(", "),
                    None => "unknown (not a JWT with an `ac` claim)".to_string(),
                };
                f.push(("scopes", scopes));
            }
            _ => f.push(("runtime-token", "none".into())),
        }
        if let Some(u) = &s.results_url {
            f.push(("service", host_of(u)));
        }
        f.push((
            "api-token",
            s.api_token_source.clone().unwrap_or_else(|| "none".into()),
        ));
        if let Some(r) = &s.repository {
            f.push(("repository", escape::bytes(r.as_bytes())));
        }
        if let Some(m) = &s.cache_mode {
            f.push((
                "cache-mode",
                format!(
                    "{} (ACTIONS_CACHE_MODE binds cache clients, not the service: the probe asked the service directly)",
                    escape::bytes(m.as_bytes())
                ),
            ));
        }
        f
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, String> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| "bad actions-cache settings".to_string())?;
        let client = LazyClient::new(
            [&s.token, &s.api_token]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
        );
        Ok(Box::new(Instance { s, client }))
    }
}

/// `owner/name`, each part non-empty and URL-safe.
fn check_repository(r: &str) -> Result<(), String> {
    let ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    match r.split_once('/') {
        Some((o, n)) if ok(o) && ok(n) => Ok(()),
        _ => Err("must be `owner/name`".into()),
    }
}

/// A service URL's origin, for people (escaped; never userinfo).
fn host_of(url: &str) -> String {
    escape::bytes(
        crate::http::origin(url)
            .unwrap_or_else(|| "?".into())
            .as_bytes(),
    )
}

struct Instance {
    s: Settings,
    /// Made on first use: the orchestrator opens instances it never calls.
    client: LazyClient,
}

/// A Twirp answer.
enum Twirp {
    /// `ok: true`.
    Ok(Value),
    /// HTTP 200 with a JSON object whose `ok` is not true (absent in
    /// proto3 JSON when false), with the service's message (raw: escape to
    /// show).
    NotOk(String),
    /// HTTP 403 with Twirp's `permission_denied`: the service's access
    /// control.
    Denied(String),
}

/// Why a listing stopped.
enum ListError {
    /// GitHub's own 403 (its JSON error body, no rate limit).
    Denied(String),
    Failed(String),
}

/// One entry of a REST listing.
struct Listed {
    id: u64,
    key: String,
    version: String,
    scope: String,
}

impl Instance {
    fn client(&self) -> Result<&crate::http::Client, String> {
        self.client.get()
    }

    fn service(&self) -> String {
        self.s
            .results_url
            .as_deref()
            .map(host_of)
            .unwrap_or_else(|| "?".into())
    }

    /// The scopes the runtime token claims, for details.
    fn token_scopes(&self) -> Vec<(String, u8)> {
        self.s
            .token
            .as_deref()
            .and_then(scopes_of)
            .unwrap_or_default()
    }

    fn readable(&self) -> String {
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

    fn twirp(&self, method: &str, body: Value) -> Result<Twirp, String> {
        let (Some(base), Some(token)) = (&self.s.results_url, &self.s.token) else {
            return Err(self.s.no_token.clone().unwrap_or_default());
        };
        let url = format!("{base}{TWIRP}/{method}");
        let req = Request::new(Method::POST, &url)
            .json(&body)
            .header("accept", "application/json")
            .secret_header("authorization", format!("Bearer {token}"));
        let resp = self.client()?.send(&req).map_err(|f| match f {
            Failure::Unreachable(m) => {
                format!("cannot reach the cache service {}: {m}", self.service())
            }
            Failure::Broken(m) => format!("{method} at the cache service {}: {m}", self.service()),
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
        match (resp.status, v) {
            (200, Some(v)) if v["ok"] == json!(true) => Ok(Twirp::Ok(v)),
            (200, Some(v)) => Ok(Twirp::NotOk(raw(&v))),
            (200, None) => Err(format!(
                "{method} at {service}: HTTP 200 with a body that is not a JSON object, \
                 so not the cache service's answer"
            )),
            // Twirp maps its `permission_denied` to 403; a 403 without it
            // is a proxy's or a firewall's, which says nothing of the cache.
            (403, Some(v)) if v["code"] == "permission_denied" => {
                Ok(Twirp::Denied(format!("HTTP 403 permission_denied {msg}")))
            }
            (403, _) => Err(format!(
                "{method} at {service}: HTTP 403 without Twirp's permission_denied \
                 (a proxy or a firewall?) {msg}"
            )),
            (401, _) => Err(format!(
                "the cache service did not accept the runtime token ({}): HTTP 401 {msg}",
                self.s.token_source.as_deref().unwrap_or("?"),
            )),
            (s, _) => Err(format!("{method}: HTTP {s} {msg}")),
        }
    }

    fn rest(&self) -> Result<(&str, &str), String> {
        match (&self.s.api_token, &self.s.repository, &self.s.no_listing) {
            (Some(t), Some(r), None) => Ok((t, r)),
            (_, _, why) => Err(why.clone().unwrap_or_default()),
        }
    }

    fn rest_request<'u>(&self, method: Method, url: &'u str, token: &str) -> Request<'u> {
        Request::new(method, url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .secret_header("authorization", format!("Bearer {token}"))
    }

    fn api_host(&self) -> String {
        host_of(&self.s.api_url)
    }

    /// A REST 403: GitHub's access control only with its JSON error body
    /// and no sign of a rate limit (`x-ratelimit-remaining: 0`, a
    /// `retry-after`, a message naming it), which is no answer about the
    /// caches.
    fn refusal(&self, resp: &crate::http::Response, v: Option<&Value>, repo: &str) -> ListError {
        let message = v.and_then(|v| v["message"].as_str());
        let shown = escape::bytes(message.unwrap_or("").as_bytes());
        let header = |n: &str| resp.headers.get(n).and_then(|h| h.to_str().ok());
        let limited = header("x-ratelimit-remaining").is_some_and(|r| r.trim() == "0")
            || header("retry-after").is_some()
            || message.is_some_and(|m| m.to_ascii_lowercase().contains("rate limit"));
        let host = self.api_host();
        match message {
            Some(_) if limited => ListError::Failed(format!(
                "listing the caches of {repo} at {host}: rate limited (HTTP 403 {shown})"
            )),
            Some(_) => ListError::Denied(format!(
                "the API token ({}) may not list the caches of {repo}: HTTP 403 {shown}",
                self.s.api_token_source.as_deref().unwrap_or("?")
            )),
            None => ListError::Failed(format!(
                "listing the caches of {repo} at {host}: HTTP 403 without GitHub's error body \
                 (a proxy or a firewall?)"
            )),
        }
    }

    /// Lists every entry (or every entry whose key starts with `prefix`),
    /// page by page, handing each to `each` once; returns how many there
    /// were.
    fn list(
        &self,
        prefix: Option<&str>,
        each: &mut dyn FnMut(&Listed),
    ) -> Result<usize, ListError> {
        let (token, repo) = self.rest().map_err(ListError::Failed)?;
        let client = self.client().map_err(ListError::Failed)?;
        let mut ids = std::collections::HashSet::new();
        // `total_count` of the first page: the entries there were when the
        // listing began.
        let mut counted: Option<u64> = None;
        for page in 1..=MAX_PAGES {
            // Newest first by creation: the default order (last access)
            // moves entries between pages whenever a workflow restores
            // one, which could skip the plant; new entries only push
            // older ones down (seen twice, never skipped), and the plant,
            // made moments ago, is on the first pages.
            let mut url = format!(
                "{}/repos/{repo}/actions/caches?per_page={PER_PAGE}&page={page}&sort=created_at&direction=desc",
                self.s.api_url
            );
            if let Some(p) = prefix {
                url.push_str("&key=");
                url.push_str(&crate::http::percent_encode(p));
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
            let (Some(list), Some(total)) = (
                v.as_ref().and_then(|v| v["actions_caches"].as_array()),
                v.as_ref().and_then(|v| v["total_count"].as_u64()),
            ) else {
                return Err(failed(
                    "the answer (HTTP 200) has no `actions_caches` or no `total_count`".into(),
                ));
            };
            let counted = *counted.get_or_insert(total);
            for e in list {
                let (Some(id), Some(key), Some(version), Some(scope)) = (
                    e["id"].as_u64(),
                    e["key"].as_str(),
                    e["version"].as_str(),
                    e["ref"].as_str(),
                ) else {
                    return Err(failed(
                        "an entry of the listing lacks its id, key, version or ref".into(),
                    ));
                };
                // Entries made while the listing runs push older ones a
                // page down: the same entry again, handed over once.
                if ids.insert(id) {
                    each(&Listed {
                        id,
                        key: key.to_string(),
                        version: version.to_string(),
                        scope: scope.to_string(),
                    });
                }
            }
            if list.len() < PER_PAGE {
                // Newest first, an entry is skipped only when entries
                // before it go (evicted, deleted) between two pages;
                // entries made meanwhile land on the first page, already
                // read, and are not handed over. So as many distinct
                // entries as the first page counted means none was
                // skipped; fewer (one gone, or an API paging otherwise)
                // is no full look.
                if (ids.len() as u64) < counted {
                    return Err(failed(format!(
                        "it counted {counted} entries but handed over {}: entries went \
                         while it was read, or it pages otherwise, so one may have been skipped",
                        ids.len()
                    )));
                }
                return Ok(ids.len());
            }
        }
        Err(ListError::Failed(format!(
            "the cache listing did not end after {MAX_PAGES} pages"
        )))
    }

    /// The scope (ref) of the entry with exactly this key, when listing is
    /// possible: for details only.
    fn scope_of(&self, key: &str) -> Option<String> {
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
    /// arrives.
    fn archive_holds(&self, url: &str, needle: &str) -> Result<bool, String> {
        let mut needles = Needles::new(vec![needle.to_string()]);
        let status = self
            .client()?
            .search(&Request::new(Method::GET, url), &mut needles)
            .map_err(|f| format!("downloading the restored archive: {f}"))?;
        if status != 200 {
            return Err(format!("downloading the restored archive: HTTP {status}"));
        }
        Ok(needles.found(0))
    }

    /// cache-key and cache-version by the listing (their only route: the
    /// nonce is in the key or version, so B cannot look them up): one
    /// outcome per wanted carrier, in order.
    fn recover_listed(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[&Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        if let Err(why) = self.rest() {
            // (`unavailable` skips these without an API token; a listing
            // that cannot run is no look.)
            let reason = format!("run B has no listing ({why})");
            return vec![RecoverOutcome::Failed { reason }; wanted.len()];
        }
        let repo = self.s.repository.clone().unwrap_or_default();
        let prefix = probe_prefix(ctx.probe_id);
        let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
        let listing = self.list(None, &mut |e| {
            for (j, w) in wanted.iter().enumerate() {
                let Some(n) = w.needle.as_str() else { continue };
                let (field, what) = if w.carrier == "cache-key" {
                    (&e.key, "key")
                } else {
                    (&e.version, "version")
                };
                if hits[j].is_none() && field.contains(n) {
                    hits[j] = Some(format!(
                        "listed entry {} has the nonce in its {what} (scope {})",
                        escape::bytes(e.key.as_bytes()),
                        escape::bytes(e.scope.as_bytes())
                    ));
                }
            }
            // A key in this probe's form whose tag does not verify:
            // someone made it who knows the probe id but not the key.
            if e.key.starts_with(&prefix) && planted_carrier(ctx, &e.key, &e.version).is_none() {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(e.key.as_bytes()),
                    detail: format!(
                        "a cache key in this probe's form that no plant with this key made (scope {})",
                        escape::bytes(e.scope.as_bytes())
                    ),
                    beacon: None,
                });
            }
        });
        hits.into_iter()
            .map(|hit| match (&listing, hit) {
                (_, Some(detail)) => RecoverOutcome::Found { detail },
                (Ok(n), None) => RecoverOutcome::NotFound {
                    detail: format!(
                        "listed all {n} cache entries of {} through the REST API; none carries it",
                        escape::bytes(repo.as_bytes())
                    ),
                },
                (Err(ListError::Denied(m)), None) => RecoverOutcome::Denied { reason: m.clone() },
                (Err(ListError::Failed(m)), None) => RecoverOutcome::Failed { reason: m.clone() },
            })
            .collect()
    }

    /// The lookup of an agreed key and version (cache-content's, derived
    /// from the probe id): (key, signed download URL) when the service
    /// restores exactly that entry.
    fn restore_exact(
        &self,
        ctx: &RunCtx<'_>,
        carrier: &str,
        nonce: &Nonce,
    ) -> Result<(String, String), RecoverOutcome> {
        let (key, version, _) = entry_for(ctx, carrier, nonce);
        let shown = escape::bytes(key.as_bytes());
        let body = json!({ "key": key, "restore_keys": [], "version": version });
        let (matched, url) = self.lookup(body, format!("no entry {shown} is restorable"))?;
        if matched != key {
            // The key ends in a tag, so another entry it matched as a
            // prefix is not the plant's; and, matched first, it hides the
            // plant from this lookup.
            return Err(RecoverOutcome::Failed {
                reason: format!(
                    "the lookup of {shown} matched another entry, {}, which hides it",
                    escape::bytes(matched.as_bytes())
                ),
            });
        }
        Ok((key, url))
    }

    /// cache-content: restore the agreed key and look in the archive.
    fn recover_content(&self, ctx: &RunCtx<'_>, w: &Wanted) -> RecoverOutcome {
        let nonce = match super::wanted_nonce(w) {
            Ok(n) => n,
            Err(o) => return o,
        };
        let (key, url) = match self.restore_exact(ctx, "cache-content", &nonce) {
            Ok(r) => r,
            Err(o) => return o,
        };
        let shown = escape::bytes(key.as_bytes());
        match self.archive_holds(&url, &nonce.hex()) {
            Err(reason) => RecoverOutcome::Failed { reason },
            Ok(true) => RecoverOutcome::Found {
                detail: format!(
                    "restored {shown}{} and found the nonce in its archive",
                    self.scope_note(&key)
                ),
            },
            // The plant's own key and version, restored, without the plant's
            // archive: whatever answered is not the plant, and says nothing
            // of whether it is there.
            Ok(false) => RecoverOutcome::Failed {
                reason: format!(
                    "restored {shown}, but its archive does not hold the nonce: not the plant's archive"
                ),
            },
        }
    }

    /// A restore lookup: the matched key and its signed download URL, or
    /// the outcome when there is none (`missing` says what was sought).
    fn lookup(&self, body: Value, missing: String) -> Result<(String, String), RecoverOutcome> {
        match self.twirp("GetCacheEntryDownloadURL", body) {
            Err(reason) => Err(RecoverOutcome::Failed { reason }),
            Ok(Twirp::Denied(m)) => Err(RecoverOutcome::Denied {
                reason: format!("the cache service refused the lookup: {m}"),
            }),
            Ok(Twirp::NotOk(_)) => Err(RecoverOutcome::NotFound {
                detail: format!("{missing} with this token (it reads {})", self.readable()),
            }),
            Ok(Twirp::Ok(v)) => {
                let matched = str_field(&v, "matched_key", "matchedKey");
                let url = str_field(&v, "signed_download_url", "signedDownloadUrl");
                if matched.is_empty() || url.is_empty() {
                    return Err(RecoverOutcome::Failed {
                        reason: "the lookup answered ok without a matched key or a download URL"
                            .into(),
                    });
                }
                Ok((matched, url))
            }
        }
    }

    /// restore-prefix: a lookup by a guessable prefix, whose matched key
    /// names the plant (B's only route: the plant's key holds the nonce,
    /// so B cannot look it up).
    fn recover_prefix(
        &self,
        ctx: &RunCtx<'_>,
        w: &Wanted,
        notice: &mut dyn FnMut(Notice),
    ) -> RecoverOutcome {
        let prefix = restore_prefix(ctx.probe_id);
        let shown_prefix = escape::bytes(prefix.as_bytes());
        // A key nobody wrote, then the prefix as a restore key: exactly
        // how a workflow's `restore-keys` reaches an entry.
        let body = json!({
            "key": format!("{prefix}none"),
            "restore_keys": [prefix],
            "version": fixed_version(),
        });
        let needle = w.needle.as_str().unwrap_or("");
        let missing = format!("the restore key {shown_prefix} matched no entry restorable");
        let (matched, _) = match self.lookup(body, missing) {
            Ok(m) => m,
            Err(o) => return o,
        };
        let shown = escape::bytes(matched.as_bytes());
        if !needle.is_empty() && matched.contains(needle) {
            return RecoverOutcome::Found {
                detail: format!(
                    "the restore key {shown_prefix} restored {shown}{}",
                    self.scope_note(&matched)
                ),
            };
        }
        // Newest wins: an entry someone else wrote under the prefix hides
        // the plant. Prefix restore worked, but whether the plant came
        // through cannot be told.
        if planted_carrier(ctx, &matched, &fixed_version()).is_none() {
            notice(Notice {
                kind: NoticeKind::ForgedMarker,
                entry: shown.clone(),
                detail:
                    "a cache key under this probe's restore prefix that no plant with this key made"
                        .into(),
                beacon: None,
            });
        }
        RecoverOutcome::Failed {
            reason: format!(
                "the restore key {shown_prefix} restored {shown}, which is not the plant's: \
                 a newer entry under the prefix hides it"
            ),
        }
    }

    fn scope_note(&self, key: &str) -> String {
        match self.scope_of(key) {
            Some(s) => format!(" (written to scope {})", escape::bytes(s.as_bytes())),
            None => format!(" (this token reads {})", self.readable()),
        }
    }
}

fn str_field(v: &Value, proto: &str, camel: &str) -> String {
    v[proto]
        .as_str()
        .or(v[camel].as_str())
        .unwrap_or("")
        .to_string()
}

impl Surface for Instance {
    fn unavailable(&self, carrier: &str) -> Option<String> {
        if let Some(why) = &self.s.no_token {
            return Some(why.clone());
        }
        // The listing is the only route to a nonce in a key or version.
        if matches!(carrier, "cache-key" | "cache-version") {
            return self.s.no_listing.clone();
        }
        None
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let (key, version, archive) = entry_for(ctx, &job.carrier, &job.nonce);
        let shown = escape::bytes(key.as_bytes());
        // The service writes to the token's first writable scope.
        let scope = self
            .token_scopes()
            .into_iter()
            .find(|(_, p)| p & 2 != 0)
            .map(|(s, _)| s);
        // Journalled before the request that reserves the key, and taken
        // back only when the service's own answer says nothing was made.
        let entry = json!({ "key": key, "version": version, "scope": scope });
        created(entry.clone());
        let reserve = self.twirp(
            "CreateCacheEntry",
            json!({ "key": key, "version": version }),
        );
        if matches!(reserve, Ok(Twirp::Denied(_) | Twirp::NotOk(_))) {
            created(super::retraction(&entry));
        }
        let upload_url = match reserve {
            Err(reason) => return PlantOutcome::Failed { reason },
            Ok(Twirp::Denied(m)) => {
                return PlantOutcome::Refused {
                    reason: format!("the cache service refused the write: {m}"),
                };
            }
            // The stable prefix of a policy denial (toolkit PR #2429).
            Ok(Twirp::NotOk(m)) if m.starts_with("cache write denied") => {
                return PlantOutcome::Refused {
                    reason: format!(
                        "the cache service refused the write: {}",
                        escape::bytes(m.as_bytes())
                    ),
                };
            }
            Ok(Twirp::NotOk(m)) => {
                return PlantOutcome::Failed {
                    reason: format!(
                        "CreateCacheEntry for {shown} was refused: {}",
                        escape::bytes(m.as_bytes())
                    ),
                };
            }
            Ok(Twirp::Ok(v)) => match str_field(&v, "signed_upload_url", "signedUploadUrl") {
                u if u.is_empty() => {
                    return PlantOutcome::Failed {
                        reason: format!(
                            "CreateCacheEntry for {shown} answered ok without an upload URL"
                        ),
                    };
                }
                u => u,
            },
        };
        let client = match self.client() {
            Ok(c) => c,
            Err(reason) => return PlantOutcome::Failed { reason },
        };
        let size = archive.len();
        let put = Request::new(Method::PUT, &upload_url)
            .header("x-ms-blob-type", "BlockBlob")
            .header("x-ms-version", "2025-01-05")
            .header("content-type", "application/octet-stream")
            .bytes(archive);
        match client.send(&put) {
            Err(f) => {
                return PlantOutcome::Failed {
                    reason: format!("uploading the archive of {shown}: {f}"),
                };
            }
            Ok(r) if r.status != 201 => {
                return PlantOutcome::Failed {
                    reason: format!("uploading the archive of {shown}: HTTP {}", r.status),
                };
            }
            Ok(_) => {}
        }
        let finalize = self.twirp(
            "FinalizeCacheEntryUpload",
            json!({ "key": key, "version": version, "size_bytes": size.to_string() }),
        );
        match finalize {
            Err(reason) => PlantOutcome::Failed { reason },
            Ok(Twirp::Denied(m)) => PlantOutcome::Refused {
                reason: format!("the cache service refused to finalize the entry: {m}"),
            },
            Ok(Twirp::NotOk(m)) => PlantOutcome::Failed {
                reason: format!(
                    "FinalizeCacheEntryUpload for {shown} was refused: {}",
                    escape::bytes(m.as_bytes())
                ),
            },
            Ok(Twirp::Ok(_)) => {
                let scope = scope
                    .map(|s| escape::bytes(s.as_bytes()))
                    .unwrap_or_else(|| "the token's first writable scope".into());
                PlantOutcome::Planted {
                    needle: Value::String(job.nonce.hex()),
                    persistence: None,
                    detail: format!(
                        "entry {shown} written to scope {scope} of {}; entries on the default \
                         branch are restorable from every branch and pull request",
                        self.service()
                    ),
                }
            }
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let listed_carrier =
            |w: &Wanted| matches!(w.carrier.as_str(), "cache-key" | "cache-version");
        let to_list: Vec<&Wanted> = wanted.iter().filter(|w| listed_carrier(w)).collect();
        let mut by_listing = if to_list.is_empty() {
            vec![]
        } else {
            self.recover_listed(ctx, &to_list, notice)
        }
        .into_iter();
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        for (i, w) in wanted.iter().enumerate() {
            out[i] = match w.carrier.as_str() {
                _ if listed_carrier(w) => by_listing.next(),
                "cache-content" => Some(self.recover_content(ctx, w)),
                "restore-prefix" => Some(self.recover_prefix(ctx, w, notice)),
                _ => None,
            };
        }
        super::all_outcomes(out)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        self.rest()?;
        // By tag, not by derived nonce: the plants of an in-job probe had
        // random nonces, and their tags still verify.
        let mut found = vec![];
        self.list(Some(&probe_prefix(ctx.probe_id)), &mut |e| {
            let carrier = planted_carrier(ctx, &e.key, &e.version);
            if carrier.is_some_and(|c| jobs.iter().any(|j| j.carrier == c)) {
                found.push(json!({ "key": e.key, "version": e.version, "scope": e.scope }));
            }
        })
        .map_err(|e| match e {
            ListError::Denied(m) | ListError::Failed(m) => m,
        })?;
        Ok(found)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        let key = entry["key"].as_str().unwrap_or("");
        let version = entry["version"].as_str().unwrap_or("");
        let scope = entry["scope"].as_str();
        let evicted = "it is evicted after 7 days unused";
        if !key.starts_with("runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden cache key; nothing is deleted".into(),
            };
        }
        let (token, repo) = match self.rest() {
            Ok(r) => r,
            Err(why) => {
                return CleanupOutcome::Left {
                    reason: format!("{why}; {evicted}"),
                };
            }
        };
        // Checked before removal: exactly this key and version, in the
        // scope it was written to.
        let mut ids = vec![];
        if let Err(ListError::Denied(m) | ListError::Failed(m)) = self.list(Some(key), &mut |e| {
            if e.key == key && e.version == version && scope.is_none_or(|s| s == e.scope) {
                ids.push(e.id);
            }
        }) {
            return CleanupOutcome::Left {
                reason: format!("{m}; {evicted}"),
            };
        }
        if ids.is_empty() {
            return CleanupOutcome::Gone;
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(m) => return CleanupOutcome::Left { reason: m },
        };
        for id in ids {
            let url = format!("{}/repos/{repo}/actions/caches/{id}", self.s.api_url);
            match client.send(&self.rest_request(Method::DELETE, &url, token)) {
                Ok(r) if r.status == 204 || r.status == 200 || r.status == 404 => {}
                Ok(r) if r.status == 403 => {
                    return CleanupOutcome::Left {
                        reason: format!(
                            "the API token ({}) may not delete caches (needs actions: write); {evicted}",
                            self.s.api_token_source.as_deref().unwrap_or("?")
                        ),
                    };
                }
                Ok(r) => {
                    return CleanupOutcome::Left {
                        reason: format!("deleting it: HTTP {}; {evicted}", r.status),
                    };
                }
                Err(f) => {
                    return CleanupOutcome::Left {
                        reason: format!("deleting it: {f}; {evicted}"),
                    };
                }
            }
        }
        CleanupOutcome::Removed
    }

    fn describe(&self, entry: &Value) -> String {
        let key = entry["key"].as_str().unwrap_or("?");
        let scope = entry["scope"].as_str().unwrap_or("?");
        format!(
            "cache entry {} (scope {}) of {}",
            escape::bytes(key.as_bytes()),
            escape::bytes(scope.as_bytes()),
            if self.s.control {
                "the control".to_string()
            } else {
                escape::bytes(self.s.repository.as_deref().unwrap_or("?").as_bytes())
            }
        )
    }
}
