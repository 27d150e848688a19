//! Run B's routes: one whole listing (and the witness, asked by its own
//! path), what the listing says of a carrier whose route it is, the
//! lookup of a remembered miss, and the PROPFIND of the property.

use super::protocol::{ListError, cache_hit, class, last_segment, propstat_status};
use super::{Http, HttpCache, PROP_NS};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::Class;
use crate::nonce::Nonce;
use crate::scan::Needles;
use crate::surface::carrier::CarrierSet;
use crate::surface::listing::Current;
use crate::surface::routes;
use crate::surface::{Notice, NoticeKind, RecoverOutcome, RunCtx, Want};

/// One listing: how many names, per wanted carrier where its nonce was
/// found, the notices, and what was listed.
type Listed = (usize, Vec<Option<String>>, Vec<Notice>, String);

/// Run B's routes ([`crate::surface::routes`]): the listing (the cache's
/// index or its WebDAV collection) for the carriers whose nonce is a name,
/// run B's own GET for negative-lookup (the listing, when there is one,
/// only adds a hit), and the PROPFIND of the agreed resource for property.
pub(super) const ROUTES: &[routes::Route<Http>] = &[
    routes::Route {
        name: "listing",
        kind: routes::Kind::Listing,
        carriers: &[Http::CacheKey, Http::CollectionName],
    },
    routes::Route {
        name: "lookup",
        kind: routes::Kind::ByName,
        carriers: &[Http::NegativeLookup],
    },
    routes::Route {
        name: "propfind",
        kind: routes::Kind::ByName,
        carriers: &[Http::Property],
    },
];

/// A carrier's route, and what shows a miss there current: the listing
/// counts only when it shows the agreed resource, its witness; the GET and
/// the PROPFIND are the cache's own answers, and the PROPFIND's miss
/// counts only once the agreed resource is there ([`HttpCache::read_property`]).
pub(super) fn route_of(c: Http) -> (&'static str, routes::Proof) {
    match c {
        Http::CacheKey | Http::CollectionName => ("listing", routes::Proof::Listed),
        Http::NegativeLookup => (
            "lookup",
            routes::Proof::Protocol("the cache's own answer to run B's GET"),
        ),
        Http::Property => (
            "propfind",
            routes::Proof::Protocol("the agreed resource's PROPFIND, the resource there"),
        ),
    }
}

impl HttpCache {
    /// Whether `name` is there, asked by its own path (a GET: every HTTP
    /// cache answers it, an index-listed one too). `Broken` (or
    /// `Unreachable`) when it cannot be told.
    pub(super) fn exists(&self, name: &str) -> Result<bool, Fault> {
        let r = self.call("GET", &self.url_of(name), &[], vec![])?;
        match r.status {
            200..=299 => Ok(true),
            404 | 410 => Ok(false),
            s => Err(Fault::broken(format!("a GET of it answered HTTP {s}"))),
        }
    }

    /// One whole listing, and whether it names every witness (or found
    /// every nonce it looked for).
    pub(super) fn list_once(
        &self,
        ctx: &RunCtx<'_>,
        needles: &[(usize, String)],
        witnesses: &[String],
        n: usize,
    ) -> Result<(Listed, bool), ListError> {
        let mut hits: Vec<Option<String>> = vec![None; n];
        let mut notices = Vec::new();
        let prefix = format!("runwarden-{}-", ctx.probe_id);
        let mut names = 0usize;
        // The raw body too: an index has no hrefs, and a name too long to
        // parse still counts. The witness is looked for the same way.
        let mut raw = Needles::new(
            needles
                .iter()
                .map(|(_, n)| n.clone())
                .chain(witnesses.iter().cloned())
                .collect(),
        );
        let what = self.list(
            &mut |href| {
                names += 1;
                let seg = last_segment(href);
                for (i, n) in needles {
                    if hits[*i].is_none() && seg.contains(n.as_str()) {
                        hits[*i] = Some(format!(
                            "the listing names {}",
                            escape::bytes(href.as_bytes())
                        ));
                    }
                }
                if seg.starts_with(&prefix)
                    && Http::tagged(ctx, seg, "").is_none()
                    && !witnesses.iter().any(|w| w == seg)
                {
                    notices.push(Notice {
                        kind: NoticeKind::ForgedMarker,
                        entry: escape::bytes(href.as_bytes()),
                        detail: "a name in this probe's form that no plant with this key made"
                            .into(),
                        beacon: None,
                    });
                }
            },
            &mut |chunk| raw.feed(chunk),
        )?;
        for (j, (i, _)) in needles.iter().enumerate() {
            if hits[*i].is_none() && raw.found(j) {
                hits[*i] = Some("the listing holds it".to_string());
            }
        }
        let all_found = needles.iter().all(|(i, _)| hits[*i].is_some());
        let current = all_found || (0..witnesses.len()).all(|k| raw.found(needles.len() + k));
        Ok(((names, hits, notices, what), current))
    }

