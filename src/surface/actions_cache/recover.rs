//! Run B's routes: the listing for the carriers whose nonce is in a key or
//! a version, the exact restore of the agreed key for `cache-content`, and
//! the restore by the generic prefix for `restore-prefix`.

use super::protocol::{Lookup, str_field};
use super::{
    ActionsCache, Cache, ListError, Twirp, entry_for, fixed_version, planted_carrier, probe_prefix,
    restore_prefix,
};
use crate::escape;
use crate::nonce::Nonce;
use crate::surface::witness::{self, Currency, Seen, Side};
use crate::surface::{JobScope, Notice, NoticeKind, RecoverOutcome, RunCtx, Want};

/// One carrier run B looks for, with the nonce its plant reported.
pub(super) type Wanted = Want<Cache, Nonce>;

impl ActionsCache {
    /// cache-key and cache-version by the listing (their only route: the
    /// nonce is in the key or version, so B cannot look them up): one
    /// outcome per wanted carrier, in order. The listing counts only when
    /// it shows `witnesses`, the keys of this plant B knows by name
    /// (cache-content's agreed key, restore-prefix's): until then it is
    /// taken again within the consistency wait ([`super::super::listing`]).
    pub(super) fn recover_listed(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[&Wanted],
        witnesses: &[String],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        if let Err(why) = self.rest() {
            // (`unavailable` skips these without an API token; a listing
            // that cannot run is no look.)
            let reason = format!("run B has no listing ({why})");
            return vec![RecoverOutcome::Error { reason }; wanted.len()];
        }
        let repo = self.settings.repository.clone().unwrap_or_default();
        let prefix = probe_prefix(ctx.probe_id);
        let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
        // One whole listing: what it found, the notices it had, and whether
        // it showed every witness.
        let once = || {
            let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
            let mut notices = Vec::new();
            let mut shown = vec![false; witnesses.len()];
            let n = self.list(None, &mut |e| {
                for (j, w) in wanted.iter().enumerate() {
                    let n = w.needle.hex();
                    let (field, what) = if w.carrier == Cache::Key {
                        (&e.key, "key")
                    } else {
                        (&e.version, "version")
                    };
                    if hits[j].is_none() && field.contains(&n) {
                        hits[j] = Some(format!(
                            "listed entry {} has the nonce in its {what} (scope {})",
                            escape::bytes(e.key.as_bytes()),
                            escape::bytes(e.scope.as_bytes())
                        ));
                    }
                }
                for (k, w) in witnesses.iter().enumerate() {
                    shown[k] |= e.key == *w;
                }
                // A key in this probe's form whose tag does not verify:
                // someone made it who knows the probe id but not the key.
                if e.key.starts_with(&prefix)
                    && planted_carrier(ctx, &e.key, &e.version).is_none()
                    && !witness::is_witness(ctx, super::plant::RESTORE, &e.key, &e.version)
                {
                    notices.push(Notice {
                        kind: NoticeKind::ForgedMarker,
                        entry: escape::bytes(e.key.as_bytes()),
                        detail: format!(
                            "a cache key in this probe's form that no plant with this key made (scope {})",
                            escape::bytes(e.scope.as_bytes())
                        ),
                        beacon: None,
                    });
                }
            })?;
            // Every nonce found is proof whatever the lag: no retry then.
            let all_found = hits.iter().all(Option::is_some);
            let current = all_found || (!shown.is_empty() && shown.iter().all(|s| *s));
            Ok(((n, hits, notices, shown), current))
        };
        let listing = crate::surface::listing::until_current(wait, once);
        let c = match listing {
            Ok(c) => c,
            Err(ListError::Denied(m)) => {
                return vec![RecoverOutcome::Denied { reason: m }; wanted.len()];
            }
            Err(ListError::Failed(m)) => {
                return vec![RecoverOutcome::Error { reason: m }; wanted.len()];
            }
        };
        let (n, hits, notices, shown) = &c.value;
        for x in notices {
            notice(x.clone());
        }
        // The restore route's witnesses lead the list: the later one
        // there without the earlier is an eviction, not a lag.
        let dropped = witness::Seen {
            before: shown.first() == Some(&true),
            after: shown.get(1) == Some(&true),
        };
        let missing: Vec<String> = witnesses
            .iter()
            .zip(shown)
            .filter(|(_, s)| !**s)
            .map(|(w, _)| escape::bytes(w.as_bytes()))
            .collect();
        hits.iter()
            .map(|hit| match hit {
                Some(detail) => RecoverOutcome::Found {
                    detail: detail.clone(),
                },
                None if !c.current && !dropped.before && dropped.after => RecoverOutcome::Error {
                    reason: witness::dropped("the listing"),
                },
                None if !c.current => crate::surface::listing::not_current(
                    &format!("the entry {}", missing.join(", ")),
                    &c,
                ),
                None => RecoverOutcome::NotFound {
                    detail: format!(
                        "listed all {n} cache entries of {} through the REST API, this plant's own among them; none carries it",
                        escape::bytes(repo.as_bytes())
                    ),
                },
            })
            .collect()
    }

