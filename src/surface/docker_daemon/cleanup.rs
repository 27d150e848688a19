//! Cleanup: each journalled object read back by name, checked to carry
//! the `runwarden.plant` label naming it, and removed by the id the daemon
//! showed (an image tag by tag, so a tag someone else put on the image
//! stays, and the image with it). Never forced: a container someone
//! started, a volume or image in use stays, listed.

use super::api::{Body, Failure, q};
use super::list::{self, Item};
use super::names::{self, Entry, Kind};
use super::{BEACON_LABEL, Dk, DockerDaemon, PLANT_LABEL};
use crate::fault::Fault;
use crate::marker::Checked;
use crate::surface::{CleanupOutcome, Job, RunCtx};

impl DockerDaemon {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Dk>],
    ) -> Result<Vec<Entry>, Fault> {
        let mut found = vec![];
        for j in jobs {
            let carrier = j.carrier;
            let mut objects = names::objects(ctx, carrier, &j.nonce);
            if carrier == Dk::EventHistory {
                // (Removed when planted; a plant killed halfway may have
                // left either kind.)
                objects.extend(names::objects_of(ctx, carrier, &j.nonce, Kind::Network));
            }
            for (e, _) in objects {
                let look = match e.kind {
                    Kind::Image => e.references(),
                    _ => vec![e.name.clone()],
                };
                for r in look {
                    let item = list::inspect(&self.api, e.kind, &r).map_err(Failure::fault)?;
                    // A beacon's volume is named for the probe alone (no
                    // tag): only a valid beacon of this probe in its label
                    // shows it is the plant's, as on a filesystem.
                    let proven = |i: &Item| {
                        carrier != Dk::RunnerPersistence
                            || i.labels.get(BEACON_LABEL).is_some_and(|b| {
                                matches!(ctx.key.check_beacon(b.as_bytes()),
                                    Checked::Valid(body) if body.probe_id == ctx.probe_id)
                            })
                    };
                    if let Some(i) = item.filter(|i| ours(i, &e) && proven(i)) {
                        let id = (e.kind != Kind::Volume && !i.id.is_empty()).then_some(i.id);
                        found.push(Entry { id, ..e });
                        break;
                    }
                }
            }
        }
        // Newest first, as cleanup takes a journal: a container before its
        // image and volume.
        found.reverse();
        Ok(found)
    }

    /// The journal, with each object's first entry (journalled before
    /// its create) superseded by the one with the id the daemon gave it.
    /// (Retractions and what they took back are set aside by the kernel.)
    pub(super) fn clean_all(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        let recorded: Vec<(Kind, &str)> = entries
            .iter()
            .filter(|e| e.id.is_some())
            .map(|e| (e.kind, e.name.as_str()))
            .collect();
        entries
            .iter()
            .map(|e| match e.kind {
                _ if e.id.is_none() && recorded.contains(&(e.kind, e.name.as_str())) => {
                    CleanupOutcome::Superseded
                }
                Kind::Image => self.untag(e),
                _ => self.remove(e),
            })
            .collect()
    }

    /// A volume, container or network: read back, checked, removed by id.
    fn remove(&self, e: &Entry) -> CleanupOutcome {
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
    fn untag(&self, e: &Entry) -> CleanupOutcome {
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
fn ours(item: &Item, e: &Entry) -> bool {
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
