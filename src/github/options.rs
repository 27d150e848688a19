//! The config keys the GitHub surfaces share: the API URL, the
//! repository, the REST token, and the runtime token and results service
//! a job's steps get.

use crate::config::{ConfigError, Options};
use crate::fault::Fault;
use crate::http::check_url;

/// `owner/name`, each part non-empty and URL-safe (else `Invalid`).
pub fn check_repository(r: &str) -> Result<(), Fault> {
    let ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    match r.split_once('/') {
        Some((o, n)) if ok(o) && ok(n) => Ok(()),
        _ => Err(Fault::invalid("must be `owner/name`")),
    }
}

/// The `api-url` key: the REST API base URL, else `GITHUB_API_URL`, else
/// github.com's; without a trailing `/`.
pub fn api_url_option(opts: &mut Options<'_>) -> Result<String, ConfigError> {
    let url = match opts.string("api-url")? {
        Some((u, pos)) => {
            check_url(&u).map_err(|m| opts.error(pos, format!("`api-url`: {m}")))?;
            u
        }
        None => opts
            .env("GITHUB_API_URL")
            .unwrap_or_else(|| "https://api.github.com".into()),
    };
    Ok(url.trim_end_matches('/').to_string())
}

/// The `repository` key (`owner/name`), else `GITHUB_REPOSITORY`.
pub fn repository_option(opts: &mut Options<'_>) -> Result<Option<String>, ConfigError> {
    Ok(match opts.string("repository")? {
        Some((r, pos)) => {
            check_repository(&r).map_err(|m| opts.error(pos, format!("`repository`: {m}")))?;
            Some(r)
        }
        None => opts
            .env("GITHUB_REPOSITORY")
            .filter(|r| check_repository(r).is_ok()),
    })
}

/// The REST token for `api_url`: from the variable `named` (an
/// `api-token-env` key), else `GITHUB_TOKEN`, else `GH_TOKEN`.
/// `Ok((found, looked_in))`, where `found` is (variable, value) and
/// `looked_in` names every variable tried, for the reason when none is
/// set. A GitHub token named, or found by default, for an `api_url` that
/// is not the runner's API is a config error
/// ([`to_github_only`]).
pub type ApiToken = (Option<(String, String)>, String);

pub fn api_token(
    opts: &Options<'_>,
    named: Option<String>,
    api_url: &str,
) -> Result<ApiToken, ConfigError> {
    let explicit = named.is_some();
    let sources: Vec<String> = match named {
        Some(n) => vec![n],
        None => vec!["GITHUB_TOKEN".into(), "GH_TOKEN".into()],
    };
    let found = sources
        .iter()
        .find_map(|n| opts.env(n).map(|v| (n.clone(), v)));
    let checked = match (&found, explicit) {
        (Some((n, _)), _) => Some(n),
        (None, true) => sources.first(),
        (None, false) => None,
    };
    if let Some(var) = checked {
        to_github_only(opts, "api-token-env", var, api_url)?;
    }
    Ok((found, sources.join(" / ")))
}

/// Refuses to send a token to a results service the runner did not name:
/// the runtime token (found by default) only to `ACTIONS_RESULTS_URL`'s
/// origin (else github.com's public one), and a GitHub token named by
/// `token-env` nowhere (the results service does not take it). The config
/// sits in the work tree; `results-url` elsewhere would hand it the token
/// only the action's step holds.
fn runtime_goes_home(
    opts: &Options<'_>,
    token_env: &Option<String>,
    token: &Option<(String, String)>,
    results_url: Option<&str>,
) -> Result<(), ConfigError> {
    let Some(url) = results_url else {
        return Ok(());
    };
    if let Some(var) = token_env {
        return to_github_only(opts, "token-env", var, url);
    }
    let Some((var, _)) = token else {
        return Ok(());
    };
    let home = opts
        .env("ACTIONS_RESULTS_URL")
        .unwrap_or_else(|| GITHUB_COM_RESULTS.into());
    let origin = |u: &str| crate::http::origin(u).map(|o| o.to_ascii_lowercase());
    if origin(url).is_some() && origin(url) == origin(&home) {
        return Ok(());
    }
    Err(opts.error(
        opts.entry_pos(),
        format!(
            "`results-url` is not the runner's results service ({}): the runner's {var} goes \
             there alone; for another service name its token with `token-env`",
            crate::escape::line(&home)
        ),
    ))
}

/// The results service of github.com (the cache and artifact services),
/// which a `run:` step holding only the id-token request token can still
/// reach: the URL is public.
pub const GITHUB_COM_RESULTS: &str = "https://results-receiver.actions.githubusercontent.com/";

