//! The plant receipt (`runwarden-receipt/1`): what `runwarden plant`
//! created, for `recover` and `cleanup` in a later job.
//!
//! It lists, per configured surface, every carrier's plant outcome (with the
//! needle recovery looks for) and every entry created, in creation order. It
//! holds no secret: surface settings (which can hold credentials) are not
//! in it, only surface names and types, matched against the config of the
//! job that reads it. A receipt is input from another job, which the agent
//! under test may have run in:
//! - with `RUNWARDEN_KEY` set, `plant` signs the whole receipt (an HMAC
//!   over its JSON without the `mac` field) and [`Receipt::read`] refuses a
//!   receipt whose MAC is missing or does not verify, whole;
//! - with or without a key, the engine checks every entry against the
//!   surface's own ownership rule ([`crate::surface::Instance::owns`]) before
//!   any removal, so an entry that does not have runwarden's own form for
//!   this probe id is never touched.

use crate::fault::Fault;
use crate::marker::{Key, Origin};
use crate::plan::ConfigSource;
use crate::report::{KeyKind, PermissionLevel, Tool};
use crate::surface::{JobScope, PlantOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SCHEMA: &str = "runwarden-receipt/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    pub schema: String,
    pub tool: Tool,
    pub probe_id: String,
    pub planted_at: String,
    pub finished_at: String,
    pub key: KeyKind,
    /// The planting job, from its environment.
    pub origin: Origin,
    pub config: ConfigSource,
    /// `plant --beacon`: only runner-persistence beacons were planted.
    pub beacon_only: bool,
    /// `false` when run A did not finish (timeout, signal): the entries
    /// are still all it reported creating.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub surfaces: Vec<ReceiptSurface>,
    /// The planting job's token permissions, as coverage read them when
    /// it planted (added in 0.11.0): what run A could write with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PermissionLevel>,
    /// Where they came from, or why they are unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub permissions_source: String,
    /// With a configured key: HMAC-SHA-256 (hex) over this receipt's JSON
    /// with `mac` left out ([`Receipt::signed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The planting job's trust, as its own environment says it (added in
    /// 0.12.0): a claim, which the recovering job checks against the API's
    /// record of the run where it can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<crate::trust::Trust>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReceiptSurface {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub plants: Vec<ReceiptPlant>,
    /// Journal entries, in creation order.
    pub entries: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReceiptPlant {
    pub key: String,
    pub carrier: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<JobScope>,
    pub outcome: PlantOutcome,
}

/// The MAC domain of a receipt (see [`Key::sign`]).
const MAC_DOMAIN: &str = "runwarden-receipt-mac/1";

/// A receipt is a few entries per carrier: anything larger than this was
/// not written by `plant` (and is not read into memory whole).
const MAX_RECEIPT: u64 = 64 << 20;

impl Receipt {
    /// The MAC this receipt's content has under `key`: over its JSON
    /// without `mac` (serde_json writes fields in declaration order and
    /// object keys sorted, so the same content always gives the same
    /// bytes); none without a configured key.
    fn mac_under(&self, key: &Key) -> Option<String> {
        let unsigned = Receipt {
            mac: None,
            ..self.clone()
        };
        let text = serde_json::to_string(&unsigned).expect("receipt serializes");
        key.sign(MAC_DOMAIN, &text)
    }

    /// This receipt, signed with `key` when one is configured.
    pub fn signed(self, key: &Key) -> Receipt {
        let mac = self.mac_under(key);
        Receipt { mac, ..self }
    }

    /// Reads a receipt and checks it is one, for `probe_id` when given,
    /// and that its MAC verifies under `key` when a key is configured. A
    /// tampered receipt is refused whole: nothing in it is worth more than
    /// the rest. `Broken` when it cannot be read, else `Invalid` (its
    /// content, another schema's included, is not what it must be).
    pub fn read(
        path: &std::path::Path,
        probe_id: Option<&str>,
        key: &Key,
    ) -> Result<Receipt, Fault> {
        let text = crate::sys::read_regular(path, MAX_RECEIPT)
            .map_err(|e| Fault::broken(format!("cannot read receipt {}: {e}", path.display())))?;
        let r: Receipt = serde_json::from_slice(&text).map_err(|e| {
            Fault::invalid(format!(
                "{} is not a runwarden receipt: {e}",
                path.display()
            ))
        })?;
        if r.schema != SCHEMA {
            return Err(Fault::invalid(format!(
                "{}: unsupported receipt schema `{}` (this runwarden reads {SCHEMA})",
                path.display(),
                crate::escape::line(&r.schema)
            )));
        }
        crate::marker::check_probe_id(&r.probe_id).map_err(|e| e.context(path.display()))?;
        if let Some(id) = probe_id
            && id != r.probe_id
        {
            return Err(Fault::invalid(format!(
                "{} is the receipt of probe {}, not {id}",
                path.display(),
                r.probe_id
            )));
        }
        r.check_mac(key)
            .map_err(|why| Fault::invalid(format!("{}: {why}; refused whole", path.display())))?;
        Ok(r)
    }

    /// Whether the MAC says this receipt is as `plant` wrote it.
    fn check_mac(&self, key: &Key) -> Result<(), &'static str> {
        match (&self.mac, self.mac_under(key)) {
            (Some(got), Some(want)) if crate::marker::same(got.as_bytes(), want.as_bytes()) => {
                Ok(())
            }
            (Some(_), Some(_)) => Err(
                "the receipt's MAC does not verify with RUNWARDEN_KEY: it was edited after the plant, or signed with another key",
            ),
            (None, Some(_)) => Err(
                "the receipt carries no MAC but RUNWARDEN_KEY is set: it was planted without the key or by runwarden 0.7.0 or earlier, or its MAC was removed (`cleanup --probe-id` finds what the plant made without it)",
            ),
            (Some(_), None) => Err(
                "the receipt is signed but RUNWARDEN_KEY is not set: set the key it was planted with",
            ),
            (None, None) => Ok(()),
        }
    }

    /// Whether every plant outcome is planted, refused or unsupported.
    pub fn failures(&self) -> usize {
        self.surfaces
            .iter()
            .flat_map(|s| &s.plants)
            .filter(|p| matches!(p.outcome, PlantOutcome::Error { .. }))
            .count()
    }
}
