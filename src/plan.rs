//! Validation: the raw config becomes a typed [`Plan`] before any work.
//!
//! Fail closed: a missing or unsupported `version`, an unknown key, a bad or
//! duplicate surface name, an unknown type, and a malformed or unknown
//! `declared` entry are all errors naming `file:line:column`.

use crate::config::{self, ConfigError, EnvLookup, Mapping, Options, Pos, Value};
use crate::surface;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where the config came from, as the report states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigSource {
    /// As the user gave or runwarden found it; `None` for the embedded
    /// default.
    pub path: Option<String>,
    pub embedded_default: bool,
}

impl ConfigSource {
    /// How errors name the file.
    pub fn display(&self) -> String {
        self.path
            .clone()
            .unwrap_or_else(|| "<embedded default>".into())
    }
}

/// A place in the config file, reported with each finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    pub path: String,
    pub line: u64,
    pub column: u64,
}

#[derive(Debug, Clone)]
pub struct SurfacePlan {
    pub name: String,
    pub type_name: &'static str,
    pub settings: serde_json::Value,
    /// The surface's entry in the config; `None` for the embedded default.
    pub location: Option<Location>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub source: ConfigSource,
    pub surfaces: Vec<SurfacePlan>,
    /// Declared channel ids (`surface:carrier`) with where they were declared.
    pub declared: BTreeMap<String, Pos>,
}

impl Plan {
    pub fn is_declared(&self, channel: &str) -> bool {
        self.declared.contains_key(channel)
    }
}

/// The config runwarden probes when it finds none: the system temp
/// directory, which every process on the host shares. `$` in the path is
/// written `$$` so that `${…}` expansion leaves it alone.
pub fn embedded_default(temp_dir: &std::path::Path) -> String {
    let path = temp_dir.to_string_lossy().replace('$', "$$");
    let quoted = serde_json::to_string(&path).expect("string serializes");
    format!(
        "version: 1\nsurfaces:\n  - name: system-temp\n    type: filesystem\n    path: {quoted}\n"
    )
}