/// The URL of one Twirp method of the results service, as the toolkit's
/// clients (`@actions/cache`, `@actions/artifact`) build it: the path
/// `/twirp/<service>/<method>` on the results URL's origin, whatever path
/// that URL has (it was checked when the config was read).
pub fn twirp_url(results_url: &str, service: &str, method: &str) -> String {
    let origin = crate::http::origin(results_url).unwrap_or_default();
    format!("{origin}/{}/{method}", service.trim_matches('/'))
}

/// The runtime token and the results service URL, as the surfaces that
/// write through the results service read them.
pub struct Runtime {
    /// (variable, value).
    pub token: Option<(String, String)>,
    /// The service's base URL, ending in `/`.
    pub results_url: Option<String>,
    /// Why there is no token or no URL: the surface's carriers are
    /// SKIPPED with it.
    pub missing: Option<String>,
}

/// The `token-env` and `results-url` keys: the configured variable, else
/// what node actions get (`ACTIONS_RUNTIME_TOKEN`), else what a `run:` step
/// gets with `id-token: write` (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`, the same
/// system token); the URL from the key, else `ACTIONS_RESULTS_URL`, else
/// github.com's public one when the token is there. `service` names the
/// service in the reason ("cache service").
pub fn runtime(
    opts: &mut Options<'_>,
    token_env: Option<String>,
    service: &str,
) -> Result<Runtime, ConfigError> {
    let sources: Vec<String> = match &token_env {
        Some(n) => vec![n.clone()],
        None => vec![
            "ACTIONS_RUNTIME_TOKEN".into(),
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN".into(),
        ],
    };
    let token = sources
        .iter()
        .find_map(|n| opts.env(n).map(|v| (n.clone(), v)));
    let results_url = match opts.string("results-url")? {
        Some((u, pos)) => {
            check_url(&u).map_err(|m| opts.error(pos, format!("`results-url`: {m}")))?;
            Some(u)
        }
        None => opts.env("ACTIONS_RESULTS_URL").or_else(|| {
            // A run step is not given the URL, but github.com's is
            // public: an agent holding the token can use it.
            let on_github_com = opts
                .env("GITHUB_SERVER_URL")
                .is_some_and(|s| s.trim_end_matches('/') == "https://github.com");
            (on_github_com && token.is_some()).then(|| GITHUB_COM_RESULTS.to_string())
        }),
    };
    let results_url = results_url.map(|u| if u.ends_with('/') { u } else { format!("{u}/") });
    runtime_goes_home(opts, &token_env, &token, results_url.as_deref())?;
    let missing = match (&token, &results_url) {
        (None, _) if token_env.is_some() => Some(format!(
            "no runtime token: `token-env` names {}, which is unset or empty",
            sources[0]
        )),
        (None, _) => Some(
            "no runtime token: a composite action or `run:` step gets no ACTIONS_RUNTIME_TOKEN \
             (and ACTIONS_ID_TOKEN_REQUEST_TOKEN only with `id-token: write`); use the action, \
             or grant id-token: write"
                .into(),
        ),
        (Some(_), None) => Some(format!(
            "no {service} URL: ACTIONS_RESULTS_URL is unset; set `results-url`"
        )),
        _ => None,
    };
    Ok(Runtime {
        token,
        results_url,
        missing,
    })
}

/// The job's GitHub token, under the names workflows give it.
const GITHUB_TOKENS: &[&str] = &["GITHUB_TOKEN", "GH_TOKEN"];

/// Refuses a GitHub token (`GITHUB_TOKEN`, `GH_TOKEN`) named by `key` as
/// the secret sent to `url` unless `url` is GitHub's: the runner's API
/// (`GITHUB_API_URL`, else `https://api.github.com`) or `https://ghcr.io`.
/// Another service that takes the job's token gets it under a name of
/// the workflow's own (`env: { REGISTRY_TOKEN: ${{ github.token }} }`),
/// which the workflow's reviewers see.
pub fn to_github_only(
    opts: &Options<'_>,
    key: &str,
    var: &str,
    url: &str,
) -> Result<(), ConfigError> {
    if !GITHUB_TOKENS.contains(&var) {
        return Ok(());
    }
    let api = opts
        .env("GITHUB_API_URL")
        .unwrap_or_else(|| "https://api.github.com".into());
    let origin = |u: &str| crate::http::origin(u).map(|o| o.to_ascii_lowercase());
    let to = origin(url);
    if to.is_some() && (to == origin(&api) || to.as_deref() == Some("https://ghcr.io")) {
        return Ok(());
    }
    Err(opts.error(
        opts.entry_pos(),
        format!(
            "`{key}` ({var}) would send the job's GitHub token to {}, which is not GitHub's API \
             ({}) or ghcr.io; give that service's token a name of its own",
            crate::escape::line(url),
            crate::escape::line(&api)
        ),
    ))
}
