//! A loopback PyPI-compatible index: the `pypi-index` control. It speaks
//! what twine and pip use, as devpi-server does:
//!
//! - `POST /`: the legacy upload API (`multipart/form-data`,
//!   `:action=file_upload`, `name`, `version`, `description`, …, `content`);
//!   a file that exists is 409, a file name without the version is 400;
//! - `GET /+simple/` and `GET /+simple/<project>/`: the simple index
//!   (PEP 503); files at `GET /+f/<project>/<file>`;
//! - `GET /<project>/json`: each version's metadata and files;
//! - `DELETE /<project>/<version>`: removes a version (devpi's API).
//!
//! Every request needs basic auth with a user it minted
//! ([`PypiServer::user`]). Its project pages can be made stale
//! ([`super::Knob::StaleDocument`]).

use super::{Reply, lock};
use crate::fault::Fault;
use crate::wire::percent_decode;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

#[derive(Clone, Debug, Default)]
pub struct Release {
    pub description: String,
    /// file name -> content.
    pub files: BTreeMap<String, Vec<u8>>,
}

#[derive(Default)]
pub struct State {
    /// project -> version -> release.
    pub projects: BTreeMap<String, BTreeMap<String, Release>>,
    passwords: HashMap<String, String>,
    /// A stale front: project pages (simple and JSON) read as missing,
    /// while the root, files by exact URL and uploads are current.
    stale: bool,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        super::knobs::stale_document(&mut self.stale, knob, on)
    }
}

/// The index; [`PypiServer::start`] starts one.
pub type PypiServer = super::Service<State>;

impl super::Service<State> {
    pub fn start() -> Result<PypiServer, Fault> {
        super::Service::serve(State::default(), serve)
    }

    /// The upload URL (ends in `/`).
    pub fn upload_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn simple_url(&self) -> String {
        format!("http://127.0.0.1:{}/+simple/", self.port)
    }

    pub fn json_url(&self) -> String {
        format!("http://127.0.0.1:{}/{{project}}/json", self.port)
    }

    /// A fresh user: (name, password).
    pub fn user(&self) -> Result<(String, String), Fault> {
        let (u, p) = (format!("u{}", &super::secret()?[..8]), super::secret()?);
        self.lock().passwords.insert(u.clone(), p.clone());
        Ok((u, p))
    }
}

/// PEP 503 normalization: lower case, runs of `-_.` become `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// The parts of a `multipart/form-data` body: (name, file name, content).
pub fn multipart(content_type: &str, body: &[u8]) -> Vec<(String, Option<String>, Vec<u8>)> {
    let Some(boundary) = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .map(|b| b.trim_matches('"'))
    else {
        return vec![];
    };
    let delim = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delim.as_bytes());
    let marks: Vec<usize> = finder.find_iter(body).collect();
    let mut out = vec![];
    for w in marks.windows(2) {
        let part = &body[w[0] + delim.len()..w[1]];
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let Some(split) = memchr::memmem::find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..split]).into_owned();
        let attr = |key: &str| {
            let pat = format!("{key}=\"");
            let i = head.find(&pat)? + pat.len();
            let j = head[i..].find('"')?;
            Some(head[i..i + j].to_string())
        };
        if let Some(name) = attr(" name").or_else(|| attr(";name")) {
            out.push((name, attr("filename"), part[split + 4..].to_vec()));
        }
    }
    out
}

/// A simple-index page of links.
fn simple_page(links: &[String]) -> Reply {
    let html = format!(
        "<!DOCTYPE html><html><body>{}</body></html>",
        links.join("\n")
    );
    Reply::new(200, html.into_bytes(), &[("Content-Type", "text/html")])
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, _port: u16) {
    let method = req.method().as_str().to_ascii_uppercase();
    let path = percent_decode(req.url().split('?').next().unwrap_or("/"));
    let content_type = super::header(&req, "content-type").unwrap_or_default();
    let body = super::body(&mut req);
    let mut st = lock(state);
    let reply = route(&mut st, &req, &method, &path, &content_type, &body);
    drop(st);
    reply.send(req);
}

