//! Run B's looks: an entry examined only as far as a wanted carrier needs
//! (by its agreed name or as the listing shows it), the listing itself,
//! beacons of other probes, and what a directory that refuses listing
//! means for each carrier.

use super::scan::{
    Agreed, Look, Route, is_content, is_link_target, is_xattr, mtime_matches, needs_stat,
};
use super::{Filesystem, Scan, Tally, fill, marker_hex, read_small};
use crate::surface::{Notice, NoticeKind, RecoverOutcome, RunCtx};
use crate::sys::Stat;
use crate::{escape, marker, sys};
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

impl Filesystem {
    /// Looks at one entry as far as a wanted carrier needs: its name (when
    /// listed), its `lstat`, its link target, its xattrs, and the first
    /// window of a regular file. `st` is its lstat when the caller has it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn examine(
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
                |n| matches!(n, Look::Name(f) if f.find(nb).is_some()),
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
                |n| matches!(n, Look::Mtime(sec, nsec, coarse) if mtime_matches((s.mtime_sec, s.mtime_nsec), (*sec, *nsec), *coarse)),
                || format!("run B saw the nonce-derived mtime on entry {}{via}", shown()),
            );
            scan.hit(
                |n| matches!(n, Look::Size(size) if s.is_reg() && s.size == *size),
                || format!("run B saw the nonce-derived size on entry {}{via}", shown()),
            );
            if scan.want_content && s.is_reg() && s.size > 0 {
                self.scan_content(dir, name, &s, scan, window, via);
            }
        }
        if scan.want_link && is_link {
            match sys::readlink_at(dir, name) {
                Ok(target) => scan.hit(
                    |n| matches!(n, Look::LinkTarget(f) if f.find(&target).is_some()),
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
    pub(super) fn check_beacon(
        &self,
        ctx: &RunCtx<'_>,
        dir: &OwnedFd,
        name: &OsStr,
        dtype: u8,
        scan: &mut Scan,
        notice: &mut dyn FnMut(Notice),
    ) {
        let beacons = |n: &Look| matches!(n, Look::Beacons);
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
        let (hit, note) = crate::surface::beacon::read(ctx, shown, &bytes);
        if let Some(detail) = hit {
            scan.hit(beacons, || detail.clone());
        }
        if let Some(n) = note {
            notice(n);
        }
    }

    /// What a failure to open or list the surface itself means for every
    /// carrier: the surface's access control keeping run B out is a
    /// refusal; anything else leaves the scan undone.
    pub(super) fn scan_error(&self, verb: &str, e: &io::Error) -> RecoverOutcome {
        let path = self.path_text();
        match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => RecoverOutcome::Denied {
                reason: format!("run B cannot {verb} {path}: {e}"),
            },
            Some(libc::ENOENT | libc::ENOTDIR) => RecoverOutcome::Error {
                reason: format!("surface unreachable: cannot {verb} {path}: {e}"),
            },
            _ => RecoverOutcome::Error {
                reason: format!("cannot {verb} {path}: {e}"),
            },
        }
    }

    /// Reads the first window of one regular file and matches content
    /// needles. Opened no-follow and non-blocking, then re-checked with
    /// fstat, so an entry swapped for a FIFO or symlink since the lstat is
    /// never read from.
    pub(super) fn scan_content(
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
        let filled = match fill(&mut f, window) {
            Ok(n) => n,
            Err(e) => return scan.trouble(is_content, "reading", name, &e),
        };
        let data = &window[..filled];
        scan.hit(
            |n| matches!(n, Look::Content(f) if f.find(data).is_some()),
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
    pub(super) fn scan_xattrs(&self, name: &OsStr, scan: &mut Scan, via: &str) {
        let path = self.settings.path.join(name);
        let shown = || escape::bytes(name.as_bytes());
        let keys = match xattr::list(&path) {
            Ok(k) => k,
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return,
            Err(e) => return scan.trouble(is_xattr, "listxattr of", name, &e),
        };
        let want_values = scan.wants(|n| matches!(n, Look::XattrValue(_)));
        for key in keys {
            let kb = key.as_bytes();
            if !kb.starts_with(b"user.") {
                continue;
            }
            scan.hit(
                |n| matches!(n, Look::XattrName(f) if f.find(kb).is_some()),
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
                    |n| matches!(n, Look::XattrValue(f) if f.find(&v).is_some()),
                    || format!("run B read the nonce in an xattr of {}{via}", shown()),
                ),
                Ok(None) => {}
                Err(e) => scan.trouble(
                    |n| matches!(n, Look::XattrValue(_)),
                    "getxattr of",
                    name,
                    &e,
                ),
            }
        }
    }
}

impl Filesystem {
    /// Route 2: every entry the listing shows is examined (but those
    /// looked up already by their agreed name), markers of this probe id
    /// with a nonce no plant made are noticed, and beacons checked.
    pub(super) fn list(
        &self,
        ctx: &RunCtx<'_>,
        dir: &std::os::fd::OwnedFd,
        agreed: &[std::ffi::OsString],
        scan: &mut Scan,
        window: &mut [u8],
        notice: &mut dyn FnMut(Notice),
    ) -> Listing {
        let ours = scan.name_markers();
        let want_beacons = scan.wants(|n| matches!(n, Look::Beacons));
        let mut l = Listing::default();
        // Entries named as this probe's plants (its markers and beacon):
        // said apart, so that "listed 11 entries" of a directory that was
        // empty before the probe does not read as 11 foreign ones.
        let own_prefix = format!(".runwarden-{}-", ctx.probe_id);
        let own_beacon = format!("{}{}", crate::marker::BEACON_PREFIX, ctx.probe_id);
        let iter = match sys::open_listing(dir).and_then(|fd| sys::DirIter::new(&fd)) {
            Err(e) => {
                l.error = Some(e);
                return l;
            }
            Ok(iter) => iter,
        };
        for item in iter {
            let (name, dtype) = match item {
                Ok(x) => x,
                Err(e) => {
                    l.error = Some(e);
                    break;
                }
            };
            l.listed += 1;
            let nb = name.as_bytes();
            if nb.starts_with(own_prefix.as_bytes()) || nb == own_beacon.as_bytes() {
                l.own += 1;
            }
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
                self.check_beacon(ctx, dir, &name, dtype, scan, notice);
            }
            // Looked at already, by its agreed name (a name that holds no
            // nonce: nothing for the name carriers).
            if agreed.contains(&name) {
                continue;
            }
            self.examine(dir, &name, None, dtype, scan, window, Route::Listed);
        }
        l
    }
}

/// What run B's listing of the directory came to.
#[derive(Default)]
pub(super) struct Listing {
    listed: u64,
    /// Of `listed`, the entries named as this probe's plants.
    own: u64,
    /// What stopped the listing, if anything did.
    error: Option<io::Error>,
}

/// One carrier's outcome from its tally, its agreed name (if it has one)
/// and the listing.
pub(super) fn outcome(
    t: Tally,
    n: &Look,
    agreed_name: Option<&std::ffi::OsStr>,
    listing: &Listing,
    path: &str,
) -> RecoverOutcome {
    if let Some(d) = t.found {
        return RecoverOutcome::Found { detail: d };
    }
    if let Some(e) = t.first_error {
        return RecoverOutcome::Error {
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
    let looked_up = match (agreed_name, t.agreed) {
        (None, _) => String::new(),
        (Some(name), Agreed::Absent) => format!(
            "run B looked up the agreed name {}: not there; ",
            escape::bytes(name.as_bytes())
        ),
        (Some(name), Agreed::Refused) => format!(
            "run B looked up the agreed name {}: refused (permission denied); ",
            escape::bytes(name.as_bytes())
        ),
        (Some(name), Agreed::Present) => format!(
            "run B looked up the agreed name {}: no nonce in it; ",
            escape::bytes(name.as_bytes())
        ),
    };
    let unlisted = listing.error.as_ref().map(|e| {
        let code = sys::errno_name(e).unwrap_or("error");
        (
            matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)),
            format!("B could not list the directory {path} ({code}: {e})"),
        )
    });
    match &unlisted {
        // The directory's own permissions refused the listing: closed to B
        // for every carrier whose only route it is.
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
        Some((false, why)) => RecoverOutcome::Error {
            reason: format!("{why} after {} entries", listing.listed),
        },
        None => {
            let what = if matches!(n, Look::Beacons) {
                "no valid beacon of another probe among them"
            } else {
                "none carried the nonce"
            };
            let own = match listing.own {
                0 => String::new(),
                1 => " (1 of them named as this probe's plants)".into(),
                n => format!(" ({n} of them named as this probe's plants)"),
            };
            RecoverOutcome::NotFound {
                detail: format!(
                    "{looked_up}run B listed {} of {path}{own}; {what}{denied}",
                    match listing.listed {
                        1 => "1 entry".to_string(),
                        n => format!("{n} entries"),
                    }
                ),
            }
        }
    }
}
