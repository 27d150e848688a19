//! The side of runs A and B (and of cleanup, which runs as A): the
//! internal `__run` subcommand.
//!
//! The engine re-executes the runwarden binary with an environment cut to
//! PATH, HOME, TMPDIR and RUNWARDEN_RUN_ID, sends one [`Request`] on stdin
//! and reads [`Event`]s, one JSON object a line, on stdout. Every entry run
//! A creates is reported (and flushed) before anything else happens to it,
//! so the engine can clean up even after A is killed.

use crate::fault::Fault;
use crate::surface::{
    self, CleanupOutcome, Notice, PlantJob, PlantOutcome, RecoverOutcome, RunCtx, Wanted,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::io::{Read, Write};

/// One instance (a configured surface or its control) for a run to work on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Target {
    pub id: usize,
    /// The configured name of the surface this instance is (or the
    /// control of): see [`RunCtx::surface`].
    pub surface: String,
    pub type_name: String,
    pub settings: Value,
    /// For run A: the carriers to plant with their nonces.
    #[serde(default)]
    pub plant: Vec<PlantJob>,
    /// For run B: the carriers to recover with what to look for.
    #[serde(default)]
    pub recover: Vec<Wanted>,
    /// For the cleanup run: entries run A reported creating, to remove in
    /// this order.
    #[serde(default)]
    pub cleanup: Vec<Value>,
    /// For cleanup by probe id: the jobs whose plants to find (reported as
    /// `Created`) and then remove after `cleanup`'s entries.
    #[serde(default)]
    pub find: Vec<PlantJob>,
    /// For run B, on a control: the id of the target it is the control
    /// of. The control is then read after that target, and only for the
    /// carriers it did not find: a carrier found is a FAIL on the finding
    /// alone, and its control has nothing to prove (the engine reports it
    /// `not-run`; a PASS still needs the control recovered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_of: Option<usize>,
    /// A control instance: its work yields the processor to the
    /// configured surfaces' (see [`crate::sys::yield_to_others`]).
    #[serde(default)]
    pub control: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    /// The orchestrator's pid: the run dies with it (and exits at once
    /// if it is already gone).
    #[serde(default)]
    pub parent: Option<u32>,
    pub probe_id: String,
    /// The configured marker key in hex, to verify beacons (stdin only:
    /// never on a command line, in the environment or in any output).
    #[serde(default)]
    pub key: Option<String>,
    pub targets: Vec<Target>,
    /// Targets to run once every one of `targets` is done, after a
    /// [`Event::Phase`]: cleanup after run B's recovery, in B's process
    /// when B has A's identity (a process fewer per probe).
    #[serde(default)]
    pub then: Vec<Target>,
    /// The working directory `then` runs from: run A's, as a cleanup run
    /// of its own would have (a surface path such as `/proc/self/cwd`
    /// resolves from it).
    #[serde(default)]
    pub then_dir: Option<std::path::PathBuf>,
    /// The run id `then` runs as (run A's, like its directory).
    #[serde(default)]
    pub then_run_id: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    Created {
        target: usize,
        entry: Value,
    },
    Planted {
        target: usize,
        key: String,
        outcome: PlantOutcome,
    },
    Recovered {
        target: usize,
        key: String,
        outcome: RecoverOutcome,
    },
    /// Something recovery saw besides its needles (see [`Notice`]).
    Notice {
        target: usize,
        notice: Notice,
    },
    /// `Target::find` could not look (e.g. the surface is unreachable).
    FindFailed {
        target: usize,
        reason: String,
    },
    /// `Target::find` saw something under a plant's name that is not
    /// runwarden's: `entry` (shown) stays, for `reason`.
    FoundLeft {
        target: usize,
        entry: String,
        reason: String,
    },
    /// One entry of `Target::cleanup` (then of what `find` found), by its
    /// index there.
    Cleaned {
        target: usize,
        index: usize,
        outcome: CleanupOutcome,
    },
    /// Every one of `Request::targets` is done; `Request::then` starts.
    Phase,
    Done,
}

