//! Validation: the raw config becomes a typed [`Plan`] before any work.
//!
//! Fail closed: a missing or unsupported `version`, an unknown key, a bad or
//! duplicate surface name, an unknown type, and a malformed or unknown
//! `declared` entry are all errors naming `file:line:column`.

use crate::config::{self, ConfigError, ConfigErrors, EnvLookup, Mapping, Options, Pos, Value};
use crate::surface;
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

/// Where the config came from, as the report states it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigSource {
    /// As the user gave or runwarden found it; `None` for a discovered
    /// config.
    pub path: Option<String>,
    /// No config file was found (the name predates discovery: the
    /// report's field names are stable).
    pub embedded_default: bool,
    /// When no config file was found: what discovery made of this
    /// environment (the surfaces probed are the findings' surfaces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovered: Option<Discovered>,
    /// In GitHub Actions: the commit the config was read at, and whether
    /// the work tree's differed ([`crate::pinned`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<crate::pinned::Pin>,
}

/// The discovered config's provenance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// `not-actions`, `github-hosted`, `self-hosted` or `arc`.
    pub runner: String,
    /// What was left out, each with why.
    pub skipped: Vec<String>,
}

impl ConfigSource {
    /// How errors name the file.
    pub fn display(&self) -> String {
        self.path
            .clone()
            .unwrap_or_else(|| "<discovered config>".into())
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
    /// The surface's entry in the config; `None` for a discovered config.
    pub location: Option<Location>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub source: ConfigSource,
    pub surfaces: Vec<SurfacePlan>,
    /// Declared channel ids (`surface:carrier`).
    pub declared: BTreeMap<String, Declaration>,
    /// Exposures declared untested on purpose (`declared:` entries with
    /// `exposure:`), each with its reason (redacted config text).
    pub declared_exposures: BTreeMap<String, String>,
}

/// One `declared` entry.
#[derive(Debug, Clone)]
pub struct Declaration {
    pub pos: Pos,
    /// Set when the declaration accepts the channel only within a scope.
    pub scope: Option<Scope>,
    /// Why the channel is accepted (`reason:`), free text from the config:
    /// untrusted like any text an output did not write.
    pub reason: Option<String>,
}

/// A declaration's scope: one key the surface type defines, e.g.
/// `refs: "refs/heads/memory/*"`. The channel is then planted twice, once
/// inside the scope and once outside it, to learn whether the scope holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub key: String,
    pub value: String,
}

impl Plan {
    pub fn declaration(&self, channel: &str) -> Option<&Declaration> {
        self.declared.get(channel)
    }
}

/// A surface name: 1-63 of `[a-z0-9-]`, not starting or ending with `-`.
pub fn is_valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// What every check of one config needs, and how its errors name the file.
struct Checker<'a> {
    /// The file as errors name it ([`ConfigSource::display`]).
    file: String,
    source: &'a ConfigSource,
    env: EnvLookup<'a>,
    /// The variables network-egress entries name as read tokens, which
    /// no other key may name ([`crate::surface::env_name`]).
    rendezvous_tokens: Vec<String>,
}

impl Checker<'_> {
    fn err(&self, pos: Pos, message: String) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            pos,
            message,
        }
    }
}

/// Parses and validates config text into a plan.
pub fn build(text: &str, source: ConfigSource, env: EnvLookup<'_>) -> Result<Plan, ConfigErrors> {
    let mut ck = Checker {
        file: source.display(),
        source: &source,
        env,
        rendezvous_tokens: Vec::new(),
    };
    let raw = config::parse(text, &ck.file)?;
    check_version(&ck, raw.version.as_ref())?;

    let Some(surfaces) = raw.surfaces else {
        return Err(ConfigErrors::from(
            ck.err(Pos::START, "missing `surfaces:`: nothing to probe".into()),
        ));
    };
    if surfaces.value.is_empty() {
        return Err(ConfigErrors::from(ck.err(
            Pos::of(&surfaces),
            "`surfaces` is empty: nothing to probe".into(),
        )));
    }

    // Read before any entry is checked, so that an entry above one
    // cannot name its token either.
    ck.rendezvous_tokens = config::values_of(&surfaces.value, "network-egress", "token-env");
    let mut plans: Vec<SurfacePlan> = Vec::new();
    let mut seen: BTreeMap<String, Pos> = BTreeMap::new();
    // Every independent error is reported in one run: an entry stops at
    // its first error (its later checks depend on it), the next entry is
    // still checked, and so is every declaration whose surface is sound.
    let mut errors: Vec<ConfigError> = Vec::new();
    for entry in surfaces.value {
        match surface_plan(&ck, entry, &mut seen) {
            Ok(p) => plans.push(p),
            Err(e) => errors.push(e),
        }
    }

    let mut declared: BTreeMap<String, Declaration> = BTreeMap::new();
    let mut declared_exposures: BTreeMap<String, String> = BTreeMap::new();
    for d in raw.declared.map(|d| d.value).unwrap_or_default() {
        let r = if is_exposure_entry(&d) {
            declare_exposure(&ck, &d, &mut declared_exposures)
        } else {
            declare(&ck, &d, &plans, &seen, &mut declared)
        };
        if let Err(e) = r {
            errors.push(e);
        }
    }
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }

    Ok(Plan {
        source,
        surfaces: plans,
        declared,
        declared_exposures,
    })
}

