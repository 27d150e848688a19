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
use crate::nonce::{self, Nonce};
use crate::plan::{Declaration, Location, Plan};
use crate::report::{self, Cleanup, Finding, Leftover, Report, Runs, Summary, Tool};
use crate::surface::{
    self, CleanupOutcome, JobScope, PlantJob, PlantOutcome, RecoverOutcome, Surface, Wanted,
};
use crate::verdict::{self, Evidence, Verdict};
use crate::{signals, sys, timefmt};
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
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            work_dir: None,
            run_b_as: None,
            phase_timeout: Duration::from_secs(300),
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
    evidence: Evidence,
}

/// What one child run reported.
#[derive(Default)]
struct RunResult {
    created: Vec<(usize, Value)>,
    planted: HashMap<(usize, String), PlantOutcome>,
    recovered: HashMap<(usize, String), RecoverOutcome>,
    cleaned: HashMap<(usize, usize), CleanupOutcome>,
    /// Set when the run did not finish normally.
    problem: Option<String>,
}

pub fn probe(plan: &Plan, opts: &ProbeOptions) -> Result<Report, EngineError> {
    let started_at = timefmt::now_rfc3339();
    let rng = |e: std::io::Error| EngineError(e.to_string());
    let probe_id = nonce::short_id().map_err(rng)?;
    let runs = Runs {
        a: nonce::short_id().map_err(rng)?,
        b: nonce::short_id().map_err(rng)?,
        b_uid: opts.run_b_as.map(|(u, _)| u),
    };
    if opts.run_b_as.is_some() && !sys::is_root() {
        return Err(EngineError(
            "--run-b-as needs root (it switches run B to another user)".into(),
        ));
    }
    let exe = self_exe()?;

    // The probe directory: traversable by run B even as another user (0711),
    // with A's and B's own directories private to each.
    let base = opts.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let work = base.join(format!("runwarden-{probe_id}"));
    mkdir_mode(&work, 0o711)?;
    let result = probe_in(plan, opts, &exe, &work, &probe_id, &runs);
    // Our own directory, made fresh above; remove_dir_all never follows
    // symlinks inside it.
    if let Err(e) = std::fs::remove_dir_all(&work) {
        eprintln!(
            "runwarden: warning: could not remove the probe directory {}: {e}",
            work.display()
        );
    }
    let (findings, cleanup) = result?;
    Ok(Report {
        schema: report::SCHEMA.into(),
        tool: Tool::default(),
        probe_id,
        started_at,
        finished_at: timefmt::now_rfc3339(),
        config: plan.source.clone(),
        runs,
        summary: Summary::of(&findings),
        findings,
        cleanup,
    })
}

