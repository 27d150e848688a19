//! GitHub's package versions listing: on ghcr.io a tag is also a
//! version's `metadata.container.tags` in `GET
//! /{orgs,users}/{owner}/packages/container/{name}/versions`, read with an
//! API token (`api-token-env`, else `GITHUB_TOKEN`) under GitHub's own
//! access control, not the registry's. A run B the registry keeps out may
//! still read the tag there: it is a second route to `tag-name`.
//!
//! GitHub does not confirm that a GitHub App token (the job's
//! `GITHUB_TOKEN`) may use the `/packages` routes (the spec marks them not
//! enabled for Apps: ../shared/reference/github-coverage-facts.md): a 403
//! there, or no token, leaves the route unread and says so in the detail;
//! the registry's route still decides.

use super::OciRegistry;
use super::plant::witness_tag;
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::github::{Api, ApiError};
use crate::nonce::Nonce;
use crate::surface::RecoverOutcome;
use crate::surface::listing::{self, until_current};
use serde::{Deserialize, Serialize};

/// Where the listing is, and the token that reads it. Holds a credential:
/// never printed (only [`PackagesApi::describe`] names its source).
#[derive(Clone, Serialize, Deserialize)]
pub(super) struct PackagesApi {
    /// The REST API's base URL, no trailing `/`.
    api_url: String,
    pub(super) token: Option<String>,
    /// The variable the token came from, or the ones looked in.
    token_source: String,
}

/// The route's outcome, before it meets the registry's.
pub(super) enum Versions {
    Found(String),
    /// Read to its end, showing the witness; no tag carries it.
    Clean(String),
    /// Not read, and why (no token, GitHub's refusal, a name the API
    /// cannot take): the registry's route decides alone.
    Unread(String),
    /// Broken or not current: what the carrier comes to.
    Fails(RecoverOutcome),
}

/// `api-url` and `api-token-env`: the route is on for ghcr.io (the job's
/// API by default) and wherever `api-url` names an API.
pub(super) fn from_config(
    opts: &mut Options<'_>,
    registry: &str,
) -> Result<Option<PackagesApi>, ConfigError> {
    let api_url = match opts.string("api-url")? {
        Some((u, pos)) => {
            crate::http::check_url(&u).map_err(|m| opts.error(pos, format!("`api-url`: {m}")))?;
            Some(u.trim_end_matches('/').to_string())
        }
        None => None,
    };
    let named = crate::surface::env_name(opts, "api-token-env")?;
    if api_url.is_none() && registry != "https://ghcr.io" {
        if named.is_some() {
            return Err(opts.error(
                opts.entry_pos(),
                "`api-token-env` without `api-url`: the package versions listing is read only on ghcr.io or where `api-url` names GitHub's API",
            ));
        }
        return Ok(None);
    }
    let api_url = api_url.unwrap_or_else(|| {
        opts.env("GITHUB_API_URL")
            .unwrap_or_else(|| "https://api.github.com".into())
            .trim_end_matches('/')
            .to_string()
    });
    let (found, looked) = crate::github::api_token(opts, named, &api_url)?;
    Ok(Some(PackagesApi {
        api_url,
        token_source: found.as_ref().map_or(looked, |(n, _)| n.clone()),
        token: found.map(|(_, v)| v),
    }))
}

impl PackagesApi {
    /// The control's: its own loopback API, with a token that may read.
    pub(super) fn control(api_url: String, token: String) -> PackagesApi {
        PackagesApi {
            api_url,
            token: Some(token),
            token_source: "the control's own".into(),
        }
    }

    /// For the report's facts: where, and which variable's token.
    pub(super) fn describe(&self) -> String {
        format!(
            "{} with {}",
            crate::github::host_of(&self.api_url),
            if self.token.is_some() {
                escape::bytes(self.token_source.as_bytes())
            } else {
                format!(
                    "no token ({} unset)",
                    escape::bytes(self.token_source.as_bytes())
                )
            }
        )
    }
}

