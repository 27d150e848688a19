//! The probe engine: setup, plant (run A), recover (run B), verdicts,
//! cleanup.
//!
//! Runs A and B are separate child processes (the same binary, `__run`)
//! with disjoint work and temp directories under one probe directory, an
//! environment cut to PATH, HOME, TMPDIR and RUNWARDEN_RUN_ID, and no shell
//! anywhere. A has exited before B starts. Cleanup is a third child run with
//! A's identity. Every child has a timeout, so no surface operation can hang
//! the probe. Cleanup always runs, also after SIGINT/SIGTERM or a child that
//! died; one broken surface never stops the others.

use crate::child::{Event, Request, Target};
use crate::marker::{Key, Origin};
use crate::nonce::{self, Nonce};
use crate::plan::{Declaration, Location, Plan};
use crate::receipt::{self, Receipt, ReceiptPlant, ReceiptSurface};
use crate::report::{
    self, Cleanup, CrossJob, Finding, KeyKind, Leftover, Mode, NoticeRecord, Report, Runs, Summary,
    SurfaceFacts, Tool,
};
use crate::surface::{
    self, CleanupOutcome, JobScope, Notice, NoticeKind, PlantJob, PlantOutcome, RecoverOutcome,
    Surface, Wanted,
};
use crate::verdict::{self, Evidence, Verdict};
use crate::{escape, signals, sys, timefmt};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// The path of this binary, to re-execute as run A and B. `/proc` may be
/// missing (an empty chroot), so fall back on argv[0].
fn self_exe() -> Result<PathBuf, EngineError> {
    if let Ok(p) = std::env::current_exe() {
        return Ok(p);
    }
    let arg0 = std::env::args_os().next().map(PathBuf::from);
    match arg0 {
        Some(p) if p.components().count() > 1 => std::path::absolute(&p)
            .map_err(|e| EngineError(format!("cannot locate own binary: {e}"))),
        _ => Err(EngineError(
            "cannot locate own binary (no /proc and argv[0] has no path)".into(),
        )),
    }
}

fn mkdir_mode(p: &Path, mode: u32) -> Result<(), EngineError> {
    std::fs::create_dir(p)
        .and_then(|_| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)))
        .map_err(|e| EngineError(format!("cannot create {}: {e}", p.display())))
}

/// One instance the runs work on: a configured surface or its control.
struct Inst {
    surface: usize,
    control: bool,
    type_name: &'static str,
    settings: Value,
    opened: Option<Box<dyn Surface>>,
}

