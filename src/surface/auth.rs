//! Credentials an HTTP surface sends: named in the config by the
//! environment variables that hold them (never inline), read once, sent
//! only as sensitive headers, and registered with [`crate::redact`].

use crate::config::{ConfigError, Options};
use serde::{Deserialize, Serialize};

/// Credentials an HTTP surface sends, read from environment variables the
/// config names (never inline): `token-env` (a bearer token) or
/// `username-env` and `password-env` (basic auth). Serialized into the
/// settings runs A and B get; never printed (only [`HttpAuth::describe`]).
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct HttpAuth {
    bearer: Option<String>,
    basic: Option<(String, String)>,
    /// Which variables, for people.
    source: Option<String>,
    /// Set when a named variable is unset: the surface's carriers are
    /// SKIPPED with it (the operator asked for credentials).
    pub missing: Option<String>,
}

impl HttpAuth {
    /// Takes `token-env`, `username-env` and `password-env` from `opts`:
    /// credentials sent to each of `to` (the surface's URLs), which a
    /// GitHub token may not be sent to unless it is GitHub's
    /// ([`crate::github::to_github_only`]).
    pub fn from_config(opts: &mut Options<'_>, to: &[&str]) -> Result<HttpAuth, ConfigError> {
        let token = env_name(opts, "token-env")?;
        let user = env_name(opts, "username-env")?;
        let pass = env_name(opts, "password-env")?;
        // All three: a username is sent too (basic auth's first half).
        for (key, var) in [
            ("token-env", &token),
            ("username-env", &user),
            ("password-env", &pass),
        ] {
            if let Some(var) = var {
                for url in to {
                    crate::github::to_github_only(opts, key, var, url)?;
                }
            }
        }
        let unset = |n: &str| format!("{n} (named in the config) is unset or empty");
        match (token, user, pass) {
            (Some(t), None, None) => Ok(match opts.env(&t) {
                Some(v) => HttpAuth {
                    bearer: Some(v),
                    source: Some(format!("bearer token from {t}")),
                    ..HttpAuth::default()
                },
                None => HttpAuth {
                    missing: Some(unset(&t)),
                    ..HttpAuth::default()
                },
            }),
            (None, Some(u), Some(p)) => Ok(match (opts.env(&u), opts.env(&p)) {
                (Some(uv), Some(pv)) => HttpAuth {
                    basic: Some((uv, pv)),
                    source: Some(format!("basic auth from {u} and {p}")),
                    ..HttpAuth::default()
                },
                (None, _) => HttpAuth {
                    missing: Some(unset(&u)),
                    ..HttpAuth::default()
                },
                (_, None) => HttpAuth {
                    missing: Some(unset(&p)),
                    ..HttpAuth::default()
                },
            }),
            (None, None, None) => Ok(HttpAuth::default()),
            _ => Err(opts.error(
                opts.entry_pos(),
                "credentials are `token-env` alone, or `username-env` and `password-env` together",
            )),
        }
    }

    /// A control's own bearer token.
    pub fn bearer_for_control(token: String) -> HttpAuth {
        HttpAuth {
            bearer: Some(token),
            source: Some("the control's own token".into()),
            ..HttpAuth::default()
        }
    }

    /// A control's own basic-auth user.
    pub fn basic_for_control(user: String, password: String) -> HttpAuth {
        HttpAuth {
            basic: Some((user, password)),
            source: Some("the control's own user".into()),
            ..HttpAuth::default()
        }
    }

    /// A bearer token sent as the password of `user` instead (twine's
    /// `__token__` convention).
    pub fn bearer_as_basic(self, user: &str) -> HttpAuth {
        match self.bearer {
            Some(t) => HttpAuth {
                basic: Some((user.to_string(), t)),
                source: self
                    .source
                    .map(|s| format!("{s} (as the password of {user})")),
                bearer: None,
                missing: self.missing,
            },
            None => self,
        }
    }