    /// The lookup of an agreed key and version (cache-content's, derived
    /// from the probe id): (key, signed download URL) when the service
    /// restores exactly that entry.
    pub(super) fn restore_exact(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Cache,
        nonce: &Nonce,
        scope: Option<&JobScope>,
    ) -> Result<(String, String), RecoverOutcome> {
        let (key, version, _) = entry_for(ctx, carrier, nonce, scope);
        let shown = escape::bytes(key.as_bytes());
        let body = Lookup {
            key: &key,
            restore_keys: &[],
            version: &version,
        };
        let (matched, url) = self.lookup(&body, format!("no entry {shown} is restorable"))?;
        if matched != key {
            // The key ends in a tag, so another entry it matched as a
            // prefix is not the plant's; and, matched first, it hides the
            // plant from this lookup.
            return Err(RecoverOutcome::Error {
                reason: format!(
                    "the lookup of {shown} matched another entry, {}, which hides it",
                    escape::bytes(matched.as_bytes())
                ),
            });
        }
        Ok((key, url))
    }

    /// cache-content: restore the agreed key and look in the archive.
    pub(super) fn recover_content(&self, ctx: &RunCtx<'_>, w: &Wanted) -> RecoverOutcome {
        let nonce = w.needle;
        let (key, url) = match self.restore_exact(ctx, Cache::Content, &nonce, w.scope.as_ref()) {
            Ok(r) => r,
            Err(o) => return o,
        };
        let shown = escape::bytes(key.as_bytes());
        match self.archive_holds(&url, &nonce.hex()) {
            Err(f) => RecoverOutcome::Error { reason: f.into() },
            Ok(true) => RecoverOutcome::Found {
                detail: format!(
                    "restored {shown}{} and found the nonce in its archive",
                    self.scope_note(&key)
                ),
            },
            // The plant's own key and version, restored, without the plant's
            // archive: whatever answered is not the plant, and says nothing
            // of whether it is there.
            Ok(false) => RecoverOutcome::Error {
                reason: format!(
                    "restored {shown}, but its archive does not hold the nonce: not the plant's archive"
                ),
            },
        }
    }