impl Inst {
    /// This instance as a run's target, with nothing yet to plant or recover.
    fn target(&self, id: usize) -> Target {
        Target {
            id,
            type_name: self.type_name.into(),
            settings: self.settings.clone(),
            plant: vec![],
            recover: vec![],
            cleanup: vec![],
            find: vec![],
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
    /// carrier's default (see `Surface::persistence`).
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
    /// Set when the run did not finish normally.
    problem: Option<String>,
}

/// The probe's private directory: `a` and `b` for the runs (0700 each, B's
/// owned by B's user), `control` for the control instances (0755), under a
/// directory run B can traverse (0711). Removed when dropped.
struct Workspace {
    root: PathBuf,
    a: PathBuf,
    b: PathBuf,
    control: PathBuf,
}

impl Workspace {
    fn make(opts: &ProbeOptions, probe_id: &str) -> Result<Workspace, EngineError> {
        let base = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        // A fresh suffix: cross-job probe ids repeat (a plant and its
        // recover on one host share one).
        let suffix = nonce::short_id().map_err(|e| EngineError(e.to_string()))?;
        let root = base.join(format!("runwarden-{probe_id}-{suffix}"));
        mkdir_mode(&root, 0o711)?;
        let ws = Workspace {
            a: root.join("a"),
            b: root.join("b"),
            control: root.join("control"),
            root,
        };
        for d in [&ws.a, &ws.b] {
            mkdir_mode(d, 0o700)?;
            mkdir_mode(&d.join("tmp"), 0o700)?;
        }
        mkdir_mode(&ws.control, 0o755)?;
        if let Some((uid, gid)) = opts.run_b_as {
            for d in [ws.b.clone(), ws.b.join("tmp")] {
                sys::lchown(&d, uid, gid)
                    .map_err(|e| EngineError(format!("chown {}: {e}", d.display())))?;
            }
        }
        Ok(ws)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // Our own directory, made fresh above; remove_dir_all never follows
        // symlinks inside it.
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            eprintln!(
                "runwarden: warning: could not remove the probe directory {}: {e}",
                self.root.display()
            );
        }
    }
}

/// Where nonces come from: fresh random ones for an in-job probe, or
/// derived from the key and probe id, so a later job can recompute them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Nonces {
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

/// The control beacon's probe id: another probe's, so the control proves
/// that a foreign beacon is found and verified.
fn control_probe_id(probe_id: &str) -> String {
    if probe_id.len() < 64 {
        format!("{probe_id}c")
    } else {
        let last = if probe_id.ends_with('c') { 'd' } else { 'c' };
        format!("{}{last}", &probe_id[..63])
    }
}

/// Opens every surface (and, with a control directory, makes its control)
/// and makes one slot per carrier, two for a carrier declared with a scope.
/// A surface that breaks here gets ERROR on all its carriers; the others
/// go on.
fn setup(
    plan: &Plan,
    opts: &ProbeOptions,
    probe_id: &str,
    control_dir: Option<&Path>,
    nonces: Nonces,
) -> Result<Setup, EngineError> {
    let rng = |e: std::io::Error| EngineError(e.to_string());
    let now = timefmt::now_rfc3339();
    let origin = Origin::from_env(&|k| std::env::var(k).ok());
    let beacon = opts.key.beacon(probe_id, &now, origin.clone());
    let control_beacon = opts.key.beacon(&control_probe_id(probe_id), &now, origin);
    let mut insts: Vec<Inst> = Vec::new();
    let mut slots: Vec<Slot> = Vec::new();
    let mut keep = Vec::new();
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let ty = surface::by_name(sp.type_name).expect("plan holds known types");
        let real = ty.open(&sp.settings);
        let control_settings = control_dir.map(|d| ty.control(&sp.settings, &d.join(&sp.name)));
        let broken = match (&real, &control_settings) {
            (Err(e), _) => Some(format!("surface could not be opened: {e}")),
            (_, Some(Err(e))) => Some(format!("control instance could not be set up: {e}")),
            _ => None,
        };
        let real = real.ok();
        let persistence = real.as_ref().and_then(|r| r.persistence());
        for c in ty.carriers() {
            let channel = format!("{}:{}", sp.name, c.name);
            let skipped = real.as_ref().and_then(|r| r.unavailable(c.name));
            // (key, scope, declared): inside a scope is declared, outside
            // it is not, so an open outside is a FAIL.
            let declaration = plan.declaration(&channel);
            let variants = match declaration {
                None => vec![(c.name.to_string(), None, false)],
                Some(Declaration { scope: None, .. }) => vec![(c.name.to_string(), None, true)],
                Some(Declaration {
                    scope: Some(sc), ..
                }) => [true, false]
                    .into_iter()
                    .map(|inside| {
                        let side = if inside { "inside" } else { "outside" };
                        let js = JobScope {
                            key: sc.key.clone(),
                            value: sc.value.clone(),
                            inside,
                        };
                        (format!("{}@{side}", c.name), Some(js), inside)
                    })
                    .collect(),
            };
            let pos = declaration.map(|d| d.pos);
            let beacons = c.name == surface::RUNNER_PERSISTENCE;
            for (key, scope, declared) in variants {
                let nonce = match nonces {
                    Nonces::Random => Nonce::generate().map_err(rng)?,
                    Nonces::Derived => opts.key.nonce(probe_id, &sp.name, &key),
                };
                slots.push(Slot {
                    surface: i,
                    carrier: c,
                    channel: channel.clone(),
                    declared_at: pos.filter(|_| declared),
                    key,
                    scope,
                    nonce,
                    control_nonce: Nonce::generate().map_err(rng)?,
                    beacon: beacons.then(|| beacon.clone()),
                    control_beacon: beacons.then(|| control_beacon.clone()),
                    persistence,
                    evidence: Evidence {
                        skipped: skipped.clone(),
                        broken: broken.clone(),
                        plant: None,
                        recover: None,
                        control_plant: None,
                        control_recover: None,
                        declared,
                        unconfirmed: None,
                        accept_unconfirmed: opts.allow_missing_receipt,
                    },
                });
            }
        }
        if broken.is_none() {
            insts.push(Inst {
                surface: i,
                control: false,
                type_name: ty.name(),
                settings: sp.settings.clone(),
                opened: real,
            });
            if let Some(Ok(c)) = control_settings {
                let cs = c.settings;
                keep.extend(c.keep);
                let control = ty.open(&cs).ok();
                insts.push(Inst {
                    surface: i,
                    control: true,
                    type_name: ty.name(),
                    settings: cs,
                    opened: control,
                });
            }
        }
    }
    Ok(Setup {
        insts,
        slots,
        _keep: keep,
    })
}

fn active(s: &Slot) -> bool {
    s.evidence.broken.is_none() && s.evidence.skipped.is_none()
}

impl Setup {
    /// Run A's targets: the slots `which` picks, on the instances `on`
    /// picks (controls get control nonces and beacons).
    fn plant_targets(
        &self,
        on: impl Fn(&Inst) -> bool,
        which: impl Fn(&Slot) -> bool,
    ) -> Vec<Target> {
        self.insts
            .iter()
            .enumerate()
            .map(|(id, inst)| Target {
                plant: if on(inst) {
                    self.slots
                        .iter()
                        .filter(|s| s.surface == inst.surface && active(s) && which(s))
                        .map(|s| s.job(inst.control))
                        .collect()
                } else {
                    vec![]
                },
                ..inst.target(id)
            })
            .collect()
    }

