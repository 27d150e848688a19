//! One watch, start to report: every configured surface's snapshot, the
//! canaries armed, (the caller runs the command), the canaries' reads
//! collected and the canaries removed, every surface's second snapshot
//! diffed against the first as it is taken, and the findings.
//!
//! The canaries are placed after the first snapshot and removed before
//! the second, so runwarden's own looks never read them and they are in
//! neither snapshot; the directories they were placed in changed their
//! mtime by runwarden's doing, which is not reported.

use super::canary::{self, Armed, Detector, Spec};
use super::diff::{Before, Change, ChangeKind, Differ};
use super::snapshot::{Reader, SnapshotError, WatchCtx, Writer};
use crate::marker::Key;
use crate::plan::{Location, Plan};
use crate::report::{
    self, CANARY_TYPE, Canaries, Cleanup, Finding, KeyKind, Leftover, Mode, Observation, Report,
    Runs, Summary, Tool,
};
use crate::surface::{self, Persistence, Surface, SurfaceType};
use crate::timefmt;
use crate::verdict::{self, Control, Watched};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a watch is asked to do besides the config.
#[derive(Debug, Default)]
pub struct Options {
    /// Where to keep the snapshots (default: the system's temp directory).
    pub work_dir: Option<PathBuf>,
    /// The canaries to place (none: no canary findings).
    pub canaries: Vec<Spec>,
    /// A detector to use instead of the best this process may (tests).
    pub detector: Option<Detector>,
}

/// How the watched command ended.
#[derive(Debug, Default, Clone)]
pub struct Ended {
    /// Its arguments, redacted when the report is made.
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<String>,
    pub signal_number: Option<i32>,
}

/// One configured surface: opened, and its first snapshot.
struct Inst {
    surface: Result<Box<dyn Surface>, String>,
    before: Result<(PathBuf, Before), SnapshotError>,
}

/// The watch's own directory (its snapshots): removed when the watch is
/// over, kept when it is saved for another process to finish.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The file in the work directory a saved watch is resumed from.
const SAVED: &str = "watch.json";

/// What a watch saved for another process to finish (the action's post
/// step): nothing a snapshot holds, only where the snapshots are.
#[derive(Serialize, Deserialize)]
struct Saved {
    probe_id: String,
    started_at: String,
    command_started_at: String,
    /// Each surface's name and type, to check the config is the same.
    surfaces: Vec<(String, String)>,
    /// Each surface's first snapshot: `None` when it was taken.
    failed: Vec<Option<SnapshotError>>,
    canaries: Option<canary::Saved>,
    arm_failure: Option<String>,
    specs: Vec<(String, PathBuf)>,
}

/// A watch between its start and its report.
pub struct Watch<'p> {
    plan: &'p Plan,
    work: WorkDir,
    /// `command` (one command) or `job` (the action's steps).
    scope: &'static str,
    ctx: WatchCtx,
    insts: Vec<Inst>,
    armed: Option<Armed>,
    /// Canaries that could not be armed at all (no detector), with why.
    arm_failure: Option<String>,
    specs: Vec<Spec>,
    probe_id: String,
    started_at: String,
    command_started_at: String,
}

fn snapshot_error(e: std::io::Error) -> SnapshotError {
    SnapshotError::Failed(format!("writing the snapshot: {e}"))
}

/// Takes every surface's first snapshot, then arms the canaries.
pub fn start<'p>(plan: &'p Plan, opts: &Options) -> Result<Watch<'p>, String> {
    let started_at = timefmt::now_rfc3339();
    let probe_id = crate::nonce::short_id().map_err(|e| e.to_string())?;
    let mut b = tempfile::Builder::new();
    b.prefix("runwarden-watch-");
    let work = WorkDir {
        path: match &opts.work_dir {
            Some(d) => b.tempdir_in(d),
            None => b.tempdir(),
        }
        .map_err(|e| format!("cannot make the watch's work directory: {e}"))?
        .keep(),
        keep: false,
    };
    let ctx = ctx_of(&work.path)?;
    let mut insts = Vec::new();
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let surface = surface::by_name(sp.type_name)
            .ok_or_else(|| format!("unknown surface type {}", sp.type_name))
            .and_then(|t| t.open(&sp.settings));
        let before = match &surface {
            Err(e) => Err(SnapshotError::Failed(e.clone())),
            Ok(s) => take_first(s.as_ref(), &ctx, &before_path(&work.path, i)),
        };
        insts.push(Inst { surface, before });
    }
    let (armed, arm_failure) = if opts.canaries.is_empty() {
        (None, None)
    } else {
        match canary::arm(&opts.canaries, opts.detector, &mut |_| {}) {
            Ok(a) => (Some(a), None),
            Err(e) => (None, Some(e)),
        }
    };
    Ok(Watch {
        plan,
        work,
        scope: "command",
        ctx,
        insts,
        armed,
        arm_failure,
        specs: opts.canaries.clone(),
        probe_id,
        started_at,
        command_started_at: timefmt::now_rfc3339(),
    })
}