fn probe_in(
    plan: &Plan,
    opts: &ProbeOptions,
    exe: &Path,
    work: &Path,
    probe_id: &str,
    runs: &Runs,
) -> Result<(Vec<Finding>, Cleanup), EngineError> {
    let (dir_a, dir_b, dir_control) = (work.join("a"), work.join("b"), work.join("control"));
    for d in [&dir_a, &dir_b] {
        mkdir_mode(d, 0o700)?;
        mkdir_mode(&d.join("tmp"), 0o700)?;
    }
    mkdir_mode(&dir_control, 0o755)?;
    if let Some((uid, gid)) = opts.run_b_as {
        for d in [dir_b.clone(), dir_b.join("tmp")] {
            sys::lchown(&d, uid, gid)
                .map_err(|e| EngineError(format!("chown {}: {e}", d.display())))?;
        }
    }

    // Setup: open every surface and make its control. A surface that
    // breaks here gets ERROR on all its carriers; the others go on.
    let mut insts: Vec<Inst> = Vec::new();
    let mut slots: Vec<Slot> = Vec::new();
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let ty = surface::by_name(sp.type_name).expect("plan holds known types");
        let real = ty.open(&sp.settings);
        let control_settings = ty.control(&sp.settings, &dir_control.join(&sp.name));
        let broken = match (&real, &control_settings) {
            (Err(e), _) => Some(format!("surface could not be opened: {e}")),
            (_, Err(e)) => Some(format!("control instance could not be set up: {e}")),
            _ => None,
        };
        let real = real.ok();
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
            for (key, scope, declared) in variants {
                slots.push(Slot {
                    surface: i,
                    carrier: c,
                    channel: channel.clone(),
                    declared_at: pos.filter(|_| declared),
                    key,
                    scope,
                    nonce: Nonce::generate().map_err(|e| EngineError(e.to_string()))?,
                    control_nonce: Nonce::generate().map_err(|e| EngineError(e.to_string()))?,
                    evidence: Evidence {
                        skipped: skipped.clone(),
                        broken: broken.clone(),
                        plant: None,
                        recover: None,
                        control_plant: None,
                        control_recover: None,
                        declared,
                    },
                });
            }
        }
        if broken.is_none() {
            let control_settings = control_settings.expect("checked above");
            let control = ty.open(&control_settings).ok();
            insts.push(Inst {
                surface: i,
                control: false,
                type_name: ty.name(),
                settings: sp.settings.clone(),
                opened: real,
            });
            insts.push(Inst {
                surface: i,
                control: true,
                type_name: ty.name(),
                settings: control_settings,
                opened: control,
            });
        }
    }
    let active = |s: &Slot| s.evidence.broken.is_none() && s.evidence.skipped.is_none();

    // Plant: run A.
    let targets_a: Vec<Target> = insts
        .iter()
        .enumerate()
        .map(|(id, inst)| Target {
            plant: slots
                .iter()
                .filter(|s| s.surface == inst.surface && active(s))
                .map(|s| PlantJob {
                    key: s.key.clone(),
                    carrier: s.carrier.name.to_string(),
                    nonce: if inst.control {
                        s.control_nonce
                    } else {
                        s.nonce
                    },
                    scope: s.scope.clone(),
                })
                .collect(),
            ..inst.target(id)
        })
        .collect();
    let run_a = Run {
        role: "A",
        dir: &dir_a,
        id: &runs.a,
        as_user: None,
        interruptible: true,
    };
    let a = run_child(&run_a, exe, probe_id, targets_a, opts.phase_timeout);
    for s in slots.iter_mut() {
        (s.evidence.plant, s.evidence.control_plant) = outcomes(&a.planted, &insts, s);
    }

    // Recover: run B, only if A finished and nobody asked us to stop.
    let mut b = RunResult::default();
    let stop = signals::received().map(|s| format!("interrupted by {s}"));
    if let Some(p) = a.problem.clone().or(stop) {
        b.problem = Some(p);
    } else {
        let targets_b: Vec<Target> = insts
            .iter()
            .enumerate()
            .map(|(id, inst)| Target {
                recover: slots
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
            .collect();
        let run_b = Run {
            role: "B",
            dir: &dir_b,
            id: &runs.b,
            as_user: opts.run_b_as,
            interruptible: true,
        };
        b = run_child(&run_b, exe, probe_id, targets_b, opts.phase_timeout);
    }
    for s in slots.iter_mut() {
        (s.evidence.recover, s.evidence.control_recover) = outcomes(&b.recovered, &insts, s);
    }

    // Verdicts. A run that died or was stopped explains every step it
    // never reported.
    let mut findings = Vec::new();
    for s in slots.iter_mut() {
        let ev = &mut s.evidence;
        if ev.broken.is_none() && ev.skipped.is_none() {
            let planted = matches!(ev.plant, Some(PlantOutcome::Planted { .. }));
            if ev.plant.is_none() && a.problem.is_some() {
                ev.broken = a.problem.clone();
            } else if planted && ev.recover.is_none() && b.problem.is_some() {
                ev.broken = b.problem.clone();
            }
        }
        let (v, detail) = verdict::decide(ev);
        let sp = &plan.surfaces[s.surface];
        let persistence = match &ev.plant {
            Some(PlantOutcome::Planted {
                persistence: Some(p),
                ..
            }) => *p,
            _ => s.carrier.persistence,
        };
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

    // Cleanup: exactly what A reported creating, newest first, removed by
    // a third child run with A's identity and the same timeout (a surface
    // that hangs must not hang the probe). A signal does not stop it.
    let mut entries: Vec<Vec<Value>> = vec![Vec::new(); insts.len()];
    for (id, entry) in a.created.iter().rev() {
        entries[*id].push(entry.clone());
    }
    let mut cleanup = Cleanup::default();
    if entries.iter().any(|e| !e.is_empty()) {
        let targets_c: Vec<Target> = insts
            .iter()
            .enumerate()
            .map(|(id, inst)| Target {
                cleanup: entries[id].clone(),
                ..inst.target(id)
            })
            .collect();
        let run_c = Run {
            role: "cleanup",
            dir: &dir_a,
            id: &runs.a,
            as_user: None,
            interruptible: false,
        };
        let c = run_child(&run_c, exe, probe_id, targets_c, opts.phase_timeout);
        for (id, list) in entries.iter().enumerate() {
            let inst = &insts[id];
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
                    // whole below; only the user's surfaces count.
                    CleanupOutcome::Removed | CleanupOutcome::Gone if !inst.control => {
                        cleanup.removed += 1
                    }
                    CleanupOutcome::Removed | CleanupOutcome::Gone => {}
                    CleanupOutcome::Left { reason } => cleanup.left.push(Leftover {
                        surface: plan.surfaces[inst.surface].name.clone(),
                        control: inst.control,
                        entry: inst
                            .opened
                            .as_ref()
                            .map(|s| s.describe(entry))
                            .unwrap_or_else(|| entry.to_string()),
                        reason,
                    }),
                }
            }
        }
    }
    Ok((findings, cleanup))
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

/// Runs one child (A or B) to completion, a timeout or a signal, and
/// collects what it reported. Never fails: problems land in `problem`.
fn run_child(
    run: &Run<'_>,
    exe: &Path,
    probe_id: &str,
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
        .stderr(Stdio::inherit())
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
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => match serde_json::from_str::<Event>(&line) {
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
                Ok(Event::Done) => done = true,
                Err(e) => killed = Some(format!("run {role} sent a malformed event: {e}")),
            },
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if killed.is_none() {
            if let Some(sig) = signals::received().filter(|_| interruptible) {
                killed = Some(format!("interrupted by {sig} during run {role}"));
            } else if Instant::now() >= deadline {
                killed = Some(format!("run {role} timed out after {}s", timeout.as_secs()));
            }
        }
        // Whatever stopped trusting the run stops the run.
        if killed.is_some() {
            let _ = child.kill();
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
                let _ = child.kill();
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
                if let Ok(Event::Created { target, entry }) = serde_json::from_str::<Event>(&line) {
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
