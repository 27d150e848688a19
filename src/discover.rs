//! `runwarden discover`: inspects the environment and proposes a commented
//! starter config, each surface with a one-line why.
//!
//! Discovery reads only environment variables and the filesystem (and the
//! workspace's git config): it plants nothing. Paths are written literally
//! (not as `${VAR}`) so the config validates wherever it is checked. A git
//! remote is proposed live only in CI: outside CI runwarden never writes to
//! a remote unless the operator uncomments it. The Actions cache is proposed
//! only in CI, when the step holds a token that reaches it.

use crate::git::Git;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What kind of runner this is, as far as the environment tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    NotActions,
    GithubHosted,
    SelfHosted,
    /// actions-runner-controller: ephemeral pods.
    Arc,
}

impl Runner {
    fn describe(&self) -> &'static str {
        match self {
            Runner::NotActions => {
                "not in GitHub Actions (no GITHUB_ACTIONS=true): probing this machine"
            }
            Runner::GithubHosted => {
                "GitHub-hosted runner: a fresh VM per job, so state does not outlive the job; channels here are between steps and processes of one job"
            }
            Runner::SelfHosted => {
                "self-hosted runner: the work directory, HOME, the tool cache and /tmp persist between jobs unless the runner is ephemeral"
            }
            Runner::Arc => {
                "actions-runner-controller pod: ephemeral per job, but volumes and caches mounted into the pod may be shared"
            }
        }
    }
}

/// One proposed surface.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub why: String,
    /// The YAML of the surface entry (two-space list item indentation).
    pub entry: String,
    /// Proposed but commented out, with why (a write the operator must
    /// opt into): `probe` without a config skips it and says so.
    pub skipped: Option<String>,
    /// The exposure it tests, as coverage names it (`path:/tmp`,
    /// `registry:https://ghcr.io`); `None` for what coverage counts by
    /// permission instead (the repository's objects).
    pub exposure: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Discovery {
    pub runner: Runner,
    pub surfaces: Vec<Candidate>,
    /// Things found that no surface type covers yet, or hints.
    pub notes: Vec<String>,
}

/// Package caches proposed where they exist: (surface name, path under
/// $HOME, what it is).
const HOME_CACHES: [(&str, &str, &str); 6] = [
    (
        "cargo-registry",
        ".cargo/registry",
        "cargo's registry cache",
    ),
    ("npm-cache", ".npm", "npm's cache"),
    ("pip-cache", ".cache/pip", "pip's cache"),
    (
        "maven-repository",
        ".m2/repository",
        "Maven's local repository",
    ),
    ("gradle-caches", ".gradle/caches", "Gradle's caches"),
    ("go-module-cache", "go/pkg/mod", "Go's module cache"),
];

fn quoted(p: &Path) -> String {
    serde_json::to_string(&p.to_string_lossy()).expect("string serializes")
}

fn fs_entry(name: &str, path: &Path) -> String {
    format!(
        "  - name: {name}\n    type: filesystem\n    path: {}\n",
        quoted(path)
    )
}

