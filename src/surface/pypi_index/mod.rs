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

mod cleanup;
mod plant;
mod protocol;
mod recover;
mod watch;

use super::carrier::{CarrierSet, carriers};
use super::{
    About, CleanupOutcome, Control, HttpAuth, Job, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Want, Watch,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
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
    };
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
        let auth = HttpAuth::from_config(&mut opts)?.bearer_as_basic("__token__");
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
            Some(why) => about.unavailable(why.clone()),
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
        Ok(Control::served(s, server))
    }

    fn open(settings: Settings) -> Result<PypiIndex, Fault> {
        let client = LazyClient::new(settings.auth.secrets());
        Ok(PypiIndex { settings, client })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Pypi>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        super::each(jobs, |job| self.plant_one(ctx, job, journal))
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Pypi, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Pypi>]) -> Result<Vec<Entry>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let (project, version) = (entry.project.as_str(), entry.version.as_str());
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

    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        entries.iter().map(|e| self.clean_entry(e)).collect()
    }

    fn snapshot(&self, ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        self.snapshot_root(ctx, sink)
    }

    /// A project listed or gone carries its name.
    fn changes(_change: &Change, _before: &Before) -> Vec<Pypi> {
        vec![Pypi::ProjectName]
    }
}
