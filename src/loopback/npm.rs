//! A loopback npm registry: the `npm-registry` control. It speaks the part
//! of the registry API that npm's publish, view, dist-tag, search and
//! unpublish use, as Verdaccio and the public registry do:
//!
//! - `PUT /<name>`: publish (a packument with new versions and their
//!   tarballs as base64 `_attachments`); a version that exists is 409;
//! - `GET /<name>`: the packument, with `_rev`; tarballs at
//!   `GET /<name>/-/<file>`;
//! - `GET`/`PUT`/`DELETE /-/package/<name>/dist-tags[/<tag>]`;
//! - `GET /-/v1/search?text=&size=&from=`: packages whose name contains
//!   the text;
//! - `DELETE /<name>/-rev/<rev>`: unpublish the whole package.
//!
//! Every request needs a bearer token it minted ([`NpmServer::token`]).
//! Its documents can be made stale ([`super::Knob::StaleDocument`]).

use super::{Reply, lock, query};
use crate::fault::Fault;
use crate::wire::percent_decode;
use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

#[derive(Default)]
pub struct State {
    pub packages: BTreeMap<String, Value>,
    tarballs: HashMap<String, Vec<u8>>,
    tokens: HashMap<String, String>,
    revs: u64,
    /// Package documents and dist-tags read as missing
    /// ([`super::Knob::StaleDocument`]).
    stale: bool,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        super::knobs::stale_document(&mut self.stale, knob, on)
    }
}

/// The registry; [`NpmServer::start`] starts one.
pub type NpmServer = super::Service<State>;

impl super::Service<State> {
    pub fn start() -> Result<NpmServer, Fault> {
        super::Service::serve(State::default(), serve)
    }

    /// The registry URL (ends in `/`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn token(&self) -> Result<String, Fault> {
        let t = super::secret()?;
        self.lock().tokens.insert(t.clone(), "publisher".into());
        Ok(t)
    }
}

fn not_found() -> Reply {
    Reply::json(404, json!({ "error": "not found" }))
}

/// One request, read whole before the state is locked.
struct Call {
    method: String,
    /// Path and query, as sent.
    url: String,
    /// The path, percent-decoded, without its leading `/`.
    path: String,
    body: Vec<u8>,
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, port: u16) {
    let method = req.method().as_str().to_ascii_uppercase();
    let url = req.url().to_string();
    let path = percent_decode(url.split('?').next().unwrap_or("/"));
    let body = super::body(&mut req);
    let mut st = lock(state);
    let call = Call {
        method,
        url,
        path: path.trim_start_matches('/').to_string(),
        body,
    };
    let reply = route(&mut st, &req, call, port);
    drop(st);
    reply.send(req);
}

/// The bearer token, then one handler per endpoint.
fn route(st: &mut State, req: &tiny_http::Request, call: Call, port: u16) -> Reply {
    if super::who(req, &st.tokens, &HashMap::new()).is_none() {
        return Reply::json(401, json!({ "error": "authorization required" }));
    }
    let path = call.path.as_str();
    let method = call.method.as_str();
    if path == "-/v1/search" {
        return search(st, &call.url);
    }
    if st.stale && method == "GET" && path != "-/v1/search" && !path.contains("/-/") {
        // A stale front: the document and its dist-tags read as missing;
        // the search, tarballs and writes go through.
        return not_found();
    }
    if let Some(rest) = path.strip_prefix("-/package/") {
        return dist_tags(st, rest, method, &call.body);
    }
    // /<name>/-rev/<rev>, /<name>/-/<file>, /<name>; names may be scoped
    // (`@scope/name`).
    if let Some((name, rev)) = path.split_once("/-rev/") {
        return unpublish(st, name, rev, method);
    }
    if path.contains("/-/") {
        return match st.tarballs.get(path).cloned() {
            Some(d) if method == "GET" => {
                Reply::new(200, d, &[("Content-Type", "application/octet-stream")])
            }
            _ => not_found(),
        };
    }
    match method {
        "GET" => match st.packages.get(path).cloned() {
            Some(p) => Reply::json(200, p),
            None => not_found(),
        },
        "PUT" => publish(st, path, &call.body, port),
        _ => not_found(),
    }
}

