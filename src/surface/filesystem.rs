//! `type: filesystem`: a directory two runs can both reach (a persistent
//! runner's `_work`, `/tmp`, `$HOME`, a tool cache, a shared mount).
//!
//! Run A creates one entry per carrier directly in the directory, named
//! `.runwarden-<probe-id>-…` so leftovers of a killed probe are identifiable.
//! Every syscall on an entry goes through the directory's file descriptor
//! with no-follow semantics. Run B lists the directory once, streaming, with
//! no entry cap, and looks at each entry only as far as a wanted carrier
//! needs: its name, its `lstat`, its link target, its xattrs, and (for
//! `file-content`) the first [`CONTENT_WINDOW`] bytes of regular files.
//! FIFOs, sockets and devices are never opened; symlinks are never followed.

use super::{
    Carrier, CleanupOutcome, Control, JobScope, Notice, NoticeKind, Persistence, PlantJob,
    PlantOutcome, RUNNER_PERSISTENCE, RecoverOutcome, RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::marker::{self, Checked};
use crate::nonce::Nonce;
use crate::sys::{self, Stat};
use memchr::memmem::Finder;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use xattr::FileExt as _;

/// How much of each regular file content recovery reads. The
/// `file-content` plant is a file of under 100 bytes with the nonce on its
/// second line, so the window can never hide it; reading only a window keeps
/// a directory of huge foreign files from stalling the scan.
pub const CONTENT_WINDOW: usize = 64 * 1024;

/// The xattr that carries the nonce for the `xattr` carrier.
const XATTR_KEY: &str = "user.runwarden";

pub struct Filesystem;

static CARRIERS: &[Carrier] = &[
    Carrier {
        name: "file-content",
        persistence: Persistence::Durable,
        description: "the nonce inside a regular file's content",
    },
    Carrier {
        name: "file-name",
        persistence: Persistence::Durable,
        description: "the nonce in the name of an empty regular file",
    },
    Carrier {
        name: "directory-name",
        persistence: Persistence::Durable,
        description: "the nonce in the name of an empty directory",
    },
    Carrier {
        name: "symlink-target",
        persistence: Persistence::Durable,
        description: "the nonce as the target of a dangling symlink (never followed)",
    },
    Carrier {
        name: "xattr",
        persistence: Persistence::Durable,
        description: "the nonce in the value of a user.* extended attribute",
    },
    Carrier {
        name: "xattr-name",
        persistence: Persistence::Durable,
        description: "the nonce in the name of a user.* extended attribute (listxattr needs no read permission on the file)",
    },
    Carrier {
        name: "mtime",
        persistence: Persistence::Durable,
        description: "a nonce-derived modification time (seconds and nanoseconds) on an innocuous file",
    },
    Carrier {
        name: "file-size",
        persistence: Persistence::Durable,
        description: "a nonce-derived size (4 to 8 GiB, sparse: no blocks used) of an innocuous file",
    },
    Carrier {
        name: "special-file-name",
        persistence: Persistence::Durable,
        description: "the nonce in the name of a FIFO (recovery lists it, never opens it)",
    },
    Carrier {
        name: RUNNER_PERSISTENCE,
        persistence: Persistence::Durable,
        description: "a signed beacon of another probe (an earlier job, another repository) found here: the surface kept state between jobs",
    },
];

/// Settings after validation; also what runs A and B receive.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Settings {
    /// Absolute: runs A and B work in other directories.
    pub path: PathBuf,
    pub content_reads: bool,
}

impl SurfaceType for Filesystem {
    fn name(&self) -> &'static str {
        "filesystem"
    }

    fn description(&self) -> &'static str {
        "a directory both runs can reach (runner work dir, /tmp, $HOME, caches, shared mounts)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &["path", "content-reads"]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
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
        Ok(serde_json::to_value(Settings {
            path: abs,
            content_reads,
        })
        .expect("settings serialize"))
    }

    fn control(&self, settings: &Value, dir: &Path) -> Result<Control, String> {
        let s = parse(settings)?;
        make_open_dir(dir).map_err(|e| format!("cannot create control directory: {e}"))?;
        let control = Settings {
            path: dir.to_path_buf(),
            content_reads: s.content_reads,
        };
        Ok(Control::settings(
            serde_json::to_value(control).expect("settings serialize"),
        ))
    }

    fn derive_needle(
        &self,
        carrier: &str,
        _probe_id: &str,
        nonce: &Nonce,
        _scope: Option<&JobScope>,
    ) -> Result<Value, String> {
        Ok(match carrier {
            // Without the receipt, the precision the plant's filesystem
            // kept is unknown: a truncated mtime matches too.
            "mtime" => {
                let (sec, nsec) = derived_mtime(nonce);
                json!({ "mtime": [sec, nsec], "coarse": true })
            }
            "file-size" => json!({ "size": derived_size(nonce) }),
            RUNNER_PERSISTENCE => json!({ "beacons": true }),
            _ => json!({ "text": nonce.hex() }),
        })
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, String> {
        Ok(Box::new(Instance {
            s: parse(settings)?,
        }))
    }
}

/// Creates a directory anyone may list and read, whatever the umask: the
/// control must be open to run B even when B runs as another user.
fn make_open_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
}

fn parse(settings: &Value) -> Result<Settings, String> {
    serde_json::from_value(settings.clone()).map_err(|e| format!("bad filesystem settings: {e}"))
}

struct Instance {
    s: Settings,
}

/// One entry run A created, as journalled for cleanup.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    name: String,
    kind: Kind,
    dev: u64,
    ino: u64,
    dir_dev: u64,
    dir_ino: u64,
    /// Birth time where the filesystem keeps one: (dev, ino) alone cannot
    /// tell our entry from a replacement that got the freed inode number.
    #[serde(default)]
    btime: Option<(i64, u32)>,
    /// Set by cleanup-by-probe-id for an entry named like a plant whose
    /// carrier does not show it is one (e.g. a plant killed between
    /// creating a file and setting its xattr): left, with this reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unverified: Option<String>,
}

