//! Real package servers on loopback for the registry surface tests:
//! Verdaccio (npm) and devpi-server (PyPI), installed once by
//! scripts/test-servers.sh, each started per test in a fresh directory with
//! one user who may publish and one who may only read, and stopped when
//! dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where scripts/test-servers.sh installed the servers.
pub fn servers() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(root.join("scripts/test-servers.sh"))
            .output()
            .expect("scripts/test-servers.sh runs");
        assert!(
            out.status.success(),
            "installing the test servers failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
    })
}

/// A loopback TCP port nobody listens on (now).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `url` answers with `ok`, or panics with the log.
fn wait_for(url: &str, log: &Path) {
    let start = Instant::now();
    loop {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", url])
            .output()
            .unwrap();
        if out.stdout == b"200" {
            return;
        }
        if start.elapsed() > Duration::from_secs(60) {
            panic!(
                "{url} did not come up:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// curl with a JSON body; (status, body).
pub fn curl(method: &str, url: &str, auth: &[&str], body: Option<&str>) -> (u16, String) {
    let mut c = Command::new("curl");
    c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method])
        .args(auth)
        .arg(url);
    if let Some(b) = body {
        c.args(["-H", "content-type: application/json", "--data-binary", b]);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.parse().unwrap_or(0), body.to_string())
}

/// A server process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub struct Verdaccio {
    pub url: String,
    /// Tokens of `publisher` (may publish and unpublish) and `reader`.
    pub publisher: String,
    pub reader: String,
    pub dir: tempfile::TempDir,
    _child: Running,
}

impl Verdaccio {
    pub fn start() -> Verdaccio {
        let bin = servers().join("verdaccio/node_modules/.bin/verdaccio");
        let dir = tempfile::tempdir().unwrap();
        // {SHA} htpasswd entries: base64(sha1(password)).
        let sha = |p: &str| {
            let out = Command::new("python3")
                .args([
                    "-c",
                    "import hashlib,base64,sys;print(base64.b64encode(hashlib.sha1(sys.argv[1].encode()).digest()).decode())",
                    p,
                ])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        std::fs::write(
            dir.path().join("htpasswd"),
            format!(
                "publisher:{{SHA}}{}\nreader:{{SHA}}{}\n",
                sha("pub-pass-8c1d"),
                sha("read-pass-3f7a")
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            "storage: ./storage\nauth:\n  htpasswd:\n    file: ./htpasswd\n    max_users: -1\npackages:\n  '@*/*':\n    access: $authenticated\n    publish: publisher\n    unpublish: publisher\n  '**':\n    access: $authenticated\n    publish: publisher\n    unpublish: publisher\nlog: { type: stdout, format: pretty, level: warn }\n",
        )
        .unwrap();
        let port = free_port();
        let log = dir.path().join("log");
        let child = Command::new(bin)
            .arg("--config")
            .arg(dir.path().join("config.yaml"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .current_dir(dir.path())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/");
        wait_for(&format!("{url}-/ping"), &log);
        let token = |user: &str, pass: &str| {
            let (code, body) = curl(
                "PUT",
                &format!("{url}-/user/org.couchdb.user:{user}"),
                &["-u", &format!("{user}:{pass}")],
                Some(&format!(r#"{{"name":"{user}","password":"{pass}"}}"#)),
            );
            assert_eq!(code, 201, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            v["token"].as_str().unwrap().to_string()
        };
        let publisher = token("publisher", "pub-pass-8c1d");
        let reader = token("reader", "read-pass-3f7a");
        Verdaccio {
            url,
            publisher,
            reader,
            dir,
            _child: Running(child),
        }
    }

    /// Publishes a package as `publisher` (foreign packages for tests).
    pub fn publish(&self, name: &str, version: &str, readme: &str) {
        let tgz = runwarden::archive::tgz(&[(
            "package/package.json",
            format!(r#"{{"name":"{name}","version":"{version}"}}"#).as_bytes(),
        )]);
        use base64::Engine as _;
        let file = format!("{}-{version}.tgz", name.rsplit('/').next().unwrap());
        let doc = serde_json::json!({
            "_id": name, "name": name, "readme": readme,
            "dist-tags": { "latest": version },
            "versions": { version: { "name": name, "version": version, "readme": readme,
                "dist": { "tarball": format!("{}{name}/-/{file}", self.url) } } },
            "_attachments": { file: { "content_type": "application/octet-stream",
                "data": base64::engine::general_purpose::STANDARD.encode(&tgz), "length": tgz.len() } },
        });
        let (code, body) = curl(
            "PUT",
            &format!("{}{}", self.url, name.replace('/', "%2f")),
            &["-H", &format!("authorization: Bearer {}", self.publisher)],
            Some(&doc.to_string()),
        );
        assert_eq!(code, 201, "{body}");
    }

    /// Every package's document as Verdaccio stores it, by name.
    pub fn packages(&self) -> std::collections::BTreeMap<String, String> {
        let mut out = std::collections::BTreeMap::new();
        let storage = self.dir.path().join("storage");
        let mut stack = vec![storage.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().is_some_and(|n| n == "package.json") {
                    let rel = p.parent().unwrap().strip_prefix(&storage).unwrap();
                    out.insert(
                        rel.to_string_lossy().into_owned(),
                        std::fs::read_to_string(&p).unwrap(),
                    );
                }
            }
        }
        out
    }
}

pub struct Devpi {
    pub base: String,
    /// `uploader` may upload to `uploader/dev` (volatile: deletions
    /// allowed); `reader` may not.
    pub uploader: (String, String),
    pub reader: (String, String),
    _child: Running,
    _dir: tempfile::TempDir,
}

impl Devpi {
    pub fn start() -> Devpi {
        let bin = servers().join("devpi/bin");
        let dir = tempfile::tempdir().unwrap();
        let serverdir = dir.path().join("server");
        let out = Command::new(bin.join("devpi-init"))
            .arg("--serverdir")
            .arg(&serverdir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let log = dir.path().join("log");
        let child = Command::new(bin.join("devpi-server"))
            .arg("--serverdir")
            .arg(&serverdir)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        wait_for(&format!("{base}/+api"), &log);
        let uploader = ("uploader".to_string(), "up-pass-51c2".to_string());
        let reader = ("reader".to_string(), "ro-pass-9e04".to_string());
        for (u, p) in [&uploader, &reader] {
            let (code, body) = curl(
                "PUT",
                &format!("{base}/{u}"),
                &[],
                Some(&format!(r#"{{"password":"{p}"}}"#)),
            );
            assert_eq!(code, 201, "{body}");
        }
        let (code, body) = curl(
            "PUT",
            &format!("{base}/uploader/dev"),
            &["-u", "uploader:up-pass-51c2"],
            Some(r#"{"type":"stage","bases":[],"acl_upload":["uploader"],"volatile":true}"#),
        );
        assert_eq!(code, 200, "{body}");
        Devpi {
            base,
            uploader,
            reader,
            _child: Running(child),
            _dir: dir,
        }
    }

    pub fn index(&self) -> String {
        format!("{}/uploader/dev/", self.base)
    }

    /// Uploads an sdist as `uploader` (foreign projects for tests).
    pub fn upload(&self, name: &str, version: &str, description: &str) {
        let file = format!("{}-{version}.tar.gz", name.replace('-', "_"));
        let data = runwarden::archive::tgz(&[(
            &format!("x-{version}/PKG-INFO"),
            b"Metadata-Version: 2.1\n",
        )]);
        let path = self._dir.path().join(&file);
        std::fs::write(&path, data).unwrap();
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-u",
                "uploader:up-pass-51c2",
            ])
            .args([
                "-F",
                ":action=file_upload",
                "-F",
                &format!("name={name}"),
                "-F",
                &format!("version={version}"),
            ])
            .args([
                "-F",
                "metadata_version=2.1",
                "-F",
                &format!("description={description}"),
            ])
            .args([
                "-F",
                &format!("content=@{};filename={file}", path.display()),
            ])
            .arg(self.index())
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"200", "upload of {name}");
    }

    /// Every project's simple page, by the root's links: what the index
    /// serves, to compare before and after.
    pub fn snapshot(&self) -> std::collections::BTreeMap<String, String> {
        let simple = format!("{}+simple/", self.index());
        let (_, root) = curl("GET", &simple, &[], None);
        let mut out = std::collections::BTreeMap::new();
        for part in root.split("href=\"").skip(1) {
            let name = part
                .split('"')
                .next()
                .unwrap()
                .trim_end_matches('/')
                .to_string();
            let (_, page) = curl("GET", &format!("{simple}{name}/"), &[], None);
            let (_, meta) = curl(
                "GET",
                &format!("{}{name}", self.index()),
                &["-H", "accept: application/json"],
                None,
            );
            out.insert(name, format!("{page}\n{meta}"));
        }
        out.insert("(root)".into(), root);
        out
    }
}

/// Debian's `docker-registry` (CNCF distribution 2.8) on loopback:
/// filesystem storage in a fresh directory, deletes enabled, htpasswd
/// basic auth (bcrypt, made with Python's `crypt`: libxcrypt has it; the
/// lowest cost, since the registry checks it on every request) for one
/// user; [`DockerRegistry::read_only`] answers every write with 405.
pub struct DockerRegistry {
    /// The origin (`http://127.0.0.1:PORT`).
    pub url: String,
    pub user: &'static str,
    pub password: &'static str,
    pub dir: tempfile::TempDir,
    _token: Option<super::registry_token::TokenServer>,
    _child: Running,
}

/// The OCI empty blob every test manifest uses as its config.
pub const EMPTY_DIGEST: &str =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";

impl DockerRegistry {
    pub fn start() -> DockerRegistry {
        DockerRegistry::with(false, false)
    }

    pub fn read_only() -> DockerRegistry {
        DockerRegistry::with(true, false)
    }

    /// Without `storage.delete.enabled`: every delete is 405
    /// `UNSUPPORTED`.
    pub fn without_delete() -> DockerRegistry {
        let r = DockerRegistry::start();
        let cfg = r.dir.path().join("config.yml");
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(
            &cfg,
            text.replace("delete: { enabled: true }", "delete: { enabled: false }"),
        )
        .unwrap();
        r.restart()
    }

    /// The same registry (directory, port, users) started again with its
    /// config as it now is.
    fn restart(mut self) -> DockerRegistry {
        let _ = self._child.0.kill();
        let _ = self._child.0.wait();
        self._child = Running(
            Command::new("docker-registry")
                .arg("serve")
                .arg(self.dir.path().join("config.yml"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let start = Instant::now();
        while ![200, 401].contains(&self.api("GET", "/v2/", &[], None).0) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "docker-registry did not come back"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        self
    }

    /// Behind a loopback token service (`auth: token`): the bearer flow,
    /// for `pusher` and `reader` ([`super::registry_token::USERS`]). The
    /// helper's own requests ([`DockerRegistry::api`]) are refused there.
    pub fn token_auth() -> DockerRegistry {
        DockerRegistry::with(false, true)
    }

    fn with(read_only: bool, token: bool) -> DockerRegistry {
        let dir = tempfile::tempdir().unwrap();
        let (user, password) = ("pusher", "push-pass-51c0");
        let out = Command::new("python3")
            .args([
                "-W",
                "ignore",
                "-c",
                "import crypt,sys;print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))",
                password,
            ])
            .output()
            .unwrap();
        let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(hash.starts_with("$2"), "no bcrypt: {out:?}");
        std::fs::write(dir.path().join("htpasswd"), format!("{user}:{hash}\n")).unwrap();
        let port = free_port();
        let d = dir.path().display();
        let token = token.then(|| super::registry_token::TokenServer::start(dir.path()));
        let auth = match &token {
            Some(t) => format!(
                "  token: {{ realm: \"{}\", service: {}, issuer: {}, rootcertbundle: {} }}\n",
                t.realm,
                super::registry_token::SERVICE,
                super::registry_token::ISSUER,
                t.cert.display()
            ),
            None => format!("  htpasswd: {{ realm: test, path: {d}/htpasswd }}\n"),
        };
        std::fs::write(
            dir.path().join("config.yml"),
            format!(
                "version: 0.1\nlog: {{ level: error }}\nstorage:\n  filesystem: {{ rootdirectory: {d}/data }}\n  delete: {{ enabled: true }}\n  maintenance:\n    uploadpurging: {{ enabled: false }}\n    readonly: {{ enabled: {read_only} }}\nhttp: {{ addr: 127.0.0.1:{port} }}\nauth:\n{auth}"
            ),
        )
        .unwrap();
        let log = dir.path().join("log");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.path().join("config.yml"))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("err")).unwrap())
            .spawn()
            .expect("docker-registry runs (apt-get install docker-registry)");
        let reg = DockerRegistry {
            url: format!("http://127.0.0.1:{port}"),
            user,
            password,
            dir,
            _token: token,
            _child: Running(child),
        };
        let start = Instant::now();
        while ![200, 401].contains(&reg.api("GET", "/v2/", &[], None).0) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "docker-registry did not come up"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        reg
    }

    /// One request as the user: (status, headers and body as text).
    pub fn api(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: Option<&[u8]>,
    ) -> (u16, String) {
        let mut c = Command::new("curl");
        c.args(["-s", "-i", "-w", "\n%{http_code}", "-X", method])
            .args(["-u", &format!("{}:{}", self.user, self.password)]);
        if method == "HEAD" {
            c.arg("-I");
        }
        for h in headers {
            c.args(["-H", h]);
        }
        if let Some(b) = body {
            let f = self.dir.path().join("body");
            std::fs::write(&f, b).unwrap();
            c.arg("--data-binary").arg(format!("@{}", f.display()));
        }
        let out = c.arg(format!("{}{path}", self.url)).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (rest, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), rest.to_string())
    }

    /// Uploads a blob to `repo`.
    pub fn blob(&self, repo: &str, data: &[u8]) -> String {
        use sha2::Digest as _;
        let digest = format!(
            "sha256:{}",
            runwarden::nonce::to_hex(&sha2::Sha256::digest(data))
        );
        let (code, text) = self.api("POST", &format!("/v2/{repo}/blobs/uploads/"), &[], None);
        assert_eq!(code, 202, "{text}");
        let loc = text
            .lines()
            .find_map(|l| l.strip_prefix("Location: "))
            .unwrap()
            .trim()
            .strip_prefix(&self.url)
            .unwrap()
            .to_string();
        let (code, text) = self.api(
            "PUT",
            &format!("{loc}&digest={digest}"),
            &["content-type: application/octet-stream"],
            Some(data),
        );
        assert_eq!(code, 201, "{text}");
        digest
    }

    /// Pushes an OCI manifest (the empty config, `note` as its one
    /// annotation) to `repo` under `reference` (a tag, or its own digest:
    /// an untagged, dangling manifest); its digest.
    pub fn manifest(&self, repo: &str, reference: Option<&str>, note: &str) -> String {
        self.blob(repo, b"{}");
        let m = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": { "mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST, "size": 2 },
            "layers": [{ "mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST, "size": 2 }],
            "annotations": { "note": note },
        })
        .to_string();
        use sha2::Digest as _;
        let digest = format!(
            "sha256:{}",
            runwarden::nonce::to_hex(&sha2::Sha256::digest(m.as_bytes()))
        );
        let (code, text) = self.api(
            "PUT",
            &format!("/v2/{repo}/manifests/{}", reference.unwrap_or(&digest)),
            &["content-type: application/vnd.oci.image.manifest.v1+json"],
            Some(m.as_bytes()),
        );
        assert_eq!(code, 201, "{text}");
        digest
    }

    /// The JSON body of a GET.
    pub fn get(&self, path: &str) -> serde_json::Value {
        let (code, text) = self.api("GET", path, &[], None);
        assert_eq!(code, 200, "{path}: {text}");
        let body = text.split("\r\n\r\n").last().unwrap_or("");
        serde_json::from_str(body).unwrap()
    }

    /// Every repository the catalog lists (paging by `last`).
    pub fn catalog(&self) -> Vec<String> {
        let mut all: Vec<String> = vec![];
        loop {
            let last = all.last().cloned().unwrap_or_default();
            let v = self.get(&format!("/v2/_catalog?n=1000&last={last}"));
            let page: Vec<String> = serde_json::from_value(v["repositories"].clone()).unwrap();
            if page.is_empty() {
                return all;
            }
            all.extend(page);
        }
    }

    /// The digest a tag or digest of `repo` has (HEAD), or its status.
    pub fn digest(&self, repo: &str, reference: &str) -> String {
        let (code, text) = self.api(
            "HEAD",
            &format!("/v2/{repo}/manifests/{reference}"),
            &["accept: application/vnd.oci.image.manifest.v1+json"],
            None,
        );
        text.lines()
            .find_map(|l| l.strip_prefix("Docker-Content-Digest: "))
            .map(|d| d.trim().to_string())
            .unwrap_or_else(|| format!("HTTP {code}"))
    }

    /// What is there, repository by repository, for repositories `keep`
    /// accepts: the tags list, and each tag's digest.
    pub fn snapshot(
        &self,
        keep: &dyn Fn(&str) -> bool,
    ) -> std::collections::BTreeMap<String, String> {
        let mut out = std::collections::BTreeMap::new();
        for repo in self.catalog().into_iter().filter(|r| keep(r)) {
            let tags = self.get(&format!("/v2/{repo}/tags/list"))["tags"].clone();
            for t in tags.as_array().into_iter().flatten() {
                let t = t.as_str().unwrap();
                out.insert(format!("{repo}:{t}"), self.digest(&repo, t));
            }
            out.insert(repo, tags.to_string());
        }
        out
    }
}
