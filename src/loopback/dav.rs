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

use super::{lock, respond};
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

impl super::Listings for State {
    fn lag(&mut self, on: bool) {
        self.lag = on.then(|| self.nodes.keys().cloned().collect());
    }
}

/// The cache; [`DavServer::start`] starts one.
pub type DavServer = super::Service<State>;

impl super::Service<State> {
    pub fn start(read_only: bool) -> Result<DavServer, String> {
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
    pub fn token(&self) -> Result<String, String> {
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
    let allowed = {
        let tokens = st.tokens.clone();
        let passwords = st.passwords.clone();
        super::who(&req, &tokens, &passwords).is_some()
    };
    if !allowed {
        drop(st);
        return respond(
            req,
            401,
            b"authentication required".to_vec(),
            &[("WWW-Authenticate", "Basic realm=\"cache\"")],
        );
    }
    let decoded = crate::wire::percent_decode(&raw_path);
    let path = match decoded.trim_end_matches('/') {
        "" => "/".to_string(),
        p => p.to_string(),
    };
    let writes = matches!(method.as_str(), "PUT" | "MKCOL" | "DELETE" | "PROPPATCH");
    if writes && st.read_only {
        drop(st);
        return respond(req, 403, b"read-only cache".to_vec(), &[]);
    }
    let node = st
        .nodes
        .get(&path)
        .cloned()
        .or_else(|| (path == "/").then_some(Node::Collection));
    let parent_ok = |st: &State, p: &str| {
        let parent = parent_of(p);
        parent == "/" || st.nodes.get(&parent) == Some(&Node::Collection)
    };
    match method.as_str() {
        "GET" | "HEAD" => match node {
            Some(Node::File(d)) => {
                drop(st);
                respond(req, 200, d, &[("Content-Type", "application/octet-stream")])
            }
            Some(Node::Collection) => {
                let prefix = if path == "/" {
                    "/".to_string()
                } else {
                    format!("{path}/")
                };
                let names: Vec<String> = st
                    .nodes
                    .keys()
                    .filter(|k| {
                        k.starts_with(&prefix)
                            && !k[prefix.len()..].contains('/')
                            && k.len() > prefix.len()
                    })
                    .map(|k| {
                        format!(
                            "<a href=\"{}\">{}</a>",
                            xml_escape(&crate::wire::percent_encode(k)),
                            xml_escape(&k[prefix.len()..])
                        )
                    })
                    .collect();
                drop(st);
                respond(
                    req,
                    200,
                    format!("<html><body>{}</body></html>", names.join("\n")).into_bytes(),
                    &[("Content-Type", "text/html")],
                )
            }
            None if st.read_only => {
                drop(st);
                respond(req, 404, b"not found".to_vec(), &[])
            }
            None => {
                // The negative cache: a remembered miss is answered from it.
                let age = st.misses.get(&path).map(|t| t.elapsed().as_secs());
                match age {
                    Some(a) => {
                        drop(st);
                        respond(
                            req,
                            404,
                            b"not found (cached)".to_vec(),
                            &[("X-Cache", "HIT"), ("Age", &a.to_string())],
                        )
                    }
                    None => {
                        st.misses.insert(path, Instant::now());
                        drop(st);
                        respond(req, 404, b"not found".to_vec(), &[("X-Cache", "MISS")])
                    }
                }
            }
        },
        "PUT" => {
            if node == Some(Node::Collection) {
                drop(st);
                return respond(req, 405, vec![], &[]);
            }
            if !parent_ok(&st, &path) {
                drop(st);
                return respond(req, 409, b"no parent collection".to_vec(), &[]);
            }
            st.misses.remove(&path);
            let status = if node.is_some() { 204 } else { 201 };
            st.nodes.insert(path, Node::File(body));
            drop(st);
            respond(req, status, vec![], &[])
        }
        "MKCOL" => {
            let status = if node.is_some() {
                405
            } else if !body.is_empty() {
                415
            } else if !parent_ok(&st, &path) {
                409
            } else {
                st.misses.remove(&path);
                st.nodes.insert(path, Node::Collection);
                201
            };
            drop(st);
            respond(req, status, vec![], &[])
        }
        "DELETE" => {
            if node.is_none() || path == "/" {
                drop(st);
                return respond(req, 404, vec![], &[]);
            }
            let under = format!("{path}/");
            st.nodes.retain(|k, _| k != &path && !k.starts_with(&under));
            st.props.retain(|k, _| k != &path && !k.starts_with(&under));
            drop(st);
            respond(req, 204, vec![], &[])
        }
        "PROPPATCH" => {
            if node.is_none() {
                drop(st);
                return respond(req, 404, vec![], &[]);
            }
            let set = set_props(&String::from_utf8_lossy(&body));
            st.props.entry(path.clone()).or_default().extend(set);
            drop(st);
            let xml = format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:multistatus xmlns:D=\"DAV:\"><D:response><D:href>{}</D:href><D:propstat><D:prop/><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>",
                xml_escape(&crate::wire::percent_encode(&path))
            );
            respond(
                req,
                207,
                xml.into_bytes(),
                &[("Content-Type", "application/xml; charset=utf-8")],
            )
        }
        "PROPFIND" => {
            let Some(node) = node else {
                drop(st);
                return respond(req, 404, vec![], &[]);
            };
            if depth != "0" && depth != "1" {
                drop(st);
                return respond(req, 403, b"propfind-finite-depth".to_vec(), &[]);
            }
            let mut xml = String::from(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:multistatus xmlns:D=\"DAV:\">",
            );
            xml += &response_xml(
                &path,
                &node,
                st.props.get(&path).map(Vec::as_slice).unwrap_or(&[]),
            );
            if depth == "1" && node == Node::Collection {
                let prefix = if path == "/" {
                    "/".to_string()
                } else {
                    format!("{path}/")
                };
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
            drop(st);
            respond(
                req,
                207,
                xml.into_bytes(),
                &[("Content-Type", "application/xml; charset=utf-8")],
            )
        }
        _ => {
            drop(st);
            respond(req, 405, vec![], &[])
        }
    }
}