/// Writes one event line and flushes it at once: a journal line still in a
/// buffer when the process is killed would be a leftover nobody knows of.
fn emit(e: &Event) {
    let line = serde_json::to_string(e).expect("event serializes");
    let mut out = std::io::stdout().lock();
    // If the engine has gone away there is nobody left to tell.
    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
}

/// Runs one request; returns the process exit code.
pub fn run() -> i32 {
    // The modes runwarden asks for (0644 files, 0755 dirs) are the modes it
    // gets: a colluding writer makes its message as readable as it can.
    crate::sys::set_umask(0o022);
    // A signal (the orchestrator's SIGTERM) is remembered, not obeyed at
    // once: run A stops between carriers, its journal complete.
    crate::signals::install();
    // Dies with the orchestrator from here on (whether it was already gone
    // is checked once the request names it).
    if let Err(e) = crate::sys::die_with_parent_thread() {
        eprintln!("runwarden: run: {e}");
        return 2;
    }
    // The engine starts a run without a working directory (see
    // `engine::child_run`): its directory is its HOME.
    if let Some(home) = std::env::var_os("HOME")
        && let Err(e) = std::env::set_current_dir(&home)
    {
        eprintln!("runwarden: run: cannot enter its directory: {e}");
        return 2;
    }
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("runwarden: run: cannot read request: {e}");
        return 2;
    }
    let req: Request = match serde_json::from_str(&input) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("runwarden: run: bad request: {e}");
            return 2;
        }
    };
    if req
        .parent
        .is_some_and(|p| std::os::unix::process::parent_id() != p)
    {
        eprintln!("runwarden: run: the probe that started it is gone");
        return 2;
    }
    let key = crate::marker::Key::from_hex(req.key.as_deref());
    let ctx = RunCtx {
        probe_id: &req.probe_id,
        key: &key,
        surface: "",
    };
    // Targets (each instance, the control's too) are independent: they run
    // side by side, at most WORKERS at a time, so a probe's wall time is
    // its slowest instance rather than their sum. Each thread opens its own
    // instance; events are whole lines, written under stdout's lock.
    run_all(&req.targets, &ctx);
    // The second phase only from where it must run; without it the
    // engine gives `then` a run of its own.
    let moved = req.then_dir.as_ref().is_none_or(|d| {
        // As run A's own cleanup run would be: its directory, HOME,
        // TMPDIR and run id.
        let ok = std::env::set_current_dir(d).is_ok();
        if ok {
            // Single-threaded, as set_env_single_threaded requires: every
            // worker thread has been joined (the scope of `run_all` ended):
            // this thread is the process's only one, so nothing reads the
            // environment while it changes.
            crate::sys::set_env_single_threaded("HOME", d);
            crate::sys::set_env_single_threaded("TMPDIR", d.join("tmp"));
            if let Some(id) = &req.then_run_id {
                crate::sys::set_env_single_threaded("RUNWARDEN_RUN_ID", id);
            }
        }
        ok
    });
    if !req.then.is_empty() && moved {
        emit(&Event::Phase);
        run_all(&req.then, &ctx);
    }
    emit(&Event::Done);
    0
}

/// Runs `targets`, at most [`WORKERS`] at a time, until all are done.
/// Controls are taken last (see [`Target::control_of`]), so that a
/// worker waiting for a control's surface never waits for a target no
/// worker has taken.
fn run_all(targets: &[Target], ctx: &RunCtx<'_>) {
    let mut order: Vec<&Target> = targets.iter().collect();
    order.sort_by_key(|t| t.control || t.control_of.is_some());
    let found = FoundSoFar::new(targets);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = targets.len().min(WORKERS);
    let work = || {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let Some(t) = order.get(i) else { break };
            run_target(t, ctx, &found);
        }
    };
    // This thread is one of the workers: a thread fewer to start.
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(work);
        }
        work();
    });
}

