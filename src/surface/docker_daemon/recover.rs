//! Run B's routes, each read once and searched for every wanted nonce,
//! and one carrier's verdict from what its routes said ([`Route`]).
//!
//! The routes: the listing of the carrier's kind (`/images/json`,
//! `/volumes`, `/containers/json`, `/networks`), the disk-usage listing
//! (`/system/df`: images, containers, volumes), the agreed object's
//! inspect, the agreed volume's archive, and the event history
//! ([`super::events`], read when `event-history` is wanted). A name
//! carrier's listings count only when they show the witness its plant
//! made after the nonce-named object ([`crate::surface::listing`]).

use super::Needle;
use super::api::{Body, Failure, q};
use super::list::{self, Item};
use super::names::{self, Kind};
use super::{Dk, DockerDaemon, MOUNT, NOTE_FILE};
use crate::escape;
use crate::http::answer::Class;
use crate::surface::listing::{Current, not_current};
use crate::surface::routes;
use crate::surface::{RecoverOutcome, RunCtx};

/// Run B's routes ([`crate::surface::routes`]): the listings of each
/// kind for the carriers whose nonce is a name (each showing the witness
/// made after it), the agreed object's inspect (and archive) for the
/// rest, the listings again for other probes' beacons, and the event
/// history (read back to its witness).
pub(super) const ROUTES: &[routes::Route<Dk>] = &[
    routes::Route {
        name: "listing",
        kind: routes::Kind::Listing,
        carriers: &[
            Dk::ImageTag,
            Dk::VolumeName,
            Dk::ContainerName,
            Dk::NetworkName,
        ],
    },
    routes::Route {
        name: "inspect",
        kind: routes::Kind::ByName,
        carriers: &[
            Dk::ImageLabel,
            Dk::VolumeLabel,
            Dk::VolumeContent,
            Dk::ContainerLabel,
        ],
    },
    routes::Route {
        name: "beacons",
        kind: routes::Kind::Listing,
        carriers: &[Dk::RunnerPersistence],
    },
    routes::Route {
        name: "events",
        kind: routes::Kind::Listing,
        carriers: &[Dk::EventHistory],
    },
];

/// A carrier's route, and what shows a miss there current.
pub(super) fn route_of(c: Dk) -> (&'static str, routes::Proof) {
    match c {
        // (Their listings count only when they show the plant's witness.)
        _ if named(c) => ("listing", routes::Proof::Listed),
        // The history counts only when it reaches back to its witness.
        Dk::EventHistory => ("events", routes::Proof::Witnessed),
        Dk::RunnerPersistence => (
            "beacons",
            routes::Proof::Protocol("the daemon's own listings, answered live"),
        ),
        _ => (
            "inspect",
            routes::Proof::Protocol("the daemon's live state of the agreed object"),
        ),
    }
}

/// Whether the carrier's nonce is in an object's name (B cannot ask for
/// it by name; its listings must show the witness made after it).
pub(super) fn named(c: Dk) -> bool {
    matches!(
        c,
        Dk::ImageTag | Dk::VolumeName | Dk::ContainerName | Dk::NetworkName
    )
}

/// What one route said of one carrier.
pub(super) enum Route {
    Found(String),
    /// Ran, and is shown current: `what` for the detail.
    Clean(String),
    Denied(String),
    Broken(String),
}

/// What one listing showed: where each needle was found, which of the
/// witnesses it listed, how many objects.
#[derive(Default)]
pub(super) struct Shown {
    found: Vec<Option<String>>,
    /// Each witness it was to show, and whether it did.
    pub witnessed: Vec<(String, bool)>,
    pub count: usize,
    /// Each object's beacon label (its name, the label), at most
    /// [`super::beacons::MAX`].
    pub beacons: Vec<(String, String)>,
    /// How many beacon labels there were beyond those kept.
    pub beacons_beyond: usize,
}

/// A wanted carrier of this surface, with its needle.
pub(super) struct Want {
    pub(super) at: usize,
    pub(super) carrier: Dk,
    pub(super) hex: String,
    /// The object of the agreed name (an image's `:latest`): the witness
    /// of a name carrier, the labelled object of a label carrier.
    pub(super) agreed: String,
}

pub(super) type Listed = Result<Current<Shown>, Failure>;