/// Whether a `declared` entry names an exposure (a mapping with
/// `exposure:`) rather than a channel.
fn is_exposure_entry(d: &Spanned<Value>) -> bool {
    matches!(&d.value, Value::Map(Mapping(m)) if m.iter().any(|(k, _)| k.value == "exposure"))
}

/// One `declared` entry of an exposure: `exposure:` (an id coverage
/// uses) and `reason:`, which it must give: an exposure left untested on
/// purpose says why, in every output.
fn declare_exposure(
    ck: &Checker<'_>,
    d: &Spanned<Value>,
    out: &mut BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    let pos = Pos::of(d);
    let Value::Map(Mapping(m)) = &d.value else {
        return Err(ck.err(pos, "an exposure declaration is a mapping".into()));
    };
    let (mut exposure, mut reason) = (None, None);
    for (k, v) in m {
        let vpos = Pos::or(v, pos);
        match (k.value.as_str(), &v.value) {
            ("exposure", Value::Str(s)) => exposure = Some((s.clone(), vpos)),
            ("reason", Value::Str(s)) if !s.trim().is_empty() => {
                reason = Some(crate::redact::text(s))
            }
            ("exposure" | "reason", other) => {
                return Err(ck.err(
                    vpos,
                    format!(
                        "`{}` must be a non-empty string, not {}",
                        k.value,
                        other.kind()
                    ),
                ));
            }
            (key, _) => {
                return Err(ck.err(
                    Pos::or(k, pos),
                    format!("unknown key `{key}` in an exposure declaration; known keys: exposure, reason"),
                ));
            }
        }
    }
    let (Some((id, ipos)), Some(reason)) = (exposure, reason) else {
        return Err(ck.err(
            pos,
            "an exposure declaration needs `exposure:` and `reason:` (why it is left untested)"
                .into(),
        ));
    };
    if !is_exposure_id(&id) {
        return Err(ck.err(
            ipos,
            format!(
                "`{}` is not an exposure id; see docs/coverage.md (e.g. permission:pages, run-traces, registry:https://ghcr.io)",
                crate::escape::line(&id)
            ),
        ));
    }
    if out.insert(id.clone(), reason).is_some() {
        return Err(ck.err(
            ipos,
            format!("exposure `{}` is declared twice", crate::escape::line(&id)),
        ));
    }
    Ok(())
}

/// `version: 1`, present and the number 1.
fn check_version(ck: &Checker<'_>, version: Option<&Spanned<Value>>) -> Result<(), ConfigError> {
    match version {
        None => Err(ck.err(Pos::START, "missing `version: 1` at the top level".into())),
        Some(v) => match v.value {
            Value::Int(1) => Ok(()),
            Value::Int(n) => Err(ck.err(
                Pos::of(v),
                format!("unsupported config version {n}; this runwarden reads version 1"),
            )),
            ref other => Err(ck.err(
                Pos::of(v),
                format!("`version` must be the number 1, not {}", other.kind()),
            )),
        },
    }
}

/// A config key and its value, as an entry holds them.
type KeyValue = (Spanned<String>, Spanned<Value>);

/// One `surfaces` entry: its name (valid, and not one `seen` already
/// has, which it joins), its type, and the settings its type validates.
fn surface_plan(
    ck: &Checker<'_>,
    entry: Spanned<Mapping>,
    seen: &mut BTreeMap<String, Pos>,
) -> Result<SurfacePlan, ConfigError> {
    let entry_pos = Pos::of(&entry);
    let Mapping(mut keys) = entry.value;
    let mut take = |k: &str| {
        keys.iter()
            .position(|(key, _)| key.value == k)
            .map(|i| keys.remove(i))
    };
    let name = take("name");
    let ty = take("type");
    let name = entry_name(ck, name, entry_pos, seen)?;
    let st = entry_type(ck, ty, entry_pos, &name)?;
    let opts = Options::new(&ck.file, st.name(), entry_pos, keys, ck.env)
        .with_rendezvous_tokens(&ck.rendezvous_tokens);
    opts.check_keys(st.keys())?;
    let settings = st.validate(opts)?;
    Ok(SurfacePlan {
        name,
        type_name: st.name(),
        settings,
        location: ck.source.path.as_ref().map(|p| Location {
            path: p.clone(),
            line: entry_pos.line,
            column: entry_pos.column,
        }),
    })
}

