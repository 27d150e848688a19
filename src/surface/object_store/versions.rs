//! The object-version carrier's own operations: an object written and
//! deleted at once in a bucket that keeps versions (its version and its
//! delete marker stay, shown by ListObjectVersions alone), the check that
//! the identity may delete versions before one is planted, the version
//! listing run B reads, and cleanup of versions by their ids.

use super::listings::{MARKER_LISTING, VERSION_LISTING};
use super::s3::{Call, Said};
use super::surface::{ListError, said, upload_id_ok};
use super::{Entry, ObjectStore, VERSION_CHECK, innocuous};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::surface::witness::{self, Side};
use crate::surface::{CleanupOutcome, Journal, PlantOutcome};
use http::Method;

impl ObjectStore {
    /// Writes `body` at `name` and deletes it at once, in a bucket that
    /// keeps versions: journalled before the write, then with each version
    /// id S3 gives (the version's, then the delete marker's). Where the
    /// bucket keeps none (the PUT gives no version id) the object is
    /// deleted, which leaves nothing, and the carrier is unsupported.
    pub(super) fn write_and_delete(
        &self,
        journal: &mut Journal<'_, Entry>,
        name: &str,
        body: Vec<u8>,
    ) -> Result<Vec<String>, PlantOutcome<Nonce>> {
        let s3 = self
            .s3()
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let err = |f: Fault| PlantOutcome::Error { reason: f.into() };
        let key = self.key(name);
        let intent = Entry::version(name, &[]);
        journal.record(&intent);
        let a = s3
            .send(&Call::new(Method::PUT, Some(&key)).body(body))
            .map_err(err)?;
        self.written(journal, &intent, a.status, a.said(), "PutObject")?;
        let Some(v) = version_id(&a) else {
            return Err(self.unversioned(journal, &intent, &key).outcome());
        };
        journal.record(&Entry::version(name, std::slice::from_ref(&v)));
        let d = s3
            .send(&Call::new(Method::DELETE, Some(&key)))
            .map_err(err)?;
        if d.said() != Said::Done {
            return Err(PlantOutcome::Error {
                reason: said(&d.said(), "DeleteObject"),
            });
        }
        let Some(m) = version_id(&d) else {
            return Err(PlantOutcome::Error {
                reason: "the DELETE made no delete marker (it gave no version id): the bucket does not keep versions as S3 does".into(),
            });
        };
        let ids = vec![v, m];
        journal.record(&Entry::version(name, &ids));
        Ok(ids)
    }

    /// Whether what run A writes can be taken back, before it writes
    /// anything: unless `permanent: true` (which accepts that versions
    /// stay), run A writes an object of its own and deletes its version by
    /// id. In a bucket that keeps versions, every object written leaves
    /// one: where the identity may not delete them, `Err` with the outcome
    /// of every carrier that writes an object (SKIPPED, saying why; that
    /// one version is listed as left).
    pub(super) fn may_delete_versions(
        &self,
        ctx: &crate::surface::RunCtx<'_>,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<Versions, PlantOutcome<Nonce>> {
        if self.settings.permanent {
            return Ok(Versions::Unknown);
        }
        // A bucket that never kept versions, as its versioning says, needs
        // no write to tell (one read instead of a write, a delete and a
        // listing on every probe of a plain bucket).
        if self.never_versioned() {
            return Ok(Versions::NotKept);
        }
        let s3 = self
            .s3()
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        let err = |f: Fault| PlantOutcome::Error { reason: f.into() };
        let name = witness::name(ctx, VERSION_CHECK, Side::Before, "");
        let key = self.key(&name);
        let intent = Entry::version(&name, &[]);
        journal.record(&intent);
        let a = s3
            .send(&Call::new(Method::PUT, Some(&key)).body(innocuous(ctx.probe_id)))
            .map_err(err)?;
        match self.written(journal, &intent, a.status, a.said(), "PutObject") {
            Ok(()) => {}
            // The check's own write refused: the plants' writes say what
            // the identity may do (a refusal of one is its carrier's).
            Err(PlantOutcome::Refused { .. }) => return Ok(Versions::Unknown),
            Err(o) => return Err(o),
        }
        let Some(v) = version_id(&a) else {
            // (The check's object carries no nonce: a look at what stays
            // that cannot be had leaves its entry to cleanup, which lists
            // it; the plants go on.)
            return match self.unversioned(journal, &intent, &key) {
                Unversioned::Clean | Unversioned::Unknown(_) => Ok(Versions::NotKept),
                stays => Err(stays.outcome()),
            };
        };
        let fuller = Entry::version(&name, std::slice::from_ref(&v));
        journal.record(&fuller);
        let d = s3
            .send(&Call::new(Method::DELETE, Some(&key)).query("versionId", v))
            .map_err(err)?;
        match d.said() {
            Said::Done => {
                journal.retract(&fuller);
                journal.retract(&intent);
                Ok(Versions::Deletable)
            }
            Said::Denied => Err(PlantOutcome::Unsupported {
                reason: "the bucket keeps versions, and the identity may not delete them (DeleteObjectVersion refused): an object written here would stay; planted only with `permanent: true`, which accepts that its versions stay".into(),
            }),
            other => Err(PlantOutcome::Error {
                reason: said(&other, "DeleteObjectVersion"),
            }),
        }
    }

