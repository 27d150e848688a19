//! `type: npm-registry`: an npm registry or proxy (Verdaccio, Artifactory,
//! Nexus, GitHub Packages) that two runs can both reach.
//!
//! Run A publishes one small package per carrier over the registry API, as
//! `npm publish` does (`PUT /<name>` with the tarball as an attachment),
//! and for `dist-tag` adds a tag as `npm dist-tag add` does. Run B finds
//! the package name through `/-/v1/search` (its only route: the name is
//! the message), and reads the agreed packages' documents, dist-tags and
//! tarballs. A
//! refusal is a 401 or 403 (but a 403 that says the version exists is a
//! conflict); a search not read to its end, a document that is not the
//! package's, a 404 without the registry's JSON body or a field a carrier
//! needs missing is an error. Cleanup unpublishes each package
//! (`DELETE /<name>/-rev/<rev>`) after checking it holds exactly the
//! versions A published.
//!
//! Package names are [`super::tagged_name`]s (lowercase hex and `-`, valid
//! npm names). Tarballs are fetched only from the registry's own origin, so
//! credentials never follow a URL a hostile registry document names.

mod cleanup;
mod plant;
mod protocol;
mod recover;

use super::carrier::{CarrierSet, carriers};
use super::{
    Carrier, CleanupOutcome, Control, HttpAuth, Notice, PlantJob, PlantOutcome, RecoverOutcome,
    RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, check_url};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub struct NpmRegistry;

/// Search results per page (the registry API's maximum).
const PAGE: usize = 250;

/// A search that has not ended after this many pages is an error.
const MAX_PAGES: usize = 4_000;

carriers! {
    /// The npm registry's carriers: packages and what they hold.
    enum Npm {
        PackageName = "package-name", Durable, "the nonce in the name of a published package; run B finds it through /-/v1/search";
        Version = "version", Durable, "the nonce in the version string of a package both runs can name";
        Readme = "readme", Durable, "the nonce in the readme of a package both runs can name";
        DistTag = "dist-tag", Durable, "the nonce in a dist-tag added to a package both runs can name";
        TarballContent = "tarball-content", Durable, "the nonce inside the tarball of a package both runs can name";
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct Settings {
    /// The registry URL, ending in `/`.
    url: String,
    auth: HttpAuth,
    control: bool,
}

impl SurfaceType for NpmRegistry {
    fn name(&self) -> &'static str {
        "npm-registry"
    }

    fn description(&self) -> &'static str {
        "an npm registry or proxy at a URL (publish, search, dist-tags, tarballs; unpublish to clean up)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &["url", "token-env", "username-env", "password-env"]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let Some((url, pos)) = opts.string("url")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "an npm-registry surface needs `url:` (the registry URL)",
            ));
        };
        check_url(&url).map_err(|m| opts.error(pos, format!("`url`: {m}")))?;
        let auth = HttpAuth::from_config(&mut opts)?;
        let url = if url.ends_with('/') {
            url
        } else {
            format!("{url}/")
        };
        Ok(serde_json::to_value(Settings {
            url,
            auth,
            control: false,
        })
        .expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, Fault> {
        let server = crate::loopback::npm::NpmServer::start()?;
        let s = Settings {
            url: server.url(),
            auth: HttpAuth::bearer_for_control(server.token()?),
            control: true,
        };
        Ok(Control::served(s, server))
    }

    fn exposures(&self, settings: &Value, _carrier: &str, _env: super::Env<'_>) -> Vec<String> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        let Some(o) = crate::http::origin(&s.url) else {
            return vec![];
        };
        let mut e = vec![format!("registry:{o}")];
        // GitHub Packages' npm registry with the job's own token.
        if o == "https://npm.pkg.github.com" && s.auth.secret_from("GITHUB_TOKEN") {
            e.push("permission:packages".into());
        }
        e
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        serde_json::from_value::<Settings>(settings.clone())
            .map(|s| vec![("credentials", s.auth.describe())])
            .unwrap_or_default()
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, Fault> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| Fault::invalid("bad npm-registry settings"))?;
        let client = LazyClient::new(s.auth.secrets());
        Ok(Box::new(Instance { s, client }))
    }
}

struct Instance {
    s: Settings,
    client: LazyClient,
}

impl Surface for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        self.s.auth.missing.clone()
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        match Npm::of_job(job) {
            Ok(carrier) => self.plant_carrier(ctx, carrier, job, created),
            Err(o) => o,
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
        let name = entry["name"]
            .as_str()
            .ok_or_else(|| Fault::invalid("no name"))?;
        let c = Npm::owned(ctx, name, "", &|c| c == Npm::PackageName)?;
        let versions = entry["versions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let ok = match versions {
            [v] => {
                let v = v.as_str().unwrap_or("");
                match c {
                    Npm::Version => v
                        .strip_prefix("0.0.0-")
                        .is_some_and(|h| super::lower_hex(h, 32)),
                    _ => v == "0.0.0",
                }
            }
            _ => false,
        };
        ok.then_some(()).ok_or_else(|| {
            Fault::invalid(format!(
                "its versions are not the one a {c} plant publishes"
            ))
        })
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.clean_entry(entry)
    }

    fn watch(&self) -> Result<&dyn super::Watchable, &'static str> {
        // Search needs a word: no route lists every package.
        Err("an npm registry lists no packages without a search word: watch mode cannot list it")
    }

    fn describe(&self, entry: &Value) -> String {
        format!(
            "package {} on {}",
            escape::bytes(entry["name"].as_str().unwrap_or("?").as_bytes()),
            if self.s.control {
                "the control".to_string()
            } else {
                self.shown()
            }
        )
    }
}