    /// Run B's targets: every slot whose plant (on that instance) said
    /// what to look for.
    fn recover_targets(&self) -> Vec<Target> {
        self.insts
            .iter()
            .enumerate()
            .map(|(id, inst)| Target {
                recover: self
                    .slots
                    .iter()
                    .filter(|s| s.surface == inst.surface)
                    .filter_map(|s| {
                        let p = if inst.control {
                            &s.evidence.control_plant
                        } else {
                            &s.evidence.plant
                        };
                        match p {
                            Some(PlantOutcome::Planted { needle, .. }) => Some(Wanted {
                                key: s.key.clone(),
                                carrier: s.carrier.name.into(),
                                needle: needle.clone(),
                            }),
                            _ => None,
                        }
                    })
                    .collect(),
                ..inst.target(id)
            })
            .collect()
    }

    /// Cleanup's targets: per instance, the entries to remove (newest
    /// first) and, for cleanup by probe id, the jobs whose plants to find.
    fn cleanup_targets(&self, entries: &[Vec<Value>], find: &[Vec<PlantJob>]) -> Vec<Target> {
        self.insts
            .iter()
            .enumerate()
            .map(|(id, inst)| Target {
                cleanup: entries.get(id).cloned().unwrap_or_default(),
                find: find.get(id).cloned().unwrap_or_default(),
                ..inst.target(id)
            })
            .collect()
    }
}

impl Slot {
    fn job(&self, control: bool) -> PlantJob {
        PlantJob {
            key: self.key.clone(),
            carrier: self.carrier.name.to_string(),
            nonce: if control {
                self.control_nonce
            } else {
                self.nonce
            },
            scope: self.scope.clone(),
            beacon: if control {
                self.control_beacon.clone()
            } else {
                self.beacon.clone()
            },
        }
    }
}

/// Runs that died or were stopped explain every step they never reported.
fn explain_gaps(slots: &mut [Slot], a: Option<&str>, b: Option<&str>) {
    for s in slots.iter_mut() {
        let ev = &mut s.evidence;
        if ev.broken.is_none() && ev.skipped.is_none() {
            let planted = matches!(ev.plant, Some(PlantOutcome::Planted { .. }));
            if ev.plant.is_none() && a.is_some() {
                ev.broken = a.map(String::from);
            } else if planted && ev.recover.is_none() && b.is_some() {
                ev.broken = b.map(String::from);
            }
        }
    }
}

/// What the runs share: the binary, the workspace and the ids.
struct Runner<'a> {
    exe: PathBuf,
    ws: &'a Workspace,
    probe_id: &'a str,
    runs: &'a Runs,
    opts: &'a ProbeOptions,
}

