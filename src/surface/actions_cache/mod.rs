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

mod cleanup;
mod plant;
mod protocol;
mod recover;
mod watch;

use crate::github::host_of;

use super::carrier::{CarrierSet, carriers};
use super::{
    About, CleanupOutcome, Control, Job, JobScope, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Scope, Want, Watch,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::LazyClient;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// REST pages are 100 entries; a listing that has not ended after this
/// many pages (1,000,000 entries, far past the 10 GB a repository may
/// keep) is an error, never a clean "not found".
const MAX_PAGES: usize = 10_000;

const PER_PAGE: usize = 100;

const TWIRP: &str = "twirp/github.actions.results.api.v1.CacheService";

carriers! {
    /// The actions cache's carriers. Entries last until evicted (7 days
    /// unused, or least recently used past 10 GB per repository).
    pub enum Cache {
        Key = "cache-key", UntilEvicted, "the nonce in an entry's key; run B finds it by listing every key (REST API), without knowing it";
        Version = "cache-version", UntilEvicted, "the nonce in the opaque version string of an entry whose key says nothing; run B finds it by listing (REST API)";
        Content = "cache-content", UntilEvicted, "the nonce in the archive of an entry with an agreed, innocuous key; run B restores it with the runtime token";
        RestorePrefix = "restore-prefix", UntilEvicted, "the nonce in a key run B never learns: B restores through a generic prefix restore key and receives run A's entry";
    }
}

/// What every step gets. Holds credentials: never printed, never in a
/// report (only the facts of [`ActionsCache`]'s `about` describe them, by
/// source).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
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
    /// How long a listing that does not show its witness is retried
    /// (`consistency-wait`).
    #[serde(default = "super::listing::default_wait_ms")]
    consistency_wait_ms: u64,
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
    format!("runwarden-{probe_id}-{}-", Cache::RestorePrefix)
}

/// (key, version, archive) of a carrier's plant. The key is a
/// [`super::tagged_name`] bound to the version; cache-key and
/// restore-prefix carry the nonce in it.
///
/// Inside a declared `keys:` scope the key is placed by the pattern (its
/// `*` takes runwarden's own key), so the plant stands where the declared
/// memory lives.
fn entry_for(
    ctx: &RunCtx<'_>,
    carrier: Cache,
    nonce: &Nonce,
    scope: Option<&JobScope>,
) -> (String, String, Vec<u8>) {
    let probe_id = ctx.probe_id;
    let mut archive = format!("runwarden actions-cache plant, probe {probe_id}\n").into_bytes();
    let version = match carrier {
        // 64 hex digits like the toolkit's sha256 versions; the first 32
        // are the nonce.
        Cache::Version => format!("{}{}", nonce.hex(), &fixed_version()[32..]),
        _ => fixed_version(),
    };
    if carrier == Cache::Content {
        archive.extend_from_slice(format!("{}\n", nonce.hex()).as_bytes());
    }
    let key = super::tagged_name(
        ctx,
        carrier.name(),
        carrier.in_key().then_some(nonce),
        &version,
    );
    let key = scope.map_or_else(|| key.clone(), |s| s.place(&key));
    (key, version, archive)
}

impl Cache {
    /// Whether the plant's key holds the nonce.
    fn in_key(self) -> bool {
        matches!(self, Cache::Key | Cache::RestorePrefix)
    }

    /// Whether run B finds it only by listing (the nonce is in the key or
    /// the version, so B cannot look it up).
    fn listed(self) -> bool {
        matches!(self, Cache::Key | Cache::Version)
    }
}

/// The carrier of a key in this probe's form whose tag verifies.
fn planted_carrier(ctx: &RunCtx<'_>, key: &str, version: &str) -> Option<Cache> {
    Cache::tagged(ctx, key, version)
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
    crate::wire::jwt_scopes(token)
}

/// A declared `keys:` scope: a key pattern with one `*` (like gh-aw's
/// `memory-*`). Every carrier has a key of its own to place inside it.
/// `Invalid` otherwise.
fn check_keys_scope(_carrier: Cache, pattern: &str) -> Result<(), Fault> {
    if pattern.matches('*').count() != 1 {
        return Err(Fault::invalid(format!(
            "`{pattern}` must hold exactly one `*` (like `memory-*`)"
        )));
    }
    // The cache service refuses keys with a comma and keys over 512
    // characters; runwarden's own key takes up to 150 of them.
    if pattern.contains(',') || pattern.chars().any(char::is_control) || pattern.len() > 300 {
        return Err(Fault::invalid(format!(
            "`{pattern}` is not a valid cache key pattern (no commas or control characters, at most 300 characters)"
        )));
    }
    // Outside the scope means runwarden's own key: the pattern must not
    // cover it.
    let outside = "runwarden-000000000000-cache-content-0000000000000000";
    if super::glob_match(pattern, outside) {
        return Err(Fault::invalid(format!(
            "`{pattern}` also covers runwarden's own keys (like {outside}): nothing would be planted outside it"
        )));
    }
    Ok(())
}

