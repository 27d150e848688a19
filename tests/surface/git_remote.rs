//! `type: git-remote` against real git: a local bare repository (by path
//! and file://), and `git http-backend` over smart HTTP with basic auth.

use crate::common::githttp::{GitHttp, base64};
use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const WRITE_CARRIERS: [&str; 12] = [
    "branch-name",
    "tag-name",
    "annotated-tag-message",
    "commit-message",
    "author-name",
    "author-email",
    "file-content",
    "file-path",
    "notes",
    "custom-ref",
    "deleted-ref",
    "unreachable-object",
];

/// A bare remote with foreign refs, and those refs as they were.
struct Remote {
    root: tempfile::TempDir,
    path: PathBuf,
    before: String,
}

impl Remote {
    fn new() -> Remote {
        let root = tempfile::tempdir().unwrap();
        let path = bare_remote(root.path());
        let before = refs(&path);
        Remote { root, path, before }
    }

    /// After a probe the remote's refs are exactly what they were.
    fn unchanged(&self) {
        assert_eq!(refs(&self.path), self.before, "the remote's refs changed");
    }
}

fn git_config(name: &str, remote: &str, extra: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: {name}\n    type: git-remote\n    remote: {}\n{extra}",
        serde_json::to_string(remote).unwrap()
    )
}

/// Every carrier open except the transient one, which a visible-state
/// check must not see.
fn assert_open(p: &Probe, surface: &str) {
    for c in WRITE_CARRIERS {
        let expect = if c == "deleted-ref" { "pass" } else { "fail" };
        let f = p.finding(&format!("{surface}:{c}"));
        assert_eq!(f["verdict"], expect, "{c}: {f}\n{}", p.stderr);
        assert_control_sound(f);
    }
    assert_eq!(
        p.finding(&format!("{surface}:unreachable-object"))["persistence"],
        "until-gc"
    );
    assert_eq!(
        p.finding(&format!("{surface}:deleted-ref"))["persistence"],
        "transient"
    );
    assert!(
        p.report["cleanup"]["left"].as_array().unwrap().is_empty(),
        "{}",
        p.report["cleanup"]
    );
}

#[test]
fn a_local_bare_remote_by_path_and_by_file_url() {
    let fx = Remote::new();
    let remote = &fx.path;
    let work = tempfile::tempdir().unwrap();
    for url in [
        remote.to_string_lossy().into_owned(),
        format!("file://{}", remote.display()),
    ] {
        let p = probe(work.path(), &git_config("origin", &url, ""), &[]);
        assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
        assert_open(&p, "origin");
        // Cleanup says what it cannot do: the objects stay until gc.
        assert!(
            p.stdout
                .contains("their objects stay on the server until its garbage collection"),
            "{}",
            p.stdout
        );
        fx.unchanged();
    }
}

