//! Run A: one entry per carrier, reserved, uploaded and finalized as
//! `@actions/cache` does, journalled before the first request and taken
//! back only when the service refused it.

use super::protocol::{Finalize, Reserve, str_field};
use super::{ActionsCache, Cache, Entry, Twirp, entry_for};
use crate::escape;
use crate::http::Request;
use crate::nonce::Nonce;
use crate::surface::{Job, Journal, PlantOutcome, RunCtx};
use ::http::Method;

impl ActionsCache {
    pub(super) fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Cache>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let (key, version, archive) = entry_for(ctx, job.carrier, &job.nonce, job.scope.as_ref());
        let shown = escape::bytes(key.as_bytes());
        // The service writes to the token's first writable scope.
        let scope = self
            .token_scopes()
            .into_iter()
            .find(|(_, p)| p & 2 != 0)
            .map(|(s, _)| s);
        // Journalled before the request that reserves the key, and taken
        // back only when the service's own answer says nothing was made.
        let entry = Entry {
            key: key.clone(),
            version: version.clone(),
            scope: scope.clone(),
        };
        journal.record(&entry);
        let reserve = self.twirp(
            "CreateCacheEntry",
            &Reserve {
                key: &key,
                version: &version,
            },
        );
        if matches!(reserve, Ok(Twirp::Denied(_) | Twirp::NotOk(_))) {
            journal.retract(&entry);
        }
        let upload_url = match reserve {
            Err(f) => return PlantOutcome::Error { reason: f.into() },
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
                return PlantOutcome::Error {
                    reason: format!(
                        "CreateCacheEntry for {shown} was refused: {}",
                        escape::bytes(m.as_bytes())
                    ),
                };
            }
            Ok(Twirp::Ok(v)) => match str_field(&v, "signed_upload_url", "signedUploadUrl") {
                u if u.is_empty() => {
                    return PlantOutcome::Error {
                        reason: format!(
                            "CreateCacheEntry for {shown} answered ok without an upload URL"
                        ),
                    };
                }
                u => u,
            },
        };
        let size = archive.len();
        if let Err(o) = self.upload(&upload_url, archive, &shown) {
            return o;
        }
        let finalize = self.twirp(
            "FinalizeCacheEntryUpload",
            &Finalize {
                key: &key,
                size_bytes: size.to_string(),
                version: &version,
            },
        );
        match finalize {
            Err(f) => PlantOutcome::Error { reason: f.into() },
            Ok(Twirp::Denied(m)) => PlantOutcome::Refused {
                reason: format!("the cache service refused to finalize the entry: {m}"),
            },
            Ok(Twirp::NotOk(m)) => PlantOutcome::Error {
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
                    needle: job.nonce,
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

    /// The archive's one Azure `Put Blob` to the signed URL (no token: the
    /// URL is the credential); the plant's outcome when the blob was not
    /// made.
    fn upload(&self, url: &str, archive: Vec<u8>, shown: &str) -> Result<(), PlantOutcome<Nonce>> {
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
