//! `runwarden discover` (src/discover.rs) on fixture trees shaped like each
//! runner kind, through environment overrides: never this machine's home.

use crate::common;
use crate::common::*;
use std::path::Path;

/// Runs discover with exactly these runner variables (plus PATH).
fn discover(env: &[(&str, String)]) -> (String, String, i32) {
    let mut c = bin();
    c.arg("discover")
        .env_remove("HOME")
        .env_remove("TMPDIR")
        .env_remove("GOMODCACHE");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap(),
    )
}

fn assert_valid(config: &str) {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), config).unwrap();
    let out = bin().arg("check-config").arg(f.path()).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{config}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What actions/checkout leaves with `persist-credentials: true`.
fn leave_checkout_credential(ws: &Path) {
    git(
        ws,
        &[
            "config",
            "--local",
            "http.https://github.com/.extraheader",
            "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3h4eA==",
        ],
    );
}

fn mkdirs(root: &Path, dirs: &[&str]) {
    for d in dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
}

#[test]
fn a_self_hosted_runner_layout() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    mkdirs(
        r,
        &[
            "runner/_work/_temp",
            "runner/_work/_tool",
            "runner/_work/app/app",
            "home/.cargo/registry",
            "home/.npm",
            "home/.m2/repository",
            "tmp",
        ],
    );
    let p = |s: &str| r.join(s).to_string_lossy().into_owned();
    let env = [
        ("GITHUB_ACTIONS", "true".to_string()),
        ("RUNNER_ENVIRONMENT", "self-hosted".to_string()),
        ("RUNNER_TEMP", p("runner/_work/_temp")),
        ("RUNNER_TOOL_CACHE", p("runner/_work/_tool")),
        ("GITHUB_WORKSPACE", p("runner/_work/app/app")),
        ("HOME", p("home")),
        ("TMPDIR", p("tmp")),
    ];
    let (out, err, code) = discover(&env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# Runner: self-hosted runner"), "{out}");
    for (name, path) in [
        ("runner-work", "runner/_work"),
        ("tool-cache", "runner/_work/_tool"),
        ("home", "home"),
        ("cargo-registry", "home/.cargo/registry"),
        ("npm-cache", "home/.npm"),
        ("maven-repository", "home/.m2/repository"),
        ("system-temp", "tmp"),
    ] {
        assert!(
            out.contains(&format!(
                "  - name: {name}\n    type: filesystem\n    path: \"{}\"",
                p(path)
            )),
            "{name}:\n{out}"
        );
    }
    assert!(!out.contains("pip-cache"), "absent caches are not proposed");
    assert_valid(&out);
}