    /// The request with these credentials (marked sensitive).
    pub fn apply<'a>(&self, req: crate::http::Request<'a>) -> crate::http::Request<'a> {
        use base64::Engine as _;
        if let Some(t) = &self.bearer {
            req.secret_header("authorization", format!("Bearer {t}"))
        } else if let Some((u, p)) = &self.basic {
            let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            req.secret_header("authorization", format!("Basic {b}"))
        } else {
            req
        }
    }

    /// Every credential string, for [`crate::redact`] (which also removes
    /// their base64 and percent-encoded forms).
    pub fn secrets(&self) -> Vec<String> {
        let mut v: Vec<String> = self.bearer.iter().cloned().collect();
        if let Some((u, p)) = &self.basic {
            v.push(p.clone());
            v.push(format!("{u}:{p}"));
        }
        v
    }

    /// Whether a credential is sent at all (one the config names, read
    /// here, or a control's own).
    pub fn has_credential(&self) -> bool {
        self.bearer.is_some() || self.basic.is_some()
    }

    /// "bearer token from NPM_TOKEN", "basic auth from U and P", "none".
    pub fn describe(&self) -> String {
        self.source.clone().unwrap_or_else(|| "none".into())
    }

    /// Whether a credential came from the variable `var` (`token-env`,
    /// `username-env` or `password-env`).
    pub fn secret_from(&self, var: &str) -> bool {
        self.source.as_deref().is_some_and(|s| {
            s.starts_with(&format!("bearer token from {var}"))
                || s.starts_with(&format!("basic auth from {var} and "))
                || s.starts_with("basic auth from ") && s.contains(&format!(" and {var}"))
        })
    }
}

/// Variables no config key may name: runwarden's own marker key, and the
/// runner's tokens that only the action's step holds. The config sits in
/// the work tree an earlier step (an agent) can edit: naming one would
/// send it to whatever host the entry names. The runtime token still
/// serves the cache and artifact surfaces by default, and only toward the
/// runner's own results service ([`crate::github::runtime`]).
pub const NEVER_NAMED: &[&str] = &["ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN"];

/// Prefixes of variables no config key may name: runwarden's own
/// (`RUNWARDEN_KEY`, and whatever else it keeps there) and the action's
/// inputs (`INPUT_KEY`, the `key` input, is the marker key too).
pub const NEVER_NAMED_PREFIXES: &[&str] = &["RUNWARDEN_", "INPUT_"];

/// The read token's variable docs/rendezvous.md names, which a
/// network-egress surface's `token-env` may name.
const RENDEZVOUS_TOKEN: &str = "RUNWARDEN_RENDEZVOUS_TOKEN";

/// A config key naming an environment variable: letters, digits and `_`,
/// never one of [`NEVER_NAMED`], nor the read token of a `network-egress`
/// surface of the same config from any other entry (it goes to the
/// rendezvous alone).
pub fn env_name(opts: &mut Options<'_>, key: &str) -> Result<Option<String>, ConfigError> {
    let Some((name, pos)) = opts.string(key)? else {
        return Ok(None);
    };
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(opts.error(
            pos,
            format!("`{key}` names an environment variable: letters, digits and `_`"),
        ));
    }
    // (The rendezvous's read token has a documented name of runwarden's
    // own, for network-egress's `token-env` alone.)
    let rendezvous =
        opts.type_name() == "network-egress" && key == "token-env" && name == RENDEZVOUS_TOKEN;
    let own = !rendezvous && NEVER_NAMED_PREFIXES.iter().any(|p| name.starts_with(p));
    if own || NEVER_NAMED.contains(&name.as_str()) {
        return Err(opts.error(
            pos,
            format!(
                "`{key}` names {name}, a secret runwarden never sends where a config says: \
                 {}",
                if own {
                    "runwarden's own variables and the action's inputs (its marker key among \
                     them) are runwarden's alone"
                } else {
                    "only the runner's results service gets it, and the cache and artifact \
                     surfaces use it there without being told"
                }
            ),
        ));
    }
    if opts.is_rendezvous_token(&name)
        && !(opts.type_name() == "network-egress" && key == "token-env")
    {
        return Err(opts.error(
            pos,
            format!(
                "`{key}` names {name}, the read token of a network-egress surface of this \
                 config: it goes to the rendezvous alone"
            ),
        ));
    }
    Ok(Some(name))
}
