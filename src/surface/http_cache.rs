//! `type: http-cache`: a generic HTTP or WebDAV cache (a build cache, an
//! Artifactory or Nexus generic repository, an nginx or Varnish proxy
//! cache) that two runs can both reach.
//!
//! Run A writes under the configured URL: a `PUT` whose path carries the
//! nonce, a `GET` miss on a path carrying it (a cache that remembers
//! misses keeps it), a `MKCOL` collection named with it, and a `PROPPATCH`
//! dead property holding it on a resource of its own. Run B lists the
//! cache the way the server offers (`PROPFIND` with depth 1, or the index
//! URL the config names) and reads the agreed paths. Cleanup deletes only
//! what A created, after checking each file's content and that each
//! collection is empty. A remembered miss cannot be deleted: it lasts for
//! the cache's negative TTL.
//!
//! Paths are [`super::tagged_name`]s, so leftovers are identifiable and
//! `cleanup --probe-id` takes only names whose tag verifies. Names read
//! from listings are attacker controlled: escaped when shown, never used
//! to build a request except for the exact names this probe derives.

use super::{
    Carrier, CleanupOutcome, Control, HttpAuth, Notice, NoticeKind, Persistence, PlantJob,
    PlantOutcome, RecoverOutcome, RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::http::{Failure, LazyClient, Request, check_url};
use crate::nonce::Nonce;
use crate::scan::{Marked, Needles};
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub struct HttpCache;

/// The dead property the `property` carrier sets.
const PROP_NS: &str = "urn:runwarden:1";

static CARRIERS: &[Carrier] = &[
    Carrier {
        name: "cache-key",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in the path of a PUT; run B finds it in the cache's listing",
    },
    Carrier {
        name: "negative-lookup",
        persistence: Persistence::UntilEvicted,
        description: "a GET miss on a path carrying the nonce, which a cache that remembers misses answers from its memory later",
    },
    Carrier {
        name: "collection-name",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in the name of a WebDAV collection (MKCOL), found in the listing",
    },
    Carrier {
        name: "property",
        persistence: Persistence::UntilEvicted,
        description: "the nonce in a WebDAV dead property (PROPPATCH) of an agreed resource, read back with PROPFIND",
    },
];

#[derive(Clone, Serialize, Deserialize)]
struct Settings {
    /// The cache's base URL, ending in `/`.
    url: String,
    auth: HttpAuth,
    /// A URL whose body lists the cache's names, instead of PROPFIND.
    index_url: Option<String>,
    control: bool,
}

/// What a file plant holds: no nonce (the carriers are the name and the
/// property), the same for every file of a probe.
fn innocuous(probe_id: &str) -> Vec<u8> {
    format!("runwarden http-cache plant, probe {probe_id}\n").into_bytes()
}

fn sha256_hex(data: &[u8]) -> String {
    crate::nonce::to_hex(&Sha256::digest(data))
}

/// The path (relative to the base URL) of a carrier's plant.
fn plant_name(ctx: &RunCtx<'_>, carrier: &str, nonce: &Nonce) -> String {
    let with_nonce = carrier != "property";
    super::tagged_name(ctx, carrier, with_nonce.then_some(nonce), "")
}

impl SurfaceType for HttpCache {
    fn name(&self) -> &'static str {
        "http-cache"
    }

    fn description(&self) -> &'static str {
        "a generic HTTP or WebDAV cache at a URL (PUT, cached misses, MKCOL, PROPPATCH; listed with PROPFIND)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "url",
            "token-env",
            "username-env",
            "password-env",
            "index-url",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
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
        let auth = HttpAuth::from_config(&mut opts)?;
        let url = if url.ends_with('/') {
            url
        } else {
            format!("{url}/")
        };
        let s = Settings {
            url,
            auth,
            index_url,
            control: false,
        };
        Ok(serde_json::to_value(s).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, String> {
        let server = crate::loopback::dav::DavServer::start(false)?;
        let token = server.token()?;
        let s = Settings {
            url: server.url(),
            auth: HttpAuth::bearer_for_control(token),
            index_url: None,
            control: true,
        };
        Ok(Control::served(s, server))
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        vec![
            ("credentials", s.auth.describe()),
            (
                "listing",
                match &s.index_url {
                    Some(u) => format!("GET {}", escape::bytes(u.as_bytes())),
                    None => "PROPFIND depth 1".into(),
                },
            ),
        ]
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, String> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| "bad http-cache settings".to_string())?;
        let client = LazyClient::new(s.auth.secrets());
        Ok(Box::new(Instance { s, client }))
    }
}