/// An entry's `name:`: a valid surface name no earlier entry has (it is
/// added to `seen`).
fn entry_name(
    ck: &Checker<'_>,
    name: Option<KeyValue>,
    entry_pos: Pos,
    seen: &mut BTreeMap<String, Pos>,
) -> Result<String, ConfigError> {
    let Some((_, name)) = name else {
        return Err(ck.err(entry_pos, "surface entry without `name:`".into()));
    };
    let name_pos = Pos::of(&name);
    let Value::Str(name) = name.value else {
        return Err(ck.err(
            name_pos,
            format!("`name` must be a string, not {}", name.value.kind()),
        ));
    };
    if !is_valid_name(&name) {
        return Err(ck.err(
            name_pos,
            format!(
                "invalid surface name `{name}`: use 1-63 lowercase letters, digits and '-', not starting or ending with '-'"
            ),
        ));
    }
    if let Some(first) = seen.get(&name) {
        return Err(ck.err(
            name_pos,
            format!(
                "duplicate surface name `{name}` (first at line {})",
                first.line
            ),
        ));
    }
    seen.insert(name.clone(), name_pos);
    Ok(name)
}

/// An entry's `type:`: a known surface type.
fn entry_type(
    ck: &Checker<'_>,
    ty: Option<KeyValue>,
    entry_pos: Pos,
    name: &str,
) -> Result<&'static dyn surface::SurfaceType, ConfigError> {
    let Some((_, ty)) = ty else {
        return Err(ck.err(entry_pos, format!("surface `{name}` has no `type:`")));
    };
    let ty_pos = Pos::of(&ty);
    let Value::Str(ty) = ty.value else {
        return Err(ck.err(
            ty_pos,
            format!("`type` must be a string, not {}", ty.value.kind()),
        ));
    };
    let Some(st) = surface::by_name(&ty) else {
        let known: Vec<&str> = surface::REGISTRY.iter().map(|t| t.name()).collect();
        return Err(ck.err(
            ty_pos,
            format!(
                "unknown surface type `{ty}`; known types: {}",
                known.join(", ")
            ),
        ));
    };
    Ok(st)
}

/// A scope key a declaration names, its value and where the key is.
type ScopeKey = (String, String, Pos);

/// One `declared` entry: a channel of a sound surface (`plans`), with its
/// scope if it names one, added to `declared` (once). A channel of a
/// surface with an error of its own (in `seen`, not in `plans`) is left
/// out: that error is already reported.
fn declare(
    ck: &Checker<'_>,
    d: &Spanned<Value>,
    plans: &[SurfacePlan],
    seen: &BTreeMap<String, Pos>,
    declared: &mut BTreeMap<String, Declaration>,
) -> Result<(), ConfigError> {
    let pos = Pos::of(d);
    let (channel, scope, reason) = declaration_channel(ck, d, pos)?;
    let Some((sname, carrier)) = channel.split_once(':') else {
        return Err(ck.err(
            pos,
            format!("malformed declaration `{channel}`: expected `surface:carrier`"),
        ));
    };
    let Some(sp) = plans.iter().find(|p| p.name == sname) else {
        // Its surface has an error of its own, already reported.
        if seen.contains_key(sname) {
            return Ok(());
        }
        let names: Vec<&str> = plans.iter().map(|p| p.name.as_str()).collect();
        let known = if names.is_empty() {
            "the config has no valid surface".to_string()
        } else {
            format!("surfaces: {}", names.join(", "))
        };
        return Err(ck.err(
            pos,
            format!("`{channel}` names no surface `{sname}`; {known}"),
        ));
    };
    let st = surface::by_name(sp.type_name).expect("validated type");
    if !st.carriers().iter().any(|c| c.name == carrier) {
        let carriers: Vec<&str> = st.carriers().iter().map(|c| c.name).collect();
        return Err(ck.err(
            pos,
            format!(
                "`{channel}`: surface `{sname}` (type {}) has no carrier `{carrier}`; its carriers: {}",
                st.name(),
                carriers.join(", ")
            ),
        ));
    }
    let scope = match scope {
        None => None,
        Some(scope) => Some(declaration_scope(ck, st, carrier, scope)?),
    };
    if let Some(first) = declared.get(&channel) {
        return Err(ck.err(
            pos,
            format!(
                "`{channel}` is declared twice (first at line {})",
                first.pos.line
            ),
        ));
    }
    declared.insert(channel, Declaration { pos, scope, reason });
    Ok(())
}

