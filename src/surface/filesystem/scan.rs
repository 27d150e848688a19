//! What run B looks for and what it saw, carrier by carrier: the needles,
//! the tallies, the agreed names, and how a look at one entry is charged.

use super::Needle;
use super::{Fs, Scan, Tally, planted_name};
use crate::escape;
use crate::surface::Want;
use crate::surface::routes::{self, Kind, Proof};
use memchr::memmem::Finder;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// Whether a stored mtime is `want`, or (`coarse`) `want` truncated to a
/// filesystem's coarser granularity (10 ns to 1 s): a later job without the
/// plant's receipt does not know how precisely the plant's filesystem
/// stored it, and must not call a truncated mtime a miss.
pub(super) fn mtime_matches(stored: (i64, i64), want: (i64, i64), coarse: bool) -> bool {
    if stored == want {
        return true;
    }
    coarse
        && stored.0 == want.0
        && (1..=9)
            .map(|e| 10i64.pow(e))
            .any(|g| stored.1 == want.1 - want.1 % g)
}

/// What recovery looks for, per wanted carrier.
pub(super) enum Look {
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

/// What to look for of `w` (a needle of another carrier's form is no
/// look: an error).
pub(super) fn look_of(w: &Want<Fs, Needle>) -> Look {
    let text = |s: &str| Finder::new(s.as_bytes()).into_owned();
    match (w.carrier, &w.needle) {
        (Fs::FileName | Fs::DirectoryName | Fs::SpecialFileName, Needle::Text { text: s }) => {
            Look::Name(text(s))
        }
        (Fs::FileContent, Needle::Text { text: s }) => Look::Content(text(s)),
        (Fs::SymlinkTarget, Needle::Text { text: s }) => Look::LinkTarget(text(s)),
        (Fs::Xattr, Needle::Text { text: s }) => Look::XattrValue(text(s)),
        (Fs::XattrName, Needle::Text { text: s }) => Look::XattrName(text(s)),
        (Fs::Mtime, Needle::Mtime { mtime, coarse }) => Look::Mtime(mtime.0, mtime.1, *coarse),
        (Fs::RunnerPersistence, _) => Look::Beacons,
        (Fs::FileSize, Needle::Size { size }) => Look::Size(*size),
        (c, _) => Look::Invalid(format!("bad needle for carrier {c}")),
    }
}

#[derive(Default, Clone, Copy)]
pub(super) enum Agreed {
    #[default]
    Absent,
    Present,
    /// The lookup was refused (EACCES, EPERM): whether it is there, run B
    /// cannot tell.
    Refused,
}

/// The route by which run B came to an entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// Looked up by the name both runs derive from the probe id.
    Agreed,
    /// Found in the directory's listing.
    Listed,
}

/// Carriers whose entry has a name both runs derive from the probe id
/// (`.runwarden-<probe>-<carrier>`): run B can look it up without listing
/// the directory. The name carriers have no such route (their name is the
/// message), nor has runner-persistence (it looks for other probes').
pub(super) fn by_agreed_name(carrier: Fs) -> bool {
    matches!(
        carrier,
        Fs::FileContent | Fs::SymlinkTarget | Fs::Xattr | Fs::XattrName | Fs::Mtime | Fs::FileSize
    )
}

/// Run B's routes ([`crate::surface::routes`]): the one read of the
/// directory for the carriers whose name is the message (and the beacons
/// of other probes), the lookup by agreed name for the rest (whose entry
/// the directory read, when it may list, also shows).
pub(super) const ROUTES: &[routes::Route<Fs>] = &[
    routes::Route {
        name: "directory-read",
        kind: Kind::Listing,
        carriers: &[
            Fs::FileName,
            Fs::DirectoryName,
            Fs::SpecialFileName,
            Fs::RunnerPersistence,
        ],
    },
    routes::Route {
        name: "lookup",
        kind: Kind::ByName,
        carriers: &[
            Fs::FileContent,
            Fs::SymlinkTarget,
            Fs::Xattr,
            Fs::XattrName,
            Fs::Mtime,
            Fs::FileSize,
        ],
    },
];

