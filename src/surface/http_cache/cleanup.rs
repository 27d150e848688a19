//! Cleanup: finding a probe's plants in the listing, and deleting each
//! after checking a file's content and that a collection is empty.

use super::protocol::{ListError, last_segment};
use super::{Entry, Http, HttpCache, Kind, innocuous, sha256_hex};
use crate::fault::Fault;
use crate::scan::Marked;
use crate::surface::carrier::CarrierSet;
use crate::surface::{CleanupOutcome, Job, RunCtx};

impl HttpCache {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Http>],
    ) -> Result<Vec<Entry>, Fault> {
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
                if let Some(c) = Http::tagged(ctx, seg, "")
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
        Ok(found)
    }
}

impl HttpCache {
    pub(super) fn clean_entry(&self, entry: &Entry) -> CleanupOutcome {
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
}
