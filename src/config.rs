//! The config file as written: YAML parsed with a location on every key and
//! value, and nothing checked beyond the shape. The plan (`src/plan.rs`) turns it into
//! a typed plan; every error either step finds names `file:line:column`.

use crate::fault::Fault;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::ffi::OsString;
use std::fmt;

/// A 1-based position in the config file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub line: u64,
    pub column: u64,
}

impl Pos {
    pub const START: Pos = Pos { line: 1, column: 1 };

    pub fn of<T>(s: &Spanned<T>) -> Pos {
        Pos::or(s, Pos::START)
    }

    /// The position of `s`, or `fallback` where the parser kept none.
    pub fn or<T>(s: &Spanned<T>, fallback: Pos) -> Pos {
        let l = s.referenced;
        if l.line() == 0 {
            fallback
        } else {
            Pos {
                line: l.line(),
                column: l.column(),
            }
        }
    }
}

/// A config problem, always with its place in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub pos: Pos,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.pos.line, self.pos.column, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// Every independent problem of a config, each with its place, in the
/// order they stand in the file: one run names them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for ConfigErrors {}

/// Any YAML value. Deserialized by hand rather than as an untagged enum:
/// serde buffers untagged content, which would drop the locations of
/// everything nested (a key inside a declaration mapping, say).
#[derive(Debug, Clone)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Value>>),
    Map(Mapping),
    Null,
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
                i64::try_from(v)
                    .map(Value::Int)
                    .map_err(|_| E::custom("number too large"))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Value, E> {
                Ok(Value::Str(v))
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                Value::deserialize(d)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Value::Seq(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = m.next_entry()? {
                    entries.push(entry);
                }
                Ok(Value::Map(Mapping(entries)))
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Value {
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
            Value::Null => "empty",
        }
    }
}

/// A mapping that keeps its keys in file order with their locations
/// (serde-saphyr's `Spanned` has no `Ord`, so no map type fits).
#[derive(Debug, Clone, Default)]
pub struct Mapping(pub Vec<(Spanned<String>, Spanned<Value>)>);

impl<'de> Deserialize<'de> for Mapping {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Mapping;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Mapping, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = m.next_entry()? {
                    entries.push(entry);
                }
                Ok(Mapping(entries))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The top level of a config file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub version: Option<Spanned<Value>>,
    pub surfaces: Option<Spanned<Vec<Spanned<Mapping>>>>,
    pub declared: Option<Spanned<Vec<Spanned<Value>>>>,
}

/// Parses YAML text; `file` is how errors name the file.
pub fn parse(text: &str, file: &str) -> Result<RawConfig, ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError {
            file: file.into(),
            pos: Pos::START,
            message: "the config is empty; it needs `version: 1` and `surfaces:`".into(),
        });
    }
    serde_saphyr::from_str(text).map_err(|e| {
        let pos = e
            .location()
            .filter(|l| l.line() > 0)
            .map(|l| Pos {
                line: l.line(),
                column: l.column(),
            })
            .unwrap_or(Pos::START);
        ConfigError {
            file: file.into(),
            pos,
            message: bare_message(&e.without_snippet().to_string()),
        }
    })
}

/// serde-saphyr's messages carry their own position ("… at line 6, column 5"
/// or "error: line 5 column 5: …"); ours go in front, so strip theirs.
fn bare_message(msg: &str) -> String {
    let mut m = msg.trim();
    if let Some(rest) = m.strip_prefix("error: line ")
        && let Some((_, after)) = rest.split_once(": ")
    {
        m = after;
    }
    if let Some(i) = m.rfind(" at line ") {
        m = &m[..i];
    }
    // A top-level key misspelled gets the hint a surface key gets.
    if let Some(rest) = m.strip_prefix("unknown field `")
        && let Some((key, known)) = rest.split_once("`, expected one of ")
    {
        let known: Vec<&str> = known.split(", ").collect();
        return format!("{m}{}", did_you_mean(key, &known));
    }
    // Their duplicate-key text addresses the library's user, not ours.
    if let Some(key) = m.strip_prefix("duplicate mapping key: ") {
        let key = key.split(", set DuplicateKeyPolicy").next().unwrap_or(key);
        return format!("duplicate key `{key}`");
    }
    m.to_string()
}

/// ` (did you mean `<key>`?)` for the nearest of `known` to `key`, when a
/// typo is the likely story (an edit distance of 2 at most); else empty.
fn did_you_mean(key: &str, known: &[&str]) -> String {
    known
        .iter()
        .map(|c| (strsim::levenshtein(c, key), *c))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, c)| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

