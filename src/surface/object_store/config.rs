//! The object-store config: its keys made settings ([`validate`]).

use super::Settings;
use super::s3::{Bucket, Keys};
use crate::config::{ConfigError, Options};

/// Takes the object-store keys from a config entry.
pub(super) fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
    let Some((url, pos)) = opts.string("url")? else {
        return Err(opts.error(
            opts.entry_pos(),
            "an object-store surface needs `url:` (the S3 endpoint, e.g. https://s3.us-east-1.amazonaws.com)",
        ));
    };
    crate::http::check_url(&url).map_err(|m| opts.error(pos, format!("`url`: {m}")))?;
    let uri: http::Uri = url
        .parse()
        .map_err(|_| opts.error(pos, "`url`: not a URL"))?;
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(opts.error(
            pos,
            "`url`: the endpoint only (scheme, host, port): no path or query",
        ));
    }
    let Some(endpoint) = crate::http::origin(&url) else {
        return Err(opts.error(pos, "`url`: not a URL"));
    };
    let Some((bucket, bpos)) = opts.string("bucket")? else {
        return Err(opts.error(opts.entry_pos(), "an object-store surface needs `bucket:`"));
    };
    let plain = |s: &str| {
        (3..=63).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
            && !s.starts_with('.')
            && !s.contains("..")
    };
    if !plain(&bucket) {
        return Err(opts.error(bpos, "`bucket`: 3 to 63 letters, digits, `.`, `-` or `_`"));
    }
    let prefix = match opts.string("prefix")? {
        Some((p, ppos)) => {
            if p.len() > 512
                || p.starts_with('/')
                || p.split('/').any(|s| s == "..")
                || p.chars().any(|c| c.is_control())
            {
                return Err(opts.error(
                    ppos,
                    "`prefix`: at most 512 characters, no control character, no leading `/`, no `..` segment",
                ));
            }
            p
        }
        None => String::new(),
    };
    let region = match opts.string("region")? {
        Some((r, rpos)) => {
            if r.is_empty() || !r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(opts.error(rpos, "`region`: letters, digits and `-`"));
            }
            r
        }
        None => "us-east-1".into(),
    };
    // Path-style where virtual-hosted cannot work: an endpoint with a
    // port or an IP (a self-hosted store); else the bucket's own host.
    let host = uri.host().unwrap_or("");
    let ip = host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[');
    let path_style = opts
        .bool("path-style")?
        .unwrap_or(uri.port_u16().is_some() || ip || host == "localhost");
    // Virtual-hosted, the bucket is a host name: case does not tell two
    // apart (`MyCache.` reaches `mycache`, maybe someone else's), and a
    // dot breaks the TLS certificate's wildcard.
    if !path_style {
        let dns = bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && !bucket.starts_with('-')
            && !bucket.ends_with(['-', '.'])
            && bucket.parse::<std::net::Ipv4Addr>().is_err();
        if !dns {
            return Err(opts.error(
                bpos,
                "`bucket`: virtual-hosted, a bucket is a host name (lowercase letters, digits, `-` and `.`); set `path-style: true` for this one",
            ));
        }
        if bucket.contains('.') && uri.scheme_str() == Some("https") {
            return Err(opts.error(
                bpos,
                "`bucket`: a dotted bucket over https breaks the certificate's wildcard virtual-hosted: set `path-style: true`",
            ));
        }
    }
    let (keys, source, missing) = credentials(&mut opts, &url)?;
    Ok(Settings {
        bucket: Bucket {
            endpoint,
            bucket,
            region,
            path_style,
        },
        prefix,
        keys,
        source,
        missing,
        consistency_wait_ms: crate::surface::listing::wait_option(&mut opts)?.as_millis() as u64,
        control: false,
        permanent: opts.bool("permanent")?.unwrap_or(false),
    })
}

/// The identity's keys from the variables `access-key-env`,
/// `secret-key-env` and `session-token-env` name (the first two
/// required): the keys (none when a variable is unset), which variables,
/// for people, and which one is unset.
fn credentials(
    opts: &mut Options<'_>,
    url: &str,
) -> Result<(Option<Keys>, String, Option<String>), ConfigError> {
    let mut vars = vec![];
    for key in ["access-key-env", "secret-key-env", "session-token-env"] {
        let var = crate::surface::auth::env_name(opts, key)?;
        if let Some(v) = &var {
            // A GitHub token is never a bucket's key: refused outright
            // (the host a request goes to is the bucket's, not `url`'s).
            if matches!(v.as_str(), "GITHUB_TOKEN" | "GH_TOKEN") {
                return Err(opts.error(
                    opts.entry_pos(),
                    format!(
                        "`{key}` names {v}: a GitHub token goes to GitHub alone, never to a bucket"
                    ),
                ));
            }
            crate::github::to_github_only(opts, key, v, url)?;
        }
        vars.push(var);
    }
    let (Some(access_var), Some(secret_var)) = (vars[0].clone(), vars[1].clone()) else {
        return Err(opts.error(
            opts.entry_pos(),
            "an object-store surface names its credentials: `access-key-env` and `secret-key-env` (and `session-token-env` for temporary ones)",
        ));
    };
    let session_var = vars[2].clone();
    let unset = |n: &str| format!("{n} (named in the config) is unset or empty");
    let mut missing = None;
    let access = opts.env(&access_var);
    let secret = opts.env(&secret_var);
    let session = session_var.as_deref().map(|v| opts.env(v));
    for (var, value) in [
        (Some(&access_var), access.is_some()),
        (Some(&secret_var), secret.is_some()),
    ]
    .into_iter()
    .chain(
        session_var
            .as_ref()
            .map(|v| (Some(v), session.clone().flatten().is_some())),
    ) {
        if let (Some(var), false) = (var, value)
            && missing.is_none()
        {
            missing = Some(unset(var));
        }
    }
    let keys = match (access, secret, missing.is_none()) {
        (Some(access), Some(secret), true) => Some(Keys {
            access,
            secret,
            session: session.flatten(),
        }),
        _ => None,
    };
    let source = format!(
        "keys from {access_var} and {secret_var}{}",
        session_var
            .map(|v| format!(", session token from {v}"))
            .unwrap_or_default()
    );
    Ok((keys, source, missing))
}
