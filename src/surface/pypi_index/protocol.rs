//! The index as both runs reach it: bounded requests with the surface's
//! credentials, the simple index's root and project pages streamed (with
//! what makes a page one), distributions searched as they arrive, and
//! the names and versions in file names.

use super::plant::witness_project;
use super::{Looked, PageScan, Pypi, PypiIndex, Root, Upload};
use crate::escape;
use crate::fault::Fault;
use crate::http::answer::{self, Answer, Class, Server};
use crate::http::{Failure, Request};
use crate::scan::{Marked, Needles};
use crate::surface::carrier::CarrierSet;
use crate::surface::witness::{self, Currency, Seen, Side};
use crate::surface::{Notice, NoticeKind, RecoverOutcome, RunCtx};
use ::http::Method;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The version in a distribution file name (`name-version.tar.gz`, or a
/// wheel's second field).
pub(super) fn version_of(file: &str) -> Option<String> {
    if let Some(stem) = file.strip_suffix(".whl") {
        return stem.split('-').nth(1).map(String::from);
    }
    let stem = file
        .strip_suffix(".tar.gz")
        .or_else(|| file.strip_suffix(".zip"))?;
    stem.rsplit_once('-').map(|(_, v)| v.to_string())
}

/// Whether a file name is a distribution an index serves.
pub(super) fn is_dist(file: &str) -> bool {
    [".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz", ".egg"]
        .iter()
        .any(|e| file.ends_with(e))
}

/// The project a simple root's link points to: a relative or absolute
/// link ending in `/` whose last segment is a name. A login or error page
/// has links, but not of this form.
pub(super) fn project_of(href: &str) -> Option<&str> {
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
pub(super) fn descriptions<'v>(v: &'v Value, depth: usize, out: &mut Vec<&'v str>) {
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
pub(super) fn resolve(page: &str, href: &str) -> String {
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

/// How a package index answers ([`crate::http::answer`]): its access
/// control refuses with 401 or 403, and an upload of a file that exists
/// with a refusal status that says so ("File already exists"): a
/// conflict. Every answer counts as the index's own: indexes answer
/// errors as text or HTML of their own making (PyPI's plain text, devpi's
/// and pypiserver's pages), and the simple API (PEP 503, 691) defines no
/// error body that would tell an index's refusal from a proxy's.
pub(super) const INDEX: Server<'static> = Server {
    refusals: &[401, 403],
    own: &answer::any,
    refuses: &answer::any,
    exists: &answer::says_exists,
};

impl PypiIndex {
    pub(super) fn client(&self) -> Result<&crate::http::Client, Fault> {
        self.client.get()
    }

    pub(super) fn shown(&self) -> String {
        escape::bytes(self.settings.simple_url.as_bytes())
    }

    /// A call that got no answer, said of this index (its kind kept).
    pub(super) fn failure(&self, f: Failure) -> Fault {
        match f {
            Failure::Unreachable(m) => {
                Fault::Unreachable(format!("cannot reach the index {}: {m}", self.shown()))
            }
            Failure::Broken(m) => Fault::broken(format!("at the index {}: {m}", self.shown())),
        }
    }

    /// GETs `url` (same origin as the index only), scanning as it arrives:
    /// each `href` goes to `href` at once (an index may list hundreds of
    /// thousands of projects; none is kept), needles are searched in the
    /// raw bytes across chunk edges. `Ok(None)` for 404.
    pub(super) fn scan(
        &self,
        url: &str,
        accept: &str,
        needles: &[String],
        href: &mut dyn FnMut(&str),
    ) -> Result<Option<PageScan>, RecoverOutcome> {
        self.same_origin(url)?;
        let client = self
            .client()
            .map_err(|f| RecoverOutcome::Error { reason: f.into() })?;
        let req = self
            .settings
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
            .map_err(|f| RecoverOutcome::Error {
                reason: self.failure(f).into_reason(),
            })?;
        let shown = escape::bytes(url.as_bytes());
        if status == 200 {
            return Ok(Some(PageScan {
                found: (0..needles.len()).map(|i| raw.found(i)).collect(),
            }));
        }
        match answer::classify(&Answer::status(status), &INDEX) {
            Class::Absent => Ok(None),
            Class::Refused => Err(RecoverOutcome::Denied {
                reason: format!("the index refused {shown} (HTTP {status})"),
            }),
            _ => Err(RecoverOutcome::Error {
                reason: format!("reading {shown}: HTTP {status}"),
            }),
        }
    }

    /// Only the index's own origins get its credentials.
    pub(super) fn same_origin(&self, url: &str) -> Result<(), RecoverOutcome> {
        let o = crate::http::origin(url);
        if o.is_none()
            || (o != crate::http::origin(&self.settings.simple_url)
                && o != crate::http::origin(&self.settings.upload_url))
        {
            return Err(RecoverOutcome::Error {
                reason: format!(
                    "{} is on another origin; it is not fetched with the index's credentials",
                    escape::bytes(url.as_bytes())
                ),
            });
        }
        Ok(())
    }

    pub(super) fn project_page(&self, project: &str) -> String {
        format!("{}{project}/", self.settings.simple_url)
    }

    /// The distribution files a project's simple page links: (file name,
    /// absolute URL).
    pub(super) fn files(
        &self,
        project: &str,
    ) -> Result<Option<Vec<(String, String)>>, RecoverOutcome> {
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

    /// What the project route's witnesses say of its misses: each
    /// witness's simple page read by name, as run B reads the plants'
    /// (which decides their misses through `json-url` too). No wider
    /// route: the root reads with the same credentials, so it listing
    /// what the pages miss is a contradiction, not isolation.
    pub(super) fn page_currency(&self, ctx: &RunCtx<'_>) -> Currency {
        let mut seen = Seen::default();
        for side in Side::BOTH {
            match self.files(&witness_project(ctx, side)) {
                Ok(Some(files)) if !files.is_empty() => seen.saw(side),
                Ok(_) => {}
                Err(RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason }) => {
                    return Currency::NotCurrent(format!(
                        "reading the page of the witness run A uploaded {} the plant failed: {reason}",
                        side.name()
                    ));
                }
                Err(_) => {}
            }
        }
        witness::currency("the project-page route", seen, || None)
    }

    /// Whether the root lists exactly `project` (cleanup's second route,
    /// before it counts a project gone): why not, when it cannot be read
    /// as an index.
    pub(super) fn root_lists(&self, project: &str) -> Result<bool, String> {
        let mut listed = false;
        let scanned = self.scan(&self.settings.simple_url, "text/html", &[], &mut |h| {
            listed |= project_of(h) == Some(project);
        });
        match scanned {
            Ok(Some(_)) => Ok(listed),
            Ok(None) => Err(format!("{} is not there (404)", self.shown())),
            Err(RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason }) => {
                Err(reason)
            }
            Err(_) => Err("the simple index could not be read".into()),
        }
    }

    /// Reads the root once, for the project-name needles: a 404 or a page
    /// without one project link is no simple index.
    pub(super) fn scan_root(
        &self,
        ctx: &RunCtx<'_>,
        needles: &[String],
        notice: &mut dyn FnMut(Notice),
    ) -> Result<Root, RecoverOutcome> {
        let prefix = format!("runwarden-{}-", ctx.probe_id);
        let (mut projects, mut hits) = (0usize, vec![None; needles.len()]);
        let mut ours = std::collections::HashSet::new();
        let scanned = self.scan(&self.settings.simple_url, "text/html", needles, &mut |h| {
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
            if name.starts_with(&prefix)
                && Pypi::tagged(ctx, name, "").is_none()
                && !witness::is_witness(ctx, super::plant::PROJECT, name, "")
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
            return Err(RecoverOutcome::Error {
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
    pub(super) fn absent(
        &self,
        root: &Result<Root, RecoverOutcome>,
        what: String,
        project: &str,
    ) -> RecoverOutcome {
        match root {
            // The root lists the very project whose page reads as missing:
            // the two routes contradict each other (a stale page behind a
            // cache), and the page's silence is no look.
            Ok(r) if r.ours.contains(project) => RecoverOutcome::Error {
                reason: format!(
                    "not current: {what}, while the simple index lists {}: the routes contradict each other (a stale page), so its absence proves nothing",
                    escape::bytes(project.as_bytes())
                ),
            },
            Ok(r) if r.projects > 0 => RecoverOutcome::NotFound {
                detail: format!("{what} (the index lists {} projects)", r.projects),
            },
            Ok(_) => RecoverOutcome::Error {
                reason: format!(
                    "{what}, and the root of {} lists no project: nothing shows it is the index",
                    self.shown()
                ),
            },
            Err(o) => RecoverOutcome::Error {
                reason: format!(
                    "{what}, and nothing shows {} is the index: {}",
                    self.shown(),
                    match o {
                        RecoverOutcome::Error { reason } | RecoverOutcome::Denied { reason } => {
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
    pub(super) fn read_page(&self, project: &str, needle: &str) -> Looked {
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
            (Ok(Some(_)), None) if dists == 0 => RecoverOutcome::Error {
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
    pub(super) fn fetch_json(&self, url: &str) -> Result<Option<Value>, RecoverOutcome> {
        self.same_origin(url)?;
        let failed = |reason| RecoverOutcome::Error { reason };
        let fault = |f: Fault| failed(f.into_reason());
        let req = self
            .settings
            .auth
            .apply(Request::new(Method::GET, url))
            .header("accept", "application/json");
        let r = self
            .client()
            .map_err(fault)?
            .send(&req)
            .map_err(|f| fault(self.failure(f)))?;
        let shown = escape::bytes(url.as_bytes());
        if r.status == 200 {
            return match r.json().ok().filter(Value::is_object) {
                Some(v) => Ok(Some(v)),
                None => Err(failed(format!(
                    "{shown} answered 200 with something that is not a JSON object"
                ))),
            };
        }
        match answer::classify(&(&r).into(), &INDEX) {
            Class::Absent => Ok(None),
            Class::Refused => Err(RecoverOutcome::Denied {
                reason: format!("the index refused {shown} (HTTP {})", r.status),
            }),
            _ => Err(failed(format!("reading {shown}: HTTP {}", r.status))),
        }
    }

    /// description: `json-url`'s metadata, else the PKG-INFO of every
    /// file the project's page links.
    pub(super) fn read_description(&self, project: &str, needle: &str) -> Looked {
        let shown = escape::bytes(project.as_bytes());
        let needles = [needle.to_string()];
        if let Some(j) = &self.settings.json_url {
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
                        RecoverOutcome::Error {
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
                    Ok(Some(_)) => RecoverOutcome::Error {
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
                return Ok(RecoverOutcome::Error {
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
                    return Ok(RecoverOutcome::Error {
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

    /// One upload; `Unreachable` or `Broken` when there was no answer.
    pub(super) fn upload(&self, u: &Upload) -> Result<crate::http::Response, Fault> {
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
            .settings
            .auth
            .apply(Request::new(Method::POST, &self.settings.upload_url))
            .header(
                "content-type",
                format!("multipart/form-data; boundary={boundary}"),
            )
            .bytes(body);
        self.client()?.send(&req).map_err(|f| self.failure(f))
    }
}

/// A short, escaped excerpt of an error page (its title, if it has one).
pub(super) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let t = text
        .split_once("<title>")
        .and_then(|(_, r)| r.split_once("</title>"))
        .map(|(t, _)| t.to_string())
        .unwrap_or_else(|| text.chars().take(120).collect());
    escape::bytes(t.trim().as_bytes())
}
