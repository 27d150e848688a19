//! A loopback WebDAV cache that behaves like a permissive Artifactory-style
//! remote cache: `PUT` stores a path, a `GET` miss is remembered (a later
//! `GET` of the same path is answered from the cache: `404` with
//! `X-Cache: HIT` and an `Age`), `MKCOL` makes a collection, `PROPPATCH`
//! sets dead properties and `PROPFIND` (depth 0 or 1) lists names and
//! properties (RFC 4918). `DELETE` removes a path.
//!
//! Read-only, it refuses every write (`403`) and remembers no miss: nothing
//! a client does changes its state. The `http-cache` control runs on a
//! writable one; the tests run on both.

use super::{Reply, lock};
use crate::fault::Fault;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    File(Vec<u8>),
    Collection,
}

#[derive(Default)]
pub struct State {
    /// Decoded absolute paths ("/a/b"; collections without a trailing
    /// slash; the root "/" always exists).
    pub nodes: BTreeMap<String, Node>,
    /// Dead properties per path: raw XML elements.
    pub props: BTreeMap<String, Vec<String>>,
    /// Remembered misses and when.
    misses: HashMap<String, Instant>,
    pub read_only: bool,
    tokens: HashMap<String, String>,
    passwords: HashMap<String, String>,
    /// While listings lag: the paths they show (what existed when the lag
    /// began); a PROPFIND of a path itself still finds it.
    pub lag: Option<std::collections::BTreeSet<String>>,
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        match knob {
            super::Knob::Lag => self.lag = on.then(|| self.nodes.keys().cloned().collect()),
            // It keeps no order of what it stored: an eviction takes every
            // file, collection and property (the remembered misses stay:
            // LIMITATIONS.md).
            super::Knob::Evict if on => {
                self.nodes.retain(|p, _| p == "/");
                self.props.clear();
            }
            super::Knob::Evict => {}
            _ => return false,
        }
        true
    }
}

/// The cache; [`DavServer::start`] starts one.
pub type DavServer = super::Service<State>;

impl super::Service<State> {
    pub fn start(read_only: bool) -> Result<DavServer, Fault> {
        let state = State {
            read_only,
            ..State::default()
        };
        super::Service::serve(state, serve)
    }

    /// The cache's root URL (ends in `/`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// A fresh bearer token.
    pub fn token(&self) -> Result<String, Fault> {
        let t = super::secret()?;
        self.lock().tokens.insert(t.clone(), "token".into());
        Ok(t)
    }

    /// A basic-auth user.
    pub fn user(&self, name: &str, password: &str) {
        self.lock().passwords.insert(name.into(), password.into());
    }

    /// Adds a file (and its parent collections) directly.
    pub fn add(&self, path: &str, data: &[u8]) {
        let mut st = self.lock();
        let mut parent = String::new();
        for part in path
            .trim_matches('/')
            .split('/')
            .collect::<Vec<_>>()
            .split_last()
            .map(|(_, p)| p.to_vec())
            .unwrap_or_default()
        {
            parent = format!("{parent}/{part}");
            st.nodes.insert(parent.clone(), Node::Collection);
        }
        st.nodes.insert(
            format!("/{}", path.trim_matches('/')),
            Node::File(data.to_vec()),
        );
    }