/// Leaves the work directory out of every snapshot.
fn ctx_of(work: &Path) -> Result<WatchCtx, String> {
    let meta = std::fs::metadata(work)
        .map_err(|e| format!("the watch's work directory {}: {e}", shown(work)))?;
    Ok(WatchCtx {
        skip: vec![(meta.dev(), meta.ino())],
    })
}

fn before_path(work: &Path, i: usize) -> PathBuf {
    work.join(format!("{i}.before"))
}

fn take_first(
    s: &dyn Surface,
    ctx: &WatchCtx,
    path: &Path,
) -> Result<(PathBuf, Before), SnapshotError> {
    let mut w = Writer::create(path).map_err(snapshot_error)?;
    let mut before = Before::default();
    s.snapshot(ctx, &mut |e| {
        before.see(&e);
        w.push(&e)
    })?;
    w.finish().map_err(snapshot_error)?;
    Ok((path.to_path_buf(), before))
}

/// One carrier's findings being gathered.
#[derive(Default)]
struct Tally {
    inside: usize,
    outside: usize,
    observed: Vec<Observation>,
}

fn observation(c: &Change) -> Observation {
    let e = c.entry();
    let change = match &c.kind {
        ChangeKind::Created => "created".to_string(),
        ChangeKind::Removed => "removed".to_string(),
        ChangeKind::Changed(attrs) => format!("changed: {}", attrs.join(", ")),
        ChangeKind::Renamed(attrs) => {
            let from = c.before.as_ref().map(|b| b.shown()).unwrap_or_default();
            if attrs.is_empty() {
                format!("renamed from {from}")
            } else {
                format!("renamed from {from}, changed: {}", attrs.join(", "))
            }
        }
    };
    Observation {
        entry: e.shown(),
        change,
        at: match c.kind {
            ChangeKind::Removed => None,
            _ => e.at.clone(),
        },
        pid: None,
    }
}

