//! Surfaces: the shared things two runs can both reach.
//!
//! Every surface type is one folder here (`src/surface/<type>/`) whose
//! instance type implements the one typed trait [`Surface`], and one line
//! of [`REGISTRY`] (`&Typed::<folder::Type>::TYPE`). The trait is small:
//! what the type is (consts: its name, keys, scopes, watch support; its
//! carrier enum from `carriers!`, its settings, journal entry and
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
pub mod build_cache;
pub mod carrier;
pub mod docker_daemon;
mod erased;
pub mod filesystem;
pub mod git_remote;
pub mod github_api;
pub mod http_cache;
pub mod listing;
pub mod network_egress;
pub mod npm_registry;
pub mod object_store;
pub mod oci_registry;
mod outcome;
mod owned;
pub mod pypi_index;
pub mod routes;
mod typed;
pub mod witness;

use crate::marker::Key;

pub use adapter::Typed;
pub use auth::{HttpAuth, env_name};
pub use erased::{Instance, SurfaceType, Watchable};
pub use outcome::{
    Carrier, CleanupOutcome, JobScope, Notice, NoticeKind, Persistence, PlantJob, PlantOutcome,
    RecoverOutcome, Wanted, glob_match,
};
pub use owned::{
    cleanup_owned, lower_hex, owned_name, plain_ref, plain_segment, retraction, tagged_carrier,
    tagged_name,
};
pub use typed::{
    About, Control, Found, Job, Journal, Needle, NonceOrBeacons, Scope, Surface, Want, Watch,
    between, each,
};

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
    &Typed::<object_store::ObjectStore>::TYPE,
    &Typed::<build_cache::BuildCache>::TYPE,
];

/// Why an in-job probe skips a [`SurfaceType::later_job_only`] carrier.
pub const LATER_JOB_ONLY: &str = "run A and run B share this job in a probe, and this carrier is \
     a trace of run A's job that run B can read only from a later job or run: plant, then \
     recover in a later job";

/// Finds a surface type by its config name.
pub fn by_name(name: &str) -> Option<&'static dyn SurfaceType> {
    REGISTRY.iter().copied().find(|t| t.name() == name)
}

/// What every run knows: the probe id (in every planted name, so a killed
/// probe's leftovers are identifiable), the marker key (to verify the
/// beacons recovery finds), and the configured name of the surface it
/// works on (its [`RunCtx::surface_tag`] keeps two surfaces that are one
/// place under two names from planting the same names).
pub struct RunCtx<'a> {
    pub probe_id: &'a str,
    pub key: &'a Key,
    pub surface: &'a str,
}

impl RunCtx<'_> {
    /// A short tag of the surface's configured name (8 lowercase hex
    /// digits, valid in every store's names): both runs derive it from the
    /// config, and two surfaces never share it but by a hash collision of
    /// 32 bits between their names, which a config cannot make by chance.
    /// Empty for a run that names no surface (a test's, 0.11.0's form).
    //
    // Why a hash and not the name: names are the user's text (any length,
    // any character), and every store has its own naming rules.
    pub fn surface_tag(&self) -> String {
        if self.surface.is_empty() {
            return String::new();
        }
        let digest = <sha2::Sha256 as sha2::Digest>::digest(
            format!("runwarden-surface/1\0{}", self.surface).as_bytes(),
        );
        crate::nonce::to_hex(&digest[..4])
    }
}

/// The outcome of a carrier run A did not start because a signal asked
/// it to stop.
pub fn interrupted<N>(sig: &str) -> PlantOutcome<N> {
    PlantOutcome::Error {
        reason: format!("run A stopped on {sig} before planting this carrier"),
    }
}

/// One outcome per wanted carrier, in order; a slot nothing filled was not
/// a carrier of the surface.
pub fn all_outcomes(out: Vec<Option<RecoverOutcome>>) -> Vec<RecoverOutcome> {
    out.into_iter()
        .map(|o| o.unwrap_or_else(carrier::not_a_carrier))
        .collect()
}

/// The carrier every surface type may offer whose plant is a signed beacon
/// ([`crate::marker`]) and whose recovery finds beacons of OTHER probes:
/// proof that the surface kept state from an earlier job.
pub const RUNNER_PERSISTENCE: &str = "runner-persistence";
