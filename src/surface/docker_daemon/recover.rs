//! Run B: every listing a wanted carrier's kind has, each read once as it
//! arrives and searched for every wanted nonce; the agreed objects by
//! name; the agreed volume through the agreed container's archive.
//!
//! The name carriers' only route is a listing, and its silence counts only
//! when it shows the witness their plant made beside them (the object of
//! the agreed name), which an inspect shows exists
//! ([`crate::surface::listing`]).

use super::api::{Body, Failure, q};
use super::list::{self, Item};
use super::names::{self, Kind};
use super::{Dk, Instance, MOUNT, NOTE_FILE};
use crate::escape;
use crate::surface::listing::{Current, not_current, until_current};
use crate::surface::{RecoverOutcome, RunCtx, Wanted};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// The kind of object whose listing a carrier is read through.
fn kind_of(c: Dk) -> Kind {
    match c {
        Dk::ImageTag | Dk::ImageLabel => Kind::Image,
        Dk::VolumeName | Dk::VolumeLabel | Dk::VolumeContent => Kind::Volume,
        Dk::ContainerName | Dk::ContainerLabel => Kind::Container,
        Dk::NetworkName => Kind::Network,
        Dk::EventHistory => Kind::Volume,
    }
}

/// Whether the listing is the carrier's only route (the name is the
/// message: B cannot ask for it by name).
fn listing_only(c: Dk) -> bool {
    matches!(
        c,
        Dk::ImageTag | Dk::VolumeName | Dk::ContainerName | Dk::NetworkName
    )
}

/// What one listing showed: for each needle, where it was found; every
/// name it listed; how many objects.
#[derive(Default)]
struct Shown {
    found: Vec<Option<String>>,
    names: HashSet<String>,
    count: usize,
}

/// A wanted carrier of this surface, with its needle.
struct Want {
    at: usize,
    carrier: Dk,
    hex: String,
    /// The object of the agreed name of the carrier's kind.
    agreed: String,
}