/// What each target a control waits for found, once its recovery is over.
struct FoundSoFar {
    /// Per awaited target id: `None` until its recovery is over, then the
    /// keys it found.
    done: std::sync::Mutex<std::collections::HashMap<usize, Option<HashSet<String>>>>,
    over: std::sync::Condvar,
}

impl FoundSoFar {
    fn new(targets: &[Target]) -> FoundSoFar {
        // Only targets of this request are waited for (a control whose
        // surface is elsewhere is read in full).
        let ids: HashSet<usize> = targets.iter().map(|t| t.id).collect();
        let awaited = targets
            .iter()
            .filter_map(|t| t.control_of)
            .filter(|id| ids.contains(id))
            .map(|id| (id, None))
            .collect();
        FoundSoFar {
            done: std::sync::Mutex::new(awaited),
            over: std::sync::Condvar::new(),
        }
    }

    /// Target `id` is over, having found `keys` (a panic counts as over
    /// with nothing found: see [`Over`]).
    fn finish(&self, id: usize, keys: HashSet<String>) {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = done.get_mut(&id) {
            slot.get_or_insert(keys);
            self.over.notify_all();
        }
    }

    /// The keys target `id` found, once it is over (nothing when no
    /// target of this request has that id).
    fn wait(&self, id: usize) -> HashSet<String> {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match done.get(&id) {
                None => return HashSet::new(),
                Some(Some(keys)) => return keys.clone(),
                Some(None) => done = self.over.wait(done).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }
}

/// Marks a target over when dropped, whatever happened to it (a return
/// before recovery, a panic): a control waiting for it never hangs.
struct Over<'a> {
    found: &'a FoundSoFar,
    id: usize,
    keys: HashSet<String>,
}

impl Drop for Over<'_> {
    fn drop(&mut self) {
        self.found.finish(self.id, std::mem::take(&mut self.keys));
    }
}

/// How many targets run at once: enough for a surface and its control
/// (and a few network surfaces) to overlap, bounded so that a config of
/// many surfaces does not start them all together.
const WORKERS: usize = 4;

/// Whether a control reads `w` at once, beside its surface, rather than
/// after it (for what the surface did not give up): a transient carrier
/// (a branch deleted again, a request that is gone once answered) is
/// the one an open surface most often does not give up, so its control
/// is read anyway, and is read sooner. This only orders the reads: no
/// verdict rests on it.
fn read_first(ty: &dyn surface::SurfaceType, w: &Wanted) -> bool {
    ty.carriers()
        .iter()
        .any(|c| c.name == w.carrier && c.persistence == surface::Persistence::Transient)
}

/// Recovers `wanted` on `inst` (target `id`), emitting each outcome and
/// noting in `found` the keys it found.
fn recover(
    inst: &dyn surface::Instance,
    ctx: &RunCtx<'_>,
    id: usize,
    wanted: &[Wanted],
    found: &mut HashSet<String>,
) {
    if wanted.is_empty() {
        return;
    }
    let mut notice = |notice: Notice| emit(&Event::Notice { target: id, notice });
    let outcomes = inst.recover(ctx, wanted, &mut notice);
    for (w, outcome) in wanted.iter().zip(outcomes) {
        if matches!(outcome, RecoverOutcome::Found { .. }) {
            found.insert(w.key.clone());
        }
        emit(&Event::Recovered {
            target: id,
            key: w.key.clone(),
            outcome,
        });
    }
}

/// Every outcome of target `t`, whose surface could not be opened: an
/// error for `reason`.
fn unopened(t: &Target, reason: &str) {
    let reason = reason.to_string();
    for job in &t.plant {
        let outcome = PlantOutcome::Error {
            reason: reason.clone(),
        };
        emit(&Event::Planted {
            target: t.id,
            key: job.key.clone(),
            outcome,
        });
    }
    for w in &t.recover {
        let outcome = RecoverOutcome::Error {
            reason: reason.clone(),
        };
        emit(&Event::Recovered {
            target: t.id,
            key: w.key.clone(),
            outcome,
        });
    }
    if !t.find.is_empty() {
        emit(&Event::FindFailed {
            target: t.id,
            reason: reason.clone(),
        });
    }
    for index in 0..t.cleanup.len() {
        let outcome = CleanupOutcome::Left {
            reason: reason.clone(),
        };
        emit(&Event::Cleaned {
            target: t.id,
            index,
            outcome,
        });
    }
}