/// How discovery reads an environment variable: unset and empty are the
/// same.
type Var<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Looks at the environment through `env` (injected, so tests can shape
/// any runner) and at the filesystem.
pub fn discover(env: &dyn Fn(&str) -> Option<String>) -> Discovery {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    let in_actions = var("GITHUB_ACTIONS").as_deref() == Some("true");
    let workspace = var("GITHUB_WORKSPACE").map(PathBuf::from);
    let runner = runner_of(&var, in_actions, workspace.as_deref());
    let home = var("HOME").map(PathBuf::from);
    let mut surfaces = directories(&var, home.as_deref());
    let mut notes = Vec::new();
    surfaces.extend(git_remote(workspace.as_deref(), in_actions));
    github_services(&var, in_actions, &mut surfaces, &mut notes);
    // Package registries the machine is configured for, other than the
    // public ones: proposed commented out, because a probe publishes to
    // them and needs credentials the operator names.
    surfaces.extend(npm_registry(&var, workspace.as_deref(), home.as_deref()));
    surfaces.extend(pypi_index(&var, home.as_deref()));
    surfaces.extend(oci_registries(&var, home.as_deref()));
    surfaces.extend(docker_daemon(&var));
    Discovery {
        runner,
        surfaces,
        notes,
    }
}

/// The Docker daemon `DOCKER_HOST` names (else the default socket), when
/// its socket is there: proposed live, because everything a probe makes
/// on it is removed by id, and it is the most shared thing on a
/// self-hosted runner. A socket this user may not open is proposed too: a
/// probe shows it closed (refused). A `tcp://` daemon with
/// `DOCKER_TLS_VERIFY` gets its certificate directory written out.
fn docker_daemon(var: Var<'_>) -> Option<Candidate> {
    let host = var("DOCKER_HOST").unwrap_or_else(|| "unix:///var/run/docker.sock".into());
    let entry = format!(
        "  - name: docker\n    type: docker-daemon\n    host: {}\n",
        serde_json::to_string(&host).expect("string serializes")
    );
    let shown = crate::escape::bytes(host.as_bytes());
    if let Some(path) = host.strip_prefix("unix://") {
        use std::os::unix::fs::FileTypeExt;
        let meta = std::fs::metadata(path).ok()?;
        if !meta.file_type().is_socket() {
            return None;
        }
        let why = match connect_within(path, std::time::Duration::from_secs(2)) {
            Some(Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => format!(
                "a Docker socket ({shown}) this user may not open: a probe shows whether that keeps jobs apart"
            ),
            _ => format!(
                "a Docker daemon ({shown}): image tags, labels, volumes, containers and networks outlive jobs"
            ),
        };
        return Some(Candidate {
            why,
            entry,
            skipped: None,
            exposure: Some(format!("docker-socket:{host}")),
        });
    }
    host.starts_with("tcp://").then(|| {
        let certs = var("DOCKER_TLS_VERIFY").and_then(|_| {
            var("DOCKER_CERT_PATH").or_else(|| var("HOME").map(|h| format!("{h}/.docker")))
        });
        let entry = match &certs {
            Some(dir) => format!(
                "{entry}    cert-path: {}\n",
                serde_json::to_string(dir).expect("string serializes")
            ),
            None => entry,
        };
        Candidate {
            why: format!(
                "a Docker daemon at {shown} (DOCKER_HOST{})",
                if certs.is_some() { ", over TLS" } else { "" }
            ),
            entry,
            skipped: None,
            exposure: Some(format!("docker-socket:{host}")),
        }
    })
}

/// A connection to the unix socket at `path`, or `None` when it did not
/// answer within `wait` (a wedged daemon's full listen queue blocks a
/// connect: discovery must not hang on it).
fn connect_within(
    path: &str,
    wait: Duration,
) -> Option<std::io::Result<std::os::unix::net::UnixStream>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = path.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(std::os::unix::net::UnixStream::connect(path));
    });
    rx.recv_timeout(wait).ok()
}

/// The runner kind the environment names.
fn runner_of(var: Var<'_>, in_actions: bool, workspace: Option<&Path>) -> Runner {
    let arc = var("KUBERNETES_PORT").is_some()
        || var("GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT")
            .is_some_and(|v| v.contains("actions-runner-controller/"))
        || workspace.is_some_and(|w| w.starts_with("/__w"));
    match (in_actions, var("RUNNER_ENVIRONMENT").as_deref()) {
        (false, _) => Runner::NotActions,
        _ if arc => Runner::Arc,
        (true, Some("github-hosted")) => Runner::GithubHosted,
        (true, _) => Runner::SelfHosted,
    }
}

/// The shared directories that exist, each once (by path): the runner's
/// work directory and tool cache, `$HOME` and its package caches, the
/// system temp directory and `/dev/shm`.
fn directories(var: Var<'_>, home: Option<&Path>) -> Vec<Candidate> {
    let mut surfaces = Vec::new();
    let mut add = |name: &str, path: &Path, why: &str| {
        if path.is_dir()
            && !surfaces
                .iter()
                .any(|c: &Candidate| c.entry.contains(&quoted(path)))
        {
            surfaces.push(Candidate {
                why: why.into(),
                entry: fs_entry(name, path),
                skipped: None,
                exposure: Some(format!("path:{}", path.to_string_lossy())),
            });
        }
    };

    // The runner's work directory (`_work`): RUNNER_TEMP is `_work/_temp`.
    if let Some(work) = var("RUNNER_TEMP")
        .map(PathBuf::from)
        .and_then(|t| t.parent().map(Path::to_path_buf))
    {
        add(
            "runner-work",
            &work,
            "the runner's work directory (_work): every job's checkout lives under it, and on a persistent runner it survives the job",
        );
    }
    if let Some(tc) = var("RUNNER_TOOL_CACHE") {
        add(
            "tool-cache",
            Path::new(&tc),
            "RUNNER_TOOL_CACHE: setup-* actions share it across jobs and it is never wiped",
        );
    }
    if let Some(h) = home {
        add(
            "home",
            h,
            "$HOME: persists on self-hosted runners; dotfiles and caches of every job land here",
        );
    }
    // Package caches: shared by every build on the machine.
    for (name, under_home, what) in HOME_CACHES {
        // Go's cache moves with GOMODCACHE.
        let moved = (name == "go-module-cache")
            .then(|| var("GOMODCACHE").map(PathBuf::from))
            .flatten();
        if let Some(p) = moved.or_else(|| home.map(|h| h.join(under_home))) {
            add(
                name,
                &p,
                &format!("{what}: written by builds, read by every later build on this machine"),
            );
        }
    }
    let tmp = var("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    add(
        "system-temp",
        &tmp,
        "the system temp directory: shared by every process on the host",
    );
    add(
        "dev-shm",
        Path::new("/dev/shm"),
        "/dev/shm: shared memory, a tmpfs every process can write",
    );
    surfaces
}

