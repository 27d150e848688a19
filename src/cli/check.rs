//! `runwarden check-config`: validates a config without probing, and says
//! what will not work here (a path that exists only on the runner, a
//! credential's variable unset, a declaration of a carrier the settings
//! rule out).

use super::{Failure, Found, find_config, load_plan, note};

/// Checks the config `file` names (else the one `probe` would find).
pub(super) fn check_config(file: Option<&std::path::Path>) -> Result<i32, Failure> {
    let found = find_config(file);
    let plan = load_plan(&found, false)?;
    let carriers: usize = plan
        .surfaces
        .iter()
        .filter_map(|s| crate::surface::by_name(s.type_name))
        .map(|t| t.carriers().len())
        .sum();
    let what = match &found {
        Found::File(p) | Found::FromEnv(p) => p.display().to_string(),
        Found::Embedded => "no config file found; the discovered config".into(),
    };
    for s in &plan.surfaces {
        if let Some(t) = crate::surface::by_name(s.type_name) {
            for w in t.warnings(&s.settings) {
                note(&format!("warning: surface {}: {w}", s.name));
            }
            // A declaration of a carrier these settings rule out
            // (a protocol without it) declares nothing that runs.
            let Ok(inst) = t.open(&s.settings) else {
                continue;
            };
            // (Every carrier ruled out is the instance's own rule, a
            // credential unset here: the warning above says it.)
            let out: Vec<_> = t
                .carriers()
                .iter()
                .map(|c| (c.name, inst.unavailable(c.name)))
                .collect();
            if out.iter().all(|(_, why)| why.is_some()) {
                continue;
            }
            for (c, why) in out {
                let id = format!("{}:{c}", s.name);
                if let (true, Some(why)) = (plan.declared.contains_key(&id), why) {
                    note(&format!(
                        "warning: declared {id} is never planted here ({why}): it is SKIPPED"
                    ));
                }
            }
        }
    }
    let n = |count: usize, one: &str, many: &str| {
        format!("{count} {}", if count == 1 { one } else { many })
    };
    let exposures = match plan.declared_exposures.len() {
        0 => String::new(),
        e => format!(", {} declared untested", n(e, "exposure", "exposures")),
    };
    note(&format!(
        "{what} is valid: {}, {}, {} declared open{exposures}",
        n(plan.surfaces.len(), "surface", "surfaces"),
        n(carriers, "channel", "channels"),
        plan.declared.len()
    ));
    Ok(0)
}