impl<'a> Runner<'a> {
    fn new(
        ws: &'a Workspace,
        probe_id: &'a str,
        runs: &'a Runs,
        opts: &'a ProbeOptions,
    ) -> Result<Runner<'a>, EngineError> {
        Ok(Runner {
            exe: self_exe()?,
            ws,
            probe_id,
            runs,
            opts,
        })
    }

    /// A report of this session with nothing in it yet.
    fn report(&self, mode: Mode, plan: &Plan, started_at: String) -> Report {
        Report {
            schema: report::SCHEMA.into(),
            tool: Tool::default(),
            mode,
            probe_id: self.probe_id.into(),
            label: None,
            started_at,
            finished_at: timefmt::now_rfc3339(),
            config: plan.source.clone(),
            runs: self.runs.clone(),
            key: KeyKind::of(&self.opts.key),
            cross_job: None,
            surfaces: plan
                .surfaces
                .iter()
                .filter_map(|sp| {
                    let ty = surface::by_name(sp.type_name)?;
                    let facts = ty.facts(&sp.settings);
                    (!facts.is_empty()).then(|| SurfaceFacts {
                        surface: sp.name.clone(),
                        surface_type: ty.name().into(),
                        facts: facts.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    })
                })
                .collect(),
            summary: Summary::default(),
            findings: vec![],
            notices: vec![],
            cleanup: Cleanup::default(),
        }
    }

    fn run(&self, role: &'static str, targets: Vec<Target>) -> RunResult {
        let (dir, id, as_user, interruptible) = match role {
            "A" => (&self.ws.a, &self.runs.a, None, true),
            "B" => (&self.ws.b, &self.runs.b, self.opts.run_b_as, true),
            // Cleanup runs as A: it removes what A made. A signal does not
            // stop it; its timeout does.
            _ => (&self.ws.a, &self.runs.a, None, false),
        };
        let run = Run {
            role,
            dir,
            id,
            as_user,
            interruptible,
        };
        let key = self.opts.key.configured_hex();
        run_child(
            &run,
            &self.exe,
            self.probe_id,
            key,
            targets,
            self.opts.phase_timeout,
        )
    }

    /// Run B, verdicts, and cleanup of what run A made (newest first):
    /// the findings, notices and cleanup of `base`. `a_planted_all`: run A
    /// planted the real surfaces too, so its problems explain their gaps.
    fn conclude(
        &self,
        plan: &Plan,
        st: &mut Setup,
        a: &RunResult,
        a_planted_all: bool,
        base: Report,
    ) -> Report {
        let b = self.recover(a, st);
        for s in st.slots.iter_mut() {
            (s.evidence.recover, s.evidence.control_recover) = outcomes(&b.recovered, &st.insts, s);
        }
        let a_problem = a.problem.as_deref().filter(|_| a_planted_all);
        explain_gaps(&mut st.slots, a_problem, b.problem.as_deref());
        let findings = findings(plan, &st.slots);
        let cleanup = self.clean(plan, st, newest_first(&a.created, st.insts.len()), vec![]);
        Report {
            summary: Summary::of(&findings),
            findings,
            notices: notices(plan, st, &b),
            cleanup,
            finished_at: timefmt::now_rfc3339(),
            ..base
        }
    }

    /// Run B, unless run A had a problem or someone asked us to stop.
    fn recover(&self, a: &RunResult, setup: &Setup) -> RunResult {
        let stop = signals::received().map(|s| format!("interrupted by {s}"));
        match a.problem.clone().or(stop) {
            Some(p) => RunResult {
                problem: Some(p),
                ..RunResult::default()
            },
            None => self.run("B", setup.recover_targets()),
        }
    }

    /// Removes `entries` (per instance, in order) and, for cleanup by probe
    /// id, whatever the instances find of `find`; returns what happened.
    fn clean(
        &self,
        plan: &Plan,
        setup: &Setup,
        entries: Vec<Vec<Value>>,
        find: Vec<Vec<PlantJob>>,
    ) -> Cleanup {
        let mut cleanup = Cleanup::default();
        if entries.iter().all(Vec::is_empty) && find.iter().all(Vec::is_empty) {
            return cleanup;
        }
        let c = self.run("cleanup", setup.cleanup_targets(&entries, &find));
        // Per instance: the given entries, then the ones it found.
        let mut all: Vec<Vec<Value>> = entries;
        all.resize(setup.insts.len(), Vec::new());
        for (id, entry) in &c.created {
            if let Some(list) = all.get_mut(*id) {
                list.push(entry.clone());
            }
        }
        for (id, reason) in &c.find_failed {
            cleanup.left.push(Leftover {
                surface: plan.surfaces[setup.insts[*id].surface].name.clone(),
                control: setup.insts[*id].control,
                entry: "(anything this probe planted)".into(),
                reason: format!("could not look for this probe's plants: {reason}"),
            });
        }
        for (id, list) in all.iter().enumerate() {
            let inst = &setup.insts[id];
            for (index, entry) in list.iter().enumerate() {
                let outcome =
                    c.cleaned
                        .get(&(id, index))
                        .cloned()
                        .unwrap_or_else(|| CleanupOutcome::Left {
                            reason: c
                                .problem
                                .clone()
                                .unwrap_or_else(|| "cleanup never reported this entry".into()),
                        });
                match outcome {
                    // The control lives in the probe's own directory, removed
                    // whole; only the user's surfaces count.
                    CleanupOutcome::Removed if !inst.control => {
                        cleanup.removed += 1;
                        cleanup.deleted += 1;
                    }
                    CleanupOutcome::Gone if !inst.control => {
                        cleanup.removed += 1;
                        cleanup.already_gone += 1;
                    }
                    CleanupOutcome::Removed | CleanupOutcome::Gone | CleanupOutcome::Superseded => {
                    }
                    CleanupOutcome::Left { reason } => cleanup.left.push(Leftover {
                        surface: plan.surfaces[inst.surface].name.clone(),
                        control: inst.control,
                        entry: inst
                            .opened
                            .as_ref()
                            .map(|s| s.describe(entry))
                            .unwrap_or_else(|| escape::line(&entry.to_string())),
                        reason,
                    }),
                }
            }
        }
        cleanup
    }
}

/// A run's created entries per instance, newest first (cleanup's order).
fn newest_first(created: &[(usize, Value)], n: usize) -> Vec<Vec<Value>> {
    let mut entries: Vec<Vec<Value>> = vec![Vec::new(); n];
    for (id, entry) in created.iter().rev() {
        if let Some(list) = entries.get_mut(*id) {
            list.push(entry.clone());
        }
    }
    entries
}

fn fresh_runs(opts: &ProbeOptions) -> Result<Runs, EngineError> {
    let rng = |e: std::io::Error| EngineError(e.to_string());
    if opts.run_b_as.is_some() && !sys::is_root() {
        return Err(EngineError(
            "--run-b-as needs root (it switches run B to another user)".into(),
        ));
    }
    Ok(Runs {
        a: nonce::short_id().map_err(rng)?,
        b: nonce::short_id().map_err(rng)?,
        b_uid: opts.run_b_as.map(|(u, _)| u),
    })
}

