//! A real Docker Engine for the docker-daemon tests: Debian's `docker.io`
//! (`dockerd`, installed by .ci/run), started per test on a private socket
//! in a fresh directory with no bridge, no iptables and the vfs storage
//! driver (so nothing on the host changes), and stopped when dropped. The
//! helpers talk to it with curl over the socket, as a second client would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Dockerd {
    child: Child,
    dir: tempfile::TempDir,
    pub socket: PathBuf,
    /// The certificates of a TLS daemon, removed with it.
    certs: Option<tempfile::TempDir>,
}

impl Dockerd {
    /// `None` when no `dockerd` is installed (outside CI; .ci/run installs
    /// it) or the test is not root.
    pub fn start() -> Option<Dockerd> {
        Dockerd::start_with(&[])
    }

    /// A daemon that also listens on loopback TCP with `--tlsverify`:
    /// with the TCP address, and a directory holding the client's
    /// `ca.pem`, `cert.pem` and `key.pem` (what `DOCKER_CERT_PATH`
    /// names), made with openssl: a CA, the daemon's certificate for
    /// 127.0.0.1, and a client certificate the CA signed.
    pub fn start_tls() -> Option<(Dockerd, String, PathBuf)> {
        let tmp = tempfile::tempdir().unwrap();
        let certs = tmp.path().to_path_buf();
        ca_and_pair(&certs, "ca");
        pair(
            &certs,
            "server",
            "ca",
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth",
        );
        let client = certs.join("client");
        std::fs::create_dir(&client).unwrap();
        pair(&certs, "cert", "ca", "extendedKeyUsage=clientAuth");
        std::fs::copy(certs.join("ca.pem"), client.join("ca.pem")).unwrap();
        std::fs::rename(certs.join("cert.pem"), client.join("cert.pem")).unwrap();
        std::fs::rename(certs.join("cert-key.pem"), client.join("key.pem")).unwrap();
        let port = super::registries::free_port();
        let addr = format!("127.0.0.1:{port}");
        let p = |s: &str| certs.join(s).display().to_string();
        let d = Dockerd::start_with(&[
            "-H".into(),
            format!("tcp://{addr}"),
            "--tlsverify".into(),
            "--tlscacert".into(),
            p("ca.pem"),
            "--tlscert".into(),
            p("server.pem"),
            "--tlskey".into(),
            p("server-key.pem"),
        ])?;
        let mut d = d;
        d.certs = Some(tmp);
        Some((d, addr, client))
    }

    /// A daemon that also listens on plain loopback TCP (for a hostile
    /// front before it), with that address.
    pub fn start_tcp() -> Option<(Dockerd, String)> {
        let addr = format!("127.0.0.1:{}", super::registries::free_port());
        let d = Dockerd::start_with(&["-H".into(), format!("tcp://{addr}")])?;
        Some((d, addr))
    }

