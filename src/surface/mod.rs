//! Surfaces: the shared things two runs can both reach.
//!
//! Every surface type is one folder here (`src/surface/<type>/`) whose
//! instance type implements the one typed trait [`Surface`], and one line
//! of [`REGISTRY`] (`&Typed::<folder::Type>::TYPE`). The trait is small:
//! what the type is (consts: its name, keys, scopes, watch support; its
//! carrier enum from [`carrier::carriers`], its settings, journal entry and
//! needle types), how its config becomes settings, what those settings
//! say ([`About`]), its known-open control, and its plant, recovery,
//! ownership rule and cleanup; cleanup by probe id, a needle derived
//! without a receipt and watch mode where the type has them.
//!
//! The kernel does the rest, the same for every type: the adapter
//! ([`Typed`]) implements the engine's JSON view of a type ([`SurfaceType`],
//! [`Instance`], [`Watchable`]), parses carriers and needles, refuses a
//! journal line that does not parse as the type's entry before any removal
//! ([`cleanup_owned`]), sets aside retractions, words descriptions and
//! stops run A between carriers on a signal; and the conformance suite
//! (tests/surface/conformance.rs) runs every registered type against its
//! control, with hostile journals made from its own entries. Surfaces
//! report outcomes; they never format output and never decide verdicts
//! (`src/verdict.rs` does). docs/contributing.md walks through adding one.

pub mod actions_artifacts;
pub mod actions_cache;
mod adapter;
mod auth;
pub mod beacon;
pub mod carrier;
pub mod docker_daemon;
pub mod filesystem;
pub mod git_remote;
pub mod github_api;
pub mod http_cache;
pub mod listing;
pub mod network_egress;
pub mod npm_registry;
pub mod oci_registry;
mod owned;
pub mod pypi_index;
mod typed;

use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::marker::Key;
use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

pub use adapter::Typed;
pub use auth::{HttpAuth, env_name};
pub use owned::{
    cleanup_owned, cleanup_unretracted, lower_hex, owned_name, plain_ref, plain_segment,
    retraction, tagged_carrier, tagged_name,
};
pub use typed::{About, Control, Job, Journal, Needle, Scope, Surface, Want, Watch, each};

/// Every surface type runwarden knows, in the order `carriers` lists them.
pub static REGISTRY: &[&dyn SurfaceType] = &[
    &Typed::<filesystem::Filesystem>::TYPE,
    &Typed::<git_remote::GitRemote>::TYPE,
    &Typed::<actions_cache::ActionsCache>::TYPE,
    &Typed::<actions_artifacts::ActionsArtifacts>::TYPE,
    &Typed::<github_api::GitHubApi>::TYPE,
    &Typed::<http_cache::HttpCache>::TYPE,
    &Typed::<npm_registry::NpmRegistry>::TYPE,
    &Typed::<pypi_index::PypiIndex>::TYPE,
    &Typed::<docker_daemon::DockerDaemon>::TYPE,
    &Typed::<oci_registry::OciRegistry>::TYPE,
    &Typed::<network_egress::NetworkEgress>::TYPE,
];

/// Why an in-job probe skips a [`SurfaceType::later_job_only`] carrier.
pub const LATER_JOB_ONLY: &str = "run A and run B share this job in a probe, and this carrier is \
     a trace of run A's job that run B can read only from a later job or run: plant, then \
     recover in a later job";

/// Finds a surface type by its config name.
pub fn by_name(name: &str) -> Option<&'static dyn SurfaceType> {
    REGISTRY.iter().copied().find(|t| t.name() == name)
}

/// How coverage hands a surface the environment: a variable's value.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

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