impl Watch<'_> {
    /// Where the snapshots are kept (left out of every snapshot).
    pub fn work_dir(&self) -> &Path {
        &self.work.path
    }

    /// Saves the watch for another process to finish ([`resume`]): its
    /// work directory is kept and returned. Only an atime watch of the
    /// canaries can go on without this process; any other detector's
    /// canaries are removed here, and the saved watch has none.
    pub fn save(mut self) -> Result<PathBuf, String> {
        let failed = self
            .insts
            .iter()
            .map(|i| i.before.as_ref().err().cloned())
            .collect();
        let canaries = match self.armed.take() {
            Some(a) if a.detector() == Detector::Atime => a.save(),
            Some(a) => {
                let _ = a.disarm();
                None
            }
            None => None,
        };
        let saved = Saved {
            probe_id: self.probe_id.clone(),
            started_at: self.started_at.clone(),
            command_started_at: timefmt::now_rfc3339(),
            surfaces: surfaces_of(self.plan),
            failed,
            canaries,
            arm_failure: self.arm_failure.clone(),
            specs: self
                .specs
                .iter()
                .map(|s| (s.kind.as_str().to_string(), s.path.clone()))
                .collect(),
        };
        let text = serde_json::to_vec(&saved).map_err(|e| e.to_string())?;
        {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(self.work.path.join(SAVED))
                .and_then(|mut f| f.write_all(&text))
                .map_err(|e| format!("cannot save the watch: {e}"))?;
        }
        self.work.keep = true;
        Ok(self.work.path.clone())
    }

    /// Collects the canaries' reads, removes the canaries, takes every
    /// surface's second snapshot and makes the report.
    pub fn finish(mut self, ended: Ended) -> Report {
        let command_finished_at = timefmt::now_rfc3339();
        let mut findings = Vec::new();
        let mut cleanup = Cleanup::default();
        let canaries = self.canary_findings(&mut findings, &mut cleanup);
        let quiet_paths: Vec<PathBuf> = self
            .specs
            .iter()
            .flat_map(|s| s.path.ancestors().skip(1).map(Path::to_path_buf))
            .collect();
        for (i, sp) in self.plan.surfaces.iter().enumerate() {
            let ty = surface::by_name(sp.type_name).expect("a planned type");
            let inst = &self.insts[i];
            let state = match (&inst.surface, &inst.before) {
                (Err(e), _) => Err(SnapshotError::Failed(e.clone())),
                (_, Err(e)) => Err(e.clone()),
                (Ok(s), Ok((path, before))) => {
                    let quiet: HashSet<Vec<String>> =
                        quiet_paths.iter().filter_map(|p| s.key_of(p)).collect();
                    second(s.as_ref(), &self.ctx, path, &quiet).map(|c| (c, before))
                }
            };
            let persistence = inst.surface.as_ref().ok().and_then(|s| s.persistence());
            findings.extend(self.surface_findings(i, ty, state, persistence));
        }
        let (a, b) = (
            crate::nonce::short_id().unwrap_or_default(),
            crate::nonce::short_id().unwrap_or_default(),
        );
        let mut report = Report {
            schema: report::SCHEMA.into(),
            tool: Tool::default(),
            mode: Mode::Watch,
            probe_id: self.probe_id.clone(),
            label: None,
            started_at: self.started_at.clone(),
            finished_at: timefmt::now_rfc3339(),
            config: self.plan.source.clone(),
            runs: Runs { a, b, b_uid: None },
            key: KeyKind::of(&Key::from_env()),
            cross_job: None,
            surfaces: vec![],
            summary: Summary::of(&findings),
            findings,
            notices: vec![],
            cleanup,
            watch: Some(report::Watch {
                scope: self.scope.into(),
                command: ended
                    .command
                    .iter()
                    .map(|a| crate::redact::text(a))
                    .collect(),
                exit_code: ended.exit_code,
                signal: ended.signal,
                started_at: self.command_started_at.clone(),
                finished_at: command_finished_at,
                canaries,
            }),
        };
        report.summary = Summary::of(&report.findings);
        report
    }

    fn canary_findings(&mut self, findings: &mut Vec<Finding>, cleanup: &mut Cleanup) -> Canaries {
        let mut record = Canaries::default();
        let Some(mut armed) = self.armed.take() else {
            if !self.specs.is_empty() {
                let why = self
                    .arm_failure
                    .clone()
                    .unwrap_or_else(|| "no canary was placed".into());
                for kind in canary::Kind::ALL {
                    findings.push(canary_finding(
                        *kind,
                        verdict::decide_watch(&Watched::Broken(format!(
                            "the canaries could not be armed: {why}"
                        ))),
                        vec![],
                    ));
                }
            }
            return record;
        };
        let detector = armed.detector();
        record.detector = Some(detector.as_str().into());
        let placed: Vec<PathBuf> = armed.paths().iter().map(|p| p.to_path_buf()).collect();
        record.placed = placed.iter().map(|p| shown(p)).collect();
        record.skipped = armed
            .skipped()
            .iter()
            .map(|(p, why)| Leftover {
                surface: CANARY_TYPE.into(),
                control: false,
                entry: shown(p),
                reason: why.clone(),
            })
            .collect();
        let reads = armed.collect();
        let left = armed.disarm();
        cleanup.removed = (placed.len() - left.len()) as u64;
        cleanup.deleted = cleanup.removed;
        cleanup.left = left
            .iter()
            .map(|(p, why)| Leftover {
                surface: CANARY_TYPE.into(),
                control: false,
                entry: shown(p),
                reason: why.clone(),
            })
            .collect();
        for kind in canary::Kind::ALL {
            let of_kind: Vec<&PathBuf> = self
                .specs
                .iter()
                .filter(|s| s.kind == *kind && placed.contains(&s.path))
                .map(|s| &s.path)
                .collect();
            if !self.specs.iter().any(|s| s.kind == *kind) {
                continue;
            }
            let (decision, observed) = match (&reads, of_kind.len()) {
                (_, 0) => (
                    verdict::decide_watch(&Watched::Unsupported(
                        "no canary of this kind was placed (see watch.canaries.skipped)".into(),
                    )),
                    vec![],
                ),
                (Err(e), _) => (
                    verdict::decide_watch(&Watched::Broken(format!(
                        "the canaries' reads could not be collected: {e}"
                    ))),
                    vec![],
                ),
                (Ok(reads), n) => {
                    let observed: Vec<Observation> = reads
                        .iter()
                        .filter(|r| of_kind.contains(&&r.path))
                        .map(|r| Observation {
                            entry: shown(&r.path),
                            change: format!("read ({})", r.how),
                            at: None,
                            pid: r.pid,
                        })
                        .collect();
                    (
                        verdict::decide_watch(&Watched::Canary {
                            placed: n,
                            reads: observed.len(),
                            detector: detector.as_str(),
                        }),
                        observed,
                    )
                }
            };
            findings.push(canary_finding(*kind, decision, observed));
        }
        record
    }

    fn surface_findings(
        &self,
        i: usize,
        ty: &dyn SurfaceType,
        state: Result<(Vec<Change>, &Before), SnapshotError>,
        persistence: Option<Persistence>,
    ) -> Vec<Finding> {
        let sp = &self.plan.surfaces[i];
        let mut tallies: BTreeMap<&'static str, Tally> = BTreeMap::new();
        let mut unlisted = 0;
        if let Ok((changes, before)) = &state {
            for c in changes {
                if c.entry().attrs.contains_key("unlisted") {
                    unlisted += 1;
                }
                for carrier in ty.carriers_of(c, before) {
                    let t = tallies.entry(carrier).or_default();
                    let channel = format!("{}:{carrier}", sp.name);
                    let name = c.entry().key.first().map(String::as_str).unwrap_or("");
                    let inside = match self.plan.declaration(&channel) {
                        Some(d) => d
                            .scope
                            .as_ref()
                            .is_none_or(|sc| surface::glob_match(&sc.value, name)),
                        None => true,
                    };
                    if inside {
                        t.inside += 1;
                    } else {
                        t.outside += 1;
                    }
                    t.observed.push(observation(c));
                }
            }
        }
        ty.carriers()
            .iter()
            .map(|carrier| {
                let channel = format!("{}:{}", sp.name, carrier.name);
                let decl = self.plan.declaration(&channel);
                let watched = match (&state, ty.unwatched(carrier.name)) {
                    (_, Some(why)) => Watched::Unsupported(why.into()),
                    (Err(SnapshotError::Unsupported(why)), None) => {
                        Watched::Unsupported(why.clone())
                    }
                    (Err(SnapshotError::Failed(why)), None) => {
                        Watched::Broken(format!("the surface could not be looked at: {why}"))
                    }
                    (Ok(_), None) => {
                        let t = tallies.get(carrier.name);
                        Watched::Changes {
                            declared: decl.is_some(),
                            inside: t.map_or(0, |t| t.inside),
                            outside: t.map_or(0, |t| t.outside),
                        }
                    }
                };
                let (v, mut detail) = verdict::decide_watch(&watched);
                if unlisted > 0 && matches!(watched, Watched::Changes { .. }) {
                    detail.push_str(&format!(
                        " ({unlisted} directories could not be listed: changes inside them are not seen)"
                    ));
                }
                Finding {
                    channel,
                    surface: sp.name.clone(),
                    surface_type: sp.type_name.into(),
                    carrier: carrier.name.into(),
                    verdict: v,
                    persistence: persistence.unwrap_or(carrier.persistence),
                    declared: decl.is_some(),
                    control: Control::NotRun,
                    detail,
                    location: sp.location.clone(),
                    declared_at: match (&self.plan.source.path, decl) {
                        (Some(path), Some(d)) => Some(Location {
                            path: path.clone(),
                            line: d.pos.line,
                            column: d.pos.column,
                        }),
                        _ => None,
                    },
                    scope: decl.and_then(|d| d.scope.as_ref()).map(|sc| {
                        [(sc.key.clone(), sc.value.clone())].into_iter().collect()
                    }),
                    observed: tallies
                        .get(carrier.name)
                        .map(|t| t.observed.clone())
                        .unwrap_or_default(),
                }
            })
            .collect()
    }
}