/// A declaration's channel, the scope key it names if any, and its
/// reason: a `surface:carrier` string, or a mapping with `channel:`,
/// `reason:` and at most one other (scope) key.
fn declaration_channel(
    ck: &Checker<'_>,
    d: &Spanned<Value>,
    pos: Pos,
) -> Result<(String, Option<ScopeKey>, Option<String>), ConfigError> {
    // A mapping may add one scope key its surface type knows (e.g.
    // `refs:` for git-remote), checked once the channel is known.
    let mut scope: Option<ScopeKey> = None;
    let mut reason = None;
    let channel = match &d.value {
        Value::Str(s) => s.clone(),
        Value::Map(Mapping(m)) => {
            let mut channel = None;
            for (k, v) in m {
                let vpos = Pos::or(v, pos);
                match (k.value.as_str(), &v.value) {
                    ("channel", Value::Str(s)) => channel = Some(s.clone()),
                    // Free text for people (the table, the job summary,
                    // SARIF's suppression); not interpreted.
                    // Redacted here, once: whoever could edit the config
                    // (an earlier step in the work tree) could have put a
                    // credential in it, and every output shows it.
                    ("reason", Value::Str(s)) => reason = Some(crate::redact::text(s)),
                    ("channel" | "reason", other) => {
                        return Err(ck.err(
                            vpos,
                            format!("`{}` must be a string, not {}", k.value, other.kind()),
                        ));
                    }
                    (key, Value::Str(s)) if scope.is_none() => {
                        scope = Some((key.to_string(), s.clone(), Pos::or(k, pos)))
                    }
                    (key, _) => {
                        return Err(ck.err(
                            Pos::or(k, pos),
                            format!(
                                "unknown key `{key}` in a declaration; known keys: channel, reason, and one scope key of the surface type"
                            ),
                        ));
                    }
                }
            }
            channel.ok_or_else(|| ck.err(pos, "declaration without `channel:`".into()))?
        }
        other => {
            return Err(ck.err(
                pos,
                format!(
                    "a declaration is a `surface:carrier` string or a mapping with `channel:`, not {}",
                    other.kind()
                ),
            ));
        }
    };
    Ok((channel, scope, reason))
}

/// A declaration's scope: a scope key of its surface type, with a value
/// the type accepts for `carrier`.
fn declaration_scope(
    ck: &Checker<'_>,
    st: &dyn surface::SurfaceType,
    carrier: &str,
    (key, value, kpos): ScopeKey,
) -> Result<Scope, ConfigError> {
    if !st.scope_keys().contains(&key.as_str()) {
        let known: Vec<&str> = ["channel", "reason"]
            .into_iter()
            .chain(st.scope_keys().iter().copied())
            .collect();
        return Err(ck.err(
            kpos,
            format!(
                "unknown key `{key}` in a declaration of a {} channel; known keys: {}",
                st.name(),
                known.join(", ")
            ),
        ));
    }
    st.check_scope(carrier, &key, &value)
        .map_err(|m| ck.err(kpos, format!("`{key}`: {m}")))?;
    Ok(Scope { key, value })
}

/// Every permission key a workflow may set, in GitHub's spelling
/// (workflow syntax, `permissions`).
pub const PERMISSION_KEYS: [&str; 15] = [
    "actions",
    "attestations",
    "checks",
    "contents",
    "deployments",
    "discussions",
    "id-token",
    "issues",
    "models",
    "packages",
    "pages",
    "pull-requests",
    "repository-projects",
    "security-events",
    "statuses",
];

/// The exposures with no place: their id is the whole name.
pub const FIXED_EXPOSURES: [&str; 4] = [
    "run-traces",
    "runner-persistence",
    "actions-cache",
    "actions-artifacts",
];

/// The kinds of exposure with a place (`registry:<origin>`), and what
/// people call one and several of them.
pub const PLACED_EXPOSURES: [(&str, &str, &str); 5] = [
    ("docker-socket", "Docker socket", "Docker sockets"),
    ("registry", "registry", "registries"),
    ("cache", "cache", "caches"),
    ("path", "path", "paths"),
    ("git-remote", "git remote", "git remotes"),
];

/// Whether `id` has the form of an exposure id (docs/coverage.md): a
/// permission key GitHub has, a fixed name, or a kind with a place.
pub fn is_exposure_id(id: &str) -> bool {
    match id.strip_prefix("permission:") {
        Some(k) => PERMISSION_KEYS.contains(&k),
        None => {
            FIXED_EXPOSURES.contains(&id)
                || PLACED_EXPOSURES.iter().any(|(p, _, _)| {
                    id.strip_prefix(p)
                        .and_then(|r| r.strip_prefix(':'))
                        .is_some_and(|r| !r.is_empty())
                })
        }
    }
}
