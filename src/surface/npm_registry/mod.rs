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
    About, Control, HttpAuth, Job, Journal, Notice, PlantOutcome, RecoverOutcome, RunCtx, Want,
    Watch,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};

/// Search results per page (the registry API's maximum).
const PAGE: usize = 250;

/// A search that has not ended after this many pages is an error.
const MAX_PAGES: usize = 4_000;

carriers! {
    /// The npm registry's carriers: packages and what they hold.
    pub enum Npm {
        PackageName = "package-name", Durable, "the nonce in the name of a published package; run B finds it through /-/v1/search";
        Version = "version", Durable, "the nonce in the version string of a package both runs can name";
        Readme = "readme", Durable, "the nonce in the readme of a package both runs can name";
        DistTag = "dist-tag", Durable, "the nonce in a dist-tag added to a package both runs can name";
        TarballContent = "tarball-content", Durable, "the nonce inside the tarball of a package both runs can name";
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The registry URL, ending in `/`.
    url: String,
    auth: HttpAuth,
    control: bool,
}

/// One package run A publishes, with the versions it publishes:
/// journalled before the publish; cleanup unpublishes it only while it
/// holds exactly those.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    name: String,
    versions: Vec<String>,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "package {}", escape::bytes(self.name.as_bytes()))
    }
}

/// An open npm registry.
pub struct NpmRegistry {
    settings: Settings,
    client: LazyClient,
}

impl super::Surface for NpmRegistry {
    const NAME: &'static str = "npm-registry";
    const DESCRIPTION: &'static str = "an npm registry or proxy at a URL (publish, search, dist-tags, tarballs; unpublish to clean up)";
    const KEYS: &'static [&'static str] = &["url", "token-env", "username-env", "password-env"];
    // Search needs a word: no route lists every package.
    const WATCH: Watch<Npm> = Watch::No(
        "an npm registry lists no packages without a search word: watch mode cannot list it",
    );
    type Carrier = Npm;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
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
        Ok(Settings {
            url,
            auth,
            control: false,
        })
    }

    fn about(s: &Settings) -> About<Npm> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.url.as_bytes())
        };
        let mut about = About::new(format!("on {place}")).fact("credentials", s.auth.describe());
        if let Some(o) = crate::http::origin(&s.url) {
            // GitHub Packages' npm registry with the job's own token.
            let packages = o == "https://npm.pkg.github.com" && s.auth.secret_from("GITHUB_TOKEN");
            about = about.exposure(format!("registry:{o}"));
            if packages {
                about = about.exposure("permission:packages");
            }
        }
        match &s.auth.missing {
            Some(why) => about.unavailable(why.clone()),
            None => about,
        }
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::npm::NpmServer::start()?;
        let s = Settings {
            url: server.url(),
            auth: HttpAuth::bearer_for_control(server.token()?),
            control: true,
        };
        Ok(Control::served(s, server))
    }

    fn open(settings: Settings) -> Result<NpmRegistry, Fault> {
        let client = LazyClient::new(settings.auth.secrets());
        Ok(NpmRegistry { settings, client })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Npm>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        super::each(jobs, |job| self.plant_one(ctx, job, journal))
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Npm, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Npm>]) -> Result<Vec<Entry>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let c = Npm::owned(ctx, &entry.name, "", &|c| c == Npm::PackageName)?;
        let ok = match entry.versions.as_slice() {
            [v] => match c {
                Npm::Version => v
                    .strip_prefix("0.0.0-")
                    .is_some_and(|h| super::lower_hex(h, 32)),
                _ => v == "0.0.0",
            },
            _ => false,
        };
        ok.then_some(()).ok_or_else(|| {
            Fault::invalid(format!(
                "its versions are not the one a {c} plant publishes"
            ))
        })
    }

    fn clean(&self, entries: &[Entry]) -> Vec<super::CleanupOutcome> {
        entries.iter().map(|e| self.clean_entry(e)).collect()
    }
}
