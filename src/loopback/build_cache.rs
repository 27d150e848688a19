//! A loopback remote build cache, the `build-cache` control: a store of
//! bytes by path that answers each protocol's requests the way its real
//! servers do (Bazel's `/ac/` and `/cas/`, Gradle's `<url><key>`, Nx's
//! `/v1/cache/<hash>`, Turborepo's `/v8/artifacts/<hash>?slug=…`, whose
//! `x-artifact-tag` it keeps and hands back), with a bearer token of its
//! own. Unlike Turborepo's and Nx's APIs it takes `DELETE`, so a control
//! leaves nothing behind.
//!
//! Its one fault ([`super::Knob::Evict`]): everything but the newest entry
//! goes, as a cache past its size limit drops the oldest first.

use super::{Reply, lock};
use crate::fault::Fault;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// One stored entry, and when (a counter) it was written.
struct Stored {
    body: Vec<u8>,
    tag: Option<String>,
    seq: u64,
}

#[derive(Default)]
pub struct State {
    /// Path (with Turborepo's team before it) -> entry.
    entries: BTreeMap<String, Stored>,
    next: u64,
    tokens: HashSet<String>,
    /// For the tests, as real caches behave: a missing key answers 403
    /// (a server whose bucket it may not list), ...
    pub missing_denied: bool,
    /// ... writes under this path prefix are refused (403: a credential
    /// that may write action results but not blobs) ...
    pub refuse_writes_under: Option<String>,
    /// ... and deletes under this one.
    pub refuse_deletes_under: Option<String>,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        match knob {
            super::Knob::Evict if on => {
                let newest = self.entries.values().map(|s| s.seq).max();
                self.entries.retain(|_, s| Some(s.seq) == newest);
            }
            super::Knob::Evict => {}
            _ => return false,
        }
        true
    }
}

/// The cache; [`BuildCacheServer::start`] starts one.
pub type BuildCacheServer = super::Service<State>;

impl super::Service<State> {
    pub fn start() -> Result<BuildCacheServer, Fault> {
        super::Service::serve(State::default(), serve)
    }

    /// A fresh bearer token it takes.
    pub fn token(&self) -> Result<String, Fault> {
        let t = super::secret()?;
        self.lock().tokens.insert(t.clone());
        Ok(t)
    }

    /// Removes every entry whose body holds `text` (a test's eviction of
    /// one plant); how many went.
    pub fn forget(&self, text: &str) -> usize {
        let mut st = self.lock();
        let before = st.entries.len();
        st.entries
            .retain(|_, s| memchr::memmem::find(&s.body, text.as_bytes()).is_none());
        before - st.entries.len()
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, _port: u16) {
    let body = super::body(&mut req);
    let auth = super::header(&req, "authorization");
    let tag = super::header(&req, "x-artifact-tag");
    let url = req.url().to_string();
    let method = req.method().as_str().to_string();
    let reply = answer(&mut lock(state), &method, &url, auth, tag, body);
    reply.send(req);
}

fn answer(
    st: &mut State,
    method: &str,
    url: &str,
    auth: Option<String>,
    tag: Option<String>,
    body: Vec<u8>,
) -> Reply {
    let token = auth.as_deref().and_then(|a| a.strip_prefix("Bearer "));
    if !token.is_some_and(|t| st.tokens.contains(t)) {
        return Reply::raw(401, "text/plain", b"missing or invalid token".to_vec());
    }
    let (path, _) = url.split_once('?').unwrap_or((url, ""));
    let q = super::query(url);
    let turbo = path.starts_with("/v8/artifacts/");
    let key = match (q.get("slug").or(q.get("teamId")), turbo) {
        (Some(team), true) => format!("{team}{path}"),
        _ => path.to_string(),
    };
    let under = |p: &Option<String>| p.as_deref().is_some_and(|p| path.starts_with(p));
    match method {
        "PUT" if under(&st.refuse_writes_under) => Reply::empty(403),
        "DELETE" if under(&st.refuse_deletes_under) => Reply::empty(403),
        "PUT" => {
            st.next += 1;
            let stored = Stored {
                body,
                tag: if turbo { tag } else { None },
                seq: st.next,
            };
            st.entries.insert(key, stored);
            if turbo {
                Reply::json(202, serde_json::json!({ "urls": [path] }))
            } else {
                Reply::empty(200)
            }
        }
        "GET" | "HEAD" => match st.entries.get(&key) {
            Some(s) => {
                let mut r = Reply::raw(200, "application/octet-stream", s.body.clone());
                if let Some(t) = &s.tag {
                    r = r.with("x-artifact-tag", t);
                }
                r
            }
            None if st.missing_denied => Reply::empty(403),
            None => Reply::empty(404),
        },
        "DELETE" => match st.entries.remove(&key) {
            Some(_) => Reply::empty(204),
            None => Reply::empty(404),
        },
        _ => Reply::empty(405),
    }
}