impl Entry {
    /// The journal entry of `name` in `dir`, as it is now (`st` is its
    /// lstat), ready for cleanup.
    fn of(
        dir: &OwnedFd,
        dir_st: &Stat,
        name: &OsStr,
        st: &Stat,
        kind: Kind,
        unverified: Option<String>,
    ) -> io::Result<Value> {
        let entry = Entry {
            name: name.to_string_lossy().into_owned(),
            kind,
            dev: st.dev,
            ino: st.ino,
            dir_dev: dir_st.dev,
            dir_ino: dir_st.ino,
            btime: sys::birth_at(dir, name)?,
            unverified,
        };
        Ok(serde_json::to_value(entry).expect("entry serializes"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
}

impl Kind {
    fn of(st: &Stat) -> Option<Kind> {
        match st.file_type() {
            libc::S_IFREG => Some(Kind::File),
            libc::S_IFDIR => Some(Kind::Dir),
            libc::S_IFLNK => Some(Kind::Symlink),
            libc::S_IFIFO => Some(Kind::Fifo),
            _ => None,
        }
    }
}

/// How a plant step failed, mapped onto the outcome it means.
fn plant_error(what: &str, e: io::Error) -> PlantOutcome {
    let code = sys::errno_name(&e).unwrap_or("error");
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => PlantOutcome::Refused {
            reason: format!("{what} refused by the filesystem ({code}): {e}"),
        },
        _ => PlantOutcome::Failed {
            reason: format!("{what} failed ({code}): {e}"),
        },
    }
}

/// mkdir(2), symlink(2) and mknod(2) say EPERM when the filesystem does
/// not support that kind of entry: the carrier cannot exist here (a
/// security module's EPERM reads the same; either way nothing was
/// planted), while EACCES is the directory's access control.
fn unsupported_on_eperm(kinds: &str, what: &str, e: io::Error) -> PlantOutcome {
    match e.raw_os_error() {
        Some(libc::EPERM) => PlantOutcome::Unsupported {
            reason: format!("the filesystem (or a security module) allows no {kinds} here: {e}"),
        },
        _ => plant_error(what, e),
    }
}

/// Nonce-derived mtime: seconds in 2000..2008 (28 bits), nanoseconds from
/// 30 more bits. A date that old on a fresh file looks innocuous.
fn derived_mtime(n: &Nonce) -> (i64, i64) {
    (
        946_684_800 + i64::from(n.word(0) & 0x0fff_ffff),
        i64::from(n.word(4) % 1_000_000_000),
    )
}

/// Nonce-derived size: 4 GiB plus 32 nonce bits, created sparse.
fn derived_size(n: &Nonce) -> u64 {
    (1u64 << 32) + u64::from(n.word(8))
}

/// Whether a stored mtime is `want`, or (`coarse`) `want` truncated to a
/// filesystem's coarser granularity (10 ns to 1 s): a later job without the
/// plant's receipt does not know how precisely the plant's filesystem
/// stored it, and must not call a truncated mtime a miss.
fn mtime_matches(stored: (i64, i64), want: (i64, i64), coarse: bool) -> bool {
    if stored == want {
        return true;
    }
    coarse
        && stored.0 == want.0
        && (1..=9)
            .map(|e| 10i64.pow(e))
            .any(|g| stored.1 == want.1 - want.1 % g)
}

/// The name and type of the entry a plant of `carrier` makes, from the
/// probe id and the nonce: plant and cleanup-by-probe-id agree through it.
fn planted_name(carrier: &str, probe_id: &str, hex: &str) -> Option<(OsString, Kind)> {
    let tag = format!(".runwarden-{probe_id}");
    let (name, kind) = match carrier {
        "file-content" | "xattr" | "xattr-name" | "mtime" | "file-size" => {
            (format!("{tag}-{carrier}"), Kind::File)
        }
        "file-name" => (format!("{tag}-{hex}"), Kind::File),
        "directory-name" => (format!("{tag}-{hex}"), Kind::Dir),
        "symlink-target" => (format!("{tag}-symlink-target"), Kind::Symlink),
        "special-file-name" => (format!("{tag}-{hex}"), Kind::Fifo),
        RUNNER_PERSISTENCE => (format!("{}{probe_id}", marker::BEACON_PREFIX), Kind::File),
        _ => return None,
    };
    Some((OsString::from(name), kind))
}

/// The content of a `file-content` plant.
fn marker_text(hex: &str) -> String {
    format!("runwarden probe marker\n{hex}\n")
}

/// Reads at most `max` bytes of a regular file: opened no-follow and
/// non-blocking and re-checked with fstat. `None` when it is not a regular
/// file.
fn read_small(dir: &OwnedFd, name: &OsStr, max: usize) -> io::Result<Option<Vec<u8>>> {
    let f = sys::open_read_at(dir, name)?;
    if !sys::file_stat(&f)?.is_reg() {
        return Ok(None);
    }
    let mut buf = Vec::new();
    f.take(max as u64).read_to_end(&mut buf)?;
    Ok(Some(buf))
}

/// Whether `name` has the form of a name-carrier marker of `probe_id`
/// (`.runwarden-<probe id>-<32 hex digits>`); returns the hex.
fn marker_hex<'n>(name: &'n [u8], probe_id: &str) -> Option<&'n [u8]> {
    let rest = name
        .strip_prefix(b".runwarden-")?
        .strip_prefix(probe_id.as_bytes())?
        .strip_prefix(b"-")?;
    (rest.len() == 32
        && rest
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b)))
    .then_some(rest)
}

impl Instance {
    fn open_surface(&self) -> io::Result<OwnedFd> {
        sys::open_dir(&self.s.path)
    }

    fn path_text(&self) -> String {
        escape::bytes(self.s.path.as_os_str().as_bytes())
    }

    /// Creates one entry, write-ahead: its intent is journalled before the
    /// syscall that creates it (so a run killed at any moment leaves
    /// nothing cleanup cannot find), taken back when the syscall fails
    /// (nothing was created), and recorded in full (device, inode, birth
    /// time) once the entry exists, before anything else happens to it.
    /// `refused` maps the syscall's error to the carrier's outcome.
    #[allow(clippy::too_many_arguments)]
    fn create<T>(
        &self,
        dir: &OwnedFd,
        dir_st: &Stat,
        name: &OsStr,
        kind: Kind,
        created: &mut dyn FnMut(Value),
        syscall: impl FnOnce() -> io::Result<T>,
        refused: impl FnOnce(io::Error) -> PlantOutcome,
    ) -> Result<T, PlantOutcome> {
        let intent = Intent::journal(dir_st, name, kind);
        created(intent.clone());
        let made = match syscall() {
            Ok(made) => made,
            Err(e) => {
                created(super::retraction(&intent));
                return Err(refused(e));
            }
        };
        // The entry exists from here on: whatever fails now is no refusal
        // of the plant (the intent stays journalled for cleanup).
        let broke = |what: &str, e: io::Error| PlantOutcome::Failed {
            reason: format!("{what} of the planted entry failed: {e}"),
        };
        let st = sys::lstat_at(dir, name).map_err(|e| broke("lstat", e))?;
        if Kind::of(&st) != Some(kind) {
            return Err(PlantOutcome::Failed {
                reason: "the planted entry has an unexpected type".into(),
            });
        }
        let entry = Entry::of(dir, dir_st, name, &st, kind, None).map_err(|e| broke("statx", e))?;
        created(entry);
        Ok(made)
    }
}

