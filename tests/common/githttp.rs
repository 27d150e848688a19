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

/// A hostile server's habits: every answer that can carry text carries the
/// request's credentials back (a 401 or 403 body, each `ng` reason of a
/// refused push, a ref made next to each pushed one with the password in
/// its name), and while it serves a request it looks through every
/// process's command line for a password.
#[derive(Default)]
pub struct Echo {
    /// Command lines seen holding a password while a request was served.
    pub cmdline_leaks: Mutex<Vec<String>>,
    /// How many requests were served while looking.
    pub looked: Mutex<usize>,
}

pub struct GitHttp {
    pub port: u16,
    pub root: PathBuf,
    /// Every request: (method, path?query, user).
    pub log: Arc<Mutex<Vec<(String, String, String)>>>,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Set for a hostile server ([`GitHttp::echoing`]).
    pub echo: Option<Arc<Echo>>,
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
        GitHttp::start_full(root, users, protocol_v2, None)
    }

    /// [`GitHttp::writer_and_reader`] as a hostile server that echoes
    /// credentials wherever it can ([`Echo`]).
    pub fn echoing(root: &Path) -> GitHttp {
        GitHttp::start_full(root, two_users(), true, Some(Arc::new(Echo::default())))
    }

    fn start_full(
        root: &Path,
        users: HashMap<&'static str, User>,
        protocol_v2: bool,
        echo: Option<Arc<Echo>>,
    ) -> GitHttp {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let port = server.server_addr().to_ip().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (srv, lg, root_c) = (server.clone(), log.clone(), root.to_path_buf());
        let echo_c = echo.clone();
        // Keyed by the base64 credentials; the scheme word is matched
        // case-insensitively (actions/checkout writes "basic").
        let passwords: Vec<String> = users.values().map(|u| u.password.to_string()).collect();
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
                if let Some(e) = &echo_c {
                    look_for_passwords(e, &passwords);
                }
                serve(req, &root_c, &auth, &lg, protocol_v2, echo_c.as_deref());
            }
        });
        GitHttp {
            port,
            root: root.to_path_buf(),
            log,
            server,
            thread: Some(thread),
            echo,
        }
    }

    /// A server with two users: `writer` (password `w-secret-4f1c9a`) may
    /// push, `reader` (`r-secret-77d2e0`) may only fetch.
    pub fn writer_and_reader(root: &Path, protocol_v2: bool) -> GitHttp {
        GitHttp::start_with(root, two_users(), protocol_v2)
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

/// `writer` (password `w-secret-4f1c9a`) may push, `reader`
/// (`r-secret-77d2e0`) may only fetch.
fn two_users() -> HashMap<&'static str, User> {
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
    users
}

/// Whether process `pid` descends from a runwarden process: what the
/// probe started, as opposed to another test's fixtures running at the
/// same time (which may put these test passwords on a command line on
/// purpose, e.g. a checkout's `git remote add` with the URL's userinfo).
fn under_runwarden(pid: &str) -> bool {
    let mut pid = pid.to_string();
    for _ in 0..64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parens.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            return false;
        };
        if &stat[open + 1..close] == "runwarden" {
            return true;
        }
        match stat[close + 1..].split_whitespace().nth(1) {
            Some(ppid) if ppid != "0" && ppid != "1" => pid = ppid.to_string(),
            _ => return false,
        }
    }
    false
}

/// The command line of every process the probe started, looked through
/// for `passwords` (the server answers while the client that sent the
/// request is alive).
fn look_for_passwords(echo: &Echo, passwords: &[String]) {
    *echo.looked.lock().unwrap() += 1;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let name = p.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || !under_runwarden(&name) {
            continue;
        }
        let Ok(cmd) = std::fs::read(p.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if passwords.iter().any(|pw| text.contains(pw.as_str())) {
            echo.cmdline_leaks.lock().unwrap().push(text);
        }
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
    echo: Option<&Echo>,
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
    // What a hostile server echoes: the header, and what it decodes to.
    let echoed = super::echo_of(&header("Authorization").unwrap_or_default());
    let Some((user, can_push)) = user else {
        let body = match echo {
            Some(_) => format!("auth required: {echoed}"),
            None => "auth required".into(),
        };
        return respond(
            req,
            401,
            &[("WWW-Authenticate", "Basic realm=\"git\"")],
            body.into_bytes(),
        );
    };
    if url.contains("git-receive-pack") && !can_push {
        match echo {
            // The refusal comes as each ref's `ng` reason instead.
            Some(_) if method == "POST" => return refuse_each_ref(req, &echoed),
            Some(_) => {}
            None => return respond(req, 403, &[], b"read-only user".to_vec()),
        }
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
    let created = if echo.is_some() && method == "POST" && url.contains("git-receive-pack") {
        push_commands(&body)
            .into_iter()
            .filter(|(old, _, _)| old.bytes().all(|b| b == b'0'))
            .collect()
    } else {
        vec![]
    };
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
    // Next to each ref a push created, one with the password in its name.
    if let Some(password) = echoed.split(':').nth(1).map(|p| p.trim_end_matches(')'))
        && !created.is_empty()
    {
        let repo = root.join(
            path.trim_start_matches('/')
                .split("/git-receive-pack")
                .next()
                .unwrap(),
        );
        for (_, new, name) in &created {
            let _ = Command::new("git")
                .arg("--git-dir")
                .arg(&repo)
                .args(["update-ref", &format!("{name}-{password}"), new])
                .status();
        }
    }
    let hs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    respond(req, status, &hs, rest);
}

/// The `(old, new, ref)` commands of a receive-pack request body.
fn push_commands(body: &[u8]) -> Vec<(String, String, String)> {
    let mut out = vec![];
    let mut rest = body;
    while rest.len() >= 4 {
        let Some(len) = std::str::from_utf8(&rest[..4])
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
        else {
            break;
        };
        if len == 0 || len > rest.len() {
            break;
        }
        let line = String::from_utf8_lossy(&rest[4..len]);
        let line = line.split('\0').next().unwrap_or("").trim_end();
        let mut parts = line.splitn(3, ' ');
        if let (Some(o), Some(n), Some(r)) = (parts.next(), parts.next(), parts.next()) {
            out.push((o.to_string(), n.to_string(), r.to_string()));
        }
        rest = &rest[len..];
    }
    out
}

fn pkt(data: &[u8]) -> Vec<u8> {
    let mut v = format!("{:04x}", data.len() + 4).into_bytes();
    v.extend_from_slice(data);
    v
}

/// A receive-pack answer refusing every ref of the push, each with the
/// credentials in its reason (in side band 1 when the client asked).
fn refuse_each_ref(mut req: tiny_http::Request, echoed: &str) {
    let mut body = Vec::new();
    req.as_reader().read_to_end(&mut body).unwrap();
    let sideband = String::from_utf8_lossy(&body).contains("side-band-64k");
    let mut report = pkt(b"unpack ok\n");
    for (_, _, name) in push_commands(&body) {
        report.extend(pkt(format!("ng {name} denied: {echoed}\n").as_bytes()));
    }
    report.extend_from_slice(b"0000");
    let out = if sideband {
        let mut framed = Vec::new();
        for chunk in report.chunks(8000) {
            let mut band = vec![1u8];
            band.extend_from_slice(chunk);
            framed.extend(pkt(&band));
        }
        framed.extend_from_slice(b"0000");
        framed
    } else {
        report
    };
    respond(
        req,
        200,
        &[("Content-Type", "application/x-git-receive-pack-result")],
        out,
    );
}
