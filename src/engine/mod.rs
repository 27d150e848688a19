//! The probe engine: setup, plant (run A), recover (run B), verdicts,
//! cleanup.
//!
//! Runs A and B are separate child processes (the same binary, `__run`)
//! with disjoint work and temp directories under one probe directory, an
//! environment cut to PATH, HOME, TMPDIR and RUNWARDEN_RUN_ID, and no shell
//! anywhere. A has exited before B starts. Cleanup runs with A's identity:
//! in B's process once B has recovered everything (when B has A's
//! identity), else, and for what that did not finish, in a third child run.
//! Every child has a timeout (each phase its own), so no surface operation
//! can hang the probe. Cleanup always runs, also after SIGINT/SIGTERM or a child that
//! died; one broken surface never stops the others.

mod assemble;
mod child_run;
mod modes;
mod pipes;
mod runner;
mod setup;

pub use modes::{cleanup, plant, probe, recover};

use crate::child::Target;
use crate::marker::Key;
use crate::nonce::Nonce;
use crate::report::Runs;
use crate::surface::{
    self, CleanupOutcome, Instance, JobScope, Notice, PlantOutcome, RecoverOutcome,
};
use crate::verdict::Evidence;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a probe runs (from the command line, not the config).
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Where the probe directory is made; default: the system temp dir.
    pub work_dir: Option<PathBuf>,
    /// Run B as this uid and gid (needs root): two users on one host.
    pub run_b_as: Option<(u32, u32)>,
    /// Longest a run (A or B) may take before it is killed.
    pub phase_timeout: Duration,
    /// Signs beacons and derives cross-job nonces.
    pub key: Key,
    /// `recover`: accept that no receipt shows a carrier was planted
    /// (finding nothing is then SKIPPED, not ERROR).
    pub allow_missing_receipt: bool,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            work_dir: None,
            run_b_as: None,
            phase_timeout: Duration::from_secs(300),
            key: Key::new(None),
            allow_missing_receipt: false,
        }
    }
}

/// Why a probe could not run at all (exit code 2).
#[derive(Debug)]
pub struct EngineError(pub String);

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One instance the runs work on: a configured surface or its control.
struct Inst {
    surface: usize,
    /// The surface's configured name (its plants' names carry a tag of it).
    name: String,
    control: bool,
    type_name: &'static str,
    settings: Value,
    opened: Option<Box<dyn Instance>>,
}

impl Inst {
    /// This instance as a run's target, with nothing yet to plant or recover.
    fn target(&self, id: usize) -> Target {
        Target {
            id,
            surface: self.name.clone(),
            type_name: self.type_name.into(),
            settings: self.settings.clone(),
            plant: vec![],
            recover: vec![],
            cleanup: vec![],
            find: vec![],
            control_of: None,
            control: self.control,
        }
    }
}

/// Per (surface, carrier) while the probe runs; a carrier declared with a
/// scope has two slots, one planted inside the scope and one outside.
struct Slot {
    surface: usize,
    carrier: &'static surface::Carrier,
    /// `surface:carrier`.
    channel: String,
    /// Where the channel is declared, when it is (and this slot is inside
    /// the declaration).
    declared_at: Option<crate::config::Pos>,
    /// Unique within the surface: the carrier, or `carrier@inside` /
    /// `carrier@outside`.
    key: String,
    scope: Option<JobScope>,
    nonce: Nonce,
    control_nonce: Nonce,
    /// For runner-persistence: the signed beacons to plant.
    beacon: Option<String>,
    control_beacon: Option<String>,
    /// The instance's own persistence, when it knows better than the
    /// carrier's default (see `Instance::persistence`).
    persistence: Option<surface::Persistence>,
    evidence: Evidence,
}

/// What one child run reported.
#[derive(Default)]
struct RunResult {
    created: Vec<(usize, Value)>,
    planted: HashMap<(usize, String), PlantOutcome>,
    recovered: HashMap<(usize, String), RecoverOutcome>,
    cleaned: HashMap<(usize, usize), CleanupOutcome>,
    /// The first [`MAX_NOTICES`] notices of each instance.
    notices: Vec<(usize, Notice)>,
    /// How many notices each instance sent in all.
    notice_counts: std::collections::BTreeMap<usize, usize>,
    /// Instances that could not look for a probe's plants, and why.
    find_failed: Vec<(usize, String)>,
    /// What `find` saw under a plant's name that is not runwarden's:
    /// (instance, entry shown, why it stays).
    found_left: Vec<(usize, String, String)>,
    /// Set when the run did not finish normally.
    problem: Option<String>,
    /// For a run with a second phase (B, then cleanup): its first phase
    /// was done before anything went wrong, so `problem` is the second's.
    first_phase_done: bool,
}

/// The probe's private directory: `a` and `b` for the runs (0700 each, B's
/// owned by B's user), `control` for the control instances (0755), under a
/// directory run B can traverse (0711). Removed when dropped.
struct Workspace {
    root: PathBuf,
    a: PathBuf,
    b: PathBuf,
    control: PathBuf,
    /// `root/lock`, locked for as long as the probe lives: a directory of
    /// this form whose lock anyone can take is a dead probe's
    /// ([`setup::sweep`]).
    _lock: std::fs::File,
}

/// Where nonces come from: fresh random ones for an in-job probe, or
/// derived from the key and probe id, so a later job can recompute them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Nonces {
    /// Fresh ones: an in-job probe (runs A and B in this job).
    Random,
    Derived,
}

/// Every instance and slot of one plan.
struct Setup {
    insts: Vec<Inst>,
    /// What the controls need alive (loopback services) until the probe
    /// ends.
    _keep: Vec<Box<dyn std::any::Any>>,
    slots: Vec<Slot>,
}

/// What the runs share: the binary, the workspace and the ids.
struct Runner<'a> {
    exe: PathBuf,
    ws: &'a Workspace,
    probe_id: &'a str,
    runs: &'a Runs,
    opts: &'a ProbeOptions,
}

/// Who a child run is: its role, its own directory (HOME, cwd, TMPDIR
/// below it), its run id, and the user it runs as.
struct Run<'a> {
    role: &'static str,
    dir: &'a Path,
    id: &'a str,
    as_user: Option<(u32, u32)>,
    /// Whether SIGINT/SIGTERM stops it. Cleanup is not: it is what a
    /// signal must still get, bounded by the timeout alone.
    interruptible: bool,
}

/// Notices kept per surface (kept as they arrive, so memory stays bounded
/// however many a hostile directory holds): 10,000 forged markers are
/// worth a count in a report, not 10,000 entries.
pub const MAX_NOTICES: usize = 100;

/// How far a run has got, for whoever shows progress (the command line on
/// a terminal). The engine only reports it; it prints nothing itself.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// A run (`"A"`, `"B"`, `"cleanup"`) started with this much to do.
    Started {
        role: &'static str,
        total: usize,
    },
    /// One more carrier planted or recovered, or entry cleaned.
    Step {
        role: &'static str,
        done: usize,
        total: usize,
    },
    Finished {
        role: &'static str,
    },
}

type ProgressSink = Box<dyn Fn(&Progress) + Send + Sync>;

static PROGRESS: std::sync::OnceLock<ProgressSink> = std::sync::OnceLock::new();

/// Sets where progress goes (once per process; by default nowhere).
pub fn set_progress(sink: ProgressSink) {
    let _ = PROGRESS.set(sink);
}

fn progress(p: &Progress) {
    if let Some(sink) = PROGRESS.get() {
        sink(p);
    }
}
