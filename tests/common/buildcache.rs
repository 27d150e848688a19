//! Real build caches on loopback for the build-cache surface tests, each
//! started per test in a fresh directory and killed when dropped:
//!
//! - [`Nginx`]: Debian's nginx (`nginx-light`, installed by .ci/run) with
//!   its DAV module as a Bazel and Gradle HTTP cache: `PUT`, `GET`, `HEAD`
//!   and `DELETE` of plain files under one root, basic auth for
//!   [`WRITER`] (everything), [`READER`] (reads only: writes 403) and
//!   [`NODELETE`] (reads and writes: deletes 403).
//! - [`Turbo`]: turborepo-remote-cache (npm, installed once by
//!   scripts/test-servers.sh), a Turborepo remote cache with one static
//!   token, on local storage (shareable by two servers) or on S3
//!   (SeaweedFS: [`super::seaweed`]).

use super::registries::{free_port, servers};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One basic-auth user of [`Nginx`].
pub struct User {
    pub name: &'static str,
    pub password: &'static str,
}

pub const WRITER: User = User {
    name: "writer",
    password: "writer-pass-2b7e41",
};
pub const READER: User = User {
    name: "reader",
    password: "reader-pass-9d03c6",
};
pub const NODELETE: User = User {
    name: "nodelete",
    password: "nodelete-pass-61fa08",
};

/// The environment a config of [`Nginx::config`] reads `user` from.
pub fn env(user: &User) -> [(&'static str, &'static str); 2] {
    [("BC_USER", user.name), ("BC_PASS", user.password)]
}

/// The static token of every [`Turbo`].
pub const TOKEN: &str = "turbo-token-4c8e1f2a";

/// The environment a config of [`Turbo::config`] reads [`TOKEN`] from.
pub const TOKEN_ENV: (&str, &str) = ("TURBO_TOKEN", TOKEN);

/// Debian's nginx: in /usr/sbin, which a non-login PATH may lack.
fn nginx_bin() -> PathBuf {
    let sbin = PathBuf::from("/usr/sbin/nginx");
    if sbin.exists() {
        sbin
    } else {
        PathBuf::from("nginx")
    }
}

/// Whether nginx is installed (for `needs_tool`).
pub fn nginx_present() -> bool {
    Command::new(nginx_bin())
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The last lines of a log file, for a panic message.
fn tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// The status `curl` gets for a GET of `url`, "000" when
/// nothing answers. Bounded: a server that accepts and never answers must
/// not hang the wait.
fn status(url: &str) -> String {
    Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
        ])
        .arg(url)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_else(|e| panic!("curl is needed to wait for the servers: {e}"))
}

