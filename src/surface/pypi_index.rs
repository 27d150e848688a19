//! `type: pypi-index`: a PyPI-compatible index with an upload endpoint
//! (devpi, Artifactory, Nexus, pypiserver) that two runs can both reach.
//!
//! Run A uploads one small distribution per carrier through the legacy
//! upload API, as twine does (`multipart/form-data`,
//! `:action=file_upload`). Run B reads the simple index (PEP 503): the
//! root page for project names, a project's page for its file names and
//! versions, and the project's metadata (a JSON view when configured, else
//! the distribution's own PKG-INFO) for the description. Cleanup deletes
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
        if crate::http::origin(url).is_none()
            || (crate::http::origin(url) != crate::http::origin(&self.s.simple_url)
                && crate::http::origin(url) != crate::http::origin(&self.s.upload_url))
        {
            return Err(RecoverOutcome::Failed {
                reason: format!(
                    "{} is on another origin; it is not fetched with the index's credentials",
                    escape::bytes(url.as_bytes())
                ),
            });
        }
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

    fn project_page(&self, project: &str) -> String {
        format!("{}{project}/", self.s.simple_url)
    }

    /// The files a project's simple page links: (file name, absolute URL).
    fn files(&self, project: &str) -> Result<Option<Vec<(String, String)>>, RecoverOutcome> {
        let page = self.project_page(project);
        let mut files = vec![];
        let scanned = self.scan(&page, "text/html", &[], &mut |h| {
            let url = resolve(&page, h);
            files.push((url.rsplit('/').next().unwrap_or("").to_string(), url));
        })?;
        Ok(scanned.map(|_| files))
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
        // Any answer but success: nothing was uploaded.
        if upload
            .as_ref()
            .is_ok_and(|r| !(200..300).contains(&r.status))
        {
            created(super::retraction(&entry));
        }
        match upload {
            Err(reason) => PlantOutcome::Failed { reason },
            Ok(r) if r.status == 401 || r.status == 403 => PlantOutcome::Refused {
                reason: format!(
                    "the index refused the upload (HTTP {}: {})",
                    r.status,
                    excerpt(&r.body)
                ),
            },
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
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        for (i, w) in wanted.iter().enumerate() {
            let nonce = match super::wanted_nonce(w) {
                Ok(n) => n,
                Err(o) => {
                    out[i] = Some(o);
                    continue;
                }
            };
            let hex = nonce.hex();
            let needle = hex.as_str();
            let needles = [needle.to_string()];
            let u = upload_for(ctx, &w.carrier, &nonce);
            let project = escape::bytes(u.project.as_bytes());
            out[i] = Some(match w.carrier.as_str() {
                "project-name" => {
                    let prefix = format!("runwarden-{}-", ctx.probe_id);
                    let (mut listed, mut hit) = (0usize, None);
                    let scanned = self.scan(&self.s.simple_url, "text/html", &needles, &mut |h| {
                        listed += 1;
                        let name = h.trim_end_matches('/').rsplit('/').next().unwrap_or("");
                        if hit.is_none() && name.contains(needle) {
                            hit = Some(escape::bytes(name.as_bytes()));
                        }
                        if name.starts_with(&prefix)
                            && super::tagged_carrier(ctx, CARRIERS, name, "").is_none()
                        {
                            notice(Notice {
                                kind: NoticeKind::ForgedMarker,
                                entry: escape::bytes(name.as_bytes()),
                                detail: "a project name in this probe's form that no plant with this key made".into(),
                                beacon: None,
                            });
                        }
                    });
                    match (scanned, hit) {
                        (Err(o), _) => o,
                        (Ok(None), _) => RecoverOutcome::Failed {
                            reason: format!("the simple index {} is not there (404)", self.shown()),
                        },
                        (Ok(Some(_)), Some(h)) => RecoverOutcome::Found {
                            detail: format!("the simple index lists {h}"),
                        },
                        (Ok(Some(s)), None) if s.found[0] => RecoverOutcome::Found {
                            detail: "the simple index holds it".into(),
                        },
                        (Ok(Some(_)), None) => RecoverOutcome::NotFound {
                            detail: format!(
                                "the simple index lists {listed} projects; none carries it"
                            ),
                        },
                    }
                }
                "version" | "file-name" => {
                    let mut hit = None;
                    let page = self.project_page(&u.project);
                    let scanned = self.scan(&page, "text/html", &needles, &mut |h| {
                        if hit.is_none() && h.contains(needle) {
                            hit = Some(escape::bytes(h.rsplit('/').next().unwrap_or(h).as_bytes()));
                        }
                    });
                    match (scanned, hit) {
                        (Err(o), _) => o,
                        (Ok(None), _) => RecoverOutcome::NotFound {
                            detail: format!("no project {project}"),
                        },
                        (Ok(Some(_)), Some(h)) => RecoverOutcome::Found {
                            detail: format!("the simple page of {project} links {h}"),
                        },
                        (Ok(Some(s)), None) if s.found[0] => RecoverOutcome::Found {
                            detail: format!("the simple page of {project} holds it"),
                        },
                        (Ok(Some(_)), None) => RecoverOutcome::NotFound {
                            detail: format!("the simple page of {project} does not carry it"),
                        },
                    }
                }
                _ => match &self.s.json_url {
                    Some(j) => {
                        let url = j.replace("{project}", &u.project);
                        match self.scan(&url, "application/json", &needles, &mut |_| {}) {
                            Err(o) => o,
                            Ok(None) => RecoverOutcome::NotFound {
                                detail: format!("no project {project}"),
                            },
                            Ok(Some(s)) if s.found[0] => RecoverOutcome::Found {
                                detail: format!("the metadata of {project} holds it"),
                            },
                            Ok(Some(_)) => RecoverOutcome::NotFound {
                                detail: format!("the metadata of {project} does not hold it"),
                            },
                        }
                    }
                    None => match self.files(&u.project) {
                        Err(o) => o,
                        Ok(None) => RecoverOutcome::NotFound {
                            detail: format!("no project {project}"),
                        },
                        Ok(Some(files)) => {
                            let mut res = RecoverOutcome::NotFound {
                                detail: format!(
                                    "no distribution of {project} holds it in its metadata"
                                ),
                            };
                            for (name, url) in files {
                                match self.scan(
                                    &url,
                                    "application/octet-stream",
                                    &needles,
                                    &mut |_| {},
                                ) {
                                    Err(o) => {
                                        res = o;
                                        break;
                                    }
                                    Ok(Some(s)) if s.found[0] => {
                                        res = RecoverOutcome::Found {
                                            detail: format!(
                                                "the PKG-INFO of {} holds it",
                                                escape::bytes(name.as_bytes())
                                            ),
                                        };
                                        break;
                                    }
                                    Ok(_) => {}
                                }
                            }
                            res
                        }
                    },
                },
            });
        }
        super::all_outcomes(out)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, String> {
        let err = |o: RecoverOutcome| match o {
            RecoverOutcome::Failed { reason } | RecoverOutcome::Denied { reason } => reason,
            _ => "the simple index could not be read".into(),
        };
        // Only names whose tag verifies are kept while the root streams.
        let mut ours: Vec<String> = vec![];
        self.scan(&self.s.simple_url, "text/html", &[], &mut |h| {
            let name = h.trim_end_matches('/').rsplit('/').next().unwrap_or("");
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

    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        super::cleanup_unretracted(self, entries)
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