    /// A restore lookup: the matched key and its signed download URL, or
    /// the outcome when there is none (`missing` says what was sought).
    pub(super) fn lookup(
        &self,
        body: &Lookup<'_>,
        missing: String,
    ) -> Result<(String, String), RecoverOutcome> {
        match self.twirp("GetCacheEntryDownloadURL", body) {
            Err(f) => Err(RecoverOutcome::Error { reason: f.into() }),
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
                    return Err(RecoverOutcome::Error {
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
    pub(super) fn recover_prefix(
        &self,
        ctx: &RunCtx<'_>,
        w: &Wanted,
        notice: &mut dyn FnMut(Notice),
    ) -> RecoverOutcome {
        let prefix = restore_prefix(ctx.probe_id);
        let prefix = w
            .scope
            .as_ref()
            .map_or(prefix.clone(), |s| s.place(&prefix));
        let shown_prefix = escape::bytes(prefix.as_bytes());
        // A key nobody wrote, then the prefix as a restore key: exactly
        // how a workflow's `restore-keys` reaches an entry.
        let (none, version) = (format!("{prefix}none"), fixed_version());
        let body = Lookup {
            key: &none,
            restore_keys: &[&prefix],
            version: &version,
        };
        let needle = w.needle.hex();
        let missing = format!("the restore key {shown_prefix} matched no entry restorable");
        let (matched, _) = match self.lookup(&body, missing) {
            Ok(m) => m,
            Err(o) => return o,
        };
        let shown = escape::bytes(matched.as_bytes());
        if matched.contains(&needle) {
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
        RecoverOutcome::Error {
            reason: format!(
                "the restore key {shown_prefix} restored {shown}, which is not the plant's: \
                 a newer entry under the prefix hides it"
            ),
        }
    }

    /// What the restore route's witnesses say of its misses: each looked
    /// up by its exact key; when the route shows neither, the
    /// repository-wide listing tells isolation (a scope this token does
    /// not read) from an eviction.
    pub(super) fn restore_currency(&self, ctx: &RunCtx<'_>) -> Currency {
        let mut seen = Seen::default();
        for side in Side::BOTH {
            let key = Self::witness_key(ctx, side);
            let body = Lookup {
                key: &key,
                restore_keys: &[],
                version: &fixed_version(),
            };
            match self.lookup(&body, String::new()) {
                Ok((matched, _)) if matched == key => seen.saw(side),
                // Another entry matched first: the witness is hidden, as
                // good as missing (never shown).
                Ok(_) | Err(RecoverOutcome::NotFound { .. }) => {}
                Err(
                    RecoverOutcome::Denied { reason }
                    | RecoverOutcome::Error { reason }
                    | RecoverOutcome::Found { detail: reason },
                ) => {
                    return Currency::NotCurrent(format!(
                        "the restore of the witness run A made {} the plant failed: {reason}",
                        side.name()
                    ));
                }
            }
        }
        witness::currency("the restore lookup", seen, || {
            self.rest().ok()?;
            let keys = Side::BOTH.map(|s| Self::witness_key(ctx, s));
            let prefix = format!("{}witness-", probe_prefix(ctx.probe_id));
            // Isolation is a scope this token does not read: a witness
            // listed in one it reads, which its restore missed, shows the
            // restore route broken or lagging, never isolated.
            let readable: Vec<String> = self
                .token_scopes()
                .into_iter()
                .filter(|(_, p)| p & 1 != 0)
                .map(|(s, _)| s)
                .collect();
            let (mut wide, mut in_reach) = (Seen::default(), None);
            let listed = self.list(Some(&prefix), &mut |e| {
                for (side, key) in Side::BOTH.iter().zip(&keys) {
                    if e.key == *key && e.version == fixed_version() {
                        if readable.contains(&e.scope) {
                            in_reach = Some(e.scope.clone());
                        } else {
                            wide.saw(*side);
                        }
                    }
                }
            });
            let (_, repo) = self.rest().ok()?;
            let what = format!(
                "the REST listing of every cache entry of {}",
                escape::bytes(repo.as_bytes())
            );
            let shown = match (listed, in_reach) {
                (Err(ListError::Denied(m) | ListError::Failed(m)), _) => Err(m),
                (Ok(_), Some(scope)) => Err(format!(
                    "it shows a witness in scope {}, which this token reads, so the restore that missed it is not current",
                    escape::bytes(scope.as_bytes())
                )),
                (Ok(_), None) => Ok(wide),
            };
            Some((what, shown))
        })
    }

    pub(super) fn scope_note(&self, key: &str) -> String {
        match self.scope_of(key) {
            Some(s) => format!(" (written to scope {})", escape::bytes(s.as_bytes())),
            None => format!(" (this token reads {})", self.readable()),
        }
    }
}
