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

use super::{
    Carrier, CleanupOutcome, Control, HttpAuth, Notice, NoticeKind, Persistence, PlantJob,
    PlantOutcome, RecoverOutcome, RunCtx, Surface, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::http::{Failure, LazyClient, Request, check_url};
use crate::nonce::Nonce;
use crate::scan::{Marked, Needles};
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub struct PypiIndex;

static CARRIERS: &[Carrier] = &[
    Carrier {
        name: "project-name",
        persistence: Persistence::Durable,
        description: "the nonce in the name of an uploaded project, found in the simple index's listing",
    },
    Carrier {
        name: "version",
        persistence: Persistence::Durable,
        description: "the nonce in the version of a project both runs can name (a local version, 0.0.0+<nonce>)",
    },
    Carrier {
        name: "description",
        persistence: Persistence::Durable,
        description: "the nonce in the description (long_description) of a project both runs can name",
    },
    Carrier {
        name: "file-name",
        persistence: Persistence::Durable,
        description: "the nonce in the file name of a wheel (its build tag) of a project both runs can name",
    },
];

#[derive(Clone, Serialize, Deserialize)]
struct Settings {
    upload_url: String,
    /// The simple index root, ending in `/`.
    simple_url: String,
    /// A URL with `{project}` giving a project's metadata as JSON.
    json_url: Option<String>,
    auth: HttpAuth,
    control: bool,
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

fn upload_for(ctx: &RunCtx<'_>, carrier: &str, nonce: &Nonce) -> Upload {
    let project = super::tagged_name(
        ctx,
        carrier,
        (carrier == "project-name").then_some(nonce),
        "",
    );
    let version = if carrier == "version" {
        format!("0.0.0+{}", nonce.hex())
    } else {
        "0.0.0".to_string()
    };
    let mut description = format!("runwarden plant, probe {}\n", ctx.probe_id);
    if carrier == "description" {
        description += &format!("{}\n", nonce.hex());
    }
    let pkg_info = format!(
        "Metadata-Version: 2.1\nName: {project}\nVersion: {version}\nSummary: runwarden plant\n\n{description}"
    );
    let dist = project.replace('-', "_");
    if carrier == "file-name" {
        // A build tag must start with a digit.
        let file = format!("{dist}-{version}-1{}-py3-none-any.whl", nonce.hex());
        let info = format!("{dist}-{version}.dist-info");
        let wheel =
            "Wheel-Version: 1.0\nGenerator: runwarden\nRoot-Is-Purelib: true\nTag: py3-none-any\n";
        let record = format!("{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n");
        let data = crate::archive::zip_stored(&[
            (&format!("{info}/METADATA"), pkg_info.as_bytes()),
            (&format!("{info}/WHEEL"), wheel.as_bytes()),
            (&format!("{info}/RECORD"), record.as_bytes()),
        ]);
        return Upload {
            project,
            version,
            file,
            data,
            filetype: "bdist_wheel",
            pyversion: "py3",
            description,
        };
    }
    let file = format!("{dist}-{version}.tar.gz");
    let data = crate::archive::tgz(&[(&format!("{dist}-{version}/PKG-INFO"), pkg_info.as_bytes())]);
    Upload {
        project,
        version,
        file,
        data,
        filetype: "sdist",
        pyversion: "source",
        description,
    }
}

/// The version in a distribution file name (`name-version.tar.gz`, or a
/// wheel's second field).
fn version_of(file: &str) -> Option<String> {
    if let Some(stem) = file.strip_suffix(".whl") {
        return stem.split('-').nth(1).map(String::from);
    }
    let stem = file
        .strip_suffix(".tar.gz")
        .or_else(|| file.strip_suffix(".zip"))?;
    stem.rsplit_once('-').map(|(_, v)| v.to_string())
}

/// Whether a file name is a distribution an index serves.
fn is_dist(file: &str) -> bool {
    [".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz", ".egg"]
        .iter()
        .any(|e| file.ends_with(e))
}

/// The project a simple root's link points to: a relative or absolute
/// link ending in `/` whose last segment is a name. A login or error page
/// has links, but not of this form.
fn project_of(href: &str) -> Option<&str> {
    let href = href.split(['#', '?']).next().unwrap_or("");
    let name = href.strip_suffix('/')?.rsplit('/').next()?;
    let ok = !name.is_empty()
        && name != ".."
        && name != "."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    ok.then_some(name)
}

/// Every string under a `description` key, as the JSON views hold it
/// (Warehouse's `info`, devpi's `result.<version>`, a release's).
fn descriptions<'v>(v: &'v Value, depth: usize, out: &mut Vec<&'v str>) {
    let Some(m) = v.as_object() else { return };
    for (k, v) in m {
        match v.as_str() {
            Some(d) if k == "description" => out.push(d),
            _ if depth < 4 => descriptions(v, depth + 1, out),
            _ => {}
        }
    }
}

/// `href` resolved against the page it is on; the fragment dropped.
fn resolve(page: &str, href: &str) -> String {
    let href = href.split('#').next().unwrap_or("");
    if href.contains("://") {
        return href.to_string();
    }
    let origin_end = page
        .find("://")
        .map(|i| i + 3)
        .and_then(|i| page[i..].find('/').map(|j| i + j))
        .unwrap_or(page.len());
    if href.starts_with('/') {
        return format!("{}{href}", &page[..origin_end]);
    }
    let mut segs: Vec<&str> = page[origin_end..].split('/').collect();
    segs.pop(); // the page's own last segment (empty for a directory)
    for part in href.split('/') {
        match part {
            ".." => {
                if segs.len() > 1 {
                    segs.pop();
                }
            }
            "." => {}
            p => segs.push(p),
        }
    }
    format!("{}{}", &page[..origin_end], segs.join("/"))
}

impl SurfaceType for PypiIndex {
    fn name(&self) -> &'static str {
        "pypi-index"
    }

    fn description(&self) -> &'static str {
        "a PyPI-compatible index with an upload endpoint (twine's upload API; the simple index to read)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "upload-url",
            "simple-url",
            "json-url",
            "token-env",
            "username-env",
            "password-env",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
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
        Ok(serde_json::to_value(Settings {
            upload_url,
            simple_url,
            json_url,
            auth,
            control: false,
        })
        .expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, String> {
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

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        vec![
            ("credentials", s.auth.describe()),
            (
                "description-read-from",
                match &s.json_url {
                    Some(u) => escape::bytes(u.as_bytes()),
                    None => "the distribution's PKG-INFO".into(),
                },
            ),
        ]
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn Surface>, String> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| "bad pypi-index settings".to_string())?;
        let client = LazyClient::new(s.auth.secrets());
        Ok(Box::new(Instance { s, client }))
    }
}

