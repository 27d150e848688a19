//! Cleanup: finding a probe's entries in the listing, and deleting each
//! by id after checking its key, version and scope.

use super::*;

impl Instance {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
    ) -> Result<Vec<Value>, String> {
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
        let prefix = probe_prefix(ctx.probe_id);
        let filter = scopes.is_empty().then_some(prefix.as_str());
        self.list(filter, &mut |e| {
            let carrier = std::iter::once(e.key.as_str())
                .chain(scopes.iter().filter_map(|s| s.unplace(&e.key)))
                .find_map(|k| planted_carrier(ctx, k, &e.version));
            if carrier.is_some_and(|c| jobs.iter().any(|j| j.carrier == c)) {
                found.push(json!({ "key": e.key, "version": e.version, "scope": e.scope }));
            }
        })
        .map_err(|e| match e {
            ListError::Denied(m) | ListError::Failed(m) => m,
        })?;
        Ok(found)
    }
}

impl Instance {
    pub(super) fn clean_entry(&self, entry: &Value) -> CleanupOutcome {
        let key = entry["key"].as_str().unwrap_or("");
        let version = entry["version"].as_str().unwrap_or("");
        let scope = entry["scope"].as_str();
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
}
