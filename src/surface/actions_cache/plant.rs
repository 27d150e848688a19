//! Run A's upload: the archive's one Azure `Put Blob` to the signed URL
//! `CreateCacheEntry` gave.

use super::ActionsCache;
use crate::http::Request;
use crate::nonce::Nonce;
use crate::surface::PlantOutcome;
use ::http::Method;

impl ActionsCache {
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