    /// A bucket that gave no version id: what was written at `key` is
    /// deleted, and then nothing may stay at it (a bucket whose versioning
    /// is suspended keeps a `null` delete marker, and the key carries the
    /// nonce): what the version listing still shows there is deleted by
    /// id. Only with nothing left is the entry taken back; else it stays
    /// (with what is left, when the listing shows it) for cleanup.
    fn unversioned(
        &self,
        journal: &mut Journal<'_, Entry>,
        intent: &Entry,
        key: &str,
    ) -> Unversioned {
        let Some(s3) = &self.s3 else {
            return Unversioned::Unknown("no credentials".into());
        };
        let _ = s3.send(&Call::new(Method::DELETE, Some(key)));
        let left = self.versions_at(key).map(|ids| {
            ids.into_iter()
                .filter(|id| {
                    let del = Call::new(Method::DELETE, Some(key)).query("versionId", id.clone());
                    !matches!(
                        s3.send(&del).map(|a| a.said()),
                        Ok(Said::Done | Said::Missing)
                    )
                })
                .collect::<Vec<String>>()
        });
        match left {
            Ok(ids) if ids.is_empty() => {
                journal.retract(intent);
                Unversioned::Clean
            }
            Ok(ids) => {
                journal.record(&Entry::version(&intent.name, &ids));
                Unversioned::Stays(ids.len())
            }
            // A bucket that never kept versions keeps nothing of a
            // deleted object: its versioning, read, says so.
            Err(_) if self.never_versioned() => {
                journal.retract(intent);
                Unversioned::Clean
            }
            Err(why) => Unversioned::Unknown(why),
        }
    }

    /// Whether GetBucketVersioning says the bucket never kept versions (no
    /// `Status`, neither `Enabled` nor `Suspended`).
    fn never_versioned(&self) -> bool {
        let Some(s3) = &self.s3 else {
            return false;
        };
        let Ok(a) = s3.send(&Call::new(Method::GET, None).query("versioning", "")) else {
            return false;
        };
        a.said() == Said::Done
            && super::s3::parse(&a.body, &[])
                .is_ok_and(|d| d.top.get("Status").is_none_or(|s| s.trim().is_empty()))
    }

    /// The version ids the version listing shows at exactly `key` (a
    /// store without the listing has none).
    pub(super) fn versions_at(&self, key: &str) -> Result<Vec<String>, String> {
        let mut ids = vec![];
        match self.list_versions(key, &mut |k, v| {
            if k == key && !v.is_empty() {
                ids.push(v.to_string());
            }
        }) {
            Ok(_) | Err(ListError::Absent(_)) => Ok(ids),
            Err(ListError::Denied(m) | ListError::Failed(m)) => Err(m),
        }
    }
}

/// What stays after an object written to a bucket that gave no version id
/// was deleted.
enum Unversioned {
    /// Nothing: its entry is taken back.
    Clean,
    /// Versions the listing shows at its key, this many (journalled).
    Stays(usize),
    /// The version listing could not be read (why).
    Unknown(String),
}

