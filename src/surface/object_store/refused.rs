//! What an `AccessDenied` to run B proves on S3, and what it does not.
//!
//! - S3 answers `AccessDenied`, not 404, to a read of a key that does not
//!   exist when the identity may not list the bucket (`s3:ListBucket`):
//!   a plant evicted or not there reads as refused. So a read by key that
//!   is refused is read again on the witnesses: if the same read of them
//!   answers, the plant's key is not there, and its miss counts only as
//!   the witnesses show the route current. Refused on the witnesses too,
//!   it is a refusal only where the object listing shows them (they
//!   exist); without that nothing tells a refusal from an eviction: ERROR.
//! - A refusal of one operation leaves its siblings: a read by version
//!   (`?versionId=null`, `s3:GetObjectVersion`) reads the same object on
//!   an unversioned bucket, and ListObjectVersions (`s3:ListBucketVersions`)
//!   lists every key. A refusal counts only when the sibling is refused
//!   too (or the store has none): a sibling that answers and finds the
//!   nonce is FAIL, one that answers and finds nothing is ERROR (it is a
//!   route of its own, without witnesses of its own).

use super::recover::Wit;
use super::s3::{Call, Said};
use super::surface::{ListError, said};
use super::{OBJECTS, Obj, ObjectStore};
use crate::surface::RunCtx;
use crate::surface::routes::Recovered;
use crate::surface::witness::{self, Seen, Side};
use http::Method;

