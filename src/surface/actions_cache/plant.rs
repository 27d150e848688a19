//! Run A: one entry per carrier, reserved, uploaded and finalized as
//! `@actions/cache` does, journalled before the first request and taken
//! back only when the service refused it.

use super::protocol::str_field;
use super::{Cache, Instance, Twirp, entry_for};
use crate::escape;
use crate::http::Request;
use crate::surface::{PlantJob, PlantOutcome, RunCtx};
use ::http::Method;
use serde_json::{Value, json};

impl Instance {
    pub(super) fn plant_carrier(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Cache,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let (key, version, archive) = entry_for(ctx, carrier, &job.nonce, job.scope.as_ref());
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
            created(crate::surface::retraction(&entry));
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
        let client = match self.client() {
            Ok(c) => c,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let size = archive.len();
        let put = Request::new(Method::PUT, &upload_url)
            .header("x-ms-blob-type", "BlockBlob")
            .header("x-ms-version", "2025-01-05")
            .header("content-type", "application/octet-stream")
            .bytes(archive);
        match client.send(&put) {
            Err(f) => {
                return PlantOutcome::Error {
                    reason: format!("uploading the archive of {shown}: {f}"),
                };
            }
            Ok(r) if r.status != 201 => {
                return PlantOutcome::Error {
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
}