#[test]
fn a_github_hosted_runner_with_the_cache_service_and_a_checkout_credential() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    mkdirs(r, &["work/_temp", "home", "tmp"]);
    // The workspace: a checkout whose origin carries actions/checkout's
    // extraheader.
    let ws = r.join("work/repo");
    git(r, &["init", "-q", ws.to_str().unwrap()]);
    git(&ws, &["remote", "add", "origin", "https://github.com/o/r"]);
    leave_checkout_credential(&ws);
    let p = |s: &Path| s.to_string_lossy().into_owned();
    let env = [
        ("GITHUB_ACTIONS", "true".to_string()),
        ("RUNNER_ENVIRONMENT", "github-hosted".to_string()),
        ("RUNNER_TEMP", p(&r.join("work/_temp"))),
        ("GITHUB_WORKSPACE", p(&ws)),
        ("HOME", p(&r.join("home"))),
        ("TMPDIR", p(&r.join("tmp"))),
        (
            "ACTIONS_RESULTS_URL",
            "https://results.example/".to_string(),
        ),
        ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "x".to_string()),
    ];
    let (out, err, code) = discover(&env);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("# Runner: GitHub-hosted runner"), "{out}");
    // In CI the remote is proposed live, with what the checkout left.
    assert!(
        out.contains("  - name: origin\n    type: git-remote\n    remote: origin\n"),
        "{out}"
    );
    assert!(out.contains("left a push credential"), "{out}");
    // Without the checkout's credential, CI proposes the remote but skips
    // it: runwarden writes with the job's own credential or not at all.
    git(
        &ws,
        &[
            "config",
            "--local",
            "--unset-all",
            "http.https://github.com/.extraheader",
        ],
    );
    let (bare, _, _) = discover(&env);
    assert!(
        bare.contains("  # Skipped: the checkout left no push credential"),
        "{bare}"
    );
    assert!(!bare.contains("\n  - name: origin"), "{bare}");
    assert_valid(&bare);
    leave_checkout_credential(&ws);
    // The Actions cache, reached with the id-token request token.
    // (Comments are wrapped at 80 columns: joined again to be read.)
    let said = out.replace("\n  #  ", " ").replace("\n#  ", " ");
    assert!(
        said.contains("holds the id-token request token (id-token: write)")
            && out.contains("  - name: actions-cache\n    type: actions-cache\n"),
        "{out}"
    );
    assert!(
        !out.contains("eC1hY2Nlc3M"),
        "the credential itself is never printed"
    );
    assert_valid(&out);
    // No runtime token and no GITHUB_TOKEN: neither artifacts nor GitHub's
    // objects are proposed.
    assert!(
        !out.contains("type: actions-artifacts") && !out.contains("type: github-api"),
        "{out}"
    );
    // A node action's step: the runtime token and the job's API token.
    let mut action = env.to_vec();
    action.push(("ACTIONS_RUNTIME_TOKEN", "runtime-secret-value".to_string()));
    action.push(("GITHUB_TOKEN", "ghs_api-secret-value".to_string()));
    let (node, _, _) = discover(&action);
    assert!(
        node.contains("  - name: artifacts\n    type: actions-artifacts\n")
            && node.contains("  - name: github\n    type: github-api\n"),
        "{node}"
    );
    assert!(!node.contains("secret-value"), "{node}");
    assert_valid(&node);
    // Outside CI the same checkout is only a commented suggestion.
    let outside: Vec<(&str, String)> = env
        .iter()
        .filter(|(k, _)| *k != "GITHUB_ACTIONS")
        .cloned()
        .collect();
    let (out, _, _) = discover(&outside);
    assert!(out.contains("# Runner: not in GitHub Actions"), "{out}");
    assert!(
        out.contains("  # - name: origin\n  #   type: git-remote"),
        "{out}"
    );
    assert!(!out.contains("\n  - name: origin"), "{out}");
    assert_valid(&out);
}

#[test]
fn an_arc_pod_and_write_never_overwrites() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    mkdirs(r, &["home", "tmp"]);
    let p = |s: &str| r.join(s).to_string_lossy().into_owned();
    let env = [
        ("GITHUB_ACTIONS", "true".to_string()),
        ("RUNNER_ENVIRONMENT", "self-hosted".to_string()),
        ("KUBERNETES_PORT", "tcp://10.0.0.1:443".to_string()),
        ("HOME", p("home")),
        ("TMPDIR", p("tmp")),
    ];
    let (out, _, _) = discover(&env);
    assert!(
        out.contains("# Runner: actions-runner-controller pod"),
        "{out}"
    );
    assert_valid(&out);
    let target = r.join("runwarden.yml");
    std::fs::write(&target, "mine").unwrap();
    let o = bin()
        .args(["discover", "--write"])
        .arg(&target)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "mine",
        "an existing file is never overwritten"
    );
    let fresh = r.join("new.yml");
    let o = bin()
        .args(["discover", "--write"])
        .arg(&fresh)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_valid(&std::fs::read_to_string(&fresh).unwrap());
}

