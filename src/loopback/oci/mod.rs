//! A loopback OCI registry: the `oci-registry` control. It speaks the
//! part of the distribution API (registry v2) the surface uses, as CNCF
//! distribution 2.8 answers it:
//!
//! - `GET /token?service=&scope=`: the token service, for the user it
//!   minted ([`OciServer::user`], basic auth): a token carries the scope
//!   asked for (one repository's actions, or the catalog). Every `/v2/`
//!   request needs a token from it: without one it is a 401 with
//!   `WWW-Authenticate: Bearer realm=…,service=…,scope=…` (the actions the
//!   request needs: `pull` to read, `pull,push` to write, `delete`), and
//!   with one whose scope does not cover it a 401 whose challenge adds
//!   `error="insufficient_scope"`, as distribution answers;
//! - every error answer carries `Docker-Distribution-Api-Version: registry/2.0`,
//!   and a 405 its `Allow`;
//! - blobs: `HEAD`/`GET`/`DELETE /v2/<name>/blobs/<digest>`, uploads by
//!   `POST /v2/<name>/blobs/uploads/` then `PUT <Location>?digest=`
//!   (the digest checked);
//! - manifests: `PUT`/`GET`/`HEAD /v2/<name>/manifests/<tag or digest>`
//!   (the blobs it references must be in the repository), `DELETE` by
//!   digest only, removing every tag on it;
//! - `GET /v2/<name>/tags/list` (`"tags": null` once emptied; 404
//!   `NAME_UNKNOWN` for a repository never tagged, one holding only a
//!   blob, as distribution answers, and for one the lag hides) and
//!   `GET /v2/_catalog?n=&last=`, paged with `Link` (a small page, so
//!   paging is always exercised).
//!
//! GitHub's packages API ghcr.io has beside it is in [`packages`].
//!
//! Both listings can lag ([`super::Knobs`]): while lagging they leave
//! out repositories and tags made since the lag began.

mod packages;

use super::{Reply, lock, query};
use crate::fault::Fault;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

/// The catalog's largest page (distribution's is 1000; small here so the
/// client's paging runs on every listing).
const MAX_PAGE: usize = 5;

#[derive(Default)]
pub(super) struct Repo {
    seq: u64,
    /// Whether a tag was ever pushed (distribution's tags directory).
    tagged: bool,
    /// Tag -> (digest, when made).
    tags: BTreeMap<String, (String, u64)>,
    blobs: HashSet<String>,
    manifests: HashMap<String, Vec<u8>>,
}

#[derive(Default)]
pub struct State {
    repos: BTreeMap<String, Repo>,
    blobs: HashMap<String, Vec<u8>>,
    uploads: HashMap<String, String>,
    users: HashMap<String, String>,
    /// Token -> the scope it was issued for (`repository:<name>` or
    /// `registry:catalog`, and its actions).
    tokens: HashMap<String, (String, Vec<String>)>,
    /// The GitHub packages API's tokens ([`OciServer::api_token`]): token
    /// -> whether it may read packages.
    api_tokens: HashMap<String, bool>,
    /// The API tokens that may also delete package versions
    /// ([`OciServer::api_deleter`]).
    api_deleters: HashSet<String>,
    /// Users whose tokens get only these actions (a reader: `pull`).
    limited: HashMap<String, Vec<String>>,
    seq: u64,
    /// While listings lag: the newest repository and tag they show.
    lag_after: Option<u64>,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        if knob != super::Knob::Lag {
            return false;
        }
        self.lag_after = on.then_some(self.seq);
        true
    }
}

/// The registry; [`OciServer::start`] starts one.
pub type OciServer = super::Service<State>;

impl super::Service<State> {
    pub fn start() -> Result<OciServer, Fault> {
        super::Service::serve(State::default(), serve)
    }

    /// The registry's origin (no trailing `/`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A user (name, password) the token service takes.
    pub fn user(&self) -> Result<(String, String), Fault> {
        let p = super::secret()?;
        self.lock().users.insert("runwarden".into(), p.clone());
        Ok(("runwarden".into(), p))
    }

    /// A user `name` whose tokens carry at most `actions` (`["pull"]`: a
    /// reader; `[]`: nothing), whatever scope it asks.
    pub fn limited_user(&self, name: &str, actions: &[&str]) -> Result<String, Fault> {
        let p = super::secret()?;
        let mut st = self.lock();
        st.users.insert(name.into(), p.clone());
        st.limited
            .insert(name.into(), actions.iter().map(|a| a.to_string()).collect());
        Ok(p)
    }

