//! A loopback Actions cache service (v2): the known-open control instance
//! of the `actions-cache` surface, and the tests' stand-in for GitHub's.
//!
//! It speaks the documented protocol (see
//! ../shared/reference/github-actions-facts.md): the Twirp JSON API the
//! runtime token reaches (`/twirp/github.actions.results.api.v1.CacheService/
//! <Method>`), signed blob URLs with Azure Put Blob semantics for the
//! archive, and the REST API's cache listing and deletion
//! (`/api/repos/{o}/{r}/actions/caches`). It follows GitHub's scope rules:
//! the runtime token is a JWT whose `ac` claim lists scopes with
//! permissions (1 read, 2 write, 3 both); a write goes to the first
//! writable scope, and a token with none gets `ok: false` with `cache write
//! denied: …`; a lookup searches the readable scopes in order (exact key
//! and version, then the key as a prefix, then each restore key as a
//! prefix, newest first); entries are immutable.
//!
//! `tests/loopback/actions_cache.rs` proves it against the real client, npm
//! `@actions/cache`, so the control runs the same protocol the real service
//! does. It accepts only tokens it minted ([`CacheServer::runtime_token`],
//! [`CacheServer::api_token`]) and signed URLs it signed, each with a fresh
//! random secret: another local process cannot write into a probe's
//! control.

use super::{Reply, lock, query};
use crate::fault::Fault;
use crate::wire::{b64url, jwt_scopes};
use std::collections::HashMap;
use std::sync::Mutex;

const TWIRP: &str = "/twirp/github.actions.results.api.v1.CacheService/";

/// One cache entry, as the service keeps it.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    pub key: String,
    pub version: String,
    /// The ref (scope) it was written to.
    pub scope: String,
    pub blob: String,
    pub data: Option<Vec<u8>>,
    pub finalized: bool,
    /// Creation order: newer entries win a prefix match.
    pub seq: u64,
}

#[derive(Default)]
pub struct State {
    pub entries: Vec<Entry>,
    next: u64,
    /// REST API tokens: token -> may delete (actions: write).
    pub api_tokens: HashMap<String, bool>,
    /// Every request: (method, url, Authorization header).
    pub log: Vec<(String, String, String)>,
    /// The signature every signed URL carries (a credential: tests check
    /// it never appears in any output).
    pub sig: String,
    /// The signature part of every runtime token this server minted.
    token_sig: String,
    /// While listings lag: the newest entry they show.
    pub lag_after: Option<u64>,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        let newest = self.entries.iter().map(|e| e.seq).max().unwrap_or(0);
        match knob {
            super::Knob::Lag => self.lag_after = on.then_some(newest),
            // Least recently used goes first; here every entry was made
            // and never restored, so the oldest go.
            super::Knob::Evict if on => self.entries.retain(|e| e.seq == newest),
            super::Knob::Evict => {}
            _ => return false,
        }
        true
    }
}

/// The service; [`CacheServer::start`] starts one.
pub type CacheServer = super::Service<State>;

/// The scopes of a bearer token this server minted.
fn scopes(auth: &str, token_sig: &str) -> Option<Vec<(String, u8)>> {
    let token = auth.strip_prefix("Bearer ")?;
    if token.rsplit('.').next() != Some(token_sig) {
        return None;
    }
    jwt_scopes(token)
}

impl super::Service<State> {
    /// Starts serving on a fresh loopback port until dropped.
    pub fn start() -> Result<CacheServer, Fault> {
        let state = State {
            sig: super::secret()?,
            token_sig: super::secret()?,
            ..State::default()
        };
        super::Service::serve(state, serve)
    }

    /// A runtime token whose `ac` claim grants these scopes: (ref,
    /// permission) with 1 read, 2 write, 3 read and write. Its signature is
    /// this server's secret: the server trusts its own tokens, as the real
    /// service trusts the runner's.
    pub fn runtime_token(&self, scopes: &[(&str, u8)]) -> String {
        let ac: Vec<serde_json::Value> = scopes
            .iter()
            .map(|(s, p)| serde_json::json!({ "Scope": s, "Permission": p }))
            .collect();
        let claims = serde_json::json!({
            "ac": serde_json::Value::Array(ac).to_string(),
            "iss": "runwarden-cache-server",
            "scp": "Actions.Results",
        });
        format!(
            "{}.{}.{}",
            b64url(br#"{"alg":"RS256","typ":"JWT"}"#),
            b64url(claims.to_string().as_bytes()),
            self.lock().token_sig
        )
    }

    /// A fresh REST API token; `can_delete` is actions: write.
    pub fn api_token(&self, can_delete: bool) -> String {
        let token = format!(
            "ghs_{}",
            crate::nonce::Nonce::generate()
                .map(|n| n.hex())
                .unwrap_or_else(|_| format!("fallback{}", self.port))
        );
        self.lock().api_tokens.insert(token.clone(), can_delete);
        token
    }

    /// `ACTIONS_RESULTS_URL` for this service.
    pub fn results_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// `GITHUB_API_URL` for this service's REST side.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.port)
    }

