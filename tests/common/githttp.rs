//! A real smart-HTTP git server for tests: `git http-backend` (the CGI
//! program git ships) behind a small tiny_http bridge on loopback, with
//! basic auth, users who may or may not push, and a request log.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

pub struct User {
    pub password: &'static str,
    pub can_push: bool,
}

pub struct GitHttp {
    pub port: u16,
    pub root: PathBuf,
    /// Every request: (method, path?query, user).
    pub log: Arc<Mutex<Vec<(String, String, String)>>>,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub fn base64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl GitHttp {
    /// Serves the bare repositories under `root` (as /<name>.git).
    pub fn start(root: &Path, users: HashMap<&'static str, User>) -> GitHttp {
        GitHttp::start_with(root, users, true)
    }

    /// As [`GitHttp::start`]; with `protocol_v2: false` the server ignores
    /// the client's `Git-Protocol` header and speaks protocol v0, which
    /// refuses to serve objects no ref advertises.
    pub fn start_with(
        root: &Path,
        users: HashMap<&'static str, User>,
        protocol_v2: bool,
    ) -> GitHttp {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (srv, lg, root_c) = (server.clone(), log.clone(), root.to_path_buf());
        // Keyed by the base64 credentials; the scheme word is matched
        // case-insensitively (actions/checkout writes "basic").
        let auth: HashMap<String, (String, bool)> = users
            .into_iter()
            .map(|(u, info)| {
                (
                    base64(format!("{u}:{}", info.password).as_bytes()),
                    (u.to_string(), info.can_push),
                )
            })
            .collect();
        let thread = std::thread::spawn(move || {
            for req in srv.incoming_requests() {
                serve(req, &root_c, &auth, &lg, protocol_v2);
            }
        });
        GitHttp {
            port,
            root: root.to_path_buf(),
            log,
            server,
            thread: Some(thread),
        }
    }

    /// A server with two users: `writer` (password `w-secret-4f1c9a`) may
    /// push, `reader` (`r-secret-77d2e0`) may only fetch.
    pub fn writer_and_reader(root: &Path, protocol_v2: bool) -> GitHttp {
        let mut users = HashMap::new();
        users.insert(
            "writer",
            User {
                password: "w-secret-4f1c9a",
                can_push: true,
            },
        );
        users.insert(
            "reader",
            User {
                password: "r-secret-77d2e0",
                can_push: false,
            },
        );
        GitHttp::start_with(root, users, protocol_v2)
    }

    pub fn url(&self, user: &str, password: &str, repo: &str) -> String {
        format!("http://{user}:{password}@127.0.0.1:{}/{repo}", self.port)
    }

    pub fn requests(&self) -> Vec<(String, String, String)> {
        self.log.lock().unwrap().clone()
    }

    pub fn clear(&self) {
        self.log.lock().unwrap().clear();
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn respond(req: tiny_http::Request, code: u16, headers: &[(&str, &str)], body: Vec<u8>) {
    let mut resp = tiny_http::Response::from_data(body).with_status_code(code);
    for (k, v) in headers {
        resp.add_header(tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap());
    }
    let _ = req.respond(resp);
}

fn serve(
    mut req: tiny_http::Request,
    root: &Path,
    auth: &HashMap<String, (String, bool)>,
    log: &Mutex<Vec<(String, String, String)>>,
    protocol_v2: bool,
) {
    let headers_in: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|h| {
            (
                h.field.as_str().as_str().to_string(),
                h.value.as_str().to_string(),
            )
        })
        .collect();
    let header = |name: &str| {
        headers_in
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let user = header("Authorization").and_then(|a| {
        let (scheme, creds) = a.trim().split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("basic")
            .then(|| auth.get(creds.trim()).cloned())
            .flatten()
    });
    let url = req.url().to_string();
    let method = req.method().as_str().to_string();
    log.lock().unwrap().push((
        method.clone(),
        url.clone(),
        user.as_ref().map(|u| u.0.clone()).unwrap_or_default(),
    ));
    let Some((user, can_push)) = user else {
        return respond(
            req,
            401,
            &[("WWW-Authenticate", "Basic realm=\"git\"")],
            b"auth required".to_vec(),
        );
    };
    if url.contains("git-receive-pack") && !can_push {
        return respond(req, 403, &[], b"read-only user".to_vec());
    }
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let backend = Path::new(
        &String::from_utf8(
            Command::new("git")
                .arg("--exec-path")
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim(),
    )
    .join("git-http-backend");
    let mut cmd = Command::new(backend);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", &method)
        .env("REMOTE_USER", &user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (h, var) in [
        ("Content-Type", "CONTENT_TYPE"),
        ("Content-Length", "CONTENT_LENGTH"),
        ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
        ("Git-Protocol", "GIT_PROTOCOL"),
    ] {
        if h == "Git-Protocol" && !protocol_v2 {
            continue;
        }
        if let Some(v) = header(h) {
            cmd.env(var, v);
        }
    }
    let mut child = cmd.spawn().unwrap();
    let mut body = Vec::new();
    req.as_reader().read_to_end(&mut body).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut status = 200u16;
    let mut headers: Vec<(String, String)> = Vec::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("Status") {
                status = v.trim().split(' ').next().unwrap().parse().unwrap();
            } else {
                headers.push((k.to_string(), v.trim().to_string()));
            }
        }
    }
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).unwrap();
    let _ = writer.join();
    let _ = child.wait();
    let hs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    respond(req, status, &hs, rest);
}