struct Instance {
    s: Settings,
    client: LazyClient,
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
type Read = Result<RecoverOutcome, String>;

impl Instance {
    fn client(&self) -> Result<&crate::http::Client, String> {
        self.client.get()
    }

    fn shown(&self) -> String {
        escape::bytes(self.s.simple_url.as_bytes())
    }

    fn failure(&self, f: Failure) -> String {
        match f {
            Failure::Unreachable(m) => format!("cannot reach the index {}: {m}", self.shown()),
            Failure::Broken(m) => format!("at the index {}: {m}", self.shown()),
        }
    }

    /// GETs `url` (same origin as the index only), scanning as it arrives:
    /// each `href` goes to `href` at once (an index may list hundreds of
    /// thousands of projects; none is kept), needles are searched in the
    /// raw bytes across chunk edges. `Ok(None)` for 404.
    fn scan(
        &self,
        url: &str,
        accept: &str,
        needles: &[String],
        href: &mut dyn FnMut(&str),
    ) -> Result<Option<PageScan>, RecoverOutcome> {
        self.same_origin(url)?;
        let client = self
            .client()
            .map_err(|reason| RecoverOutcome::Failed { reason })?;
        let req = self
            .s
            .auth
            .apply(Request::new(Method::GET, url))
            .header("accept", accept);
        let mut hrefs = Marked::href_attributes();
        let mut raw = Needles::new(needles.to_vec());
        let (status, _) = client
            .stream(&req, &mut |chunk| {
                raw.feed(chunk);
                hrefs.feed(chunk, href);
                Ok(())
            })
            .map_err(|f| RecoverOutcome::Failed {
                reason: self.failure(f),
            })?;
        let shown = escape::bytes(url.as_bytes());
        match status {
            200 => Ok(Some(PageScan {
                found: (0..needles.len()).map(|i| raw.found(i)).collect(),
            })),
            404 => Ok(None),
            401 | 403 => Err(RecoverOutcome::Denied {
                reason: format!("the index refused {shown} (HTTP {status})"),
            }),
            s => Err(RecoverOutcome::Failed {
                reason: format!("reading {shown}: HTTP {s}"),
            }),
        }
    }