struct Instance {
    s: Settings,
    client: LazyClient,
}

/// The status of a multistatus answer's (first) propstat:
/// `<D:status>HTTP/1.1 403 Forbidden</D:status>`, any namespace prefix,
/// reason phrase optional.
fn propstat_status(body: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(body);
    let at = text.find("HTTP/1.")?;
    text[at..].split_whitespace().nth(1)?.parse().ok()
}

/// The last path segment of an href (without a trailing `/`).
fn last_segment(href: &str) -> &str {
    href.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

/// A response header that says the answer came from the cache.
fn cache_hit(headers: &::http::HeaderMap) -> Option<String> {
    for name in [
        "x-cache",
        "x-cache-status",
        "x-cache-lookup",
        "cf-cache-status",
        "x-proxy-cache",
    ] {
        if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok())
            && v.to_ascii_uppercase().contains("HIT")
        {
            return Some(format!("{name}: {}", escape::bytes(v.as_bytes())));
        }
    }
    // A shared cache sends `Age: 0` with an answer it fetched just now, so
    // only an older one says the miss was kept.
    headers
        .get("age")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.trim().parse::<u64>().is_ok_and(|a| a > 0))
        .map(|v| format!("age: {}", escape::bytes(v.as_bytes())))
}

impl Instance {
    fn client(&self) -> Result<&crate::http::Client, String> {
        self.client.get()
    }

    fn shown(&self) -> String {
        escape::bytes(self.s.url.as_bytes())
    }

    fn url_of(&self, name: &str) -> String {
        format!("{}{}", self.s.url, crate::http::percent_encode(name))
    }

