//! Run A's PROPPATCH: the property carrier's dead property set on its
//! resource, and the property's own status in the cache's 207.

use super::protocol::{class, propstat_status, write_outcome};
use super::{HttpCache, PROP_NS};
use crate::http::answer::Class;
use crate::nonce::Nonce;
use crate::surface::PlantOutcome;

impl HttpCache {
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
