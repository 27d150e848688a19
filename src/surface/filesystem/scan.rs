//! What run B looks for and what it saw, carrier by carrier: the needles,
//! the tallies, the agreed names, and how a look at one entry is charged.

use super::{Fs, Scan, Tally, planted_name};
use crate::escape;
use crate::surface::Wanted;
use memchr::memmem::Finder;
use serde_json::Value;
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
pub(super) enum Needle {
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

/// What to look for of `w`, whose carrier is `carrier` (`None`: not one of
/// the filesystem's).
pub(super) fn needle_of(w: &Wanted, carrier: Option<Fs>) -> Needle {
    let text = || {
        w.needle
            .get("text")
            .and_then(Value::as_str)
            .map(|s| Finder::new(s.as_bytes()).into_owned())
    };
    let Some(carrier) = carrier else {
        return Needle::Invalid(format!("bad needle for carrier {}", w.carrier));
    };
    let n = match carrier {
        Fs::FileName | Fs::DirectoryName | Fs::SpecialFileName => text().map(Needle::Name),
        Fs::FileContent => text().map(Needle::Content),
        Fs::SymlinkTarget => text().map(Needle::LinkTarget),
        Fs::Xattr => text().map(Needle::XattrValue),
        Fs::XattrName => text().map(Needle::XattrName),
        Fs::Mtime => w.needle.get("mtime").and_then(|m| {
            let coarse = w.needle.get("coarse").and_then(Value::as_bool) == Some(true);
            Some(Needle::Mtime(
                m.get(0)?.as_i64()?,
                m.get(1)?.as_i64()?,
                coarse,
            ))
        }),
        Fs::RunnerPersistence => Some(Needle::Beacons),
        Fs::FileSize => w
            .needle
            .get("size")
            .and_then(Value::as_u64)
            .map(Needle::Size),
    };
    n.unwrap_or_else(|| Needle::Invalid(format!("bad needle for carrier {}", w.carrier)))
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

impl Scan {
    pub(super) fn new(wanted: &[Wanted], probe_id: &str) -> Scan {
        let carriers: Vec<Option<Fs>> = wanted.iter().map(|w| Fs::parse(&w.carrier)).collect();
        let needles: Vec<Needle> = wanted
            .iter()
            .zip(&carriers)
            .map(|(w, c)| needle_of(w, *c))
            .collect();
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
        let agreed = carriers
            .iter()
            .map(|c| {
                c.filter(|c| by_agreed_name(*c))
                    .map(|c| planted_name(c, probe_id, "").0)
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

    pub(super) fn wants(&self, f: impl Fn(&Needle) -> bool) -> bool {
        self.needles.iter().any(f)
    }

    /// Records a hit, with its detail, for every needle `seen` says is
    /// present; the first hit of a carrier is the one reported.
    pub(super) fn hit(&mut self, seen: impl Fn(&Needle) -> bool, detail: impl Fn() -> String) {
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

pub(super) fn is_content(n: &Needle) -> bool {
    matches!(n, Needle::Content(_))
}

pub(super) fn is_link_target(n: &Needle) -> bool {
    matches!(n, Needle::LinkTarget(_))
}

pub(super) fn is_xattr(n: &Needle) -> bool {
    matches!(n, Needle::XattrName(_) | Needle::XattrValue(_))
}

pub(super) fn needs_stat(n: &Needle) -> bool {
    matches!(n, Needle::Mtime(..) | Needle::Size(_) | Needle::Content(_))
}

impl Scan {
    /// The nonces of this probe's name markers (the name carriers'
    /// needles): any other name in that form is a marker this key never
    /// made.
    pub(super) fn name_markers(&self) -> Vec<Vec<u8>> {
        self.needles
            .iter()
            .filter_map(|n| match n {
                Needle::Name(f) => Some(f.needle().to_vec()),
                _ => None,
            })
            .collect()
    }
}
