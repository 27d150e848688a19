//! Cleanup: finding a probe's entries in the listing, and deleting each
//! by id after checking its key, version and scope.

use super::protocol::Lookup;
use super::{ActionsCache, Cache, Entry, ListError, fixed_version, planted_carrier, probe_prefix};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Class};
use crate::surface::carrier::CarrierSet;
use crate::surface::{CleanupOutcome, Job, JobScope, RecoverOutcome, RunCtx};
use ::http::Method;

impl ActionsCache {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Cache>],
    ) -> Result<Vec<Entry>, Fault> {
        self.rest()?;
        // By tag, not by derived nonce: the plants of an in-job probe had
        // random nonces, and their tags still verify.
        let mut found = vec![];
        // A plant inside a declared scope has the pattern around its key:
        // then every entry is listed, and each scope's pattern taken off.
        let scopes: Vec<&JobScope> = jobs
            .iter()
            .filter_map(|j| j.scope.as_ref().filter(|s| s.inside))
            .collect();
        let carriers: Vec<Cache> = jobs.iter().map(|j| j.carrier).collect();
        let prefix = probe_prefix(ctx.probe_id);
        let filter = scopes.is_empty().then_some(prefix.as_str());
        self.list(filter, &mut |e| {
            let carrier = std::iter::once(e.key.as_str())
                .chain(scopes.iter().filter_map(|s| s.unplace(&e.key)))
                .find_map(|k| planted_carrier(ctx, k, &e.version));
            if carrier.is_some_and(|c| carriers.contains(&c)) {
                found.push(Entry {
                    key: e.key.clone(),
                    version: e.version.clone(),
                    scope: Some(e.scope.clone()),
                });
            }
        })
        .map_err(|e| match e {
            // The service's access control: no look can be had here.
            ListError::Denied(m) => Fault::Unsupported(m),
            ListError::Failed(m) => Fault::Broken(m),
        })?;
        Ok(found)
    }
}