/// An in-job probe: plant (run A), recover (run B), verdicts, cleanup.
pub fn probe(plan: &Plan, opts: &ProbeOptions) -> Result<Report, EngineError> {
    let started_at = timefmt::now_rfc3339();
    let probe_id = nonce::short_id().map_err(|e| EngineError(e.to_string()))?;
    let (runs, ws) = (fresh_runs(opts)?, Workspace::make(opts, &probe_id)?);
    let runner = Runner::new(&ws, &probe_id, &runs, opts)?;
    let mut st = setup(plan, opts, &probe_id, Some(&ws.control), Nonces::Random)?;
    let a = runner.run("A", st.plant_targets(|_| true, |_| true));
    for s in st.slots.iter_mut() {
        (s.evidence.plant, s.evidence.control_plant) = outcomes(&a.planted, &st.insts, s);
    }
    let base = runner.report(Mode::Probe, plan, started_at);
    Ok(runner.conclude(plan, &mut st, &a, true, base))
}

/// `runwarden plant`: run A alone, with nonces derived from the key and
/// probe id, and nothing cleaned up. `beacon_only` plants just the
/// runner-persistence beacons; otherwise everything else is planted.
pub fn plant(
    plan: &Plan,
    opts: &ProbeOptions,
    probe_id: &str,
    beacon_only: bool,
) -> Result<Receipt, EngineError> {
    let planted_at = timefmt::now_rfc3339();
    let (runs, ws) = (fresh_runs(opts)?, Workspace::make(opts, probe_id)?);
    let runner = Runner::new(&ws, probe_id, &runs, opts)?;
    let mut st = setup(plan, opts, probe_id, None, Nonces::Derived)?;
    let beacons = |s: &Slot| (s.carrier.name == surface::RUNNER_PERSISTENCE) == beacon_only;
    let a = runner.run("A", st.plant_targets(|_| true, beacons));
    for s in st.slots.iter_mut() {
        s.evidence.plant = outcomes(&a.planted, &st.insts, s).0;
    }
    let created = newest_first(&a.created, st.insts.len());
    let mut surfaces = Vec::new();
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let inst = st.insts.iter().position(|x| x.surface == i);
        let mut entries: Vec<Value> = inst.map(|id| created[id].clone()).unwrap_or_default();
        // The receipt keeps creation order; cleanup reverses it.
        entries.reverse();
        let plants = st
            .slots
            .iter()
            .filter(|s| s.surface == i && beacons(s))
            .map(|s| ReceiptPlant {
                key: s.key.clone(),
                carrier: s.carrier.name.into(),
                scope: s.scope.clone(),
                outcome: match (&s.evidence.broken, &s.evidence.skipped, &s.evidence.plant) {
                    (Some(r), _, _) => PlantOutcome::Failed { reason: r.clone() },
                    (_, Some(r), _) => PlantOutcome::Unsupported { reason: r.clone() },
                    (_, _, Some(o)) => o.clone(),
                    (_, _, None) => PlantOutcome::Failed {
                        reason: a
                            .problem
                            .clone()
                            .unwrap_or_else(|| "run A never reported planting it".into()),
                    },
                },
            })
            .collect();
        surfaces.push(ReceiptSurface {
            name: sp.name.clone(),
            type_name: sp.type_name.into(),
            plants,
            entries,
        });
    }
    Ok(Receipt {
        schema: receipt::SCHEMA.into(),
        tool: Tool::default(),
        probe_id: probe_id.into(),
        planted_at,
        finished_at: timefmt::now_rfc3339(),
        key: KeyKind::of(&opts.key),
        origin: Origin::from_env(&|k| std::env::var(k).ok()),
        config: plan.source.clone(),
        beacon_only,
        complete: a.problem.is_none(),
        problem: a.problem,
        surfaces,
    })
}