/// One remote under two names in one config (a path and a `file://` URL):
/// each surface's agreed refs end in a tag of its name, so both push and
/// both are open (issue 38, hole 5: on 0.11.0 the second surface's
/// content refs collided with the first's, each push leased on "must not
/// exist yet", and were ERROR).
#[test]
fn one_remote_under_two_names_is_probed_under_each_without_a_collision() {
    let fx = Remote::new();
    let remote = &fx.path;
    let work = tempfile::tempdir().unwrap();
    let by_url = format!("file://{}", remote.display());
    let cfg = git_config("by-path", &remote.to_string_lossy(), "")
        + &git_config("by-url", &by_url, "").replace("version: 1\nsurfaces:\n", "");
    let p = probe(work.path(), &cfg, &[]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_open(&p, "by-path");
    assert_open(&p, "by-url");
    fx.unchanged();
}

fn server(root: &Path) -> GitHttp {
    GitHttp::writer_and_reader(root, true)
}

/// Probes `fx` through a smart-HTTP server as `user` (`writer` may push,
/// `reader` may not); the server lives as long as the returned handle.
fn probe_over_http(fx: &Remote, user: &str, protocol_v2: bool) -> (GitHttp, Probe) {
    let srv = GitHttp::writer_and_reader(fx.root.path(), protocol_v2);
    let password = match user {
        "writer" => "w-secret-4f1c9a",
        _ => "r-secret-77d2e0",
    };
    let work = tempfile::tempdir().unwrap();
    let url = srv.url(user, password, "remote.git");
    let p = probe(work.path(), &git_config("origin", &url, ""), &[]);
    (srv, p)
}

fn assert_no_secret(p: &Probe, secrets: &[&str]) {
    let report = p.report.to_string();
    for s in secrets {
        for (what, text) in [
            ("stdout", &p.stdout),
            ("stderr", &p.stderr),
            ("report", &report),
        ] {
            assert!(!text.contains(s), "secret {s} in {what}:\n{text}");
        }
    }
}

#[test]
fn smart_http_with_a_writer_counts_its_round_trips() {
    let fx = Remote::new();
    let (srv, p) = probe_over_http(&fx, "writer", true);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    assert_open(&p, "origin");
    fx.unchanged();
    assert_no_secret(&p, &["w-secret-4f1c9a", &base64(b"writer:w-secret-4f1c9a")]);
    assert!(
        p.stdout
            .contains(&format!("http://127.0.0.1:{}/remote.git", srv.port)),
        "{}",
        p.stdout
    );

    // Round trips: one git command = one ref advertisement (GET info/refs)
    // and its POSTs. A: push + deleting push; B: ls-remote, one fetch of
    // the agreed refs and the unreachable commit by id; cleanup: one push.
    let reqs = srv.requests();
    let adverts = |service: &str| {
        reqs.iter()
            .filter(|(m, u, user)| {
                m == "GET" && u.contains(&format!("service={service}")) && !user.is_empty()
            })
            .count()
    };
    let posts = reqs
        .iter()
        .filter(|(m, _, user)| m == "POST" && !user.is_empty())
        .count();
    eprintln!(
        "requests: {} in all, {} authenticated POSTs",
        reqs.len(),
        posts
    );
    for r in &reqs {
        eprintln!("  {} {} {}", r.0, r.1, r.2);
    }
    assert_eq!(
        adverts("git-receive-pack"),
        3,
        "A: 2 pushes, cleanup: 1 push"
    );
    assert_eq!(
        adverts("git-upload-pack"),
        2,
        "B: ls-remote, one fetch (agreed refs and the commit by id)"
    );
    // Credentials go with the first request (http.proactiveAuth): no 401
    // challenge round trips.
    assert!(
        reqs.iter().all(|(_, _, user)| !user.is_empty()),
        "unauthenticated requests: {reqs:?}"
    );
    assert!(reqs.len() <= 14, "{} requests", reqs.len());
}

#[test]
fn smart_http_with_a_read_only_user_is_pass_on_every_write_carrier() {
    let fx = Remote::new();
    let (_srv, p) = probe_over_http(&fx, "reader", true);
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    for c in WRITE_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "pass", "{c}: {f}");
        assert_control_sound(f);
        assert!(f["detail"].as_str().unwrap().contains("403"), "{f}");
    }
    fx.unchanged();
    assert_no_secret(&p, &["r-secret-77d2e0", &base64(b"reader:r-secret-77d2e0")]);
}

#[test]
fn a_server_that_is_down_is_error_not_pass() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let work = tempfile::tempdir().unwrap();
    let url = format!("http://writer:pw@127.0.0.1:{port}/remote.git");
    let p = probe(work.path(), &git_config("origin", &url, ""), &[]);
    assert_eq!(p.code, 1);
    for c in WRITE_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "error", "{c}: {f}");
        assert!(
            f["detail"].as_str().unwrap().contains("remote unreachable"),
            "{f}"
        );
    }
}