/// Basic auth, then one handler per endpoint.
fn route(
    st: &mut State,
    req: &tiny_http::Request,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> Reply {
    if super::who(req, &HashMap::new(), &st.passwords).is_none() {
        return Reply::new(
            401,
            b"authentication required".to_vec(),
            &[("WWW-Authenticate", "Basic realm=\"pypi\"")],
        );
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        ("POST", [""]) => upload(st, content_type, body),
        ("GET", ["+simple"]) => {
            let links: Vec<String> = st
                .projects
                .keys()
                .map(|p| format!("<a href=\"{p}/\">{p}</a><br>"))
                .collect();
            simple_page(&links)
        }
        ("GET", ["+simple", _] | [_, "json"]) if st.stale => Reply::empty(404),
        ("GET", ["+simple", project]) => project_page(st, project),
        ("GET", ["+f", project, file]) => {
            let data = st
                .projects
                .get(*project)
                .and_then(|p| p.values().find_map(|r| r.files.get(*file)))
                .cloned();
            match data {
                Some(d) => Reply::new(200, d, &[("Content-Type", "application/octet-stream")]),
                None => Reply::empty(404),
            }
        }
        ("GET", [project, "json"]) => project_json(st, project),
        ("DELETE", [project, version]) => remove_version(st, project, version),
        _ => Reply::empty(404),
    }
}

/// `POST /`: the legacy upload API (`:action=file_upload`); a file that
/// exists is 409, a file name without the version is 400.
fn upload(st: &mut State, content_type: &str, body: &[u8]) -> Reply {
    let fields = multipart(content_type, body);
    let field = |n: &str| {
        fields
            .iter()
            .find(|f| f.0 == n)
            .map(|f| String::from_utf8_lossy(&f.2).into_owned())
            .unwrap_or_default()
    };
    let file = fields.iter().find(|f| f.0 == "content" && f.1.is_some());
    let (name, version) = (normalize(&field("name")), field("version"));
    let status = match file {
        _ if field(":action") != "file_upload" => 400,
        None => 400,
        Some((_, Some(fname), _))
            if !fname.contains(&version) || name.is_empty() || version.is_empty() =>
        {
            400
        }
        Some((_, Some(fname), data)) => {
            let release = st
                .projects
                .entry(name)
                .or_default()
                .entry(version)
                .or_default();
            if release.files.contains_key(fname) {
                409
            } else {
                release.description = field("description");
                release.files.insert(fname.clone(), data.clone());
                200
            }
        }
        Some(_) => 400,
    };
    Reply::empty(status)
}

/// `GET /+simple/<project>/`: a link to each file of each version.
fn project_page(st: &State, project: &str) -> Reply {
    let Some(p) = st.projects.get(&normalize(project)) else {
        return Reply::empty(404);
    };
    let links: Vec<String> = p
        .values()
        .flat_map(|r| r.files.keys())
        .map(|f| {
            format!(
                "<a href=\"../../+f/{}/{}\">{f}</a><br>",
                normalize(project),
                crate::wire::percent_encode(f)
            )
        })
        .collect();
    simple_page(&links)
}

/// `GET /<project>/json`: each version's description and files.
fn project_json(st: &State, project: &str) -> Reply {
    let Some(p) = st.projects.get(&normalize(project)) else {
        return Reply::json(404, json!({ "message": "Not Found" }));
    };
    let releases: serde_json::Map<String, Value> = p
        .iter()
        .map(|(v, r)| (v.clone(), json!({ "description": r.description, "files": r.files.keys().collect::<Vec<_>>() })))
        .collect();
    Reply::json(
        200,
        json!({ "name": normalize(project), "releases": releases }),
    )
}

/// `DELETE /<project>/<version>` (devpi's API); a project left with no
/// version goes too.
fn remove_version(st: &mut State, project: &str, version: &str) -> Reply {
    let key = normalize(project);
    let removed = st
        .projects
        .get_mut(&key)
        .and_then(|p| p.remove(version))
        .is_some();
    if st.projects.get(&key).is_some_and(BTreeMap::is_empty) {
        st.projects.remove(&key);
    }
    Reply::empty(if removed { 200 } else { 404 })
}
