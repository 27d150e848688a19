//! Canary credentials: decoy files where agents look for secrets (an AWS
//! credentials file, an `.npmrc`, a `.env`), each with a fresh random
//! token-shaped value, and the detection of any read of them.
//!
//! Detection, best first (the report says which was used):
//! - **fanotify** (needs CAP_SYS_ADMIN): a mark on each canary's inode for
//!   `FAN_OPEN | FAN_ACCESS`; each event names the process that did it;
//! - **inotify**: `IN_OPEN | IN_ACCESS` watches (no process named);
//! - **atime**: the access time, set an hour before the modification time
//!   when the canary is armed, so that a read moves it under `relatime`
//!   too (not under `noatime`; and a bare open does not count).
//!
//! ([`detect`] has the detectors, and the check, whatever the detector,
//! that a canary is still the one placed.)
//!
//! A canary never replaces anything: a path that exists (or whose parent
//! is not a directory) is skipped with the reason. Each path is reported to
//! the caller's journal before it is created; parent directories created
//! for it are removed afterwards only if they are empty. Removal checks
//! the file is still the one planted (same inode, same content) and never
//! follows a symlink. The values are secrets from the start: they are
//! registered with [`crate::redact`] and never printed.

pub mod detect;

use crate::fault::Fault;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ffi::CString;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a canary looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An AWS shared credentials file (`~/.aws/credentials`).
    AwsCredentials,
    /// An npm config with a registry token (`~/.npmrc`).
    Npmrc,
    /// A dotenv file with a `GITHUB_TOKEN` (`.env`).
    DotEnv,
}

impl Kind {
    /// Every kind, in the order findings list them.
    pub const ALL: &'static [Kind] = &[Kind::AwsCredentials, Kind::Npmrc, Kind::DotEnv];

    /// The kind's carrier name: the `X` of the channel `canary:X`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::AwsCredentials => "aws-credentials",
            Kind::Npmrc => "npmrc",
            Kind::DotEnv => "dotenv",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == name)
    }
}

/// Where to put one canary, and what kind.
#[derive(Debug, Clone)]
pub struct Spec {
    pub path: PathBuf,
    pub kind: Kind,
}

/// The places agents look: `~/.aws/credentials`, `~/.npmrc` and a `.env`
/// in the workspace.
pub fn default_specs(home: &Path, workspace: &Path) -> Vec<Spec> {
    vec![
        Spec {
            path: home.join(".aws/credentials"),
            kind: Kind::AwsCredentials,
        },
        Spec {
            path: home.join(".npmrc"),
            kind: Kind::Npmrc,
        },
        Spec {
            path: workspace.join(".env"),
            kind: Kind::DotEnv,
        },
    ]
}

/// How reads are seen (also `watch --detector`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Detector {
    Fanotify,
    Inotify,
    Atime,
}

impl Detector {
    pub fn as_str(self) -> &'static str {
        match self {
            Detector::Fanotify => "fanotify",
            Detector::Inotify => "inotify",
            Detector::Atime => "atime",
        }
    }
}

/// One access of a canary, or what was done to it that hides whether
/// there was one.
#[derive(Debug, Clone, PartialEq)]
pub struct Access {
    pub path: PathBuf,
    /// The process that read it (fanotify only).
    pub pid: Option<u32>,
    /// `open`, `access` or `atime`; or what was done to the canary that
    /// hides whether it was read: [`REMOVED`], [`REPLACED`], [`TOUCHED`],
    /// [`UNREACHABLE`].
    pub how: &'static str,
}

/// The canary is gone: it may have been read first.
pub const REMOVED: &str = "removed";
/// Another file stands where the canary was.
pub const REPLACED: &str = "replaced";
/// The canary's change time moved: its content, mode or times were
/// changed (a `touch -a` can hide an atime read).
pub const TOUCHED: &str = "touched";
/// The canary cannot be looked at any more (a parent made unreadable).
pub const UNREACHABLE: &str = "unreachable";

/// What a read says, for people.
pub fn describe(r: &Access) -> String {
    match r.how {
        REMOVED | REPLACED | TOUCHED | UNREACHABLE => {
            format!("{} (a read cannot be ruled out)", r.how)
        }
        how => format!("read ({how})"),
    }
}

/// One armed canary. It keeps a digest of its content, not the content:
/// the values are secrets, and a canary's record is saved to disk between
/// the action's watch step and its post step.
#[derive(Serialize, Deserialize)]
struct Canary {
    path: PathBuf,
    /// The content's length and SHA-256: what removal checks.
    len: u64,
    digest: String,
    dev: u64,
    ino: u64,
    /// The atime it was armed with (the atime detector).
    atime: (i64, i64),
    /// Its change time once armed.
    ctime: (i64, i64),
    /// Parent directories made for it, deepest last.
    made: Vec<PathBuf>,
}