impl Instance {
    pub(super) fn recover_carriers(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
    ) -> Vec<RecoverOutcome> {
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        let mut wants = vec![];
        for (at, w) in wanted.iter().enumerate() {
            let Some(carrier) = Dk::parse(&w.carrier) else {
                continue;
            };
            match crate::surface::wanted_nonce(w) {
                Ok(n) => {
                    let kind = kind_of(carrier);
                    let agreed = match carrier {
                        Dk::ImageTag | Dk::ImageLabel => {
                            format!("{}:latest", names::name(ctx, carrier, kind, None))
                        }
                        _ => names::name(ctx, carrier, kind, None),
                    };
                    wants.push(Want {
                        at,
                        carrier,
                        hex: n.hex(),
                        agreed,
                    })
                }
                Err(o) => out[at] = Some(o),
            }
        }
        let needles: Vec<&str> = wants.iter().map(|w| w.hex.as_str()).collect();
        let mut kinds: Vec<Kind> = wants.iter().map(|w| kind_of(w.carrier)).collect();
        kinds.dedup();
        let mut shown: BTreeMap<&'static str, Result<Current<Shown>, Failure>> = BTreeMap::new();
        for kind in [Kind::Image, Kind::Volume, Kind::Container, Kind::Network] {
            if !kinds.contains(&kind) {
                continue;
            }
            // The witnesses this listing must show: the agreed objects of
            // the name carriers of its kind that exist.
            let witnesses: Vec<String> = wants
                .iter()
                .filter(|w| listing_only(w.carrier) && kind_of(w.carrier) == kind)
                .filter(|w| matches!(list::inspect(&self.api, kind, &w.agreed), Ok(Some(_))))
                .map(|w| w.agreed.clone())
                .collect();
            let wait = Duration::from_millis(self.s.consistency_wait_ms);
            let listing = until_current(wait, || {
                let s = self.listing(kind, &needles)?;
                let current = witnesses.iter().all(|w| s.names.contains(w));
                Ok((s, current))
            });
            shown.insert(kind.as_str(), listing);
        }
        for w in &wants {
            let listing = &shown[kind_of(w.carrier).as_str()];
            let i = wants
                .iter()
                .position(|x| x.at == w.at)
                .expect("its own want");
            out[w.at] = Some(match w.carrier {
                Dk::VolumeContent => self.read_volume(ctx, &w.hex),
                // Its route is the history, read below.
                Dk::EventHistory => RecoverOutcome::NotFound {
                    detail: String::new(),
                },
                c if listing_only(c) => self.by_listing(w, i, listing),
                _ => self.by_name(w, i, listing),
            });
        }
        if wants.iter().any(|w| w.carrier == Dk::EventHistory) {
            let witness = names::name(ctx, Dk::EventHistory, Kind::Volume, None);
            let history = super::events::read(&self.api, &needles, &witness);
            for (i, x) in wants.iter().enumerate() {
                let o = &mut out[x.at];
                match (&history, x.carrier == Dk::EventHistory) {
                    (Ok(h), _)
                        if h.found[i] && !matches!(o, Some(RecoverOutcome::Found { .. })) =>
                    {
                        *o = Some(RecoverOutcome::Found {
                            detail: "the daemon's event history shows it".into(),
                        })
                    }
                    (Ok(h), true) if h.witnessed => {
                        *o = Some(RecoverOutcome::NotFound {
                            detail: format!(
                                "none of the {} events in the daemon's history carries it (the history shows {}, made after the plant)",
                                h.read,
                                escape::bytes(witness.as_bytes())
                            ),
                        })
                    }
                    (Ok(h), true) => {
                        *o = Some(RecoverOutcome::Failed {
                            reason: format!(
                                "the daemon's event history is not yet consistent, or no longer reaches back to run A's plant: it does not show {} ({} events read): its silence proves nothing",
                                escape::bytes(witness.as_bytes()),
                                h.read
                            ),
                        })
                    }
                    (Err(f), true) => *o = Some(failed(f)),
                    // Another carrier's route besides its own: a history
                    // that broke leaves its miss unproven.
                    (Err(Failure::Fault(f)), false)
                        if matches!(o, Some(RecoverOutcome::NotFound { .. })) =>
                    {
                        *o = Some(RecoverOutcome::Failed {
                            reason: format!(
                                "the daemon's event history, one of its routes, could not be read: {f}"
                            ),
                        })
                    }
                    _ => {}
                }
            }
        }
        crate::surface::all_outcomes(out)
    }

    /// Lists `kind`, searching every object's names and labels for every
    /// needle.
    fn listing(&self, kind: Kind, needles: &[&str]) -> Result<Shown, Failure> {
        let mut s = Shown {
            found: vec![None; needles.len()],
            ..Default::default()
        };
        list::list(&self.api, kind, &mut |item: Item| {
            s.count += 1;
            for (i, n) in needles.iter().enumerate() {
                if s.found[i].is_some() {
                    continue;
                }
                if let Some((field, text)) = item.texts().find(|(_, t)| t.contains(n)) {
                    // The name that holds it, or the object's first name.
                    let shown = match field {
                        "name" => text,
                        _ => item.names.first().unwrap_or(&item.id),
                    };
                    s.found[i] = Some(format!(
                        "{} {} carries it in a {field}",
                        kind.as_str(),
                        escape::bytes(shown.as_bytes())
                    ));
                }
            }
            s.names.extend(item.names);
        })?;
        Ok(s)
    }

    /// A name carrier: its listing, shown current by its witness.
    fn by_listing(
        &self,
        w: &Want,
        i: usize,
        listing: &Result<Current<Shown>, Failure>,
    ) -> RecoverOutcome {
        let kind = kind_of(w.carrier);
        let c = match listing {
            Err(f) => return failed(f),
            Ok(c) => c,
        };
        if let Some(d) = &c.value.found[i] {
            return RecoverOutcome::Found { detail: d.clone() };
        }
        let witness = escape::bytes(w.agreed.as_bytes());
        match list::inspect(&self.api, kind, &w.agreed) {
            Ok(Some(_)) if c.value.names.contains(&w.agreed) => RecoverOutcome::NotFound {
                detail: format!(
                    "none of the {} {}s listed carries it (the listing shows {witness}, made beside the plant)",
                    c.value.count,
                    kind.as_str()
                ),
            },
            Ok(Some(_)) => not_current(&witness, c),
            Ok(None) => RecoverOutcome::Failed {
                reason: format!(
                    "the {} {witness} run A made beside the plant is not there, so nothing shows the listing is current: it not listing the plant proves nothing",
                    kind.as_str()
                ),
            },
            Err(f) => RecoverOutcome::Failed {
                reason: format!(
                    "the witness {witness} could not be read ({}), so nothing shows the listing is current",
                    f.clone().fault()
                ),
            },
        }
    }

