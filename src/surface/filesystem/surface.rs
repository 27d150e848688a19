//! The filesystem surface type's operations: its config and settings, its
//! control, the plant of one carrier, recovery, the ownership rule,
//! cleanup (by receipt and by probe id), the needle derived without a
//! receipt, and watch mode's snapshot and the carriers of a change.

use super::cleanup::planted_form;
use super::plant::{Outcome, Site};
use super::recover::outcome;
use super::scan::Route;
use super::scan::{ROUTES, route_of};
use super::snap::{Trust, Walk};
use super::watch::{made_during, name_carrier};
use super::{
    CONTENT_WINDOW, Entry, Filesystem, Fs, Kind, Line, Needle, Scan, Settings, derived_mtime,
    derived_size, make_open_dir, persistence_of, planted_name,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use crate::surface::{
    About, CleanupOutcome, Control, Job, JobScope, Journal, Notice, RecoverOutcome, RunCtx, Want,
    Watch,
};
use crate::sys;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

impl crate::surface::Surface for Filesystem {
    const NAME: &'static str = "filesystem";
    const DESCRIPTION: &'static str =
        "a directory both runs can reach (runner work dir, /tmp, $HOME, caches, shared mounts)";
    const KEYS: &'static [&'static str] = &["path", "content-reads"];
    const WATCH: Watch<Fs> = Watch::Yes {
        unwatched: &[(
            Fs::RunnerPersistence,
            "a beacon is what an earlier probe leaves; watch mode reports the command's own writes under their carriers",
        )],
        changes: changes_of,
    };
    const ROUTES: &'static [crate::surface::routes::Route<Fs>] = ROUTES;
    type Carrier = Fs;
    type Settings = Settings;
    type Entry = Line;
    type Needle = Needle;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let Some((path, pos)) = opts.string("path")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "a filesystem surface needs `path:` (the directory to probe)",
            ));
        };
        if path.is_empty() {
            return Err(opts.error(pos, "`path` is empty"));
        }
        let content_reads = opts.bool("content-reads")?.unwrap_or(true);
        // Relative paths are relative to where runwarden runs (the
        // workspace in CI), and are fixed now because runs A and B have
        // working directories of their own.
        let abs =
            std::path::absolute(&path).map_err(|e| opts.error(pos, format!("`path`: {e}")))?;
        Ok(Settings {
            path: abs,
            content_reads,
        })
    }

    fn about(s: &Settings) -> About<Fs> {
        let shown = escape::bytes(s.path.as_os_str().as_bytes());
        let mut about = About::new(format!("in {shown}"))
            .exposure(format!("path:{}", s.path.to_string_lossy()))
            // The same directory by the same way there (a symlinked path
            // resolves to it) and the same settings. Not by device and
            // inode alone: a read-only bind mount, or a path through a
            // parent run B may not search, reaches the same directory with
            // other access, and must be probed on its own (their plants
            // then collide: ERROR, never a PASS that hides the open one).
            .identity(std::fs::canonicalize(&s.path).ok().map(|real| {
                format!(
                    "filesystem {} content-reads={}",
                    real.display(),
                    s.content_reads
                )
            }))
            .persistence(
                sys::open_dir(&s.path)
                    .ok()
                    .as_ref()
                    .and_then(persistence_of),
            )
            .root(s.path.clone());
        if !s.path.exists() {
            about = about.warning(format!(
                "path {shown} does not exist here: valid, since it may exist where the probe runs (a runner), but a probe here gives ERROR"
            ));
        }
        if !s.content_reads {
            about = about.unavailable_of(
                Fs::FileContent,
                "content-reads: false in the config: run B may not read file contents here",
            );
        }
        about
    }

    fn control(like: Option<&Settings>, dir: &Path) -> Result<Control<Settings>, Fault> {
        make_open_dir(dir)
            .map_err(|e| Fault::broken(format!("cannot create control directory: {e}")))?;
        Ok(Control::settings(Settings {
            path: dir.to_path_buf(),
            content_reads: like.is_none_or(|s| s.content_reads),
        }))
    }

    fn open(settings: Settings) -> Result<Filesystem, Fault> {
        Ok(Filesystem { settings })
    }

    /// Run A: one carrier's entry, at its derived name in the probed
    /// directory, planted by [`Site::plant`].
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Fs>,
        journal: &mut Journal<'_, Line>,
    ) -> Outcome {
        // Reaching the directory is not planting: a refusal here (a parent
        // run A may not search) says nothing about the directory's own
        // access control, so it is no PASS. Each carrier's refusal is
        // decided by the syscall that plants it ([`Site::plant`]).
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(e) => {
                return Outcome::Error {
                    reason: format!(
                        "surface unreachable: run A cannot reach {}: {e}",
                        self.path_text()
                    ),
                };
            }
        };
        let dir_st = match sys::fstat(&dir) {
            Ok(s) => s,
            Err(e) => {
                return Outcome::Error {
                    reason: format!("fstat of surface: {e}"),
                };
            }
        };
        let carrier = job.carrier;
        let hex = job.nonce.hex();
        let (name, _) = planted_name(carrier, ctx, &hex);
        let site = Site {
            inst: self,
            persistence: persistence_of(&dir),
            dir,
            dir_st,
            name,
            hex,
        };
        site.plant(carrier, job, journal).unwrap_or_else(|o| o)
    }

    /// Run B: the agreed names first (`fstatat`, no listing needed), then the
    /// listing, each entry looked at only as far as a wanted carrier needs.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Fs, Needle>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        crate::surface::routes::through(wanted.iter().map(|w| w.carrier), route_of, || {
            let all = |o: RecoverOutcome| wanted.iter().map(|_| o.clone()).collect();
            let dir = match self.open_surface() {
                Ok(d) => d,
                Err(e) => return all(self.scan_error("reach", &e)),
            };
            let mut scan = Scan::new(wanted, ctx);
            let mut window = vec![0u8; CONTENT_WINDOW];
            // Route 1: the agreed names. Two colluding runs agree on the name
            // of each entry whose attributes carry the message
            // (`.runwarden-<probe>-<carrier>`), so run B looks them up
            // directly: search permission is all that takes, even where the
            // directory refuses to be listed.
            let agreed = scan.agreed_names();
            for name in &agreed {
                match sys::lstat_at(&dir, name) {
                    Ok(st) => {
                        scan.looked_up(name, Ok(()));
                        self.examine(
                            &dir,
                            name,
                            Some(st),
                            libc::DT_UNKNOWN,
                            &mut scan,
                            &mut window,
                            Route::Agreed,
                        );
                    }
                    Err(e) => scan.looked_up(name, Err(&e)),
                }
            }
            // Route 2: the listing, for every carrier (the name carriers have
            // no other: their name is the message).
            let listing = self.list(ctx, &dir, &agreed, &mut scan, &mut window, notice);
            let path = self.path_text();
            let Scan {
                needles,
                tallies,
                agreed,
                ..
            } = scan;
            tallies
                .into_iter()
                .zip(&needles)
                .zip(agreed)
                .map(|((t, n), agreed_name)| outcome(t, n, agreed_name.as_deref(), &listing, &path))
                .collect()
        })
    }

    /// The filesystem's ownership rule: an entry or an intent whose name,
    /// directly in the surface, is one this probe's plant makes with the type
    /// that plant gives it; `Invalid` for anything else.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Line) -> Result<(), Fault> {
        let (name, kind) = match entry {
            Line::Intent(i) => (&i.intent.name, i.intent.kind),
            Line::Made(e) => (&e.name, e.kind),
        };
        if planted_form(name, kind, ctx) {
            Ok(())
        } else {
            Err(Fault::invalid(format!(
                "{} ({kind:?}) is not an entry a plant of probe {} makes",
                escape::bytes(name.as_bytes()),
                ctx.probe_id
            )))
        }
    }

    /// The journal holds, per entry, its intent, then its full record (or
    /// a retraction of the intent when the syscall failed). An intent with
    /// neither is an entry whose creation may or may not have happened
    /// when run A stopped: [`Filesystem::cleanup_intent`]. (Retractions
    /// and the intents they took back are set aside by the kernel.)
    fn clean(&self, entries: &[Line]) -> Vec<CleanupOutcome> {
        let recorded: std::collections::HashSet<&str> = entries
            .iter()
            .filter_map(|e| match e {
                Line::Made(e) => Some(e.name.as_str()),
                Line::Intent(_) => None,
            })
            .collect();
        entries
            .iter()
            .map(|e| match e {
                Line::Intent(i) if recorded.contains(i.intent.name.as_str()) => {
                    CleanupOutcome::Superseded
                }
                Line::Intent(i) => self.cleanup_intent(&i.intent),
                Line::Made(e) => self.clean_entry(e),
            })
            .collect()
    }

    /// Cleanup by probe id: each job's derived name looked up; an entry its
    /// carrier (or a plant's unfinished state) does not prove ours is found
    /// unverified, and cleanup leaves it.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Fs>],
    ) -> Result<crate::surface::Found<Line>, Fault> {
        let dir = self
            .open_surface()
            .map_err(|e| Fault::broken(format!("cannot open {}: {e}", self.path_text())))?;
        let dir_st =
            sys::fstat(&dir).map_err(|e| Fault::broken(format!("fstat of surface: {e}")))?;
        let mut found = Vec::new();
        for job in jobs {
            let carrier = job.carrier;
            let (name, kind) = planted_name(carrier, ctx, &job.nonce.hex());
            let st = match sys::lstat_at(&dir, &name) {
                Ok(st) => st,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => {
                    return Err(Fault::broken(format!(
                        "lstat of {}: {e}",
                        escape::bytes(name.as_bytes())
                    )));
                }
            };
            let unverified = if Kind::of(&st) != Some(kind) {
                Some("named like a plant of this probe, but of another type".to_string())
            } else {
                self.verify_planted(ctx, &dir, &name, &st, carrier, job)
                    .err()
                    .map(Fault::into_reason)
            };
            found.push(Line::Made(
                Entry::of(&dir, &dir_st, &name, &st, kind, unverified)
                    .map_err(|e| Fault::broken(format!("statx: {e}")))?,
            ));
        }
        Ok(found.into())
    }

    fn derive(
        carrier: Fs,
        _ctx: &RunCtx<'_>,
        nonce: &Nonce,
        _scope: Option<&JobScope>,
    ) -> Result<Needle, Fault> {
        Ok(match carrier {
            // Without the receipt, the precision the plant's filesystem
            // kept is unknown: a truncated mtime matches too.
            Fs::Mtime => Needle::Mtime {
                mtime: derived_mtime(nonce),
                coarse: true,
            },
            Fs::FileSize => Needle::Size {
                size: derived_size(nonce),
            },
            _ => Needle::Text { text: nonce.hex() },
        })
    }

    /// The directory, walked ([`super::snap`]) and streamed to `sink`.
    fn snapshot(&self, ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let root = self
            .open_surface()
            .map_err(|e| SnapshotError::Failed(format!("cannot open {}: {e}", self.path_text())))?;
        let dev = sys::fstat(&root)
            .map_err(|e| SnapshotError::Failed(format!("cannot stat {}: {e}", self.path_text())))?
            .dev;
        let mut walk = Walk {
            dev,
            ctx,
            trust: Trust::of(&root),
            sink,
            window: vec![0u8; CONTENT_WINDOW],
            at: (0, String::new()),
            cwd: sys::PrivateCwd::new().ok(),
            inside: false,
        };
        self.walk(&root, &mut Vec::new(), &mut walk)
    }
}