    /// A listing that did not name both `witnesses` (the file made before
    /// the plants, the property's resource made after; after the
    /// consistency wait `c`) lags, leaves things out, or lost the older
    /// entries: its silence on the carriers whose only route it is proves
    /// nothing. `witnessed`: whether the later witness exists at all.
    pub(super) fn not_current(
        &self,
        out: &mut [Option<RecoverOutcome>],
        wanted: &[Want<Http, Nonce>],
        witnesses: &[String; 2],
        c: &Current<()>,
        witnessed: Result<bool, Fault>,
    ) {
        let shown = format!(
            "the agreed resources {} and {}",
            escape::bytes(witnesses[0].as_bytes()),
            escape::bytes(witnesses[1].as_bytes())
        );
        let only_listed =
            |i: usize| matches!(wanted[i].carrier, Http::CacheKey | Http::CollectionName);
        let reason = match witnessed {
            // The later witness there and the earlier gone: the cache
            // dropped older entries (an eviction), not a lag.
            Ok(true) if matches!(self.exists(&witnesses[0]), Ok(false)) => {
                crate::surface::witness::dropped("the cache's listing")
            }
            Ok(true) => {
                let listed_at = |i: usize| wanted[i].carrier.is_listed();
                crate::surface::listing::demote(out, listed_at, &shown, c);
                return;
            }
            // No witness to show: the carriers whose only route the
            // listing is cannot be shown closed; negative-lookup's own
            // lookup still decides for it.
            Ok(false) => format!(
                "{shown} do not both exist (a PUT was not made), so nothing shows the listing is current: its silence proves nothing"
            ),
            Err(e) => format!(
                "whether {shown} exist could not be told ({e}), so nothing shows the listing is current"
            ),
        };
        for (i, o) in out.iter_mut().enumerate() {
            if only_listed(i) && matches!(o, Some(RecoverOutcome::NotFound { .. })) {
                *o = Some(RecoverOutcome::Error {
                    reason: reason.clone(),
                });
            }
        }
    }

    /// What the listing (`what` it listed, of `names` names) says of one
    /// carrier whose route it is, where it found `hit`: its outcome, and
    /// for negative-lookup (`negative`), whose second route is the lookup,
    /// none but what the listing said, to be said again after it.
    pub(super) fn listed_outcome(
        &self,
        what: &Result<String, &ListError>,
        hit: Option<String>,
        names: usize,
        negative: bool,
    ) -> (Option<RecoverOutcome>, Option<String>) {
        let missed = |what: &str| {
            if self.settings.index_url.is_some() {
                format!("{what} does not hold it")
            } else {
                format!("{what}: none of {names} names holds it")
            }
        };
        let outcome = match (what, hit) {
            (Ok(_), Some(detail)) if negative => RecoverOutcome::Found {
                detail: format!("{detail}: the cache keeps the miss, and lists it"),
            },
            (Ok(_), Some(detail)) => RecoverOutcome::Found { detail },
            (Err(ListError::Failed(m)), _) => RecoverOutcome::Error { reason: m.clone() },
            // negative-lookup has a second route: the lookup.
            (Ok(what), None) if negative => return (None, Some(missed(what))),
            (Err(ListError::Denied(m)), _) if negative => return (None, Some(m.clone())),
            (Err(ListError::Unavailable(_)), _) if negative => return (None, None),
            (Ok(what), None) => RecoverOutcome::NotFound {
                detail: missed(what),
            },
            (Err(ListError::Denied(m)), _) => RecoverOutcome::Denied { reason: m.clone() },
            // The listing is these carriers' only route.
            (Err(ListError::Unavailable(m)), _) => RecoverOutcome::Error { reason: m.clone() },
        };
        (Some(outcome), None)
    }

