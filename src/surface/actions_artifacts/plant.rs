//! Run A: one artifact per carrier, created, uploaded and finalized as
//! `@actions/artifact` does, journalled before the first request and taken
//! back only when the service refused it.

use super::{Artifact, Instance, TwirpError, archive, artifact_name, entry};
use crate::escape;
use crate::github::host_of;
use crate::http::Request;
use crate::surface::{PlantJob, PlantOutcome, RunCtx};
use ::http::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

impl Instance {
    pub(super) fn upload(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Artifact,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let Some(run) = self
            .s
            .token
            .as_deref()
            .and_then(crate::wire::jwt_backend_ids)
        else {
            return PlantOutcome::Error {
                reason: format!(
                    "the runtime token ({}) names no workflow run (its `scp` claim has no \
                     Actions.Results:<run>:<job> scope), so the results service cannot take an upload",
                    self.s.token_source.as_deref().unwrap_or("?")
                ),
            };
        };
        let name = artifact_name(ctx, carrier, &job.nonce);
        let shown = escape::bytes(name.as_bytes());
        let zip = archive(ctx, carrier, &job.nonce);
        let intent = entry(&name, &run, None);
        // Journalled before the request that creates the artifact.
        created(intent.clone());
        let ids = json!({
            "workflow_run_backend_id": run.0,
            "workflow_job_run_backend_id": run.1,
        });
        let mut body = ids.clone();
        body["name"] = json!(name);
        body["version"] = json!(7);
        body["mime_type"] = json!("application/zip");
        let upload_url = match self.twirp("CreateArtifact", body) {
            Err(TwirpError::Denied(reason)) => {
                created(crate::surface::retraction(&intent));
                return PlantOutcome::Refused { reason };
            }
            Err(TwirpError::Failed(reason)) => return PlantOutcome::Error { reason },
            Err(TwirpError::NotFound) => {
                return PlantOutcome::Error {
                    reason: format!("CreateArtifact for {shown}: HTTP 404 not_found"),
                };
            }
            Ok(v) if v["ok"] != json!(true) => {
                created(crate::surface::retraction(&intent));
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
        let mut body = ids;
        body["name"] = json!(name);
        body["size"] = json!(size.to_string());
        body["hash"] = json!(hash);
        let id = match self.twirp("FinalizeArtifact", body) {
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
            created(entry(&name, &run, Some(id)));
        }
        let id = id.map(|i| format!(" (id {i})")).unwrap_or_default();
        PlantOutcome::Planted {
            needle: Value::String(job.nonce.hex()),
            persistence: None,
            detail: format!(
                "artifact {shown}{id} uploaded to {} of {}; any later run with actions: read \
                 lists and downloads it until its retention ends",
                host_of(self.s.results_url.as_deref().unwrap_or("")),
                if self.s.control {
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
    ) -> Result<(String, usize), PlantOutcome> {
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