#[test]
fn probe_without_a_config_in_ci_writes_to_the_remote_with_the_jobs_credential_and_cleans_up() {
    // A checkout whose origin is a smart-HTTP server, with the credential
    // actions/checkout leaves (an extraheader for the writer).
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let remote = bare_remote(r);
    let before = refs(&remote);
    let srv = common::githttp::GitHttp::writer_and_reader(r, true);
    let url = srv.url("writer", "w-secret-4f1c9a", "remote.git");
    let plain = url.replace("writer:w-secret-4f1c9a@", "");
    mkdirs(r, &["work/_temp", "home", "tmp"]);
    let ws = r.join("work/repo");
    git(r, &["init", "-q", ws.to_str().unwrap()]);
    git(&ws, &["remote", "add", "origin", &plain]);
    let header = format!(
        "AUTHORIZATION: basic {}",
        common::githttp::base64(b"writer:w-secret-4f1c9a")
    );
    let key = format!("http.{plain}.extraheader");
    git(&ws, &["config", "--local", &key, &header]);
    let p = |s: &Path| s.to_string_lossy().into_owned();
    let report = r.join("report.json");
    let out = bin()
        .current_dir(&ws)
        .args(["probe", "--report"])
        .arg(&report)
        .env("GITHUB_ACTIONS", "true")
        .env("RUNNER_ENVIRONMENT", "self-hosted")
        .env("RUNNER_TEMP", p(&r.join("work/_temp")))
        .env("GITHUB_WORKSPACE", p(&ws))
        .env("HOME", p(&r.join("home")))
        .env("TMPDIR", p(&r.join("tmp")))
        .output()
        .unwrap();
    let pr = finish(out, &report);
    assert_eq!(pr.code, 1, "{}", pr.stderr);
    assert_eq!(pr.report["config"]["discovered"]["runner"], "self-hosted");
    assert_eq!(pr.verdict("origin:branch-name"), "fail", "{}", pr.stdout);
    assert_eq!(pr.verdict("runner-work:file-name"), "fail");
    assert_eq!(refs(&remote), before, "the remote's refs changed");
    for text in [&pr.stdout, &pr.stderr, &pr.report.to_string()] {
        assert!(!text.contains("w-secret-4f1c9a"), "the password leaked");
    }
}

#[test]
fn private_registries_are_proposed_commented_out_without_their_credentials() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    mkdirs(r, &["home/.config/pip", "tmp"]);
    std::fs::write(
        r.join("home/.npmrc"),
        "always-auth=true\nregistry = https://ci:npm-secret-77@npm.internal/repo/\n",
    )
    .unwrap();
    std::fs::write(
        r.join("home/.config/pip/pip.conf"),
        "[global]\nindex-url = https://devpi.internal/team/dev/+simple/\n",
    )
    .unwrap();
    let p = |s: &Path| s.to_string_lossy().into_owned();
    let env = [("HOME", p(&r.join("home"))), ("TMPDIR", p(&r.join("tmp")))];
    let (out, err, code) = discover(&env);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("npm-secret-77") && !out.contains("ci:"),
        "{out}"
    );
    assert!(out.contains("  # - name: npm-registry\n  #   type: npm-registry\n  #   url: \"https://npm.internal/repo/\""), "{out}");
    assert!(
        out.contains("  #   upload-url: \"https://devpi.internal/team/dev/\""),
        "{out}"
    );
    assert!(
        out.contains("  #   simple-url: \"https://devpi.internal/team/dev/+simple/\""),
        "{out}"
    );
    assert!(
        out.contains("  # Skipped: probing publishes packages"),
        "{out}"
    );
    assert_valid(&out);
    // The public registries are never proposed; a variable naming one
    // does not hide a file's private one (an earlier step can set it).
    std::fs::write(
        r.join("home/.npmrc"),
        "registry=https://registry.npmjs.org/\n",
    )
    .unwrap();
    let mut hiding = env.to_vec();
    hiding.push(("PIP_INDEX_URL", "https://pypi.org/simple".into()));
    let (out, _, _) = discover(&hiding);
    assert!(out.contains("#   type: pypi-index"), "{out}");
    std::fs::write(
        r.join("home/.config/pip/pip.conf"),
        "[global]\nindex-url = https://pypi.org/simple\n",
    )
    .unwrap();
    let mut env = env.to_vec();
    env.push(("PIP_INDEX_URL", "https://pypi.org/simple".into()));
    let (out, _, _) = discover(&env);
    assert!(
        !out.contains("npm-registry") && !out.contains("pypi-index"),
        "{out}"
    );
}