/// `runwarden recover`: run B on the configured surfaces for the plant of
/// `probe_id` (from its receipt when there is one, else from needles
/// derived from the key and probe id), with a fresh control planted and
/// recovered by the same code. Cleans only the control.
pub fn recover(
    plan: &Plan,
    opts: &ProbeOptions,
    probe_id: &str,
    receipt: Option<(&Receipt, &str)>,
) -> Result<Report, EngineError> {
    let started_at = timefmt::now_rfc3339();
    let (runs, ws) = (fresh_runs(opts)?, Workspace::make(opts, probe_id)?);
    let runner = Runner::new(&ws, probe_id, &runs, opts)?;
    let mut st = setup(plan, opts, probe_id, Some(&ws.control), Nonces::Derived)?;
    // What the plant did, per slot: the receipt's word, else the derived
    // needle (the plant may or may not have run).
    let receipt_surface = |sp: &crate::plan::SurfacePlan| {
        receipt.and_then(|(r, _)| {
            r.surfaces
                .iter()
                .find(|x| x.name == sp.name && x.type_name == sp.type_name)
        })
    };
    for s in st.slots.iter_mut().filter(|s| active(s)) {
        let sp = &plan.surfaces[s.surface];
        let rs = receipt_surface(sp);
        // Where the plant knew better than the carrier's default (a
        // directory on tmpfs), so do the carriers recover cannot ask it
        // about: they live in the same place.
        let known = rs.and_then(|rs| {
            rs.plants.iter().find_map(|p| match &p.outcome {
                PlantOutcome::Planted { persistence, .. } => *persistence,
                _ => None,
            })
        });
        let looked = |needle| PlantOutcome::Planted {
            needle,
            persistence: known,
            detail: String::new(),
        };
        // runner-persistence has nothing of this probe's to find (its
        // recovery scans for beacons of others): the surface's derived
        // needle is the whole story, receipt or not.
        let scan_only = s.carrier.name == surface::RUNNER_PERSISTENCE;
        let planted = rs
            .and_then(|rs| rs.plants.iter().find(|p| p.key == s.key))
            .filter(|_| !scan_only);
        match planted {
            Some(p) => s.evidence.plant = Some(p.outcome.clone()),
            None => {
                let ty = surface::by_name(sp.type_name).expect("plan holds known types");
                match ty.derive_needle(s.carrier.name, probe_id, &s.nonce, s.scope.as_ref()) {
                    Ok(needle) => {
                        s.evidence.plant = Some(looked(needle));
                        let why = if receipt.is_some() {
                            "not in the plant receipt"
                        } else {
                            "no plant receipt"
                        };
                        s.evidence.unconfirmed = (!scan_only).then(|| why.to_string());
                    }
                    // Nothing to look for: no plant outcome, and the
                    // verdict rules say what that is worth.
                    Err(why) => {
                        s.evidence.unconfirmed =
                            Some(format!("no plant receipt for this carrier, and {why}"));
                    }
                }
            }
        }
    }
    // The control: planted here and now (run A), on the control only.
    let a = runner.run("A", st.plant_targets(|i| i.control, |_| true));
    for s in st.slots.iter_mut() {
        s.evidence.control_plant = outcomes(&a.planted, &st.insts, s).1;
    }
    let cross_job = CrossJob {
        receipt: receipt.map(|(_, path)| path.to_string()),
        planted_at: receipt.map(|(r, _)| r.planted_at.clone()),
        plant_origin: receipt.map(|(r, _)| r.origin.clone()),
        plant_complete: receipt.map(|(r, _)| r.complete),
        receipt_via: None,
        missing_receipt_allowed: opts.allow_missing_receipt,
    };
    let base = Report {
        cross_job: Some(cross_job),
        ..runner.report(Mode::Recover, plan, started_at)
    };
    // Run A planted only the control here: a control that never ran
    // explains nothing about the real plant, but leaves no PASS (the
    // verdict rules see the missing control).
    Ok(runner.conclude(plan, &mut st, &a, false, base))
}

/// `runwarden cleanup`: removes what the plant of `probe_id` made: the
/// receipt's entries when there is one, else whatever each surface finds
/// under the names and nonces derived from the key and probe id. Each
/// entry is checked again right before removal. Idempotent.
pub fn cleanup(
    plan: &Plan,
    opts: &ProbeOptions,
    probe_id: &str,
    receipt: Option<&Receipt>,
) -> Result<Report, EngineError> {
    let started_at = timefmt::now_rfc3339();
    let (runs, ws) = (fresh_runs(opts)?, Workspace::make(opts, probe_id)?);
    let runner = Runner::new(&ws, probe_id, &runs, opts)?;
    let st = setup(plan, opts, probe_id, None, Nonces::Derived)?;
    let n = st.insts.len();
    let mut entries: Vec<Vec<Value>> = vec![Vec::new(); n];
    let mut find: Vec<Vec<PlantJob>> = vec![Vec::new(); n];
    let mut left = Vec::new();
    for (id, inst) in st.insts.iter().enumerate() {
        let sp = &plan.surfaces[inst.surface];
        match receipt {
            Some(r) => {
                if let Some(rs) = r
                    .surfaces
                    .iter()
                    .find(|x| x.name == sp.name && x.type_name == sp.type_name)
                {
                    entries[id] = rs.entries.iter().rev().cloned().collect();
                }
            }
            None => {
                find[id] = st
                    .slots
                    .iter()
                    .filter(|s| s.surface == inst.surface)
                    .map(|s| s.job(false))
                    .collect();
            }
        }
    }
    // Receipt surfaces the config no longer has: say so, touch nothing.
    if let Some(r) = receipt {
        for rs in &r.surfaces {
            let known = plan
                .surfaces
                .iter()
                .any(|sp| sp.name == rs.name && sp.type_name == rs.type_name);
            if !known && !rs.entries.is_empty() {
                left.push(Leftover {
                    surface: rs.name.clone(),
                    control: false,
                    entry: format!("{} entries", rs.entries.len()),
                    reason: "this surface is not in the config (renamed or removed): nothing to reach it with".into(),
                });
            }
        }
    }
    // Surfaces that could not be opened: their plants cannot be reached.
    for (i, sp) in plan.surfaces.iter().enumerate() {
        if !st.insts.iter().any(|x| x.surface == i) {
            let why = st
                .slots
                .iter()
                .find(|s| s.surface == i)
                .and_then(|s| s.evidence.broken.clone())
                .unwrap_or_else(|| "surface could not be opened".into());
            left.push(Leftover {
                surface: sp.name.clone(),
                control: false,
                entry: "(anything this probe planted)".into(),
                reason: why,
            });
        }
    }
    let mut cleanup = runner.clean(plan, &st, entries, find);
    cleanup.left.extend(left);
    Ok(Report {
        cleanup,
        ..runner.report(Mode::Cleanup, plan, started_at)
    })
}

