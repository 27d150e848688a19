//! Setup: the probe's private workspace, the instances (each configured
//! surface and its control) and one slot per carrier, with its nonces and
//! the evidence the runs fill in; and what each run is asked to do.

use super::{EngineError, Inst, Nonces, ProbeOptions, Setup, Slot, Workspace};
use crate::child::Target;
use crate::marker::Origin;
use crate::nonce::Nonce;
use crate::plan::{Declaration, Plan};
use crate::report::Runs;
use crate::surface::{JobScope, PlantJob, PlantOutcome, Wanted};
use crate::verdict::Evidence;
use crate::{nonce, surface, sys, timefmt};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The path of this binary, to re-execute as run A and B. `/proc` may be
/// missing (an empty chroot), so fall back on argv[0].
pub(super) fn self_exe() -> Result<PathBuf, EngineError> {
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

pub(super) fn mkdir_mode(p: &Path, mode: u32) -> Result<(), EngineError> {
    std::fs::create_dir(p)
        .and_then(|_| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)))
        .map_err(|e| EngineError(format!("cannot create {}: {e}", p.display())))
}

impl Workspace {
    pub(super) fn make(opts: &ProbeOptions, probe_id: &str) -> Result<Workspace, EngineError> {
        let base = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
        // A fresh suffix: cross-job probe ids repeat (a plant and its
        // recover on one host share one).
        let suffix = nonce::short_id().map_err(|e| EngineError(e.to_string()))?;
        let root = base.join(format!("runwarden-{probe_id}-{suffix}"));
        mkdir_mode(&root, 0o711)?;
        // Locked before anything else is made in it: a probe killed later
        // (SIGKILL runs no Drop) leaves a directory cleanup can tell dead.
        let lock = sys::open_dir(&root)
            .and_then(|d| sys::create_file_at(&d, LOCK.as_ref(), 0o600))
            .and_then(|f| match sys::try_lock(&f)? {
                true => Ok(f),
                false => Err(std::io::Error::other("locked by another process")),
            })
            .map_err(|e| EngineError(format!("cannot lock {}: {e}", root.display())))?;
        let ws = Workspace {
            a: root.join("a"),
            b: root.join("b"),
            control: root.join("control"),
            root,
            _lock: lock,
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

/// The lock file of a probe's directory.
const LOCK: &str = "lock";

/// Removes the private directories dead probes of `probe_id` left in
/// `base` (`runwarden-<probe id>-<12 hex>`, ours by uid, mode 0711 and
/// form, and no one holds its lock: a probe killed by SIGKILL runs no
/// cleanup of its own). `(removed, left)`: what stays is said, by name
/// and why (one in use, one without a lock, made before locks were).
pub(super) fn sweep(base: &Path, probe_id: &str, own: &Path) -> (usize, Vec<(String, String)>) {
    use std::os::unix::fs::MetadataExt;
    let prefix = format!("runwarden-{probe_id}-");
    let Ok(list) = std::fs::read_dir(base) else {
        return (0, vec![]);
    };
    let (mut removed, mut left) = (0, Vec::new());
    for e in list.flatten().take(100_000) {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        if rest.len() != 12 || !rest.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let path = base.join(&name);
        if path == own {
            continue;
        }
        let shown = crate::escape::bytes(path.as_os_str().as_encoded_bytes());
        // Never through a symlink; only a directory of our making.
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !m.is_dir() || m.uid() != sys::euid() || m.mode() & 0o7777 != 0o711 {
            continue;
        }
        let lock = sys::open_dir(&path).and_then(|d| sys::open_read_at(&d, LOCK.as_ref()));
        let why = match lock.map(|f| (f.metadata().map(|m| m.is_file()), sys::try_lock(&f), f)) {
            Ok((Ok(true), Ok(true), _held)) => match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    removed += 1;
                    continue;
                }
                Err(e) => format!("a dead probe's directory, but removing it failed: {e}"),
            },
            Ok((_, Ok(false), _)) => "a probe of this id is running and holds it".into(),
            Ok(_) => "its lock is not a file runwarden makes".into(),
            Err(_) => "it has no lock (made by runwarden 0.11.0, or a probe killed as it made it): it cannot be told dead".into(),
        };
        left.push((shown, why));
    }
    left.sort();
    (removed, left)
}

impl Drop for Workspace {
    fn drop(&mut self) {
        // Our own directory, made fresh above; remove_dir_all never follows
        // symlinks inside it.
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            crate::say::error(&format!(
                "warning: could not remove the probe directory {}: {e}",
                crate::escape::bytes(self.root.as_os_str().as_encoded_bytes())
            ));
        }
    }
}