    /// A token for the GitHub packages API routes this server also
    /// serves ([`packages`]), with or without the right to read them.
    pub fn api_token(&self, may_read: bool) -> Result<String, Fault> {
        let t = super::secret()?;
        self.lock().api_tokens.insert(t.clone(), may_read);
        Ok(t)
    }

    /// An API token that may read packages and delete their versions
    /// (a classic token with `delete:packages`, of a package admin).
    pub fn api_deleter(&self) -> Result<String, Fault> {
        let t = self.api_token(true)?;
        self.lock().api_deleters.insert(t.clone());
        Ok(t)
    }
}

fn digest_of(data: &[u8]) -> String {
    format!("sha256:{}", crate::nonce::to_hex(&Sha256::digest(data)))
}

/// The header every answer of distribution carries.
const API_VERSION: &str = "registry/2.0";

/// The registry's error body.
fn error(status: u16, code: &str) -> Reply {
    let body =
        json!({ "errors": [{ "code": code, "message": code.to_lowercase(), "detail": null }] });
    Reply::new(
        status,
        body.to_string().into_bytes(),
        &[
            ("Content-Type", "application/json"),
            ("Docker-Distribution-Api-Version", API_VERSION),
        ],
    )
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, port: u16) {
    let method = req.method().as_str().to_ascii_uppercase();
    let url = req.url().to_string();
    let path = url.split('?').next().unwrap_or("/").to_string();
    let body = super::body(&mut req);
    let mut st = lock(state);
    let reply = if path == "/token" {
        token(&mut st, &req)
    } else if path.starts_with("/orgs/") || path.starts_with("/users/") {
        let auth = super::header(&req, "authorization").unwrap_or_default();
        packages::serve(&mut st, &method, &path, &url, &auth, port)
    } else {
        let (resource, actions) = needs(&method, &path);
        let grant = super::header(&req, "authorization")
            .and_then(|a| a.strip_prefix("Bearer ").map(str::to_string))
            .and_then(|t| st.tokens.get(&t).cloned());
        match grant {
            None => challenge(&resource, &actions, None, port),
            Some((r, granted))
                if !resource.is_empty()
                    && (r != resource || !actions.iter().all(|a| granted.contains(a))) =>
            {
                challenge(&resource, &actions, Some("insufficient_scope"), port)
            }
            Some(_) => route(&mut st, &method, &path, &url, body),
        }
    };
    drop(st);
    // (tiny_http sends no body to a HEAD.)
    reply.send(req);
}

/// The resource (`repository:<name>`, `registry:catalog`, `""` for
/// `/v2/`) and actions a request needs.
fn needs(method: &str, path: &str) -> (String, Vec<String>) {
    let actions: &[&str] = match method {
        "GET" | "HEAD" => &["pull"],
        "DELETE" => &["delete"],
        _ => &["pull", "push"],
    };
    let actions = actions.iter().map(|a| a.to_string()).collect();
    match split(path) {
        Some((name, _)) => (format!("repository:{name}"), actions),
        None if path == "/v2/_catalog" => ("registry:catalog".into(), vec!["*".into()]),
        None => (String::new(), vec![]),
    }
}

/// `GET /token`: a bearer token for a user the service minted, for the
/// scope asked (every action asked is granted to it).
fn token(st: &mut State, req: &tiny_http::Request) -> Reply {
    let Some(user) = super::who(req, &HashMap::new(), &st.users) else {
        return error(401, "UNAUTHORIZED");
    };
    // A token service grants the intersection of what was asked and what
    // the user may do, and no error for a subset.
    let limit = st.limited.get(&user).cloned();
    let Ok(t) = super::secret() else {
        return error(500, "UNKNOWN");
    };
    let scope = query(req.url()).get("scope").cloned().unwrap_or_default();
    let grant = match scope.rsplit_once(':') {
        Some((resource, actions)) => (
            resource.to_string(),
            actions.split(',').map(str::to_string).collect(),
        ),
        None => (String::new(), vec![]),
    };
    let grant = match limit {
        Some(l) => (
            grant.0,
            grant.1.into_iter().filter(|a| l.contains(a)).collect(),
        ),
        None => grant,
    };
    st.tokens.insert(t.clone(), grant);
    Reply::json(200, json!({ "token": t }))
}

/// The 401 that starts the bearer flow (or, with `error`, says the token
/// does not cover the request), with the scope the request needs.
fn challenge(resource: &str, actions: &[String], error: Option<&str>, port: u16) -> Reply {
    let mut h =
        format!("Bearer realm=\"http://127.0.0.1:{port}/token\",service=\"runwarden-control\"");
    if !resource.is_empty() {
        h.push_str(&format!(",scope=\"{resource}:{}\"", actions.join(",")));
    }
    if let Some(e) = error {
        h.push_str(&format!(",error=\"{e}\""));
    }
    let body = json!({ "errors": [{ "code": "UNAUTHORIZED", "message": "authentication required", "detail": null }] });
    Reply::new(
        401,
        body.to_string().into_bytes(),
        &[
            ("Content-Type", "application/json"),
            ("Docker-Distribution-Api-Version", API_VERSION),
            ("WWW-Authenticate", &h),
        ],
    )
}

