//! `type: oci-registry`: a container registry (CNCF distribution, Harbor,
//! Artifactory, a pull-through mirror, ghcr.io) that two runs can both
//! push to and pull from, over the registry API v2.
//!
//! Run A pushes one small OCI manifest per carrier, each of unique content
//! (the probe id, the carrier and the plant in its annotations): deleting
//! a manifest by digest removes every tag on that digest, so no plant may
//! share one with anything else. `repository-name` puts the nonce in a
//! repository under the configured namespace (opt-in: no API removes a
//! repository; a second one, its catalog witness, follows it); the other
//! carriers share one repository every probe uses (`runwarden-plants`,
//! so repositories do not pile up: [`plant`]): `tag-name` in a tag there
//! (with a witness tag beside it), `manifest-annotation` in an annotation
//! of the manifest under an agreed tag, `blob-content` in a layer blob
//! that manifest references. Run B lists `/v2/_catalog` and the shared
//! repository's tags (each listing counts only when it shows a witness:
//! [`super::listing`]), GETs the agreed manifest and streams the blob.
//!
//! Credentials (basic, or the bearer token flow a 401's
//! `WWW-Authenticate: Bearer` asks for) go only to the registry's origin
//! and the token service it names ([`protocol`]). Cleanup deletes each
//! manifest by digest after reading it back byte for byte and checking
//! that no foreign tag shares it (where the registry does not delete,
//! GitHub's package version that is the plant), and the layer blobs
//! unique to a plant; never the shared empty config blob. Every
//! repository and blob that stays is listed ([`account`]).

mod account;
mod auth;
mod cleanup;
mod packages;
mod plant;
mod protocol;
mod recover;

use super::carrier::carriers;
use super::{
    About, CleanupOutcome, Control, HttpAuth, Job, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Want, Watch, lower_hex,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use plant::{Placed, Pushed, legacy_plan, plan, shared_repository, witness_plan};
use serde::{Deserialize, Serialize};

carriers! {
    /// A registry's carriers: repositories, tags, manifests and blobs.
    pub enum Oci {
        RepositoryName = "repository-name", Durable, "the nonce in the name of a repository under the namespace; run B lists /v2/_catalog (opt-in: a repository cannot be removed through the API)";
        TagName = "tag-name", Durable, "the nonce in a tag of a repository both runs can name; run B lists its tags";
        ManifestAnnotation = "manifest-annotation", Durable, "the nonce in an annotation of the manifest under a tag both runs can name";
        BlobContent = "blob-content", Durable, "the nonce inside a layer blob of the manifest under a tag both runs can name; run B pulls the blob";
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The registry's origin (`https://host[:port]`), no trailing `/`.
    registry: String,
    /// The namespace both runs may push to (`ci/runwarden`).
    repository: String,
    auth: HttpAuth,
    /// Whether `repository-name` may be planted (it leaves a repository).
    repository_name: bool,
    #[serde(default = "super::listing::default_wait_ms")]
    consistency_wait_ms: u64,
    control: bool,
    /// The token service on another host that may get the credentials
    /// (`token-realm:`, https): see [`auth`].
    #[serde(default)]
    token_realm: Option<String>,
    /// GitHub's package versions listing, a second route to `tag-name`
    /// behind the API's own access control ([`packages`]): on for
    /// ghcr.io, and wherever `api-url` names the API.
    #[serde(default)]
    packages: Option<packages::PackagesApi>,
}

/// One carrier's plant, as run A journals it before its first push:
/// everything cleanup needs, and what the ownership rule (`owns`)
/// recomputes from the carrier and the nonce to check it is exactly a
/// plant's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The carrier's name.
    carrier: String,
    repository: String,
    /// The plant's own tags.
    tags: Vec<String>,
    /// The manifest's digest (`sha256:<hex>`).
    digest: String,
    /// The nonce, in its hex form (checked to be lowercase).
    nonce: String,
    /// The layer blob unique to the plant (`blob-content`'s), if any.
    blobs: Vec<String>,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "manifest {}@{}",
            escape::bytes(self.repository.as_bytes()),
            escape::bytes(self.digest.as_bytes())
        )
    }
}