/// An entry run A is about to create, journalled before the syscall: the
/// name (derived from the probe id), the directory, who creates it and
/// when. Cleanup removes an entry of that name only if it is of that type,
/// owned by that uid and born no earlier.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Intent {
    name: String,
    kind: Kind,
    dir_dev: u64,
    dir_ino: u64,
    uid: u32,
    /// The kernel's coarse clock just before the syscall.
    after: (i64, i64),
}

impl Intent {
    fn journal(dir_st: &Stat, name: &OsStr, kind: Kind) -> Value {
        let intent = Intent {
            name: name.to_string_lossy().into_owned(),
            kind,
            dir_dev: dir_st.dev,
            dir_ino: dir_st.ino,
            uid: sys::euid(),
            after: sys::now_coarse(),
        };
        json!({ "intent": intent })
    }
}

/// What recovery looks for, per wanted carrier.
enum Needle {
    Name(Finder<'static>),
    Content(Finder<'static>),
    LinkTarget(Finder<'static>),
    XattrValue(Finder<'static>),
    XattrName(Finder<'static>),
    /// `coarse`: also a truncation of it (see [`mtime_matches`]).
    Mtime(i64, i64, bool),
    Size(u64),
    /// A valid beacon of another probe id.
    Beacons,
    Invalid(String),
}

fn needle_of(w: &Wanted) -> Needle {
    let text = || {
        w.needle
            .get("text")
            .and_then(Value::as_str)
            .map(|s| Finder::new(s.as_bytes()).into_owned())
    };
    let n = match w.carrier.as_str() {
        "file-name" | "directory-name" | "special-file-name" => text().map(Needle::Name),
        "file-content" => text().map(Needle::Content),
        "symlink-target" => text().map(Needle::LinkTarget),
        "xattr" => text().map(Needle::XattrValue),
        "xattr-name" => text().map(Needle::XattrName),
        "mtime" => w.needle.get("mtime").and_then(|m| {
            let coarse = w.needle.get("coarse").and_then(Value::as_bool) == Some(true);
            Some(Needle::Mtime(
                m.get(0)?.as_i64()?,
                m.get(1)?.as_i64()?,
                coarse,
            ))
        }),
        RUNNER_PERSISTENCE => Some(Needle::Beacons),
        "file-size" => w
            .needle
            .get("size")
            .and_then(Value::as_u64)
            .map(Needle::Size),
        _ => None,
    };
    n.unwrap_or_else(|| Needle::Invalid(format!("bad needle for carrier {}", w.carrier)))
}

/// Per wanted carrier: where it was found, or what got in the way.
#[derive(Default)]
struct Tally {
    found: Option<String>,
    denied: u64,
    first_error: Option<String>,
    errors: u64,
    /// For a carrier with an agreed name: whether that entry was there.
    agreed: Agreed,
}

#[derive(Default, Clone, Copy)]
enum Agreed {
    #[default]
    Absent,
    Present,
}

/// The route by which run B came to an entry.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Looked up by the name both runs derive from the probe id.
    Agreed,
    /// Found in the directory's listing.
    Listed,
}

/// Carriers whose entry has a name both runs derive from the probe id
/// (`.runwarden-<probe>-<carrier>`): run B can look it up without listing
/// the directory. The name carriers have no such route (their name is the
/// message), nor has runner-persistence (it looks for other probes').
fn by_agreed_name(carrier: &str) -> bool {
    matches!(
        carrier,
        "file-content" | "symlink-target" | "xattr" | "xattr-name" | "mtime" | "file-size"
    )
}

/// One recovery pass: what to look for and what was seen, carrier by
/// carrier (the vectors run in parallel with `wanted`).
struct Scan {
    needles: Vec<Needle>,
    tallies: Vec<Tally>,
    /// Each carrier's agreed name, where it has one.
    agreed: Vec<Option<OsString>>,
    want_stat: bool,
    want_link: bool,
    want_xattr: bool,
    want_content: bool,
}

impl Scan {
    fn new(wanted: &[Wanted], probe_id: &str) -> Scan {
        let needles: Vec<Needle> = wanted.iter().map(needle_of).collect();
        let tallies = needles
            .iter()
            .map(|n| match n {
                Needle::Invalid(m) => Tally {
                    errors: 1,
                    first_error: Some(m.clone()),
                    ..Tally::default()
                },
                _ => Tally::default(),
            })
            .collect();
        let agreed = wanted
            .iter()
            .map(|w| {
                by_agreed_name(&w.carrier)
                    .then(|| planted_name(&w.carrier, probe_id, "").map(|(n, _)| n))
                    .flatten()
            })
            .collect();
        let any = |f: fn(&Needle) -> bool| needles.iter().any(f);
        Scan {
            want_stat: any(needs_stat),
            want_link: any(is_link_target),
            want_xattr: any(is_xattr),
            want_content: any(is_content),
            needles,
            tallies,
            agreed,
        }
    }

    /// The agreed names to look up, each once.
    fn agreed_names(&self) -> Vec<OsString> {
        let mut names: Vec<OsString> = self.agreed.iter().flatten().cloned().collect();
        names.sort();
        names.dedup();
        names
    }

    /// Records what the lookup of an agreed name found (`Ok`: there).
    fn looked_up(&mut self, name: &OsStr, result: Result<(), &io::Error>) {
        for i in 0..self.needles.len() {
            if self.agreed[i].as_deref() != Some(name) {
                continue;
            }
            match result {
                Ok(()) => self.tallies[i].agreed = Agreed::Present,
                Err(e) => Self::charge(&mut self.tallies[i], "lookup of", name, e),
            }
        }
    }

    fn wants(&self, f: impl Fn(&Needle) -> bool) -> bool {
        self.needles.iter().any(f)
    }

    /// Records a hit, with its detail, for every needle `seen` says is
    /// present; the first hit of a carrier is the one reported.
    fn hit(&mut self, seen: impl Fn(&Needle) -> bool, detail: impl Fn() -> String) {
        for (n, t) in self.needles.iter().zip(self.tallies.iter_mut()) {
            if t.found.is_none() && seen(n) {
                t.found = Some(detail());
            }
        }
    }

    /// An error looking at one entry, charged to the carriers that needed
    /// that look.
    fn trouble(
        &mut self,
        needed: impl Fn(&Needle) -> bool,
        what: &str,
        name: &OsStr,
        e: &io::Error,
    ) {
        for (n, t) in self.needles.iter().zip(self.tallies.iter_mut()) {
            if needed(n) {
                Self::charge(t, what, name, e);
            }
        }
    }

    /// A vanished entry is no error (the directory is shared and busy), an
    /// access denial is the surface's own access control, anything else
    /// leaves that carrier's scan incomplete.
    fn charge(t: &mut Tally, what: &str, name: &OsStr, e: &io::Error) {
        match e.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENODATA) => {}
            Some(libc::EACCES | libc::EPERM) => t.denied += 1,
            _ => {
                t.errors += 1;
                if t.first_error.is_none() {
                    t.first_error = Some(format!("{what} {}: {e}", escape::bytes(name.as_bytes())));
                }
            }
        }
    }
}

fn is_content(n: &Needle) -> bool {
    matches!(n, Needle::Content(_))
}

fn is_link_target(n: &Needle) -> bool {
    matches!(n, Needle::LinkTarget(_))
}

fn is_xattr(n: &Needle) -> bool {
    matches!(n, Needle::XattrName(_) | Needle::XattrValue(_))
}

fn needs_stat(n: &Needle) -> bool {
    matches!(n, Needle::Mtime(..) | Needle::Size(_) | Needle::Content(_))
}

/// tmpfs and ramfs keep nothing across a reboot.
fn persistence_of(dir: &OwnedFd) -> Option<Persistence> {
    match sys::fs_magic(dir) {
        Ok(sys::TMPFS_MAGIC | sys::RAMFS_MAGIC) => Some(Persistence::Transient),
        _ => None,
    }
}

impl Surface for Instance {
    fn persistence(&self) -> Option<Persistence> {
        self.open_surface().ok().as_ref().and_then(persistence_of)
    }

    fn unavailable(&self, carrier: &str) -> Option<String> {
        (carrier == "file-content" && !self.s.content_reads).then(|| {
            "content-reads: false in the config: run B may not read file contents here".into()
        })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let (carrier, nonce) = (job.carrier.as_str(), &job.nonce);
        // Reaching the directory is not planting: a refusal here (a parent
        // run A may not search) says nothing about the directory's own
        // access control, so it is no PASS. Each carrier's refusal is
        // decided by the syscall that plants it, below.
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(e) => {
                return PlantOutcome::Failed {
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
                return PlantOutcome::Failed {
                    reason: format!("fstat of surface: {e}"),
                };
            }
        };
        let persistence = persistence_of(&dir);
        let where_ = if persistence.is_some() {
            " (tmpfs: until reboot)"
        } else {
            ""
        };
        let hex = nonce.hex();
        let Some((name, _)) = planted_name(carrier, ctx.probe_id, &hex) else {
            return PlantOutcome::Failed {
                reason: format!("unknown carrier {carrier}"),
            };
        };
        let planted = |needle: Value, detail: String| PlantOutcome::Planted {
            needle,
            persistence,
            detail: format!("{detail}{where_}"),
        };
        let text_needle = json!({ "text": hex });

        // Each arm creates exactly one entry whose only nonce-bearing
        // attribute is the carrier's own.
        let result: Result<PlantOutcome, PlantOutcome> = (|| {
            let create = |name: &OsStr, created: &mut dyn FnMut(Value)| {
                self.create(
                    &dir,
                    &dir_st,
                    name,
                    Kind::File,
                    created,
                    || sys::create_file_at(&dir, name, 0o644),
                    |e| plant_error("creating a file", e),
                )
            };
            // A directory, symlink or FIFO named `name`: EPERM from these
            // syscalls means the filesystem allows no such entry here.
            let node = |kind: Kind,
                        (kinds, what): (&str, &str),
                        make: &dyn Fn() -> io::Result<()>,
                        created: &mut dyn FnMut(Value)| {
                self.create(&dir, &dir_st, &name, kind, created, make, |e| {
                    unsupported_on_eperm(kinds, what, e)
                })
            };
            match carrier {
                "file-content" => {
                    let mut f = create(&name, created)?;
                    f.write_all(marker_text(&hex).as_bytes())
                        .map_err(|e| plant_error("writing file content", e))?;
                    Ok(planted(
                        text_needle,
                        "a 56-byte file with the nonce on line 2".into(),
                    ))
                }
                "file-name" => {
                    create(&name, created)?;
                    Ok(planted(
                        text_needle,
                        "an empty file named after the nonce".into(),
                    ))
                }
                "directory-name" => {
                    node(
                        Kind::Dir,
                        ("directories", "creating a directory"),
                        &|| sys::mkdir_at(&dir, &name, 0o755),
                        created,
                    )?;
                    Ok(planted(
                        text_needle,
                        "an empty directory named after the nonce".into(),
                    ))
                }
                "symlink-target" => {
                    node(
                        Kind::Symlink,
                        ("symlinks", "creating a symlink"),
                        &|| sys::symlink_at(OsStr::new(&hex), &dir, &name),
                        created,
                    )?;
                    Ok(planted(
                        text_needle,
                        "a dangling symlink whose target is the nonce".into(),
                    ))
                }
                "xattr" | "xattr-name" => {
                    let f = create(&name, created)?;
                    let (key, value) = if carrier == "xattr" {
                        (XATTR_KEY.to_string(), hex.as_bytes())
                    } else {
                        (format!("user.{hex}"), &b"1"[..])
                    };
                    match f.set_xattr(&key, value) {
                        Ok(()) => Ok(planted(
                            text_needle,
                            if carrier == "xattr" {
                                format!("{XATTR_KEY} holds the nonce")
                            } else {
                                "an xattr named user.<nonce>".into()
                            },
                        )),
                        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTSUP)) => {
                            Err(PlantOutcome::Unsupported {
                                reason: format!(
                                    "the filesystem does not support user.* extended attributes: {e}"
                                ),
                            })
                        }
                        Err(e) => Err(plant_error("setting an extended attribute", e)),
                    }
                }
                "mtime" => {
                    let f = create(&name, created)?;
                    let (sec, nsec) = derived_mtime(nonce);
                    sys::set_mtime(&f, sec, nsec).map_err(|e| plant_error("setting mtime", e))?;
                    let st = sys::file_stat(&f).map_err(|e| plant_error("stat", e))?;
                    // Recovery looks for what the filesystem really stored:
                    // coarse timestamps carry fewer bits, never none.
                    let precision = if st.mtime_nsec == nsec {
                        "ns"
                    } else {
                        "coarse"
                    };
                    Ok(planted(
                        json!({ "mtime": [st.mtime_sec, st.mtime_nsec] }),
                        format!(
                            "mtime {}.{:09} ({precision} precision stored)",
                            st.mtime_sec, st.mtime_nsec
                        ),
                    ))
                }
                "file-size" => {
                    let f = create(&name, created)?;
                    match f.set_len(derived_size(nonce)) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::EFBIG) => {
                            return Err(PlantOutcome::Unsupported {
                                reason: format!(
                                    "the filesystem refuses a sparse 4-8 GiB file: {e}"
                                ),
                            });
                        }
                        Err(e) => return Err(plant_error("setting the file size", e)),
                    }
                    let st = sys::file_stat(&f).map_err(|e| plant_error("stat", e))?;
                    Ok(planted(
                        json!({ "size": st.size }),
                        format!("a sparse file of {} bytes", st.size),
                    ))
                }
                "special-file-name" => {
                    node(
                        Kind::Fifo,
                        ("FIFOs", "creating a FIFO"),
                        &|| sys::mkfifo_at(&dir, &name, 0o644),
                        created,
                    )?;
                    Ok(planted(text_needle, "a FIFO named after the nonce".into()))
                }
                RUNNER_PERSISTENCE => {
                    let Some(beacon) = &job.beacon else {
                        return Err(PlantOutcome::Failed {
                            reason: "no beacon to plant".into(),
                        });
                    };
                    let mut f = create(&name, created)?;
                    f.write_all(beacon.as_bytes())
                        .map_err(|e| plant_error("writing the beacon", e))?;
                    Ok(planted(
                        json!({ "beacons": true }),
                        format!(
                            "a signed beacon {}; recovery looks for beacons of other probes",
                            escape::bytes(name.as_bytes())
                        ),
                    ))
                }
                other => Err(PlantOutcome::Failed {
                    reason: format!("unknown carrier {other}"),
                }),
            }
        })();
        result.unwrap_or_else(|o| o)
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let all = |o: RecoverOutcome| wanted.iter().map(|_| o.clone()).collect();
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(e) => return all(self.scan_error("reach", &e)),
        };
        let mut scan = Scan::new(wanted, ctx.probe_id);
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
        let ours = name_markers(wanted);
        let want_beacons = scan.wants(|n| matches!(n, Needle::Beacons));
        let mut listed: u64 = 0;
        let mut list_error: Option<io::Error> = None;
        match sys::open_listing(&dir).and_then(|fd| sys::DirIter::new(&fd)) {
            Err(e) => list_error = Some(e),
            Ok(iter) => {
                for item in iter {
                    let (name, dtype) = match item {
                        Ok(x) => x,
                        Err(e) => {
                            list_error = Some(e);
                            break;
                        }
                    };
                    listed += 1;
                    let nb = name.as_bytes();
                    if !ours.is_empty()
                        && let Some(hex) = marker_hex(nb, ctx.probe_id)
                        && !ours.iter().any(|o| o == hex)
                    {
                        notice(Notice {
                            kind: NoticeKind::ForgedMarker,
                            entry: escape::bytes(nb),
                            detail: "named like a marker of this probe, with a nonce no plant with this key made: someone else writes here".into(),
                            beacon: None,
                        });
                    }
                    if want_beacons && nb.starts_with(marker::BEACON_PREFIX.as_bytes()) {
                        self.check_beacon(ctx, &dir, &name, dtype, &mut scan, notice);
                    }
                    // Looked at already, by its agreed name (a name that
                    // holds no nonce: nothing for the name carriers).
                    if agreed.contains(&name) {
                        continue;
                    }
                    self.examine(
                        &dir,
                        &name,
                        None,
                        dtype,
                        &mut scan,
                        &mut window,
                        Route::Listed,
                    );
                }
            }
        }

        let path = self.path_text();
        let unlisted = list_error.as_ref().map(|e| {
            let code = sys::errno_name(e).unwrap_or("error");
            (
                matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)),
                format!("B could not list the directory {path} ({code}: {e})"),
            )
        });
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
            .map(|((t, n), agreed_name)| {
                if let Some(d) = t.found {
                    return RecoverOutcome::Found { detail: d };
                }
                if let Some(e) = t.first_error {
                    return RecoverOutcome::Failed {
                        reason: format!("{} entries could not be examined, e.g. {e}", t.errors),
                    };
                }
                let denied = if t.denied > 0 {
                    format!(
                        "; {} entries were closed to run B by their permissions",
                        t.denied
                    )
                } else {
                    String::new()
                };
                let looked_up = match (&agreed_name, t.agreed) {
                    (None, _) => String::new(),
                    (Some(name), Agreed::Absent) => format!(
                        "run B looked up the agreed name {}: not there; ",
                        escape::bytes(name.as_bytes())
                    ),
                    (Some(name), Agreed::Present) => format!(
                        "run B looked up the agreed name {}: no nonce in it; ",
                        escape::bytes(name.as_bytes())
                    ),
                };
                match &unlisted {
                    // The directory's own permissions refused the listing:
                    // closed to B for every carrier whose only route it is.
                    Some((true, why)) if agreed_name.is_none() => RecoverOutcome::Denied {
                        reason: format!("{why}: the names in it are closed to B"),
                    },
                    Some((true, why)) if t.denied > 0 => RecoverOutcome::Denied {
                        reason: format!("{looked_up}{why}{denied}"),
                    },
                    Some((true, why)) => RecoverOutcome::NotFound {
                        detail: format!("{looked_up}{why}"),
                    },
                    // Anything else stopped the listing: not a full look.
                    Some((false, why)) => RecoverOutcome::Failed {
                        reason: format!("{why} after {listed} entries"),
                    },
                    None => {
                        let what = if matches!(n, Needle::Beacons) {
                            "no valid beacon of another probe among them"
                        } else {
                            "none carried the nonce"
                        };
                        RecoverOutcome::NotFound {
                            detail: format!(
                                "{looked_up}run B listed {listed} entries of {path}; {what}{denied}"
                            ),
                        }
                    }
                }
            })
            .collect()
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        let dir = self
            .open_surface()
            .map_err(|e| format!("cannot open {}: {e}", self.path_text()))?;
        let dir_st = sys::fstat(&dir).map_err(|e| format!("fstat of surface: {e}"))?;
        let mut found = Vec::new();
        for job in jobs {
            let Some((name, kind)) = planted_name(&job.carrier, ctx.probe_id, &job.nonce.hex())
            else {
                continue;
            };
            let st = match sys::lstat_at(&dir, &name) {
                Ok(st) => st,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(format!("lstat of {}: {e}", escape::bytes(name.as_bytes()))),
            };
            let unverified = if Kind::of(&st) != Some(kind) {
                Some("named like a plant of this probe, but of another type".to_string())
            } else {
                self.verify_planted(ctx, &dir, &name, &st, job).err()
            };
            found.push(
                Entry::of(&dir, &dir_st, &name, &st, kind, unverified)
                    .map_err(|e| format!("statx: {e}"))?,
            );
        }
        Ok(found)
    }

    /// The journal holds, per entry, its intent, then its full record (or
    /// a retraction of the intent when the syscall failed). An intent with
    /// neither is an entry whose creation may or may not have happened
    /// when run A stopped: [`Instance::cleanup_intent`].
    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        let recorded: std::collections::HashSet<&str> = entries
            .iter()
            .filter(|e| e.get("ino").is_some())
            .filter_map(|e| e.get("name")?.as_str())
            .collect();
        super::cleanup_unretracted(entries, |e| match e.get("intent") {
            Some(i) => {
                let name = i.get("name").and_then(Value::as_str).unwrap_or("");
                if recorded.contains(name) {
                    CleanupOutcome::Superseded
                } else {
                    self.cleanup_intent(i)
                }
            }
            None => self.cleanup(e),
        })
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        let e: Entry = match serde_json::from_value(entry.clone()) {
            Ok(e) => e,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("unreadable journal entry: {err}"),
                };
            }
        };
        if let Some(why) = e.unverified {
            return CleanupOutcome::Left {
                reason: format!("{why}: not provably ours, left alone"),
            };
        }
        // Entries can come from a receipt file: only a plain name of
        // runwarden's own form, directly in the surface, is ever removed.
        if e.name.contains('/') || !e.name.starts_with(".runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden entry name: left alone".into(),
            };
        }
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("cannot open {}: {err}", self.path_text()),
                };
            }
        };
        match sys::fstat(&dir) {
            Ok(st) if st.dev == e.dir_dev && st.ino == e.dir_ino => {}
            Ok(_) => {
                return CleanupOutcome::Left {
                    reason: "the surface path now names another directory than the one planted in"
                        .into(),
                };
            }
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("fstat: {err}"),
                };
            }
        }
        let name = OsStr::new(&e.name);
        let st = match sys::lstat_at(&dir, name) {
            Ok(st) => st,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return CleanupOutcome::Gone,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("lstat: {err}"),
                };
            }
        };
        let born = match sys::birth_at(&dir, name) {
            Ok(b) => b,
            Err(err) => {
                return CleanupOutcome::Left {
                    reason: format!("statx: {err}"),
                };
            }
        };
        if Kind::of(&st) != Some(e.kind) || st.dev != e.dev || st.ino != e.ino || born != e.btime {
            return CleanupOutcome::Left {
                reason: "replaced since it was planted (type, inode or birth time differs): not ours to remove"
                    .into(),
            };
        }
        // Linux has no unlink-by-inode; the window between this check and
        // the unlink is one syscall, and unlinkat never follows a symlink.
        match sys::unlink_at(&dir, name, e.kind == Kind::Dir) {
            Ok(()) => CleanupOutcome::Removed,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => CleanupOutcome::Gone,
            Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => CleanupOutcome::Left {
                reason: "the planted directory is no longer empty: someone put entries into it"
                    .into(),
            },
            Err(err) => CleanupOutcome::Left {
                reason: format!("unlink: {err}"),
            },
        }
    }

    fn describe(&self, entry: &Value) -> String {
        let name = entry.get("name").and_then(Value::as_str).unwrap_or("?");
        format!("{} in {}", escape::bytes(name.as_bytes()), self.path_text())
    }
}