#[test]
fn a_pre_receive_hook_that_refuses_is_pass() {
    let fx = Remote::new();
    let remote = &fx.path;
    // Accepts only refs/heads/memory/*, like an operator's agent memory.
    let hook = remote.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in refs/heads/memory/*) ;; *) echo \"denied: $ref\"; exit 1;; esac; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &git_config("origin", &remote.to_string_lossy(), ""),
        &[],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    for c in WRITE_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "pass", "{c}: {f}");
        assert!(
            f["detail"].as_str().unwrap().contains("hook declined"),
            "{f}"
        );
    }
    fx.unchanged();
    // Every ref was journalled, refused and retracted: nothing was made,
    // so nothing counts as removed (0.3.0 said 22 for 11 refs).
    let c = &p.report["cleanup"];
    assert_eq!(
        (c["removed"].as_u64(), c["deleted"].as_u64()),
        (Some(0), Some(0)),
        "{c}"
    );
}

#[test]
fn ten_thousand_foreign_refs_with_odd_names() {
    let fx = Remote::new();
    let remote = &fx.path;
    // Legal ref names only (no `:`, `[`, space): the odd ones git allows.
    let odd = [
        "%0A%3A%3Awarning",
        "##%error]y",
        "$(id)",
        "'quote\"",
        "ünïcödé",
        "a%25b",
        "-dash",
        "x.y;&amp",
    ];
    add_refs(remote, 10_000, &odd);
    let before = refs(remote);
    assert_eq!(before.lines().count(), 10_002);
    let work = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let p = probe(
        work.path(),
        &git_config("origin", &remote.to_string_lossy(), ""),
        &[],
    );
    eprintln!("probe of a 10,002-ref remote took {:?}", started.elapsed());
    assert_open(&p, "origin");
    assert_eq!(refs(remote), before, "the remote's refs changed");
    for line in p.stdout.lines().chain(p.stderr.lines()) {
        assert!(
            !line.trim_start().starts_with("::") && !line.contains("##["),
            "{line}"
        );
    }
}

/// A checkout as actions/checkout leaves it: origin without userinfo, the
/// token in an extraheader (v6: in a separate file pulled in by includeIf).
fn checkout(root: &Path, srv: &GitHttp, include_if: bool) -> PathBuf {
    let co = root.join(if include_if { "co-v6" } else { "co" });
    git(root, &["init", "-q", co.to_str().unwrap()]);
    let origin = format!("http://127.0.0.1:{}/remote.git", srv.port);
    git(&co, &["remote", "add", "origin", &origin]);
    let key = format!("http.http://127.0.0.1:{}/.extraheader", srv.port);
    let value = format!("AUTHORIZATION: basic {}", base64(b"writer:w-secret-4f1c9a"));
    if include_if {
        let cred = root.join("git-credentials.config");
        Command::new("git")
            .args(["config", "--file", cred.to_str().unwrap(), &key, &value])
            .status()
            .unwrap();
        let cond = format!("includeIf.gitdir:{}/.git.path", co.display());
        git(&co, &["config", "--local", &cond, cred.to_str().unwrap()]);
    } else {
        git(&co, &["config", "--local", &key, &value]);
    }
    co
}

#[test]
fn the_checkouts_extraheader_is_used_and_never_printed() {
    let fx = Remote::new();
    let root = fx.root.path();
    let srv = server(root);
    for include_if in [false, true] {
        let co = checkout(root, &srv, include_if);
        let work = tempfile::tempdir().unwrap();
        let cfg = git_config(
            "origin",
            "origin",
            &format!("    repo: {}\n", serde_json::to_string(&co).unwrap()),
        );
        let p = probe(work.path(), &cfg, &[]);
        assert_eq!(
            p.code, 1,
            "includeIf={include_if}\n{}\n{}",
            p.stdout, p.stderr
        );
        assert_open(&p, "origin");
        assert_no_secret(&p, &["w-secret-4f1c9a", &base64(b"writer:w-secret-4f1c9a")]);
        fx.unchanged();
    }
    // Every authenticated request came from the extraheader: the URL had
    // no userinfo.
    assert!(
        srv.requests()
            .iter()
            .all(|(_, _, user)| user == "writer" || user.is_empty())
    );
}

#[test]
fn config_errors() {
    let root = tempfile::tempdir().unwrap();
    git(root.path(), &["init", "-q", "co"]);
    let work = tempfile::tempdir().unwrap();
    let cfg = git_config(
        "origin",
        "upstream",
        &format!(
            "    repo: {}\n",
            serde_json::to_string(&root.path().join("co")).unwrap()
        ),
    );
    let p = probe(work.path(), &cfg, &[]);
    assert_eq!(p.code, 2);
    assert!(
        p.stderr
            .contains("runwarden.yml:5:13: `remote`: `upstream` is not a remote of"),
        "{}",
        p.stderr
    );
    let p = probe(work.path(), &git_config("origin", "ftp://h/x", ""), &[]);
    assert_eq!(p.code, 2);
    assert!(
        p.stderr.contains("unsupported URL scheme `ftp`"),
        "{}",
        p.stderr
    );
    let p = probe(
        work.path(),
        "version: 1\nsurfaces:\n  - name: o\n    type: git-remote\n",
        &[],
    );
    assert!(
        p.stderr
            .contains("runwarden.yml:3:5: a git-remote surface needs `remote:`"),
        "{}",
        p.stderr
    );
}

#[test]
fn a_credential_helper_is_used_and_a_failing_one_is_error_not_pass() {
    let fx = Remote::new();
    let root = fx.root.path();
    let srv = server(root);
    for (password, expect) in [("w-secret-4f1c9a", "fail"), ("wrong-password", "error")] {
        let co = root.join(format!("co-{password}"));
        git(root, &["init", "-q", co.to_str().unwrap()]);
        git(
            &co,
            &[
                "remote",
                "add",
                "origin",
                &format!("http://127.0.0.1:{}/remote.git", srv.port),
            ],
        );
        // A helper the checkout configures, as a job's setup step might.
        let helper = format!("!f() {{ echo username=writer; echo password={password}; }}; f");
        git(&co, &["config", "--local", "credential.helper", &helper]);
        let work = tempfile::tempdir().unwrap();
        let cfg = git_config(
            "origin",
            "origin",
            &format!("    repo: {}\n", serde_json::to_string(&co).unwrap()),
        );
        let p = probe(work.path(), &cfg, &[]);
        assert_eq!(p.code, 1);
        let f = p.finding("origin:branch-name");
        // A helper that fails here may work in the job: never PASS.
        assert_eq!(f["verdict"], expect, "{f}\n{}", p.stderr);
        if expect == "error" {
            assert!(
                f["detail"].as_str().unwrap().contains("credential helper"),
                "{f}"
            );
        }
        assert_no_secret(&p, &["w-secret-4f1c9a"]);
        fx.unchanged();
    }
}

/// Installs a pre-receive hook accepting only `refs/heads/memory/*`.
fn memory_only(remote: &Path) {
    let hook = remote.join("hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in refs/heads/memory/*) ;; *) echo \"denied: $ref\"; exit 1;; esac; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const SCOPED: &str = "declared:\n  - channel: origin:branch-name\n    refs: \"refs/heads/memory/*\"\n  - channel: origin:commit-message\n    refs: \"refs/heads/memory/*\"\n    reason: agents keep notes on a memory branch\n";

fn scoped(p: &Probe, carrier: &str, side: &str) -> serde_json::Value {
    p.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["carrier"] == carrier && f["scope"]["side"] == side)
        .unwrap_or_else(|| panic!("no {carrier} {side} finding"))
        .clone()
}

#[test]
fn a_scope_that_holds_is_authorized_inside_and_pass_outside() {
    let fx = Remote::new();
    let remote = &fx.path;
    memory_only(remote);
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &git_config("origin", &remote.to_string_lossy(), SCOPED),
        &[],
    );
    assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
    for c in ["branch-name", "commit-message"] {
        let inside = scoped(&p, c, "inside");
        assert_eq!(inside["verdict"], "authorized", "{inside}");
        assert_eq!(inside["channel"], format!("origin:{c}"));
        assert_eq!(inside["scope"]["refs"], "refs/heads/memory/*");
        assert_control_sound(&inside);
        let outside = scoped(&p, c, "outside");
        assert_eq!(outside["verdict"], "pass", "{outside}");
        assert!(
            outside["detail"]
                .as_str()
                .unwrap()
                .contains("hook declined"),
            "{outside}"
        );
    }
    // Unscoped carriers: refused by the hook.
    assert_eq!(p.verdict("origin:tag-name"), "pass");
    assert!(
        p.stdout
            .contains("origin:branch-name [inside refs: refs/heads/memory/*]"),
        "{}",
        p.stdout
    );
    assert_eq!(p.report["summary"]["authorized"], 2);
    fx.unchanged();
}

#[test]
fn a_scope_that_does_not_hold_fails_outside() {
    let fx = Remote::new();
    let remote = &fx.path;
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &git_config("origin", &remote.to_string_lossy(), SCOPED),
        &[],
    );
    assert_eq!(p.code, 1);
    for c in ["branch-name", "commit-message"] {
        assert_eq!(scoped(&p, c, "inside")["verdict"], "authorized");
        let outside = scoped(&p, c, "outside");
        assert_eq!(outside["verdict"], "fail", "{outside}");
        assert!(
            outside["detail"].as_str().unwrap().contains(
                "outside the declared scope (refs: refs/heads/memory/*), so the scope does not hold"
            ),
            "{outside}"
        );
    }
    // The plain string form keeps working next to scoped ones.
    let plain = format!("{SCOPED}  - origin:tag-name\n");
    let p = probe(
        work.path(),
        &git_config("origin", &remote.to_string_lossy(), &plain),
        &[],
    );
    assert_eq!(p.verdict("origin:tag-name"), "authorized");
    fx.unchanged();
}

#[test]
fn scope_errors() {
    let fx = Remote::new();
    let remote = &fx.path;
    let work = tempfile::tempdir().unwrap();
    let cases = [
        ("origin:branch-name", "refs/heads/memory", "exactly one `*`"),
        (
            "origin:branch-name",
            "refs/heads/*",
            "also covers runwarden's own refs",
        ),
        (
            "origin:tag-name",
            "refs/heads/memory/*",
            "tag-name lives under refs/tags/",
        ),
        (
            "origin:deleted-ref",
            "refs/heads/memory/*",
            "deleted-ref cannot be scoped",
        ),
        (
            "origin:branch-name",
            "refs/heads/a b/*",
            "not a valid ref pattern",
        ),
    ];
    for (channel, pattern, says) in cases {
        let decl = format!("declared:\n  - channel: {channel}\n    refs: \"{pattern}\"\n");
        let p = probe(
            work.path(),
            &git_config("origin", &remote.to_string_lossy(), &decl),
            &[],
        );
        assert_eq!(p.code, 2, "{pattern}");
        assert!(
            p.stderr.contains("runwarden.yml:8:5: `refs`: ") && p.stderr.contains(says),
            "{pattern}: {}",
            p.stderr
        );
    }
    // A filesystem channel has no scope keys.
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let p = probe(
        work.path(),
        &fs_config(
            "s",
            &shared,
            "declared:\n  - channel: s:file-name\n    refs: \"refs/*\"\n",
        ),
        &[],
    );
    assert_eq!(p.code, 2);
    assert!(p.stderr.contains("unknown key `refs` in a declaration of a filesystem channel; known keys: channel, reason"), "{}", p.stderr);
}

#[test]
fn ssh_remotes_are_skipped_without_a_client_and_error_when_unreachable() {
    let work = tempfile::tempdir().unwrap();
    // A PATH holding git and nothing else: no ssh client.
    let bin_dir = work.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    let git_path = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::os::unix::fs::symlink(git_path.trim(), bin_dir.join("git")).unwrap();
    let cfg = work.path().join("rw.yml");
    for remote in ["ssh://git@127.0.0.1:1/x.git", "git@127.0.0.1:x.git"] {
        std::fs::write(&cfg, git_config("origin", remote, "")).unwrap();
        let report = work.path().join("r.json");
        let out = bin()
            .args(["probe", "--config"])
            .arg(&cfg)
            .arg("--report")
            .arg(&report)
            .env("PATH", &bin_dir)
            .output()
            .unwrap();
        let p = finish(out, &report);
        for c in WRITE_CARRIERS {
            let f = p.finding(&format!("origin:{c}"));
            assert_eq!(f["verdict"], "skipped", "{remote} {c}: {f}");
            assert!(
                f["detail"].as_str().unwrap().contains("no ssh client"),
                "{f}"
            );
        }
    }
    // With a client but nothing listening: unreachable is ERROR.
    if Command::new("sh")
        .args(["-c", "command -v ssh"])
        .output()
        .unwrap()
        .status
        .success()
    {
        let p = probe(
            work.path(),
            &git_config("origin", "ssh://git@127.0.0.1:1/x.git", ""),
            &[],
        );
        for c in WRITE_CARRIERS {
            assert_eq!(p.verdict(&format!("origin:{c}")), "error", "{c}");
        }
        assert!(
            p.finding("origin:branch-name")["detail"]
                .as_str()
                .unwrap()
                .contains("remote unreachable")
        );
    }
}

#[test]
fn remotes_git_could_read_as_options_or_commands_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let marker = root.path().join("PWNED");
    for remote in [
        "--upload-pack=x".to_string(),
        "-oProxyCommand=x".to_string(),
        format!("ext::sh -c touch% {}", marker.display()),
        "fd::3".to_string(),
    ] {
        let p = probe(work.path(), &git_config("origin", &remote, ""), &[]);
        assert_eq!(p.code, 2, "{remote}: {}", p.stderr);
        assert!(
            p.stderr.contains("runwarden.yml:5:13: `remote`: "),
            "{remote}: {}",
            p.stderr
        );
    }
    // The same through a checkout whose origin URL is a transport helper.
    let co = root.path().join("co");
    git(root.path(), &["init", "-q", co.to_str().unwrap()]);
    git(
        &co,
        &[
            "remote",
            "add",
            "origin",
            &format!("ext::sh -c touch% {}", marker.display()),
        ],
    );
    let cfg = git_config(
        "origin",
        "origin",
        &format!("    repo: {}\n", serde_json::to_string(&co).unwrap()),
    );
    let p = probe(work.path(), &cfg, &[]);
    assert_eq!(p.code, 2, "{}", p.stderr);
    assert!(
        p.stderr
            .contains("resolves to a URL that uses a transport helper"),
        "{}",
        p.stderr
    );
    assert!(!marker.exists(), "a command ran");
}

#[test]
fn a_local_remote_of_another_user_is_read_by_run_b_as_that_user() {
    if needs_root("running B as another uid") {
        return;
    }
    // git refuses repositories other users own (`safe.directory`): a
    // client-side safety rule, not the surface's access control. A second
    // tenant can read these files, so the channel must show as open.
    let fx = Remote::new();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(fx.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let st = Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&fx.path)
        .status()
        .unwrap();
    assert!(st.success());
    let work = tempfile::tempdir().unwrap();
    let p = probe(
        work.path(),
        &git_config("origin", &fx.path.to_string_lossy(), ""),
        &["--run-b-as", NOBODY],
    );
    assert_open(&p, "origin");
    fx.unchanged();
}

#[test]
fn a_server_that_refuses_unadvertised_objects_closes_unreachable_object() {
    let fx = Remote::new();
    let (_srv, p) = probe_over_http(&fx, "writer", false);
    let f = p.finding("origin:unreachable-object");
    assert_eq!(f["verdict"], "pass", "{f}");
    assert_control_sound(f);
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .contains("does not serve unadvertised objects"),
        "{f}"
    );
    assert_eq!(p.verdict("origin:branch-name"), "fail");
    assert_eq!(p.verdict("origin:commit-message"), "fail");
    fx.unchanged();
}

/// Every form a credential can take in a message: raw, `user:password`,
/// and their base64 and percent-encoded forms.
fn secret_forms(user: &str, password: &str) -> Vec<String> {
    let pair = format!("{user}:{password}");
    vec![
        password.to_string(),
        pair.clone(),
        base64(pair.as_bytes()),
        base64(password.as_bytes()),
        pair.replace(':', "%3A"),
    ]
}

#[test]
fn a_server_that_echoes_credentials_never_gets_them_printed() {
    for (user, password) in [("writer", "w-secret-4f1c9a"), ("reader", "r-secret-77d2e0")] {
        let fx = Remote::new();
        let srv = GitHttp::echoing(fx.root.path());
        let work = tempfile::tempdir().unwrap();
        let cfg = work.path().join("runwarden.yml");
        let url = srv.url(user, password, "remote.git");
        std::fs::write(&cfg, git_config("origin", &url, "")).unwrap();
        let (report, sarif) = (work.path().join("r.json"), work.path().join("r.sarif"));
        let (summary, outputs) = (work.path().join("summary.md"), work.path().join("out"));
        let out = bin()
            .args(["probe", "--config"])
            .arg(&cfg)
            .arg("--report")
            .arg(&report)
            .arg("--sarif")
            .arg(&sarif)
            // A runner's files, to see that nothing reaches them either.
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_OUTPUT", &outputs)
            .output()
            .unwrap();
        let p = finish(out, &report);
        let echo = srv.echo.as_ref().unwrap();
        assert!(*echo.looked.lock().unwrap() > 0);
        assert_eq!(
            *echo.cmdline_leaks.lock().unwrap(),
            Vec::<String>::new(),
            "a password on a command line while the probe ran"
        );
        let files: Vec<(String, String)> = [&report, &sarif, &summary, &outputs]
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).unwrap_or_default();
                (f.display().to_string(), text)
            })
            .chain([
                ("stdout".into(), p.stdout.clone()),
                ("stderr".into(), p.stderr.clone()),
            ])
            .collect();
        for form in secret_forms(user, password) {
            for (what, text) in &files {
                assert!(!text.contains(&form), "{user}: {form} in {what}:\n{text}");
            }
        }
        if user == "reader" {
            // Every write refused, each refusal echoing the credentials:
            // the reason is kept, the credentials are not.
            assert_eq!(p.code, 0, "{}\n{}", p.stdout, p.stderr);
            let f = p.finding("origin:branch-name");
            assert_eq!(f["verdict"], "pass", "{f}");
            assert!(
                f["detail"].as_str().unwrap().contains("denied: you sent"),
                "{f}"
            );
            assert!(f["detail"].as_str().unwrap().contains("***"), "{f}");
        } else {
            // The server's own ref with the password in its name is what
            // run B finds for the deleted ref: printed, redacted.
            let f = p.finding("origin:deleted-ref");
            assert_eq!(f["verdict"], "fail", "{f}");
            assert!(f["detail"].as_str().unwrap().contains("-***"), "{f}");
        }
    }
}

#[test]
fn a_remote_that_asks_for_credentials_runwarden_lacks_is_error_not_pass() {
    // `remote:` as a bare URL: runwarden's isolated git has no credential
    // for it, while the job's own git may (a global helper). Git's "could
    // not read Username" proves nothing about the job.
    let fx = Remote::new();
    let srv = GitHttp::writer_and_reader(fx.root.path(), true);
    let work = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/remote.git", srv.port);
    let p = probe(work.path(), &git_config("origin", &url, ""), &[]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    for c in WRITE_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "error", "{c}: {f}");
        assert!(
            f["detail"].as_str().unwrap().contains("had none to give"),
            "{c}: {f}"
        );
    }
    fx.unchanged();
}

#[test]
fn credentials_the_job_also_holds_as_secrets_still_reach_git() {
    // In Actions the token checkout writes into the extraheader (or a
    // remote's URL) is also in the environment (`GITHUB_TOKEN`,
    // `INPUT_GITHUB-TOKEN`), so it is a registered secret: reading the
    // checkout's settings must still give git the real value.
    let fx = Remote::new();
    let root = fx.root.path();
    let srv = server(root);
    let with_userinfo = root.join("co-url");
    git(root, &["init", "-q", with_userinfo.to_str().unwrap()]);
    git(
        &with_userinfo,
        &[
            "remote",
            "add",
            "origin",
            &srv.url("writer", "w-secret-4f1c9a", "remote.git"),
        ],
    );
    for co in [checkout(root, &srv, false), with_userinfo] {
        let work = tempfile::tempdir().unwrap();
        let cfg = git_config(
            "origin",
            "origin",
            &format!("    repo: {}\n", serde_json::to_string(&co).unwrap()),
        );
        let p = run_config(
            work.path(),
            &cfg,
            &[
                ("GITHUB_TOKEN", "w-secret-4f1c9a"),
                ("INPUT_GITHUB-TOKEN", "w-secret-4f1c9a"),
            ],
            &["probe"],
        );
        assert_eq!(p.code, 1, "{}: {}\n{}", co.display(), p.stdout, p.stderr);
        assert_open(&p, "origin");
        assert_no_secret(&p, &["w-secret-4f1c9a", &base64(b"writer:w-secret-4f1c9a")]);
        fx.unchanged();
    }
}

/// A probe of one remote (every carrier and the control) starts at most
/// 12 git processes: counted by a `git` first on PATH that logs each call
/// and hands it to the real one. (A count, not a time: it holds on any
/// machine.)
#[test]
fn a_probe_of_an_open_remote_starts_seven_git_processes() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Remote::new();
    let shim = fx.root.path().join("shim");
    std::fs::create_dir_all(&shim).unwrap();
    let log = fx.root.path().join("git-calls");
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::fs::write(
        shim.join("git"),
        format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\nexec '{}' \"$@\"\n",
            log.display(),
            real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(shim.join("git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", shim.display(), std::env::var("PATH").unwrap());
    let dir = tempfile::tempdir().unwrap();
    let cfg = git_config("origin", fx.path.to_str().unwrap(), "");
    let p = run_config(dir.path(), &cfg, &[("PATH", &path)], &["probe"]);
    assert_open(&p, "origin");
    fx.unchanged();
    let calls = std::fs::read_to_string(&log).unwrap();
    let mut seen: Vec<&str> = calls.lines().collect();
    seen.sort();
    // Run A: the real remote's push and its transient delete, the
    // control's push; run B: the real remote's listing and fetch (its
    // objects read in-process, no cat-file), the control's listing for the
    // one carrier the remote did not give up (deleted-ref), nothing more
    // of it (every other carrier was found); cleanup's one push.
    assert_eq!(
        seen,
        [
            "fetch",
            "ls-remote",
            "ls-remote",
            "push",
            "push",
            "push",
            "push"
        ],
        "{calls}"
    );
}

/// The content carriers: their nonce is in the objects under an agreed
/// ref, not in a ref name.
const CONTENT_CARRIERS: [&str; 5] = [
    "commit-message",
    "author-name",
    "author-email",
    "file-content",
    "file-path",
];

/// Installs a post-receive hook that moves every branch a push makes (not
/// one already moved) to `to` (shell text, `$rest` being the name past
/// `refs/heads/` and `$new` the object), as a server that archives what is
/// pushed does; then `then` (shell text) to the pushed name `$ref`.
fn moving_hook(remote: &Path, to: &str, then: &str) {
    let hook = remote.join("hooks/post-receive");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nwhile read old new ref; do\n  case \"$ref\" in refs/heads/archive/*|refs/heads/parked/*) continue ;; refs/heads/*) ;; *) continue ;; esac\n  case \"$new\" in *[!0]*) ;; *) continue ;; esac\n  rest=\"${{ref#refs/heads/}}\"\n  git update-ref \"{to}\" \"$new\" && {then} || exit 1\ndone\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// What [`moving_hook`] does to the pushed name: deletes it.
const DELETE: &str = "git update-ref -d \"$ref\" \"$new\"";

/// Cleanup's account of a server that moved run A's branches to `to`
/// (a ref prefix): nothing counted gone, each moved branch left by its
/// name with where it went, and the moved refs still on the server.
fn moved_refs_are_left_by_name(p: &Probe, fx: &Remote, to: &str) {
    let c = &p.report["cleanup"];
    assert_eq!(c["already_gone"].as_u64(), Some(0), "{c}");
    let left = c["left"].as_array().unwrap();
    for carrier in CONTENT_CARRIERS {
        let entry = left
            .iter()
            .find(|l| {
                l["control"] == false
                    && l["entry"]
                        .as_str()
                        .unwrap()
                        // (The agreed name ends in the surface's tag.)
                        .contains(&format!("/{carrier}-"))
            })
            .unwrap_or_else(|| panic!("{carrier}'s ref is not left: {c}"));
        let reason = entry["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(&format!("moved by the remote to \"{to}"))
                && reason.contains("runwarden removes only the names it pushed"),
            "{entry}"
        );
    }
    let now = refs(&fx.path);
    assert!(
        now.lines()
            .filter(|l| l.contains(&format!(" {to}")))
            .count()
            >= CONTENT_CARRIERS.len(),
        "the moved refs are gone from the server:\n{now}"
    );
}

/// A server that moves what was pushed (issue 38, hole 3): a post-receive
/// hook renames each pushed branch to `refs/heads/archive/<name>`, where
/// a `git clone --mirror` still reads it. The content carriers are FAIL,
/// read under the archived name (0.11.0: PASS, the agreed ref not listed
/// read as "no nonce"); cleanup leaves the archived refs, named (0.11.0:
/// "already gone").
#[test]
fn a_server_that_moves_pushed_branches_is_fail_and_cleanup_names_where() {
    let fx = Remote::new();
    moving_hook(&fx.path, "refs/heads/archive/$rest", DELETE);
    let (_srv, p) = probe_over_http(&fx, "writer", true);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    for c in CONTENT_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "fail", "{c}: {f}");
        assert_control_sound(f);
        let detail = f["detail"].as_str().unwrap();
        assert!(
            detail.contains("under \"refs/heads/archive/runwarden/")
                && detail.contains(&format!("/{c}-"))
                && detail.contains("\", not the name run A pushed"),
            "{c}: {f}"
        );
    }
    // Its name still carries the nonce; the moved transient ref is seen.
    assert_eq!(p.verdict("origin:branch-name"), "fail");
    assert_eq!(p.verdict("origin:deleted-ref"), "fail");
    moved_refs_are_left_by_name(&p, &fx, "refs/heads/archive/runwarden/");
}

/// As above, to names without the probe id (`refs/heads/parked/<object
/// id>`): run B does not read every ref of the remote, so the content
/// carriers are ERROR, never PASS (0.11.0: PASS).
#[test]
fn a_server_that_moves_pushed_branches_out_of_sight_is_error_not_pass() {
    let fx = Remote::new();
    moving_hook(&fx.path, "refs/heads/parked/$new", DELETE);
    let (_srv, p) = probe_over_http(&fx, "writer", true);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    for c in CONTENT_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "error", "{c}: {f}");
        assert!(
            f["detail"]
                .as_str()
                .unwrap()
                .contains("is not listed under its name (the remote moved or dropped it); its absence proves nothing"),
            "{c}: {f}"
        );
    }
    // Nor is the advertisement shown current for the branch whose name
    // carried the nonce: gone from every name, it is no PASS either.
    let f = p.finding("origin:branch-name");
    assert_eq!(f["verdict"], "error", "{f}");
    moved_refs_are_left_by_name(&p, &fx, "refs/heads/parked/");
}

/// As above, and the pushed name is then pointed at the remote's own
/// `main` (a rewrite, not a removal): the agreed ref is listed but no
/// longer holds the nonce, so run B reads the other refs that carry the
/// probe id and finds it there: FAIL, not PASS. Cleanup leaves the
/// rewritten name alone (it no longer points at what runwarden pushed).
#[test]
fn a_server_that_rewrites_pushed_branches_is_fail_where_it_keeps_them() {
    let fx = Remote::new();
    let main = git(&fx.path, &["rev-parse", "refs/heads/main"]);
    let then = format!("git update-ref \"$ref\" {} \"$new\"", main.trim());
    moving_hook(&fx.path, "refs/heads/archive/$rest", &then);
    let (_srv, p) = probe_over_http(&fx, "writer", true);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    for c in CONTENT_CARRIERS {
        let f = p.finding(&format!("origin:{c}"));
        assert_eq!(f["verdict"], "fail", "{c}: {f}");
        assert!(
            f["detail"]
                .as_str()
                .unwrap()
                .contains("no longer holds the nonce"),
            "{c}: {f}"
        );
    }
    let c = &p.report["cleanup"];
    assert_eq!(c["already_gone"].as_u64(), Some(0), "{c}");
    assert!(
        c["left"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["reason"].as_str().unwrap().contains("someone moved it"))
            .count()
            >= CONTENT_CARRIERS.len(),
        "{c}"
    );
}