    /// A label carrier: the agreed object by name, and the listing.
    fn by_name(
        &self,
        w: &Want,
        i: usize,
        listing: &Result<Current<Shown>, Failure>,
    ) -> RecoverOutcome {
        let kind = kind_of(w.carrier);
        let shown = escape::bytes(w.agreed.as_bytes());
        if let Ok(c) = listing
            && let Some(d) = &c.value.found[i]
        {
            return RecoverOutcome::Found { detail: d.clone() };
        }
        match (list::inspect(&self.api, kind, &w.agreed), listing) {
            (Ok(Some(item)), _) if item.texts().any(|(_, t)| t.contains(&w.hex)) => {
                RecoverOutcome::Found {
                    detail: format!("{} {shown} carries it in a label", kind.as_str()),
                }
            }
            (Err(Failure::Denied(a)), Err(Failure::Denied(_))) => {
                RecoverOutcome::Denied { reason: a }
            }
            (Err(f), _) => failed(&f),
            (_, Err(f)) => failed(f),
            (Ok(None), Ok(_)) => RecoverOutcome::NotFound {
                detail: format!("no {} {shown}, and no listed one carries it", kind.as_str()),
            },
            (Ok(Some(_)), Ok(c)) => RecoverOutcome::NotFound {
                detail: format!(
                    "{} {shown} carries no nonce, nor does any of the {} listed",
                    kind.as_str(),
                    c.value.count
                ),
            },
        }
    }

    /// The agreed volume's note, through the agreed container's archive,
    /// searched as it arrives.
    fn read_volume(&self, ctx: &RunCtx<'_>, hex: &str) -> RecoverOutcome {
        let container = names::name(ctx, Dk::VolumeContent, Kind::Container, None);
        let shown = escape::bytes(container.as_bytes());
        let path = format!(
            "/containers/{}/archive?path={}",
            q(&container),
            q(&format!("{MOUNT}/{NOTE_FILE}"))
        );
        let s = match self.api.stream("GET", &path, Body::None) {
            Err(f) => return failed(&f),
            Ok(s) => s,
        };
        match s.status {
            200 => {}
            401 | 403 => {
                return RecoverOutcome::Denied {
                    reason: format!("the daemon refused reading the volume (HTTP {})", s.status),
                };
            }
            404 => {
                return RecoverOutcome::Failed {
                    reason: format!(
                        "the container {shown} that reads the agreed volume is not there (or the note is not): the volume was not read"
                    ),
                };
            }
            st => {
                return RecoverOutcome::Failed {
                    reason: format!("reading the volume through {shown}: HTTP {st}"),
                };
            }
        }
        let mut needles = crate::scan::Needles::new(vec![hex.to_string()]);
        let mut body = s.body;
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match std::io::Read::read(&mut body, &mut buf) {
                Ok(0) => break,
                Ok(n) => needles.feed(&buf[..n]),
                Err(e) => {
                    return RecoverOutcome::Failed {
                        reason: format!("reading the volume: {e}"),
                    };
                }
            }
        }
        if needles.found(0) {
            RecoverOutcome::Found {
                detail: format!("the agreed volume holds it (read through {shown})"),
            }
        } else {
            RecoverOutcome::NotFound {
                detail: format!("the agreed volume's note does not hold it (read through {shown})"),
            }
        }
    }
}

/// A look that got no answer: the daemon's refusal, or an error.
fn failed(f: &Failure) -> RecoverOutcome {
    match f {
        Failure::Denied(reason) => RecoverOutcome::Denied {
            reason: reason.clone(),
        },
        Failure::Fault(f) => RecoverOutcome::Failed {
            reason: f.to_string(),
        },
    }
}