    /// Adds a finalized entry directly (foreign entries for tests).
    pub fn add(&self, key: &str, version: &str, scope: &str, data: &[u8]) {
        let mut st = self.lock();
        st.next += 1;
        let id = st.next;
        st.entries.push(Entry {
            id,
            key: key.into(),
            version: version.into(),
            scope: scope.into(),
            blob: format!("blob-{id}"),
            data: Some(data.to_vec()),
            finalized: true,
            seq: id,
        });
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.lock().entries.clone()
    }
}

/// A request field by its proto name or its JSON (camelCase) name.
fn field<'a>(body: &'a serde_json::Value, proto: &str, camel: &str) -> &'a serde_json::Value {
    if body[proto].is_null() {
        &body[camel]
    } else {
        &body[proto]
    }
}

/// One request, read whole before the state is locked.
struct Call {
    method: String,
    /// Path and query, as sent.
    url: String,
    /// The path alone.
    path: String,
    /// The Authorization header ("" when absent).
    auth: String,
    /// `x-ms-blob-type` (Azure Put Blob).
    blob_type: Option<String>,
    body: Vec<u8>,
}

impl Call {
    fn read(req: &mut tiny_http::Request) -> Call {
        let auth = super::header(req, "Authorization").unwrap_or_default();
        let blob_type = super::header(req, "x-ms-blob-type");
        let method = req.method().as_str().to_string();
        let url = req.url().to_string();
        let body = super::body(req);
        let path = url.split('?').next().unwrap_or("").to_string();
        Call {
            method,
            url,
            path,
            auth,
            blob_type,
            body,
        }
    }
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, port: u16) {
    let call = Call::read(&mut req);
    let mut st = lock(state);
    st.log
        .push((call.method.clone(), call.url.clone(), call.auth.clone()));
    let reply = route(&mut st, call, port);
    drop(st);
    reply.send(req);
}

/// The three sides of the service: the Twirp API, the signed blob URLs
/// and the REST cache API.
fn route(st: &mut State, call: Call, port: u16) -> Reply {
    if let Some(rpc) = call.path.strip_prefix(TWIRP) {
        return twirp(st, rpc, &call.auth, &call.body, port);
    }
    if let Some(blob) = call.path.strip_prefix("/devstoreaccount1/actions-cache/") {
        let blob = blob.to_string();
        return blob_request(
            st,
            &blob,
            &call.method,
            &call.url,
            call.blob_type.as_deref(),
            call.body,
        );
    }
    if let Some(rest) = call.path.strip_prefix("/api/repos/") {
        return caches(st, rest, &call.method, &call.url, &call.auth);
    }
    Reply::empty(404)
}

/// A Twirp call of the cache service, behind a runtime token this server
/// minted.
fn twirp(st: &mut State, rpc: &str, auth: &str, body: &[u8], port: u16) -> Reply {
    let Some(scopes) = scopes(auth, &st.token_sig) else {
        return Reply::json(
            401,
            serde_json::json!({ "code": "unauthenticated", "msg": "no valid runtime token" }),
        );
    };
    let body: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let key = field(&body, "key", "key")
        .as_str()
        .unwrap_or("")
        .to_string();
    let version = field(&body, "version", "version")
        .as_str()
        .unwrap_or("")
        .to_string();
    match rpc {
        "CreateCacheEntry" => create_entry(st, &scopes, key, version, port),
        "FinalizeCacheEntryUpload" => finalize_entry(st, &scopes, &body, &key, &version),
        "GetCacheEntryDownloadURL" => download_url(st, &scopes, &body, &key, &version, port),
        _ => Reply::json(404, serde_json::json!({ "code": "bad_route", "msg": rpc })),
    }
}

