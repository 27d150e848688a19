//! The daemon's event history (`GET /events?since=0`): every object's
//! create, tag and destroy, with its name and labels, kept after the
//! object is gone (dockerd keeps its last 256 events until it restarts).
//! So it carries what cleanup removed: `event-history` plants a volume and
//! removes it at once, and every other carrier's names and labels are in
//! it too.
//!
//! The history does not end on its own (it goes on with new events), so
//! run B reads it up to the witness: the create of the agreed volume the
//! `event-history` plant makes after its nonce-named one, and after every
//! other carrier's plant (it is planted last). A history that does not
//! show the witness within [`WITHIN`] no longer reaches back to the plant
//! (or lags): ERROR, never PASS.

use super::api::{Api, Body, Failure};
use crate::fault::Fault;
use serde_json::Value;
use std::time::Duration;

/// How long the history is read for its witness.
const WITHIN: Duration = Duration::from_secs(10);

/// What the history showed.
pub(super) struct History {
    /// For each needle, whether an event carries it.
    pub found: Vec<bool>,
    /// Whether the witness's create was read.
    pub witnessed: bool,
    /// How many events were read.
    pub read: usize,
}

/// Reads the history from its start up to the create of volume `witness`,
/// searching every event for every needle.
pub(super) fn read(api: &Api, needles: &[&str], witness: &str) -> Result<History, Failure> {
    let s = api.stream_for("GET", "/events?since=0", Body::None, WITHIN)?;
    match s.status {
        200 => {}
        401 | 403 => {
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
        if e["Type"] == "volume" && e["Action"] == "create" && e["Actor"]["ID"] == witness {
            h.witnessed = true;
            break;
        }
    }
    Ok(h)
}
