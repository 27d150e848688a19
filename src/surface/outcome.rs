//! What surfaces and the engine share: how long a carrier lasts, a
//! carrier's row, what one plant, recovery and cleanup came to, a job to
//! plant and a needle to recover, a declared scope, and what recovery
//! noticed besides. Below both: the engine reads them, surfaces make them.

use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long a message put in a carrier can last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// Until someone removes it.
    Durable,
    /// Lost at a boundary the surface defines (a reboot, a job end).
    Transient,
    /// Until garbage collection.
    UntilGc,
    /// Until an eviction policy drops it.
    UntilEvicted,
    Unknown,
}

impl Persistence {
    pub fn as_str(self) -> &'static str {
        match self {
            Persistence::Durable => "durable",
            Persistence::Transient => "transient",
            Persistence::UntilGc => "until-gc",
            Persistence::UntilEvicted => "until-evicted",
            Persistence::Unknown => "unknown",
        }
    }
}

/// One way a surface can carry a message. `name` is the stable, kebab-case
/// carrier id: the same string in config, JSON, SARIF and docs anchors.
#[derive(Debug)]
pub struct Carrier {
    pub name: &'static str,
    pub persistence: Persistence,
    pub description: &'static str,
}

/// Something recovery saw that is not a recovery but is worth telling: a
/// beacon of another probe, or a marker in runwarden's form that does not
/// verify (forged, altered, or signed with another key). Surface data:
/// `entry` and `detail` are already escaped.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub entry: String,
    pub detail: String,
    /// For beacons: what the beacon says (escaped when printed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<crate::marker::BeaconBody>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// A valid beacon of another probe id: counted for runner-persistence.
    Beacon,
    /// A well-formed beacon whose MAC does not verify with this run's key.
    UnverifiedBeacon,
    /// A file named like a beacon that is not one.
    MalformedBeacon,
    /// A name in runwarden's marker form for this probe id whose nonce no
    /// plant with this key made.
    ForgedMarker,
    /// Not from a surface: the report's line saying how many more notices
    /// there were than it lists.
    Omitted,
}

impl NoticeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Beacon => "beacon",
            NoticeKind::UnverifiedBeacon => "unverified-beacon",
            NoticeKind::MalformedBeacon => "malformed-beacon",
            NoticeKind::ForgedMarker => "forged-marker",
            NoticeKind::Omitted => "omitted",
        }
    }
}

/// What planting one carrier did. `N` is the needle's type: a typed
/// surface's own ([`super::Surface::Needle`]), JSON for the engine.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PlantOutcome<N = Value> {
    /// Planted. `needle` is what recovery must look for (for most carriers
    /// the nonce itself; for numeric carriers the value the surface really
    /// stored). `persistence` overrides the carrier's default when the
    /// instance knows better (e.g. a directory on tmpfs).
    Planted {
        needle: N,
        persistence: Option<Persistence>,
        detail: String,
    },
    /// The surface's own access control refused the write.
    Refused { reason: String },
    /// This carrier cannot exist here (e.g. no user xattrs on this fs).
    Unsupported { reason: String },
    /// Something broke: the carrier's verdict is ERROR. (Not `Verdict::Fail`,
    /// which is an open channel; `failed` on the wire, as 0.11.0 wrote it.)
    #[serde(rename = "failed")]
    Error { reason: String },
}

impl<N> PlantOutcome<N> {
    /// The same outcome with its needle (if planted) made another type.
    pub fn map_needle<M>(self, f: impl FnOnce(N) -> M) -> PlantOutcome<M> {
        match self {
            PlantOutcome::Planted {
                needle,
                persistence,
                detail,
            } => PlantOutcome::Planted {
                needle: f(needle),
                persistence,
                detail,
            },
            PlantOutcome::Refused { reason } => PlantOutcome::Refused { reason },
            PlantOutcome::Unsupported { reason } => PlantOutcome::Unsupported { reason },
            PlantOutcome::Error { reason } => PlantOutcome::Error { reason },
        }
    }
}

/// What recovering one carrier found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RecoverOutcome {
    Found {
        detail: String,
    },
    /// Recovery ran over everything it could see and found nothing.
    NotFound {
        detail: String,
    },
    /// The surface's access control kept run B out.
    Denied {
        reason: String,
    },
    /// Something broke: the carrier's verdict is ERROR (`failed` on the
    /// wire, as 0.11.0 wrote it).
    #[serde(rename = "failed")]
    Error {
        reason: String,
    },
}

/// One carrier to plant. `key` tells apart two plants of one carrier (inside
/// and outside a declared scope).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlantJob {
    pub key: String,
    pub carrier: String,
    pub nonce: Nonce,
    #[serde(default)]
    pub scope: Option<JobScope>,
    /// For [`super::RUNNER_PERSISTENCE`]: the signed beacon to leave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beacon: Option<String>,
}

/// Plant inside or outside a declared scope (see `plan::Scope`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JobScope {
    pub key: String,
    pub value: String,
    pub inside: bool,
}

impl JobScope {
    /// A name placed by this scope: inside, the pattern with its `*` taken
    /// by `name`; outside, `name` itself (runwarden's own, which a valid
    /// scope does not cover).
    pub fn place(&self, name: &str) -> String {
        if self.inside {
            self.value.replacen('*', name, 1)
        } else {
            name.to_string()
        }
    }

    /// What the pattern's `*` stands for in `placed`, inside the scope.
    pub fn unplace<'n>(&self, placed: &'n str) -> Option<&'n str> {
        if !self.inside {
            return Some(placed);
        }
        let (pre, post) = self.value.split_once('*')?;
        (placed.len() >= pre.len() + post.len())
            .then(|| placed.strip_prefix(pre)?.strip_suffix(post))
            .flatten()
    }
}

/// Whether `name` matches `pattern`, whose one `*` stands for any string.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        Some((pre, post)) => {
            name.len() >= pre.len() + post.len() && name.starts_with(pre) && name.ends_with(post)
        }
        None => pattern == name,
    }
}

/// One carrier to recover, with what its plant said to look for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Wanted {
    pub key: String,
    pub carrier: String,
    pub needle: Value,
    /// The scope the plant was placed by, for carriers whose agreed name
    /// it changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<JobScope>,
}

/// What cleanup did with one planted entry.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CleanupOutcome {
    /// Removed by this cleanup.
    Removed,
    /// Not there (never created, or removed by someone else); nothing to
    /// do.
    Gone,
    /// A journal line that is no entry of its own: a retraction, an entry
    /// a retraction took back (its write was refused or failed, or run A
    /// removed it itself), or an intent whose entry was then recorded in
    /// full. Nothing to do, and not counted.
    Superseded,
    /// Left in place, with the reason (changed since planted, not empty…).
    Left { reason: String },
    /// Left in place on purpose: nothing can remove it and the operator
    /// accepted that when asking for it to be planted (`permanent: true`).
    /// Listed, but it does not fail the run.
    Kept { reason: String },
    /// Not runwarden's: the entry does not have the form only this probe's
    /// plant makes ([`super::Instance::owns`]), or what it names was not what the
    /// plant made when read back. Left alone, never counted as removed;
    /// listed, and it fails the run (a journal that names something
    /// foreign was edited).
    Foreign { reason: String },
}