/// Plants, recovers, finds and cleans up one target, emitting each
/// outcome as it comes. A control is read in two parts
/// ([`Target::control_of`], [`read_first`]).
fn run_target(t: &Target, ctx: &RunCtx<'_>, found: &FoundSoFar) {
    if !t.control {
        return run_one(t, ctx, found);
    }
    // A control's work (and every process it starts) yields the processor
    // to the surfaces': on a runner's two cores, the real surface's pushes
    // and reads are what a probe waits for. On a thread of its own, so the
    // lower priority ends with it. A refusal only costs the ordering.
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let _ = crate::sys::yield_to_others();
            run_one(t, ctx, found);
        });
        // A panic there is one here, as it was before.
        if let Err(p) = worker.join() {
            std::panic::resume_unwind(p);
        }
    });
}

/// [`run_target`] on this thread.
fn run_one(t: &Target, ctx: &RunCtx<'_>, found: &FoundSoFar) {
    let mut over = Over {
        found,
        id: t.id,
        keys: HashSet::new(),
    };
    let ctx = &RunCtx {
        probe_id: ctx.probe_id,
        key: ctx.key,
        surface: &t.surface,
    };
    let ty = surface::by_name(&t.type_name);
    let opened = ty
        .ok_or_else(|| format!("unknown surface type {}", t.type_name))
        .and_then(|ty| ty.open(&t.settings).map_err(Fault::into_reason));
    let inst = match opened {
        Ok(i) => i,
        Err(reason) => return unopened(t, &reason),
    };
    if !t.plant.is_empty() {
        let mut created = |entry: Value| {
            emit(&Event::Created {
                target: t.id,
                entry,
            })
        };
        let outcomes = inst.plant_all(ctx, &t.plant, &mut created);
        for (job, outcome) in t.plant.iter().zip(outcomes) {
            emit(&Event::Planted {
                target: t.id,
                key: job.key.clone(),
                outcome,
            });
        }
    }
    let (first, then): (Vec<Wanted>, Vec<Wanted>) = match (t.control_of, ty) {
        (Some(_), Some(ty)) => t.recover.iter().cloned().partition(|w| read_first(ty, w)),
        _ => (t.recover.clone(), vec![]),
    };
    recover(&*inst, ctx, t.id, &first, &mut over.keys);
    if let Some(of) = t.control_of {
        let skip = found.wait(of);
        let then: Vec<Wanted> = then
            .into_iter()
            .filter(|w| !skip.contains(&w.key))
            .collect();
        recover(&*inst, ctx, t.id, &then, &mut over.keys);
    }
    // Its control need not wait for the rest (this run's cleanup is a
    // phase of its own).
    drop(over);
    let mut entries = t.cleanup.clone();
    if !t.find.is_empty() {
        match inst.find_planted(ctx, &t.find) {
            Ok(surface::Found { ours: found, left }) => {
                for (entry, reason) in left {
                    emit(&Event::FoundLeft {
                        target: t.id,
                        entry,
                        reason,
                    });
                }
                for entry in found {
                    emit(&Event::Created {
                        target: t.id,
                        entry: entry.clone(),
                    });
                    entries.push(entry);
                }
            }
            Err(f) => emit(&Event::FindFailed {
                target: t.id,
                reason: f.into_reason(),
            }),
        }
    }
    for (index, outcome) in surface::cleanup_owned(&*inst, ctx, &entries)
        .into_iter()
        .enumerate()
    {
        emit(&Event::Cleaned {
            target: t.id,
            index,
            outcome,
        });
    }
}