/// `CreateCacheEntry`: a pending entry in the first writable scope, and
/// the signed URL its archive goes to.
fn create_entry(
    st: &mut State,
    scopes: &[(String, u8)],
    key: String,
    version: String,
    port: u16,
) -> Reply {
    let Some(scope) = scopes
        .iter()
        .find(|(_, p)| p & 2 != 0)
        .map(|(s, _)| s.clone())
    else {
        return Reply::json(
            200,
            serde_json::json!({ "ok": false, "message": "cache write denied: token has no writable scopes" }),
        );
    };
    let reply = if st
        .entries
        .iter()
        .any(|e| e.key == key && e.version == version && e.scope == scope)
    {
        serde_json::json!({ "ok": false, "message": "cache entry already exists" })
    } else {
        st.next += 1;
        let id = st.next;
        let blob = format!("blob-{id}");
        st.entries.push(Entry {
            id,
            key,
            version,
            scope,
            blob: blob.clone(),
            data: None,
            finalized: false,
            seq: id,
        });
        serde_json::json!({
            "ok": true,
            "signed_upload_url": format!("http://127.0.0.1:{port}/devstoreaccount1/actions-cache/{blob}?sv=2025-01-05&sig={}", st.sig),
        })
    };
    Reply::json(200, reply)
}

/// `FinalizeCacheEntryUpload`: the pending entry in the first writable
/// scope is final if its upload has the size the client names.
fn finalize_entry(
    st: &mut State,
    scopes: &[(String, u8)],
    body: &serde_json::Value,
    key: &str,
    version: &str,
) -> Reply {
    let writable: Vec<String> = scopes
        .iter()
        .filter(|(_, p)| p & 2 != 0)
        .map(|(s, _)| s.clone())
        .collect();
    let size = field(body, "size_bytes", "sizeBytes");
    let size: u64 = size
        .as_str()
        .and_then(|s| s.parse().ok())
        .or(size.as_u64())
        .unwrap_or(0);
    let reply = match st.entries.iter_mut().find(|e| {
        e.key == key && e.version == version && writable.first() == Some(&e.scope) && !e.finalized
    }) {
        Some(e) if e.data.as_ref().map(|d| d.len() as u64) == Some(size) => {
            e.finalized = true;
            serde_json::json!({ "ok": true, "entry_id": e.id.to_string() })
        }
        Some(_) => {
            serde_json::json!({ "ok": false, "message": "size does not match the upload" })
        }
        None => serde_json::json!({ "ok": false, "message": "no such pending entry" }),
    };
    Reply::json(200, reply)
}

/// `GetCacheEntryDownloadURL`: the documented lookup over the readable
/// scopes, and a signed URL to the match.
fn download_url(
    st: &State,
    scopes: &[(String, u8)],
    body: &serde_json::Value,
    key: &str,
    version: &str,
    port: u16,
) -> Reply {
    let readable: Vec<String> = scopes
        .iter()
        .filter(|(_, p)| p & 1 != 0)
        .map(|(s, _)| s.clone())
        .collect();
    if readable.is_empty() {
        return Reply::json(
            403,
            serde_json::json!({ "code": "permission_denied", "msg": "token has no readable scopes" }),
        );
    }
    let restore = crate::wire::string_array(field(body, "restore_keys", "restoreKeys"));
    let found = lookup(&st.entries, &readable, key, &restore, version);
    let reply = match found {
        Some(e) => serde_json::json!({
            "ok": true,
            "signed_download_url": format!("http://127.0.0.1:{port}/devstoreaccount1/actions-cache/{}?sv=2025-01-05&sig={}", e.blob, st.sig),
            "matched_key": e.key,
        }),
        None => {
            serde_json::json!({ "ok": false, "signed_download_url": "", "matched_key": "" })
        }
    };
    Reply::json(200, reply)
}

/// A signed blob URL: the archive's upload (Azure Put Blob) or download.
fn blob_request(
    st: &mut State,
    blob: &str,
    method: &str,
    url: &str,
    blob_type: Option<&str>,
    body: Vec<u8>,
) -> Reply {
    if query(url).get("sig") != Some(&st.sig) {
        return Reply::new(403, b"AuthenticationFailed".to_vec(), &[]);
    }
    let Some(e) = st.entries.iter_mut().find(|e| e.blob == blob) else {
        return Reply::new(404, b"BlobNotFound".to_vec(), &[]);
    };
    match method {
        // Azure Put Blob: one request for a small archive.
        "PUT" if blob_type == Some("BlockBlob") && !e.finalized => {
            e.data = Some(body);
            Reply::new(
                201,
                vec![],
                &[
                    ("ETag", "\"0x8DCSTANDIN\""),
                    ("Last-Modified", "Mon, 30 Nov 2026 00:00:00 GMT"),
                    ("x-ms-request-id", "00000000-0000-0000-0000-000000000000"),
                    ("x-ms-version", "2025-01-05"),
                    ("x-ms-request-server-encrypted", "true"),
                ],
            )
        }
        "PUT" => Reply::new(409, b"unsupported upload".to_vec(), &[]),
        "GET" if e.finalized => Reply::new(
            200,
            e.data.clone().unwrap_or_default(),
            &[("Content-Type", "application/octet-stream")],
        ),
        _ => Reply::empty(404),
    }
}