impl DockerDaemon {
    /// One listing, searching every object's names and labels for every
    /// needle; whether it showed every one of `witnesses`.
    pub(super) fn look(
        &self,
        needles: &[&str],
        witnesses: &[String],
        list: impl FnOnce(&mut dyn FnMut(Item)) -> Result<(), Failure>,
    ) -> Result<(Shown, bool), Failure> {
        let mut s = Shown {
            beacons: vec![],
            beacons_beyond: 0,
            found: vec![None; needles.len()],
            witnessed: witnesses.iter().map(|w| (w.clone(), false)).collect(),
            count: 0,
        };
        list(&mut |item: Item| {
            s.count += 1;
            for (i, n) in needles.iter().enumerate() {
                if s.found[i].is_some() {
                    continue;
                }
                if let Some((field, text)) = item.texts().find(|(_, t)| t.contains(n)) {
                    // The name that holds it, or the object's first name.
                    let shown = if field == "name" {
                        text
                    } else {
                        item.names.first().unwrap_or(&item.id)
                    };
                    s.found[i] = Some(format!(
                        "{} carries it in a {field}",
                        escape::bytes(shown.as_bytes())
                    ));
                }
            }
            for (w, seen) in &mut s.witnessed {
                *seen |= item.names.contains(w);
            }
            let beacon = item.labels.get(super::BEACON_LABEL);
            if beacon.is_some() && s.beacons.len() >= super::beacons::MAX {
                s.beacons_beyond += 1;
            } else if let Some(b) = beacon {
                let name = item.names.first().cloned().unwrap_or_default();
                // A label may hold megabytes; a beacon is at most
                // BEACON_MAX bytes, so one kept that long is told as too
                // long.
                let mut cut = b.len().min(crate::marker::BEACON_MAX);
                while !b.is_char_boundary(cut) {
                    cut -= 1;
                }
                let kept = if cut < b.len() {
                    format!("{}\u{0}", &b[..cut])
                } else {
                    b.clone()
                };
                s.beacons.push((name, kept));
            }
        })?;
        let current = s.witnessed.iter().all(|(_, seen)| *seen);
        Ok((s, current))
    }

    /// The agreed object by name: its labels (a label carrier's), or its
    /// tags (image-tag's `:latest` carries the nonce's tag beside it).
    pub(super) fn by_name(&self, w: &Want, kind: Kind) -> Route {
        let shown = escape::bytes(w.agreed.as_bytes());
        match list::inspect(&self.api, kind, &w.agreed) {
            Ok(Some(item)) if item.texts().any(|(_, t)| t.contains(&w.hex)) => {
                Route::Found(format!(
                    "{} {shown} carries it (read by its agreed name)",
                    kind.as_str()
                ))
            }
            Ok(Some(_)) => Route::Clean(format!("{} {shown}", kind.as_str())),
            Ok(None) => Route::Broken(format!(
                "the agreed {} {shown} run A made is not there, so nothing was read by name: its silence proves nothing",
                kind.as_str()
            )),
            Err(Failure::Denied(r)) => Route::Denied(r),
            Err(Failure::Fault(f)) => Route::Broken(f.to_string()),
        }
    }

    /// The agreed volume's note, through the agreed container's archive,
    /// searched as it arrives.
    pub(super) fn read_volume(&self, ctx: &RunCtx<'_>, hex: &str) -> Route {
        let container = names::name(ctx, Dk::VolumeContent, Kind::Container, None);
        let shown = escape::bytes(container.as_bytes());
        let path = format!(
            "/containers/{}/archive?path={}",
            q(&container),
            q(&format!("{MOUNT}/{NOTE_FILE}"))
        );
        let s = match self.api.stream("GET", &path, Body::None) {
            Err(Failure::Denied(r)) => return Route::Denied(r),
            Err(Failure::Fault(f)) => return Route::Broken(f.to_string()),
            Ok(s) => s,
        };
        match s.status {
            200 => {}
            // Why not a refusal: a volume is also read by running a
            // container that mounts it, which runwarden cannot test.
            st if super::api::class(st) == Class::Refused => {
                return Route::Broken(format!(
                    "the daemon refused reading the volume through an archive (HTTP {}); a running container, its other route, cannot be tested here",
                    s.status
                ));
            }
            404 => {
                return Route::Broken(format!(
                    "the container {shown} that reads the agreed volume is not there (or the note is not): the volume was not read"
                ));
            }
            st => return Route::Broken(format!("reading the volume through {shown}: HTTP {st}")),
        }
        let mut needles = crate::scan::Needles::new(vec![hex.to_string()]);
        let mut body = s.body;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match std::io::Read::read(&mut body, &mut buf) {
                Ok(0) => break,
                Ok(n) => needles.feed(&buf[..n]),
                Err(e) => return Route::Broken(format!("reading the volume: {e}")),
            }
        }
        if needles.found(0) {
            Route::Found(format!("the agreed volume holds it (read through {shown})"))
        } else {
            Route::Clean(format!("the agreed volume's note (read through {shown})"))
        }
    }
}