    /// negative-lookup's second route: run B's own GET of the path, which
    /// a cache that remembers the miss answers from its memory.
    /// `listing_said`: what the listing said of it, said again.
    pub(super) fn look_up_miss(&self, name: &str, listing_said: Option<&str>) -> RecoverOutcome {
        let shown_name = escape::bytes(name.as_bytes());
        match self.call("GET", &self.url_of(name), &[], vec![]) {
            Err(f) => RecoverOutcome::Error { reason: f.into() },
            Ok(r) if class(r.status) == Class::Refused => RecoverOutcome::Denied {
                reason: format!("the cache refused the lookup (HTTP {})", r.status),
            },
            Ok(r) if r.status == 404 || r.status == 410 => match cache_hit(&r.headers) {
                Some(h) => RecoverOutcome::Found {
                    detail: format!(
                        "GET {shown_name} was answered from the cache's memory of the miss ({h})"
                    ),
                },
                None => RecoverOutcome::NotFound {
                    detail: format!(
                        "{}GET {shown_name} missed with no sign of a remembered miss (no X-Cache or X-Cache-Status HIT, no Age above 0)",
                        listing_said.map(|l| format!("{l}; ")).unwrap_or_default()
                    ),
                },
            },
            Ok(r) => RecoverOutcome::Error {
                reason: format!(
                    "GET {shown_name} answered HTTP {}: someone created it",
                    r.status
                ),
            },
        }
    }

    /// The property carrier's route: a PROPFIND of the agreed resource
    /// `name`, whose dead property holds `hex` when it is there.
    pub(super) fn read_property(&self, name: &str, hex: &str) -> RecoverOutcome {
        let shown_name = escape::bytes(name.as_bytes());
        let xml = format!(
            "<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\" xmlns:R=\"{PROP_NS}\"><D:prop><R:note/></D:prop></D:propfind>"
        );
        let r = match self.call(
            "PROPFIND",
            &self.url_of(name),
            &[("depth", "0"), ("content-type", "application/xml")],
            xml.into_bytes(),
        ) {
            Err(f) => return RecoverOutcome::Error { reason: f.into() },
            Ok(r) => r,
        };
        match r.status {
            s if class(s) == Class::Refused => RecoverOutcome::Denied {
                reason: format!("the cache refused the PROPFIND (HTTP {})", r.status),
            },
            // Run A made it (its plant reported so): gone now, the cache
            // dropped it (an eviction) or does not show it yet, and either
            // way its absence proves nothing of the property.
            404 => RecoverOutcome::Error {
                reason: format!(
                    "not current: the agreed resource {shown_name}, which run A made, does not exist (an eviction, or not there yet): its absence proves nothing"
                ),
            },
            207 if memchr::memmem::find(&r.body, hex.as_bytes()).is_some() => {
                RecoverOutcome::Found {
                    detail: format!("PROPFIND of {shown_name} returns the property"),
                }
            }
            // The property's own status in the 207: missing (404) or empty
            // is a miss, a refusal is the cache's access control, anything
            // else is no answer.
            207 => match propstat_status(&r.body) {
                Some(code) if class(code) == Class::Refused => RecoverOutcome::Denied {
                    reason: format!("the cache refused to show the property of {shown_name}"),
                },
                Some(200..=299 | 404) => RecoverOutcome::NotFound {
                    detail: format!("PROPFIND of {shown_name} returns no such property"),
                },
                Some(code) => RecoverOutcome::Error {
                    reason: format!("PROPFIND of {shown_name}: HTTP {code} for the property"),
                },
                None => RecoverOutcome::Error {
                    reason: format!("PROPFIND of {shown_name}: a 207 with no status"),
                },
            },
            status => RecoverOutcome::Error {
                reason: format!("PROPFIND of {shown_name}: HTTP {status}"),
            },
        }
    }
}