/// Whether `name` is a repository name the distribution spec allows:
/// components of `[a-z0-9]+` joined by `.`, `_`, `__` or runs of `-`,
/// separated by `/`, at most 255 characters.
pub(crate) fn repository_name_ok(name: &str) -> bool {
    let component = |c: &str| {
        let b = c.as_bytes();
        let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
        if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
            return false;
        }
        // Separators: one `.`, one or two `_`, any run of `-`.
        let mut i = 0;
        while i < b.len() {
            if alnum(b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && !alnum(b[i]) {
                i += 1;
            }
            let sep = &c[start..i];
            let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
            if !ok {
                return false;
            }
        }
        true
    };
    !name.is_empty() && name.len() <= 255 && name.split('/').all(component)
}

/// An open container registry.
pub struct OciRegistry {
    settings: Settings,
    client: LazyClient,
    /// Bearer tokens the registry's token service issued, by the
    /// repository (or `""`: the catalog) they were asked for.
    tokens: std::cell::RefCell<std::collections::HashMap<String, String>>,
    /// Whether the last request carried a token the service issued: only
    /// an answer to one can be a scope's refusal (`insufficient_scope`).
    bearer_sent: std::cell::Cell<bool>,
    /// The `Docker-Distribution-Api-Version` the registry answers with,
    /// once seen.
    api_version: std::cell::RefCell<Option<String>>,
}