impl Unversioned {
    /// What it means for a carrier whose key carries the nonce.
    fn outcome(self) -> PlantOutcome<Nonce> {
        match self {
            Unversioned::Clean => PlantOutcome::Unsupported {
                reason: "the bucket keeps no versions (a PUT gives no version id): a deleted object leaves nothing to read".into(),
            },
            Unversioned::Stays(n) => PlantOutcome::Error {
                reason: format!(
                    "the PUT gave no version id, yet versions stay at the key after its deletion ({n} of them): the bucket keeps versions as S3 does not"
                ),
            },
            Unversioned::Unknown(why) => PlantOutcome::Error {
                reason: format!(
                    "the PUT gave no version id, and whether anything stays at the key cannot be told: {why}"
                ),
            },
        }
    }
}

/// What run A learned of the bucket's versions before writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Versions {
    /// It keeps versions, and the identity may delete them.
    Deletable,
    /// It keeps none: a deleted object leaves nothing.
    NotKept,
    /// Not asked (`permanent: true`), or the check's write was refused.
    Unknown,
}

/// The version id S3 gave in `a`'s `x-amz-version-id`, when it is one
/// (not `null`, as S3 names the version of a bucket that keeps none).
fn version_id(a: &super::s3::Answer) -> Option<String> {
    a.header("x-amz-version-id")
        .filter(|v| *v != "null" && upload_id_ok(v))
        .map(String::from)
}

impl ObjectStore {
    /// Every version and delete marker under `prefix`, page by page to the
    /// end (`each` gets its key and version id).
    pub(super) fn list_versions(
        &self,
        prefix: &str,
        each: &mut dyn FnMut(&str, &str),
    ) -> Result<usize, ListError> {
        self.list_marked(&VERSION_LISTING, prefix, each)
    }

    /// Every delete marker under the prefix (`each` gets its key and id):
    /// the versions listing, markers only.
    pub(super) fn list_markers(
        &self,
        each: &mut dyn FnMut(&str, &str),
    ) -> Result<usize, ListError> {
        self.list_marked(&MARKER_LISTING, &self.settings.prefix, each)
    }

    /// Deletes each version of `entry` by its id: those journalled, or,
    /// for an intent alone, those the version listing shows at its key (a
    /// key in runwarden's own namespace). Refused: kept with `permanent:
    /// true` (which accepted it), else left.
    pub(super) fn clean_versions(&self, entry: &Entry) -> CleanupOutcome {
        let left = |reason: String| CleanupOutcome::Left { reason };
        let Some(s3) = &self.s3 else {
            return left("no credentials here to delete it with".into());
        };
        let key = self.key(&entry.name);
        let mut removed = false;
        for id in &entry.version_ids {
            let del = Call::new(Method::DELETE, Some(&key)).query("versionId", id.clone());
            match s3.send(&del).map(|a| a.said()) {
                Ok(Said::Done) => removed = true,
                Ok(Said::Missing) => {}
                Ok(Said::Denied) if self.settings.permanent => {
                    return CleanupOutcome::Kept {
                        reason: "the identity may not delete object versions; kept, as `permanent: true` accepts".into(),
                    };
                }
                Ok(other) => return left(said(&other, "DeleteObjectVersion")),
                Err(f) => return left(f.into()),
            }
        }
        // Then nothing may stay at the key: what does was not journalled
        // as ours (run A stopped before S3 answered, or someone wrote
        // there), and is left, named.
        match self.versions_at(&key) {
            Ok(ids) if ids.is_empty() => {
                if removed {
                    CleanupOutcome::Removed
                } else {
                    CleanupOutcome::Gone
                }
            }
            Ok(ids) => left(format!(
                "versions stay at its key that its journal does not name ({}): not provably runwarden's, left",
                ids.iter()
                    .map(|i| crate::escape::bytes(i.as_bytes()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Err(why) => left(format!(
                "whether versions stay at its key cannot be told: {why}"
            )),
        }
    }
}