/// What run B noticed on the configured surfaces (the control's beacons
/// are the control's business): the first [`MAX_NOTICES`] of each, then a
/// count of the rest.
fn notices(plan: &Plan, st: &Setup, b: &RunResult) -> Vec<NoticeRecord> {
    let real = |id: usize| st.insts.get(id).filter(|i| !i.control);
    let mut out: Vec<NoticeRecord> = b
        .notices
        .iter()
        .filter_map(|(id, n)| {
            Some(NoticeRecord {
                surface: plan.surfaces[real(*id)?.surface].name.clone(),
                kind: n.kind,
                entry: n.entry.clone(),
                detail: n.detail.clone(),
                beacon: n.beacon.clone(),
            })
        })
        .collect();
    for (id, count) in &b.notice_counts {
        if let Some(inst) = real(*id).filter(|_| *count > MAX_NOTICES) {
            out.push(NoticeRecord {
                surface: plan.surfaces[inst.surface].name.clone(),
                kind: NoticeKind::Omitted,
                entry: String::new(),
                detail: format!(
                    "{} more notices on this surface not listed",
                    count - MAX_NOTICES
                ),
                beacon: None,
            });
        }
    }
    out
}

/// Notices kept per surface (kept as they arrive, so memory stays bounded
/// however many a hostile directory holds): 10,000 forged markers are
/// worth a count in a report, not 10,000 entries.
pub const MAX_NOTICES: usize = 100;

/// One finding per slot, from its evidence.
fn findings(plan: &Plan, slots: &[Slot]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for s in slots {
        let ev = &s.evidence;
        let (v, detail) = verdict::decide(ev);
        let sp = &plan.surfaces[s.surface];
        // The instance's own (whatever the verdict), else what its plant
        // saw, else the carrier's default.
        let planted = match &ev.plant {
            Some(PlantOutcome::Planted { persistence, .. }) => *persistence,
            _ => None,
        };
        let persistence = s.persistence.or(planted).unwrap_or(s.carrier.persistence);
        // An open channel outside its declared scope: the scope does not
        // hold (the verdict is the plain rule: recovered, not declared).
        let detail = match &s.scope {
            Some(sc) if !sc.inside && v == Verdict::Fail => {
                format!(
                    "outside the declared scope ({}: {}), so the scope does not hold: {detail}",
                    sc.key, sc.value
                )
            }
            _ => detail,
        };
        let detail = match &ev.plant {
            Some(PlantOutcome::Planted { detail: how, .. }) if !how.is_empty() => {
                format!("{detail} [planted: {how}]")
            }
            _ => detail,
        };
        findings.push(Finding {
            channel: s.channel.clone(),
            surface: sp.name.clone(),
            surface_type: sp.type_name.into(),
            carrier: s.carrier.name.into(),
            verdict: v,
            persistence,
            declared: ev.declared,
            control: verdict::control_state(ev),
            detail,
            location: sp.location.clone(),
            declared_at: match (&plan.source.path, s.declared_at) {
                (Some(path), Some(pos)) => Some(Location {
                    path: path.clone(),
                    line: pos.line,
                    column: pos.column,
                }),
                _ => None,
            },
            scope: s.scope.as_ref().map(|sc| {
                let side = if sc.inside { "inside" } else { "outside" };
                [
                    (sc.key.clone(), sc.value.clone()),
                    ("side".into(), side.into()),
                ]
                .into_iter()
                .collect()
            }),
        });
    }
    findings
}

/// A slot's outcomes from one run's report: (configured surface, control).
fn outcomes<T: Clone>(
    reported: &HashMap<(usize, String), T>,
    insts: &[Inst],
    slot: &Slot,
) -> (Option<T>, Option<T>) {
    let mut pair = (None, None);
    for (id, inst) in insts
        .iter()
        .enumerate()
        .filter(|(_, i)| i.surface == slot.surface)
    {
        let outcome = reported.get(&(id, slot.key.clone())).cloned();
        if inst.control {
            pair.1 = outcome
        } else {
            pair.0 = outcome
        }
    }
    pair
}

/// One event line from a run, with every string in it redacted before
/// anything is kept: the runs relay what servers and git said.
fn parse_event(line: &str) -> Result<Event, serde_json::Error> {
    let mut v: Value = serde_json::from_str(line)?;
    crate::redact::value(&mut v);
    serde_json::from_value(v)
}

/// Who a child run is: its role, its own directory (HOME, cwd, TMPDIR
/// below it), its run id, and the user it runs as.
struct Run<'a> {
    role: &'a str,
    dir: &'a Path,
    id: &'a str,
    as_user: Option<(u32, u32)>,
    /// Whether SIGINT/SIGTERM stops it. Cleanup is not: it is what a
    /// signal must still get, bounded by the timeout alone.
    interruptible: bool,
}

