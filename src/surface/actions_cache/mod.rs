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
mod surface;

use crate::github::host_of;

use super::carrier::{CarrierSet, carriers};
use super::{About, JobScope, RunCtx};
use crate::escape;
use crate::fault::Fault;
use crate::http::LazyClient;
use crate::nonce::Nonce;
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