    /// Only the index's own origins get its credentials.
    fn same_origin(&self, url: &str) -> Result<(), RecoverOutcome> {
        let o = crate::http::origin(url);
        if o.is_none()
            || (o != crate::http::origin(&self.s.simple_url)
                && o != crate::http::origin(&self.s.upload_url))
        {
            return Err(RecoverOutcome::Failed {
                reason: format!(
                    "{} is on another origin; it is not fetched with the index's credentials",
                    escape::bytes(url.as_bytes())
                ),
            });
        }
        Ok(())
    }

    fn project_page(&self, project: &str) -> String {
        format!("{}{project}/", self.s.simple_url)
    }

    /// The distribution files a project's simple page links: (file name,
    /// absolute URL).
    fn files(&self, project: &str) -> Result<Option<Vec<(String, String)>>, RecoverOutcome> {
        let page = self.project_page(project);
        let mut files = vec![];
        let scanned = self.scan(&page, "text/html", &[], &mut |h| {
            let url = resolve(&page, h);
            let name = url.rsplit('/').next().unwrap_or("").to_string();
            if is_dist(&name) {
                files.push((name, url));
            }
        })?;
        Ok(scanned.map(|_| files))
    }

    /// Reads the root once, for the project-name needles: a 404 or a page
    /// without one project link is no simple index.
    fn scan_root(
        &self,
        ctx: &RunCtx<'_>,
        needles: &[String],
        notice: &mut dyn FnMut(Notice),
    ) -> Result<Root, RecoverOutcome> {
        let prefix = format!("runwarden-{}-", ctx.probe_id);
        let (mut projects, mut hits) = (0usize, vec![None; needles.len()]);
        let mut ours = std::collections::HashSet::new();
        let scanned = self.scan(&self.s.simple_url, "text/html", needles, &mut |h| {
            let Some(name) = project_of(h) else { return };
            projects += 1;
            if name.starts_with(&prefix) {
                ours.insert(name.to_string());
            }
            for (j, n) in needles.iter().enumerate() {
                if hits[j].is_none() && name.contains(n.as_str()) {
                    let shown = escape::bytes(name.as_bytes());
                    hits[j] = Some(format!("the simple index lists {shown}"));
                }
            }
            if name.starts_with(&prefix) && super::tagged_carrier(ctx, CARRIERS, name, "").is_none()
            {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name.as_bytes()),
                    detail: "a project name in this probe's form that no plant with this key made"
                        .into(),
                    beacon: None,
                });
            }
        })?;
        let Some(s) = scanned else {
            return Err(RecoverOutcome::Failed {
                reason: format!("the simple index {} is not there (404)", self.shown()),
            });
        };
        for (j, hit) in hits.iter_mut().enumerate() {
            if hit.is_none() && s.found[j] {
                *hit = Some("the simple index holds it".into());
            }
        }
        Ok(Root {
            projects,
            hits,
            ours,
        })
    }

    /// A 404 of an agreed page (`what` says whose): no such project when
    /// the root listed projects; else nothing shows this is the index.
    fn absent(&self, root: &Result<Root, RecoverOutcome>, what: String) -> RecoverOutcome {
        match root {
            Ok(r) if r.projects > 0 => RecoverOutcome::NotFound {
                detail: format!("{what} (the index lists {} projects)", r.projects),
            },
            Ok(_) => RecoverOutcome::Failed {
                reason: format!(
                    "{what}, and the root of {} lists no project: nothing shows it is the index",
                    self.shown()
                ),
            },
            Err(o) => RecoverOutcome::Failed {
                reason: format!(
                    "{what}, and nothing shows {} is the index: {}",
                    self.shown(),
                    match o {
                        RecoverOutcome::Failed { reason } | RecoverOutcome::Denied { reason } => {
                            reason.as_str()
                        }
                        _ => "",
                    }
                ),
            },
        }
    }

    /// An agreed project's simple page, for a file name or version that
    /// carries `needle`.
    fn read_page(&self, project: &str, needle: &str) -> Read {
        let shown = escape::bytes(project.as_bytes());
        let (mut hit, mut dists) = (None, 0usize);
        let page = self.project_page(project);
        let scanned = self.scan(&page, "text/html", &[needle.to_string()], &mut |h| {
            let file = h
                .split('#')
                .next()
                .unwrap_or(h)
                .rsplit('/')
                .next()
                .unwrap_or(h);
            dists += usize::from(is_dist(file));
            if hit.is_none() && h.contains(needle) {
                hit = Some(escape::bytes(file.as_bytes()));
            }
        });
        Ok(match (scanned, hit) {
            (Err(o), _) => o,
            (Ok(None), _) => return Err(format!("no project {shown}")),
            (Ok(Some(_)), Some(h)) => RecoverOutcome::Found {
                detail: format!("the simple page of {shown} links {h}"),
            },
            (Ok(Some(s)), None) if s.found[0] => RecoverOutcome::Found {
                detail: format!("the simple page of {shown} holds it"),
            },
            (Ok(Some(_)), None) if dists == 0 => RecoverOutcome::Failed {
                reason: format!(
                    "the page of {shown} (HTTP 200) links no distribution file: \
                     not a simple page (a login or error page?)"
                ),
            },
            (Ok(Some(_)), None) => RecoverOutcome::NotFound {
                detail: format!("the simple page of {shown} links {dists} files; none carries it"),
            },
        })
    }

    /// `json-url`'s document for `url`: `Ok(None)` for 404.
    fn fetch_json(&self, url: &str) -> Result<Option<Value>, RecoverOutcome> {
        self.same_origin(url)?;
        let failed = |reason| RecoverOutcome::Failed { reason };
        let req = self
            .s
            .auth
            .apply(Request::new(Method::GET, url))
            .header("accept", "application/json");
        let r = self
            .client()
            .map_err(failed)?
            .send(&req)
            .map_err(|f| failed(self.failure(f)))?;
        let shown = escape::bytes(url.as_bytes());
        match r.status {
            200 => match r.json().ok().filter(Value::is_object) {
                Some(v) => Ok(Some(v)),
                None => Err(failed(format!(
                    "{shown} answered 200 with something that is not a JSON object"
                ))),
            },
            404 => Ok(None),
            401 | 403 => Err(RecoverOutcome::Denied {
                reason: format!("the index refused {shown} (HTTP {})", r.status),
            }),
            s => Err(failed(format!("reading {shown}: HTTP {s}"))),
        }
    }

    /// description: `json-url`'s metadata, else the PKG-INFO of every
    /// file the project's page links.
    fn read_description(&self, project: &str, needle: &str) -> Read {
        let shown = escape::bytes(project.as_bytes());
        let needles = [needle.to_string()];
        if let Some(j) = &self.s.json_url {
            let url = j.replace("{project}", project);
            return Ok(match self.fetch_json(&url) {
                Err(o) => o,
                Ok(Some(doc)) => {
                    let mut found = vec![];
                    descriptions(&doc, 0, &mut found);
                    if doc.to_string().contains(needle) {
                        RecoverOutcome::Found {
                            detail: format!("the metadata of {shown} holds it"),
                        }
                    } else if found.is_empty() {
                        RecoverOutcome::Failed {
                            reason: format!(
                                "the metadata of {shown} from json-url has no description: \
                                 not the project's metadata"
                            ),
                        }
                    } else {
                        RecoverOutcome::NotFound {
                            detail: format!("the metadata of {shown} does not hold it"),
                        }
                    }
                }
                // json-url says no such project: its simple page agrees,
                // or json-url is not the index's.
                Ok(None) => match self.files(project) {
                    Err(o) => o,
                    Ok(None) => return Err(format!("no project {shown}")),
                    Ok(Some(_)) => RecoverOutcome::Failed {
                        reason: format!(
                            "json-url answers 404 for {shown}, whose simple page is there: \
                             is `json-url` the index's?"
                        ),
                    },
                },
            });
        }
        let files = match self.files(project) {
            Err(o) => return Ok(o),
            Ok(None) => return Err(format!("no project {shown}")),
            Ok(Some(f)) if f.is_empty() => {
                return Ok(RecoverOutcome::Failed {
                    reason: format!(
                        "the page of {shown} (HTTP 200) links no distribution file: \
                         not a simple page (a login or error page?)"
                    ),
                });
            }
            Ok(Some(f)) => f,
        };
        for (name, url) in &files {
            let file = escape::bytes(name.as_bytes());
            match self.scan(url, "application/octet-stream", &needles, &mut |_| {}) {
                Err(o) => return Ok(o),
                Ok(None) => {
                    return Ok(RecoverOutcome::Failed {
                        reason: format!(
                            "{file}, linked from the page of {shown}, is not there (404)"
                        ),
                    });
                }
                Ok(Some(s)) if s.found[0] => {
                    return Ok(RecoverOutcome::Found {
                        detail: format!("the PKG-INFO of {file} holds it"),
                    });
                }
                Ok(Some(_)) => {}
            }
        }
        Ok(RecoverOutcome::NotFound {
            detail: format!(
                "none of the {} distributions of {shown} holds it in its metadata",
                files.len()
            ),
        })
    }

    fn upload(&self, u: &Upload) -> Result<crate::http::Response, String> {
        let boundary = format!(
            "runwarden-{}",
            &crate::nonce::to_hex(&Sha256::digest(&u.data))[..24]
        );
        let mut body = Vec::new();
        let sha = crate::nonce::to_hex(&Sha256::digest(&u.data));
        let fields = [
            (":action", "file_upload"),
            ("protocol_version", "1"),
            ("metadata_version", "2.1"),
            ("name", u.project.as_str()),
            ("version", u.version.as_str()),
            ("filetype", u.filetype),
            ("pyversion", u.pyversion),
            ("summary", "runwarden plant"),
            ("description", u.description.as_str()),
            ("description_content_type", "text/plain"),
            ("sha256_digest", sha.as_str()),
        ];
        for (k, v) in fields {
            body.extend_from_slice(
                format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                )
                .as_bytes(),
            );
        }
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"content\"; filename=\"{}\"\r\nContent-Type: application/octet-stream\r\n\r\n", u.file).as_bytes(),
        );
        body.extend_from_slice(&u.data);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let req = self
            .s
            .auth
            .apply(Request::new(Method::POST, &self.s.upload_url))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .bytes(body);
        self.client()?.send(&req).map_err(|f| self.failure(f))
    }
}

