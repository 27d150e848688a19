//! `type: object-store`: an S3-compatible bucket two runs can both reach
//! (a self-hosted build cache's bucket, sccache's or Nx's, a runner
//! fleet's shared bucket for caches and artifacts).
//!
//! Run A writes under the agreed `prefix`: an object whose key carries
//! the nonce, an object at an agreed key holding it, one whose user
//! metadata (`x-amz-meta-runwarden`) holds it, one whose tag holds it,
//! a multipart upload started under a key carrying it and never completed
//! (object listings do not show it), and, in a bucket that keeps versions,
//! an object under a key carrying it written and deleted at once. Run B
//! lists the objects (ListObjectsV2, paged by continuation token to the
//! end), the uploads (ListMultipartUploads) and the versions
//! (ListObjectVersions), and reads the agreed keys (`GET`,
//! `HEAD`, `GET ?tagging`). Every route has its witnesses: two objects
//! (and, for the uploads, two uploads) run A makes before and after the
//! plants, which run B must see through the same route for a miss to
//! count ([`super::witness`]).
//!
//! Keys are [`super::tagged_name`]s under the prefix, so leftovers are
//! identifiable and `cleanup --probe-id` takes only keys whose tag
//! verifies. Cleanup deletes an object only while it holds what was put
//! (its SHA-256), by its version id in a versioned bucket (no delete
//! marker, no old version left), and aborts uploads at its own keys.
//! Keys read from listings are attacker controlled: escaped when shown,
//! never used to build a request except for the exact keys this probe
//! derives.

mod config;
mod listings;
mod plant;
mod recover;
mod refused;
pub mod s3;
mod surface;
mod versions;
mod watch;

use super::RunCtx;
use super::carrier::carriers;
use crate::escape;
use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The user metadata key the metadata carrier sets (`x-amz-meta-…`) and
/// the tag key the tag carrier sets.
const META: &str = "runwarden";

carriers! {
    /// The object store's carriers.
    pub enum Obj {
        ObjectKey = "object-key", Durable, "the nonce in an object's key; run B lists the bucket (ListObjectsV2)";
        ObjectContent = "object-content", Durable, "the nonce in an object at an agreed key (a cache slot a build computes from its inputs); run B reads that key";
        ObjectMetadata = "object-metadata", Durable, "the nonce in the user metadata (x-amz-meta-*) of an object at an agreed key; run B heads it";
        ObjectTag = "object-tag", Durable, "the nonce in a tag of an object at an agreed key; run B reads its tags";
        MultipartUpload = "multipart-upload", Durable, "the nonce in the key of a multipart upload started and never completed (object listings do not show it); run B lists the uploads";
        ObjectVersion = "object-version", Durable, "in a bucket that keeps versions, the nonce in the key of an object written and deleted at once (a version and a delete marker no object listing shows); run B lists the versions";
    }
}

impl Obj {
    /// Whether the plant's key carries the nonce (else it is the agreed
    /// key, the same for both runs).
    fn keyed(self) -> bool {
        matches!(
            self,
            Obj::ObjectKey | Obj::MultipartUpload | Obj::ObjectVersion
        )
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    bucket: s3::Bucket,
    /// What both runs write under: "" or the configured prefix.
    prefix: String,
    /// None when a variable the config names is unset (`missing` says
    /// which).
    keys: Option<s3::Keys>,
    /// Which variables, for people.
    source: String,
    missing: Option<String>,
    /// How long a listing that does not show its witnesses is retried.
    #[serde(default = "super::listing::default_wait_ms")]
    consistency_wait_ms: u64,
    control: bool,
    /// `permanent: true`: versions the identity may not delete are
    /// planted all the same, and kept.
    #[serde(default)]
    permanent: bool,
}

/// What a journal entry names: an object or a multipart upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Object,
    Upload,
    /// An object written and deleted in a bucket that keeps versions: its
    /// version and its delete marker.
    Version,
}