impl super::Surface for OciRegistry {
    const NAME: &'static str = "oci-registry";
    const DESCRIPTION: &'static str = "an OCI container registry at a URL (push manifests, tags and blobs; catalog, tags list, pull; delete by digest to clean up)";
    const KEYS: &'static [&'static str] = &[
        "registry",
        "repository",
        "username",
        "token-env",
        "repository-name",
        "consistency-wait",
        "token-realm",
        "api-url",
        "api-token-env",
    ];
    const WATCH: Watch<Oci> = Watch::No("watch mode cannot list an OCI registry yet");
    const ROUTES: &'static [crate::surface::routes::Route<Oci>] = recover::ROUTES;
    type Carrier = Oci;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let Some((url, pos)) = opts.string("registry")? else {
            return Err(opts.error(
                    opts.entry_pos(),
                    "an oci-registry surface needs `registry:` (the registry URL, e.g. https://registry.example.com)",
                ));
        };
        check_url(&url).map_err(|m| opts.error(pos, format!("`registry`: {m}")))?;
        let registry = crate::http::origin(&url).unwrap_or_default();
        // The API lives at /v2/ of the origin: a path would be ignored, so
        // it is refused rather than silently dropped.
        if url.trim_end_matches('/') != registry {
            return Err(opts.error(
                pos,
                "`registry`: the registry's origin only (scheme, host, port), no path",
            ));
        }
        let Some((repository, rpos)) = opts.string("repository")? else {
            return Err(opts.error(
                    opts.entry_pos(),
                    "an oci-registry surface needs `repository:` (a namespace both runs may push to, e.g. ci/runwarden)",
                ));
        };
        if !repository_name_ok(&repository) || repository.len() > 150 {
            return Err(opts.error(
                    rpos,
                    "`repository`: a repository namespace (lowercase letters, digits, `.`, `_`, `-`, components joined by `/`, at most 150 characters: plants add a name below it)",
                ));
        }
        let username = opts.string("username")?;
        let auth = HttpAuth::from_config(&mut opts, &[&registry])?;
        // A username makes the token the password of basic auth (what
        // registries and their token services take); without one it is
        // sent as a bearer token.
        let auth = match username {
            Some((u, upos)) if u.is_empty() || u.contains(':') => {
                return Err(opts.error(upos, "`username`: a non-empty name without `:`"));
            }
            Some((u, _)) => auth.bearer_as_basic(&u),
            None => auth,
        };
        let repository_name = opts.bool("repository-name")?.unwrap_or(false);
        let wait = super::listing::wait_option(&mut opts)?;
        let token_realm = match opts.string("token-realm")? {
            Some((u, tpos)) => {
                // The credentials go there: never in clear.
                if !u.starts_with("https://") || check_url(&u).is_err() {
                    return Err(opts.error(
                            tpos,
                            "`token-realm`: the https URL of the token service the registry names (e.g. https://auth.docker.io/token)",
                        ));
                }
                let realm = u.split('?').next().unwrap_or("").to_string();
                for var in ["GITHUB_TOKEN", "GH_TOKEN"] {
                    if auth.secret_from(var) {
                        crate::github::to_github_only(&opts, "token-env", var, &realm)?;
                    }
                }
                Some(realm)
            }
            None => None,
        };
        let packages = packages::from_config(&mut opts, &registry)?;
        Ok(Settings {
            registry,
            repository,
            auth,
            repository_name,
            consistency_wait_ms: wait.as_millis() as u64,
            control: false,
            token_realm,
            packages,
        })
    }

    fn about(s: &Settings) -> About<Oci> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.registry.as_bytes())
        };
        let mut about = About::new(format!("on {place}")).fact("credentials", s.auth.describe());
        if let Some(p) = &s.packages {
            about = about.fact("package-versions", p.describe());
        }
        about = about.exposure(format!("registry:{}", s.registry));
        // GitHub Packages with the job's own token.
        if s.registry == "https://ghcr.io" && s.auth.secret_from("GITHUB_TOKEN") {
            about = about.exposure("permission:packages");
        }
        if let Some(m) = &s.auth.missing {
            about = about.secret_missing(m.clone());
        }
        if !s.repository_name {
            about = about.unavailable_of(
                Oci::RepositoryName,
                "not planted without `repository-name: true`: no registry API removes a repository, so its plant would stay in the catalog",
            );
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::oci::OciServer::start()?;
        let (user, password) = server.user()?;
        let s = Settings {
            registry: server.url(),
            repository: "control/runwarden".into(),
            auth: HttpAuth::basic_for_control(user, password),
            repository_name: true,
            consistency_wait_ms: super::listing::default_wait_ms(),
            control: true,
            token_realm: None,
            packages: Some(packages::PackagesApi::control(
                server.url(),
                server.api_token(true)?,
            )),
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<OciRegistry, Fault> {
        let mut secrets = settings.auth.secrets();
        secrets.extend(settings.packages.iter().filter_map(|p| p.token.clone()));
        let client = LazyClient::new(secrets);
        Ok(OciRegistry {
            settings,
            client,
            tokens: Default::default(),
            bearer_sent: Default::default(),
            api_version: Default::default(),
        })
    }

    /// Run A: the carrier's plant pushed, journalled before its first
    /// request; taken back only when nothing was created.
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Oci>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let carrier = job.carrier;
        let p = plan(ctx, &self.settings.repository, carrier, &job.nonce);
        let shown = escape::bytes(p.repository.as_bytes());
        // A probe id the grammar refuses makes names no registry takes.
        if !repository_name_ok(&p.repository) || p.tags.iter().any(|t| t.len() > 128) {
            return PlantOutcome::Error {
                reason: format!(
                    "{shown} is no repository name the registry API allows (is the probe id lowercase letters, digits and `-`, and short?)"
                ),
            };
        }
        let entry = p.entry(carrier, &job.nonce);
        journal.record(&entry);
        let planted = |detail: String| PlantOutcome::Planted {
            needle: job.nonce,
            persistence: None,
            detail,
        };
        match self.push(carrier, &p) {
            Ok(()) => planted(format!(
                "pushed {shown}:{} ({}) to {}{}",
                escape::bytes(p.tags[0].as_bytes()),
                p.digest,
                self.shown(),
                // (Its nonce is listed whatever becomes of the witness: a
                // witness missing makes run B's miss ERROR, not the plant.)
                match carrier {
                    Oci::RepositoryName => self.push_witness(ctx, &job.nonce, journal),
                    _ => String::new(),
                }
            )),
            // Once a write that carries or reveals the nonce was taken the
            // plant happened: a later refusal is no closed carrier.
            Err(Pushed::Refused {
                reason,
                nonce: Placed::Listed,
                ..
            }) => planted(format!(
                "the repository {shown} holds its blob, so the catalog lists it (the nonce is there); then {reason}"
            )),
            Err(Pushed::Refused {
                reason,
                nonce: Placed::Written,
                ..
            }) => PlantOutcome::Error {
                reason: format!(
                    "the nonce was written to {shown}, but then {reason}: the plant is incomplete (a witness or its route is missing), so the carrier is not shown closed"
                ),
            },
            Err(Pushed::Refused {
                reason, nothing, ..
            }) => {
                if nothing {
                    journal.retract(&entry);
                }
                PlantOutcome::Refused { reason }
            }
            Err(Pushed::Failed { reason, nothing }) => {
                if nothing {
                    journal.retract(&entry);
                }
                PlantOutcome::Error { reason }
            }
        }
    }

    /// Run B: the shared repository's tags list (`tag-name`, current only
    /// when it shows the witness tag), the manifest under the agreed tag
    /// (`manifest-annotation`) and its layer blob (`blob-content`) read by
    /// name, and the catalog for `repository-name` (its only route), whose
    /// silence counts only when it lists the plants' catalog witnesses B
    /// read by name.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Oci, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        crate::surface::routes::through(wanted.iter().map(|w| w.carrier), recover::route_of, || {
            let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
            let mut catalog: Vec<(usize, String)> = vec![];
            let mut named: Vec<Nonce> = vec![];
            let shared = shared_repository(&self.settings.repository);
            for (i, w) in wanted.iter().enumerate() {
                let (carrier, nonce) = (w.carrier, w.needle);
                out[i] = Some(match carrier {
                    Oci::RepositoryName => {
                        catalog.push((i, nonce.hex()));
                        named.push(nonce);
                        continue;
                    }
                    Oci::TagName => self.tag_routes(&shared, &nonce),
                    Oci::ManifestAnnotation | Oci::BlobContent => {
                        self.read_manifest(ctx, carrier, &nonce)
                    }
                });
            }
            if !catalog.is_empty() {
                // The catalog's witnesses: the repositories run A made
                // after the nonces', read by name.
                let readable = self.catalog_witnesses(ctx, &named);
                let outcomes = self.search_catalog(ctx, &catalog, &readable, notice);
                for ((i, _), o) in catalog.iter().zip(outcomes) {
                    out[*i] = Some(o);
                }
            }
            crate::surface::all_outcomes(out)
        })
    }

    /// Cleanup by probe id: finding a probe's plants without its receipt:
    /// the shared repository's tags and manifests, the repositories of
    /// their own that versions before 0.12 used, and the catalog
    /// ([`OciRegistry::find_plants`]).
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Oci>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        self.find_plants(ctx, jobs).map(Into::into)
    }

    /// Whether `entry` is exactly what a plant of this probe makes under
    /// `ns`: its carrier's, with its nonce; its repository, tags, digest and
    /// blobs recomputed must be the entry's own (`Invalid` otherwise), so a
    /// forged receipt can name nothing foreign, not even in a repository of
    /// ours. What this version plants, what versions before 0.12 planted
    /// (each carrier in a repository of its own), and `repository-name`'s
    /// catalog witness are the forms.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let ns = self.settings.repository.as_str();
        let repo = entry.repository.as_str();
        let shown = escape::bytes(repo.as_bytes());
        if !repo
            .strip_prefix(ns)
            .is_some_and(|r| r.starts_with('/') && repository_name_ok(r.trim_start_matches('/')))
        {
            return Err(Fault::invalid(format!(
                "{shown} is not under the configured repository"
            )));
        }
        let carrier = Oci::parse(&entry.carrier)
            .ok_or_else(|| Fault::invalid(format!("{shown}: no carrier of {}", Self::NAME)))?;
        let hex = entry.nonce.as_str();
        let nonce = Nonce::from_hex(hex)
            .filter(|_| lower_hex(hex, 32))
            .ok_or_else(|| Fault::invalid(format!("{shown}: not the entry a plant journals")))?;
        let mut forms = vec![
            plan(ctx, ns, carrier, &nonce),
            legacy_plan(ctx, ns, carrier, &nonce),
        ];
        if carrier == Oci::RepositoryName {
            forms.push(witness_plan(ctx, ns, &nonce));
        }
        if !forms.iter().any(|p| p.entry(carrier, &nonce) == *entry) {
            return Err(Fault::invalid(format!(
                "{shown}: its repository, tags, digest or blobs are not the ones a {carrier} plant of probe {} makes",
                escape::bytes(ctx.probe_id.as_bytes())
            )));
        }
        Ok(())
    }

    /// Cleanup: each plant removed as far as the registry (and GitHub's
    /// package versions) allow, then every repository and blob that stays
    /// listed by name and why ([`account`]).
    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        self.clean_all(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::repository_name_ok;

    #[test]
    fn repository_names_follow_the_distribution_grammar() {
        for ok in [
            "ci/runwarden",
            "a",
            "a-b--c/d.e/f__g",
            "x0/runwarden-p-1-tag-name-0a",
        ] {
            assert!(repository_name_ok(ok), "{ok}");
        }
        for bad in [
            "", "Ci/x", "a//b", "/a", "a/", "a..b", "a___b", "-a", "a-", "a b", "a/../b",
        ] {
            assert!(!repository_name_ok(bad), "{bad}");
        }
    }
}
