//! The registry's API as both runs speak it: bounded requests with the
//! surface's credentials, a package's document, a tarball searched as it
//! arrives, the search read page by page to its end, and what a
//! document says of one carrier.

use super::plant::witness_package;
use super::{MAX_PAGES, Npm, NpmRegistry, PAGE};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Class, Server};
use crate::http::{Failure, Request};
use crate::nonce::Nonce;
use crate::scan::Needles;
use crate::surface::carrier::CarrierSet;
use crate::surface::witness::{self, Currency, Seen, Side};
use crate::surface::{CleanupOutcome, Notice, NoticeKind, RecoverOutcome, RunCtx, Want};
use ::http::Method;
use serde_json::Value;

/// How an npm registry answers ([`crate::http::answer`]):
/// - its access control refuses with 401 or 403;
/// - every error of its own, refusals included, is a JSON object
///   (`{"error": …}`): an HTML 401/403 comes from something in front of it
///   (a proxy, an SSO gate, a firewall), which says nothing of the
///   registry's access control, and a 404 without one is a wrong URL;
/// - it answers a version that exists with 403 ("cannot publish over the
///   previously published versions"): a conflict, not access control.
pub(super) const REGISTRY: Server<'static> = Server {
    refusals: &[401, 403],
    own: &answer::json_object,
    refuses: &answer::any,
    exists: &answer::says_exists,
};

/// What the registry's answer `r` means.
pub(super) fn class(r: &crate::http::Response) -> Class {
    answer::classify(&r.into(), &REGISTRY)
}

/// Why a refusal status without the registry's JSON body is no refusal.
pub(super) fn not_the_registrys(status: u16, what: &str) -> String {
    format!(
        "{what}: HTTP {status} without the registry's JSON body: something in front of it (a proxy, an SSO gate) answered, not the registry"
    )
}

/// A package name in a URL path: a scoped name's `/` is encoded, as npm
/// does.
pub(super) fn path_of(name: &str) -> String {
    name.replace('/', "%2f")
}

impl NpmRegistry {
    pub(super) fn client(&self) -> Result<&crate::http::Client, Fault> {
        self.client.get()
    }

    pub(super) fn shown(&self) -> String {
        escape::bytes(self.settings.url.as_bytes())
    }

    /// One request; `Unreachable` or `Broken` when there was no answer.
    pub(super) fn call(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
    ) -> Result<crate::http::Response, Fault> {
        let mut req = self
            .settings
            .auth
            .apply(Request::new(method.clone(), url))
            .header("accept", "application/json");
        if let Some(b) = body {
            req = req.json(b);
        }
        self.client()?.send(&req).map_err(|f| match f {
            Failure::Unreachable(m) => {
                Fault::Unreachable(format!("cannot reach the registry {}: {m}", self.shown()))
            }
            Failure::Broken(m) => {
                Fault::broken(format!("{method} at the registry {}: {m}", self.shown()))
            }
        })
    }

