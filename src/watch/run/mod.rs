//! One watch, start to report: every configured surface's snapshot, the
//! canaries armed, (the caller runs the command), the canaries' reads
//! collected and the canaries removed, every surface's second snapshot
//! diffed against the first as it is taken, and the findings
//! ([`findings`]). A watch can also be saved and finished by another
//! process ([`saved`]: the action's post step).
//!
//! The canaries are placed after the first snapshot and removed before
//! the second, so runwarden's own looks never read them and they are in
//! neither snapshot; the directory each was placed in changed its times
//! by runwarden's doing, which is not reported.
//!
//! The snapshots are files the watched command could write (it runs as
//! the same user): each first snapshot's SHA-256 is kept where the command
//! cannot reach it (this process's memory; for a saved watch, the token
//! the runner holds) and checked as the snapshot is read back.

mod findings;
mod saved;
mod workdir;

pub use saved::{Resumed, load};

use super::canary::{self, Armed, Detector, Spec};
use crate::fault::Fault;
use crate::marker::Key;
use crate::plan::{Plan, SurfacePlan};
use crate::report::{self, Cleanup, KeyKind, Mode, Report, Runs, Summary, Tool};
use crate::state::diff::{Before, Change, Differ};
use crate::state::snapshot::{Reader, SnapshotError, WatchCtx, Writer};
use crate::surface::{self, Instance, Watchable};
use crate::timefmt;
use std::collections::HashSet;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use workdir::{JOURNAL, WorkDir};

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
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Processes the command started that were still running when it
    /// ended (what they do after the second snapshot is not watched).
    pub survivors: Vec<u32>,
}

/// A surface's first snapshot: where it is, when it began (Unix seconds)
/// and its SHA-256.
struct First {
    path: PathBuf,
    since: i64,
    digest: String,
}

/// One configured surface: opened, and its first snapshot.
struct Inst {
    surface: Result<Box<dyn Instance>, Fault>,
    first: Result<First, SnapshotError>,
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
    /// Why no canary could be armed, when none could.
    arm_failure: Option<String>,
    specs: Vec<Spec>,
    probe_id: String,
    started_at: String,
    command_started_at: String,
}

fn snapshot_error(e: std::io::Error) -> SnapshotError {
    SnapshotError::Failed(format!("writing the snapshot: {e}"))
}

/// Opens a planned surface. Its settings were checked when the plan was
/// built: one its type refuses now is its own fault (`Invalid`: ERROR).
fn open_surface(sp: &SurfacePlan) -> Result<Box<dyn Instance>, Fault> {
    surface::by_name(sp.type_name)
        .ok_or_else(|| Fault::invalid(format!("unknown surface type {}", sp.type_name)))
        .and_then(|t| t.open(&sp.settings))
}

/// Why a surface that could not be opened has no snapshot: SKIPPED when
/// it cannot be done here, else ERROR.
fn unopened(f: &Fault) -> SnapshotError {
    match f {
        Fault::Unsupported(why) => SnapshotError::Unsupported(why.clone()),
        _ => SnapshotError::Failed(f.reason().to_string()),
    }
}

/// Takes every surface's first snapshot, then arms the canaries. `Invalid`
/// when no work directory may be placed; `Broken` when it cannot be made.
pub fn start<'p>(plan: &'p Plan, opts: &Options) -> Result<Watch<'p>, Fault> {
    let limit = crate::sys::raise_nofile();
    let w = start_raised(plan, opts);
    crate::sys::restore_nofile(limit);
    w
}