/// The nonces of this probe's name markers: any other name in that form is
/// a marker this key never made.
fn name_markers(wanted: &[Wanted]) -> Vec<Vec<u8>> {
    wanted
        .iter()
        .filter(|w| {
            matches!(
                w.carrier.as_str(),
                "file-name" | "directory-name" | "special-file-name"
            )
        })
        .filter_map(|w| {
            w.needle
                .get("text")?
                .as_str()
                .map(|t| t.as_bytes().to_vec())
        })
        .collect()
}

impl Instance {
    /// Looks at one entry as far as a wanted carrier needs: its name (when
    /// listed), its `lstat`, its link target, its xattrs, and the first
    /// window of a regular file. `st` is its lstat when the caller has it.
    #[allow(clippy::too_many_arguments)]
    fn examine(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: Option<Stat>,
        dtype: u8,
        scan: &mut Scan,
        window: &mut [u8],
        route: Route,
    ) {
        let nb = name.as_bytes();
        let shown = || escape::bytes(nb);
        let via = match route {
            Route::Agreed => " (looked up by its agreed name)",
            Route::Listed => "",
        };
        if route == Route::Listed {
            scan.hit(
                |n| matches!(n, Needle::Name(f) if f.find(nb).is_some()),
                || {
                    format!(
                        "run B listed entry {} whose name carries the nonce",
                        shown()
                    )
                },
            );
        }
        let mut st = st;
        if st.is_none() && (scan.want_stat || (scan.want_link && dtype == libc::DT_UNKNOWN)) {
            match sys::lstat_at(dir, name) {
                Ok(s) => st = Some(s),
                Err(e) => {
                    return scan.trouble(
                        |n| needs_stat(n) || is_link_target(n),
                        "lstat of",
                        name,
                        &e,
                    );
                }
            }
        }
        let is_link = st.map(|s| s.is_symlink()).unwrap_or(dtype == libc::DT_LNK);
        if let Some(s) = st {
            scan.hit(
                |n| matches!(n, Needle::Mtime(sec, nsec, coarse) if mtime_matches((s.mtime_sec, s.mtime_nsec), (*sec, *nsec), *coarse)),
                || format!("run B saw the nonce-derived mtime on entry {}{via}", shown()),
            );
            scan.hit(
                |n| matches!(n, Needle::Size(size) if s.is_reg() && s.size == *size),
                || format!("run B saw the nonce-derived size on entry {}{via}", shown()),
            );
            if scan.want_content && s.is_reg() && s.size > 0 {
                self.scan_content(dir, name, &s, scan, window, via);
            }
        }
        if scan.want_link && is_link {
            match sys::readlink_at(dir, name) {
                Ok(target) => scan.hit(
                    |n| matches!(n, Needle::LinkTarget(f) if f.find(&target).is_some()),
                    || {
                        format!(
                            "run B read symlink {} whose target carries the nonce{via}",
                            shown()
                        )
                    },
                ),
                Err(e) => scan.trouble(is_link_target, "readlink of", name, &e),
            }
        }
        if scan.want_xattr && !is_link {
            self.scan_xattrs(name, scan, via);
        }
    }

