//! The runs a session makes (A, B, cleanup) and how their results become
//! a report: run B and verdicts after run A, and cleanup of what A made.

use super::assemble::{answered, findings, notices, outcomes};
use super::child_run::{Then, run_child};
use super::setup::self_exe;
use super::{EngineError, ProbeOptions, Run, RunResult, Runner, Setup, Slot, Workspace};
use crate::child::Target;
use crate::plan::Plan;
use crate::report::{Cleanup, KeyKind, Leftover, Mode, Report, Runs, Summary, SurfaceFacts, Tool};
use crate::surface::{CleanupOutcome, PlantJob, PlantOutcome};
use crate::{escape, report, signals, surface, timefmt};
use serde_json::Value;

/// Runs that died or were stopped explain every step they never reported.
pub(super) fn explain_gaps(slots: &mut [Slot], a: Option<&str>, b: Option<&str>) {
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

impl<'a> Runner<'a> {
    pub(super) fn new(
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
    pub(super) fn report(&self, mode: Mode, plan: &Plan, started_at: String) -> Report {
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
            watch: None,
            coverage: None,
            trust: None,
        }
    }

    pub(super) fn run(&self, role: &'static str, targets: Vec<Target>) -> RunResult {
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
        self.start(&run, targets, None)
    }

    fn start(&self, run: &Run<'_>, targets: Vec<Target>, then: Option<Then<'_>>) -> RunResult {
        let key = self.opts.key.configured_hex();
        let timeout = self.opts.phase_timeout;
        run_child(run, &self.exe, self.probe_id, key, targets, then, timeout)
    }

    /// Run B, then in the same process, from A's directory, the cleanup
    /// of `cleanup` (B has A's identity here: no `--run-b-as`). B's
    /// `problem` counts for the findings only when B's own phase did not
    /// finish.
    fn run_b_then(&self, targets: Vec<Target>, cleanup: Vec<Target>) -> RunResult {
        let run = Run {
            role: "B",
            dir: &self.ws.b,
            id: &self.runs.b,
            as_user: None,
            interruptible: true,
        };
        let then = Then {
            role: "cleanup",
            targets: cleanup,
            dir: &self.ws.a,
            run_id: &self.runs.a,
        };
        self.start(&run, targets, Some(then))
    }

    /// Run B, verdicts, and cleanup of what run A made (newest first):
    /// the findings, notices and cleanup of `base`. `a_planted_all`: run A
    /// planted the real surfaces too, so its problems explain their gaps.
    pub(super) fn conclude(
        &self,
        plan: &Plan,
        st: &mut Setup,
        a: &RunResult,
        a_planted_all: bool,
        base: Report,
    ) -> Report {
        let entries = newest_first(&a.created, st.insts.len());
        // With A's identity, B cleans up after itself in the same process
        // once its recovery is done: a process fewer. Another identity for
        // B (`--run-b-as`) cannot remove what A made: cleanup is a run of
        // its own.
        let together = self.opts.run_b_as.is_none();
        let b = match (together, cleanup_work(st, entries.clone(), vec![])) {
            (true, Some((e, f))) => self.recover_then(a, st, st.cleanup_targets(&e, &f)),
            _ => self.recover(a, st),
        };
        for s in st.slots.iter_mut() {
            (s.evidence.recover, s.evidence.control_recover) = outcomes(&b.recovered, &st.insts, s);
        }
        let a_problem = a.problem.as_deref().filter(|_| a_planted_all);
        let b_problem = b.problem.as_deref().filter(|_| !b.first_phase_done);
        explain_gaps(&mut st.slots, a_problem, b_problem);
        let findings = findings(plan, &st.slots);
        let mut surfaces = base.surfaces.clone();
        answered(plan, &st.slots, &mut surfaces);
        let done = b.first_phase_done.then_some(&b);
        let cleanup = self.clean(plan, st, entries, vec![], done);
        Report {
            surfaces,
            summary: Summary::of(&findings),
            findings,
            notices: notices(plan, st, &b),
            cleanup,
            finished_at: timefmt::now_rfc3339(),
            ..base
        }
    }

    /// Run B, unless run A had a problem or someone asked us to stop.
    pub(super) fn recover(&self, a: &RunResult, setup: &Setup) -> RunResult {
        match stopped(a) {
            Some(p) => RunResult {
                problem: Some(p),
                ..RunResult::default()
            },
            None => self.run("B", setup.recover_targets()),
        }
    }

    /// As [`Runner::recover`], with `cleanup` run by B once it is done.
    fn recover_then(&self, a: &RunResult, setup: &Setup, cleanup: Vec<Target>) -> RunResult {
        match stopped(a) {
            Some(p) => RunResult {
                problem: Some(p),
                ..RunResult::default()
            },
            None => self.run_b_then(setup.recover_targets(), cleanup),
        }
    }

    /// The cleanup B's second phase did not finish: the entries it did
    /// not report go to a cleanup run of their own; the result holds both,
    /// by the entries' indexes in `entries`.
    fn finish_cleanup(&self, setup: &Setup, entries: &[Vec<Value>], b: &RunResult) -> RunResult {
        let mut rest: Vec<Vec<Value>> = vec![Vec::new(); entries.len()];
        let mut index: Vec<Vec<usize>> = vec![Vec::new(); entries.len()];
        for (id, list) in entries.iter().enumerate() {
            for (i, e) in list.iter().enumerate() {
                if !b.cleaned.contains_key(&(id, i)) {
                    rest[id].push(e.clone());
                    index[id].push(i);
                }
            }
        }
        let mut cleaned = b.cleaned.clone();
        let mut problem = None;
        if rest.iter().any(|l| !l.is_empty()) {
            let c = self.run("cleanup", setup.cleanup_targets(&rest, &[]));
            for ((id, i), outcome) in c.cleaned {
                if let Some(&orig) = index.get(id).and_then(|v| v.get(i)) {
                    cleaned.insert((id, orig), outcome);
                }
            }
            problem = c.problem;
        }
        RunResult {
            cleaned,
            problem,
            found_left: b.found_left.clone(),
            find_failed: b.find_failed.clone(),
            ..RunResult::default()
        }
    }

    /// Removes `entries` (per instance, in order) and, for cleanup by probe
    /// id, whatever the instances find of `find`; returns what happened.
    /// `done`: a run that already cleaned (B's second phase); what it did
    /// not report (it was killed, or timed out) gets a cleanup run now.
    pub(super) fn clean(
        &self,
        plan: &Plan,
        setup: &Setup,
        entries: Vec<Vec<Value>>,
        find: Vec<Vec<PlantJob>>,
        done: Option<&RunResult>,
    ) -> Cleanup {
        let mut cleanup = Cleanup::default();
        let Some((entries, find)) = cleanup_work(setup, entries, find) else {
            return cleanup;
        };
        let c = match done {
            Some(b) if b.problem.is_none() => RunResult {
                cleaned: b.cleaned.clone(),
                found_left: b.found_left.clone(),
                find_failed: b.find_failed.clone(),
                ..RunResult::default()
            },
            Some(b) => self.finish_cleanup(setup, &entries, b),
            None => self.run("cleanup", setup.cleanup_targets(&entries, &find)),
        };
        // Per instance: the given entries, then the ones it found.
        let mut all: Vec<Vec<Value>> = entries;
        all.resize(setup.insts.len(), Vec::new());
        for (id, entry) in &c.created {
            if let Some(list) = all.get_mut(*id) {
                list.push(entry.clone());
            }
        }
        for (id, entry, reason) in &c.found_left {
            cleanup.left.push(Leftover {
                surface: plan.surfaces[setup.insts[*id].surface].name.clone(),
                control: setup.insts[*id].control,
                entry: escape::line(entry),
                reason: reason.clone(),
            });
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
                let leftover = |reason| Leftover {
                    surface: plan.surfaces[inst.surface].name.clone(),
                    control: inst.control,
                    entry: inst
                        .opened
                        .as_ref()
                        .map(|s| s.describe(entry))
                        .unwrap_or_else(|| escape::line(&entry.to_string())),
                    reason,
                };
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
                        cleanup
                            .deleted_on
                            .insert(plan.surfaces[inst.surface].name.clone());
                    }
                    CleanupOutcome::Gone if !inst.control => {
                        cleanup.removed += 1;
                        cleanup.already_gone += 1;
                    }
                    CleanupOutcome::Removed | CleanupOutcome::Gone | CleanupOutcome::Superseded => {
                    }
                    CleanupOutcome::Kept { reason } => cleanup.kept.push(leftover(reason)),
                    CleanupOutcome::Left { reason } => cleanup.left.push(leftover(reason)),
                    CleanupOutcome::Foreign { reason } => cleanup.refused.push(leftover(reason)),
                }
            }
        }
        // One thing, one line: an entry and the intent journalled before
        // it (or a receipt naming a thing twice) are the same thing left
        // for the same reason.
        for list in [&mut cleanup.left, &mut cleanup.kept, &mut cleanup.refused] {
            let mut seen: Vec<Leftover> = Vec::new();
            list.retain(|l| {
                let first = !seen.contains(l);
                if first {
                    seen.push(l.clone());
                }
                first
            });
        }
        cleanup
    }
}

