//! Run A's writes: one journalled write (PUT, MKCOL), the PROPPATCH that
//! sets the property carrier's dead property (and the property's own
//! status in the cache's 207), and the name of the listing's witness made
//! before the plants.

use super::protocol::{class, propstat_status, write_outcome};
use super::{Entry, HttpCache, PROP_NS};
use crate::http::answer::Class;
use crate::nonce::Nonce;
use crate::surface::witness::{self, Side};
use crate::surface::{Journal, PlantOutcome, RunCtx};

/// The listing's witness made before the plants: a file both runs name.
/// (The one after them is the property carrier's resource, made last.)
pub(super) fn before_witness(ctx: &RunCtx<'_>) -> String {
    witness::name(ctx, "listing", Side::Before, "")
}

impl HttpCache {
    /// One write (`method` on `url`): journalled first, taken back when the
    /// cache answers with anything but success (then nothing was made).
    pub(super) fn write(
        &self,
        journal: &mut Journal<'_, Entry>,
        entry: Entry,
        method: &str,
        url: &str,
        headers: &[(&'static str, &str)],
        body: Vec<u8>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        journal.record(&entry);
        let r = self
            .call(method, url, headers, body)
            .map_err(|f| PlantOutcome::Error { reason: f.into() })?;
        // A 4xx says nothing was made; a 5xx may come after the write was
        // done (a gateway's), so the entry stays journalled.
        write_outcome(r.status, method, &self.shown()).inspect_err(|_| {
            if (400..500).contains(&r.status) {
                journal.retract(&entry);
            }
        })
    }

    /// The PROPPATCH that sets the property carrier's dead property on the
    /// resource at `url` to `hex`.
    pub(super) fn set_property(&self, url: &str, hex: &str) -> Result<(), PlantOutcome<Nonce>> {
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
