//! The engine's view of a surface type: [`SurfaceType`] (a type, by its
//! config name), [`Instance`] (an open instance) and [`Watchable`] (its
//! state, for watch mode), over the JSON the engine, the child runs and
//! the receipt speak. The kernel's adapter ([`super::Typed`]) implements
//! them once for every typed [`super::Surface`]; nothing else does, so
//! what each method means is written where the typed trait asks it of a
//! surface type (`typed.rs`) and where the adapter answers it
//! (`adapter.rs`).

use super::{
    Carrier, CleanupOutcome, Control, JobScope, Notice, Persistence, PlantJob, PlantOutcome,
    RecoverOutcome, RunCtx, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use serde_json::Value;
use std::path::Path;

/// A surface type, as the registry lists it: its config keys, carriers and
/// settings, what the settings say, and how to open instances.
pub trait SurfaceType: Sync {
    /// The `type:` value in the config.
    fn name(&self) -> &'static str;
    /// One line for `runwarden carriers`.
    fn description(&self) -> &'static str;
    fn carriers(&self) -> &'static [Carrier];
    /// Whether `carrier` can only be read by a run B in a later job than
    /// run A's: an in-job probe SKIPS it with [`super::LATER_JOB_ONLY`].
    fn later_job_only(&self, carrier: &str) -> bool;
    /// The config keys this type takes (besides `name` and `type`); any
    /// other key is an error before [`SurfaceType::validate`] runs.
    fn keys(&self) -> &'static [&'static str];
    /// Keys a declaration of this type's channels may use to scope it.
    fn scope_keys(&self) -> Vec<&'static str>;
    /// Checks a declaration's scope (`key: value`) for one carrier.
    fn check_scope(&self, carrier: &str, key: &str, value: &str) -> Result<(), Fault>;
    /// The settings of a config entry, as every later step receives them.
    fn validate(&self, opts: Options<'_>) -> Result<Value, ConfigError>;
    /// A known-open control instance under `dir`, like `settings` where
    /// the type's control takes after them.
    fn control(&self, settings: &Value, dir: &Path) -> Result<Control, Fault>;
    /// What `check-config` warns of (already escaped).
    /// Why a credential the config names is missing here, if it is
    /// ([`super::About::secret_missing`]).
    fn secret_missing(&self, settings: &Value) -> Option<String>;
    fn warnings(&self, settings: &Value) -> Vec<String>;
    /// What the report says of an instance besides its carriers (escaped).
    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)>;
    /// What a channel of `carrier` tests, as coverage names exposures
    /// (docs/coverage.md).
    fn exposures(&self, settings: &Value, carrier: &str) -> Vec<String>;
    /// An open instance.
    fn open(&self, settings: &Value) -> Result<Box<dyn Instance>, Fault>;
    /// Run B's declared routes, each by name with the carriers it reads
    /// (empty for a type that declares none yet): what the conformance
    /// suite checks covers every carrier.
    fn routes(&self) -> Vec<(&'static str, Vec<&'static str>)>;
    /// The needle a plant of `carrier` would report, without a receipt.
    fn derive_needle(
        &self,
        carrier: &str,
        ctx: &RunCtx<'_>,
        nonce: &Nonce,
        scope: Option<&JobScope>,
    ) -> Result<Value, Fault>;
}

/// An open instance of a surface.
pub trait Instance {
    /// `Some(reason)` when this instance's settings rule the carrier out:
    /// it is not planted and is SKIPPED.
    fn unavailable(&self, carrier: &str) -> Option<String>;
    /// What this instance is, when two configured surfaces can name one
    /// thing: the engine probes each thing once.
    fn identity(&self) -> Option<String>;
    /// How long anything put here lasts, when the instance knows better
    /// than its carriers' defaults.
    fn persistence(&self) -> Option<Persistence>;
    /// Plants every job; one outcome per job, in order. Every entry is
    /// handed to `created` before the write that creates it.
    fn plant_all(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
        created: &mut dyn FnMut(Value),
    ) -> Vec<PlantOutcome>;
    /// Looks for every wanted needle; one outcome per wanted carrier.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome>;
    /// What a plant of `jobs` (derived nonces) left here, as journal
    /// entries: cleanup by probe id; and what sits under a plant's name
    /// that is not runwarden's (shown, with why it stays).
    fn find_planted(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
    ) -> Result<super::Found<Value>, Fault>;
    /// Whether `entry` is provably this probe's own (`Invalid` if not).
    /// [`super::cleanup_owned`] asks it of every entry before any removal.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault>;
    /// Cleans up a journal (newest first); one outcome per entry. Only
    /// through [`super::cleanup_owned`], which checks ownership first.
    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome>;
    /// Names an entry for people (already escaped).
    fn describe(&self, entry: &Value) -> String;
    /// How watch mode looks at this instance, or why it cannot.
    fn watch(&self) -> Result<&dyn Watchable, &'static str>;

    /// [`Instance::plant_all`] of one job.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        self.plant_all(ctx, std::slice::from_ref(job), created)
            .remove(0)
    }

    /// [`Instance::cleanup_all`] of one entry.
    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.cleanup_all(std::slice::from_ref(entry)).remove(0)
    }
}

/// What watch mode needs of a surface: its state at one moment, streamed,
/// and which carriers a change of it would carry.
pub trait Watchable {
    /// Streams everything run B's listing would see here, in
    /// [`crate::state::snapshot::key_order`], to `sink`.
    fn snapshot(&self, ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError>;
    /// The carriers a change the watched command made here would carry.
    fn carriers_of(&self, change: &Change, before: &Before) -> Vec<&'static str>;
    /// Why a snapshot cannot see what this carrier carries, for carriers
    /// it cannot (SKIPPED in watch mode with the reason).
    fn unwatched(&self, carrier: &str) -> Option<&'static str>;
    /// The key a snapshot gives `path` (runwarden's own files, whose
    /// parents' times change by its doing), when it lies here.
    fn key_of(&self, path: &Path) -> Option<Vec<String>>;
}