fn surfaces_of(plan: &Plan) -> Vec<(String, String)> {
    plan.surfaces
        .iter()
        .map(|s| (s.name.clone(), s.type_name.to_string()))
        .collect()
}

/// A watch saved by [`Watch::save`] in `dir`, to be finished here: the
/// config must be the one it started with.
pub fn resume<'p>(plan: &'p Plan, dir: &Path) -> Result<Watch<'p>, String> {
    let text = std::fs::read(dir.join(SAVED))
        .map_err(|e| format!("no saved watch in {}: {e}", shown(dir)))?;
    let saved: Saved = serde_json::from_slice(&text)
        .map_err(|e| format!("the saved watch in {} is unreadable: {e}", shown(dir)))?;
    if saved.surfaces != surfaces_of(plan) || saved.failed.len() != plan.surfaces.len() {
        return Err(
            "the config's surfaces are not the ones the watch started with: give the post step the same config"
                .into(),
        );
    }
    let work = WorkDir {
        path: dir.to_path_buf(),
        keep: false,
    };
    let ctx = ctx_of(dir)?;
    let mut insts = Vec::new();
    for (i, (sp, failed)) in plan.surfaces.iter().zip(saved.failed).enumerate() {
        let surface = surface::by_name(sp.type_name)
            .ok_or_else(|| format!("unknown surface type {}", sp.type_name))
            .and_then(|t| t.open(&sp.settings));
        let before = match failed {
            Some(e) => Err(e),
            None => reread(&before_path(dir, i)),
        };
        insts.push(Inst { surface, before });
    }
    let specs = saved
        .specs
        .into_iter()
        .filter_map(|(k, path)| {
            Some(Spec {
                kind: canary::Kind::from_name(&k)?,
                path,
            })
        })
        .collect();
    Ok(Watch {
        plan,
        work,
        scope: "job",
        ctx,
        insts,
        armed: saved.canaries.map(Armed::resume),
        arm_failure: saved.arm_failure,
        specs,
        probe_id: saved.probe_id,
        started_at: saved.started_at,
        command_started_at: saved.command_started_at,
    })
}