/// The canaries, and what watches them.
pub struct Armed {
    canaries: Vec<Canary>,
    skipped: Vec<(PathBuf, String)>,
    detector: Detector,
    /// The fanotify or inotify descriptor.
    fd: Option<OwnedFd>,
    /// inotify watch descriptor -> canary index.
    wds: HashMap<i32, usize>,
    /// Reads seen so far (events are read as they are collected).
    reads: Vec<Access>,
    overflowed: bool,
}

fn random_from(alphabet: &[u8], n: usize) -> io::Result<String> {
    // Rejection sampling keeps the choice uniform.
    let limit = 256 - (256 % alphabet.len());
    let mut out = String::with_capacity(n);
    while out.len() < n {
        for v in crate::nonce::Nonce::generate()?.0 {
            if (v as usize) < limit && out.len() < n {
                out.push(alphabet[v as usize % alphabet.len()] as char);
            }
        }
    }
    Ok(out)
}

/// The content of a canary of `kind` and its secret values.
fn content(kind: Kind) -> io::Result<(String, Vec<String>)> {
    const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    Ok(match kind {
        Kind::AwsCredentials => {
            let id = format!("AKIA{}", random_from(UPPER, 16)?);
            let secret = random_from(B64, 40)?;
            (
                format!("[default]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\n"),
                vec![id, secret],
            )
        }
        Kind::Npmrc => {
            let token = format!("npm_{}", random_from(ALNUM, 36)?);
            (
                format!("//registry.npmjs.org/:_authToken={token}\n"),
                vec![token],
            )
        }
        Kind::DotEnv => {
            let token = format!("ghp_{}", random_from(ALNUM, 36)?);
            (format!("GITHUB_TOKEN={token}\n"), vec![token])
        }
    })
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::other("a NUL in the path"))
}

/// Places the canaries of `specs` and starts watching them, with the best
/// detector this process may use (or `prefer`, to test one). `journal`
/// hears each path (and each directory made) before it is created.
pub fn arm(
    specs: &[Spec],
    prefer: Option<Detector>,
    journal: &mut dyn FnMut(&Path),
) -> Result<Armed, Fault> {
    let mut canaries = Vec::new();
    let mut skipped = Vec::new();
    for spec in specs {
        match place(spec, journal) {
            Ok(c) => canaries.push(c),
            Err(why) => skipped.push((spec.path.clone(), why.into_reason())),
        }
    }
    let mut armed = Armed {
        canaries,
        skipped,
        detector: Detector::Atime,
        fd: None,
        wds: HashMap::new(),
        reads: Vec::new(),
        overflowed: false,
    };
    let order: Vec<Detector> = match prefer {
        Some(d) => vec![d],
        None => vec![Detector::Fanotify, Detector::Inotify, Detector::Atime],
    };
    let mut why = Vec::new();
    for d in order {
        match armed.watch(d) {
            Ok(()) => {
                armed.detector = d;
                return Ok(armed);
            }
            Err(e) => why.push(format!("{}: {e}", d.as_str())),
        }
    }
    let _ = armed.disarm();
    Err(Fault::unsupported(format!(
        "no way to see reads of the canaries ({})",
        why.join("; ")
    )))
}

