//! Verdict assembly: findings from the slots' evidence (the rules
//! themselves are `crate::verdict`), and the notices run B reported.

use super::{Inst, MAX_NOTICES, RunResult, Setup, Slot};
use crate::plan::{Location, Plan};
use crate::report::{Finding, NoticeRecord, SurfaceFacts};
use crate::surface::{NoticeKind, PlantOutcome, RecoverOutcome};
use crate::verdict::{self, Verdict};
use std::collections::HashMap;

/// What run B noticed on the configured surfaces (the control's beacons
/// are the control's business): the first [`MAX_NOTICES`] of each, then a
/// count of the rest.
pub(super) fn notices(plan: &Plan, st: &Setup, b: &RunResult) -> Vec<NoticeRecord> {
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

/// What the surfaces' own access control answered, added to each
/// surface's facts: the carriers whose write (run A) or read (run B) it
/// refused. Credentials are named by their variable in the other facts;
/// this says what they were allowed to do, never what they are.
pub(super) fn answered(plan: &Plan, slots: &[Slot], surfaces: &mut Vec<SurfaceFacts>) {
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let of = |refused: &dyn Fn(&Slot) -> bool| {
            let mut c: Vec<&str> = slots
                .iter()
                .filter(|s| s.surface == i && refused(s))
                .map(|s| s.carrier.name)
                .collect();
            c.dedup();
            c.join(", ")
        };
        let writes = of(&|s| matches!(s.evidence.plant, Some(PlantOutcome::Refused { .. })));
        let reads = of(&|s| matches!(s.evidence.recover, Some(RecoverOutcome::Denied { .. })));
        if writes.is_empty() && reads.is_empty() {
            continue;
        }
        let at = match surfaces.iter().position(|f| f.surface == sp.name) {
            Some(at) => at,
            None => {
                surfaces.push(SurfaceFacts {
                    surface: sp.name.clone(),
                    surface_type: sp.type_name.into(),
                    facts: Default::default(),
                });
                surfaces.len() - 1
            }
        };
        let facts = &mut surfaces[at].facts;
        if !writes.is_empty() {
            facts.insert("writes-refused".into(), writes);
        }
        if !reads.is_empty() {
            facts.insert("reads-refused".into(), reads);
        }
    }
}

/// One finding per slot, from its evidence.
pub(super) fn findings(plan: &Plan, slots: &[Slot]) -> Vec<Finding> {
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
            declared_reason: s
                .declared_at
                .and_then(|_| plan.declared.get(&s.channel))
                .and_then(|d| d.reason.clone()),
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
            observed: vec![],
            observed_omitted: 0,
        });
    }
    findings
}

/// A slot's outcomes from one run's report: (configured surface, control).
pub(super) fn outcomes<T: Clone>(
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