impl OciRegistry {
    /// `tag-name`'s second route: the versions of the agreed repository's
    /// package, until they show the witness tag.
    pub(super) fn read_versions(&self, p: &PackagesApi, repo: &str, nonce: &Nonce) -> Versions {
        let Some(token) = &p.token else {
            return Versions::Unread(format!(
                "no API token ({} is unset)",
                escape::bytes(p.token_source.as_bytes())
            ));
        };
        // The package is the repository below its owner. GitHub names a
        // nested one percent-encoded (`a%2Fb`), and the API client sends
        // no encoded `/` (it could climb out of a path): not read.
        let Some((owner, name)) = repo.split_once('/').filter(|(_, n)| !n.contains('/')) else {
            return Versions::Unread(format!(
                "the package {} is nested (set `repository` to the owner alone to read its versions)",
                escape::bytes(repo.as_bytes())
            ));
        };
        let client = match self.client.get() {
            Ok(c) => c,
            Err(f) => return Versions::Fails(RecoverOutcome::Error { reason: f.into() }),
        };
        let api = Api {
            client,
            base: &p.api_url,
            token,
            source: &p.token_source,
        };
        let (hex, wt) = (nonce.hex(), witness_tag(nonce));
        let shown = escape::bytes(format!("{owner}/{name}").as_bytes());
        let listed = until_current(self.wait(), || {
            let mut hit: Option<String> = None;
            let mut witness = false;
            let mut each = |v: &serde_json::Value| {
                for t in v["metadata"]["container"]["tags"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let t = t.as_str().unwrap_or("");
                    witness |= t == wt;
                    if hit.is_none() && t.contains(hex.as_str()) {
                        hit = Some(escape::bytes(t.as_bytes()));
                    }
                }
            };
            let what = format!("listing the package versions of {shown}");
            let mut n = None;
            for kind in ["orgs", "users"] {
                let path = format!("/{kind}/{owner}/packages/container/{name}/versions");
                match api.list(&path, None, &what, &mut each) {
                    Ok(k) => {
                        n = Some(k);
                        break;
                    }
                    // Not an organization's: a user's, or not there yet.
                    Err(ApiError::NotFound(_)) => continue,
                    Err(e) => return Err(e),
                }
            }
            Ok::<_, ApiError>(((n, hit, witness), n.is_some() && witness))
        });
        let c = match listed {
            Ok(c) => c,
            Err(e @ ApiError::Denied { .. }) => {
                return Versions::Unread(format!("GitHub refused the API token: {}", e.text()));
            }
            Err(e) => return Versions::Fails(RecoverOutcome::Error { reason: e.text() }),
        };
        match &c.value {
            (_, Some(t), _) => Versions::Found(format!(
                "GitHub's package versions of {shown} list the tag {t}"
            )),
            (Some(n), None, true) => Versions::Clean(format!(
                "GitHub lists {n} versions of the package {shown}; no tag carries it"
            )),
            (None, None, _) => Versions::Fails(listing::not_current(
                &format!("the package {shown} (GitHub answers 404) or its tag {wt}"),
                &c,
            )),
            (Some(_), None, false) => Versions::Fails(listing::not_current(
                &format!("the tag {wt} in GitHub's package versions of {shown}"),
                &c,
            )),
        }
    }
}

/// What became of a plant's package versions ([`OciRegistry::delete_versions`]).
pub(super) enum VersionsGone {
    /// Every version that was the plant's is deleted.
    Deleted,
    /// None to delete: none listed, or the listing not read (why).
    None(String),
    /// One stays: why (GitHub's answer, or a tag of someone else on it).
    Left(String),
}

/// One package version named by a plant's digest.
struct Version {
    id: u64,
    tags: Vec<String>,
}