impl ActionsCache {
    pub(super) fn clean_entry(&self, entry: &Entry) -> CleanupOutcome {
        let (key, version) = (entry.key.as_str(), entry.version.as_str());
        let scope = entry.scope.as_deref();
        let evicted = "it is evicted after 7 days unused";
        // (Inside a declared scope the key has the pattern around it.)
        if !key.contains("runwarden-") {
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
            // Not listed: gone, or not listed yet (a listing lags). Only
            // the service's own lookup of exactly this key and version
            // tells them apart.
            return self.clean_unlisted(key, version, scope, token, repo);
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(m) => return CleanupOutcome::Left { reason: m.into() },
        };
        for id in ids {
            let url = format!("{}/repos/{repo}/actions/caches/{id}", self.settings.api_url);
            match client.send(&self.rest_request(Method::DELETE, &url, token)) {
                Ok(r) if r.status == 204 || r.status == 200 || r.status == 404 => {}
                Ok(r) if answer::classify(&(&r).into(), &crate::github::REST) == Class::Refused => {
                    return CleanupOutcome::Left {
                        reason: format!(
                            "the API token ({}) may not delete caches (needs actions: write); {evicted}",
                            self.settings.api_token_source.as_deref().unwrap_or("?")
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
}

impl ActionsCache {
    /// An entry the listing does not show: gone when the exact lookup
    /// restores nothing; when it still restores it (the listing lags), a
    /// key that carries the nonce is deleted by key in its ref and looked
    /// up again; anything else is left, and said.
    fn clean_unlisted(
        &self,
        key: &str,
        version: &str,
        scope: Option<&str>,
        token: &str,
        repo: &str,
    ) -> CleanupOutcome {
        let evicted = "it is evicted after 7 days unused";
        let lookup = || {
            let body = Lookup {
                key,
                restore_keys: &[],
                version,
            };
            match self.lookup(&body, String::new()) {
                Ok((matched, _)) => Ok(matched == key),
                Err(RecoverOutcome::NotFound { .. }) => Ok(false),
                Err(RecoverOutcome::Denied { reason } | RecoverOutcome::Error { reason }) => {
                    Err(reason)
                }
                Err(RecoverOutcome::Found { detail }) => Err(detail),
            }
        };
        let shown = escape::bytes(key.as_bytes());
        // The runtime token restores only from the scopes it reads: a miss
        // says "gone" only for an entry in one of them.
        let reads_scope = scope.is_some_and(|sc| {
            self.token_scopes()
                .iter()
                .any(|(s, p)| s == sc && p & 1 != 0)
        });
        match lookup() {
            Ok(false) if !reads_scope => {
                return CleanupOutcome::Left {
                    reason: format!(
                        "the listing does not show {shown}, and this job's runtime token does not read its scope ({}), so nothing tells it is gone; {evicted}",
                        self.readable()
                    ),
                };
            }
            Ok(false) => return CleanupOutcome::Gone,
            Err(why) => {
                return CleanupOutcome::Left {
                    reason: format!(
                        "the listing does not show {shown}, and looking it up failed ({why}): it may not be listed yet; {evicted}"
                    ),
                };
            }
            Ok(true) => {}
        }
        // cache-key's and restore-prefix's names hold `-<carrier>-<nonce>-`
        // (the engine checked the key is a tagged name of this probe).
        let carries_nonce = ["-cache-key-", "-restore-prefix-"].iter().any(|c| {
            key.match_indices(c).any(|(i, _)| {
                key.get(i + c.len()..i + c.len() + 32)
                    .is_some_and(|h| crate::surface::lower_hex(h, 32))
            })
        });
        let Some(r) = scope.filter(|_| carries_nonce) else {
            return CleanupOutcome::Left {
                reason: format!(
                    "the listing does not show {shown} yet, but the service still restores it (the listing lags): not deleted by key, which would take every version under it; {evicted}"
                ),
            };
        };
        let client = match self.client() {
            Ok(c) => c,
            Err(m) => return CleanupOutcome::Left { reason: m.into() },
        };
        // Every entry under this key in this ref: the key carries this
        // plant's nonce and tag, so all of them are the plant.
        let url = format!(
            "{}/repos/{repo}/actions/caches?key={}&ref={}",
            self.settings.api_url,
            crate::wire::percent_encode(key),
            crate::wire::percent_encode(r)
        );
        match client.send(&self.rest_request(Method::DELETE, &url, token)) {
            Ok(resp) if matches!(resp.status, 200 | 204 | 404) => {}
            Ok(resp) => {
                return CleanupOutcome::Left {
                    reason: format!("deleting it by key: HTTP {}; {evicted}", resp.status),
                };
            }
            Err(f) => {
                return CleanupOutcome::Left {
                    reason: format!("deleting it by key: {f}; {evicted}"),
                };
            }
        }
        match lookup() {
            Ok(false) => CleanupOutcome::Removed,
            Ok(true) => CleanupOutcome::Left {
                reason: format!(
                    "deleted by key, but the service still restores {shown}; {evicted}"
                ),
            },
            Err(why) => CleanupOutcome::Left {
                reason: format!("deleted by key, then looking it up failed ({why}); {evicted}"),
            },
        }
    }
}

/// Whether a journal entry is this probe's plant: its key holds a
/// [`super::tagged_name`] of this probe bound to its version (inside a
/// declared `keys:` pattern, the pattern's text around it), and the version
/// is the one that carrier's plant writes. `Invalid` for anything else.
pub(super) fn owned_entry(ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
    let (key, version) = (entry.key.as_str(), entry.version.as_str());
    if !entry.scope.as_deref().is_none_or(crate::surface::plain_ref) {
        return Err(Fault::invalid("its scope is not a ref"));
    }
    let fixed = fixed_version();
    let prefix = probe_prefix(ctx.probe_id);
    // The tagged name's length is fixed by its carrier: at most two
    // candidates per carrier at each place the probe's prefix occurs.
    for (start, _) in key.match_indices(&prefix) {
        for c in Cache::ALL {
            let len = prefix.len() + c.name().len() + if c.in_key() { 1 + 32 } else { 0 } + 1 + 16;
            let Some(name) = key.get(start..start + len) else {
                continue;
            };
            let Ok(carrier) = Cache::owned(ctx, name, version, &Cache::in_key) else {
                continue;
            };
            let version_ok = match carrier {
                Cache::Version => {
                    version
                        .get(..32)
                        .is_some_and(|h| crate::surface::lower_hex(h, 32))
                        && version.get(32..) == fixed.get(32..)
                }
                _ => version == fixed,
            };
            if version_ok {
                return Ok(());
            }
        }
    }
    Err(Fault::invalid(format!(
        "the key {} holds no name a plant of probe {} makes for its version",
        escape::bytes(key.as_bytes()),
        ctx.probe_id
    )))
}
