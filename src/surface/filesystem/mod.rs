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

mod cleanup;
mod plant;
mod recover;
mod scan;
mod snap;
mod surface;
mod watch;

use scan::{Agreed, Look};

use super::carrier::carriers;
use super::{Persistence, RUNNER_PERSISTENCE};
use crate::escape;
use crate::marker;
use crate::nonce::Nonce;
use crate::sys::{self, Stat};
use serde::{Deserialize, Serialize};
use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How much of each regular file content recovery reads. The
/// `file-content` plant is a file of under 100 bytes with the nonce on its
/// second line, so the window can never hide it; reading only a window keeps
/// a directory of huge foreign files from stalling the scan.
pub const CONTENT_WINDOW: usize = 64 * 1024;

/// The xattr that carries the nonce for the `xattr` carrier.
const XATTR_KEY: &str = "user.runwarden";

carriers! {
    /// The filesystem's carriers.
    pub enum Fs {
        FileContent = "file-content", Durable, "the nonce inside a regular file's content";
        FileName = "file-name", Durable, "the nonce in the name of an empty regular file";
        DirectoryName = "directory-name", Durable, "the nonce in the name of an empty directory";
        SymlinkTarget = "symlink-target", Durable, "the nonce as the target of a dangling symlink (never followed)";
        Xattr = "xattr", Durable, "the nonce in the value of a user.* extended attribute";
        XattrName = "xattr-name", Durable, "the nonce in the name of a user.* extended attribute (listxattr needs no read permission on the file)";
        Mtime = "mtime", Durable, "a nonce-derived modification time (seconds and nanoseconds) on an innocuous file";
        FileSize = "file-size", Durable, "a nonce-derived size (4 to 8 GiB, sparse: no blocks used) of an innocuous file";
        SpecialFileName = "special-file-name", Durable, "the nonce in the name of a FIFO (recovery lists it, never opens it)";
        RunnerPersistence = RUNNER_PERSISTENCE, Durable, "a signed beacon of another probe (an earlier job, another repository) found here: the surface kept state between jobs";
    }
}

/// Settings after validation; also what runs A and B receive.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Settings {
    /// Absolute: runs A and B work in other directories.
    pub path: PathBuf,
    pub content_reads: bool,
}

/// Creates a directory anyone may list and read, whatever the umask: the
/// control must be open to run B even when B runs as another user.
fn make_open_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
}

/// An entry run A is about to create, journalled before the syscall: the
/// name (derived from the probe id), the directory, who creates it and
/// when. Cleanup removes an entry of that name only if it is of that type,
/// owned by that uid and born no earlier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intent {
    name: String,
    kind: Kind,
    dir_dev: u64,
    dir_ino: u64,
    uid: u32,
    /// The kernel's coarse clock just before the syscall.
    after: (i64, i64),
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

/// One recovery pass: what to look for and what was seen, carrier by
/// carrier (the vectors run in parallel with `wanted`).
struct Scan {
    needles: Vec<Look>,
    tallies: Vec<Tally>,
    /// Each carrier's agreed name, where it has one.
    agreed: Vec<Option<OsString>>,
    want_stat: bool,
    want_link: bool,
    want_xattr: bool,
    want_content: bool,
}

/// An open filesystem surface: a directory.
pub struct Filesystem {
    settings: Settings,
}

/// One entry run A created, as journalled for cleanup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
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
    ) -> io::Result<Entry> {
        Ok(Entry {
            name: name.to_string_lossy().into_owned(),
            kind,
            dev: st.dev,
            ino: st.ino,
            dir_dev: dir_st.dev,
            dir_ino: dir_st.ino,
            btime: sys::birth_at(dir, name)?,
            unverified,
        })
    }
}

/// An intent, as journalled: `{"intent": {…}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentLine {
    intent: Intent,
}

/// One journal line: an entry's intent (before the syscall that creates
/// it), or the entry as created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    Intent(IntentLine),
    Made(Entry),
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Line::Intent(i) => &i.intent.name,
            Line::Made(e) => &e.name,
        };
        f.write_str(&escape::bytes(name.as_bytes()))
    }
}

/// What recovery looks for, as the plant reports it (and `recover`
/// derives it without a receipt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Needle {
    /// The nonce's hex, in a name, content, link target or xattr.
    Text {
        text: String,
    },
    /// The mtime the filesystem stored; `coarse`: also a truncation of it
    /// (a later job without the receipt does not know the precision).
    Mtime {
        mtime: (i64, i64),
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        coarse: bool,
    },
    Size {
        size: u64,
    },
    /// runner-persistence: beacons of other probes, not this plant.
    Beacons {
        beacons: bool,
    },
}

impl super::Needle for Needle {}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
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

/// The name and type of the entry a plant of `carrier` makes, from the
/// probe id, the nonce and the surface: plant, run B's lookup by agreed
/// name and cleanup-by-probe-id agree through it. A name without a nonce
/// ends in the surface's tag ([`RunCtx::surface_tag`]): one directory
/// probed under two names (a bind mount) gets two sets of names, never
/// one file planted twice.
fn planted_name(carrier: Fs, ctx: &crate::surface::RunCtx<'_>, hex: &str) -> (OsString, Kind) {
    let probe_id = ctx.probe_id;
    let tag = format!(".runwarden-{probe_id}");
    let agreed = match ctx.surface_tag() {
        s if s.is_empty() => format!("{tag}-{carrier}"),
        s => format!("{tag}-{carrier}-{s}"),
    };
    let (name, kind) = match carrier {
        Fs::FileContent | Fs::Xattr | Fs::XattrName | Fs::Mtime | Fs::FileSize => {
            (agreed, Kind::File)
        }
        Fs::FileName => (format!("{tag}-{hex}"), Kind::File),
        Fs::DirectoryName => (format!("{tag}-{hex}"), Kind::Dir),
        Fs::SymlinkTarget => (agreed, Kind::Symlink),
        Fs::SpecialFileName => (format!("{tag}-{hex}"), Kind::Fifo),
        Fs::RunnerPersistence => (format!("{}{probe_id}", marker::BEACON_PREFIX), Kind::File),
    };
    (OsString::from(name), kind)
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

impl Filesystem {
    fn open_surface(&self) -> io::Result<OwnedFd> {
        sys::open_dir(&self.settings.path)
    }

    fn path_text(&self) -> String {
        escape::bytes(self.settings.path.as_os_str().as_bytes())
    }
}

/// Reads the start of a file into `window`, as much as fits: how many
/// bytes (fewer at the end of the file).
fn fill(f: &mut std::fs::File, window: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < window.len() {
        match f.read(&mut window[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// tmpfs and ramfs keep nothing across a reboot.
fn persistence_of(dir: &OwnedFd) -> Option<Persistence> {
    match sys::fs_magic(dir) {
        Ok(sys::TMPFS_MAGIC | sys::RAMFS_MAGIC) => Some(Persistence::Transient),
        _ => None,
    }
}