/// The workspace's git remote (`origin`), if the workspace (or the
/// current directory) is a checkout that has one.
fn git_remote(workspace: Option<&Path>, in_actions: bool) -> Option<Candidate> {
    let repo = workspace
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok());
    let repo = repo.filter(|r| r.join(".git").exists())?;
    let git = Git::operator(Duration::from_secs(10));
    let args: Vec<&OsStr> = vec![
        "-C".as_ref(),
        repo.as_os_str(),
        "remote".as_ref(),
        "get-url".as_ref(),
        "origin".as_ref(),
    ];
    let (out, stdout) = git.run(Path::new("/"), &args, &[], b"");
    if !out.success {
        return None;
    }
    let url = String::from_utf8_lossy(&stdout).trim().to_string();
    let cred_args: Vec<&OsStr> = vec![
        "-C".as_ref(),
        repo.as_os_str(),
        "config".as_ref(),
        "--includes".as_ref(),
        "--name-only".as_ref(),
        "--get-regexp".as_ref(),
        r"^http\..*extraheader$".as_ref(),
    ];
    let (cred, _) = git.run(Path::new("/"), &cred_args, &[], b"");
    let credential = if cred.success {
        "the checkout left a push credential (persist-credentials): the job can write to the remote"
    } else {
        "no push credential from the checkout"
    };
    let entry = format!(
        "  - name: origin\n    type: git-remote\n    remote: origin\n    repo: {}\n",
        quoted(&repo)
    );
    Some(Candidate {
        why: format!(
            "the workspace's git remote: a branch name alone carries a message; {credential}"
        ),
        entry,
        // Outside CI, runwarden never writes to a remote unasked; in
        // CI only with the credential the job itself was given.
        skipped: if !in_actions {
            Some("outside CI runwarden writes to a remote only when a config names it (uncomment this entry in `runwarden discover`'s output)".into())
        } else if !cred.success {
            Some("the checkout left no push credential: runwarden writes to a remote only with the job's own credential".into())
        } else {
            None
        },
        exposure: Some(format!("git-remote:{}", crate::redact::userinfo(&url))),
    })
}

/// GitHub's services this step holds a token for: the Actions cache,
/// artifacts and the repository's objects (or a note on the token's
/// name).
fn github_services(
    var: Var<'_>,
    in_actions: bool,
    surfaces: &mut Vec<Candidate>,
    notes: &mut Vec<String>,
) {
    // The Actions cache: offered when this step holds a token that reaches
    // it. The surface reads the token, URLs and repository from the same
    // variables, so the entry needs no keys.
    let runtime = var("ACTIONS_RUNTIME_TOKEN").is_some();
    let id_token = var("ACTIONS_ID_TOKEN_REQUEST_TOKEN").is_some();
    if in_actions && (runtime || id_token) {
        let how = if runtime {
            "this step holds the runtime token (ACTIONS_RUNTIME_TOKEN)"
        } else {
            "this step holds the id-token request token (id-token: write), which reaches the cache service too"
        };
        surfaces.push(Candidate {
            why: format!(
                "the repository's Actions cache: {how}; any step holding it can write entries a later run restores"
            ),
            entry: "  - name: actions-cache\n    type: actions-cache\n".into(),
            skipped: None,
            exposure: Some("actions-cache".into()),
        });
    }
    // Artifacts: uploads need the runtime token, which only JavaScript and
    // Docker actions get; a later run reads them with the job's API token.
    if in_actions && runtime {
        surfaces.push(Candidate {
            why: "the repository's workflow artifacts: this step holds the runtime token, and any later run with actions: read lists and downloads what a run uploads".into(),
            entry: "  - name: artifacts\n    type: actions-artifacts\n".into(),
            skipped: None,
            exposure: Some("actions-artifacts".into()),
        });
    }
    // GitHub's own objects: what carries across runs on GitHub-hosted
    // runners, behind any egress firewall (api.github.com is allowed).
    let api_token = var("GITHUB_TOKEN").is_some() || var("GH_TOKEN").is_some();
    if in_actions && var("GITHUB_TOKEN").is_some() {
        surfaces.push(Candidate {
            why: "the repository's objects on GitHub (labels, comments, milestones, releases, deployments, variables): this step holds GITHUB_TOKEN, and api.github.com passes every egress firewall".into(),
            entry: "  - name: github\n    type: github-api\n".into(),
            skipped: None,
            exposure: None,
        });
    } else if in_actions && api_token {
        notes.push("GH_TOKEN is set but GITHUB_TOKEN is not: a github-api surface needs `token-env: GH_TOKEN`".into());
    }
}

