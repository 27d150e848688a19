//! The http-cache surface type's operations: its config and settings,
//! its control, the plant of each carrier, recovery, cleanup (by receipt
//! and by probe id) and what watch mode lists.

use super::plant::before_witness;
use super::protocol::{ListError, class, last_segment};
use super::recover::{ROUTES, route_of};
use super::{Entry, Http, HttpCache, Kind, PROP_NS, Settings, innocuous, plant_name, sha256_hex};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::Class;
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use crate::scan::Marked;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::carrier::CarrierSet;
use crate::surface::witness::Side;
use crate::surface::{
    About, CleanupOutcome, Control, HttpAuth, Job, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Want, Watch,
};

impl crate::surface::Surface for HttpCache {
    const NAME: &'static str = "http-cache";
    const DESCRIPTION: &'static str = "a generic HTTP or WebDAV cache at a URL (PUT, cached misses, MKCOL, PROPPATCH; listed with PROPFIND)";
    const KEYS: &'static [&'static str] = &[
        "url",
        "token-env",
        "username-env",
        "password-env",
        "index-url",
        "consistency-wait",
    ];
    const WATCH: Watch<Http> = Watch::Yes {
        unwatched: &[
            (
                Http::NegativeLookup,
                "a remembered miss leaves nothing in the listing",
            ),
            (
                Http::Property,
                "dead properties are not in the depth-1 listing watch mode reads",
            ),
        ],
        changes: changes_of,
    };
    const ROUTES: &'static [crate::surface::routes::Route<Http>] = ROUTES;
    type Carrier = Http;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let Some((url, pos)) = opts.string("url")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "an http-cache surface needs `url:` (the cache's base URL)",
            ));
        };
        check_url(&url).map_err(|m| opts.error(pos, format!("`url`: {m}")))?;
        if url.contains('?') || url.contains('#') {
            return Err(opts.error(pos, "`url`: no query or fragment: a base URL"));
        }
        let index_url = match opts.string("index-url")? {
            Some((u, p)) => {
                check_url(&u).map_err(|m| opts.error(p, format!("`index-url`: {m}")))?;
                Some(u)
            }
            None => None,
        };
        let mut to = vec![url.as_str()];
        to.extend(index_url.as_deref());
        let auth = HttpAuth::from_config(&mut opts, &to)?;
        let url = if url.ends_with('/') {
            url
        } else {
            format!("{url}/")
        };
        Ok(Settings {
            url,
            auth,
            index_url,
            consistency_wait_ms: crate::surface::listing::wait_option(&mut opts)?.as_millis()
                as u64,
            control: false,
        })
    }

    fn about(s: &Settings) -> About<Http> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.url.as_bytes())
        };
        let listing = match &s.index_url {
            Some(u) => format!("GET {}", escape::bytes(u.as_bytes())),
            None => "PROPFIND depth 1".into(),
        };
        let mut about = About::new(format!("under {place}"))
            .fact("credentials", s.auth.describe())
            .fact("listing", listing);
        if let Some(o) = crate::http::origin(&s.url) {
            about = about.exposure(format!("cache:{o}"));
        }
        match &s.auth.missing {
            Some(why) => about.secret_missing(why.clone()),
            None => about,
        }
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::dav::DavServer::start(false)?;
        let token = server.token()?;
        let s = Settings {
            url: server.url(),
            auth: HttpAuth::bearer_for_control(token),
            index_url: None,
            consistency_wait_ms: crate::surface::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<HttpCache, Fault> {
        let client = LazyClient::new(settings.auth.secrets());
        Ok(HttpCache { settings, client })
    }

    /// Run A: the listing's witness made before the plants (the property
    /// carrier's resource, made last, is the one after them), then each
    /// carrier ([`crate::surface::witness`]).
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Http>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        crate::surface::between(
            jobs,
            Self::PLANTED_LAST,
            journal,
            |side, journal| {
                // (The later witness is the property's resource, a plant.)
                if side == Side::Before {
                    let name = before_witness(ctx);
                    let body = innocuous(ctx.probe_id);
                    let headers = [("content-type", "application/octet-stream")];
                    let entry = Entry::file(&name, &body);
                    let url = self.url_of(&name);
                    let _ = self.write(journal, entry, "PUT", &url, &headers, body);
                }
            },
            |job, journal| self.plant_one(ctx, job, journal),
        )
    }

    /// A PUT, a GET miss, a MKCOL and a PROPPATCH, each journalled before
    /// its request and taken back only when the cache refused it.
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Http>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let carrier = job.carrier;
        let name = plant_name(ctx, carrier, &job.nonce);
        let shown_name = escape::bytes(name.as_bytes());
        let url = self.url_of(&name);
        let body = innocuous(ctx.probe_id);
        let planted = |detail: String| PlantOutcome::Planted {
            needle: job.nonce,
            persistence: None,
            detail,
        };
        let put = |journal: &mut Journal<'_, Entry>| {
            let entry = Entry::file(&name, &body);
            let headers = [("content-type", "application/octet-stream")];
            self.write(journal, entry, "PUT", &url, &headers, body.clone())
        };
        match carrier {
            Http::CacheKey => match put(journal) {
                Err(o) => o,
                Ok(()) => planted(format!("PUT {shown_name} under {}", self.shown())),
            },
            Http::NegativeLookup => match self.call("GET", &url, &[], vec![]) {
                Err(f) => PlantOutcome::Error { reason: f.into() },
                Ok(r) if r.status == 404 || r.status == 410 => planted(format!(
                    "GET {shown_name} missed (HTTP {}{}); a cache that remembers misses keeps it for its negative TTL, and nothing can delete it",
                    r.status,
                    r.headers
                        .get("x-cache")
                        .and_then(|v| v.to_str().ok())
                        .map(|v| format!(", x-cache: {}", escape::bytes(v.as_bytes())))
                        .unwrap_or_default()
                )),
                Ok(r) if class(r.status) == Class::Refused => PlantOutcome::Refused {
                    reason: format!("the cache refused the lookup (HTTP {})", r.status),
                },
                Ok(r) => PlantOutcome::Error {
                    reason: format!("GET {shown_name} answered HTTP {}, not a miss", r.status),
                },
            },
            Http::CollectionName => {
                let entry = Entry::collection(&name);
                match self.write(journal, entry, "MKCOL", &format!("{url}/"), &[], vec![]) {
                    Err(o) => o,
                    Ok(()) => planted(format!("MKCOL {shown_name}/ under {}", self.shown())),
                }
            }
            Http::Property => {
                // A resource of its own, then the property.
                if let Err(o) = put(journal) {
                    return o;
                }
                match self.set_property(&url, &job.nonce.hex()) {
                    Err(o) => o,
                    Ok(()) => planted(format!("property R:note ({PROP_NS}) on {shown_name}")),
                }
            }
        }
    }

    /// Run B: the listing first (for the name carriers, and for a remembered
    /// miss before B's own lookup would be remembered too), then the agreed
    /// paths; and the check that the listing names what B reads by name.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Http, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        crate::surface::routes::through(wanted.iter().map(|w| w.carrier), route_of, || {
            let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
            let listed_at = |i: usize| wanted[i].carrier.is_listed();
            // The listing's witness: the property carrier's resource, which
            // run A PUTs under an agreed name (no nonce in it) before its
            // PROPPATCH, whatever the PROPPATCH then answers.
            let witness = crate::surface::tagged_name(ctx, Http::Property.name(), None, "");
            // And the one run A made before the plants: a listing without
            // it (the later one there) lost the older entries.
            let witnesses = [before_witness(ctx), witness.clone()];
            // What the listing said of a negative-lookup it did not name, said
            // again after the lookup's own verdict.
            let mut listing_said: Vec<Option<String>> = vec![None; wanted.len()];
            let mut stale = None;
            let mut witnessed: Result<bool, Fault> = Ok(false);
            // The listing comes first, for negative-lookup too: run B's own
            // lookup of the path would be remembered as well, and then listed.
            let listed: Vec<usize> = (0..wanted.len()).filter(|i| listed_at(*i)).collect();
            if !listed.is_empty() {
                let needles: Vec<(usize, String)> = listed
                    .iter()
                    .map(|i| (*i, wanted[*i].needle.hex()))
                    .collect();
                // Whether the witness is there at all, asked by its own path: a
                // listing cannot be waited on to show what does not exist (a
                // read-only cache refused its PUT).
                witnessed = self.exists(&witness);
                let wait = match witnessed {
                    Ok(true) => std::time::Duration::from_millis(self.settings.consistency_wait_ms),
                    _ => std::time::Duration::ZERO,
                };
                let listing = crate::surface::listing::until_current(wait, || {
                    self.list_once(ctx, &needles, &witnesses, wanted.len())
                });
                let (names, mut hits, notices, what) = match &listing {
                    Ok(c) => {
                        let (names, hits, notices, what) = c.value.clone();
                        (names, hits, notices, Ok(what))
                    }
                    Err(e) => (0, vec![None; wanted.len()], vec![], Err(e)),
                };
                for n in notices {
                    notice(n);
                }
                if let Ok(c) = &listing
                    && !c.current
                {
                    stale = Some(crate::surface::listing::Current {
                        value: (),
                        current: false,
                        waited: c.waited,
                        tries: c.tries,
                    });
                }
                for i in listed {
                    let negative = wanted[i].carrier == Http::NegativeLookup;
                    (out[i], listing_said[i]) =
                        self.listed_outcome(&what, hits[i].take(), names, negative);
                }
            }
            for (i, w) in wanted.iter().enumerate() {
                if out[i].is_some() {
                    continue;
                }
                let (carrier, nonce) = (w.carrier, w.needle);
                let name = plant_name(ctx, carrier, &nonce);
                out[i] = match carrier {
                    Http::NegativeLookup => {
                        Some(self.look_up_miss(&name, listing_said[i].as_deref()))
                    }
                    Http::Property => Some(self.read_property(&name, &nonce.hex())),
                    // The listing was their only route (above).
                    Http::CacheKey | Http::CollectionName => None,
                };
            }
            if let Some(c) = stale {
                self.not_current(&mut out, wanted, &witnesses, &c, witnessed);
            }
            crate::surface::all_outcomes(out)
        })
    }

    /// Cleanup by probe id: finding a probe's plants in the listing.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Http>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        if self.settings.index_url.is_some() {
            return Err(Fault::unsupported(
                "the cache is listed through an index, which may not name what to delete; use the receipt",
            ));
        }
        let body = innocuous(ctx.probe_id);
        let carriers: Vec<Http> = jobs.iter().map(|j| j.carrier).collect();
        let mut found = vec![];
        self.list(
            &mut |href| {
                let seg = last_segment(href);
                if seg == before_witness(ctx) {
                    found.push(Entry::file(seg, &body));
                } else if let Some(c) = Http::tagged(ctx, seg, "")
                    && carriers.contains(&c)
                    && c != Http::NegativeLookup
                {
                    found.push(if href.ends_with('/') {
                        Entry::collection(seg)
                    } else {
                        Entry::file(seg, &body)
                    });
                }
            },
            &mut |_| {},
        )
        .map_err(|e| match e {
            // The cache's access control, or no listing at all: no look
            // can be had here.
            ListError::Denied(m) | ListError::Unavailable(m) => Fault::Unsupported(m),
            ListError::Failed(m) => Fault::Broken(m),
        })?;
        Ok(found.into())
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let innocuous_sha = sha256_hex(&innocuous(ctx.probe_id));
        // The listing's witness: exactly its name, an innocuous file.
        if entry.name == before_witness(ctx) {
            return (entry.kind == Kind::File && entry.sha256.as_deref() == Some(&innocuous_sha))
                .then_some(())
                .ok_or_else(|| Fault::invalid("not the file a witness is"));
        }
        let c = Http::owned(ctx, &entry.name, "", &|c| c != Http::Property)?;
        let ok = match (c, entry.kind) {
            (Http::CollectionName, Kind::Collection) => true,
            (Http::CacheKey | Http::Property, Kind::File) => {
                entry.sha256.as_deref() == Some(sha256_hex(&innocuous(ctx.probe_id)).as_str())
            }
            _ => false,
        };
        ok.then_some(())
            .ok_or_else(|| Fault::invalid(format!("a {c} plant makes no such entry")))
    }

    /// Deletes what an entry names after checking a file's content and that
    /// a collection is empty.
    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        let name = entry.name.as_str();
        if !name.starts_with("runwarden-") || name.contains('/') || name.contains("..") {
            return CleanupOutcome::Left {
                reason: "not a runwarden name; nothing is deleted".into(),
            };
        }
        let url = self.url_of(name);
        let left = |reason: String| CleanupOutcome::Left { reason };
        // Checked before removal: a file holds exactly what was put, a
        // collection holds nothing.
        if entry.kind == Kind::Collection {
            let r = match self.call("PROPFIND", &format!("{url}/"), &[("depth", "1")], vec![]) {
                Ok(r) => r,
                Err(f) => return left(f.into()),
            };
            match r.status {
                404 => return CleanupOutcome::Gone,
                207 => {
                    let mut n = 0;
                    let mut h = Marked::dav_hrefs();
                    h.feed(&r.body, &mut |_| n += 1);
                    if n > 1 {
                        return left(
                            "the collection is not empty: someone put something in it".into(),
                        );
                    }
                }
                s => return left(format!("PROPFIND before deleting: HTTP {s}")),
            }
            return match self.call("DELETE", &format!("{url}/"), &[], vec![]) {
                Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
                Ok(r) if r.status == 404 => CleanupOutcome::Gone,
                Ok(r) => left(format!("DELETE: HTTP {}", r.status)),
                Err(f) => left(f.into()),
            };
        }
        let r = match self.call("GET", &url, &[], vec![]) {
            Ok(r) => r,
            Err(f) => return left(f.into()),
        };
        match r.status {
            404 | 410 => return CleanupOutcome::Gone,
            200 => {
                if Some(sha256_hex(&r.body).as_str()) != entry.sha256.as_deref() {
                    return left("its content changed since it was planted".into());
                }
            }
            s => return left(format!("GET before deleting: HTTP {s}")),
        }
        match self.call("DELETE", &url, &[], vec![]) {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) => left(format!("DELETE: HTTP {}", r.status)),
            Err(f) => left(f.into()),
        }
    }

    /// Watch mode: the names a PROPFIND of depth 1 lists (the listing run B
    /// reads). A cache read through an `index-url` is read as text, not as
    /// names: it has no snapshot. (What the listing cannot see is `WATCH`.)
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        if self.settings.index_url.is_some() {
            return Err(SnapshotError::Unsupported(
                "the cache is read through its index-url, as text: watch mode needs the PROPFIND listing"
                    .into(),
            ));
        }
        let mut all = Vec::new();
        self.list(
            &mut |href| {
                // A collection's href ends in `/`.
                let kind = if href.ends_with('/') {
                    "collection"
                } else {
                    "resource"
                };
                all.push(listed(vec![component(href.as_bytes())], kind, &[]));
            },
            &mut |_| {},
        )
        .map_err(|e| match e {
            ListError::Unavailable(r) => SnapshotError::Unsupported(r),
            ListError::Denied(r) | ListError::Failed(r) => SnapshotError::Failed(r),
        })?;
        emit_sorted(all, sink)
    }
}

/// A new or removed resource carries its path (`cache-key`); a
/// collection its name.
fn changes_of(c: &Change, _before: &Before) -> Vec<Http> {
    let carrier = match c.entry().kind.as_str() {
        "collection" => Http::CollectionName,
        _ => Http::CacheKey,
    };
    vec![carrier]
}