/// `/v2/<name>/<kind>/<rest>`: (name, kind/rest).
fn split(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/v2/")?;
    ["/manifests/", "/blobs/", "/tags/"].iter().find_map(|m| {
        let (name, tail) = rest.split_once(m)?;
        let _ = tail;
        Some((name, &rest[name.len() + 1..]))
    })
}

fn route(st: &mut State, method: &str, path: &str, url: &str, body: Vec<u8>) -> Reply {
    if path == "/v2/" {
        return Reply::json(200, json!({}));
    }
    if path == "/v2/_catalog" {
        return catalog(st, url);
    }
    let Some((name, rest)) = split(path) else {
        return error(404, "NOT_FOUND");
    };
    let name = name.to_string();
    if let Some(r) = rest.strip_prefix("manifests/") {
        return manifests(st, method, &name, r, body);
    }
    if rest == "tags/list" {
        return tags(st, &name);
    }
    if let Some(r) = rest.strip_prefix("blobs/uploads/") {
        return upload(st, method, &name, r, url, body);
    }
    match rest.strip_prefix("blobs/") {
        Some(d) => blob(st, method, &name, d),
        None => error(404, "NOT_FOUND"),
    }
}

/// The repository `name`, made (and numbered) on its first write.
fn repo<'s>(st: &'s mut State, name: &str) -> &'s mut Repo {
    if !st.repos.contains_key(name) {
        st.seq += 1;
        let seq = st.seq;
        st.repos.insert(
            name.to_string(),
            Repo {
                seq,
                ..Repo::default()
            },
        );
    }
    st.repos.get_mut(name).expect("just made")
}

fn upload(st: &mut State, method: &str, name: &str, id: &str, url: &str, body: Vec<u8>) -> Reply {
    match (method, id) {
        ("POST", "") => {
            let Ok(id) = super::secret() else {
                return error(500, "UNKNOWN");
            };
            st.uploads.insert(id.clone(), name.to_string());
            // A relative Location, as the spec allows: the client must
            // resolve it against the registry.
            let loc = format!("/v2/{name}/blobs/uploads/{id}");
            Reply::new(202, vec![], &[("Location", &loc), ("Range", "0-0")])
        }
        ("PUT", id) if st.uploads.get(id).map(String::as_str) == Some(name) => {
            let want = query(url).get("digest").cloned().unwrap_or_default();
            if digest_of(&body) != want {
                return error(400, "DIGEST_INVALID");
            }
            st.uploads.remove(id);
            st.blobs.insert(want.clone(), body);
            repo(st, name).blobs.insert(want.clone());
            Reply::new(201, vec![], &[("Docker-Content-Digest", &want)])
        }
        _ => error(404, "BLOB_UPLOAD_UNKNOWN"),
    }
}

fn blob(st: &mut State, method: &str, name: &str, digest: &str) -> Reply {
    let linked = st.repos.get(name).is_some_and(|r| r.blobs.contains(digest));
    match (method, linked) {
        ("GET" | "HEAD", true) => {
            let data = st.blobs.get(digest).cloned().unwrap_or_default();
            Reply::new(
                200,
                data,
                &[
                    ("Content-Type", "application/octet-stream"),
                    ("Docker-Content-Digest", digest),
                ],
            )
        }
        ("DELETE", true) => {
            if let Some(r) = st.repos.get_mut(name) {
                r.blobs.remove(digest);
            }
            Reply::empty(202)
        }
        _ => error(404, "BLOB_UNKNOWN"),
    }
}