/// This surface's wanted carriers, each with its needle and its agreed
/// object; a needle that is no nonce is its outcome at once.
pub(super) fn wants_of(
    ctx: &RunCtx<'_>,
    wanted: &[crate::surface::Want<Dk, Needle>],
    out: &mut [Option<RecoverOutcome>],
) -> Vec<Want> {
    let mut wants = vec![];
    for (at, w) in wanted.iter().enumerate() {
        let carrier = w.carrier;
        if carrier == Dk::RunnerPersistence {
            // (No needle: it looks for other probes' beacons.)
            wants.push(Want {
                at,
                carrier,
                hex: String::new(),
                agreed: names::beacon_name(ctx.probe_id),
            });
            continue;
        }
        match w.needle {
            Needle::Nonce(n) => {
                let kind = names::carrier_kind(carrier);
                let name = names::name(ctx, carrier, kind, None);
                let agreed = if kind == Kind::Image {
                    format!("{name}:latest")
                } else {
                    name
                };
                wants.push(Want {
                    at,
                    carrier,
                    hex: n.hex(),
                    agreed,
                });
            }
            Needle::Beacons { .. } => {
                out[at] = Some(RecoverOutcome::Error {
                    reason: "the plant's needle is not a nonce".into(),
                })
            }
        }
    }
    wants
}

/// What a listing said of want `i`: a name carrier's counts only when it
/// showed the carrier's witness.
pub(super) fn from_listing(l: &Listed, i: usize, w: &Want, what: &str) -> Route {
    let c = match l {
        Err(Failure::Denied(r)) => return Route::Denied(r.clone()),
        Err(Failure::Fault(f)) => return Route::Broken(f.to_string()),
        Ok(c) => c,
    };
    if let Some(d) = &c.value.found[i] {
        return Route::Found(format!("{d} ({what})"));
    }
    if !named(w.carrier) {
        return Route::Clean(format!("{what} ({} objects)", c.value.count));
    }
    let witness = escape::bytes(w.agreed.as_bytes());
    match c.value.witnessed.iter().find(|(n, _)| *n == w.agreed) {
        None => Route::Broken(format!(
            "the {} {witness} run A made after the plant is not there, so nothing shows {what} is current: it not listing the plant proves nothing",
            names::carrier_kind(w.carrier).as_str()
        )),
        Some((_, true)) => Route::Clean(format!(
            "{what} ({} objects, showing {witness})",
            c.value.count
        )),
        Some(_) => match not_current(&witness, c) {
            RecoverOutcome::Error { reason } => Route::Broken(format!("{what}: {reason}")),
            _ => Route::Broken(format!("{what} does not show {witness}")),
        },
    }
}

/// What the event history said of want `i` (`own`: event-history, whose
/// only route it is).
pub(super) fn from_history(h: &Result<super::events::History, Failure>, i: usize) -> Route {
    match h {
        Err(Failure::Denied(r)) => Route::Denied(r.clone()),
        Err(Failure::Fault(f)) => Route::Broken(format!("the daemon's event history: {f}")),
        Ok(h) if h.found[i] => Route::Found("the daemon's event history shows it".into()),
        Ok(h) if h.witnessed => Route::Clean(format!(
            "the event history ({} events, up to the witness's removal)",
            h.read
        )),
        Ok(h) => Route::Broken(format!(
            "the daemon's event history is not yet consistent, or no longer reaches back to run A's plant: it does not show the witness made and removed after it ({} events read): its silence proves nothing",
            h.read
        )),
    }
}

/// One carrier's outcome from its routes.
pub(super) fn verdict(routes: Vec<Route>) -> RecoverOutcome {
    let mut clean = vec![];
    let mut denied = vec![];
    let mut broken = None;
    for r in routes {
        match r {
            Route::Found(detail) => return RecoverOutcome::Found { detail },
            Route::Clean(w) => clean.push(w),
            Route::Denied(r) => denied.push(r),
            Route::Broken(r) => broken = broken.or(Some(r)),
        }
    }
    if let Some(reason) = broken {
        return RecoverOutcome::Error { reason };
    }
    // (No route at all is no look: never a pass.)
    if clean.is_empty() && denied.is_empty() {
        return RecoverOutcome::Error {
            reason: "run B had no route to this carrier here".into(),
        };
    }
    if clean.is_empty() {
        return RecoverOutcome::Denied {
            reason: denied.join("; "),
        };
    }
    let mut detail = format!("none of its routes shows it: {}", clean.join(", "));
    if !denied.is_empty() {
        detail.push_str(&format!("; refused: {}", denied.join("; ")));
    }
    RecoverOutcome::NotFound { detail }
}