/// A carrier's route, and why a miss there is current: the local file
/// system answers each call with its state at that moment (nothing
/// caches or lags between the reader and the directory).
pub(super) fn route_of(carrier: Fs) -> (&'static str, Proof) {
    if by_agreed_name(carrier) {
        (
            "lookup",
            Proof::Protocol("a lookup by name on the local file system"),
        )
    } else {
        (
            "directory-read",
            Proof::Protocol("one whole read of the local directory"),
        )
    }
}

impl Scan {
    pub(super) fn new(wanted: &[Want<Fs, Needle>], ctx: &crate::surface::RunCtx<'_>) -> Scan {
        let needles: Vec<Look> = wanted.iter().map(look_of).collect();
        let tallies = needles
            .iter()
            .map(|n| match n {
                Look::Invalid(m) => Tally {
                    errors: 1,
                    first_error: Some(m.clone()),
                    ..Tally::default()
                },
                _ => Tally::default(),
            })
            .collect();
        let agreed = wanted
            .iter()
            .map(|w| by_agreed_name(w.carrier).then(|| planted_name(w.carrier, ctx, "").0))
            .collect();
        let any = |f: fn(&Look) -> bool| needles.iter().any(f);
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
    pub(super) fn agreed_names(&self) -> Vec<OsString> {
        let mut names: Vec<OsString> = self.agreed.iter().flatten().cloned().collect();
        names.sort();
        names.dedup();
        names
    }

    /// Records what the lookup of an agreed name found (`Ok`: there).
    pub(super) fn looked_up(&mut self, name: &OsStr, result: Result<(), &io::Error>) {
        for i in 0..self.needles.len() {
            if self.agreed[i].as_deref() != Some(name) {
                continue;
            }
            match result {
                Ok(()) => self.tallies[i].agreed = Agreed::Present,
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
                        self.tallies[i].agreed = Agreed::Refused;
                    }
                    Self::charge(&mut self.tallies[i], "lookup of", name, e)
                }
            }
        }
    }

    pub(super) fn wants(&self, f: impl Fn(&Look) -> bool) -> bool {
        self.needles.iter().any(f)
    }

    /// Records a hit, with its detail, for every needle `seen` says is
    /// present; the first hit of a carrier is the one reported.
    pub(super) fn hit(&mut self, seen: impl Fn(&Look) -> bool, detail: impl Fn() -> String) {
        for (n, t) in self.needles.iter().zip(self.tallies.iter_mut()) {
            if t.found.is_none() && seen(n) {
                t.found = Some(detail());
            }
        }
    }

    /// An error looking at one entry, charged to the carriers that needed
    /// that look.
    pub(super) fn trouble(
        &mut self,
        needed: impl Fn(&Look) -> bool,
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
    pub(super) fn charge(t: &mut Tally, what: &str, name: &OsStr, e: &io::Error) {
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

pub(super) fn is_content(n: &Look) -> bool {
    matches!(n, Look::Content(_))
}

pub(super) fn is_link_target(n: &Look) -> bool {
    matches!(n, Look::LinkTarget(_))
}

pub(super) fn is_xattr(n: &Look) -> bool {
    matches!(n, Look::XattrName(_) | Look::XattrValue(_))
}

pub(super) fn needs_stat(n: &Look) -> bool {
    matches!(n, Look::Mtime(..) | Look::Size(_) | Look::Content(_))
}

impl Scan {
    /// The nonces of this probe's name markers (the name carriers'
    /// needles): any other name in that form is a marker this key never
    /// made.
    pub(super) fn name_markers(&self) -> Vec<Vec<u8>> {
        self.needles
            .iter()
            .filter_map(|n| match n {
                Look::Name(f) => Some(f.needle().to_vec()),
                _ => None,
            })
            .collect()
    }
}
