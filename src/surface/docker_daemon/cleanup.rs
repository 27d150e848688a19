//! Cleanup: each journalled object read back by name, checked to carry
//! the `runwarden.plant` label naming it, and removed by the id the daemon
//! showed (an image tag by tag, so a tag someone else put on the image
//! stays, and the image with it). Never forced: a container someone
//! started, a volume or image in use stays, listed.

use super::api::{Body, Failure, q};
use super::list::{self, Item};
use super::names::{Entry, Kind};
use super::{DockerDaemon, PLANT_LABEL};
use crate::surface::CleanupOutcome;

impl DockerDaemon {
    /// A volume, container or network: read back, checked, removed by id.
    pub(super) fn remove(&self, e: &Entry) -> CleanupOutcome {
        let item = match list::inspect(&self.api, e.kind, &e.name) {
            Err(f) => return left(&f),
            Ok(None) => return CleanupOutcome::Gone,
            Ok(Some(i)) => i,
        };
        if !ours(&item, e) || e.id.as_ref().is_some_and(|id| *id != item.id) {
            return not_ours(e);
        }
        let path = match e.kind {
            // (A volume's name is its id.)
            Kind::Volume => format!("/volumes/{}", q(&e.name)),
            Kind::Container => format!("/containers/{}", q(&item.id)),
            Kind::Network => format!("/networks/{}", q(&item.id)),
            Kind::Image => unreachable!("images are untagged"),
        };
        if item.id.is_empty() {
            return CleanupOutcome::Left {
                reason: format!("the daemon showed no id for {}", e.shown()),
            };
        }
        self.delete(&path, e)
    }

    /// An image: each of this plant's tags, read back and checked, then
    /// removed (the last one removes the image, unless a tag of someone
    /// else's holds it).
    pub(super) fn untag(&self, e: &Entry) -> CleanupOutcome {
        let mut removed = false;
        for r in e.references() {
            let item = match list::inspect(&self.api, Kind::Image, &r) {
                Err(f) => return left(&f),
                Ok(None) => continue,
                Ok(Some(i)) => i,
            };
            if !ours(&item, e) || e.id.as_ref().is_some_and(|id| *id != item.id) {
                return not_ours(e);
            }
            match self.delete(&format!("/images/{}", q(&r)), e) {
                CleanupOutcome::Removed => removed = true,
                CleanupOutcome::Gone => {}
                other => return other,
            }
        }
        if removed {
            CleanupOutcome::Removed
        } else {
            CleanupOutcome::Gone
        }
    }

    fn delete(&self, path: &str, e: &Entry) -> CleanupOutcome {
        match self.api.call("DELETE", path, Body::None) {
            Err(f) => left(&f),
            Ok(r) if r.ok() => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) => CleanupOutcome::Left {
                reason: format!("the daemon did not remove {}: {}", e.shown(), r.message()),
            },
        }
    }
}

/// Whether the object the daemon showed is the one the plant made: it
/// carries the plant's label naming it.
pub(super) fn ours(item: &Item, e: &Entry) -> bool {
    item.labels.get(PLANT_LABEL).map(String::as_str) == Some(e.name.as_str())
}

fn not_ours(e: &Entry) -> CleanupOutcome {
    CleanupOutcome::Left {
        reason: format!(
            "{} is not the object the plant made (another id, or not this plant's label): it was replaced, and is left alone",
            e.shown()
        ),
    }
}

fn left(f: &Failure) -> CleanupOutcome {
    CleanupOutcome::Left {
        reason: f.clone().fault().to_string(),
    }
}