/// A run's created entries per instance, newest first (cleanup's order).
pub(super) fn newest_first(created: &[(usize, Value)], n: usize) -> Vec<Vec<Value>> {
    let mut entries: Vec<Vec<Value>> = vec![Vec::new(); n];
    for (id, entry) in created.iter().rev() {
        if let Some(list) = entries.get_mut(*id) {
            list.push(entry.clone());
        }
    }
    entries
}

/// Why run B must not start: run A's problem, or a signal.
fn stopped(a: &RunResult) -> Option<String> {
    let stop = signals::received().map(|s| format!("interrupted by {s}"));
    a.problem.clone().or(stop)
}

/// Per instance: entries to remove, and jobs whose plants to find.
pub(super) type Work = (Vec<Vec<Value>>, Vec<Vec<PlantJob>>);

/// What cleanup has to do: `entries` and `find` without the controls'
/// (their directories go whole with the probe's, their loopback services
/// with the process, so a control entry is never sent, never left); none
/// when nothing is left.
pub(super) fn cleanup_work(
    setup: &Setup,
    entries: Vec<Vec<Value>>,
    find: Vec<Vec<PlantJob>>,
) -> Option<Work> {
    let (mut entries, mut find) = (entries, find);
    for (id, inst) in setup.insts.iter().enumerate() {
        if inst.control {
            if let Some(e) = entries.get_mut(id) {
                e.clear();
            }
            if let Some(f) = find.get_mut(id) {
                f.clear();
            }
        }
    }
    let nothing = entries.iter().all(Vec::is_empty) && find.iter().all(Vec::is_empty);
    (!nothing).then_some((entries, find))
}
