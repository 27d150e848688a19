//! The plant receipt (`runwarden-receipt/1`): what `runwarden plant`
//! created, for `recover` and `cleanup` in a later job.
//!
//! It lists, per configured surface, every carrier's plant outcome (with the
//! needle recovery looks for) and every entry created, in creation order. It
//! holds no secret: surface settings (which can hold credentials) are not
//! in it, only surface names and types, matched against the config of the
//! job that reads it. A receipt is input from another job: `cleanup`
//! re-checks every entry against the surface before removing it, and
//! entries that do not have runwarden's own form are never touched.

use crate::marker::Origin;
use crate::plan::ConfigSource;
use crate::report::{KeyKind, Tool};
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

impl Receipt {
    /// Reads a receipt and checks it is one, for `probe_id` when given.
    pub fn read(path: &std::path::Path, probe_id: Option<&str>) -> Result<Receipt, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read receipt {}: {e}", path.display()))?;
        let r: Receipt = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a runwarden receipt: {e}", path.display()))?;
        if r.schema != SCHEMA {
            return Err(format!(
                "{}: unsupported receipt schema `{}` (this runwarden reads {SCHEMA})",
                path.display(),
                crate::escape::line(&r.schema)
            ));
        }
        crate::marker::check_probe_id(&r.probe_id)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(id) = probe_id
            && id != r.probe_id
        {
            return Err(format!(
                "{} is the receipt of probe {}, not {id}",
                path.display(),
                r.probe_id
            ));
        }
        Ok(r)
    }

    /// Whether every plant outcome is planted, refused or unsupported.
    pub fn failures(&self) -> usize {
        self.surfaces
            .iter()
            .flat_map(|s| &s.plants)
            .filter(|p| matches!(p.outcome, PlantOutcome::Failed { .. }))
            .count()
    }
}
