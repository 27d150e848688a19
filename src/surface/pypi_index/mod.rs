//! `type: pypi-index`: a PyPI-compatible index with an upload endpoint
//! (devpi, Artifactory, Nexus, pypiserver) that two runs can both reach.
//!
//! Run A uploads one small distribution per carrier through the legacy
//! upload API, as twine does (`multipart/form-data`,
//! `:action=file_upload`). Run B reads the simple index (PEP 503): the
//! root page for project names (the only route to a name that carries
//! the nonce), a project's page for its file names and versions, and the project's metadata (a JSON view when configured, else
//! the distribution's own PKG-INFO) for the description. A 404 is "no such
//! project" only once the root has listed projects (a wrong URL answers
//! 404 too); a page that lists nothing, metadata without a description, a
//! linked file that is not there, or a 403 that says the file exists is an
//! error, never a pass. Cleanup deletes
//! each version A uploaded (`DELETE <upload-url><project>/<version>`, as
//! devpi offers) after checking the project holds exactly A's files.
//!
//! Project names are [`super::tagged_name`]s (already PEP 503
//! normalized). Files are fetched only from the index's own origin.

/// Run B's route to project-name ([`crate::surface::routes`]); the other
/// carriers' is the project's pages read by name ([`PROJECT`]).
const ROOT: &str = "root";

mod plant;
mod protocol;
mod watch;

use super::carrier::{CarrierSet, carriers};
use super::{
    About, CleanupOutcome, Control, HttpAuth, Job, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Want, Watch,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::Request;
use crate::http::answer::{self, Class};
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::routes::{Kind, Recovered, Route};
use crate::surface::witness::{self, Currency, Seen, Side};
use ::http::Method;
use plant::{PROJECT, upload_for, witness_project, witness_upload};
use protocol::{INDEX, excerpt, project_of, version_of};
use serde::{Deserialize, Serialize};

carriers! {
    /// The package index's carriers: projects and what they hold.
    pub enum Pypi {
        ProjectName = "project-name", Durable, "the nonce in the name of an uploaded project, found in the simple index's listing";
        Version = "version", Durable, "the nonce in the version of a project both runs can name (a local version, 0.0.0+<nonce>)";
        Description = "description", Durable, "the nonce in the description (long_description) of a project both runs can name";
        FileName = "file-name", Durable, "the nonce in the file name of a wheel (its build tag) of a project both runs can name";
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    upload_url: String,
    /// The simple index root, ending in `/`.
    simple_url: String,
    /// A URL with `{project}` giving a project's metadata as JSON.
    json_url: Option<String>,
    auth: HttpAuth,
    control: bool,
}

/// One version of a project run A uploads, with its files: journalled
/// before the upload; cleanup deletes it only while the project holds
/// exactly those files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    project: String,
    version: String,
    files: Vec<String>,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}",
            escape::bytes(self.project.as_bytes()),
            escape::bytes(self.version.as_bytes())
        )
    }
}

/// What A uploads for one carrier.
struct Upload {
    project: String,
    version: String,
    file: String,
    data: Vec<u8>,
    filetype: &'static str,
    pyversion: &'static str,
    description: String,
}

/// What a streamed page held: per needle, whether its raw bytes hold it.
struct PageScan {
    found: Vec<bool>,
}

/// What the simple index root showed: how many project links, and per
/// needle sought, where it was seen.
struct Root {
    projects: usize,
    hits: Vec<Option<String>>,
    /// The names in this probe's form it listed.
    ours: std::collections::HashSet<String>,
}

/// A carrier read from an agreed page: `Err` when that page is 404, which
/// is "no such project" only if the index showed it is one.
type Looked = Result<RecoverOutcome, String>;

/// An open package index.
pub struct PypiIndex {
    settings: Settings,
    client: LazyClient,
}