fn manifests(st: &mut State, method: &str, name: &str, reference: &str, body: Vec<u8>) -> Reply {
    let by_digest = reference.starts_with("sha256:");
    let digest = match st.repos.get(name) {
        _ if by_digest => Some(reference.to_string()),
        Some(r) => r.tags.get(reference).map(|(d, _)| d.clone()),
        None => None,
    };
    match method {
        "PUT" => put_manifest(st, name, reference, body),
        "GET" | "HEAD" => {
            let data = digest
                .as_ref()
                .and_then(|d| st.repos.get(name)?.manifests.get(d).cloned());
            match (data, digest) {
                (Some(m), Some(d)) => {
                    let ty = serde_json::from_slice::<Value>(&m)
                        .ok()
                        .and_then(|v| v["mediaType"].as_str().map(str::to_string))
                        .unwrap_or_else(|| "application/json".into());
                    Reply::new(
                        200,
                        m,
                        &[("Content-Type", &ty), ("Docker-Content-Digest", &d)],
                    )
                }
                _ => error(404, "MANIFEST_UNKNOWN"),
            }
        }
        "DELETE" if !by_digest => error(400, "DIGEST_INVALID"),
        "DELETE" => match st.repos.get_mut(name) {
            Some(r) if r.manifests.contains_key(reference) => {
                // Every tag on the digest goes with it, as distribution does.
                r.manifests.remove(reference);
                r.tags.retain(|_, (d, _)| d != reference);
                Reply::empty(202)
            }
            _ => error(404, "MANIFEST_UNKNOWN"),
        },
        _ => {
            let body = json!({ "errors": [{ "code": "UNSUPPORTED", "message": "the operation is unsupported", "detail": null }] });
            Reply::new(
                405,
                body.to_string().into_bytes(),
                &[
                    ("Content-Type", "application/json"),
                    ("Docker-Distribution-Api-Version", API_VERSION),
                    ("Allow", "GET, HEAD, PUT, DELETE"),
                ],
            )
        }
    }
}

/// A manifest push: JSON whose config and layers are in the repository.
fn put_manifest(st: &mut State, name: &str, reference: &str, body: Vec<u8>) -> Reply {
    let Ok(doc) = serde_json::from_slice::<Value>(&body) else {
        return error(400, "MANIFEST_INVALID");
    };
    let linked = st
        .repos
        .get(name)
        .map(|r| r.blobs.clone())
        .unwrap_or_default();
    let refs =
        std::iter::once(&doc["config"]).chain(doc["layers"].as_array().into_iter().flatten());
    for d in refs {
        if !d["digest"].as_str().is_some_and(|d| linked.contains(d)) {
            return error(400, "MANIFEST_BLOB_UNKNOWN");
        }
    }
    let digest = digest_of(&body);
    if reference.starts_with("sha256:") && reference != digest {
        return error(400, "DIGEST_INVALID");
    }
    st.seq += 1;
    let seq = st.seq;
    let r = repo(st, name);
    r.manifests.insert(digest.clone(), body);
    if !reference.starts_with("sha256:") {
        r.tagged = true;
        r.tags.insert(reference.to_string(), (digest.clone(), seq));
    }
    Reply::new(201, vec![], &[("Docker-Content-Digest", &digest)])
}

fn tags(st: &State, name: &str) -> Reply {
    // Distribution reads the repository's tags directory: a repository
    // that holds only blobs has none (404), and one the lag hides is not
    // known yet.
    let Some(r) = st
        .repos
        .get(name)
        .filter(|r| r.tagged && st.lag_after.is_none_or(|l| r.seq <= l))
    else {
        return error(404, "NAME_UNKNOWN");
    };
    let shown: Vec<&String> = r
        .tags
        .iter()
        .filter(|(_, (_, seq))| st.lag_after.is_none_or(|n| *seq <= n))
        .map(|(t, _)| t)
        .collect();
    let tags = if shown.is_empty() {
        Value::Null
    } else {
        json!(shown)
    };
    Reply::json(200, json!({ "name": name, "tags": tags }))
}

/// `GET /v2/_catalog?n=&last=`: names after `last`, a page at most
/// [`MAX_PAGE`], with `Link` to the next.
fn catalog(st: &State, url: &str) -> Reply {
    let q = query(url);
    let n: usize = q.get("n").and_then(|n| n.parse().ok()).unwrap_or(100);
    if n > 1000 {
        return error(400, "PAGINATION_NUMBER_INVALID");
    }
    let n = n.clamp(1, MAX_PAGE);
    let last = q.get("last").cloned().unwrap_or_default();
    let names: Vec<&String> = st
        .repos
        .iter()
        .filter(|(k, r)| **k > last && st.lag_after.is_none_or(|l| r.seq <= l))
        .map(|(k, _)| k)
        .collect();
    let page: Vec<&String> = names.iter().take(n).copied().collect();
    let body = json!({ "repositories": page }).to_string().into_bytes();
    if names.len() > n {
        let next = format!(
            "</v2/_catalog?last={}&n={n}>; rel=\"next\"",
            crate::wire::percent_encode(page[n - 1])
        );
        return Reply::new(
            200,
            body,
            &[("Content-Type", "application/json"), ("Link", &next)],
        );
    }
    Reply::new(200, body, &[("Content-Type", "application/json")])
}