    /// One request; `Err` when there was no answer.
    fn call(
        &self,
        method: &str,
        url: &str,
        headers: &[(&'static str, &str)],
        body: Vec<u8>,
    ) -> Result<crate::http::Response, String> {
        let method = Method::from_bytes(method.as_bytes()).expect("a valid method");
        let mut req = self
            .s
            .auth
            .apply(Request::new(method.clone(), url))
            .bytes(body);
        for (k, v) in headers {
            req = req.header(k, *v);
        }
        self.client()?.send(&req).map_err(|f| match f {
            Failure::Unreachable(m) => format!("cannot reach the cache at {}: {m}", self.shown()),
            Failure::Broken(m) => format!("{method} at the cache {}: {m}", self.shown()),
        })
    }

    /// Lists the cache once, handing each name (PROPFIND) or each body
    /// chunk (index URL) to the callbacks.
    fn list(
        &self,
        name: &mut dyn FnMut(&str),
        chunk: &mut dyn FnMut(&[u8]),
    ) -> Result<String, ListError> {
        let client = self.client().map_err(ListError::Failed)?;
        let (req, what) = match &self.s.index_url {
            Some(u) => (
                self.s.auth.apply(Request::new(Method::GET, u)),
                format!("the index {}", escape::bytes(u.as_bytes())),
            ),
            None => (
                self.s
                    .auth
                    .apply(Request::new(Method::from_bytes(b"PROPFIND").expect("valid"), &self.s.url))
                    .header("depth", "1")
                    .header("content-type", "application/xml")
                    .bytes(
                        b"<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\"><D:prop><D:resourcetype/></D:prop></D:propfind>"
                            .to_vec(),
                    ),
                format!("PROPFIND depth 1 of {}", self.shown()),
            ),
        };
        let propfind = self.s.index_url.is_none();
        let mut hrefs = Marked::dav_hrefs();
        let mut count = 0usize;
        // (An error page is scanned too, but then nothing found counts.)
        let (status, _) = client
            .stream(&req, &mut |c| {
                chunk(c);
                if propfind {
                    hrefs.feed(c, &mut |h| {
                        count += 1;
                        name(h)
                    });
                }
                Ok(())
            })
            .map_err(|f| ListError::Failed(format!("listing the cache ({what}): {f}")))?;
        match status {
            // A multistatus always names the collection itself: one with
            // no href at all is no WebDAV listing (a login page, a proxy's
            // answer), and says nothing of what the cache holds.
            207 if propfind && count == 0 => Err(ListError::Failed(format!(
                "{what} answered HTTP 207 without a single href: not a WebDAV listing"
            ))),
            207 if propfind => Ok(what),
            200 if !propfind => Ok(what),
            // A server that treats PROPFIND as GET answers 200 with a page
            // that is no listing.
            200 => Err(ListError::Failed(format!(
                "{what} answered HTTP 200, not a WebDAV multistatus (207): no listing"
            ))),
            401 | 403 => Err(ListError::Denied(format!(
                "the cache refused the listing ({what}): HTTP {status}"
            ))),
            405 | 501 if propfind => Err(ListError::Unavailable(format!(
                "the cache offers no PROPFIND listing (HTTP {status}); name an index with `index-url`"
            ))),
            s => Err(ListError::Failed(format!(
                "listing the cache ({what}): HTTP {s}"
            ))),
        }
    }
}

enum ListError {
    Denied(String),
    /// The cache offers no listing at all (no PROPFIND, no index): a
    /// route run B does not have.
    Unavailable(String),
    Failed(String),
}

/// What a write's status says.
fn write_outcome(status: u16, what: &str, shown: &str) -> Result<(), PlantOutcome> {
    match status {
        200..=299 => Ok(()),
        401 | 403 => Err(PlantOutcome::Refused {
            reason: format!("the cache refused the {what} (HTTP {status}) at {shown}"),
        }),
        // A cache that takes no PUT at all is no cache run A can write;
        // a 405 to a PUT usually means a wrong path: not a verdict.
        405 | 501 if what != "PUT" => Err(PlantOutcome::Unsupported {
            reason: format!("the cache does not support {what} (HTTP {status})"),
        }),
        s => Err(PlantOutcome::Failed {
            reason: format!("{what} at {shown}: HTTP {s}"),
        }),
    }
}

impl Surface for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        self.s.auth.missing.clone()
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        let name = plant_name(ctx, &job.carrier, &job.nonce);
        let shown_name = escape::bytes(name.as_bytes());
        let url = self.url_of(&name);
        let body = innocuous(ctx.probe_id);
        let planted = |detail: String| PlantOutcome::Planted {
            needle: Value::String(job.nonce.hex()),
            persistence: None,
            detail,
        };
        // Journalled first; taken back when the cache answers the write
        // with anything but success (then nothing was created).
        let write = |created: &mut dyn FnMut(Value),
                     entry: Value,
                     method: &str,
                     url: &str,
                     headers: &[(&'static str, &str)],
                     body: Vec<u8>|
         -> Result<(), PlantOutcome> {
            created(entry.clone());
            let r = self
                .call(method, url, headers, body)
                .map_err(|reason| PlantOutcome::Failed { reason })?;
            // A 4xx says nothing was made; a 5xx may come after the
            // write was done (a gateway's), so the entry stays journalled.
            write_outcome(r.status, method, &self.shown()).inspect_err(|_| {
                if (400..500).contains(&r.status) {
                    created(super::retraction(&entry));
                }
            })
        };
        let put = |created: &mut dyn FnMut(Value)| {
            let entry = json!({ "name": name, "kind": "file", "sha256": sha256_hex(&body) });
            let headers = [("content-type", "application/octet-stream")];
            write(created, entry, "PUT", &url, &headers, body.clone())
        };
        match job.carrier.as_str() {
            "cache-key" => match put(created) {
                Err(o) => o,
                Ok(()) => planted(format!("PUT {shown_name} under {}", self.shown())),
            },
            "negative-lookup" => match self.call("GET", &url, &[], vec![]) {
                Err(reason) => PlantOutcome::Failed { reason },
                Ok(r) if r.status == 404 || r.status == 410 => planted(format!(
                    "GET {shown_name} missed (HTTP {}{}); a cache that remembers misses keeps it for its negative TTL, and nothing can delete it",
                    r.status,
                    r.headers
                        .get("x-cache")
                        .and_then(|v| v.to_str().ok())
                        .map(|v| format!(", x-cache: {}", escape::bytes(v.as_bytes())))
                        .unwrap_or_default()
                )),
                Ok(r) if r.status == 401 || r.status == 403 => PlantOutcome::Refused {
                    reason: format!("the cache refused the lookup (HTTP {})", r.status),
                },
                Ok(r) => PlantOutcome::Failed {
                    reason: format!("GET {shown_name} answered HTTP {}, not a miss", r.status),
                },
            },
            "collection-name" => {
                let entry = json!({ "name": name, "kind": "collection" });
                match write(created, entry, "MKCOL", &format!("{url}/"), &[], vec![]) {
                    Err(o) => o,
                    Ok(()) => planted(format!("MKCOL {shown_name}/ under {}", self.shown())),
                }
            }
            _ => {
                // property: a resource of its own, then the property.
                if let Err(o) = put(created) {
                    return o;
                }
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:propertyupdate xmlns:D=\"DAV:\" xmlns:R=\"{PROP_NS}\"><D:set><D:prop><R:note>{}</R:note></D:prop></D:set></D:propertyupdate>",
                    job.nonce.hex()
                );
                match self.call(
                    "PROPPATCH",
                    &url,
                    &[("content-type", "application/xml")],
                    xml.into_bytes(),
                ) {
                    Err(reason) => PlantOutcome::Failed { reason },
                    Ok(r) => match write_outcome(r.status, "PROPPATCH", &self.shown()) {
                        Err(o) => o,
                        // A 207 holds the property's own status: set (2xx),
                        // refused (401/403: the cache's access control), or
                        // failed for another reason.
                        Ok(()) if r.status == 207 => match propstat_status(&r.body) {
                            Some(200..=299) => {
                                planted(format!("property R:note ({PROP_NS}) on {shown_name}"))
                            }
                            Some(code @ (401 | 403)) => PlantOutcome::Refused {
                                reason: format!(
                                    "the cache refused to set the property (HTTP {code} in its 207)"
                                ),
                            },
                            Some(code) => PlantOutcome::Failed {
                                reason: format!(
                                    "the cache did not set the property (HTTP {code} in its 207)"
                                ),
                            },
                            None => PlantOutcome::Failed {
                                reason: "the cache's 207 to the PROPPATCH holds no status".into(),
                            },
                        },
                        Ok(()) => planted(format!("property R:note ({PROP_NS}) on {shown_name}")),
                    },
                }
            }
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        // The agreed resource of the property carrier (its name holds no
        // nonce), whether the listing names it, and whether it is there.
        let prop_name = wanted
            .iter()
            .find(|w| w.carrier == "property")
            .and_then(|w| super::wanted_nonce(w).ok())
            .map(|n| plant_name(ctx, "property", &n));
        let mut listing_names_prop = false;
        let mut listing_ran = false;
        let mut prop_exists = false;
        // What the listing said of a negative-lookup it did not name, said
        // again after the lookup's own verdict.
        let mut listing_said: Vec<Option<String>> = vec![None; wanted.len()];
        // The listing comes first, for negative-lookup too: run B's own
        // lookup of the path would be remembered as well, and then listed.
        let listed: Vec<usize> = (0..wanted.len())
            .filter(|i| {
                matches!(
                    wanted[*i].carrier.as_str(),
                    "cache-key" | "collection-name" | "negative-lookup"
                )
            })
            .collect();
        if !listed.is_empty() {
            let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
            let needles: Vec<(usize, String)> = listed
                .iter()
                .filter_map(|i| Some((*i, wanted[*i].needle.as_str()?.to_string())))
                .collect();
            let prefix = format!("runwarden-{}-", ctx.probe_id);
            let mut names = 0usize;
            // The agreed property resource is looked for too: a listing
            // that does not name a resource B can read by name is not
            // complete (below).
            let mut raw = Needles::new(
                needles
                    .iter()
                    .map(|(_, n)| n.clone())
                    .chain(prop_name.clone())
                    .collect(),
            );
            let listing = self.list(
                &mut |href| {
                    names += 1;
                    let seg = last_segment(href);
                    for (i, n) in &needles {
                        if hits[*i].is_none() && seg.contains(n.as_str()) {
                            hits[*i] = Some(format!(
                                "the listing names {}",
                                escape::bytes(href.as_bytes())
                            ));
                        }
                    }
                    if seg.starts_with(&prefix)
                        && super::tagged_carrier(ctx, CARRIERS, seg, "").is_none()
                    {
                        notice(Notice {
                            kind: NoticeKind::ForgedMarker,
                            entry: escape::bytes(href.as_bytes()),
                            detail: "a name in this probe's form that no plant with this key made"
                                .into(),
                            beacon: None,
                        });
                    }
                },
                // The raw body too: an index has no hrefs, and a name too
                // long to parse still counts.
                &mut |chunk| raw.feed(chunk),
            );
            let in_raw = |i: usize| {
                let j = needles.iter().position(|(k, _)| *k == i)?;
                raw.found(j).then(|| "the listing holds it".to_string())
            };
            listing_ran = listing.is_ok();
            listing_names_prop = listing_ran && prop_name.is_some() && raw.found(needles.len());
            for i in listed {
                let negative = wanted[i].carrier == "negative-lookup";
                let missed = |what: &str| {
                    if self.s.index_url.is_some() {
                        format!("{what} does not hold it")
                    } else {
                        format!("{what}: none of {names} names holds it")
                    }
                };
                out[i] = match (&listing, hits[i].take().or_else(|| in_raw(i))) {
                    (Ok(_), Some(detail)) if negative => Some(RecoverOutcome::Found {
                        detail: format!("{detail}: the cache keeps the miss, and lists it"),
                    }),
                    (Ok(_), Some(detail)) => Some(RecoverOutcome::Found { detail }),
                    (Err(ListError::Failed(m)), _) => {
                        Some(RecoverOutcome::Failed { reason: m.clone() })
                    }
                    // negative-lookup has a second route: the lookup, below.
                    (Ok(what), None) if negative => {
                        listing_said[i] = Some(missed(what));
                        None
                    }
                    (Err(ListError::Denied(m)), _) if negative => {
                        listing_said[i] = Some(m.clone());
                        None
                    }
                    (Err(ListError::Unavailable(_)), _) if negative => None,
                    (Ok(what), None) => Some(RecoverOutcome::NotFound {
                        detail: missed(what),
                    }),
                    (Err(ListError::Denied(m)), _) => {
                        Some(RecoverOutcome::Denied { reason: m.clone() })
                    }
                    // The listing is these carriers' only route.
                    (Err(ListError::Unavailable(m)), _) => {
                        Some(RecoverOutcome::Failed { reason: m.clone() })
                    }
                };
            }
        }
        for (i, w) in wanted.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            let nonce = match super::wanted_nonce(w) {
                Ok(n) => n,
                Err(o) => {
                    out[i] = Some(o);
                    continue;
                }
            };
            let name = plant_name(ctx, &w.carrier, &nonce);
            let shown_name = escape::bytes(name.as_bytes());
            let url = self.url_of(&name);
            out[i] = Some(match w.carrier.as_str() {
                "negative-lookup" => match self.call("GET", &url, &[], vec![]) {
                    Err(reason) => RecoverOutcome::Failed { reason },
                    Ok(r) if r.status == 401 || r.status == 403 => RecoverOutcome::Denied {
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
                                listing_said[i]
                                    .as_deref()
                                    .map(|l| format!("{l}; "))
                                    .unwrap_or_default()
                            ),
                        },
                    },
                    Ok(r) => RecoverOutcome::Failed {
                        reason: format!(
                            "GET {shown_name} answered HTTP {}: someone created it",
                            r.status
                        ),
                    },
                },
                _ => {
                    let xml = format!(
                        "<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\" xmlns:R=\"{PROP_NS}\"><D:prop><R:note/></D:prop></D:propfind>"
                    );
                    match self.call(
                        "PROPFIND",
                        &url,
                        &[("depth", "0"), ("content-type", "application/xml")],
                        xml.into_bytes(),
                    ) {
                        Err(reason) => RecoverOutcome::Failed { reason },
                        Ok(r) if r.status == 401 || r.status == 403 => RecoverOutcome::Denied {
                            reason: format!("the cache refused the PROPFIND (HTTP {})", r.status),
                        },
                        Ok(r) if r.status == 404 => RecoverOutcome::NotFound {
                            detail: format!("the agreed resource {shown_name} does not exist"),
                        },
                        Ok(r) if r.status == 207 => {
                            prop_exists = true;
                            if memchr::memmem::find(&r.body, nonce.hex().as_bytes()).is_some() {
                                RecoverOutcome::Found {
                                    detail: format!(
                                        "PROPFIND of {shown_name} returns the property"
                                    ),
                                }
                            } else {
                                // The property's own status in the 207:
                                // missing (404) or empty is a miss, a
                                // refusal is the cache's access control,
                                // anything else is no answer.
                                match propstat_status(&r.body) {
                                    Some(401 | 403) => RecoverOutcome::Denied {
                                        reason: format!(
                                            "the cache refused to show the property of {shown_name}"
                                        ),
                                    },
                                    Some(200..=299 | 404) => RecoverOutcome::NotFound {
                                        detail: format!(
                                            "PROPFIND of {shown_name} returns no such property"
                                        ),
                                    },
                                    Some(code) => RecoverOutcome::Failed {
                                        reason: format!(
                                            "PROPFIND of {shown_name}: HTTP {code} for the property"
                                        ),
                                    },
                                    None => RecoverOutcome::Failed {
                                        reason: format!(
                                            "PROPFIND of {shown_name}: a 207 with no status"
                                        ),
                                    },
                                }
                            }
                        }
                        Ok(r) => RecoverOutcome::Failed {
                            reason: format!("PROPFIND of {shown_name}: HTTP {}", r.status),
                        },
                    }
                }
            });
        }
        // A listing that does not name the property resource B reads by
        // name (so it is there) lags or leaves things out: its silence on
        // the carriers whose only route it is proves nothing.
        if prop_exists && listing_ran && !listing_names_prop {
            for (o, w) in out.iter_mut().zip(wanted) {
                if matches!(
                    w.carrier.as_str(),
                    "cache-key" | "collection-name" | "negative-lookup"
                ) && matches!(o, Some(RecoverOutcome::NotFound { .. }))
                {
                    *o = Some(RecoverOutcome::Failed {
                        reason: "the listing does not name the agreed property resource, which run B reads by name: it is incomplete, so it not naming the plant proves nothing".into(),
                    });
                }
            }
        }
        super::all_outcomes(out)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        if self.s.index_url.is_some() {
            return Err("the cache is listed through an index, which may not name what to delete; use the receipt".into());
        }
        let body = innocuous(ctx.probe_id);
        let mut found = vec![];
        self.list(
            &mut |href| {
                let seg = last_segment(href);
                if let Some(c) = super::tagged_carrier(ctx, CARRIERS, seg, "")
                    && jobs.iter().any(|j| j.carrier == c)
                    && c != "negative-lookup"
                {
                    found.push(if href.ends_with('/') {
                        json!({ "name": seg, "kind": "collection" })
                    } else {
                        json!({ "name": seg, "kind": "file", "sha256": sha256_hex(&body) })
                    });
                }
            },
            &mut |_| {},
        )
        .map_err(|e| match e {
            ListError::Denied(m) | ListError::Failed(m) | ListError::Unavailable(m) => m,
        })?;
        Ok(found)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        let name = entry["name"].as_str().unwrap_or("");
        if !name.starts_with("runwarden-") || name.contains('/') || name.contains("..") {
            return CleanupOutcome::Left {
                reason: "not a runwarden name; nothing is deleted".into(),
            };
        }
        let url = self.url_of(name);
        let left = |reason: String| CleanupOutcome::Left { reason };
        // Checked before removal: a file holds exactly what was put, a
        // collection holds nothing.
        if entry["kind"] == "collection" {
            let r = match self.call("PROPFIND", &format!("{url}/"), &[("depth", "1")], vec![]) {
                Ok(r) => r,
                Err(m) => return left(m),
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
                Err(m) => left(m),
            };
        }
        let r = match self.call("GET", &url, &[], vec![]) {
            Ok(r) => r,
            Err(m) => return left(m),
        };
        match r.status {
            404 | 410 => return CleanupOutcome::Gone,
            200 => {
                if Some(sha256_hex(&r.body).as_str()) != entry["sha256"].as_str() {
                    return left("its content changed since it was planted".into());
                }
            }
            s => return left(format!("GET before deleting: HTTP {s}")),
        }
        match self.call("DELETE", &url, &[], vec![]) {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) => left(format!("DELETE: HTTP {}", r.status)),
            Err(m) => left(m),
        }
    }

    fn describe(&self, entry: &Value) -> String {
        let name = entry["name"].as_str().unwrap_or("?");
        let slash = if entry["kind"] == "collection" {
            "/"
        } else {
            ""
        };
        format!(
            "{}{slash} under {}",
            escape::bytes(name.as_bytes()),
            if self.s.control {
                "the control".to_string()
            } else {
                self.shown()
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::cache_hit;

    fn headers(pairs: &[(&'static str, &str)]) -> ::http::HeaderMap {
        let mut h = ::http::HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_a_cache_that_says_so_remembered_a_miss() {
        assert!(cache_hit(&headers(&[("x-cache", "Hit from cloudfront")])).is_some());
        assert!(cache_hit(&headers(&[("x-cache-status", "HIT")])).is_some());
        assert!(cache_hit(&headers(&[("age", "12")])).is_some());
        // A shared cache's fresh fetch: not a remembered miss.
        assert!(cache_hit(&headers(&[("age", "0"), ("x-cache", "MISS")])).is_none());
        assert!(cache_hit(&headers(&[])).is_none());
    }
}