impl OciRegistry {
    /// The versions of the package of `entry`'s repository that are the
    /// plant (named by its manifest digest, every tag on them the plant's
    /// own), deleted with `DELETE …/versions/{id}`: what ghcr.io offers
    /// where its registry API does not delete. `Deleted` only when one
    /// was. A version with a foreign tag is not the plant's alone: it
    /// stays. Without the listing (no token, a refusal, a nested name)
    /// there is nothing to delete.
    pub(super) fn delete_versions(&self, entry: &super::Entry) -> VersionsGone {
        let Some(p) = &self.settings.packages else {
            return VersionsGone::None(String::new());
        };
        let Some(token) = &p.token else {
            return VersionsGone::None(format!(
                "GitHub's package versions were not read: no API token ({} is unset)",
                escape::bytes(p.token_source.as_bytes())
            ));
        };
        let repo = entry.repository.as_str();
        let Some((owner, name)) = repo.split_once('/').filter(|(_, n)| !n.contains('/')) else {
            return VersionsGone::None(format!(
                "the package {} is nested, so GitHub's package versions were not read",
                escape::bytes(repo.as_bytes())
            ));
        };
        let client = match self.client.get() {
            Ok(c) => c,
            Err(f) => return VersionsGone::None(f.into_reason()),
        };
        let api = Api {
            client,
            base: &p.api_url,
            token,
            source: &p.token_source,
        };
        let shown = escape::bytes(format!("{owner}/{name}").as_bytes());
        let what = format!("listing the package versions of {shown}");
        for kind in ["orgs", "users"] {
            let path = format!("/{kind}/{owner}/packages/container/{name}/versions");
            let mut ours: Vec<Version> = vec![];
            let listed = api.list(&path, None, &what, &mut |v| {
                if v["name"].as_str() == Some(entry.digest.as_str())
                    && let Some(id) = v["id"].as_u64()
                {
                    let tags = v["metadata"]["container"]["tags"].as_array();
                    let tags = tags.into_iter().flatten().filter_map(|t| t.as_str());
                    ours.push(Version {
                        id,
                        tags: tags.map(str::to_string).collect(),
                    });
                }
            });
            match listed {
                Ok(_) => return self.delete_each(&api, &path, &shown, entry, ours),
                // Not an organization's: a user's, or no such package.
                Err(ApiError::NotFound(_)) => continue,
                Err(e) => {
                    return VersionsGone::None(format!(
                        "GitHub's package versions were not read: {}",
                        e.text()
                    ));
                }
            }
        }
        VersionsGone::None(format!("GitHub has no package {shown}"))
    }

    /// Deletes each of `versions` of the package at `path` (`…/versions`)
    /// whose tags are all `entry`'s.
    fn delete_each(
        &self,
        api: &Api<'_>,
        path: &str,
        shown: &str,
        entry: &super::Entry,
        versions: Vec<Version>,
    ) -> VersionsGone {
        if versions.is_empty() {
            return VersionsGone::None(format!(
                "GitHub lists no version {} of the package {shown}",
                entry.digest
            ));
        }
        for v in versions {
            let foreign: Vec<String> = v
                .tags
                .iter()
                .filter(|t| !entry.tags.contains(t))
                .map(|t| escape::bytes(t.as_bytes()))
                .collect();
            if !foreign.is_empty() {
                return VersionsGone::Left(format!(
                    "the package version {} of {shown} also carries the tags {} of someone else, so it is not the plant's alone; left",
                    v.id,
                    foreign.join(", ")
                ));
            }
            let what = format!("deleting the package version {} of {shown}", v.id);
            if let Err(e) = api.call(
                ::http::Method::DELETE,
                &format!("{path}/{}", v.id),
                None,
                &what,
            ) {
                return VersionsGone::Left(format!(
                    "GitHub did not delete the package version {} of {shown} ({}); it stays",
                    v.id,
                    e.text()
                ));
            }
        }
        VersionsGone::Deleted
    }
}