/// The control beacon's probe id: another probe's, so the control proves
/// that a foreign beacon is found and verified.
pub(super) fn control_probe_id(probe_id: &str) -> String {
    if probe_id.len() < 64 {
        format!("{probe_id}c")
    } else {
        let last = if probe_id.ends_with('c') { 'd' } else { 'c' };
        format!("{}{last}", &probe_id[..63])
    }
}

/// A surface name for a detail (names are `[a-z0-9-]`, validated).
fn escape_name(name: &str) -> String {
    crate::escape::bytes(name.as_bytes())
}

fn rng(e: std::io::Error) -> EngineError {
    EngineError(e.to_string())
}

/// Opens every surface (and, with a control directory, makes its control)
/// and makes one slot per carrier, two for a carrier declared with a scope.
/// A surface that breaks here gets ERROR on all its carriers; the others
/// go on.
pub(super) fn setup(
    plan: &Plan,
    opts: &ProbeOptions,
    probe_id: &str,
    control_dir: Option<&Path>,
    nonces: Nonces,
) -> Result<Setup, EngineError> {
    let now = timefmt::now_rfc3339();
    let origin = Origin::from_env(&|k| std::env::var(k).ok());
    let maker = SlotMaker {
        plan,
        opts,
        probe_id,
        nonces,
        beacon: opts.key.beacon(probe_id, &now, origin.clone()),
        control_beacon: opts.key.beacon(&control_probe_id(probe_id), &now, origin),
    };
    let mut insts: Vec<Inst> = Vec::new();
    let mut slots: Vec<Slot> = Vec::new();
    let mut keep = Vec::new();
    // What each surface is: two names for one thing are probed once.
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let ty = surface::by_name(sp.type_name).expect("plan holds known types");
        let real = ty.open(&sp.settings);
        let same_as = real
            .as_ref()
            .ok()
            .and_then(|r| r.identity())
            .and_then(|id| match seen.get(&id) {
                Some(first) => Some(first.clone()),
                None => {
                    seen.insert(id, sp.name.clone());
                    None
                }
            });
        let control_settings = control_dir.map(|d| ty.control(&sp.settings, &d.join(&sp.name)));
        let broken = match (&real, &control_settings) {
            (Err(e), _) => Some(format!("surface could not be opened: {e}")),
            (_, Some(Err(e))) => Some(format!("control instance could not be set up: {e}")),
            _ => None,
        };
        let real = real.ok();
        let opened = OpenedSurface {
            index: i,
            name: &sp.name,
            ty,
            same_as,
            real: real.as_deref(),
            broken: &broken,
        };
        maker.surface_slots(&opened, &mut slots)?;
        if broken.is_none() {
            insts.push(Inst {
                surface: i,
                name: sp.name.clone(),
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
                    name: sp.name.clone(),
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

/// One configured surface as setup found it.
struct OpenedSurface<'a> {
    /// Its index in the plan.
    index: usize,
    name: &'a str,
    ty: &'static dyn surface::SurfaceType,
    /// The surface an earlier name already reaches, if any.
    same_as: Option<String>,
    /// The surface, if it opened.
    real: Option<&'a dyn surface::Instance>,
    /// Why it (or its control) could not be set up.
    broken: &'a Option<String>,
}

/// What every slot of a probe is made with.
struct SlotMaker<'a> {
    plan: &'a Plan,
    opts: &'a ProbeOptions,
    probe_id: &'a str,
    nonces: Nonces,
    /// The signed beacons runner-persistence plants (real and control).
    beacon: String,
    control_beacon: String,
}

impl SlotMaker<'_> {
    /// The slots of every carrier of `s`, added to `slots`.
    fn surface_slots(
        &self,
        s: &OpenedSurface<'_>,
        slots: &mut Vec<Slot>,
    ) -> Result<(), EngineError> {
        let persistence = s.real.and_then(|r| r.persistence());
        for c in s.ty.carriers() {
            let channel = format!("{}:{}", s.name, c.name);
            let skipped = match &s.same_as {
                Some(first) => Some(format!(
                    "the same as surface {} (another path to it, a bind mount): probed once, under that name",
                    escape_name(first)
                )),
                None => s.real.and_then(|r| r.unavailable(c.name)).or_else(|| {
                    // An in-job probe: run B is run A's own job.
                    (matches!(self.nonces, Nonces::Random) && s.ty.later_job_only(c.name))
                        .then(|| surface::LATER_JOB_ONLY.to_string())
                }),
            };
            let declaration = self.plan.declaration(&channel);
            let pos = declaration.map(|d| d.pos);
            let beacons = c.name == surface::RUNNER_PERSISTENCE;
            for (key, scope, declared) in variants(c, declaration) {
                let nonce = match self.nonces {
                    Nonces::Random => Nonce::generate().map_err(rng)?,
                    Nonces::Derived => self.opts.key.nonce(self.probe_id, s.name, &key),
                };
                slots.push(Slot {
                    surface: s.index,
                    carrier: c,
                    channel: channel.clone(),
                    declared_at: pos.filter(|_| declared),
                    key,
                    scope,
                    nonce,
                    control_nonce: Nonce::generate().map_err(rng)?,
                    beacon: beacons.then(|| self.beacon.clone()),
                    control_beacon: beacons.then(|| self.control_beacon.clone()),
                    persistence,
                    evidence: Evidence {
                        skipped: skipped.clone(),
                        broken: s.broken.clone(),
                        plant: None,
                        recover: None,
                        control_plant: None,
                        control_recover: None,
                        declared,
                        unconfirmed: None,
                        accept_unconfirmed: self.opts.allow_missing_receipt,
                    },
                });
            }
        }
        Ok(())
    }
}

/// The slots one carrier gets, as (key, scope, declared): one, or with a
/// scoped declaration one inside the scope and one outside it.
fn variants(
    c: &surface::Carrier,
    declaration: Option<&Declaration>,
) -> Vec<(String, Option<JobScope>, bool)> {
    // (key, scope, declared): inside a scope is declared, outside
    // it is not, so an open outside is a FAIL.
    match declaration {
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
    }
}

pub(super) fn active(s: &Slot) -> bool {
    s.evidence.broken.is_none() && s.evidence.skipped.is_none()
}

impl Setup {
    /// Run A's targets: the slots `which` picks, on the instances `on`
    /// picks (controls get control nonces and beacons).
    pub(super) fn plant_targets(
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
    /// what to look for. A control names its surface's target: run B reads
    /// it after, and only for what the surface did not give up (a control
    /// not read is `not-run`, which no PASS accepts: see
    /// [`crate::verdict::control_state`]).
    pub(super) fn recover_targets(&self) -> Vec<Target> {
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
                                scope: s.scope.clone(),
                            }),
                            _ => None,
                        }
                    })
                    .collect(),
                control_of: self
                    .insts
                    .iter()
                    .position(|i| inst.control && !i.control && i.surface == inst.surface),
                ..inst.target(id)
            })
            .collect()
    }

    /// Cleanup's targets: per instance, the entries to remove (newest
    /// first) and, for cleanup by probe id, the jobs whose plants to find.
    pub(super) fn cleanup_targets(
        &self,
        entries: &[Vec<Value>],
        find: &[Vec<PlantJob>],
    ) -> Vec<Target> {
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
    pub(super) fn job(&self, control: bool) -> PlantJob {
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

pub(super) fn fresh_runs(opts: &ProbeOptions) -> Result<Runs, EngineError> {
    let rng = |e: std::io::Error| EngineError(e.to_string());
    if opts.run_b_as.is_some() && !sys::is_root() {
        return Err(EngineError(
            "--run-b-as needs root (it switches run B to another user)".into(),
        ));
    }
    Ok(Runs {
        a: nonce::short_id().map_err(rng)?,
        b: nonce::short_id().map_err(rng)?,
        a_uid: None,
        b_uid: opts.run_b_as.map(|(u, _)| u),
    })
}
