//! Run A: a PUT, a GET miss, a MKCOL and a PROPPATCH, each journalled
//! before its request and taken back only when the cache refused it.

use super::protocol::{class, propstat_status, write_outcome};
use super::{Entry, Http, HttpCache, PROP_NS, innocuous, plant_name};
use crate::escape;
use crate::http::answer::Class;
use crate::nonce::Nonce;
use crate::surface::{Job, Journal, PlantOutcome, RunCtx};

impl HttpCache {
    pub(super) fn plant_one(
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
        // Journalled first; taken back when the cache answers the write
        // with anything but success (then nothing was created).
        let write = |journal: &mut Journal<'_, Entry>,
                     entry: Entry,
                     method: &str,
                     url: &str,
                     headers: &[(&'static str, &str)],
                     body: Vec<u8>|
         -> Result<(), PlantOutcome<Nonce>> {
            journal.record(&entry);
            let r = self
                .call(method, url, headers, body)
                .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
            // A 4xx says nothing was made; a 5xx may come after the
            // write was done (a gateway's), so the entry stays journalled.
            write_outcome(r.status, method, &self.shown()).inspect_err(|_| {
                if (400..500).contains(&r.status) {
                    journal.retract(&entry);
                }
            })
        };
        let put = |journal: &mut Journal<'_, Entry>| {
            let entry = Entry::file(&name, &body);
            let headers = [("content-type", "application/octet-stream")];
            write(journal, entry, "PUT", &url, &headers, body.clone())
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
                match write(journal, entry, "MKCOL", &format!("{url}/"), &[], vec![]) {
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

    /// The PROPPATCH that sets the property carrier's dead property on the
    /// resource at `url` to `hex`.
    fn set_property(&self, url: &str, hex: &str) -> Result<(), PlantOutcome<Nonce>> {
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:propertyupdate xmlns:D=\"DAV:\" xmlns:R=\"{PROP_NS}\"><D:set><D:prop><R:note>{hex}</R:note></D:prop></D:set></D:propertyupdate>"
        );
        let r = self
            .call(
                "PROPPATCH",
                url,
                &[("content-type", "application/xml")],
                xml.into_bytes(),
            )
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        write_outcome(r.status, "PROPPATCH", &self.shown())?;
        if r.status != 207 {
            return Ok(());
        }
        // A 207 holds the property's own status: set (2xx), refused
        // (401/403: the cache's access control), or failed for another
        // reason.
        match propstat_status(&r.body) {
            Some(200..=299) => Ok(()),
            Some(code) if class(code) == Class::Refused => Err(PlantOutcome::Refused {
                reason: format!("the cache refused to set the property (HTTP {code} in its 207)"),
            }),
            Some(code) => Err(PlantOutcome::Error {
                reason: format!("the cache did not set the property (HTTP {code} in its 207)"),
            }),
            None => Err(PlantOutcome::Error {
                reason: "the cache's 207 to the PROPPATCH holds no status".into(),
            }),
        }
    }
}