/// The carriers a change would carry: a new or removed entry its name
/// (and, when it has them, its content, size, link target and xattrs,
/// and an mtime set on purpose); a rename its name; a changed entry
/// what changed (`mtime` alone only when nothing recovery reads
/// changed with it).
fn changes_of(c: &Change, before: &Before) -> Vec<Fs> {
    let e = c.entry();
    let mut out = Vec::new();
    let has = |k: &str| e.attrs.contains_key(k);
    match &c.kind {
        ChangeKind::Created | ChangeKind::Removed => {
            out.push(name_carrier(&e.kind));
            // A new file's size is a message as much as its content.
            if e.kind == "file" && e.attrs.get("size").is_some_and(|s| s != "0") {
                out.extend([Fs::FileContent, Fs::FileSize]);
            }
            // An mtime from before the watch began, or after it ended, was
            // set on purpose.
            if matches!(c.kind, ChangeKind::Created) && !made_during(e, before) {
                out.push(Fs::Mtime);
            }
            if e.kind == "symlink" {
                out.push(Fs::SymlinkTarget);
            }
            if has("xattr-names") {
                out.extend([Fs::XattrName, Fs::Xattr]);
            }
        }
        ChangeKind::Renamed(attrs) | ChangeKind::Changed(attrs) => {
            if matches!(c.kind, ChangeKind::Renamed(_)) {
                out.push(name_carrier(&e.kind));
            }
            let big = e
                .attrs
                .get("size")
                .and_then(|s| s.parse::<usize>().ok())
                .is_some_and(|s| s > CONTENT_WINDOW);
            for a in attrs {
                match a.as_str() {
                    "head" => out.push(Fs::FileContent),
                    "size" => out.extend([Fs::FileSize, Fs::FileContent]),
                    "target" => out.push(Fs::SymlinkTarget),
                    "xattr-names" => out.push(Fs::XattrName),
                    "xattrs" => out.push(Fs::Xattr),
                    _ => {}
                }
            }
            // Where the head digest cannot tell (no content reads, an
            // unreadable file, content past the window), content may change
            // with the times alone.
            let blind = e.kind == "file"
                && e.attrs.get("size").is_some_and(|s| s != "0")
                && (big || e.attrs.get("head").is_none_or(|h| h.starts_with("unread")));
            if attrs.iter().any(|a| a == "mtime") && out.is_empty() {
                out.push(Fs::Mtime);
                if blind {
                    out.push(Fs::FileContent);
                }
            }
            // The change time alone: a write whose every other trace was
            // set back (a same-size rewrite with its mtime restored), or a
            // change no carrier models (a mode, a link count). A file's is
            // taken for its content; a directory's is its entries', which
            // are reported themselves.
            if matches!(c.kind, ChangeKind::Changed(_))
                && attrs.iter().all(|a| a == "ctime")
                && e.kind == "file"
            {
                out.push(Fs::FileContent);
            }
        }
    }
    out
}
