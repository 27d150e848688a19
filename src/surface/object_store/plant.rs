//! Run A's writes to a bucket: each journalled before its request and
//! taken back when S3 answered that it made nothing, and the read back
//! that shows a store kept what a carrier wrote.

use super::s3::{Call, S3, Said};
use super::surface::{said, upload_id_ok};
use super::{Entry, META, ObjectStore};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::surface::{Journal, PlantOutcome};
use http::Method;

impl ObjectStore {
    pub(super) fn s3(&self) -> Result<&S3, Fault> {
        self.s3.as_ref().ok_or_else(|| {
            Fault::unsupported("no credentials: a variable the config names is unset")
        })
    }

    /// PUTs `body` at `name` (journalled first): `Err` with the carrier's
    /// outcome when it was not stored. A refusal or any other 4xx stored
    /// nothing (S3's PUT is whole or nothing): taken back.
    pub(super) fn put(
        &self,
        journal: &mut Journal<'_, Entry>,
        name: &str,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let s3 = self
            .s3()
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let entry = Entry::object(name, &body);
        journal.record(&entry);
        let key = self.key(name);
        let mut call = Call::new(Method::PUT, Some(&key)).body(body);
        call.headers = headers;
        let a = s3
            .send(&call)
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        self.written(journal, &entry, a.status, a.said(), "PutObject")
    }

    /// Starts a multipart upload of `name` (journalled first).
    pub(super) fn start_upload(
        &self,
        journal: &mut Journal<'_, Entry>,
        name: &str,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let s3 = self
            .s3()
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let entry = Entry::upload(name, None);
        journal.record(&entry);
        let key = self.key(name);
        let a = s3
            .send(&Call::new(Method::POST, Some(&key)).query("uploads", ""))
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let status = a.status;
        let s = a.said();
        if s == Said::Done {
            let id = super::s3::parse(&a.body, &[])
                .ok()
                .and_then(|d| d.top.get("UploadId").cloned())
                .filter(|id| upload_id_ok(id));
            let Some(id) = id else {
                return Err(PlantOutcome::Error {
                    reason: "CreateMultipartUpload answered without an upload id".into(),
                });
            };
            // The fuller entry: cleanup aborts it by its id.
            journal.record(&Entry::upload(name, Some(&id)));
        }
        self.written(journal, &entry, status, s, "CreateMultipartUpload")
    }

    /// What a write's answer means for its carrier: taken back when it
    /// provably made nothing (a refusal, a 4xx).
    pub(super) fn written(
        &self,
        journal: &mut Journal<'_, Entry>,
        entry: &Entry,
        status: u16,
        s: Said,
        op: &str,
    ) -> Result<(), PlantOutcome<Nonce>> {
        if s == Said::Done {
            return Ok(());
        }
        if (400..500).contains(&status) {
            journal.retract(entry);
        }
        Err(match s {
            Said::Denied => PlantOutcome::Refused {
                reason: said(&s, op),
            },
            Said::Unsupported(m) => PlantOutcome::Unsupported {
                reason: format!("{op}: {m}"),
            },
            other => PlantOutcome::Error {
                reason: said(&other, op),
            },
        })
    }

    /// Whether the store kept what the metadata or tag carrier wrote:
    /// read back (`HEAD`, or `GET ?tagging`) and looked for. A store that
    /// drops it is `Unsupported`: run B could never find it.
    pub(super) fn kept(
        &self,
        name: &str,
        how: Method,
        hex: &str,
        what: &str,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let s3 = self
            .s3()
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let key = self.key(name);
        let mut call = Call::new(how.clone(), Some(&key));
        if how == Method::GET {
            call = call.query("tagging", "");
        }
        let a = s3
            .send(&call)
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let there = match a.said() {
            Said::Done if how == Method::HEAD => a
                .header(&format!("x-amz-meta-{META}"))
                .is_some_and(|v| v.contains(hex)),
            Said::Done => String::from_utf8_lossy(&a.body).contains(hex),
            other => {
                return Err(PlantOutcome::Error {
                    reason: format!("reading back the {what}: {}", said(&other, "read")),
                });
            }
        };
        if there {
            Ok(())
        } else {
            Err(PlantOutcome::Unsupported {
                reason: format!(
                    "the store kept no {what} of the object it stored: run B could not read one"
                ),
            })
        }
    }
}