/// The npm registry this machine is configured for, unless it is the
/// public one (commented out).
fn npm_registry(var: Var<'_>, workspace: Option<&Path>, home: Option<&Path>) -> Option<Candidate> {
    let npm_registry = var("NPM_CONFIG_REGISTRY")
        .or_else(|| var("npm_config_registry"))
        .or_else(|| {
            let mut files: Vec<PathBuf> = workspace.iter().map(|w| w.join(".npmrc")).collect();
            files.extend(home.iter().map(|h| h.join(".npmrc")));
            files.iter().find_map(|f| ini_value(f, "registry"))
        });
    let url = npm_registry.and_then(|u| private_url(&u, "registry.npmjs.org"))?;
    Some(Candidate {
        why: format!("the npm registry this machine is configured for ({url}): package names, versions, readmes, dist-tags and tarballs carry messages"),
        entry: format!(
            "  - name: npm-registry\n    type: npm-registry\n    url: {}\n    token-env: NPM_TOKEN\n",
            serde_json::to_string(&url).expect("string serializes")
        ),
        skipped: Some("probing publishes packages: name it in a config (uncomment this entry in `runwarden discover`'s output) and give the job's registry token as NPM_TOKEN".into()),
        exposure: crate::http::origin(&url).map(|o| format!("registry:{o}")),
    })
}

/// The Python package index this machine is configured for, unless it is
/// the public one (commented out).
fn pypi_index(var: Var<'_>, home: Option<&Path>) -> Option<Candidate> {
    let pip_index = var("PIP_INDEX_URL").or_else(|| {
        let mut files: Vec<PathBuf> = home
            .iter()
            .flat_map(|h| [h.join(".config/pip/pip.conf"), h.join(".pip/pip.conf")])
            .collect();
        files.push(PathBuf::from("/etc/pip.conf"));
        files.iter().find_map(|f| ini_value(f, "index-url"))
    });
    let url = pip_index.and_then(|u| private_url(&u, "pypi.org"))?;
    let simple = if url.ends_with('/') {
        url.clone()
    } else {
        format!("{url}/")
    };
    // devpi serves the simple index under `+simple/` of the index it
    // uploads to; other servers name their upload URL themselves.
    let upload = simple
        .strip_suffix("+simple/")
        .map(String::from)
        .unwrap_or_else(|| "https://<the index's upload URL>/".into());
    Some(Candidate {
        why: format!("the Python package index this machine is configured for ({url}): project names, versions, descriptions and file names carry messages"),
        entry: format!(
            "  - name: pypi-index\n    type: pypi-index\n    upload-url: {}\n    simple-url: {}\n    username-env: PYPI_USER\n    password-env: PYPI_PASSWORD\n",
            serde_json::to_string(&upload).expect("string serializes"),
            serde_json::to_string(&simple).expect("string serializes")
        ),
        skipped: Some("probing uploads projects: name it in a config (uncomment this entry in `runwarden discover`'s output), check upload-url, and give the job's index credentials as PYPI_USER and PYPI_PASSWORD".into()),
        exposure: crate::http::origin(&simple).map(|o| format!("registry:{o}")),
    })
}