/// One key run A writes under the prefix (`name`, the tagged name; the
/// prefix is the settings'): journalled before its write. Cleanup deletes
/// an object only while it holds what was put (`sha256`). An upload is
/// journalled before it starts, then again with the id S3 gave it
/// (`upload_id`), which cleanup aborts: a listing that lags cannot hide
/// it from cleanup then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    name: String,
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upload_id: Option<String>,
    /// A written and deleted object's version ids (its version, then its
    /// delete marker), as S3 gave them: cleanup deletes each by its id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    version_ids: Vec<String>,
}

impl Entry {
    fn object(name: &str, body: &[u8]) -> Entry {
        Entry {
            name: name.into(),
            kind: Kind::Object,
            sha256: Some(sha256_hex(body)),
            upload_id: None,
            version_ids: vec![],
        }
    }

    /// An upload of `name`: its id once S3 gave one.
    /// The versions of `name` written and deleted, with the ids known so
    /// far.
    fn version(name: &str, ids: &[String]) -> Entry {
        Entry {
            name: name.into(),
            kind: Kind::Version,
            sha256: None,
            upload_id: None,
            version_ids: ids.to_vec(),
        }
    }

    fn upload(name: &str, id: Option<&str>) -> Entry {
        Entry {
            name: name.into(),
            kind: Kind::Upload,
            sha256: None,
            upload_id: id.map(String::from),
            version_ids: vec![],
        }
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Kind::Object => write!(f, "object {}", escape::bytes(self.name.as_bytes())),
            Kind::Upload => write!(f, "upload {}", escape::bytes(self.name.as_bytes())),
            Kind::Version => write!(f, "versions of {}", escape::bytes(self.name.as_bytes())),
        }
    }
}

/// What an object holds when its key, metadata or tag is the carrier: no
/// nonce, the same for every object of a probe.
fn innocuous(probe_id: &str) -> Vec<u8> {
    format!("runwarden object-store plant, probe {probe_id}\n").into_bytes()
}

/// What the object-content carrier's object holds: the nonce.
fn with_nonce(probe_id: &str, nonce: &Nonce) -> Vec<u8> {
    format!(
        "runwarden object-store plant, probe {probe_id}\n{}\n",
        nonce.hex()
    )
    .into_bytes()
}

fn sha256_hex(data: &[u8]) -> String {
    crate::nonce::to_hex(&Sha256::digest(data))
}

/// The tagged name (under the prefix) of a carrier's plant.
fn plant_name(ctx: &RunCtx<'_>, carrier: Obj, nonce: &Nonce) -> String {
    super::tagged_name(ctx, carrier.name(), carrier.keyed().then_some(nonce), "")
}

/// What a witness object's metadata (`x-amz-meta-runwarden`) and tag
/// (`runwarden=`) hold: run B reads them back through the routes that
/// read a plant's metadata and tags.
const WITNESS: &str = "witness";

/// The witness names: objects for the object routes, uploads for the
/// upload listing.
const OBJECTS: &str = "objects";
const UPLOADS: &str = "uploads";
/// And objects written and deleted, for the version listing; and the
/// object run A writes and deletes by version first, to learn whether it
/// may delete versions.
const VERSIONS: &str = "versions";
const VERSION_CHECK: &str = "version-check";

/// An open bucket.
pub struct ObjectStore {
    settings: Settings,
    s3: Option<s3::S3>,
}

impl ObjectStore {
    /// The key of `name` under the prefix.
    fn key(&self, name: &str) -> String {
        format!("{}{name}", self.settings.prefix)
    }

    /// `s3://bucket/prefix`, escaped, for people.
    fn shown(&self) -> String {
        if self.settings.control {
            return "the control".into();
        }
        escape::bytes(
            format!(
                "s3://{}/{}",
                self.settings.bucket.bucket, self.settings.prefix
            )
            .as_bytes(),
        )
    }
}