/// A short, escaped excerpt of an error page (its title, if it has one).
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let t = text
        .split_once("<title>")
        .and_then(|(_, r)| r.split_once("</title>"))
        .map(|(t, _)| t.to_string())
        .unwrap_or_else(|| text.chars().take(120).collect());
    escape::bytes(t.trim().as_bytes())
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
        let u = upload_for(ctx, &job.carrier, &job.nonce);
        let entry = json!({ "project": u.project, "version": u.version, "files": [u.file] });
        created(entry.clone());
        let shown = escape::bytes(u.file.as_bytes());
        let upload = self.upload(&u);
        // A 4xx says nothing was uploaded; a 5xx may come after it was
        // (a gateway's), so the entry stays journalled.
        if upload
            .as_ref()
            .is_ok_and(|r| (400..500).contains(&r.status))
        {
            created(super::retraction(&entry));
        }
        match upload {
            Err(reason) => PlantOutcome::Failed { reason },
            // A 403 that says the file exists is a conflict, not the
            // index's access control.
            Ok(r) if (r.status == 401 || r.status == 403) && !super::says_exists(&r.body) => {
                PlantOutcome::Refused {
                    reason: format!(
                        "the index refused the upload (HTTP {}: {})",
                        r.status,
                        excerpt(&r.body)
                    ),
                }
            }
            Ok(r) if (200..300).contains(&r.status) => PlantOutcome::Planted {
                needle: Value::String(job.nonce.hex()),
                persistence: None,
                detail: format!(
                    "uploaded {shown} to {}",
                    escape::bytes(self.s.upload_url.as_bytes())
                ),
            },
            Ok(r) => PlantOutcome::Failed {
                reason: format!("uploading {shown}: HTTP {} {}", r.status, excerpt(&r.body)),
            },
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let named: Vec<String> = wanted
            .iter()
            .filter(|w| w.carrier == "project-name")
            .map(|w| w.needle.as_str().unwrap_or("").to_string())
            .collect();
        // The root is project-name's route, and what shows that a 404 of
        // an agreed page is the index's: read once, when first needed.
        let mut root = (!named.is_empty()).then(|| self.scan_root(ctx, &named, notice));
        let mut named_seen = 0;
        let mut out = vec![];
        let mut readable: Vec<String> = vec![];
        for w in wanted {
            // This carrier's place among `named` (and the root's hits).
            let named_at = named_seen;
            named_seen += usize::from(w.carrier == "project-name");
            let nonce = match super::wanted_nonce(w) {
                Ok(n) => n,
                Err(o) => {
                    out.push(o);
                    continue;
                }
            };
            if w.carrier == "project-name" {
                // Its only route: the root's listing (the project's name is
                // the message, so B cannot ask for its page).
                out.push(match root.as_ref() {
                    Some(Err(e)) => e.clone(),
                    Some(Ok(r)) => match r.hits.get(named_at).cloned().flatten() {
                        Some(detail) => RecoverOutcome::Found { detail },
                        None if r.projects == 0 => RecoverOutcome::Failed {
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
                    None => RecoverOutcome::Failed {
                        reason: "the simple index was not read".into(),
                    },
                });
                continue;
            }
            let needle = nonce.hex();
            let u = upload_for(ctx, &w.carrier, &nonce);
            let read = match w.carrier.as_str() {
                "version" | "file-name" => self.read_page(&u.project, &needle),
                _ => self.read_description(&u.project, &needle),
            };
            let o = match read {
                Ok(o) => {
                    readable.push(u.project.clone());
                    o
                }
                Err(what) => {
                    let r = root.get_or_insert_with(|| self.scan_root(ctx, &named, notice));
                    self.absent(r, what)
                }
            };
            out.push(o);
        }
        // A root that lags does not list what exists: when it lists none
        // of the projects B reads by name, a miss there is no look at all.
        if let Some(Ok(r)) = &root
            && !readable.is_empty()
            && !readable.iter().any(|n| r.ours.contains(n))
        {
            for (o, w) in out.iter_mut().zip(wanted) {
                if w.carrier == "project-name" && matches!(o, RecoverOutcome::NotFound { .. }) {
                    *o = RecoverOutcome::Failed {
                        reason: format!(
                            "the simple index lists none of the {} projects of this probe that run B reads by name: it lags or is incomplete, so it not listing the project-name plant proves nothing",
                            readable.len()
                        ),
                    };
                }
            }
        }
        out
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        let err = |o: RecoverOutcome| match o {
            RecoverOutcome::Failed { reason } | RecoverOutcome::Denied { reason } => reason,
            _ => "the simple index could not be read".into(),
        };
        // Only names whose tag verifies are kept while the root streams.
        let mut ours: Vec<String> = vec![];
        self.scan(&self.s.simple_url, "text/html", &[], &mut |h| {
            let Some(name) = project_of(h) else { return };
            if super::tagged_carrier(ctx, CARRIERS, name, "")
                .is_some_and(|c| jobs.iter().any(|j| j.carrier == c))
            {
                ours.push(name.to_string());
            }
        })
        .map_err(err)?
        .ok_or("the simple index is not there (404)")?;
        let mut found = vec![];
        for name in &ours {
            let name = name.as_str();
            let files = self.files(name).map_err(err)?.unwrap_or_default();
            let mut versions: Vec<String> =
                files.iter().filter_map(|(f, _)| version_of(f)).collect();
            versions.dedup();
            for v in versions {
                let fs: Vec<&String> = files
                    .iter()
                    .filter(|(f, _)| version_of(f).as_deref() == Some(v.as_str()))
                    .map(|(f, _)| f)
                    .collect();
                found.push(json!({ "project": name, "version": v, "files": fs }));
            }
        }
        Ok(found)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        let project = entry["project"].as_str().unwrap_or("");
        let version = entry["version"].as_str().unwrap_or("");
        if !project.starts_with("runwarden-") || project.contains('/') || version.contains('/') {
            return CleanupOutcome::Left {
                reason: "not a runwarden project; nothing is deleted".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        // Checked before removal: the project holds exactly A's files.
        let mut have: Vec<String> = match self.files(project) {
            Ok(None) => return CleanupOutcome::Gone,
            Ok(Some(f)) => f.into_iter().map(|(n, _)| n).collect(),
            Err(RecoverOutcome::Failed { reason } | RecoverOutcome::Denied { reason }) => {
                return left(reason);
            }
            Err(_) => return left("the project page could not be read".into()),
        };
        let mut want = super::string_array(&entry["files"]);
        have.sort();
        want.sort();
        if have.is_empty() {
            return CleanupOutcome::Gone;
        }
        if have != want {
            return left(
                "the project holds files A did not upload: someone else uploaded to it".into(),
            );
        }
        let url = format!("{}{project}/{version}", self.s.upload_url);
        let req = self.s.auth.apply(Request::new(Method::DELETE, &url));
        match self
            .client()
            .and_then(|c| c.send(&req).map_err(|f| self.failure(f)))
        {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 401 || r.status == 403 => left(format!(
                "the index refused to delete it (HTTP {}: {}); it stays until someone with the right removes it",
                r.status,
                excerpt(&r.body)
            )),
            Ok(r) => left(format!(
                "the index offers no deletion runwarden knows (DELETE <upload-url><project>/<version>: HTTP {}); remove it by hand",
                r.status
            )),
            Err(m) => left(m),
        }
    }

    fn describe(&self, entry: &Value) -> String {
        format!(
            "{} {} on {}",
            escape::bytes(entry["project"].as_str().unwrap_or("?").as_bytes()),
            escape::bytes(entry["version"].as_str().unwrap_or("?").as_bytes()),
            if self.s.control {
                "the control".to_string()
            } else {
                self.shown()
            }
        )
    }
}
