//! Cleanup of an entry the listing does not show: the exact lookup, and
//! the delete by key in its ref when the listing lags.

use super::ActionsCache;
use super::protocol::Lookup;
use crate::escape;
use crate::surface::{CleanupOutcome, RecoverOutcome};
use ::http::Method;

impl ActionsCache {
    /// An entry the listing does not show: gone when the exact lookup
    /// restores nothing; when it still restores it (the listing lags), a
    /// key that carries the nonce is deleted by key in its ref and looked
    /// up again; anything else is left, and said.
    pub(super) fn clean_unlisted(
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