/// How long run A has, after a signal, to finish the carrier under way
/// and exit by itself (a few syscalls, or one request or push already
/// under way) before it is killed. Short: GitHub Actions sends SIGKILL
/// 2.5 s after its SIGTERM (7.5 s after SIGINT).
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Kills a run and everything it started (its process group: a local
/// push's receive-pack is not its child's child by accident).
fn kill_group(child: &mut std::process::Child) {
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.kill();
}

/// Runs one child (A or B) to completion, a timeout or a signal, and
/// collects what it reported. Never fails: problems land in `problem`.
fn run_child(
    run: &Run<'_>,
    exe: &Path,
    probe_id: &str,
    key: Option<String>,
    targets: Vec<Target>,
    timeout: Duration,
) -> RunResult {
    use std::os::unix::process::CommandExt;
    let Run {
        role,
        dir,
        id: run_id,
        as_user,
        interruptible,
    } = *run;
    let mut res = RunResult::default();
    let mut cmd = Command::new(exe);
    cmd.arg("__run")
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", dir)
        .env("TMPDIR", dir.join("tmp"))
        .env("RUNWARDEN_RUN_ID", run_id)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C at the terminal reaches only the
        // orchestrator, which stops the run it chooses to stop and still
        // cleans up.
        .process_group(0);
    crate::sys::die_with_parent(&mut cmd);
    if let Some((uid, gid)) = as_user {
        // std drops supplementary groups too when root switches uid.
        cmd.uid(uid).gid(gid);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            res.problem = Some(format!("run {role} could not start: {e}"));
            return res;
        }
    };
    let req = Request {
        probe_id: probe_id.into(),
        key,
        targets,
    };
    // The child reads all of stdin before writing anything, so writing the
    // whole request first cannot deadlock.
    if let Some(mut stdin) = child.stdin.take() {
        let body = serde_json::to_vec(&req).expect("request serializes");
        if let Err(e) = stdin.write_all(&body) {
            res.problem = Some(format!("run {role}: could not send the request: {e}"));
        }
    }
    // The run's own words on stderr reach the terminal only redacted.
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{}", crate::redact::text(&line));
            }
        });
    }
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut done = false;
    let mut killed: Option<String> = None;
    let mut stopping: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => match parse_event(&line) {
                Ok(Event::Created { target, entry }) => res.created.push((target, entry)),
                Ok(Event::Planted {
                    target,
                    key,
                    outcome,
                }) => {
                    res.planted.insert((target, key), outcome);
                }
                Ok(Event::Recovered {
                    target,
                    key,
                    outcome,
                }) => {
                    res.recovered.insert((target, key), outcome);
                }
                Ok(Event::Cleaned {
                    target,
                    index,
                    outcome,
                }) => {
                    res.cleaned.insert((target, index), outcome);
                }
                Ok(Event::Notice { target, notice }) => {
                    let n = res.notice_counts.entry(target).or_default();
                    *n += 1;
                    if *n <= MAX_NOTICES {
                        res.notices.push((target, notice));
                    }
                }
                Ok(Event::FindFailed { target, reason }) => res.find_failed.push((target, reason)),
                Ok(Event::Done) => done = true,
                Err(e) => killed = Some(format!("run {role} sent a malformed event: {e}")),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if killed.is_none() {
            if let Some(sig) = signals::received().filter(|_| interruptible) {
                killed = Some(format!("interrupted by {sig} during run {role}"));
                if role == "A" {
                    // Run A stops between syscalls: it finishes the
                    // carrier under way (its journal complete), starts no
                    // other, and exits. Killed only if it does not.
                    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                    stopping = Some(Instant::now() + STOP_GRACE);
                }
            } else if Instant::now() >= deadline {
                killed = Some(format!("run {role} timed out after {}s", timeout.as_secs()));
            }
        }
        // Whatever stopped trusting the run stops the run (after its grace
        // to stop by itself, for run A on a signal).
        if killed.is_some() && stopping.is_none_or(|end| Instant::now() >= end) {
            kill_group(&mut child);
            break;
        }
    }
    // Reap the child without waiting forever (a process stuck in the
    // kernel on a dead network mount cannot even be killed). A child that
    // has just closed stdout is usually a moment from exiting: poll with a
    // backoff from 0.5 ms, so a probe does not sleep for nothing at every
    // phase.
    let reap_deadline = Instant::now() + Duration::from_secs(10);
    let mut pause = Duration::from_micros(500);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < reap_deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            _ => {
                kill_group(&mut child);
                break None;
            }
        }
    };
    // A killed run's last journal lines may still be on their way from the
    // reader thread: drain until its pipe closes (at once, now the run is
    // gone; bounded in case something still holds it). They are exactly
    // the entries cleanup must not miss.
    let drain_deadline = Instant::now() + Duration::from_secs(2);
    while let Some(left) = drain_deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Ok(Event::Created { target, entry }) = parse_event(&line) {
                    res.created.push((target, entry));
                }
            }
            Err(_) => break,
        }
    }
    res.problem = res.problem.or(killed).or_else(|| match status {
        Some(s) if s.success() && done => None,
        Some(s) if s.success() => Some(format!("run {role} exited before finishing")),
        Some(s) => Some(format!("run {role} failed ({s})")),
        None => Some(format!("run {role} could not be reaped")),
    });
    res
}