fn is_valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// Parses and validates config text into a plan.
pub fn build(text: &str, source: ConfigSource, env: EnvLookup<'_>) -> Result<Plan, ConfigError> {
    let file = source.display();
    let err = |pos: Pos, message: String| ConfigError {
        file: file.clone(),
        pos,
        message,
    };
    let raw = config::parse(text, &file)?;

    match &raw.version {
        None => {
            return Err(err(
                Pos::START,
                "missing `version: 1` at the top level".into(),
            ));
        }
        Some(v) => match v.value {
            Value::Int(1) => {}
            Value::Int(n) => {
                return Err(err(
                    Pos::of(v),
                    format!("unsupported config version {n}; this runwarden reads version 1"),
                ));
            }
            ref other => {
                return Err(err(
                    Pos::of(v),
                    format!("`version` must be the number 1, not {}", other.kind()),
                ));
            }
        },
    }

    let Some(surfaces) = raw.surfaces else {
        return Err(err(
            Pos::START,
            "missing `surfaces:`: nothing to probe".into(),
        ));
    };
    if surfaces.value.is_empty() {
        return Err(err(
            Pos::of(&surfaces),
            "`surfaces` is empty: nothing to probe".into(),
        ));
    }

    let mut plans: Vec<SurfacePlan> = Vec::new();
    let mut seen: BTreeMap<String, Pos> = BTreeMap::new();
    for entry in surfaces.value {
        let entry_pos = Pos::of(&entry);
        let Mapping(mut keys) = entry.value;
        let mut take = |k: &str| {
            keys.iter()
                .position(|(key, _)| key.value == k)
                .map(|i| keys.remove(i))
        };
        let name = take("name");
        let ty = take("type");
        let Some((_, name)) = name else {
            return Err(err(entry_pos, "surface entry without `name:`".into()));
        };
        let name_pos = Pos::of(&name);
        let Value::Str(name) = name.value else {
            return Err(err(
                name_pos,
                format!("`name` must be a string, not {}", name.value.kind()),
            ));
        };
        if !is_valid_name(&name) {
            return Err(err(
                name_pos,
                format!(
                    "invalid surface name `{name}`: use 1-63 lowercase letters, digits and '-', not starting or ending with '-'"
                ),
            ));
        }
        if let Some(first) = seen.get(&name) {
            return Err(err(
                name_pos,
                format!(
                    "duplicate surface name `{name}` (first at line {})",
                    first.line
                ),
            ));
        }
        seen.insert(name.clone(), name_pos);
        let Some((_, ty)) = ty else {
            return Err(err(entry_pos, format!("surface `{name}` has no `type:`")));
        };
        let ty_pos = Pos::of(&ty);
        let Value::Str(ty) = ty.value else {
            return Err(err(
                ty_pos,
                format!("`type` must be a string, not {}", ty.value.kind()),
            ));
        };
        let Some(st) = surface::by_name(&ty) else {
            let known: Vec<&str> = surface::REGISTRY.iter().map(|t| t.name()).collect();
            return Err(err(
                ty_pos,
                format!(
                    "unknown surface type `{ty}`; known types: {}",
                    known.join(", ")
                ),
            ));
        };
        let opts = Options::new(&file, st.name(), entry_pos, keys, env);
        opts.check_keys(st.keys())?;
        let settings = st.validate(opts)?;
        plans.push(SurfacePlan {
            name,
            type_name: st.name(),
            settings,
            location: source.path.as_ref().map(|p| Location {
                path: p.clone(),
                line: entry_pos.line,
                column: entry_pos.column,
            }),
        });
    }

    let mut declared = BTreeMap::new();
    for d in raw.declared.map(|d| d.value).unwrap_or_default() {
        let pos = Pos::of(&d);
        let channel = match &d.value {
            Value::Str(s) => s.clone(),
            Value::Map(Mapping(m)) => {
                let mut channel = None;
                for (k, v) in m {
                    match (k.value.as_str(), &v.value) {
                        ("channel", Value::Str(s)) => channel = Some(s.clone()),
                        ("channel", other) => {
                            return Err(err(
                                Pos::of(v),
                                format!("`channel` must be a string, not {}", other.kind()),
                            ));
                        }
                        // Free text for people (and later SARIF
                        // suppressions); not interpreted.
                        ("reason", Value::Str(_)) => {}
                        (other, _) => {
                            return Err(err(
                                Pos::of(k),
                                format!(
                                    "unknown key `{other}` in a declaration; known keys: channel, reason"
                                ),
                            ));
                        }
                    }
                }
                channel.ok_or_else(|| err(pos, "declaration without `channel:`".into()))?
            }
            other => {
                return Err(err(
                    pos,
                    format!(
                        "a declaration is a `surface:carrier` string or a mapping with `channel:`, not {}",
                        other.kind()
                    ),
                ));
            }
        };
        let Some((sname, carrier)) = channel.split_once(':') else {
            return Err(err(
                pos,
                format!("malformed declaration `{channel}`: expected `surface:carrier`"),
            ));
        };
        let Some(sp) = plans.iter().find(|p| p.name == sname) else {
            let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
            return Err(err(
                pos,
                format!(
                    "`{channel}` names no surface `{sname}`; surfaces: {}",
                    names.join(", ")
                ),
            ));
        };
        let st = surface::by_name(sp.type_name).expect("validated type");
        if !st.carriers().iter().any(|c| c.name == carrier) {
            let carriers: Vec<&str> = st.carriers().iter().map(|c| c.name).collect();
            return Err(err(
                pos,
                format!(
                    "`{channel}`: surface `{sname}` (type {}) has no carrier `{carrier}`; its carriers: {}",
                    st.name(),
                    carriers.join(", ")
                ),
            ));
        }
        if let Some(first) = declared.get(&channel) {
            let first: &Pos = first;
            return Err(err(
                pos,
                format!(
                    "`{channel}` is declared twice (first at line {})",
                    first.line
                ),
            ));
        }
        declared.insert(channel, pos);
    }

    Ok(Plan {
        source,
        surfaces: plans,
        declared,
    })
}