/// Looks up an environment variable for `${VAR}` expansion. Injected so that
/// validation is a pure function of the text and this lookup.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// Expands `${VAR}` (unset or empty is an error) and `$$` (a literal `$`).
/// Any other `$` stays as it is. Every `Err` is `Invalid`.
pub fn expand(raw: &str, env: EnvLookup<'_>) -> Result<String, Fault> {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| Fault::invalid(format!("unclosed `${{` in `{raw}`")))?;
            let name = &body[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Fault::invalid(format!(
                    "`${{{name}}}` is not a valid variable name"
                )));
            }
            match env(name) {
                Some(v) if !v.is_empty() => match v.into_string() {
                    Ok(v) => out.push_str(&v),
                    Err(_) => {
                        return Err(Fault::invalid(format!(
                            "environment variable {name} is not valid UTF-8"
                        )));
                    }
                },
                _ => {
                    return Err(Fault::invalid(format!(
                        "environment variable {name} is not set or empty"
                    )));
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The string values of `key` in every entry of type `type_name` (what a
/// check across entries needs before any entry is validated).
pub fn values_of(entries: &[Spanned<Mapping>], type_name: &str, key: &str) -> Vec<String> {
    let str_of = |m: &Mapping, k: &str| {
        m.0.iter().find_map(|(name, v)| match &v.value {
            Value::Str(s) if name.value == k => Some(s.clone()),
            _ => None,
        })
    };
    entries
        .iter()
        .filter(|e| str_of(&e.value, "type").as_deref() == Some(type_name))
        .filter_map(|e| str_of(&e.value, key))
        .collect()
}

/// One surface entry's keys, handed to its surface type to take what it
/// knows; whatever is left over is an unknown key.
pub struct Options<'a> {
    file: &'a str,
    type_name: &'a str,
    entry: Pos,
    entries: Vec<(Spanned<String>, Spanned<Value>)>,
    env: EnvLookup<'a>,
    /// The variables the config's network-egress surfaces name as their
    /// read tokens (the surfaces' `env_name` keeps them there).
    rendezvous_tokens: &'a [String],
}

impl<'a> Options<'a> {
    pub fn new(
        file: &'a str,
        type_name: &'a str,
        entry: Pos,
        entries: Vec<(Spanned<String>, Spanned<Value>)>,
        env: EnvLookup<'a>,
    ) -> Self {
        Options {
            file,
            type_name,
            entry,
            entries,
            env,
            rendezvous_tokens: &[],
        }
    }

    /// With the read-token variables of the config's network-egress
    /// surfaces.
    pub fn with_rendezvous_tokens(self, tokens: &'a [String]) -> Self {
        Options {
            rendezvous_tokens: tokens,
            ..self
        }
    }

    /// Whether `var` is a network-egress surface's read-token variable.
    pub fn is_rendezvous_token(&self, var: &str) -> bool {
        self.rendezvous_tokens.iter().any(|t| t == var)
    }

    /// The surface type the entry is.
    pub fn type_name(&self) -> &str {
        self.type_name
    }

    /// An environment variable runwarden runs with (for defaults such as
    /// `GITHUB_WORKSPACE`); unset and empty are the same.
    pub fn env(&self, name: &str) -> Option<String> {
        (self.env)(name)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.is_empty())
    }

    /// Where the surface entry starts: the place to name for a missing key.
    pub fn entry_pos(&self) -> Pos {
        self.entry
    }

    pub fn error(&self, pos: Pos, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.into(),
            pos,
            message: message.into(),
        }
    }

    /// Whether the entry has `key` (not yet taken).
    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _)| k.value == key)
    }

    fn take(&mut self, key: &str) -> Option<Spanned<Value>> {
        let i = self.entries.iter().position(|(k, _)| k.value == key)?;
        Some(self.entries.remove(i).1)
    }

    /// A string option with `${VAR}` expanded. Numbers are taken as their
    /// text (`path: 2024` means the directory "2024").
    pub fn string(&mut self, key: &str) -> Result<Option<(String, Pos)>, ConfigError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        let pos = Pos::of(&v);
        let raw = match &v.value {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            other => {
                return Err(self.error(
                    pos,
                    format!("`{key}` must be a string, not {}", other.kind()),
                ));
            }
        };
        let expanded =
            expand(&raw, self.env).map_err(|m| self.error(pos, format!("`{key}`: {m}")))?;
        Ok(Some((expanded, pos)))
    }

    pub fn bool(&mut self, key: &str) -> Result<Option<bool>, ConfigError> {
        let Some(v) = self.take(key) else {
            return Ok(None);
        };
        match v.value {
            Value::Bool(b) => Ok(Some(b)),
            ref other => Err(self.error(
                Pos::of(&v),
                format!("`{key}` must be true or false, not {}", other.kind()),
            )),
        }
    }

    /// Fails on the first key that is not in `known`, listing the keys this
    /// type knows. Checked before any value, so a misspelled key is reported
    /// as what it is rather than as the key it was meant to be missing.
    pub fn check_keys(&self, known: &[&str]) -> Result<(), ConfigError> {
        match self
            .entries
            .iter()
            .find(|(k, _)| !known.contains(&k.value.as_str()))
        {
            None => Ok(()),
            Some((k, _)) => {
                let mut all = vec!["name", "type"];
                all.extend_from_slice(known);
                // The nearest known key, when a typo is the likely story.
                let near = did_you_mean(&k.value, &all);
                Err(self.error(
                    Pos::or(k, self.entry),
                    format!(
                        "unknown key `{}`{near} for a surface of type {}; known keys: {}",
                        k.value,
                        self.type_name,
                        all.join(", ")
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<OsString> {
        match name {
            "HOME" => Some("/home/u".into()),
            "EMPTY" => Some("".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion() {
        assert_eq!(expand("${HOME}/x", &env).unwrap(), "/home/u/x");
        assert_eq!(expand("a$$b$c", &env).unwrap(), "a$b$c");
        let invalid = |raw: &str| match expand(raw, &env) {
            Err(Fault::Invalid(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(invalid("${NOPE}").contains("NOPE is not set"));
        assert!(invalid("${EMPTY}").contains("EMPTY is not set or empty"));
        assert!(invalid("${HOME").contains("unclosed"));
        assert!(invalid("${1A}").contains("not a valid"));
    }

    #[test]
    fn strips_their_positions() {
        assert_eq!(
            bare_message("error: line 5 column 5: unknown field `x`"),
            "unknown field `x`"
        );
        assert_eq!(
            bare_message(
                "duplicate mapping key: a, set DuplicateKeyPolicy in Options if acceptable at line 6, column 5"
            ),
            "duplicate key `a`"
        );
    }
}
