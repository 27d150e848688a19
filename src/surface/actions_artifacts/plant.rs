//! Run A: one artifact per carrier, created, uploaded and finalized as
//! `@actions/artifact` does, journalled before the first request and taken
//! back only when the service refused it.

use super::{ActionsArtifacts, Artifact, Entry, Named, TwirpError, archive, artifact_name};
use crate::escape;
use crate::github::host_of;
use crate::http::Request;
use crate::nonce::Nonce;
use crate::surface::{Job, Journal, PlantOutcome, RunCtx};
use ::http::Method;
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

/// `CreateArtifact`'s request: the artifact, the upload's version (7: a
/// zip uploaded whole) and its type.
#[derive(Serialize)]
struct Create<'a> {
    #[serde(flatten)]
    of: &'a Named<'a>,
    version: u32,
    mime_type: &'static str,
}

/// `FinalizeArtifact`'s request: the artifact, its size (proto3 JSON: an
/// int64 is a string) and its zip's hash.
#[derive(Serialize)]
struct Finalize<'a> {
    #[serde(flatten)]
    of: &'a Named<'a>,
    size: String,
    hash: String,
}

impl ActionsArtifacts {
    pub(super) fn upload(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Artifact>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let carrier = job.carrier;
        let Some(run) = self
            .settings
            .token
            .as_deref()
            .and_then(crate::wire::jwt_backend_ids)
        else {
            return PlantOutcome::Error {
                reason: format!(
                    "the runtime token ({}) names no workflow run (its `scp` claim has no \
                     Actions.Results:<run>:<job> scope), so the results service cannot take an upload",
                    self.settings.token_source.as_deref().unwrap_or("?")
                ),
            };
        };
        let name = artifact_name(ctx, carrier, &job.nonce);
        let shown = escape::bytes(name.as_bytes());
        let zip = archive(ctx, carrier, &job.nonce);
        let intent = Entry::upload(&name, &run, None);
        // Journalled before the request that creates the artifact.
        journal.record(&intent);
        let of = Named {
            workflow_run_backend_id: &run.0,
            workflow_job_run_backend_id: &run.1,
            name: &name,
        };
        let body = Create {
            of: &of,
            version: 7,
            mime_type: "application/zip",
        };
        let upload_url = match self.twirp("CreateArtifact", &body) {
            Err(TwirpError::Denied(reason)) => {
                journal.retract(&intent);
                return PlantOutcome::Refused { reason };
            }
            Err(TwirpError::Failed(reason)) => return PlantOutcome::Error { reason },
            Err(TwirpError::NotFound) => {
                return PlantOutcome::Error {
                    reason: format!("CreateArtifact for {shown}: HTTP 404 not_found"),
                };
            }
            Ok(v) if v["ok"] != json!(true) => {
                journal.retract(&intent);
                return PlantOutcome::Error {
                    reason: format!("CreateArtifact for {shown}: the service answered not ok"),
                };
            }
            Ok(v) => match v["signed_upload_url"]
                .as_str()
                .or(v["signedUploadUrl"].as_str())
            {
                Some(u) if !u.is_empty() => u.to_string(),
                _ => {
                    return PlantOutcome::Error {
                        reason: format!(
                            "CreateArtifact for {shown} answered ok without an upload URL"
                        ),
                    };
                }
            },
        };
        let (hash, size) = match self.put_zip(&upload_url, zip, &shown) {
            Ok(x) => x,
            Err(o) => return o,
        };
        let body = Finalize {
            of: &of,
            size: size.to_string(),
            hash,
        };
        let id = match self.twirp("FinalizeArtifact", &body) {
            Err(TwirpError::Denied(reason)) => return PlantOutcome::Refused { reason },
            Err(TwirpError::Failed(reason)) => return PlantOutcome::Error { reason },
            Err(TwirpError::NotFound) => {
                return PlantOutcome::Error {
                    reason: format!("FinalizeArtifact for {shown}: HTTP 404 not_found"),
                };
            }
            Ok(v) if v["ok"] != json!(true) => {
                return PlantOutcome::Error {
                    reason: format!("FinalizeArtifact for {shown}: the service answered not ok"),
                };
            }
            Ok(v) => {
                let id = &v["artifact_id"];
                id.as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .or(id.as_u64())
            }
        };
        if let Some(id) = id {
            journal.record(&Entry::upload(&name, &run, Some(id)));
        }
        let id = id.map(|i| format!(" (id {i})")).unwrap_or_default();
        PlantOutcome::Planted {
            needle: job.nonce,
            persistence: None,
            detail: format!(
                "artifact {shown}{id} uploaded to {} of {}; any later run with actions: read \
                 lists and downloads it until its retention ends",
                host_of(self.settings.results_url.as_deref().unwrap_or("")),
                if self.settings.control {
                    "the control".to_string()
                } else {
                    self.repo()
                }
            ),
        }
    }

    /// Uploads the zip of artifact `shown` to its signed URL; its hash and
    /// size, for `FinalizeArtifact`.
    fn put_zip(
        &self,
        upload_url: &str,
        zip: Vec<u8>,
        shown: &str,
    ) -> Result<(String, usize), PlantOutcome<Nonce>> {
        let client = self
            .client
            .get()
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let hash = format!("sha256:{}", crate::nonce::to_hex(&Sha256::digest(&zip)));
        let size = zip.len();
        // One Put Blob: the service's blob store is Azure, where a block
        // blob this small needs no staged blocks.
        let put = Request::new(Method::PUT, upload_url)
            .header("x-ms-blob-type", "BlockBlob")
            .header("x-ms-version", "2025-01-05")
            .header("x-ms-blob-content-type", "application/zip")
            .header("content-type", "application/zip")
            .bytes(zip);
        match client.send(&put) {
            Err(f) => Err(PlantOutcome::Error {
                reason: format!("uploading the zip of {shown}: {f}"),
            }),
            Ok(r) if r.status != 201 => Err(PlantOutcome::Error {
                reason: format!("uploading the zip of {shown}: HTTP {}", r.status),
            }),
            Ok(_) => Ok((hash, size)),
        }
    }
}
