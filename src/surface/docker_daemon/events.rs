//! The daemon's event history (`GET /events?since=0`): every object's
//! create, tag and destroy, with its name (and a container's or image's
//! labels), kept after the object is gone (dockerd keeps its last 256
//! events until it restarts). So it carries what cleanup removed:
//! `event-history` makes an object and removes it at once, and every
//! other carrier's names and labels are in it too.
//!
//! The history does not end on its own (it goes on with new events), so
//! run B reads it up to the witness's removal: `event-history` makes the
//! nonce-named object, then the agreed one (the witness), then removes
//! the nonce's, then the witness; it is planted after every other
//! carrier. The history counts only when it shows the witness's create
//! before that removal: the daemon drops its oldest events first, so
//! everything in between (the nonce's removal among them) is there. A
//! history that does not show both within [`WITHIN`] no longer reaches
//! back to the plant, or lags: ERROR, never PASS.

use super::api::{Api, Body, Failure};
use crate::fault::Fault;
use crate::http::answer::Class;
use serde_json::Value;
use std::time::Duration;

/// How long the history is read for its witness.
const WITHIN: Duration = Duration::from_secs(10);

/// What the history showed.
pub(super) struct History {
    /// For each needle, whether an event carries it.
    pub found: Vec<bool>,
    /// Whether the witness's create and then its removal were read.
    pub witnessed: bool,
    /// How many events were read.
    pub read: usize,
}

/// Whether event `e` is `action` of the object named one of `names` (a
/// volume's id is its name; a network's name is an attribute).
fn of(e: &Value, action: &str, names: &[String]) -> bool {
    matches!(e["Type"].as_str(), Some("volume" | "network"))
        && e["Action"] == action
        && names.iter().any(|n| {
            e["Actor"]["ID"] == n.as_str() || e["Actor"]["Attributes"]["name"] == n.as_str()
        })
}

/// Reads the history from its start up to the removal of the witness
/// (named one of `witness`: the volume's name, or the network's where
/// volumes were refused), searching every event for every needle.
pub(super) fn read(api: &Api, needles: &[&str], witness: &[String]) -> Result<History, Failure> {
    let s = api.stream_for("GET", "/events?since=0", Body::None, WITHIN)?;
    match s.status {
        200 => {}
        st if super::api::class(st) == Class::Refused => {
            return Err(Failure::Denied(format!(
                "the daemon refused its event history (HTTP {})",
                s.status
            )));
        }
        st => {
            return Err(Failure::Fault(Fault::broken(format!(
                "reading the event history: HTTP {st}"
            ))));
        }
    }
    let mut h = History {
        found: vec![false; needles.len()],
        witnessed: false,
        read: 0,
    };
    let mut created = false;
    let events =
        serde_json::Deserializer::from_reader(std::io::BufReader::new(s.body)).into_iter::<Value>();
    for e in events {
        let e = match e {
            Ok(e) => e,
            // The end of the wait (or of a history that stops): whether
            // it counts is the witness's to say.
            Err(e) if e.is_io() => break,
            Err(e) => {
                return Err(Failure::Fault(Fault::broken(format!(
                    "the event history is not JSON: {e}"
                ))));
            }
        };
        h.read += 1;
        let text = e.to_string();
        for (i, n) in needles.iter().enumerate() {
            h.found[i] |= text.contains(n);
        }
        created |= of(&e, "create", witness);
        if of(&e, "destroy", witness) {
            h.witnessed = created;
            break;
        }
    }
    Ok(h)
}