    fn start_with(extra: &[String]) -> Option<Dockerd> {
        if !super::is_root() || Command::new("dockerd").arg("--version").output().is_err() {
            eprintln!("skipped: needs root and dockerd (Debian's docker.io)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("rwd")
            .tempdir_in("/tmp")
            .unwrap();
        let socket = dir.path().join("d.sock");
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let p = |s: &str| dir.path().join(s);
        let child = Command::new("dockerd")
            .arg("--data-root")
            .arg(p("data"))
            .arg("--exec-root")
            .arg(p("exec"))
            .arg("--pidfile")
            .arg(p("pid"))
            .arg("-H")
            .arg(format!("unix://{}", socket.display()))
            .args([
                "--iptables=false",
                "--ip6tables=false",
                "--bridge=none",
                "--ip-forward=false",
                "--ip-masq=false",
                "--storage-driver=vfs",
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dockerd starts");
        let d = Dockerd {
            child,
            dir,
            socket,
            certs: None,
        };
        let start = Instant::now();
        while d.get("/_ping").0 != 200 {
            if start.elapsed() > Duration::from_secs(60) {
                panic!(
                    "dockerd did not come up:\n{}",
                    std::fs::read_to_string(d.dir.path().join("log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Some(d)
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// One request over the socket; (status, body).
    pub fn call(&self, method: &str, path: &str, body: Option<(&str, &[u8])>) -> (u16, Vec<u8>) {
        call_on(&self.socket, method, path, body)
    }

    pub fn get(&self, path: &str) -> (u16, Vec<u8>) {
        self.call("GET", path, None)
    }

    pub fn json(&self, method: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
        let (s, b) = self.call(
            method,
            path,
            Some(("application/json", body.to_string().as_bytes())),
        );
        assert!(
            (200..300).contains(&s),
            "{method} {path}: {s} {}",
            String::from_utf8_lossy(&b)
        );
        serde_json::from_slice(&b).unwrap_or(serde_json::Value::Null)
    }

    /// An image imported from an empty tarball (`repo` empty: a dangling
    /// one), with `labels`; its id.
    pub fn import(&self, repo: &str, labels: &[(&str, &str)]) -> String {
        let mut path = String::from("/images/create?fromSrc=-");
        if !repo.is_empty() {
            let (r, t) = repo.split_once(':').unwrap_or((repo, "latest"));
            path.push_str(&format!("&repo={r}&tag={t}"));
        }
        for (k, v) in labels {
            path.push_str(&format!("&changes=LABEL%20{k}%3D{v}"));
        }
        path.push_str("&changes=CMD%20%5B%22%2Fx%22%5D");
        let (s, b) = self.call(
            "POST",
            &path,
            Some(("application/x-tar", &runwarden::archive::tar(&[]))),
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        v["status"].as_str().unwrap().to_string()
    }

    /// Everything the daemon holds, as comparable lines: each image's id,
    /// tags and labels, each volume's name, labels and files, each
    /// container's id, name and labels, each network's id, name and labels.
    pub fn state(&self) -> Vec<String> {
        let list = |path: &str| -> Vec<serde_json::Value> {
            let (_, b) = self.get(path);
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            match v {
                serde_json::Value::Array(a) => a,
                v => v["Volumes"].as_array().cloned().unwrap_or_default(),
            }
        };
        let mut out = vec![];
        for i in list("/images/json?all=1") {
            out.push(format!(
                "image {} {} {}",
                i["Id"], i["RepoTags"], i["Labels"]
            ));
        }
        for v in list("/volumes") {
            out.push(format!("volume {} {}", v["Name"], v["Labels"]));
            let root = self
                .dir
                .path()
                .join("data/volumes")
                .join(v["Name"].as_str().unwrap())
                .join("_data");
            for f in files(&root) {
                out.push(format!(
                    "  file {} {:?}",
                    f.display(),
                    std::fs::read(&f).ok()
                ));
            }
        }
        for c in list("/containers/json?all=1") {
            out.push(format!(
                "container {} {} {}",
                c["Id"], c["Names"], c["Labels"]
            ));
        }
        for n in list("/networks") {
            out.push(format!("network {} {} {}", n["Id"], n["Name"], n["Labels"]));
        }
        out.sort();
        out
    }

    /// Foreign objects of every kind: a tagged and a dangling image, a
    /// labelled volume with a file in it, a created container using both,
    /// a network, and names in runwarden's form of another probe.
    pub fn foreign(&self) {
        self.import("foreign/app:1", &[("owner", "them")]);
        self.import("", &[("dangling", "yes")]);
        self.import(
            "runwarden-other-image-tag-0123456789abcdef",
            &[("runwarden.plant", "x")],
        );
        self.json(
            "POST",
            "/volumes/create",
            &serde_json::json!({ "Name": "cache-vol", "Labels": { "team": "a" } }),
        );
        self.json(
            "POST",
            "/volumes/create",
            &serde_json::json!({ "Name": "runwarden-other-volume-name-0123456789abcdef" }),
        );
        self.json(
            "POST",
            "/containers/create?name=foreign-c",
            &serde_json::json!({ "Image": "foreign/app:1", "Labels": { "x": "y" }, "HostConfig": { "Mounts": [{ "Type": "volume", "Source": "cache-vol", "Target": "/c" }] } }),
        );
        let tar = runwarden::archive::tar(&[("keep.txt", b"foreign bytes\n")]);
        let (s, _) = self.call(
            "PUT",
            "/containers/foreign-c/archive?path=/c",
            Some(("application/x-tar", &tar)),
        );
        assert_eq!(s, 200);
        self.json(
            "POST",
            "/networks/create",
            &serde_json::json!({ "Name": "foreign-net", "Internal": true, "Labels": { "n": "1" } }),
        );
    }
}

/// One request to the Engine API on the unix socket `socket`, as a
/// second client (curl) makes it; (status, body).
pub fn call_on(
    socket: &Path,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
) -> (u16, Vec<u8>) {
    let mut c = Command::new("curl");
    c.args([
        "-s",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
        "--unix-socket",
    ])
    .arg(socket);
    let tmp;
    if let Some((ctype, data)) = body {
        tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), data).unwrap();
        c.args(["-H", &format!("Content-Type: {ctype}"), "--data-binary"])
            .arg(format!("@{}", tmp.path().display()));
    }
    let out = c.arg(format!("http://d/v1.41{path}")).output().unwrap();
    let text = out.stdout;
    let cut = text.iter().rposition(|b| *b == b'\n').unwrap_or(0);
    let status = String::from_utf8_lossy(&text[cut..])
        .trim()
        .parse()
        .unwrap_or(0);
    (status, text[..cut].to_vec())
}

/// openssl, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA: `<name>.pem` and `<name>-key.pem`.
pub fn ca_and_pair(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}-key.pem"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

/// A key and a certificate `ca` signed, with these extensions.
pub fn pair(dir: &Path, name: &str, ca: &str, ext: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}-key.pem"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}-key.pem"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

fn files(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        // The networks a test made leave interfaces on the host until
        // removed.
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&self.get("/networks").1) {
            for n in v.as_array().into_iter().flatten() {
                if !matches!(n["Name"].as_str(), Some("none" | "host" | "bridge")) {
                    self.call(
                        "DELETE",
                        &format!("/networks/{}", n["Id"].as_str().unwrap_or("")),
                        None,
                    );
                }
            }
        }
        stop(&mut self.child);
    }
}

/// Stops dockerd (SIGTERM, then SIGKILL after 20 s) and waits for it.
fn stop(child: &mut Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