impl super::Surface for PypiIndex {
    const NAME: &'static str = "pypi-index";
    const DESCRIPTION: &'static str = "a PyPI-compatible index with an upload endpoint (twine's upload API; the simple index to read)";
    const KEYS: &'static [&'static str] = &[
        "upload-url",
        "simple-url",
        "json-url",
        "token-env",
        "username-env",
        "password-env",
    ];
    const WATCH: Watch<Pypi> = Watch::Yes {
        unwatched: &[
            (Pypi::Version, watch::ON_PROJECT_PAGES),
            (Pypi::Description, watch::ON_PROJECT_PAGES),
            (Pypi::FileName, watch::ON_PROJECT_PAGES),
        ],
        changes: changes_of,
    };
    const ROUTES: &'static [Route<Pypi>] = &[
        Route {
            name: ROOT,
            kind: Kind::Search,
            carriers: &[Pypi::ProjectName],
        },
        Route {
            name: PROJECT,
            kind: Kind::ByName,
            carriers: &[Pypi::Version, Pypi::Description, Pypi::FileName],
        },
    ];
    type Carrier = Pypi;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let url = |opts: &mut Options<'_>,
                   key: &str,
                   required: bool|
         -> Result<Option<String>, ConfigError> {
            match opts.string(key)? {
                Some((u, pos)) => {
                    check_url(&u.replace("{project}", "p"))
                        .map_err(|m| opts.error(pos, format!("`{key}`: {m}")))?;
                    Ok(Some(u))
                }
                None if required => Err(opts.error(
                    opts.entry_pos(),
                    format!("a pypi-index surface needs `{key}:` (both `upload-url` and `simple-url` are required)"),
                )),
                None => Ok(None),
            }
        };
        let slash = |u: String| if u.ends_with('/') { u } else { format!("{u}/") };
        let upload_url = slash(url(&mut opts, "upload-url", true)?.unwrap_or_default());
        let simple_url = slash(url(&mut opts, "simple-url", true)?.unwrap_or_default());
        let json_url = url(&mut opts, "json-url", false)?;
        if let Some(j) = &json_url
            && !j.contains("{project}")
        {
            return Err(opts.error(opts.entry_pos(), "`json-url` must contain `{project}`"));
        }
        // twine's convention: a token is the password of `__token__`.
        let mut to = vec![upload_url.as_str(), simple_url.as_str()];
        to.extend(json_url.as_deref());
        let auth = HttpAuth::from_config(&mut opts, &to)?.bearer_as_basic("__token__");
        Ok(Settings {
            upload_url,
            simple_url,
            json_url,
            auth,
            control: false,
        })
    }

    fn about(s: &Settings) -> About<Pypi> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.simple_url.as_bytes())
        };
        let description_from = match &s.json_url {
            Some(u) => escape::bytes(u.as_bytes()),
            None => "the distribution's PKG-INFO".into(),
        };
        let mut about = About::new(format!("on {place}"))
            .fact("credentials", s.auth.describe())
            .fact("description-read-from", description_from);
        if let Some(o) = crate::http::origin(&s.simple_url) {
            about = about.exposure(format!("registry:{o}"));
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
        let server = crate::loopback::pypi::PypiServer::start()?;
        let (user, password) = server.user()?;
        let s = Settings {
            upload_url: server.upload_url(),
            simple_url: server.simple_url(),
            json_url: Some(server.json_url()),
            auth: HttpAuth::basic_for_control(user, password),
            control: true,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<PypiIndex, Fault> {
        let client = LazyClient::new(settings.auth.secrets());
        Ok(PypiIndex { settings, client })
    }

    /// Run A: one small distribution per carrier, uploaded as twine does,
    /// journalled before the request and taken back only when the index
    /// refused it.
    /// Run A: the project route's witness uploaded before the plants, one
    /// project per carrier, then the witness uploaded after them
    /// ([`crate::surface::witness`]).
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Pypi>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        super::between(
            jobs,
            Self::PLANTED_LAST,
            journal,
            |side, journal| {
                let _ = self.put(&witness_upload(ctx, side), journal);
            },
            |job, journal| {
                let u = upload_for(ctx, job.carrier, &job.nonce);
                match self.put(&u, journal) {
                    Err(o) => o,
                    Ok(()) => PlantOutcome::Planted {
                        needle: job.nonce,
                        persistence: None,
                        detail: format!(
                            "uploaded {} to {}",
                            escape::bytes(u.file.as_bytes()),
                            escape::bytes(self.settings.upload_url.as_bytes())
                        ),
                    },
                }
            },
        )
    }

    /// Run B: the root listing for `project-name` (its only route), the
    /// agreed projects' pages and metadata for the rest, and the check that
    /// the root lists what B reads by name.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Pypi, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<Recovered> {
        let named: Vec<String> = wanted
            .iter()
            .filter(|w| w.carrier == Pypi::ProjectName)
            .map(|w| w.needle.hex())
            .collect();
        // The root is project-name's route, and what shows that a 404 of
        // an agreed page is the index's: read once, when first needed.
        let mut root = (!named.is_empty()).then(|| self.scan_root(ctx, &named, notice));
        let mut named_seen = 0;
        let mut out = vec![];
        let mut readable: Vec<String> = vec![];
        for w in wanted {
            let (carrier, nonce) = (w.carrier, w.needle);
            // This carrier's place among `named` (and the root's hits).
            let named_at = named_seen;
            named_seen += usize::from(carrier == Pypi::ProjectName);
            if carrier == Pypi::ProjectName {
                // Its only route: the root's listing (the project's name is
                // the message, so B cannot ask for its page).
                out.push(match root.as_ref() {
                    Some(Err(e)) => e.clone(),
                    Some(Ok(r)) => match r.hits.get(named_at).cloned().flatten() {
                        Some(detail) => RecoverOutcome::Found { detail },
                        None if r.projects == 0 => RecoverOutcome::Error {
                            reason: format!(
                                "the simple index {} (HTTP 200) lists no project: \
                             not a simple index (a login or error page?)",
                                self.shown()
                            ),
                        },
                        None => RecoverOutcome::NotFound {
                            detail: format!(
                                "the simple index lists {} projects; none carries it",
                                r.projects
                            ),
                        },
                    },
                    None => RecoverOutcome::Error {
                        reason: "the simple index was not read".into(),
                    },
                });
                continue;
            }
            let needle = nonce.hex();
            let u = upload_for(ctx, carrier, &nonce);
            let read = match carrier {
                Pypi::Version | Pypi::FileName => self.read_page(&u.project, &needle),
                _ => self.read_description(&u.project, &needle),
            };
            let o = match read {
                Ok(o) => {
                    readable.push(u.project.clone());
                    o
                }
                Err(what) => {
                    let r = root.get_or_insert_with(|| self.scan_root(ctx, &named, notice));
                    self.absent(r, what, &u.project)
                }
            };
            out.push(o);
        }
        // The root's own currency: it lists every project of this plant
        // that B reads by name, and both witnesses (the later one was
        // uploaded after every plant).
        let root_why = match &root {
            Some(Ok(r)) => {
                let unlisted = readable.iter().filter(|n| !r.ours.contains(*n)).count();
                crate::surface::listing::search_witnessed(
                    readable.len(),
                    unlisted,
                    "projects",
                    "the simple index",
                )
            }
            _ => None,
        };
        let mut in_root = Seen::default();
        if let Some(Ok(r)) = &root {
            for side in Side::BOTH {
                if r.ours.contains(&witness_project(ctx, side)) {
                    in_root.saw(side);
                }
            }
        }
        let in_search = match root_why {
            Some(reason) => Currency::NotCurrent(reason),
            None => witness::currency("the simple index", in_root, || None),
        };
        crate::surface::routes::search_and_documents(
            out,
            wanted.iter().map(|w| w.carrier),
            Pypi::ProjectName,
            (ROOT, in_search),
            (PROJECT, || self.page_currency(ctx)),
        )
    }

    /// Cleanup by probe id: finding a probe's projects in the root's
    /// listing, and the versions and files each holds.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Pypi>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        let err = |o: RecoverOutcome| match o {
            RecoverOutcome::Error { reason } => Fault::Broken(reason),
            // The index's access control: no look can be had here.
            RecoverOutcome::Denied { reason } => Fault::Unsupported(reason),
            _ => Fault::broken("the simple index could not be read"),
        };
        // Only names whose tag verifies are kept while the root streams.
        let carriers: Vec<Pypi> = jobs.iter().map(|j| j.carrier).collect();
        let mut ours: Vec<String> = vec![];
        self.scan(&self.settings.simple_url, "text/html", &[], &mut |h| {
            let Some(name) = project_of(h) else { return };
            let witnessed = witness::is_witness(ctx, PROJECT, name, "");
            if witnessed || Pypi::tagged(ctx, name, "").is_some_and(|c| carriers.contains(&c)) {
                ours.push(name.to_string());
            }
        })
        .map_err(err)?
        .ok_or_else(|| Fault::broken("the simple index is not there (404)"))?;
        let mut found = vec![];
        for name in &ours {
            let name = name.as_str();
            let files = self.files(name).map_err(err)?.unwrap_or_default();
            let mut versions: Vec<String> =
                files.iter().filter_map(|(f, _)| version_of(f)).collect();
            versions.dedup();
            for v in versions {
                let fs: Vec<String> = files
                    .iter()
                    .filter(|(f, _)| version_of(f).as_deref() == Some(v.as_str()))
                    .map(|(f, _)| f.clone())
                    .collect();
                found.push(Entry {
                    project: name.to_string(),
                    version: v,
                    files: fs,
                });
            }
        }
        Ok(found.into())
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let (project, version) = (entry.project.as_str(), entry.version.as_str());
        // The project route's witnesses: exactly what one uploads.
        if let Some(side) = Side::BOTH
            .into_iter()
            .find(|s| witness_project(ctx, *s) == project)
        {
            let u = witness_upload(ctx, side);
            return (version == u.version && entry.files == [u.file])
                .then_some(())
                .ok_or_else(|| Fault::invalid("not what a witness uploads"));
        }
        let c = Pypi::owned(ctx, project, "", &|c| c == Pypi::ProjectName)?;
        let version_ok = match c {
            Pypi::Version => version
                .strip_prefix("0.0.0+")
                .is_some_and(|h| super::lower_hex(h, 32)),
            _ => version == "0.0.0",
        };
        let dist = project.replace('-', "_");
        let files_ok = match (c, entry.files.as_slice()) {
            (Pypi::FileName, [f]) => f
                .strip_prefix(&format!("{dist}-{version}-1"))
                .and_then(|r| r.strip_suffix("-py3-none-any.whl"))
                .is_some_and(|h| super::lower_hex(h, 32)),
            (_, [f]) => *f == format!("{dist}-{version}.tar.gz"),
            _ => false,
        };
        (version_ok && files_ok).then_some(()).ok_or_else(|| {
            Fault::invalid(format!(
                "its version or files are not what a {c} plant uploads"
            ))
        })
    }

    /// Deletes a version A uploaded after checking the project holds
    /// exactly A's files.
    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        let (project, version) = (entry.project.as_str(), entry.version.as_str());
        if !project.starts_with("runwarden-") || project.contains('/') || version.contains('/') {
            return CleanupOutcome::Left {
                reason: "not a runwarden project; nothing is deleted".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        // Checked before removal: the project holds exactly A's files.
        // Gone only when the root, asked too, does not list it either: a
        // page that reads as missing while the root lists the project is
        // stale, not gone.
        let gone = || match self.root_lists(project) {
            Ok(false) => CleanupOutcome::Gone,
            Ok(true) => left(format!(
                "not confirmed gone: its page reads as missing, but the simple index still lists {}",
                escape::bytes(project.as_bytes())
            )),
            Err(why) => left(format!(
                "not confirmed gone: its page reads as missing, and the simple index could not be read ({why})"
            )),
        };
        let mut have: Vec<String> = match self.files(project) {
            Ok(None) => return gone(),
            Ok(Some(f)) => f.into_iter().map(|(n, _)| n).collect(),
            Err(RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason }) => {
                return left(reason);
            }
            Err(_) => return left("the project page could not be read".into()),
        };
        let mut want = entry.files.clone();
        have.sort();
        want.sort();
        if have.is_empty() {
            return gone();
        }
        if have != want {
            return left(
                "the project holds files A did not upload: someone else uploaded to it".into(),
            );
        }
        let url = format!("{}{project}/{version}", self.settings.upload_url);
        let req = self.settings.auth.apply(Request::new(Method::DELETE, &url));
        match self
            .client()
            .and_then(|c| c.send(&req).map_err(|f| self.failure(f)))
        {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if answer::classify(&(&r).into(), &INDEX) == Class::Refused => left(format!(
                "the index refused to delete it (HTTP {}: {}); it stays until someone with the right removes it",
                r.status,
                excerpt(&r.body)
            )),
            Ok(r) => left(format!(
                "the index offers no deletion runwarden knows (DELETE <upload-url><project>/<version>: HTTP {}); remove it by hand",
                r.status
            )),
            Err(f) => left(f.into_reason()),
        }
    }

    /// Watch mode: the projects the simple index's root lists (the listing
    /// run B starts from).
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let mut all = Vec::new();
        let scanned = self
            .scan(&self.settings.simple_url, "text/html", &[], &mut |h| {
                if let Some(name) = project_of(h) {
                    all.push(listed(vec![component(name.as_bytes())], "project", &[]));
                }
            })
            .map_err(|o| match o {
                RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason } => {
                    SnapshotError::Failed(reason)
                }
                RecoverOutcome::Found { detail } | RecoverOutcome::NotFound { detail } => {
                    SnapshotError::Failed(detail)
                }
            })?;
        if scanned.is_none() {
            return Err(SnapshotError::Failed(format!(
                "the simple index {} is not there (404)",
                self.shown()
            )));
        }
        emit_sorted(all, sink)
    }
}

/// A project listed or gone carries its name.
fn changes_of(_change: &Change, _before: &Before) -> Vec<Pypi> {
    vec![Pypi::ProjectName]
}