/// A surface type: config keys, carriers, and how to open instances.
pub trait SurfaceType: Sync {
    /// The `type:` value in the config.
    fn name(&self) -> &'static str;
    /// One line for `runwarden carriers`.
    fn description(&self) -> &'static str;
    fn carriers(&self) -> &'static [Carrier];
    /// Whether `carrier` can only be read by a run B in a later job than
    /// run A's (a trace the job leaves in its own run): an in-job probe
    /// SKIPS it with [`LATER_JOB_ONLY`]. None by default.
    fn later_job_only(&self, _carrier: &str) -> bool {
        false
    }
    /// The config keys this type takes (besides `name` and `type`); any
    /// other key is an error before [`SurfaceType::validate`] runs.
    fn keys(&self) -> &'static [&'static str];
    /// Keys a declaration of this type's channels may use to scope it
    /// (none by default).
    fn scope_keys(&self) -> Vec<&'static str> {
        vec![]
    }
    /// Checks a declaration's scope for one carrier: that the carrier can
    /// be planted both inside and outside it. `Invalid` for a scope the
    /// type refuses.
    fn check_scope(&self, carrier: &str, key: &str, _value: &str) -> Result<(), Fault> {
        Err(Fault::invalid(format!(
            "carrier {carrier} cannot be scoped by `{key}`"
        )))
    }
    /// Takes this type's keys from a config entry and returns the settings
    /// every later step receives (serialized, so runs A and B get them too).
    fn validate(&self, opts: Options<'_>) -> Result<Value, ConfigError>;
    /// Makes a control instance under `dir` (a fresh directory the probe
    /// owns) that is known to be open. The same plant and recovery code
    /// runs on it; a PASS counts only if the control was recovered.
    /// `Invalid` for settings it cannot take, `Broken` (or `Unreachable`)
    /// when what serves the control cannot be set up.
    fn control(&self, settings: &Value, dir: &Path) -> Result<Control, Fault>;
    /// Warnings `check-config` prints about a valid entry: something that
    /// will not work here but may where the probe runs (a path that exists
    /// only on the runner). Already escaped.
    fn warnings(&self, _settings: &Value) -> Vec<String> {
        vec![]
    }
    /// What the report should say about an instance besides its carriers:
    /// which credential it uses and what that credential claims, by name
    /// and claim, never its value. Already escaped.
    fn facts(&self, _settings: &Value) -> Vec<(&'static str, String)> {
        vec![]
    }
    /// What a channel of `carrier` on this instance tests, as coverage
    /// names the environment's exposures (docs/coverage.md):
    /// `permission:<key>` for the `GITHUB_TOKEN` permission its plant
    /// writes with, `registry:<origin>`, `path:<path>`, `runner-persistence`
    /// and the like. A `permission:` exposure is claimed only when the
    /// plant writes with the job's own token to the job's own repository
    /// (`env` is the environment coverage reads). Coverage counts an
    /// exposure tested only by a channel that ran (PASS, FAIL or
    /// AUTHORIZED). Default: none, so a new surface type claims nothing it
    /// was not written to claim.
    fn exposures(&self, _settings: &Value, _carrier: &str, _env: Env<'_>) -> Vec<String> {
        vec![]
    }
    /// Opens an instance from settings `validate` or `control` produced.
    /// `Invalid` for settings it cannot take (never `Unsupported`: watch
    /// mode would take that for a surface it may skip).
    fn open(&self, settings: &Value) -> Result<Box<dyn Instance>, Fault>;
    /// The needle a plant of `carrier` with `nonce` would report, computed
    /// without planting: what a `recover` in a later job looks for when it
    /// has no plant receipt. `Unsupported` for a carrier whose needle
    /// depends on what the plant really stored.
    ///
    /// By default the needle is the nonce itself (its hex form), which is
    /// what every carrier of the network surfaces plants.
    fn derive_needle(
        &self,
        _carrier: &str,
        _probe_id: &str,
        nonce: &Nonce,
        _scope: Option<&JobScope>,
    ) -> Result<Value, Fault> {
        Ok(Value::String(nonce.hex()))
    }
}

/// What every run knows: the probe id (in every planted name, so a killed
/// probe's leftovers are identifiable) and the marker key (to verify the
/// beacons recovery finds).
pub struct RunCtx<'a> {
    pub probe_id: &'a str,
    pub key: &'a Key,
}

/// The outcome of a carrier run A did not start because a signal asked
/// it to stop.
pub fn interrupted<N>(sig: &str) -> PlantOutcome<N> {
    PlantOutcome::Error {
        reason: format!("run A stopped on {sig} before planting this carrier"),
    }
}

/// The nonce a wanted needle is (the network surfaces plant the nonce
/// itself: see [`SurfaceType::derive_needle`]).
pub fn wanted_nonce(w: &Wanted) -> Result<Nonce, RecoverOutcome> {
    serde_json::from_value(w.needle.clone()).map_err(|_| RecoverOutcome::Error {
        reason: "the plant's needle is not a nonce".into(),
    })
}

/// One outcome per wanted carrier, in order; a slot nothing filled was not
/// a carrier of the surface.
pub fn all_outcomes(out: Vec<Option<RecoverOutcome>>) -> Vec<RecoverOutcome> {
    out.into_iter()
        .map(|o| o.unwrap_or_else(carrier::not_a_carrier))
        .collect()
}

pub use crate::wire::string_array;

/// The carrier every surface type may offer whose plant is a signed beacon
/// ([`crate::marker`]) and whose recovery finds beacons of OTHER probes:
/// proof that the surface kept state from an earlier job.
pub const RUNNER_PERSISTENCE: &str = "runner-persistence";

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
/// surface's own ([`Surface::Needle`]), JSON for the engine.
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
    /// For [`RUNNER_PERSISTENCE`]: the signed beacon to leave.
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
    /// plant makes ([`Instance::owns`]), or what it names was not what the
    /// plant made when read back. Left alone, never counted as removed;
    /// listed, and it fails the run (a journal that names something
    /// foreign was edited).
    Foreign { reason: String },
}