/// `GET /-/v1/search?text=&size=&from=`: packages whose name contains the
/// text.
fn search(st: &State, url: &str) -> Reply {
    let q = query(url);
    let text = q.get("text").cloned().unwrap_or_default();
    let size: usize = q
        .get("size")
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
        .min(250);
    let from: usize = q.get("from").and_then(|s| s.parse().ok()).unwrap_or(0);
    let hits: Vec<&Value> = st
        .packages
        .iter()
        .filter(|(n, _)| n.contains(&text))
        .map(|(_, p)| p)
        .collect();
    let objects: Vec<Value> = hits
        .iter()
        .skip(from)
        .take(size)
        .map(|p| {
            json!({ "package": {
                "name": p["name"],
                "version": p["dist-tags"]["latest"],
                "description": p["description"],
            }})
        })
        .collect();
    let total = hits.len();
    Reply::json(200, json!({ "objects": objects, "total": total }))
}

/// `GET`/`PUT`/`DELETE /-/package/<name>/dist-tags[/<tag>]` (`rest` is
/// what follows `/-/package/`).
fn dist_tags(st: &mut State, rest: &str, method: &str, body: &[u8]) -> Reply {
    let (name, tag) = match rest.split_once("/dist-tags") {
        Some((n, t)) => (n.to_string(), t.trim_start_matches('/').to_string()),
        None => return not_found(),
    };
    let Some(p) = st.packages.get_mut(&name) else {
        return not_found();
    };
    match (method, tag.is_empty()) {
        ("GET", true) => Reply::json(200, p["dist-tags"].clone()),
        ("PUT", false) => {
            let version: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            if version
                .as_str()
                .is_none_or(|v| p["versions"].get(v).is_none())
            {
                return Reply::json(400, json!({ "error": "no such version" }));
            }
            p["dist-tags"][tag.as_str()] = version;
            Reply::json(201, json!({ "ok": "package tagged" }))
        }
        ("DELETE", false) => {
            if let Some(t) = p["dist-tags"].as_object_mut() {
                t.remove(&tag);
            }
            Reply::json(201, json!({ "ok": "tag removed" }))
        }
        _ => not_found(),
    }
}

/// `DELETE /<name>/-rev/<rev>`: the whole package and its tarballs, if
/// `rev` is its current revision.
fn unpublish(st: &mut State, name: &str, rev: &str, method: &str) -> Reply {
    let current = st.packages.get(name).map(|p| p["_rev"].clone());
    match (method, current) {
        ("DELETE", Some(r)) if r.as_str() == Some(rev) => {
            st.packages.remove(name);
            let prefix = format!("{name}/-/");
            st.tarballs.retain(|k, _| !k.starts_with(&prefix));
            Reply::json(200, json!({ "ok": "package removed" }))
        }
        ("DELETE", Some(_)) => Reply::json(409, json!({ "error": "revision mismatch" })),
        _ => not_found(),
    }
}

/// `PUT /<name>`: publishes the packument's new versions (none may exist)
/// with their tarballs, dist-tags, readme and description, under a new
/// revision.
fn publish(st: &mut State, name: &str, body: &[u8], port: u16) -> Reply {
    let Ok(mut doc) = serde_json::from_slice::<Value>(body) else {
        return Reply::json(400, json!({ "error": "bad json" }));
    };
    if doc["name"].as_str() != Some(name) {
        return Reply::json(400, json!({ "error": "name mismatch" }));
    }
    let mut pkg = st.packages.get(name).cloned().unwrap_or_else(
        || json!({ "_id": name, "name": name, "versions": {}, "dist-tags": {}, "time": {} }),
    );
    let new_versions = doc["versions"].as_object().cloned().unwrap_or_default();
    if new_versions
        .keys()
        .any(|v| pkg["versions"].get(v).is_some())
    {
        return Reply::json(409, json!({ "error": "this version already exists" }));
    }
    for (file, att) in doc["_attachments"].as_object().cloned().unwrap_or_default() {
        let data = att["data"]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok());
        if let Some(d) = data {
            st.tarballs.insert(format!("{name}/-/{file}"), d);
        }
    }
    for (v, mut meta) in new_versions {
        let file = meta["dist"]["tarball"]
            .as_str()
            .and_then(|t| t.rsplit('/').next())
            .unwrap_or("")
            .to_string();
        meta["dist"]["tarball"] = json!(format!("http://127.0.0.1:{port}/{name}/-/{file}"));
        pkg["versions"][v.as_str()] = meta;
    }
    for (t, v) in doc["dist-tags"].as_object().cloned().unwrap_or_default() {
        pkg["dist-tags"][t.as_str()] = v;
    }
    for k in ["readme", "description"] {
        if let Some(v) = doc.get_mut(k).map(Value::take) {
            pkg[k] = v;
        }
    }
    st.revs += 1;
    pkg["_rev"] = json!(format!("{}-{:016x}", st.revs, st.revs * 0x9e37_79b9));
    st.packages.insert(name.to_string(), pkg);
    Reply::json(201, json!({ "ok": "created new package", "success": true }))
}