/// Waits until `url` answers `want`; an error with the log's tail when the
/// server exits first or 30 s pass.
fn wait_until(child: &mut Child, url: &str, want: &str, log: &Path) -> Result<(), String> {
    let start = Instant::now();
    loop {
        let got = status(url);
        if got == want {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("{url}: the server exited ({st}):\n{}", tail(log)));
        }
        if start.elapsed() > Duration::from_secs(30) {
            return Err(format!(
                "{url} answered {got}, not {want}, for 30 s:\n{}",
                tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An `openssl passwd -apr1` htpasswd line (the format nginx's auth_basic
/// reads without any module of its own).
fn htpasswd_line(user: &User) -> String {
    let out = Command::new("openssl")
        .args(["passwd", "-apr1", user.password])
        .output()
        .unwrap_or_else(|e| panic!("openssl is needed for the htpasswd file: {e}"));
    let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(hash.starts_with("$apr1$"), "openssl passwd -apr1: {out:?}");
    format!("{}:{hash}\n", user.name)
}

pub struct Nginx {
    /// The origin (`http://127.0.0.1:PORT`), no trailing slash.
    pub url: String,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// A fresh, empty cache; `delete` false leaves DELETE out of
    /// `dav_methods` (every DELETE then answers 405). Started again, on
    /// another port, when it does not come up: a port taken between
    /// [`free_port`] and nginx's bind is the usual cause.
    pub fn start(delete: bool) -> Nginx {
        let mut why = String::new();
        for _ in 0..3 {
            match Nginx::try_start(delete) {
                Ok(n) => return n,
                Err(e) => why = e,
            }
        }
        panic!("nginx did not come up, three times: {why}");
    }

    fn try_start(delete: bool) -> Result<Nginx, String> {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        let users: String = [WRITER, READER, NODELETE]
            .iter()
            .map(htpasswd_line)
            .collect();
        std::fs::write(dir.path().join("htpasswd"), users).unwrap();
        let port = free_port();
        let methods = if delete { "PUT DELETE" } else { "PUT" };
        // `master_process off`: one process, so that killing it (SIGKILL,
        // on drop) leaves no worker holding the port. `user root` would
        // matter only with workers (as `nobody` they cannot write the
        // files: PUT 500); kept so that turning workers on stays safe.
        // Refusals: `$remote_user` is the name sent, checked or not, and
        // the rewrite phase runs before auth_basic, so a refused request
        // goes to an internal location whose 403 comes from `try_files`
        // (a phase after the access phase, under a root that does not
        // exist): a wrong password or none is 401 first, as it should be.
        let conf = format!(
            r#"user root;
daemon off;
master_process off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  types {{ }}
  default_type application/octet-stream;
  map "$request_method:$remote_user" $refused {{
    default 1;
    ~^(GET|HEAD): 0;
    PUT:writer 0;
    PUT:nodelete 0;
    DELETE:writer 0;
  }}
  server {{
    listen 127.0.0.1:{port};
    root {d}/data;
    auth_basic "build cache";
    auth_basic_user_file {d}/htpasswd;
    location / {{
      if ($refused) {{ rewrite ^ /.refused last; }}
      dav_methods {methods};
      create_full_put_path on;
      client_max_body_size 16m;
    }}
    location = /.refused {{ internal; root {d}/none; try_files $uri =403; }}
  }}
}}
"#
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let log = dir.path().join("error.log");
        // `-e`: nginx opens its built-in error log (/var/log/nginx) before
        // it reads the config, unless told otherwise.
        let mut child = Command::new(nginx_bin())
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .arg("-e")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("err")).unwrap())
            .spawn()
            .map_err(|e| format!("nginx does not run (apt-get install nginx-light): {e}"))?;
        let url = format!("http://127.0.0.1:{port}");
        // Up means asking for credentials: auth is on too.
        if let Err(e) = wait_until(&mut child, &format!("{url}/"), "401", &log) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{e}\n{}", tail(&dir.path().join("err"))));
        }
        Ok(Nginx { url, dir, child })
    }

    /// The served root: a key `/ac/x` is the file `data()/ac/x`.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A config with one build-cache surface at `url_path` (`/cache`,
    /// say, or "" for the root), credentials from [`env`].
    pub fn config(&self, name: &str, protocol: &str, url_path: &str) -> String {
        format!(
            "version: 1\nsurfaces:\n  - name: {name}\n    type: build-cache\n    protocol: {protocol}\n    url: {}{url_path}\n    username-env: BC_USER\n    password-env: BC_PASS\n",
            self.url
        )
    }
}

/// Where a [`Turbo`] keeps artifacts (`<team>/<hash>`, and
/// `<team>/<hash>.tag` with [`TurboOpts::signature`]; the team is the
/// `teamId` query parameter, else `team`, else `slug`).
#[derive(Clone)]
pub enum TurboStorage {
    /// A directory; two servers given the same one share a cache.
    Local(PathBuf),
    /// A bucket, path-style, region us-east-1.
    S3 {
        endpoint: String,
        bucket: String,
        access: String,
        secret: String,
    },
}

#[derive(Clone)]
pub struct TurboOpts {
    /// Sets TURBO_REMOTE_CACHE_SIGNATURE_KEY: only then is `x-artifact-tag`
    /// kept and returned, and an artifact stored without one reads 404.
    pub signature: bool,
    /// READ_ONLY=true: every write answers 403.
    pub read_only: bool,
    pub storage: TurboStorage,
}

pub struct Turbo {
    /// The origin (`http://127.0.0.1:PORT`), no trailing slash.
    pub url: String,
    pub token: &'static str,
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Drop for Turbo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Turbo {
    /// A fresh server with `opts`; started again, on another port, when
    /// it does not come up (a port taken since [`free_port`]).
    pub fn start(opts: TurboOpts) -> Turbo {
        let mut why = String::new();
        for _ in 0..3 {
            match Turbo::try_start(&opts) {
                Ok(t) => return t,
                Err(e) => why = e,
            }
        }
        panic!("turborepo-remote-cache did not come up, three times: {why}");
    }

    fn try_start(opts: &TurboOpts) -> Result<Turbo, String> {
        let cli = servers().join("turborepo/node_modules/turborepo-remote-cache/dist/cli.js");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let log = dir.path().join("log");
        let mut c = Command::new("node");
        // A clean environment: the server reads any of its variables
        // (READ_ONLY, TURBO_CACHE_READ_URL, LOG_MODE...) and the AWS SDK
        // reads AWS_* (an endpoint, a profile) from whatever it inherits.
        c.arg(&cli)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .env("TURBO_TOKEN", TOKEN)
            .env("AUTH_MODE", "static")
            // Errors only: a port already taken is logged at that level
            // (then it exits 1); every refused request is a warning.
            .env("LOG_LEVEL", "error")
            .env("STORAGE_PATH_USE_TMP_FOLDER", "false")
            .current_dir(dir.path());
        match &opts.storage {
            TurboStorage::Local(path) => {
                c.env("STORAGE_PROVIDER", "local").env("STORAGE_PATH", path);
            }
            TurboStorage::S3 {
                endpoint,
                bucket,
                access,
                secret,
            } => {
                c.env("STORAGE_PROVIDER", "s3")
                    .env("STORAGE_PATH", bucket)
                    .env("S3_ENDPOINT", endpoint)
                    .env("S3_ACCESS_KEY", access)
                    .env("S3_SECRET_KEY", secret)
                    .env("S3_REGION", "us-east-1");
            }
        }
        if opts.signature {
            // The server never checks a tag against this key: it only
            // switches keeping tags on.
            c.env(
                "TURBO_REMOTE_CACHE_SIGNATURE_KEY",
                "turbo-signature-key-7a2d",
            );
        }
        if opts.read_only {
            c.env("READ_ONLY", "true");
        }
        let out = std::fs::File::create(&log).unwrap();
        let mut child = c
            .stderr(out.try_clone().unwrap())
            .stdout(out)
            .spawn()
            .map_err(|e| format!("node does not run: {e}"))?;
        let url = format!("http://127.0.0.1:{port}");
        // The status route sits outside the token check: 200 once it
        // listens, whatever the storage.
        if let Err(e) = wait_until(
            &mut child,
            &format!("{url}/v8/artifacts/status"),
            "200",
            &log,
        ) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(Turbo {
            url,
            token: TOKEN,
            dir,
            child,
        })
    }

    /// A config with one turborepo build-cache surface for `team`, the
    /// token from [`TOKEN_ENV`].
    pub fn config(&self, name: &str, team: &str) -> String {
        format!(
            "version: 1\nsurfaces:\n  - name: {name}\n    type: build-cache\n    protocol: turborepo\n    url: {}\n    token-env: TURBO_TOKEN\n    team: {team}\n",
            self.url
        )
    }
}
