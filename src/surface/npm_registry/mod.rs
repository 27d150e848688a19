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

mod plant;
mod protocol;

use super::carrier::{CarrierSet, carriers};
use super::{
    About, CleanupOutcome, Control, HttpAuth, Job, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Want, Watch,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::Class;
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use crate::surface::routes::{Kind, Recovered, Route};
use crate::surface::witness::{self, Currency, Seen, Side};
use ::http::Method;
use plant::{DOCUMENT, WITNESS_VERSION, package_for, publish_doc, witness_package};
use protocol::{class, path_of};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Run B's route to package-name ([`crate::surface::routes`]); the other
/// carriers' is the document read by name ([`DOCUMENT`]).
const SEARCH: &str = "search";

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
    const ROUTES: &'static [Route<Npm>] = &[
        Route {
            name: SEARCH,
            kind: Kind::Search,
            carriers: &[Npm::PackageName],
        },
        Route {
            name: DOCUMENT,
            kind: Kind::ByName,
            carriers: &[Npm::Version, Npm::Readme, Npm::DistTag, Npm::TarballContent],
        },
    ];
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
        let auth = HttpAuth::from_config(&mut opts, &[&url])?;
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
            Some(why) => about.secret_missing(why.clone()),
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
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<NpmRegistry, Fault> {
        let client = LazyClient::new(settings.auth.secrets());
        Ok(NpmRegistry { settings, client })
    }

    /// Run A: the document route's witness published before the plants,
    /// one package per carrier, then the witness published after them
    /// ([`crate::surface::witness`]).
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Npm>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        super::between(
            jobs,
            Self::PLANTED_LAST,
            journal,
            |side, journal| {
                let _ = self.publish_witness(ctx, side, journal);
            },
            |job, journal| self.plant_one(ctx, job, journal),
        )
    }

    /// One small package per carrier, published as `npm publish` does,
    /// journalled before the request and taken back only when the
    /// registry refused it.
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Npm>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let carrier = job.carrier;
        let (name, version) = package_for(ctx, carrier, &job.nonce);
        let shown = escape::bytes(name.as_bytes());
        let doc = publish_doc(
            &self.settings.url,
            ctx.probe_id,
            carrier,
            &name,
            &version,
            &job.nonce,
        );
        if let Err(o) = self.publish(&name, &version, &doc, journal) {
            return o;
        }
        let refused = |status: u16, what: &str| PlantOutcome::Refused {
            reason: format!("the registry refused the {what} (HTTP {status})"),
        };
        if carrier == Npm::DistTag {
            let tag = format!("n{}", job.nonce.hex());
            let url = format!(
                "{}-/package/{}/dist-tags/{tag}",
                self.settings.url,
                path_of(&name)
            );
            match self.call(Method::PUT, &url, Some(&json!(version))) {
                Err(f) => return PlantOutcome::Error { reason: f.into() },
                Ok(r) if class(&r) == Class::Refused => return refused(r.status, "dist-tag"),
                Ok(r) if !(200..300).contains(&r.status) => {
                    return PlantOutcome::Error {
                        reason: format!("adding the dist-tag: HTTP {}", r.status),
                    };
                }
                Ok(_) => {}
            }
        }
        PlantOutcome::Planted {
            needle: job.nonce,
            persistence: None,
            detail: format!(
                "published {shown}@{} to {}",
                escape::bytes(version.as_bytes()),
                self.shown()
            ),
        }
    }

    /// Run B: the search for `package-name` (its only route), the agreed
    /// packages' documents and tarballs for the rest, and the check that the
    /// search lists what B can read by name.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Npm, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<Recovered> {
        let searched: Vec<&Want<Npm, Nonce>> = wanted
            .iter()
            .filter(|w| w.carrier == Npm::PackageName)
            .collect();
        // The search also tells whether the documents B misses are gone
        // (below): asked once, whenever a carrier wants it.
        let (by_search, listed) = if searched.is_empty() {
            (vec![], Default::default())
        } else {
            self.search(ctx, &searched, notice)
        };
        let mut by_search = by_search.into_iter();
        // The agreed packages B could read by name: the search must list
        // them too, or its silence on package-name proves nothing.
        let mut readable: Vec<String> = vec![];
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        // The agreed packages whose document reads as missing.
        let mut missing: Vec<(usize, String)> = vec![];
        for (i, w) in wanted.iter().enumerate() {
            let (carrier, nonce) = (w.carrier, w.needle);
            if carrier == Npm::PackageName {
                // Its only route: the search (the package's name is the
                // message, so B cannot ask for its document).
                out[i] = by_search.next();
                continue;
            }
            let (name, version) = package_for(ctx, carrier, &nonce);
            let shown = escape::bytes(name.as_bytes());
            out[i] = Some(match self.packument(&name) {
                Err(o) => o,
                Ok(None) => {
                    missing.push((i, name.clone()));
                    RecoverOutcome::NotFound {
                        detail: format!("no package {shown}"),
                    }
                }
                Ok(Some(doc)) => {
                    readable.push(name.clone());
                    self.read_carrier(carrier, &doc, &shown, &version, &nonce.hex())
                }
            });
        }
        let listed = if !missing.is_empty() && searched.is_empty() {
            self.search(ctx, &[], notice).1
        } else {
            listed
        };
        // Routes that contradict each other: a package the search lists
        // whose document reads as missing (a stale copy in front of the
        // registry). The document route is not current, and its silence
        // proves nothing.
        for (i, name) in &missing {
            if listed.contains(name) {
                out[*i] = Some(RecoverOutcome::Error {
                    reason: format!(
                        "not current: the search lists {} while its document reads as missing: the document route lags (a stale copy in front of the registry?), so its silence proves nothing",
                        escape::bytes(name.as_bytes())
                    ),
                });
            }
        }
        // The search's own currency: it lists every package of this plant
        // that B reads by name, and both witnesses (the later one was
        // published after every plant).
        let mut in_search = Seen::default();
        for side in Side::BOTH {
            if listed.contains(&witness_package(ctx, side)) {
                in_search.saw(side);
            }
        }
        let unlisted = readable.iter().filter(|n| !listed.contains(*n)).count();
        let search_why = crate::surface::listing::search_witnessed(
            readable.len(),
            unlisted,
            "packages",
            "the search",
        );
        let search = match search_why {
            Some(reason) => Currency::NotCurrent(reason),
            None => witness::currency("the search", in_search, || None),
        };
        crate::surface::routes::search_and_documents(
            crate::surface::all_outcomes(out),
            wanted.iter().map(|w| w.carrier),
            Npm::PackageName,
            (SEARCH, search),
            (DOCUMENT, || self.document_currency(ctx)),
        )
    }

    /// Cleanup by probe id: finding a probe's packages by name and search.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Npm>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        // Every name but package-name's is derived without the nonce being
        // random; package-name's is found by search.
        let mut found = vec![];
        let witnesses =
            Side::BOTH.map(|side| (witness_package(ctx, side), WITNESS_VERSION.to_string()));
        let plants = jobs.iter().map(|j| package_for(ctx, j.carrier, &j.nonce));
        for (name, version) in witnesses.into_iter().chain(plants) {
            match self.packument(&name) {
                // The name's tag proves it is this probe's; a version of
                // another form (someone published to it) makes cleanup
                // leave it.
                Ok(Some(doc)) => {
                    let versions: Vec<&String> = doc["versions"]
                        .as_object()
                        .map(|m| m.keys().collect())
                        .unwrap_or_default();
                    let ours = |v: &str| {
                        v == "0.0.0"
                            || v.strip_prefix("0.0.0-").is_some_and(|h| {
                                h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit())
                            })
                    };
                    let versions = match versions.as_slice() {
                        [v] if ours(v) => vec![v.to_string()],
                        _ => vec![version],
                    };
                    found.push(Entry { name, versions });
                }
                Ok(None) => {}
                Err(RecoverOutcome::Error { reason }) => return Err(Fault::Broken(reason)),
                // The registry's access control: no look can be had here.
                Err(RecoverOutcome::Denied { reason }) => return Err(Fault::Unsupported(reason)),
                Err(_) => {}
            }
        }
        if jobs.iter().any(|j| j.carrier == Npm::PackageName) {
            let text = format!("runwarden-{}", ctx.probe_id);
            let mut names = vec![];
            self.search_names(&text, &mut |name| {
                if Npm::tagged(ctx, name, "") == Some(Npm::PackageName) {
                    names.push(name.to_string());
                }
            })
            .map_err(|o| match o {
                RecoverOutcome::Error { reason } => Fault::Broken(reason),
                RecoverOutcome::Denied { reason } => Fault::Unsupported(reason),
                _ => Fault::broken("the search could not be read"),
            })?;
            for name in names {
                if !found.iter().any(|f| f.name == name) {
                    found.push(Entry {
                        name,
                        versions: vec!["0.0.0".into()],
                    });
                }
            }
        }
        Ok(found.into())
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        // The document route's witnesses: exactly their names, one version.
        if witness::is_witness(ctx, DOCUMENT, &entry.name, "") {
            return match entry.versions.as_slice() {
                [v] if v == WITNESS_VERSION => Ok(()),
                _ => Err(Fault::invalid(
                    "its versions are not the one a witness publishes",
                )),
            };
        }
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

    /// Unpublishes a package after checking it holds exactly A's versions.
    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        let name = entry.name.as_str();
        if !name.starts_with("runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden package; nothing is unpublished".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        let url = format!("{}{}?write=true", self.settings.url, path_of(name));
        let doc = match self.call(Method::GET, &url, None) {
            Err(f) => return left(f.into()),
            Ok(r) if r.status == 404 => return self.gone_or_unconfirmed(name),
            Ok(r) if r.status != 200 => {
                return left(format!("reading it before unpublishing: HTTP {}", r.status));
            }
            Ok(r) => match r.json() {
                Ok(v) => v,
                Err(f) => return left(f.into()),
            },
        };
        // Checked before removal: exactly the versions A published.
        let mut have: Vec<String> = doc["versions"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let mut want = entry.versions.clone();
        have.sort();
        want.sort();
        if have != want {
            return left(
                "its versions changed since it was published: someone else published to it".into(),
            );
        }
        let Some(rev) = doc["_rev"].as_str() else {
            return left("the registry gave no revision to unpublish".into());
        };
        let url = format!("{}{}/-rev/{rev}", self.settings.url, path_of(name));
        match self.call(Method::DELETE, &url, None) {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) if matches!(class(&r), Class::Refused | Class::NotTheServer) => left(format!(
                "the registry refused to unpublish it (HTTP {}); it stays until someone with unpublish rights removes it",
                r.status
            )),
            Ok(r) => left(format!("unpublishing: HTTP {}", r.status)),
            Err(f) => left(f.into()),
        }
    }
}