    /// Reads one beacon-named entry (no-follow, regular files only, at most
    /// [`marker::BEACON_MAX`] bytes) and checks it with the run's key. A
    /// valid beacon of another probe is a hit for runner-persistence; every
    /// beacon that is not this probe's own is a notice.
    ///
    /// Anyone who can write the directory can name anything like a beacon:
    /// an entry that is not a regular file (a symlink, never followed; a
    /// FIFO, never opened; a directory) is a malformed-beacon notice, never
    /// an error that would fail every probe of a shared `/tmp`.
    fn check_beacon(
        &self,
        ctx: &RunCtx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        dtype: u8,
        scan: &mut Scan,
        notice: &mut dyn FnMut(Notice),
    ) {
        let beacons = |n: &Needle| matches!(n, Needle::Beacons);
        let shown = escape::bytes(name.as_bytes());
        let not_a_file = |what: &str| Notice {
            kind: NoticeKind::MalformedBeacon,
            entry: shown.clone(),
            detail: format!("named like a beacon but {what}; not counted"),
            beacon: None,
        };
        let regular = match dtype {
            libc::DT_REG => true,
            libc::DT_UNKNOWN => match sys::lstat_at(dir, name) {
                Ok(st) => st.is_reg(),
                Err(e) => return scan.trouble(beacons, "lstat of beacon", name, &e),
            },
            _ => false,
        };
        if !regular {
            return notice(not_a_file("not a regular file (never followed or opened)"));
        }
        let bytes = match read_small(dir, name, marker::BEACON_MAX) {
            Ok(Some(b)) => b,
            Ok(None) => return notice(not_a_file("not a regular file (never followed or opened)")),
            // Swapped for a symlink (O_NOFOLLOW) or a device since it was
            // listed: someone's entry, not a beacon, and not our failure.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ELOOP | libc::ENXIO | libc::ENODEV)
                ) =>
            {
                return notice(not_a_file("not a regular file when opened"));
            }
            Err(e) => return scan.trouble(beacons, "reading beacon", name, &e),
        };
        match ctx.key.check_beacon(&bytes) {
            Checked::Valid(body) if body.probe_id == ctx.probe_id => {}
            Checked::Valid(body) => {
                let detail = format!(
                    "beacon of probe {} planted {} by {}",
                    escape::bytes(body.probe_id.as_bytes()),
                    escape::bytes(body.planted_at.as_bytes()),
                    escape::bytes(body.origin.describe().as_bytes())
                );
                scan.hit(beacons, || format!("run B found {shown}, a valid {detail}"));
                notice(Notice {
                    kind: NoticeKind::Beacon,
                    entry: shown,
                    detail,
                    beacon: Some(body),
                });
            }
            Checked::Unverified { body, why } => notice(Notice {
                kind: NoticeKind::UnverifiedBeacon,
                entry: shown,
                detail: format!(
                    "claims probe {}, but {why}; not counted",
                    escape::bytes(body.probe_id.as_bytes())
                ),
                beacon: Some(body),
            }),
            Checked::Malformed(why) => notice(Notice {
                kind: NoticeKind::MalformedBeacon,
                entry: shown,
                detail: format!("{}; not counted", escape::bytes(why.as_bytes())),
                beacon: None,
            }),
        }
    }

    /// Removes the entry an intent named, when run A stopped before
    /// recording it in full: only if the name is there, in the same
    /// directory, with the intended type, owned by the intent's uid, and
    /// born (or, where the filesystem keeps no birth time, changed) no
    /// earlier than a second before the intent. Anything else with that
    /// name is someone else's.
    fn cleanup_intent(&self, intent: &Value) -> CleanupOutcome {
        let left = |reason: String| CleanupOutcome::Left { reason };
        let i: Intent = match serde_json::from_value(intent.clone()) {
            Ok(i) => i,
            Err(err) => return left(format!("unreadable journal entry: {err}")),
        };
        if i.name.contains('/') || !i.name.starts_with(".runwarden-") {
            return left("not a runwarden entry name: left alone".into());
        }
        let dir = match self.open_surface() {
            Ok(d) => d,
            Err(err) => return left(format!("cannot open {}: {err}", self.path_text())),
        };
        match sys::fstat(&dir) {
            Ok(st) if st.dev == i.dir_dev && st.ino == i.dir_ino => {}
            Ok(_) => {
                return left(
                    "the surface path now names another directory than the one planted in".into(),
                );
            }
            Err(err) => return left(format!("fstat: {err}")),
        }
        let name = OsStr::new(&i.name);
        let st = match sys::lstat_at(&dir, name) {
            Ok(st) => st,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return CleanupOutcome::Gone,
            Err(err) => return left(format!("lstat: {err}")),
        };
        let born = match sys::birth_at(&dir, name) {
            Ok(b) => b.unwrap_or((st.ctime_sec, st.ctime_nsec as u32)),
            Err(err) => return left(format!("statx: {err}")),
        };
        // The kernel stamps inodes with its coarse clock; a second of slack
        // covers any tick between the intent and the syscall.
        let after = (i.after.0 - 1, i.after.1 as u32);
        if Kind::of(&st) != Some(i.kind) || st.uid != i.uid || born < after {
            return left(
                "named like the entry run A was creating when it stopped, but of another type, owner or age: not ours to remove"
                    .into(),
            );
        }
        match sys::unlink_at(&dir, name, i.kind == Kind::Dir) {
            Ok(()) => CleanupOutcome::Removed,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => CleanupOutcome::Gone,
            Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => {
                left("the planted directory is no longer empty: someone put entries into it".into())
            }
            Err(err) => left(format!("unlink: {err}")),
        }
    }

    /// Whether an entry named like `job`'s plant is that plant: its
    /// carrier proves it, or it is ours and in the state a plant passes
    /// through before its carrier is set. `Err(why)` when neither.
    fn verify_planted(
        &self,
        ctx: &RunCtx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        job: &PlantJob,
    ) -> Result<(), String> {
        let proven = self.carrier_proves(ctx, dir, name, st, job);
        if proven.is_err() && st.uid == sys::euid() && self.unfinished(dir, name, st, job) {
            // Run A stopped between creating the entry and setting its
            // carrier: the derived name, our own uid, and the exact state
            // a plant passes through.
            return Ok(());
        }
        proven
    }

    /// Whether an entry is in the state a plant of `job` leaves between
    /// creating it and setting its carrier: empty (or, for file-content,
    /// a prefix of the marker text), with no user xattr yet.
    fn unfinished(&self, dir: &OwnedFd, name: &OsStr, st: &Stat, job: &PlantJob) -> bool {
        if !st.is_reg() {
            return false;
        }
        let no_xattrs = || {
            xattr::list(self.s.path.join(name))
                .map(|mut k| !k.any(|k| k.as_encoded_bytes().starts_with(b"user.")))
                .unwrap_or(false)
        };
        match job.carrier.as_str() {
            "file-content" => {
                let full = marker_text(&job.nonce.hex());
                matches!(read_small(dir, name, CONTENT_WINDOW), Ok(Some(b)) if full.as_bytes().starts_with(&b))
            }
            // A time never set back: the plant's futimens has not run (a
            // set mtime lies years before the entry's last change).
            "mtime" => st.size == 0 && st.mtime_sec + 1 >= st.ctime_sec && no_xattrs(),
            "xattr" | "xattr-name" | "file-size" | RUNNER_PERSISTENCE => {
                st.size == 0 && no_xattrs()
            }
            _ => false,
        }
    }

    /// Whether an entry named like `job`'s plant shows, through its own
    /// carrier, that it is that plant: `Err(why)` when it does not.
    fn carrier_proves(
        &self,
        ctx: &RunCtx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        job: &PlantJob,
    ) -> Result<(), String> {
        let hex = job.nonce.hex();
        let no = |what: &str| {
            Err(format!(
                "named like this probe's {} plant, but {what}",
                job.carrier
            ))
        };
        match job.carrier.as_str() {
            // The nonce is in the name itself.
            "file-name" | "directory-name" | "special-file-name" => Ok(()),
            "file-content" => match read_small(dir, name, CONTENT_WINDOW) {
                Ok(Some(b)) if memchr::memmem::find(&b, hex.as_bytes()).is_some() => Ok(()),
                _ => no("its content does not hold the nonce"),
            },
            "symlink-target" => match sys::readlink_at(dir, name) {
                Ok(t) if t == hex.as_bytes() => Ok(()),
                _ => no("its target is not the nonce"),
            },
            "xattr" | "xattr-name" => {
                let path = self.s.path.join(name);
                let ok = if job.carrier == "xattr" {
                    matches!(xattr::get(&path, XATTR_KEY), Ok(Some(v)) if v == hex.as_bytes())
                } else {
                    matches!(xattr::get(&path, format!("user.{hex}")), Ok(Some(_)))
                };
                if ok {
                    Ok(())
                } else {
                    no("it lacks the nonce's xattr")
                }
            }
            "mtime" => {
                let (sec, nsec) = derived_mtime(&job.nonce);
                if mtime_matches((st.mtime_sec, st.mtime_nsec), (sec, nsec), true) {
                    Ok(())
                } else {
                    no("its mtime is not the nonce's")
                }
            }
            "file-size" => {
                if st.size == derived_size(&job.nonce) {
                    Ok(())
                } else {
                    no("its size is not the nonce's")
                }
            }
            RUNNER_PERSISTENCE => match read_small(dir, name, marker::BEACON_MAX) {
                Ok(Some(b)) => match ctx.key.check_beacon(&b) {
                    Checked::Valid(body) if body.probe_id == ctx.probe_id => Ok(()),
                    _ => no("it is not a valid beacon of this probe"),
                },
                _ => no("it cannot be read"),
            },
            other => Err(format!("unknown carrier {other}")),
        }
    }

    /// What a failure to open or list the surface itself means for every
    /// carrier: the surface's access control keeping run B out is a
    /// refusal; anything else leaves the scan undone.
    fn scan_error(&self, verb: &str, e: &io::Error) -> RecoverOutcome {
        let path = self.path_text();
        match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => RecoverOutcome::Denied {
                reason: format!("run B cannot {verb} {path}: {e}"),
            },
            Some(libc::ENOENT | libc::ENOTDIR) => RecoverOutcome::Failed {
                reason: format!("surface unreachable: cannot {verb} {path}: {e}"),
            },
            _ => RecoverOutcome::Failed {
                reason: format!("cannot {verb} {path}: {e}"),
            },
        }
    }

    /// Reads the first window of one regular file and matches content
    /// needles. Opened no-follow and non-blocking, then re-checked with
    /// fstat, so an entry swapped for a FIFO or symlink since the lstat is
    /// never read from.
    fn scan_content(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: &Stat,
        scan: &mut Scan,
        window: &mut [u8],
        via: &str,
    ) {
        let mut f = match sys::open_read_at(dir, name) {
            Ok(f) => f,
            Err(e) => return scan.trouble(is_content, "opening", name, &e),
        };
        match sys::file_stat(&f) {
            Ok(now) if now.is_reg() && now.ino == st.ino && now.dev == st.dev => {}
            _ => return,
        }
        let mut filled = 0;
        while filled < window.len() {
            match f.read(&mut window[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return scan.trouble(is_content, "reading", name, &e),
            }
        }
        let data = &window[..filled];
        scan.hit(
            |n| matches!(n, Needle::Content(f) if f.find(data).is_some()),
            || {
                format!(
                    "run B read the nonce in the content of {}{via}",
                    escape::bytes(name.as_bytes())
                )
            },
        );
    }

    /// Lists (and where needed reads) the user.* xattrs of one entry. The
    /// l* calls the xattr crate uses never follow a symlink and never open
    /// the entry, so FIFOs and sockets are safe here.
    fn scan_xattrs(&self, name: &OsStr, scan: &mut Scan, via: &str) {
        let path = self.s.path.join(name);
        let shown = || escape::bytes(name.as_bytes());
        let keys = match xattr::list(&path) {
            Ok(k) => k,
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return,
            Err(e) => return scan.trouble(is_xattr, "listxattr of", name, &e),
        };
        let want_values = scan.wants(|n| matches!(n, Needle::XattrValue(_)));
        for key in keys {
            let kb = key.as_bytes();
            if !kb.starts_with(b"user.") {
                continue;
            }
            scan.hit(
                |n| matches!(n, Needle::XattrName(f) if f.find(kb).is_some()),
                || {
                    format!(
                        "run B listed an xattr whose name carries the nonce on {}{via}",
                        shown()
                    )
                },
            );
            if !want_values {
                continue;
            }
            match xattr::get(&path, &key) {
                Ok(Some(v)) => scan.hit(
                    |n| matches!(n, Needle::XattrValue(f) if f.find(&v).is_some()),
                    || format!("run B read the nonce in an xattr of {}{via}", shown()),
                ),
                Ok(None) => {}
                Err(e) => scan.trouble(
                    |n| matches!(n, Needle::XattrValue(_)),
                    "getxattr of",
                    name,
                    &e,
                ),
            }
        }
    }
}
