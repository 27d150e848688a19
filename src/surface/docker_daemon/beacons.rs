//! `runner-persistence` on the daemon: the plant is a volume named for the
//! probe (`runwarden-beacon-<probe id>`) whose label `runwarden.beacon`
//! holds the probe's signed beacon ([`crate::marker`]); recovery reads
//! every volume's beacon label as the volumes listing arrives and counts a
//! valid beacon of **another** probe: the daemon kept state from an
//! earlier job, possibly of another repository. Forged, altered and
//! malformed beacons are notices, never counted: anyone who may create a
//! volume can make one. The listing's silence counts when it shows this
//! probe's own beacon, or another witness of this probe's.

use super::api::Failure;
use super::recover::Listed;
use crate::escape;
use crate::surface::{Notice, RecoverOutcome, RunCtx};

/// The most beacon labels one listing keeps (each at most
/// [`crate::marker::BEACON_MAX`] bytes).
pub(super) const MAX: usize = 1_000;

/// runner-persistence's outcome from the volumes listing, every beacon
/// that is not this probe's told through `notice`.
pub(super) fn outcome(
    ctx: &RunCtx<'_>,
    listed: &Listed,
    notice: &mut dyn FnMut(Notice),
) -> RecoverOutcome {
    let c = match listed {
        Err(Failure::Denied(reason)) => {
            return RecoverOutcome::Denied {
                reason: reason.clone(),
            };
        }
        Err(Failure::Fault(f)) => {
            return RecoverOutcome::Error {
                reason: f.to_string(),
            };
        }
        Ok(c) => c,
    };
    let mut found = None;
    for (name, label) in &c.value.beacons {
        let entry = format!("volume {}", escape::bytes(name.as_bytes()));
        let (hit, note) = crate::surface::beacon::read(ctx, entry, label.as_bytes());
        if found.is_none() {
            found = hit;
        }
        if let Some(n) = note {
            notice(n);
        }
    }
    if let Some(detail) = found {
        return RecoverOutcome::Found { detail };
    }
    // Beacons not read are beacons not ruled out.
    if c.value.beacons_beyond > 0 {
        return RecoverOutcome::Error {
            reason: format!(
                "the volumes listing holds more than {MAX} beacon labels; {} more were not read, so no valid one among those read proves nothing",
                c.value.beacons_beyond
            ),
        };
    }
    // Shown current by a witness of this probe's: its own beacon, or a
    // name carrier's agreed volume.
    match c.value.witnessed.iter().find(|(_, seen)| *seen) {
        Some((w, _)) if c.current => RecoverOutcome::NotFound {
            detail: format!(
                "no valid beacon of another probe among the {} volumes listed (the listing shows {})",
                c.value.count,
                escape::bytes(w.as_bytes())
            ),
        },
        _ => RecoverOutcome::Error {
            reason: "the volumes listing shows nothing of this probe's (its beacon, a witness), so nothing shows it is current: no beacon in it proves nothing".into(),
        },
    }
}
