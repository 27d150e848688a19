//! The build-cache config: its keys made settings ([`validate`]), and what
//! the settings say about themselves ([`about`]).

use super::{Build, Protocol, Settings, Team};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::surface::{About, HttpAuth};

/// Takes the build-cache keys from a config entry.
pub(super) fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
    let Some((url, pos)) = opts.string("url")? else {
        return Err(opts.error(
            opts.entry_pos(),
            "a build-cache surface needs `url:` (the cache's base URL: Bazel's --remote_cache, Gradle's HttpBuildCache url, Nx's or Turborepo's server)",
        ));
    };
    crate::http::check_url(&url).map_err(|m| opts.error(pos, format!("`url`: {m}")))?;
    if url.contains('?') || url.contains('#') {
        return Err(opts.error(pos, "`url`: no query or fragment: a base URL"));
    }
    let names = Protocol::ALL.map(Protocol::name).join("`, `");
    let Some((p, ppos)) = opts.string("protocol")? else {
        return Err(opts.error(
            opts.entry_pos(),
            format!("a build-cache surface needs `protocol:` (`{names}`)"),
        ));
    };
    let Some(protocol) = Protocol::ALL.into_iter().find(|x| x.name() == p) else {
        return Err(opts.error(ppos, format!("`protocol`: one of `{names}`")));
    };
    let team = match opts.string("team")? {
        Some((t, tpos)) => {
            if protocol != Protocol::Turborepo {
                return Err(opts.error(tpos, "`team` is Turborepo's (its teamId or slug)"));
            }
            if t.is_empty()
                || t.len() > 100
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(opts.error(
                    tpos,
                    "`team`: a Turborepo team id or slug (letters, digits, `-` and `_`)",
                ));
            }
            Some(Team::new(&t))
        }
        None => None,
    };
    let bearer_named = opts.has("token-env");
    let auth = HttpAuth::from_config(&mut opts, &[url.as_str()])?;
    if protocol == Protocol::Turborepo && !bearer_named {
        return Err(opts.error(
            opts.entry_pos(),
            "a Turborepo cache takes a bearer token: name its variable with `token-env` (TURBO_TOKEN, say)",
        ));
    }
    let permanent = opts.bool("permanent")?.unwrap_or(false);
    let url = if url.ends_with('/') {
        url
    } else {
        format!("{url}/")
    };
    Ok(Settings {
        url,
        protocol,
        auth,
        team,
        permanent,
        control: false,
    })
}

/// What the settings say about themselves: where, which API and
/// credential, what cleanup can do, and which carriers the protocol has.
pub(super) fn about(s: &Settings) -> About<Build> {
    let place = if s.control {
        "the control".to_string()
    } else {
        escape::bytes(s.url.as_bytes())
    };
    let cleanup = if s.control {
        "deletes what it wrote (the control takes DELETE)".to_string()
    } else if !s.protocol.may_delete() {
        format!(
            "{} API deletes nothing one by one: {}",
            s.protocol.title(),
            if s.permanent {
                "what a probe writes stays (`permanent: true`), listed by key"
            } else {
                "every carrier is SKIPPED unless `permanent: true`"
            }
        )
    } else if s.permanent {
        "DELETE where the server takes it; else kept (`permanent: true`), listed by key".into()
    } else {
        "DELETE, checked before anything is planted (a server that takes none: every carrier SKIPPED unless `permanent: true`)".into()
    };
    let mut about = About::new(format!("under {place}"))
        .fact("protocol", s.protocol.name())
        .fact("credentials", s.auth.describe())
        .fact("cleanup", cleanup)
        .identity(Some(format!(
            "build-cache {} {} {}",
            s.protocol.name(),
            s.url,
            s.team.as_ref().map(|t| t.value.as_str()).unwrap_or("")
        )));
    if let Some(t) = &s.team {
        about = about.fact("team", format!("{}={}", t.param, t.value));
    }
    // (By the whole base URL: two caches on one host, Bazel's and
    // Gradle's under two paths, are two exposures.)
    about = about.exposure(format!("build-cache:{}", s.url));
    if s.protocol != Protocol::Turborepo {
        about = about.unavailable_of(
            Build::ArtifactTag,
            "only Turborepo's API hands an artifact's tag back with it",
        );
    }
    if s.protocol != Protocol::Bazel {
        about = about.unavailable_of(
            Build::CasBlob,
            "only Bazel's cache has a content-addressed store beside its entries",
        );
    }
    if !s.protocol.may_delete() && !s.permanent && !s.control {
        about = about.warning(format!(
            "{}: every carrier will be SKIPPED until `permanent: true` accepts that what a probe writes stays",
            s.protocol.no_delete()
        ));
        about = about.unavailable(format!(
            "{}: what a probe writes would stay; planted only with `permanent: true`, which accepts that (its entries are then listed as kept, by key)",
            s.protocol.no_delete()
        ));
    }
    match &s.auth.missing {
        Some(why) => about.secret_missing(why.clone()),
        None => about,
    }
}
