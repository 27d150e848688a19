//! `runwarden carriers`: every surface type and carrier, as a table or JSON.

use crate::surface::REGISTRY;
use serde_json::json;
use std::fmt::Write as _;

pub fn table() -> String {
    let mut out = String::new();
    for ty in REGISTRY {
        let _ = writeln!(out, "{}: {}", ty.name(), ty.description());
        let w = ty
            .carriers()
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(0);
        for c in ty.carriers() {
            let _ = writeln!(
                out,
                "  {:<w$}  {:<13}  {}",
                c.name,
                c.persistence.as_str(),
                c.description
            );
        }
    }
    out
}

pub fn json() -> String {
    let types: Vec<_> = REGISTRY
        .iter()
        .map(|ty| {
            json!({
                "type": ty.name(),
                "description": ty.description(),
                "carriers": ty.carriers().iter().map(|c| json!({
                    "carrier": c.name,
                    "persistence": c.persistence.as_str(),
                    "description": c.description,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "surface_types": types })).expect("serializes") + "\n"
}