impl ObjectStore {
    /// Run B's read by key (`how`) of `key`, carrier `c` through `route`,
    /// answered `AccessDenied` (`reason`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn refused_read(
        &self,
        ctx: &RunCtx<'_>,
        c: Obj,
        route: &'static str,
        how: &Method,
        key: &str,
        hex: &str,
        reason: String,
    ) -> Recovered {
        let tagging = c == Obj::ObjectTag;
        let mut seen = Seen::default();
        let mut refused = 0;
        for side in Side::BOTH {
            match self.read_witness(ctx, side, how, tagging) {
                Ok(Wit::Made) => seen.saw(side),
                Ok(Wit::Missing) => {}
                Ok(Wit::Denied) => refused += 1,
                Err(why) => return Recovered::Error { reason: why },
            }
        }
        let what = format!("the {route} read");
        if refused < 2 {
            // A policy may refuse this very key (its agreed form) and not
            // the witnesses: the sibling read by version is tried first.
            let sibling = self.by_version(key, how, tagging, hex, reason.clone());
            if matches!(sibling, Recovered::Found { .. } | Recovered::Error { .. }) {
                return sibling;
            }
            // The same read answers for the witnesses: the plant's key is
            // not there.
            return Recovered::missed_through(
                route,
                format!(
                    "{reason}, while the same read of the witnesses answers: S3 answers so for a key that does not exist to an identity that may not list the bucket"
                ),
                &witness::currency(&what, seen, || None),
            );
        }
        match self.listed_witnesses(ctx) {
            Ok(true) => {}
            Ok(false) => {
                return Recovered::Error {
                    reason: format!(
                        "{reason}, and so are the witnesses, which the object listing does not show: nothing tells a refusal from keys that are not there"
                    ),
                };
            }
            Err(why) => {
                return Recovered::Error {
                    reason: format!(
                        "{reason}, and so are the witnesses, and the bucket cannot be listed ({why}): to an identity that may not list, S3 answers AccessDenied for a missing key too, so nothing tells a refusal from an eviction"
                    ),
                };
            }
        }
        match self.by_version(key, how, tagging, hex, reason.clone()) {
            Recovered::Missed { .. } => Recovered::Error {
                reason: format!(
                    "{reason}; the same read by version (versionId=null) finds no such version (a bucket that keeps versions gives real ids), so nothing shows every read of it refused"
                ),
            },
            r => r,
        }
    }

    /// Whether the object listing names both witness objects.
    fn listed_witnesses(&self, ctx: &RunCtx<'_>) -> Result<bool, String> {
        let names: Vec<String> = Side::BOTH
            .iter()
            .map(|s| self.key(&witness::name(ctx, OBJECTS, *s, "")))
            .collect();
        let mut seen = [false; 2];
        self.list_keys(&mut |k| {
            for (i, n) in names.iter().enumerate() {
                seen[i] |= k == n;
            }
        })
        .map_err(|e| match e {
            ListError::Denied(m) | ListError::Failed(m) | ListError::Absent(m) => m,
        })?;
        Ok(seen == [true, true])
    }

    /// The sibling of a refused read: the same read by version
    /// (`versionId=null`).
    fn by_version(
        &self,
        key: &str,
        how: &Method,
        tagging: bool,
        hex: &str,
        reason: String,
    ) -> Recovered {
        let Some(s3) = &self.s3 else {
            return Recovered::Error {
                reason: "no credentials".into(),
            };
        };
        // A HEAD's refusal has no body to say why: asked with GET, which
        // answers the same metadata.
        let mut call = Call::new(Method::GET, Some(key)).query("versionId", "null");
        if tagging {
            call = call.query("tagging", "");
        }
        let a = match s3.send(&call) {
            Ok(a) => a,
            Err(f) => return Recovered::Error { reason: f.into() },
        };
        match a.said() {
            Said::Done => {}
            // Refused too, or no such read here: the refusal stands.
            Said::Denied | Said::Unsupported(_) => {
                return Recovered::Denied {
                    reason: format!(
                        "{reason}; the same read by version (versionId=null) is refused too"
                    ),
                };
            }
            // A 404: no `null` version of it (a bucket that keeps
            // versions gives real ids), or no such key.
            Said::Missing => {
                return Recovered::Missed {
                    detail: reason,
                    looks: vec![],
                };
            }
            other => {
                return Recovered::Error {
                    reason: format!(
                        "{reason}, and the same read by version (versionId=null) answers: {}",
                        said(&other, "it")
                    ),
                };
            }
        }
        let found = if *how == Method::HEAD {
            a.headers.iter().any(|(n, v)| {
                n.as_str().starts_with("x-amz-meta-") && v.to_str().is_ok_and(|v| v.contains(hex))
            })
        } else {
            memchr::memmem::find(&a.body, hex.as_bytes()).is_some()
        };
        if found {
            Recovered::Found {
                detail: format!(
                    "{reason}, but the same read by version (versionId=null, s3:GetObjectVersion) holds the nonce"
                ),
            }
        } else {
            Recovered::Error {
                reason: format!(
                    "{reason}, but the same read by version (versionId=null) answers: a route of its own, not shown current, so the refusal proves nothing"
                ),
            }
        }
    }

    /// The sibling of a refused object listing: ListObjectVersions under
    /// the prefix, read to its end. For each of `needles` (index, hex),
    /// the key that carries it (none found: the caller's ERROR, since this
    /// route has no witnesses of its own); `Err` with the outcome of every
    /// one when it answered no whole listing, or was refused too.
    pub(super) fn refused_listing(
        &self,
        needles: &[(usize, String)],
        len: usize,
        reason: &str,
    ) -> Result<Vec<Option<String>>, Recovered> {
        let mut hits: Vec<Option<String>> = vec![None; len];
        let listed = self.list_versions(&self.settings.prefix, &mut |k, _| {
            for (i, hex) in needles {
                if hits[*i].is_none() && k.contains(hex.as_str()) {
                    hits[*i] = Some(crate::escape::bytes(k.as_bytes()));
                }
            }
        });
        match listed {
            Ok(_) => Ok(hits),
            // Refused too, or no such listing here: the refusal stands.
            Err(ListError::Denied(_) | ListError::Absent(_)) => Err(Recovered::Denied {
                reason: format!("{reason}; ListObjectVersions is refused too"),
            }),
            Err(ListError::Failed(m)) => Err(Recovered::Error {
                reason: format!("{reason}, and ListObjectVersions: {m}"),
            }),
        }
    }
}
