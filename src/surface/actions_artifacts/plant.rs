//! Run A's requests: what `CreateArtifact` and `FinalizeArtifact` are
//! sent, and the zip's upload to the signed URL between them.

use super::{ActionsArtifacts, Named};
use crate::http::Request;
use crate::nonce::Nonce;
use crate::surface::PlantOutcome;
use ::http::Method;
use serde::Serialize;
use sha2::{Digest, Sha256};

/// `CreateArtifact`'s request: the artifact, the upload's version (7: a
/// zip uploaded whole) and its type.
#[derive(Serialize)]
pub(super) struct Create<'a> {
    #[serde(flatten)]
    pub(super) of: &'a Named<'a>,
    pub(super) version: u32,
    pub(super) mime_type: &'static str,
}

/// `FinalizeArtifact`'s request: the artifact, its size (proto3 JSON: an
/// int64 is a string) and its zip's hash.
#[derive(Serialize)]
pub(super) struct Finalize<'a> {
    #[serde(flatten)]
    pub(super) of: &'a Named<'a>,
    pub(super) size: String,
    pub(super) hash: String,
}

impl ActionsArtifacts {
    /// Uploads the zip of artifact `shown` to its signed URL; its hash and
    /// size, for `FinalizeArtifact`.
    pub(super) fn put_zip(
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
