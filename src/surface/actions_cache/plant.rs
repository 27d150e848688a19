//! Run A's writes: one entry reserved (`CreateCacheEntry`), its archive's
//! one Azure `Put Blob` to the signed URL, and the finalize; and the
//! restore route's witnesses ([`crate::surface::witness`]), made the same
//! way before and after the plants.

use super::protocol::{Finalize, Reserve, str_field};
use super::{ActionsCache, Entry, Twirp, fixed_version};
use crate::escape;
use crate::http::Request;
use crate::nonce::Nonce;
use crate::surface::witness::{self, Side};
use crate::surface::{Journal, PlantOutcome, RunCtx};
use ::http::Method;

/// The route the witnesses stand in: the service's restore lookup, which
/// both cache-content (by exact key) and restore-prefix (by prefix) read
/// through, and which the listing shows too.
pub(super) const RESTORE: &str = "restore";

/// The archive of a witness: it carries no nonce.
fn witness_archive(probe_id: &str, side: Side) -> Vec<u8> {
    format!(
        "runwarden actions-cache witness, probe {probe_id}, {} the plant\n",
        side.name()
    )
    .into_bytes()
}

impl ActionsCache {
    /// The key of the restore route's witness on `side`.
    pub(super) fn witness_key(ctx: &RunCtx<'_>, side: Side) -> String {
        witness::name(ctx, RESTORE, side, &fixed_version())
    }

    /// Makes the restore route's witness on `side` (journalled as every
    /// entry is).
    pub(super) fn plant_witness(
        &self,
        ctx: &RunCtx<'_>,
        side: Side,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<String, PlantOutcome<Nonce>> {
        let key = Self::witness_key(ctx, side);
        self.put(
            &key,
            &fixed_version(),
            witness_archive(ctx.probe_id, side),
            journal,
        )
    }

    /// One entry, as `@actions/cache` writes it: journalled before the
    /// first request and taken back only when the service's own answer
    /// says nothing was made. The scope it was written to (shown), or the
    /// plant's outcome when it was not made.
    pub(super) fn put(
        &self,
        key: &str,
        version: &str,
        archive: Vec<u8>,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<String, PlantOutcome<Nonce>> {
        let shown = escape::bytes(key.as_bytes());
        // The service writes to the token's first writable scope.
        let scope = self
            .token_scopes()
            .into_iter()
            .find(|(_, p)| p & 2 != 0)
            .map(|(s, _)| s);
        let entry = Entry {
            key: key.to_string(),
            version: version.to_string(),
            scope: scope.clone(),
        };
        journal.record(&entry);
        let reserve = self.twirp("CreateCacheEntry", &Reserve { key, version });
        if matches!(reserve, Ok(Twirp::Denied(_) | Twirp::NotOk(_))) {
            journal.retract(&entry);
        }
        let refused = |m: String| PlantOutcome::Refused {
            reason: format!("the cache service refused the write: {m}"),
        };
        let upload_url = match reserve {
            Err(f) => return Err(PlantOutcome::Error { reason: f.into() }),
            Ok(Twirp::Denied(m)) => return Err(refused(m)),
            // The stable prefix of a policy denial (toolkit PR #2429).
            Ok(Twirp::NotOk(m)) if m.starts_with("cache write denied") => {
                return Err(refused(escape::bytes(m.as_bytes())));
            }
            Ok(Twirp::NotOk(m)) => {
                return Err(PlantOutcome::Error {
                    reason: format!(
                        "CreateCacheEntry for {shown} was refused: {}",
                        escape::bytes(m.as_bytes())
                    ),
                });
            }
            Ok(Twirp::Ok(v)) => match str_field(&v, "signed_upload_url", "signedUploadUrl") {
                u if u.is_empty() => {
                    return Err(PlantOutcome::Error {
                        reason: format!(
                            "CreateCacheEntry for {shown} answered ok without an upload URL"
                        ),
                    });
                }
                u => u,
            },
        };
        let size = archive.len();
        self.upload(&upload_url, archive, &shown)?;
        let finalize = self.twirp(
            "FinalizeCacheEntryUpload",
            &Finalize {
                key,
                size_bytes: size.to_string(),
                version,
            },
        );
        match finalize {
            Err(f) => Err(PlantOutcome::Error { reason: f.into() }),
            Ok(Twirp::Denied(m)) => Err(PlantOutcome::Refused {
                reason: format!("the cache service refused to finalize the entry: {m}"),
            }),
            Ok(Twirp::NotOk(m)) => Err(PlantOutcome::Error {
                reason: format!(
                    "FinalizeCacheEntryUpload for {shown} was refused: {}",
                    escape::bytes(m.as_bytes())
                ),
            }),
            Ok(Twirp::Ok(_)) => Ok(scope
                .map(|s| escape::bytes(s.as_bytes()))
                .unwrap_or_else(|| "the token's first writable scope".into())),
        }
    }

    /// The archive's one Azure `Put Blob` to the signed URL (no token: the
    /// URL is the credential); the plant's outcome when the blob was not
    /// made.
    pub(super) fn upload(
        &self,
        url: &str,
        archive: Vec<u8>,
        shown: &str,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let failed = |reason: String| PlantOutcome::Error { reason };
        let client = self.client().map_err(|f| failed(f.into()))?;
        let put = Request::new(Method::PUT, url)
            .header("x-ms-blob-type", "BlockBlob")
            .header("x-ms-version", "2025-01-05")
            .header("content-type", "application/octet-stream")
            .bytes(archive);
        match client.send(&put) {
            Err(f) => Err(failed(format!("uploading the archive of {shown}: {f}"))),
            Ok(r) if r.status != 201 => Err(failed(format!(
                "uploading the archive of {shown}: HTTP {}",
                r.status
            ))),
            Ok(_) => Ok(()),
        }
    }
}