    /// What the document route's witnesses say of its misses: each
    /// witness's document read by name, as run B reads the plants'. (No
    /// wider route: the search reads with the same token, so it listing
    /// what the documents miss is a contradiction, not isolation.)
    pub(super) fn document_currency(&self, ctx: &RunCtx<'_>) -> Currency {
        let mut seen = Seen::default();
        for side in Side::BOTH {
            match self.packument(&witness_package(ctx, side)) {
                Ok(Some(_)) => seen.saw(side),
                Ok(None) => {}
                Err(RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason }) => {
                    return Currency::NotCurrent(format!(
                        "reading the document of the witness run A published {} the plant failed: {reason}",
                        side.name()
                    ));
                }
                Err(_) => {}
            }
        }
        witness::currency("the document route", seen, || None)
    }

    /// The packument of `name` (its `name` that name, its `versions` an
    /// object): `Ok(None)` when the registry says there is none.
    pub(super) fn packument(&self, name: &str) -> Result<Option<Value>, RecoverOutcome> {
        let url = format!("{}{}", self.settings.url, path_of(name));
        let r = self
            .call(Method::GET, &url, None)
            .map_err(|f| RecoverOutcome::Error { reason: f.into() })?;
        let shown = escape::bytes(name.as_bytes());
        if r.status == 200 {
            return match r.json().ok().filter(Value::is_object) {
                Some(d) if d["name"] == name && d["versions"].is_object() => Ok(Some(d)),
                _ => Err(RecoverOutcome::Error {
                    reason: format!(
                        "the registry answered 200 for {shown} with something that is not its \
                         document (no such `name`, or no `versions`)"
                    ),
                }),
            };
        }
        match class(&r) {
            Class::Absent => Ok(None),
            Class::NotTheServer if r.status == 404 => Err(RecoverOutcome::Error {
                reason: format!(
                    "reading {shown}: HTTP 404 without the registry's JSON error body \
                     (is `url` the registry?)"
                ),
            }),
            Class::Refused => Err(RecoverOutcome::Denied {
                reason: format!("the registry refused to show {shown} (HTTP {})", r.status),
            }),
            Class::NotTheServer => Err(RecoverOutcome::Error {
                reason: not_the_registrys(r.status, &format!("reading {shown}")),
            }),
            _ => Err(RecoverOutcome::Error {
                reason: format!("reading {shown}: HTTP {}", r.status),
            }),
        }
    }

    /// Whether a tarball holds `needle`, searched as it arrives. Only from
    /// the registry's own origin: a document may name any URL (`Invalid`
    /// when it names another).
    pub(super) fn tarball_holds(&self, url: &str, needle: &str) -> Result<bool, Fault> {
        use crate::http::origin;
        if origin(url).is_none() || origin(url) != origin(&self.settings.url) {
            return Err(Fault::invalid(format!(
                "the tarball is on another origin ({}); it is not fetched with the registry's credentials",
                escape::bytes(url.as_bytes())
            )));
        }
        let mut needles = Needles::new(vec![needle.to_string()]);
        let req = self.settings.auth.apply(Request::new(Method::GET, url));
        let status = self
            .client()?
            .search(&req, &mut needles)
            .map_err(|f| Fault::from(f).context("downloading the tarball"))?;
        if status != 200 {
            return Err(Fault::broken(format!(
                "downloading the tarball: HTTP {status}"
            )));
        }
        Ok(needles.found(0))
    }

    /// Every package name `/-/v1/search` lists for `text`, each handed to
    /// `each` once; how many. The search pages by offset (`from`): one of
    /// more than one page is read again, whole, until two passes agree
    /// ([`crate::route::complete`]).
    pub(super) fn search_names(
        &self,
        text: &str,
        each: &mut dyn FnMut(&str),
    ) -> Result<usize, RecoverOutcome> {
        let done = crate::route::read_whole(
            |_, item| self.search_pass(text, &mut |name| item(name, name)),
            each,
        )?;
        done.map_err(|d| RecoverOutcome::Error {
            reason: d.why(&format!("the search for {text}")),
        })
    }

    /// One whole pass of the search: pages until an empty page, `from`
    /// moving by what each page held: registries cap `size` differently,
    /// and Verdaccio's `total` counts one page only. A page of names all
    /// seen (a registry ignoring `from`), an answer without `objects` or a
    /// name, or fewer names than a `total` claimed is no full look.
    fn search_pass(
        &self,
        text: &str,
        each: &mut dyn FnMut(&str),
    ) -> Result<crate::route::Ended, RecoverOutcome> {
        let failed = |why: String| RecoverOutcome::Error {
            reason: format!("searching the registry for {text}: {why}"),
        };
        let mut names = std::collections::HashSet::new();
        let mut claimed = 0u64;
        let mut from = 0usize;
        for page in 0..MAX_PAGES {
            let url = format!(
                "{}-/v1/search?text={}&size={PAGE}&from={from}",
                self.settings.url,
                crate::wire::percent_encode(text)
            );
            let r = self
                .call(Method::GET, &url, None)
                .map_err(|f| RecoverOutcome::Error { reason: f.into() })?;
            if class(&r) == Class::Refused {
                return Err(RecoverOutcome::Denied {
                    reason: format!("the registry refused the search (HTTP {})", r.status),
                });
            }
            if r.status != 200 {
                return Err(failed(format!("HTTP {}", r.status)));
            }
            let v = r.json().map_err(|f| failed(f.into_reason()))?;
            let Some(objects) = v["objects"].as_array() else {
                return Err(failed("the answer has no `objects`".into()));
            };
            if objects.is_empty() {
                let n = names.len();
                if (n as u64) < claimed {
                    return Err(failed(format!(
                        "it claimed {claimed} packages but listed {n}"
                    )));
                }
                // The empty page ends it: more than one page before it
                // is a listing paged by offset.
                return Ok(crate::route::Ended {
                    paging: if page <= 1 {
                        crate::route::Paging::Whole
                    } else {
                        crate::route::Paging::Numbered
                    },
                    counted: None,
                });
            }
            let mut new = 0;
            for o in objects {
                let Some(name) = o["package"]["name"].as_str() else {
                    return Err(failed("a result without `package.name`".into()));
                };
                if names.insert(name.to_string()) {
                    new += 1;
                    each(name);
                }
            }
            if new == 0 {
                return Err(failed(format!(
                    "the page from {from} lists only packages already listed: it does not page"
                )));
            }
            from += objects.len();
            claimed = claimed.max(v["total"].as_u64().unwrap_or(0));
        }
        Err(failed(format!("it did not end after {MAX_PAGES} pages")))
    }

    /// package-name by search: one outcome per wanted carrier, in order,
    /// and the names in this probe's form the search listed.
    pub(super) fn search(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[&Want<Npm, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> (Vec<RecoverOutcome>, std::collections::HashSet<String>) {
        let text = format!("runwarden-{}", ctx.probe_id);
        let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
        let mut ours = std::collections::HashSet::new();
        let needles: Vec<String> = wanted.iter().map(|w| w.needle.hex()).collect();
        let result = self.search_names(&text, &mut |name| {
            if name.starts_with(&format!("{text}-")) {
                ours.insert(name.to_string());
            }
            for (j, n) in needles.iter().enumerate() {
                if hits[j].is_none() && name.contains(n.as_str()) {
                    hits[j] = Some(format!(
                        "the search for {text} lists {}",
                        escape::bytes(name.as_bytes())
                    ));
                }
            }
            if name.starts_with(&format!("{text}-"))
                && Npm::tagged(ctx, name, "").is_none()
                && !crate::surface::witness::is_witness(ctx, super::plant::DOCUMENT, name, "")
            {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name.as_bytes()),
                    detail: "a package name in this probe's form that no plant with this key made"
                        .into(),
                    beacon: None,
                });
            }
        });
        let outcomes = hits
            .into_iter()
            .map(|hit| match (&result, hit) {
                (_, Some(detail)) => RecoverOutcome::Found { detail },
                (Ok(n), None) => RecoverOutcome::NotFound {
                    detail: format!("the search for {text} lists {n} packages; none carries it"),
                },
                (Err(e), None) => e.clone(),
            })
            .collect();
        (outcomes, ours)
    }

    /// A package whose document reads as missing: gone when the search,
    /// asked for its name, does not list it either; listed there (the
    /// document route is stale) or not asked, it is not confirmed gone
    /// and is left in the account, by name.
    pub(super) fn gone_or_unconfirmed(&self, name: &str) -> CleanupOutcome {
        let mut listed = false;
        match self.search_names(name, &mut |n| listed |= n == name) {
            Ok(_) if !listed => CleanupOutcome::Gone,
            Ok(_) => CleanupOutcome::Left {
                reason: "not confirmed gone: its document reads as missing, but the search still lists it (a stale copy in front of the registry?); nothing unpublished".into(),
            },
            Err(o) => {
                let why = match o {
                    RecoverOutcome::Denied { reason } | RecoverOutcome::Error { reason } => reason,
                    RecoverOutcome::Found { detail } | RecoverOutcome::NotFound { detail } => detail,
                };
                CleanupOutcome::Left {
                    reason: format!(
                        "not confirmed gone: its document reads as missing, and the search that would confirm it failed ({why}); nothing unpublished"
                    ),
                }
            }
        }
    }

    /// What one agreed package's document says of one carrier.
    pub(super) fn read_carrier(
        &self,
        carrier: Npm,
        doc: &Value,
        shown: &str,
        version: &str,
        needle: &str,
    ) -> RecoverOutcome {
        let has = |v: &Value| v.as_str().is_some_and(|s| s.contains(needle));
        let missing = |what: &str| RecoverOutcome::Error {
            reason: format!(
                "the document of {shown} has no {what}, which this carrier is read from"
            ),
        };
        let versions = doc["versions"].as_object();
        match carrier {
            Npm::Version => match versions.and_then(|m| m.keys().find(|k| k.contains(needle))) {
                Some(v) => RecoverOutcome::Found {
                    detail: format!("{shown} has version {}", escape::bytes(v.as_bytes())),
                },
                None => RecoverOutcome::NotFound {
                    detail: format!("no version of {shown} carries it"),
                },
            },
            Npm::Readme => {
                let readmes: Vec<&Value> = std::iter::once(&doc["readme"])
                    .chain(
                        versions
                            .into_iter()
                            .flat_map(|m| m.values().map(|v| &v["readme"])),
                    )
                    .filter(|r| r.is_string())
                    .collect();
                if readmes.iter().any(|r| has(r)) {
                    RecoverOutcome::Found {
                        detail: format!("the readme of {shown} holds it"),
                    }
                } else if readmes.is_empty() {
                    missing("readme")
                } else {
                    RecoverOutcome::NotFound {
                        detail: format!("the readme of {shown} does not hold it"),
                    }
                }
            }
            Npm::DistTag => match doc["dist-tags"].as_object() {
                None => missing("`dist-tags`"),
                Some(m) => match m.keys().find(|k| k.contains(needle)) {
                    Some(t) => RecoverOutcome::Found {
                        detail: format!("{shown} has the dist-tag {}", escape::bytes(t.as_bytes())),
                    },
                    None => RecoverOutcome::NotFound {
                        detail: format!("no dist-tag of {shown} carries it"),
                    },
                },
            },
            // The plant's own version without a tarball: not the plant.
            _ => match doc["versions"][version]["dist"]["tarball"].as_str() {
                None => missing(&format!("tarball for {version}")),
                Some(t) => match self.tarball_holds(t, needle) {
                    Err(f) => RecoverOutcome::Error { reason: f.into() },
                    Ok(true) => RecoverOutcome::Found {
                        detail: format!("the tarball of {shown}@{version} holds it"),
                    },
                    Ok(false) => RecoverOutcome::NotFound {
                        detail: format!("the tarball of {shown}@{version} does not hold it"),
                    },
                },
            },
        }
    }
}