/// Writes one canary (never over anything). A path that cannot hold one
/// is `Invalid`, one taken already `Unsupported` (never replaced), an I/O
/// error `Broken`.
fn place(spec: &Spec, journal: &mut dyn FnMut(&Path)) -> Result<Canary, Fault> {
    let shown = crate::escape::bytes(spec.path.as_os_str().as_bytes());
    let io = |e: io::Error| Fault::broken(format!("{shown}: {e}"));
    let parent = spec
        .path
        .parent()
        .ok_or_else(|| Fault::invalid(format!("{shown} has no parent directory")))?;
    // Parents that do not exist are made (and removed later if empty); one
    // that exists must be a real directory, not a symlink.
    let mut missing = Vec::new();
    let mut p = parent;
    loop {
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(Fault::invalid(format!(
                    "{shown}: a parent is not a directory"
                )));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(p.to_path_buf());
                p = p
                    .parent()
                    .ok_or_else(|| Fault::invalid(format!("{shown}: no existing parent")))?;
            }
            Err(e) => return Err(io(e)),
        }
    }
    let mut made = Vec::new();
    for dir in missing.into_iter().rev() {
        journal(&dir);
        std::fs::create_dir(&dir)
            .map_err(|e| Fault::broken(format!("{shown}: cannot make a parent: {e}")))?;
        made.push(dir);
    }
    let (text, secrets) =
        content(spec.kind).map_err(|e| Fault::broken(format!("no randomness: {e}")))?;
    secrets.iter().for_each(|s| crate::redact::add(s));
    journal(&spec.path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&spec.path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => {
                Fault::unsupported(format!("{shown} exists: never replaced"))
            }
            _ => io(e),
        })?;
    f.write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(io)?;
    let m = f.metadata().map_err(io)?;
    // An access time an hour before the modification time: under
    // `relatime` the first read then moves it.
    let atime = (m.mtime() - 3600, m.mtime_nsec());
    // The result is ignored, as it always was: futimens on a file this
    // process just created and holds open is not expected to fail.
    let _ = crate::sys::set_atime(&f, atime.0, atime.1);
    // The change time after that: any later write, chmod or time reset
    // (`touch -a` to hide a read) moves it, and it cannot be set back.
    let m = f.metadata().map_err(io)?;
    Ok(Canary {
        path: spec.path.clone(),
        len: text.len() as u64,
        digest: digest(text.as_bytes()),
        dev: m.dev(),
        ino: m.ino(),
        atime,
        ctime: (m.ctime(), m.ctime_nsec()),
        made,
    })
}

impl Armed {
    pub fn detector(&self) -> Detector {
        self.detector
    }

    /// The canaries placed.
    pub fn paths(&self) -> Vec<&Path> {
        self.canaries.iter().map(|c| c.path.as_path()).collect()
    }

    /// The canaries not placed, with why.
    pub fn skipped(&self) -> &[(PathBuf, String)] {
        &self.skipped
    }

    /// The records an atime watch goes on from in another process
    /// ([`Armed::resume`]); `None` for the other detectors, whose watch
    /// ends with this process.
    pub fn save(mut self) -> Option<Saved> {
        if self.detector != Detector::Atime {
            return None;
        }
        Some(Saved {
            canaries: std::mem::take(&mut self.canaries),
            skipped: std::mem::take(&mut self.skipped),
        })
    }

    /// An atime watch saved by [`Armed::save`], going on.
    pub fn resume(saved: Saved) -> Armed {
        Armed {
            canaries: saved.canaries,
            skipped: saved.skipped,
            detector: Detector::Atime,
            fd: None,
            wds: HashMap::new(),
            reads: Vec::new(),
            overflowed: false,
        }
    }

    /// Stops watching and removes every canary that is still the one
    /// placed (same inode, same content), then the directories made for
    /// them if empty. Returns what could not be removed, with why.
    pub fn disarm(mut self) -> Vec<(PathBuf, String)> {
        // Our own reads below must not count: the watch ends first.
        self.fd = None;
        let mut left = Vec::new();
        for c in &self.canaries {
            match remove(c) {
                Ok(()) => {}
                Err(why) => left.push((c.path.clone(), why.into_reason())),
            }
            for dir in c.made.iter().rev() {
                // Only if empty (rmdir refuses otherwise).
                let _ = std::fs::remove_dir(dir);
            }
        }
        left
    }
}

fn digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What an atime watch needs to go on in another process (the action's
/// post step): the canaries' records, never their values.
#[derive(Serialize, Deserialize)]
pub struct Saved {
    canaries: Vec<Canary>,
    skipped: Vec<(PathBuf, String)>,
}

/// Removes a canary that is still the one placed; one that is not (another
/// file, other content) is `Invalid` and left as it is.
fn remove(c: &Canary) -> Result<(), Fault> {
    let io = |e: io::Error| Fault::broken(e.to_string());
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        // Never blocking: the command may have left a FIFO in its place.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOATIME)
        .open(&c.path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Fault::broken(format!("cannot check it: {e}"))),
    };
    let m = f.metadata().map_err(io)?;
    if (m.dev(), m.ino()) != (c.dev, c.ino) {
        return Err(Fault::invalid(
            "another file stands there now: left as it is",
        ));
    }
    let mut now = Vec::new();
    std::io::Read::by_ref(&mut f)
        .take(c.len + 1)
        .read_to_end(&mut now)
        .map_err(io)?;
    if now.len() as u64 != c.len || digest(&now) != c.digest {
        return Err(Fault::invalid("its content changed: left as it is"));
    }
    std::fs::remove_file(&c.path).map_err(io)
}