/// An open instance of a surface.
pub trait Instance {
    /// `Some(reason)` when this instance's settings rule the carrier out
    /// (e.g. `content-reads: false`): it is not planted and is SKIPPED.
    fn unavailable(&self, carrier: &str) -> Option<String>;
    /// What this instance is, when two configured surfaces can name the
    /// same thing by different names (a directory through a bind mount or a
    /// symlink, one remote by two spellings): the engine probes each thing
    /// once, under the first name, and says so for the others. `None`: no
    /// two instances of this type can be the same.
    fn identity(&self) -> Option<String> {
        None
    }
    /// How long anything put here lasts, when the instance knows better
    /// than its carriers' defaults (a directory on tmpfs: until reboot).
    /// It belongs to the instance: every finding of it says the same,
    /// whatever its verdict.
    fn persistence(&self) -> Option<Persistence> {
        None
    }
    /// Plants `nonce` through one carrier only. Every entry created is
    /// passed to `created` before anything else happens, so that cleanup
    /// can find it even if the process dies right after.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome;
    /// Plants every carrier, each with its own nonce; one outcome per
    /// carrier, in order. Surfaces where a write is a round trip (a push)
    /// override this to write everything at once.
    fn plant_all(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
        created: &mut dyn FnMut(Value),
    ) -> Vec<PlantOutcome> {
        // A signal stops run A between carriers: the one under way is
        // finished (a few syscalls or one request), no new one starts.
        jobs.iter()
            .map(|j| match crate::signals::received() {
                Some(sig) => interrupted(sig),
                None => self.plant(ctx, j, created),
            })
            .collect()
    }
    /// Looks for every wanted needle in one streaming pass; returns one
    /// outcome per wanted carrier, in order. Markers that do not verify and
    /// beacons of other probes go to `notice`.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome>;
    /// Finds what a plant of `jobs` (nonces derived from the probe id and
    /// key) left here, as journal entries [`Instance::cleanup_all`] takes:
    /// cleanup by probe id, for a plant whose receipt is lost (killed
    /// halfway, or another job's). Only entries that carry their job's
    /// derived name or nonce are returned. `Unsupported` for a type that
    /// cannot look (by default).
    fn find_planted(&self, _ctx: &RunCtx<'_>, _jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        Err(Fault::unsupported(
            "this surface type cannot find plants by probe id; use the receipt",
        ))
    }
    /// Whether `entry` is provably this probe's own: it has the form only
    /// a plant of `ctx.probe_id` makes (the derived name with its tag, a
    /// path that stays in the probed directory), so a journal entry
    /// someone wrote into a receipt names nothing foreign. `Invalid` for
    /// anything else (not provably ours). The engine asks this of every entry (and of what a
    /// retraction takes back) before [`Instance::cleanup_all`] sees it
    /// ([`cleanup_owned`]); what a surface reads back before a removal
    /// (the marker, the planted content) it checks in `cleanup` itself.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault>;
    /// Removes one entry `plant` reported through `created`, after checking
    /// it is still the one planted.
    fn cleanup(&self, entry: &Value) -> CleanupOutcome;
    /// Cleans up every entry (newest first); one outcome per entry. The
    /// journal is the surface's own: an entry may also retract an earlier
    /// one that turned out not to exist.
    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        cleanup_unretracted(entries, |e| self.cleanup(e))
    }
    /// Names an entry for people (already escaped).
    fn describe(&self, entry: &Value) -> String;
    /// Watch mode (`runwarden watch`): how this instance is looked at, or
    /// why it cannot be (every carrier is then SKIPPED with the reason).
    fn watch(&self) -> Result<&dyn Watchable, &'static str> {
        Err("watch mode cannot list this surface type yet")
    }
}

/// What watch mode needs of a surface: its state at one moment, streamed,
/// and which carriers a change of it would carry. Each type implements it
/// in its own `watch.rs`.
pub trait Watchable {
    /// Streams everything run B's listing would see here, in
    /// [`crate::state::snapshot::key_order`], to `sink`.
    fn snapshot(
        &self,
        ctx: &crate::state::snapshot::WatchCtx,
        sink: &mut crate::state::snapshot::Sink<'_>,
    ) -> Result<(), crate::state::snapshot::SnapshotError>;
    /// The carriers a change the watched command made here would carry.
    fn carriers_of(
        &self,
        change: &crate::state::diff::Change,
        before: &crate::state::diff::Before,
    ) -> Vec<&'static str>;
    /// Why a snapshot cannot see what this carrier carries, for carriers
    /// it cannot (SKIPPED in watch mode with the reason).
    fn unwatched(&self, _carrier: &str) -> Option<&'static str> {
        None
    }
    /// The key a snapshot gives `path` (runwarden's own files, whose
    /// parents' times change by its doing), when it lies here.
    fn key_of(&self, _path: &Path) -> Option<Vec<String>> {
        None
    }
}
