//! `runwarden carriers`: every surface type and carrier, as a table or JSON.

use crate::surface::REGISTRY;
use serde_json::json;

/// The catalogue fitted to `width` columns (a terminal's, or
/// [`crate::wrap::PROSE`] piped): a description too long hangs under
/// itself. It is documentation, not rows a program reads (that is
/// `--format json`).
pub fn table(width: usize) -> String {
    let mut out = String::new();
    let mut emit = |line: String, head: usize| {
        for l in crate::wrap::line(&line, width, head, head.max(2)) {
            out.push_str(&l);
            out.push('\n');
        }
    };
    for ty in REGISTRY {
        emit(format!("{}: {}", ty.name(), ty.description()), 0);
        let w = ty
            .carriers()
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(0);
        for c in ty.carriers() {
            let head = format!("  {:<w$}  {:<13}  ", c.name, c.persistence.as_str());
            let len = head.len();
            emit(head + c.description, len);
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