/// The container registries `docker login` stored credentials for
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`): one
/// commented `oci-registry` entry for each key of `auths`. Only the keys
/// are read, reduced to an origin (no userinfo, no path); the credentials
/// beside them are never copied.
fn oci_registries(var: Var<'_>, home: Option<&Path>) -> Vec<Candidate> {
    let file = match var("DOCKER_CONFIG") {
        Some(d) => PathBuf::from(d).join("config.json"),
        None => match home {
            Some(h) => h.join(".docker/config.json"),
            None => return vec![],
        },
    };
    // A config.json is small; a huge one is not docker's.
    let text = match std::fs::metadata(&file) {
        Ok(m) if m.len() <= 1 << 20 => std::fs::read_to_string(&file).unwrap_or_default(),
        _ => return vec![],
    };
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) else {
        return vec![];
    };
    let mut origins: Vec<String> = vec![];
    for key in doc["auths"].as_object().into_iter().flat_map(|m| m.keys()) {
        let url = if key.contains("://") {
            key.clone()
        } else {
            format!("https://{key}")
        };
        let Some(o) = crate::http::origin(&url) else {
            continue;
        };
        // Docker Hub's login key names its old index; its registry API
        // is registry-1.docker.io.
        let o = match o.as_str() {
            "https://index.docker.io" | "https://docker.io" => {
                "https://registry-1.docker.io".into()
            }
            _ => o,
        };
        if crate::http::check_url(&o).is_ok() && !origins.contains(&o) {
            origins.push(o);
        }
    }
    origins
        .into_iter()
        .enumerate()
        .map(|(i, o)| Candidate {
            why: format!("a container registry `docker login` stored credentials for ({o}): repository names, tags, manifest annotations and layer blobs carry messages"),
            entry: format!(
                "  - name: {}\n    type: oci-registry\n    registry: {}\n    repository: ci/runwarden\n    token-env: REGISTRY_TOKEN\n",
                if i == 0 { "oci-registry".to_string() } else { format!("oci-registry-{}", i + 1) },
                serde_json::to_string(&o).expect("string serializes")
            ),
            skipped: Some("probing pushes manifests: name it in a config (uncomment this entry in `runwarden discover`'s output), set `repository` to a namespace the job may push to, `username` if the registry wants one, and give the job's registry password or token as REGISTRY_TOKEN".into()),
            exposure: Some(format!("registry:{o}")),
        })
        .collect()
}

/// The value of `key` in an npmrc or pip.conf style file (`key = value`
/// or `key=value`; the first one).
fn ini_value(file: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// `url` without userinfo (credentials are never copied into a config),
/// unless it is on the public host `public`.
fn private_url(url: &str, public: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let rest = match rest[..authority_end].rfind('@') {
        Some(i) => &rest[i + 1..],
        None => rest,
    };
    let host = rest.split(['/', ':']).next().unwrap_or("");
    (!host.is_empty() && host != public && !host.ends_with(&format!(".{public}")))
        .then(|| format!("{scheme}://{rest}"))
}

impl Discovery {
    /// The runner kind, as the report names it.
    pub fn runner_kind(&self) -> &'static str {
        match self.runner {
            Runner::NotActions => "not-actions",
            Runner::GithubHosted => "github-hosted",
            Runner::SelfHosted => "self-hosted",
            Runner::Arc => "arc",
        }
    }

    /// What `probe` without a config leaves out, each with why: proposed
    /// surfaces it will not write to, and things no surface type covers.
    pub fn skipped(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .surfaces
            .iter()
            .filter_map(|c| {
                let why = c.skipped.as_ref()?;
                let name = c.entry.split_once("name: ")?.1.lines().next()?;
                Some(format!("{name}: {why}"))
            })
            .collect();
        out.extend(self.notes.iter().cloned());
        out
    }
}

/// The starter config: valid as it is (commented surfaces and notes are
/// comments).
pub fn render(d: &Discovery) -> String {
    let mut out = String::new();
    out += "# runwarden config proposed by `runwarden discover`.\n";
    out += &format!("# Runner: {}.\n", d.runner.describe());
    out += "# Review it, remove what you do not want probed, and declare channels\n# you accept under `declared:`.\nversion: 1\nsurfaces:\n";
    for c in &d.surfaces {
        out += &format!("  # {}\n", c.why);
        if let Some(why) = &c.skipped {
            out += &format!("  # Skipped: {why}:\n");
            for l in c.entry.lines() {
                out += &format!("  # {}\n", l.strip_prefix("  ").unwrap_or(l));
            }
        } else {
            out += &c.entry;
        }
    }
    for n in &d.notes {
        out += &format!("# Note: {n}\n");
    }
    out += "declared: []\n";
    out
}