/// What attribution needs of a first snapshot saved by another process.
fn reread(path: &Path) -> Result<(PathBuf, Before), SnapshotError> {
    let mut before = Before::default();
    for e in Reader::open(path).map_err(snapshot_error)? {
        before.see(&e.map_err(snapshot_error)?);
    }
    Ok((path.to_path_buf(), before))
}

/// The second snapshot, diffed against the first as it is taken.
fn second(
    s: &dyn Surface,
    ctx: &WatchCtx,
    before: &Path,
    quiet: &HashSet<Vec<String>>,
) -> Result<Vec<Change>, SnapshotError> {
    let mut differ = Differ::new(Reader::open(before).map_err(snapshot_error)?);
    s.snapshot(ctx, &mut |e| differ.push(e))?;
    differ
        .finish(quiet)
        .map_err(|e| SnapshotError::Failed(format!("comparing with the first snapshot: {e}")))
}

fn shown(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    crate::escape::bytes(p.as_os_str().as_bytes())
}

fn canary_finding(
    kind: canary::Kind,
    (verdict, detail): (crate::verdict::Verdict, String),
    observed: Vec<Observation>,
) -> Finding {
    Finding {
        channel: format!("{CANARY_TYPE}:{}", kind.as_str()),
        surface: CANARY_TYPE.into(),
        surface_type: CANARY_TYPE.into(),
        carrier: kind.as_str().into(),
        verdict,
        persistence: Persistence::Transient,
        declared: false,
        control: Control::NotRun,
        detail,
        location: None,
        declared_at: None,
        scope: None,
        observed,
    }
}