    /// Every path and node, and every property, as they are now.
    pub fn snapshot(&self) -> (BTreeMap<String, Node>, BTreeMap<String, Vec<String>>) {
        let st = self.lock();
        (st.nodes.clone(), st.props.clone())
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn parent_of(path: &str) -> String {
    match path.rsplit_once('/') {
        Some(("", _)) | None => "/".into(),
        Some((p, _)) => p.into(),
    }
}

/// Where tags named `local` (any namespace prefix) start and end in
/// `text`: (index of `<`, index after `>`, closing tag?).
fn tags<'a>(text: &'a str, local: &'a str) -> impl Iterator<Item = (usize, usize, bool)> + 'a {
    text.match_indices('<').filter_map(move |(i, _)| {
        let rest = &text[i + 1..];
        let (closing, name_at) = match rest.strip_prefix('/') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let name_len = name_at.find(|c: char| c.is_whitespace() || c == '>' || c == '/')?;
        let name = &name_at[..name_len];
        let matches = name == local || name.rsplit_once(':').is_some_and(|(_, l)| l == local);
        let end = i + text[i..].find('>')? + 1;
        matches.then_some((i, end, closing))
    })
}

/// The raw property elements inside every `<…set><…prop>…</…prop></…set>`
/// of a PROPPATCH body (enough for the clients here: no removes).
fn set_props(body: &str) -> Vec<String> {
    let mut out = vec![];
    let opens: Vec<usize> = tags(body, "set").filter(|t| !t.2).map(|t| t.1).collect();
    let closes: Vec<usize> = tags(body, "set").filter(|t| t.2).map(|t| t.0).collect();
    for (start, end) in opens.into_iter().zip(closes) {
        let Some(inner) = body.get(start..end) else {
            continue;
        };
        let open = tags(inner, "prop").find(|t| !t.2).map(|t| t.1);
        let close = tags(inner, "prop").filter(|t| t.2).map(|t| t.0).last();
        if let (Some(a), Some(b)) = (open, close)
            && a <= b
        {
            out.push(inner[a..b].trim().to_string());
        }
    }
    out
}

fn response_xml(path: &str, node: &Node, props: &[String]) -> String {
    let shown = if matches!(node, Node::Collection) && path != "/" {
        format!("{path}/")
    } else {
        path.to_string()
    };
    let href = crate::wire::percent_encode(&shown);
    let (rtype, len) = match node {
        Node::Collection => ("<D:collection/>", String::new()),
        Node::File(d) => (
            "",
            format!("<D:getcontentlength>{}</D:getcontentlength>", d.len()),
        ),
    };
    format!(
        "<D:response><D:href>{}</D:href><D:propstat><D:prop><D:resourcetype>{rtype}</D:resourcetype>{len}{}</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>",
        xml_escape(&href),
        props.join("")
    )
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, _port: u16) {
    let method = req.method().as_str().to_ascii_uppercase();
    let depth = super::header(&req, "depth").unwrap_or_else(|| "infinity".into());
    let raw_path = req.url().split('?').next().unwrap_or("/").to_string();
    let body = super::body(&mut req);
    let mut st = lock(state);
    let reply = route(&mut st, &req, &method, &depth, &raw_path, body);
    drop(st);
    reply.send(req);
}

/// Authentication, the read-only refusal of writes, then one handler per
/// method.
fn route(
    st: &mut State,
    req: &tiny_http::Request,
    method: &str,
    depth: &str,
    raw_path: &str,
    body: Vec<u8>,
) -> Reply {
    if super::who(req, &st.tokens, &st.passwords).is_none() {
        return Reply::new(
            401,
            b"authentication required".to_vec(),
            &[("WWW-Authenticate", "Basic realm=\"cache\"")],
        );
    }
    let decoded = crate::wire::percent_decode(raw_path);
    let path = match decoded.trim_end_matches('/') {
        "" => "/".to_string(),
        p => p.to_string(),
    };
    let writes = matches!(method, "PUT" | "MKCOL" | "DELETE" | "PROPPATCH");
    if writes && st.read_only {
        return Reply::new(403, b"read-only cache".to_vec(), &[]);
    }
    let node = st
        .nodes
        .get(&path)
        .cloned()
        .or_else(|| (path == "/").then_some(Node::Collection));
    match method {
        "GET" | "HEAD" => get(st, path, node),
        "PUT" => put(st, path, node, body),
        "MKCOL" => mkcol(st, path, node, &body),
        "DELETE" => delete(st, &path, node),
        "PROPPATCH" => proppatch(st, path, node, &body),
        "PROPFIND" => propfind(st, &path, node, depth),
        _ => Reply::empty(405),
    }
}

/// Whether the collection `p` would go in exists (the root always does).
fn parent_ok(st: &State, p: &str) -> bool {
    let parent = parent_of(p);
    parent == "/" || st.nodes.get(&parent) == Some(&Node::Collection)
}

/// What the names directly under collection `path` start with.
fn children_prefix(path: &str) -> String {
    if path == "/" {
        "/".to_string()
    } else {
        format!("{path}/")
    }
}

/// `GET`/`HEAD`: a file's content, a collection's page of links, or a miss
/// (remembered, when writable).
fn get(st: &mut State, path: String, node: Option<Node>) -> Reply {
    match node {
        Some(Node::File(d)) => Reply::new(200, d, &[("Content-Type", "application/octet-stream")]),
        Some(Node::Collection) => collection_page(st, &path),
        None if st.read_only => Reply::new(404, b"not found".to_vec(), &[]),
        None => {
            // The negative cache: a remembered miss is answered from it.
            let age = st.misses.get(&path).map(|t| t.elapsed().as_secs());
            match age {
                Some(a) => Reply::new(
                    404,
                    b"not found (cached)".to_vec(),
                    &[("X-Cache", "HIT"), ("Age", &a.to_string())],
                ),
                None => {
                    st.misses.insert(path, Instant::now());
                    Reply::new(404, b"not found".to_vec(), &[("X-Cache", "MISS")])
                }
            }
        }
    }
}

/// An HTML page linking each name directly under collection `path`.
fn collection_page(st: &State, path: &str) -> Reply {
    let prefix = children_prefix(path);
    let names: Vec<String> = st
        .nodes
        .keys()
        .filter(|k| {
            k.starts_with(&prefix) && !k[prefix.len()..].contains('/') && k.len() > prefix.len()
        })
        .map(|k| {
            format!(
                "<a href=\"{}\">{}</a>",
                xml_escape(&crate::wire::percent_encode(k)),
                xml_escape(&k[prefix.len()..])
            )
        })
        .collect();
    Reply::new(
        200,
        format!("<html><body>{}</body></html>", names.join("\n")).into_bytes(),
        &[("Content-Type", "text/html")],
    )
}

/// `PUT`: stores a file (and forgets a remembered miss of it).
fn put(st: &mut State, path: String, node: Option<Node>, body: Vec<u8>) -> Reply {
    if node == Some(Node::Collection) {
        return Reply::empty(405);
    }
    if !parent_ok(st, &path) {
        return Reply::new(409, b"no parent collection".to_vec(), &[]);
    }
    st.misses.remove(&path);
    let status = if node.is_some() { 204 } else { 201 };
    st.nodes.insert(path, Node::File(body));
    Reply::empty(status)
}

/// `MKCOL`: makes a collection.
fn mkcol(st: &mut State, path: String, node: Option<Node>, body: &[u8]) -> Reply {
    let status = if node.is_some() {
        405
    } else if !body.is_empty() {
        415
    } else if !parent_ok(st, &path) {
        409
    } else {
        st.misses.remove(&path);
        st.nodes.insert(path, Node::Collection);
        201
    };
    Reply::empty(status)
}

/// `DELETE`: removes a path, everything under it and their properties.
fn delete(st: &mut State, path: &str, node: Option<Node>) -> Reply {
    if node.is_none() || path == "/" {
        return Reply::empty(404);
    }
    let under = format!("{path}/");
    st.nodes.retain(|k, _| k != path && !k.starts_with(&under));
    st.props.retain(|k, _| k != path && !k.starts_with(&under));
    Reply::empty(204)
}

/// `PROPPATCH`: adds the dead properties the body sets.
fn proppatch(st: &mut State, path: String, node: Option<Node>, body: &[u8]) -> Reply {
    if node.is_none() {
        return Reply::empty(404);
    }
    let set = set_props(&String::from_utf8_lossy(body));
    st.props.entry(path.clone()).or_default().extend(set);
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>{}</D:href><D:propstat><D:prop/><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>",
        xml_escape(&crate::wire::percent_encode(&path))
    );
    Reply::new(
        207,
        xml.into_bytes(),
        &[("Content-Type", "application/xml; charset=utf-8")],
    )
}

/// `PROPFIND` of depth 0 (the path) or 1 (and the names directly under a
/// collection, as far as a lagging listing shows them).
fn propfind(st: &State, path: &str, node: Option<Node>, depth: &str) -> Reply {
    let Some(node) = node else {
        return Reply::empty(404);
    };
    if depth != "0" && depth != "1" {
        return Reply::new(403, b"propfind-finite-depth".to_vec(), &[]);
    }
    let mut xml =
        String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><D:multistatus xmlns:D=\"DAV:\">");
    xml += &response_xml(
        path,
        &node,
        st.props.get(path).map(Vec::as_slice).unwrap_or(&[]),
    );
    if depth == "1" && node == Node::Collection {
        let prefix = children_prefix(path);
        for (k, n) in st.nodes.iter().filter(|(k, _)| {
            st.lag.as_ref().is_none_or(|known| known.contains(*k))
                && k.starts_with(&prefix)
                && k.len() > prefix.len()
                && !k[prefix.len()..].contains('/')
        }) {
            xml += &response_xml(k, n, st.props.get(k).map(Vec::as_slice).unwrap_or(&[]));
        }
    }
    xml += "</D:multistatus>";
    Reply::new(
        207,
        xml.into_bytes(),
        &[("Content-Type", "application/xml; charset=utf-8")],
    )
}