/// One journal line: the entry run A reserves (journalled before the
/// request), by key and version, in the scope (ref) the service writes
/// to: the runtime token's first writable scope, `null` when it claims
/// none. Cleanup deletes only an entry with exactly this key and version,
/// in that scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    key: String,
    version: String,
    scope: Option<String>,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cache entry {} (scope {})",
            escape::bytes(self.key.as_bytes()),
            escape::bytes(self.scope.as_deref().unwrap_or("?").as_bytes())
        )
    }
}

/// The facts the report shows: the runtime token by source and the scopes
/// it claims, the service, the API token by source, the repository, and
/// the cache mode the runner set.
fn facts(s: &Settings, mut about: About<Cache>) -> About<Cache> {
    match (&s.token_source, &s.token) {
        (Some(src), Some(t)) => {
            let scopes = match scopes_of(t) {
                Some(sc) if sc.is_empty() => "none".to_string(),
                Some(sc) => sc.iter().map(describe_scope).collect::<Vec<_>>().join(", "),
                None => "unknown (not a JWT with an `ac` claim)".to_string(),
            };
            about = about
                .fact("runtime-token", src.clone())
                .fact("scopes", scopes);
        }
        _ => about = about.fact("runtime-token", "none"),
    }
    if let Some(u) = &s.results_url {
        about = about.fact("service", host_of(u));
    }
    about = about.fact(
        "api-token",
        s.api_token_source.clone().unwrap_or_else(|| "none".into()),
    );
    if let Some(r) = &s.repository {
        about = about.fact("repository", escape::bytes(r.as_bytes()));
    }
    if let Some(m) = &s.cache_mode {
        about = about.fact(
            "cache-mode",
            format!(
                "{} (ACTIONS_CACHE_MODE binds cache clients, not the service: the probe asked the service directly)",
                escape::bytes(m.as_bytes())
            ),
        );
    }
    about
}

/// An open actions cache.
pub struct ActionsCache {
    settings: Settings,
    /// Made on first use: the orchestrator opens instances it never calls.
    client: LazyClient,
}

impl super::Surface for ActionsCache {
    const NAME: &'static str = "actions-cache";
    const DESCRIPTION: &'static str =
        "the GitHub Actions cache of a repository (cache service v2; REST API to list and delete)";
    const KEYS: &'static [&'static str] = &[
        "results-url",
        "token-env",
        "api-url",
        "repository",
        "api-token-env",
        "consistency-wait",
    ];
    const SCOPES: &'static [Scope<Cache>] = &[Scope {
        key: "keys",
        check: check_keys_scope,
    }];
    const WATCH: Watch<Cache> = Watch::Yes {
        unwatched: &[(
            Cache::RestorePrefix,
            "which entry a prefix restore returns is not in the listing; a new entry is reported under its key, version and content",
        )],
    };
    type Carrier = Cache;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let token_env = super::env_name(&mut opts, "token-env")?;
        let api_token_env = super::env_name(&mut opts, "api-token-env")?;
        let rt = crate::github::runtime(&mut opts, token_env, "cache service")?;
        let (found, results_url, no_token) = (rt.token, rt.results_url, rt.missing);
        let api_url = crate::github::api_url_option(&mut opts)?;
        let repository = crate::github::repository_option(&mut opts)?;
        let (api, api_sources) = crate::github::api_token(&opts, api_token_env);
        let no_listing = match (&api, &repository) {
            (None, _) => Some(format!(
                "listing entries needs an API token with actions: read, and {api_sources} is unset (the action \
                 passes `github-token`; elsewhere set `api-token-env`)"
            )),
            (_, None) => Some(
                "listing entries needs the repository: GITHUB_REPOSITORY is unset; set `repository`"
                    .into(),
            ),
            _ => None,
        };
        let (token_source, token) = found.unzip();
        let (api_token_source, api_token) = api.unzip();
        Ok(Settings {
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
            consistency_wait_ms: super::listing::wait_option(&mut opts)?.as_millis() as u64,
            control: false,
        })
    }

    fn about(s: &Settings) -> About<Cache> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.repository.as_deref().unwrap_or("?").as_bytes())
        };
        let mut about = facts(s, About::new(format!("of {place}"))).exposure("actions-cache");
        if let Some(why) = &s.no_token {
            about = about.unavailable(why.clone());
        }
        // The listing is the only route to a nonce in a key or version.
        if let Some(why) = &s.no_listing {
            for c in Cache::ALL.iter().filter(|c| c.listed()) {
                about = about.unavailable_of(*c, why.clone());
            }
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
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
            consistency_wait_ms: super::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_listing(s, server))
    }

    fn open(settings: Settings) -> Result<ActionsCache, Fault> {
        let client = LazyClient::new(
            [&settings.token, &settings.api_token]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
        );
        Ok(ActionsCache { settings, client })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Cache>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        super::each(jobs, |job| self.plant_one(ctx, job, journal))
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Cache, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        cleanup::owned_entry(ctx, entry)
    }

    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        entries.iter().map(|e| self.clean_entry(e)).collect()
    }

    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Cache>]) -> Result<Vec<Entry>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn snapshot(&self, ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        self.snapshot_listing(ctx, sink)
    }

    fn changes(change: &Change, before: &Before) -> Vec<Cache> {
        watch::carriers_of(change, before)
    }
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
#[derive(Deserialize)]
struct Listed {
    id: u64,
    key: String,
    version: String,
    /// The ref it was written from.
    #[serde(rename = "ref")]
    scope: String,
}