/// The REST cache API, `/api/repos/{owner}/{repo}/actions/caches[/{id}]`
/// (`rest` is what follows `/api/repos/`), behind a REST token this
/// server minted.
fn caches(st: &mut State, rest: &str, method: &str, url: &str, auth: &str) -> Reply {
    let parts: Vec<&str> = rest.split('/').collect();
    let token = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "))
        .unwrap_or("");
    let Some(&can_write) = st.api_tokens.get(token) else {
        return Reply::json(401, serde_json::json!({ "message": "Bad credentials" }));
    };
    if parts.len() < 4 || parts[2] != "actions" || parts[3] != "caches" {
        return Reply::json(404, serde_json::json!({ "message": "Not Found" }));
    }
    let q = query(url);
    match method {
        "GET" => list_caches(st, &q),
        "DELETE" if !can_write => Reply::json(
            403,
            serde_json::json!({ "message": "Resource not accessible by integration" }),
        ),
        "DELETE" => delete_caches(st, &parts, &q),
        _ => Reply::json(404, serde_json::json!({ "message": "Not Found" })),
    }
}

/// `GET …/actions/caches`: one page of the finalized entries the query's
/// `key` (a prefix) and `ref` select, newest first.
fn list_caches(st: &State, q: &HashMap<String, String>) -> Reply {
    let lag_after = st.lag_after;
    let matches = |e: &Entry| {
        e.finalized
            && lag_after.is_none_or(|n| e.seq <= n)
            && q.get("key").is_none_or(|k| e.key.starts_with(k.as_str()))
            && q.get("ref").is_none_or(|r| &e.scope == r)
    };
    let per_page: usize = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30)
        .min(100);
    let page: usize = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut all: Vec<&Entry> = st.entries.iter().filter(|e| matches(e)).collect();
    all.sort_by_key(|e| std::cmp::Reverse(e.seq));
    let list: Vec<serde_json::Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|e| {
            serde_json::json!({
                "id": e.id, "ref": e.scope, "key": e.key, "version": e.version,
                "size_in_bytes": e.data.as_ref().map(Vec::len).unwrap_or(0),
                "created_at": "2026-11-30T00:00:00Z", "last_accessed_at": "2026-11-30T00:00:00Z",
            })
        })
        .collect();
    let total = all.len();
    Reply::json(
        200,
        serde_json::json!({ "total_count": total, "actions_caches": list }),
    )
}

/// `DELETE …/actions/caches/{id}` or `DELETE …/actions/caches?key=…[&ref=…]`.
fn delete_caches(st: &mut State, parts: &[&str], q: &HashMap<String, String>) -> Reply {
    let before = st.entries.len();
    if let Some(id) = parts.get(4).and_then(|i| i.parse::<u64>().ok()) {
        st.entries.retain(|e| e.id != id);
    } else if q.contains_key("key") {
        let key = q["key"].clone();
        let r = q.get("ref").cloned();
        st.entries
            .retain(|e| !(e.key == key && r.as_ref().is_none_or(|r| &e.scope == r)));
    }
    let gone = before - st.entries.len();
    if gone == 0 {
        Reply::json(404, serde_json::json!({ "message": "Not Found" }))
    } else {
        Reply::empty(204)
    }
}

/// The documented lookup: per readable scope in order, an exact key and
/// version, then the key as a prefix, then each restore key as a prefix;
/// newest wins within a step.
fn lookup<'a>(
    entries: &'a [Entry],
    scopes: &[String],
    key: &str,
    restore: &[String],
    version: &str,
) -> Option<&'a Entry> {
    for scope in scopes {
        let usable = |e: &&Entry| e.finalized && &e.scope == scope && e.version == version;
        if let Some(e) = entries.iter().filter(usable).find(|e| e.key == key) {
            return Some(e);
        }
        for prefix in std::iter::once(key).chain(restore.iter().map(String::as_str)) {
            if let Some(e) = entries
                .iter()
                .filter(usable)
                .filter(|e| e.key.starts_with(prefix))
                .max_by_key(|e| e.seq)
            {
                return Some(e);
            }
        }
    }
    None
}