#[test]
fn a_docker_socket_is_proposed_live_and_a_tls_daemon_with_its_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("docker.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let host = format!("unix://{}", sock.display());
    let (out, err, code) = discover(&[("DOCKER_HOST", host.clone())]);
    assert_eq!(code, 0, "{err}");
    let live = format!(
        "  - name: docker\n    type: docker-daemon\n    host: {}\n",
        serde_json::to_string(&host).unwrap()
    );
    assert!(out.contains(&live), "{out}");
    assert!(out.contains("a Docker daemon"), "{out}");
    assert_valid(&out);

    let (out, _, _) = discover(&[
        ("DOCKER_HOST", "tcp://10.0.0.5:2376".into()),
        ("DOCKER_TLS_VERIFY", "1".into()),
        ("DOCKER_CERT_PATH", "/certs/client".into()),
    ]);
    assert!(
        out.contains("    type: docker-daemon\n    host: \"tcp://10.0.0.5:2376\"\n    cert-path: \"/certs/client\"\n"),
        "{out}"
    );
    assert_valid(&out);
    // No socket: nothing proposed.
    let (out, _, _) = discover(&[(
        "DOCKER_HOST",
        format!("unix://{}", dir.path().join("none.sock").display()),
    )]);
    assert!(!out.contains("name: docker\n"), "{out}");
    // DOCKER_HOST elsewhere (an earlier step can set it): the default
    // socket is still looked at, proposed when there.
    let default = std::path::Path::new("/var/run/docker.sock").exists();
    assert_eq!(out.contains("name: docker-default\n"), default, "{out}");
}

#[test]
fn in_ci_the_passwd_home_is_proposed_when_home_names_another() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let (out, err, code) = discover(&[
        ("GITHUB_ACTIONS", "true".into()),
        ("HOME", home.to_string_lossy().into_owned()),
    ]);
    assert_eq!(code, 0, "{err}");
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let uid = unsafe { libc::geteuid() }.to_string();
    let real = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 7 && f[2] == uid).then(|| f[5].to_string())
    });
    if let Some(real) = real.filter(|r| std::path::Path::new(r).is_dir()) {
        assert!(
            out.contains(&format!(
                "  - name: passwd-home\n    type: filesystem\n    path: {real:?}\n"
            )),
            "{out}"
        );
    }
    assert_valid(&out);
    // Outside CI the operator's HOME is the home.
    let (out, _, _) = discover(&[("HOME", home.to_string_lossy().into_owned())]);
    assert!(!out.contains("passwd-home"), "{out}");
}

#[test]
fn sccaches_webdav_cache_is_proposed_commented_out_without_its_credentials() {
    let (out, err, code) = discover(&[
        (
            "SCCACHE_WEBDAV_ENDPOINT",
            "https://ci:dav-secret-9@cache.internal/dav".into(),
        ),
        ("SCCACHE_WEBDAV_KEY_PREFIX", "/sccache/".into()),
        ("SCCACHE_WEBDAV_TOKEN", "token-secret-9".into()),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !out.contains("dav-secret-9") && !out.contains("token-secret-9"),
        "{out}"
    );
    assert!(
        out.contains("  # - name: sccache\n  #   type: http-cache\n  #   url: \"https://cache.internal/dav/sccache/\"\n  #   token-env: SCCACHE_WEBDAV_TOKEN\n"),
        "{out}"
    );
    assert_valid(&out);
}

/// A bucket a build cache names (sccache's S3 backend, an Nx S3 cache
/// runner, Nx's own `nx.json`) is proposed commented out, with AWS's
/// variables named and never read; uncommented, each entry is valid, and
/// coverage counts each bucket until a config tests it.
#[test]
fn buckets_a_build_cache_names_are_proposed_commented_out() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("nx.json"),
        r#"{"s3": {"bucket": "nx-official", "region": "eu-west-1"}}"#,
    )
    .unwrap();
    let (out, err, code) = discover(&[
        ("SCCACHE_BUCKET", "ci-sccache".into()),
        ("SCCACHE_ENDPOINT", "minio.internal:9000".into()),
        ("SCCACHE_S3_USE_SSL", "false".into()),
        ("SCCACHE_S3_KEY_PREFIX", "rust/".into()),
        ("NX_AWS_BUCKET", "nx-cache/team-a".into()),
        ("NX_AWS_ENDPOINT", "https://s3.internal".into()),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-31".into()),
        ("GITHUB_WORKSPACE", ws.path().to_string_lossy().into_owned()),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("aws-secret-31"), "{out}");
    for stanza in [
        "  # - name: sccache-bucket\n  #   type: object-store\n  #   url: \"http://minio.internal:9000\"\n  #   bucket: \"ci-sccache\"\n  #   prefix: \"rust/\"\n",
        "  # - name: nx-bucket\n  #   type: object-store\n  #   url: \"https://s3.internal\"\n  #   bucket: \"nx-cache\"\n  #   prefix: \"team-a/\"\n",
        "  #   url: \"https://s3.eu-west-1.amazonaws.com\"\n  #   bucket: \"nx-official\"\n  #   region: eu-west-1\n",
        "  #   access-key-env: AWS_ACCESS_KEY_ID\n  #   secret-key-env: AWS_SECRET_ACCESS_KEY\n",
    ] {
        assert!(out.contains(stanza), "{stanza}\n{out}");
    }
    assert_valid(&out);
    // Uncommented, the entries are valid surfaces.
    let live = uncommented(&out, &|name| name.contains("bucket"));
    assert_eq!(live.matches("type: object-store").count(), 3, "{live}");
    assert_valid(&live);
}

