//! `runwarden discover`: inspects the environment and proposes a commented
//! starter config, each surface with a one-line why.
//!
//! Discovery reads only environment variables and the filesystem (and the
//! workspace's git config): it plants nothing. Paths are written literally
//! (not as `${VAR}`) so the config validates wherever it is checked. A git
//! remote is proposed live only in CI: outside CI runwarden never writes to
//! a remote unless the operator uncomments it. The Actions cache is proposed
//! only in CI, when the step holds a token that reaches it.

mod buckets;
mod build_caches;
mod registries;

use crate::git::Git;
use registries::{npm_registry, oci_registries, pypi_index, sccache};
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
    surfaces.extend(sccache(&var));
    surfaces.extend(buckets::buckets(&var, workspace.as_deref()));
    surfaces.extend(build_caches::build_caches(&var, workspace.as_deref()));
    // The default socket too when DOCKER_HOST names another: an earlier
    // step can set DOCKER_HOST (GITHUB_ENV), and the daemon most jobs
    // share does not go away with it.
    let host = var("DOCKER_HOST").unwrap_or_else(|| DEFAULT_DOCKER.into());
    surfaces.extend(docker_daemon(&var, "docker", &host));
    if host != DEFAULT_DOCKER {
        surfaces.extend(docker_daemon(&var, "docker-default", DEFAULT_DOCKER));
    }
    Discovery {
        runner,
        surfaces,
        notes,
    }
}

/// Where the docker CLI looks without `DOCKER_HOST`.
const DEFAULT_DOCKER: &str = "unix:///var/run/docker.sock";

/// The Docker daemon `DOCKER_HOST` names (else the default socket), when
/// its socket is there: proposed live, because everything a probe makes
/// on it is removed by id, and it is the most shared thing on a
/// self-hosted runner. A socket this user may not open is proposed too: a
/// probe shows it closed (refused). A `tcp://` daemon with
/// `DOCKER_TLS_VERIFY` gets its certificate directory written out.
fn docker_daemon(var: Var<'_>, name: &str, host: &str) -> Option<Candidate> {
    let entry = format!(
        "  - name: {name}\n    type: docker-daemon\n    host: {}\n",
        serde_json::to_string(host).expect("string serializes")
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
            exposure: Some(format!("docker-socket:{}", host.trim_end_matches('/'))),
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
            exposure: Some(format!("docker-socket:{}", host.trim_end_matches('/'))),
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
    // The home /etc/passwd gives this user, when $HOME names another (an
    // earlier step can set HOME): it persists all the same.
    // (In Actions only: elsewhere the operator chose $HOME.)
    let in_actions = var("GITHUB_ACTIONS").as_deref() == Some("true");
    if let Some(h) = passwd_home().filter(|p| in_actions && Some(p.as_path()) != home) {
        add(
            "passwd-home",
            &h,
            "this user's home in /etc/passwd, which $HOME does not name: dotfiles and caches of other jobs land here",
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
    // TMPDIR moved this job's temp directory; the one other jobs share
    // stays where it was, and coverage counts it: proposed, commented out
    // (it is not where this job writes), so that uncommenting tests it.
    let default_tmp = Path::new("/tmp");
    if tmp.as_path() != default_tmp && default_tmp.is_dir() {
        surfaces.push(Candidate {
            why: "/tmp, the temp directory other jobs share: TMPDIR moves this job's elsewhere".into(),
            entry: fs_entry("tmp", default_tmp),
            skipped: Some(
                "not this job's temp directory (coverage still lists it: uncomment it to test it, or declare it)"
                    .into(),
            ),
            exposure: Some("path:/tmp".into()),
        });
    }
    surfaces
}

/// This user's home directory in /etc/passwd (users only a directory
/// service knows are not there: then none).
fn passwd_home() -> Option<PathBuf> {
    let uid = crate::sys::euid().to_string();
    let text = crate::sys::read_regular(Path::new("/etc/passwd"), 16 << 20).ok()?;
    let text = String::from_utf8_lossy(&text);
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2] == uid && f[5].starts_with('/')).then(|| PathBuf::from(f[5]))
    })
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
        // (The push URL, as the git-remote surface reads it: the
        // exposure's id is the same on both sides.)
        "--push".as_ref(),
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
            // The opt-in carriers, commented: each leaves something GitHub
            // shows (coverage names the same keys for its gaps).
            entry: "  - name: github\n    type: github-api\n    # permanent: true        # checks, statuses: a check run and a commit status GitHub cannot delete\n    # code-scanning: true    # security-events: an upload shown in code scanning until cleanup\n    # dispatch-workflow: ci.yml  # actions: a workflow_dispatch workflow whose run-name shows\n    # dispatch-input: note       #   this input\n    # repository-dispatch: true  # contents: a workflow on repository_dispatch shows the event in its run-name\n".into(),
            skipped: None,
            exposure: None,
        });
    } else if in_actions && api_token {
        notes.push("GH_TOKEN is set but GITHUB_TOKEN is not: a github-api surface needs `token-env: GH_TOKEN`".into());
    }
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
/// comments), its comments wrapped to fit 80 columns.
pub fn render(d: &Discovery) -> String {
    let mut out = String::new();
    out += "# runwarden config proposed by `runwarden discover`.\n";
    out += &comment("", &format!("Runner: {}.", d.runner.describe()));
    out += "# Review it, remove what you do not want probed, and declare channels\n# you accept under `declared:`.\nversion: 1\nsurfaces:\n";
    for c in &d.surfaces {
        out += &comment("  ", &c.why);
        if let Some(why) = &c.skipped {
            out += &comment("  ", &format!("Skipped: {why}:"));
            // (A commented stanza stays as it is: uncommented, it is YAML.)
            for l in c.entry.lines() {
                out += &format!("  # {}\n", l.strip_prefix("  ").unwrap_or(l));
            }
        } else {
            out += &c.entry;
        }
    }
    for n in &d.notes {
        out += &comment("", &format!("Note: {n}"));
    }
    out += "declared: []\n";
    out
}

/// `text` as YAML comment lines at `indent`, wrapped to fit 80 columns.
/// A continuation hangs one column in, never two: `#   key: value` is how
/// a commented-out stanza's lines read, and prose must not look like one.
fn comment(indent: &str, text: &str) -> String {
    let width = 80 - indent.len() - "# ".len();
    crate::wrap::line(text, width, 0, 1)
        .into_iter()
        .map(|l| format!("{indent}# {l}\n"))
        .collect()
}
