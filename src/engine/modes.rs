//! The four ways to run the engine: an in-job `probe`, and the cross-job
//! `plant`, `recover` and `cleanup`.

use super::assemble::outcomes;
use super::runner::newest_first;
use super::setup::{active, fresh_runs, setup};
use super::{EngineError, Nonces, ProbeOptions, Runner, Slot, Workspace};
use crate::marker::Origin;
use crate::plan::Plan;
use crate::receipt::{Receipt, ReceiptPlant, ReceiptSurface};
use crate::report::{CrossJob, KeyKind, Leftover, Mode, Report, Tool};
use crate::surface::{PlantJob, PlantOutcome};
use crate::{nonce, receipt, surface, timefmt};
use serde_json::Value;

/// An in-job probe: plant (run A), recover (run B), verdicts, cleanup.
pub fn probe(plan: &Plan, opts: &ProbeOptions) -> Result<Report, EngineError> {
    let started_at = timefmt::now_rfc3339();
    let probe_id = nonce::short_id().map_err(|e| EngineError(e.to_string()))?;
    let (mut runs, ws) = (fresh_runs(opts)?, Workspace::make(opts, &probe_id)?);
    // Only here is run A this process's child: in a recover, run A was the
    // plant job, whose uid this process does not know.
    runs.a_uid = Some(crate::sys::euid());
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
                    (Some(r), _, _) => PlantOutcome::Error { reason: r.clone() },
                    (_, Some(r), _) => PlantOutcome::Unsupported { reason: r.clone() },
                    (_, _, Some(o)) => o.clone(),
                    (_, _, None) => PlantOutcome::Error {
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
        permissions: vec![],
        permissions_source: String::new(),
        mac: None,
        trust: None,
    }
    .signed(&opts.key))
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
                let ctx = surface::RunCtx {
                    probe_id,
                    key: &opts.key,
                    surface: &sp.name,
                };
                match ty.derive_needle(s.carrier.name, &ctx, &s.nonce, s.scope.as_ref()) {
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
/// The "surface" cleanup's account names for a probe directory left in
/// the work directory (no surface can be called so: names are
/// `[a-z0-9-]`).
pub const WORK_DIRECTORY: &str = "(work directory)";

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
    let mut cleanup = runner.clean(plan, &st, entries, find, None);
    cleanup.left.extend(left);
    // The private directories of this probe id's killed runs.
    let base = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let (swept, stays) = super::setup::sweep(&base, probe_id, &ws.root);
    cleanup.removed += swept as u64;
    cleanup.deleted += swept as u64;
    cleanup
        .left
        .extend(stays.into_iter().map(|(entry, reason)| Leftover {
            surface: WORK_DIRECTORY.into(),
            control: false,
            entry,
            reason,
        }));
    Ok(Report {
        cleanup,
        ..runner.report(Mode::Cleanup, plan, started_at)
    })
}