/// A remote build cache a job names (Turborepo's and Nx's variables, the
/// workspace's `.bazelrc` and Gradle settings file) is proposed commented
/// out as a build-cache, with the credential's variable named and never
/// read, and never a URL's userinfo; uncommented, each entry is valid. A
/// settings file that is a symlink is not read.
#[test]
fn build_caches_a_job_names_are_proposed_commented_out() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join(".bazelrc"),
        "build:ci --remote_cache=https://bazel:hunter2@bazel.internal/cache\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        elsewhere.path().join("settings.gradle"),
        "buildCache { remote(HttpBuildCache) { url = 'https://gradle.internal/cache/' } }\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        elsewhere.path().join("settings.gradle"),
        ws.path().join("settings.gradle"),
    )
    .unwrap();
    let (out, err, code) = discover(&[
        ("TURBO_API", "https://turbo.internal".into()),
        ("TURBO_TOKEN", "turbo-secret-77".into()),
        ("TURBO_TEAM", "web".into()),
        (
            "NX_SELF_HOSTED_REMOTE_CACHE_SERVER",
            "https://nx.internal".into(),
        ),
        (
            "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN",
            "nx-secret-78".into(),
        ),
        ("GITHUB_WORKSPACE", ws.path().to_string_lossy().into_owned()),
    ]);
    assert_eq!(code, 0, "{err}");
    for secret in ["turbo-secret-77", "nx-secret-78", "hunter2"] {
        assert!(!out.contains(secret), "{out}");
    }
    assert!(
        !out.contains("gradle.internal"),
        "a symlink was read: {out}"
    );
    for stanza in [
        "  # - name: turborepo-cache\n  #   type: build-cache\n  #   protocol: turborepo\n  #   url: \"https://turbo.internal/\"\n  #   token-env: TURBO_TOKEN\n  #   team: web\n  #   # permanent: true",
        "  # - name: nx-cache\n  #   type: build-cache\n  #   protocol: nx\n  #   url: \"https://nx.internal/\"\n  #   token-env: NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN\n  #   # permanent: true",
        "  # - name: bazel-cache\n  #   type: build-cache\n  #   protocol: bazel\n  #   url: \"https://bazel.internal/cache/\"\n",
    ] {
        assert!(out.contains(stanza), "{stanza}\n{out}");
    }
    assert_valid(&out);
    let live = uncommented(&out, &|name| {
        name.contains("-cache") && !name.contains("sccache")
    });
    assert_eq!(live.matches("type: build-cache").count(), 3, "{live}");
    assert_valid(&live);
}

/// A config of the commented-out stanzas of `out` whose `- name:` line
/// `pick` takes, uncommented (their own comments stay comments).
fn uncommented(out: &str, pick: &dyn Fn(&str) -> bool) -> String {
    let mut live = String::from("version: 1\nsurfaces:\n");
    let mut in_stanza = false;
    for l in out.lines() {
        match l.strip_prefix("  # ") {
            Some(rest) if rest.starts_with("- name: ") => {
                in_stanza = pick(rest);
                if in_stanza {
                    live += &format!("  {rest}\n");
                }
            }
            Some(rest) if in_stanza && rest.starts_with("  ") => live += &format!("  {rest}\n"),
            _ => in_stanza = false,
        }
    }
    live
}