fn start_raised<'p>(plan: &'p Plan, opts: &Options) -> Result<Watch<'p>, Fault> {
    let started_at = timefmt::now_rfc3339();
    let probe_id = crate::nonce::short_id().map_err(|e| Fault::broken(e.to_string()))?;
    let (place, passed) = workdir::place(plan, opts.work_dir.as_deref())?;
    if let Some(why) = passed {
        crate::say::error(&format!(
            "{why}: the watch's work directory goes in {} instead",
            crate::escape::bytes(place.as_os_str().as_encoded_bytes())
        ));
    }
    let work = WorkDir::new(
        tempfile::Builder::new()
            .prefix("runwarden-watch-")
            .tempdir_in(&place)
            .map_err(|e| Fault::broken(format!("cannot make the watch's work directory: {e}")))?
            .keep(),
    );
    let ctx = ctx_of(&work.path)?;
    let mut insts = Vec::new();
    for (i, sp) in plan.surfaces.iter().enumerate() {
        let surface = open_surface(sp);
        let first = match surface.as_ref().map(|s| s.watch()) {
            Err(e) => Err(unopened(e)),
            Ok(Err(why)) => Err(SnapshotError::Unsupported(why.into())),
            Ok(Ok(w)) => take_first(w, &ctx, &before_path(&work.path, i)),
        };
        insts.push(Inst { surface, first });
    }
    let (armed, arm_failure) = if opts.canaries.is_empty() {
        (None, None)
    } else {
        arm(&work.path, opts)
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

/// Arms the canaries, each path journalled in the work directory before
/// it is created (a watch killed outright leaves the list of what to
/// remove).
fn arm(work: &Path, opts: &Options) -> (Option<Armed>, Option<String>) {
    let journal = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(work.join(JOURNAL));
    let mut journal = match journal {
        Ok(f) => f,
        Err(e) => return (None, Some(format!("cannot write the canary journal: {e}"))),
    };
    let mut broken = false;
    let armed = canary::arm(&opts.canaries, opts.detector, &mut |p| {
        let line = serde_json::to_string(&p.to_string_lossy()).unwrap_or_default();
        broken |= writeln!(journal, "{line}")
            .and_then(|()| journal.sync_data())
            .is_err();
    });
    match armed {
        Ok(_) if broken => (None, Some("cannot write the canary journal".into())),
        Ok(a) => (Some(a), None),
        Err(e) => (None, Some(e.into_reason())),
    }
}

/// Leaves the work directory out of every snapshot.
fn ctx_of(work: &Path) -> Result<WatchCtx, Fault> {
    let meta = std::fs::metadata(work)
        .map_err(|e| Fault::broken(format!("the watch's work directory {}: {e}", shown(work))))?;
    Ok(WatchCtx {
        skip: vec![(meta.dev(), meta.ino())],
        ..WatchCtx::default()
    })
}

fn before_path(work: &Path, i: usize) -> PathBuf {
    work.join(format!("{i}.before"))
}

fn take_first(s: &dyn Watchable, ctx: &WatchCtx, path: &Path) -> Result<First, SnapshotError> {
    let mut w = Writer::create(path).map_err(snapshot_error)?;
    let since = crate::sys::now_coarse().0;
    s.snapshot(ctx, &mut |e| w.push(&e))?;
    let digest = w.finish().map_err(snapshot_error)?;
    Ok(First {
        path: path.to_path_buf(),
        since,
        digest,
    })
}

/// What the second snapshot found: the changes, what it could not see
/// inside (directories it could not list, other filesystems it does not
/// enter), and what attribution needs of the first.
struct Seen {
    changes: Vec<Change>,
    unseen: Option<String>,
    before: Before,
}

/// The second snapshot, diffed against the first as it is taken; the
/// first must read back as it was written.
fn second(
    s: &dyn Watchable,
    ctx: &WatchCtx,
    first: &First,
    quiet: &HashSet<Vec<String>>,
) -> Result<Seen, SnapshotError> {
    let reader = Reader::open(&first.path).map_err(snapshot_error)?;
    let mut differ = Differ::new(reader, first.since);
    let ctx = &WatchCtx {
        skip: ctx.skip.clone(),
        first: Some(differ.first()),
        since: first.since,
    };
    let mut unlisted = 0;
    let mut mounts: Vec<String> = Vec::new();
    let mut more_mounts = 0usize;
    s.snapshot(ctx, &mut |e| {
        unlisted += usize::from(e.attrs.contains_key("unlisted"));
        if e.attrs.contains_key("mount-point") {
            if mounts.len() < 3 {
                mounts.push(crate::escape::bytes(e.key.join("/").as_bytes()));
            } else {
                more_mounts += 1;
            }
        }
        differ.push(e)
    })?;
    let mut unseen = Vec::new();
    if unlisted > 0 {
        unseen.push(format!("{unlisted} directories here could not be listed"));
    }
    if !mounts.is_empty() {
        let more = if more_mounts > 0 {
            format!(" and {more_mounts} more")
        } else {
            String::new()
        };
        unseen.push(format!(
            "other filesystems mounted here are not entered ({}{more})",
            mounts.join(", ")
        ));
    }
    let unseen = (!unseen.is_empty()).then(|| unseen.join("; "));
    let (changes, digest, before) = differ
        .finish(quiet)
        .map_err(|e| SnapshotError::Failed(format!("comparing with the first snapshot: {e}")))?;
    if digest != first.digest {
        return Err(SnapshotError::Failed(
            "the first snapshot was changed on disk while the command ran: nothing it shows can be trusted"
                .into(),
        ));
    }
    Ok(Seen {
        changes,
        unseen,
        before,
    })
}

fn shown(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    crate::escape::bytes(p.as_os_str().as_bytes())
}

/// The directories whose times runwarden moved by placing and removing a
/// canary: the first ancestor of each canary that is still there, and the
/// ones made for it (gone again).
fn moved_by_canaries(placed: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in placed {
        for a in p.ancestors().skip(1) {
            out.push(a.to_path_buf());
            if std::fs::symlink_metadata(a).is_ok() {
                break;
            }
        }
    }
    out
}

/// Processes the command started that were still running when the
/// second snapshots were taken (after a grace): they can write after them.
/// (Waiting for them instead would wait for as long as they like: a daemon
/// never ends.)
fn survivors_held(survivors: &[u32]) -> Option<String> {
    if survivors.is_empty() {
        return None;
    }
    let named: Vec<String> = survivors
        .iter()
        .take(5)
        .map(|pid| {
            if *pid == 0 {
                return "(the kernel's list of this process's children could not be read)"
                    .to_string();
            }
            let comm = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
            let comm = String::from_utf8_lossy(&comm).trim_end().to_string();
            format!("{pid} ({})", crate::escape::bytes(comm.as_bytes()))
        })
        .collect();
    let more = survivors.len().saturating_sub(named.len());
    let who = if more > 0 {
        format!("{} and {more} more", named.join(", "))
    } else {
        named.join(", ")
    };
    Some(format!(
        "processes the command started were still running when the second snapshot was taken ({who}): what they write after it is not seen"
    ))
}

/// What the command wrote into runwarden's own work directory (the
/// snapshots leave it out): a place to hide a message in.
fn work_dir_held(work: &WorkDir) -> Option<String> {
    let shown = crate::escape::bytes(work.path.as_os_str().as_encoded_bytes());
    match work.foreign() {
        Ok(names) if names.is_empty() => None,
        Ok(names) => Some(format!(
            "something runwarden did not write is in its own work directory {shown} ({}): the snapshots leave that directory out",
            names.join(", ")
        )),
        Err(e) => Some(e.into_reason()),
    }
}

/// Every PASS is ERROR with `why`: "not used" proves nothing then (a
/// canary's too when `canaries`: a process still running may have opened
/// one and read it after its removal).
fn hold(findings: &mut [crate::report::Finding], why: &str, canaries: bool) {
    for f in findings.iter_mut().filter(|f| {
        f.verdict == crate::verdict::Verdict::Pass
            && (canaries || f.surface_type != crate::report::CANARY_TYPE)
    }) {
        f.verdict = crate::verdict::Verdict::Error;
        f.detail = format!("{why}, so \"not used\" proves nothing [{}]", f.detail);
    }
}

impl Watch<'_> {
    /// Where the snapshots are kept (left out of every snapshot).
    pub fn work_dir(&self) -> &Path {
        &self.work.path
    }

    /// Collects the canaries' reads, removes the canaries, takes every
    /// surface's second snapshot and makes the report.
    pub fn finish(self, ended: Ended) -> Report {
        let limit = crate::sys::raise_nofile();
        let report = self.finish_raised(ended);
        crate::sys::restore_nofile(limit);
        report
    }

    fn finish_raised(mut self, ended: Ended) -> Report {
        let command_finished_at = timefmt::now_rfc3339();
        let mut findings = Vec::new();
        let mut cleanup = Cleanup::default();
        let (canaries, placed) = self.canary_findings(&mut findings, &mut cleanup);
        let quiet_paths = moved_by_canaries(&placed);
        for (i, sp) in self.plan.surfaces.iter().enumerate() {
            let ty = surface::by_name(sp.type_name).expect("a planned type");
            let inst = &self.insts[i];
            let watchable = inst.surface.as_ref().ok().and_then(|s| s.watch().ok());
            let state = match (&inst.surface, watchable, &inst.first) {
                (Err(e), _, _) => Err(unopened(e)),
                (_, _, Err(e)) => Err(e.clone()),
                (_, None, _) => Err(SnapshotError::Unsupported(
                    "watch mode cannot list this surface type".into(),
                )),
                (Ok(_), Some(w), Ok(first)) => {
                    let quiet: HashSet<Vec<String>> =
                        quiet_paths.iter().filter_map(|p| w.key_of(p)).collect();
                    second(w, &self.ctx, first, &quiet)
                }
            };
            let persistence = inst.surface.as_ref().ok().and_then(|s| s.persistence());
            findings.extend(self.surface_findings(i, ty, watchable, state, persistence));
        }
        if let Some(why) = survivors_held(&ended.survivors) {
            // A survivor may hold a canary open past its removal: no canary
            // PASS stands either.
            hold(&mut findings, &why, true);
        }
        if let Some(why) = work_dir_held(&self.work) {
            hold(&mut findings, &why, false);
        }
        let (a, b) = (
            crate::nonce::short_id().unwrap_or_default(),
            crate::nonce::short_id().unwrap_or_default(),
        );
        Report {
            schema: report::SCHEMA.into(),
            tool: Tool::default(),
            mode: Mode::Watch,
            probe_id: self.probe_id.clone(),
            label: None,
            started_at: self.started_at.clone(),
            finished_at: timefmt::now_rfc3339(),
            config: self.plan.source.clone(),
            runs: Runs {
                a,
                b,
                a_uid: None,
                b_uid: None,
            },
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
                signal: ended.signal.map(|n| crate::signals::name(n).to_string()),
                survivors: ended.survivors,
                started_at: self.command_started_at.clone(),
                finished_at: command_finished_at,
                canaries,
            }),
            coverage: None,
            trust: None,
        }
    }
}
