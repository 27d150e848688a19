//! The config as committed (src/pinned.rs): in GitHub Actions runwarden
//! reads the config at `GITHUB_WORKFLOW_SHA` through the loopback
//! GitHub's contents API, else from the checkout's own git objects
//! (hashed again: a changed object is refused), and names a work tree
//! config that differs in every output; a config the commit lacks is exit
//! 2 naming `--config-from-worktree`, which takes the work tree's and says
//! so. 0.11.0 took the work tree's, whatever an earlier step made of it.

use crate::common::*;
use runwarden::loopback::github::{CONTENTS_READ, GitHubServer};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

const REPO: &str = "octo/repo";
const SHA: &str = "c0ffee0000000000000000000000000000000001";

/// A checkout whose committed config probes `shared`; the work tree's
/// (as an earlier step left it) also declares every open channel.
fn checkout() -> (tempfile::TempDir, String, String) {
    let root = tempfile::tempdir().unwrap();
    let shared = root.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(root.path().join(".github")).unwrap();
    let committed = format!(
        "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n",
        serde_json::to_string(&shared).unwrap()
    );
    let declared: String = ALL_CARRIERS
        .iter()
        .map(|c| format!("  - shared:{c}\n"))
        .collect();
    let edited = format!("{committed}declared:\n{declared}");
    std::fs::write(root.path().join(".github/runwarden.yml"), &edited).unwrap();
    (root, committed, edited)
}

/// `args` in Actions at `SHA` in `root`, with `env` added.
fn run(root: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, Value, String, String) {
    let report = root.join("out/report.json");
    std::fs::create_dir_all(root.join("out")).unwrap();
    let _ = std::fs::remove_file(&report);
    let mut c = bin();
    c.current_dir(root)
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_WORKFLOW_SHA", SHA)
        .env("GITHUB_WORKSPACE", root)
        .env("GITHUB_REPOSITORY", REPO)
        .env("TMPDIR", root.join("out"))
        .env_remove("GITHUB_TOKEN")
        .env_remove("GH_TOKEN")
        .args(args)
        .envs(env.iter().copied());
    if args[0] == "probe" {
        c.arg("--report")
            .arg(&report)
            .arg("--sarif")
            .arg(root.join("out/r.sarif"));
    }
    let o = c.output().unwrap();
    let r = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (
        o.status.code().unwrap_or(-1),
        r,
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn verdicts(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["verdict"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn in_actions_the_config_is_the_committed_one_and_an_edited_one_is_named() {
    let (root, committed, _) = checkout();
    let svc = GitHubServer::start().unwrap();
    svc.add(
        "file",
        REPO,
        json!({ "path": ".github/runwarden.yml", "ref": SHA, "text": committed }),
    );
    let token = svc.token(CONTENTS_READ);
    let api = svc.api_url();
    let env = [
        ("GITHUB_TOKEN", token.as_str()),
        ("GITHUB_API_URL", api.as_str()),
    ];
    let (code, r, out, err) = run(root.path(), &env, &["probe"]);
    // The committed config declares nothing: the open channels FAIL
    // (0.11.0 took the edited declarations: AUTHORIZED, exit 0).
    assert_eq!(code, 1, "{err}");
    assert!(!verdicts(&r).iter().any(|v| v == "authorized"), "{r}");
    assert!(verdicts(&r).iter().any(|v| v == "fail"), "{r}");
    assert_eq!(
        r["config"]["pinned"],
        json!({ "commit": SHA, "path": ".github/runwarden.yml", "via": "api", "worktree_differs": true })
    );
    let says = "is not the config committed at c0ffee000000";
    assert!(err.contains(says), "{err}");
    assert!(out.contains(says), "{out}");
    let sarif: Value =
        serde_json::from_str(&std::fs::read_to_string(root.path().join("out/r.sarif")).unwrap())
            .unwrap();
    assert!(
        sarif["runs"][0]["properties"]["runwarden/config-warning"]
            .as_str()
            .unwrap()
            .contains(says),
        "{sarif}"
    );
    // A config the commit does not have: exit 2, naming the way out,
    // which takes the work tree's and says so everywhere.
    let (code, _, _, err) = run(
        root.path(),
        &env,
        &["probe", "--config", ".github/other.yml"],
    );
    assert_eq!(code, 2, "{err}");
    std::fs::copy(
        root.path().join(".github/runwarden.yml"),
        root.path().join(".github/other.yml"),
    )
    .unwrap();
    let (code, _, _, err) = run(root.path(), &env, &["check-config", ".github/other.yml"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is not in commit") && err.contains("--config-from-worktree"),
        "{err}"
    );
    let (code, r, out, err) = run(
        root.path(),
        &env,
        &[
            "probe",
            "--config",
            ".github/other.yml",
            "--config-from-worktree",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["config"]["pinned"]["via"], "worktree");
    assert!(
        out.contains("taken from the work tree (--config-from-worktree)"),
        "{out}"
    );
    // The default file removed from the work tree, and $RUNWARDEN_CONFIG
    // (which an earlier step can set through GITHUB_ENV) naming another:
    // still the committed default (the hostile review's: discovery took
    // over, and the variable named any committed file).
    std::fs::remove_file(root.path().join(".github/runwarden.yml")).unwrap();
    let env2 = [
        ("GITHUB_TOKEN", token.as_str()),
        ("GITHUB_API_URL", api.as_str()),
        ("RUNWARDEN_CONFIG", ".github/other.yml"),
    ];
    let (code, r, _, err) = run(root.path(), &env2, &["probe"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(r["config"]["pinned"]["via"], "api", "{}", r["config"]);
    assert_eq!(r["config"]["pinned"]["worktree_differs"], true);
    assert!(
        err.contains("$RUNWARDEN_CONFIG is ignored in GitHub Actions"),
        "{err}"
    );
    assert!(!verdicts(&r).iter().any(|v| v == "authorized"), "{r}");
    // Outside Actions nothing changes.
    let mut c = bin();
    c.current_dir(root.path())
        .env_remove("GITHUB_ACTIONS")
        .args(["check-config", ".github/other.yml"]);
    assert_eq!(c.output().unwrap().status.code(), Some(0));
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// [`checkout`] as a git repository whose one commit (returned) holds the
/// committed config; the work tree's is still the committed one.
fn committed_checkout() -> (tempfile::TempDir, String, String) {
    let (root, committed, edited) = checkout();
    let p = root.path();
    git(p, &["init", "-q"]);
    std::fs::write(p.join(".github/runwarden.yml"), &committed).unwrap();
    git(p, &["add", ".github/runwarden.yml"]);
    let who = ["-c", "user.name=t", "-c", "user.email=t@x"];
    git(p, &[&who[..], &["commit", "-qm", "c"]].concat());
    let head = git(p, &["rev-parse", "HEAD"]);
    (root, head, edited)
}

/// An empty token (the action's `github-token` input left blank) is no
/// token: nothing asks the API with it, and the checkout's objects say.
#[test]
fn an_empty_token_asks_nothing() {
    let (root, head, _) = committed_checkout();
    let p = root.path();
    // Only the commit has the default config now.
    std::fs::remove_file(p.join(".github/runwarden.yml")).unwrap();
    let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    api.set_nonblocking(true).unwrap();
    let url = format!("http://{}", api.local_addr().unwrap());
    let env = [
        ("GITHUB_WORKFLOW_SHA", head.as_str()),
        ("INPUT_GITHUB-TOKEN", ""),
        ("GITHUB_API_URL", url.as_str()),
    ];
    let (code, r, _, err) = run(p, &env, &["probe"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(r["config"]["pinned"]["via"], "git", "{}", r["config"]);
    assert!(
        api.accept().is_err(),
        "the API was asked with an empty token"
    );
}

/// Without a token, the checkout's objects: the committed config is used;
/// an object an earlier step changed in `.git` is refused, never taken.
#[test]
fn without_a_token_the_checkouts_objects_and_never_a_changed_one() {
    let (root, head, edited) = committed_checkout();
    let p = root.path();
    std::fs::write(p.join(".github/runwarden.yml"), &edited).unwrap();
    let env = [("GITHUB_WORKFLOW_SHA", head.as_str())];
    let (code, r, _, err) = run(p, &env, &["probe"]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(r["config"]["pinned"]["via"], "git", "{}", r["config"]);
    assert_eq!(r["config"]["pinned"]["worktree_differs"], true);
    assert!(!verdicts(&r).iter().any(|v| v == "authorized"), "{r}");

    // The blob swapped for another's content under its own name.
    let blob = git(p, &["rev-parse", "HEAD:.github/runwarden.yml"]);
    let forged = p.join("forged.yml");
    std::fs::write(&forged, &edited).unwrap();
    let other = git(p, &["hash-object", "-w", forged.to_str().unwrap()]);
    let obj = |id: &str| p.join(format!(".git/objects/{}/{}", &id[..2], &id[2..]));
    let target = obj(&blob);
    let mut perm = std::fs::metadata(&target).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(&target, perm).unwrap();
    std::fs::copy(obj(&other), &target).unwrap();
    let (code, _, _, err) = run(p, &env, &["check-config"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("does not hash to its name"), "{err}");
}

/// A `git` of an earlier step's on PATH that hands over a forged config
/// blob under the committed one's name, and vouches for it when asked to
/// hash it: the hash is computed in runwarden, so the forgery is refused
/// (the hostile review's: git's own `hash-object` was asked, the same
/// untrusted git).
#[test]
fn a_git_on_path_cannot_vouch_for_a_forged_object() {
    let (root, head, edited) = committed_checkout();
    let p = root.path();
    // The work tree as the earlier step left it, and the same text forged.
    std::fs::write(p.join(".github/runwarden.yml"), &edited).unwrap();
    let bin_dir = tempfile::tempdir().unwrap();
    let forged = bin_dir.path().join("forged.yml");
    std::fs::write(&forged, &edited).unwrap();
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_string();
    let last = bin_dir.path().join("last");
    let script = format!(
        r#"#!/bin/sh
case "$1" in
cat-file)
  read id
  printf '%s' "$id" > '{last}'
  head=$(printf '%s\n' "$id" | '{real}' cat-file --batch-check)
  case "$head" in
  *" blob "*) printf '%s blob %s\n' "$id" "$(wc -c < '{forged}' | tr -d ' ')"; cat '{forged}'; echo ;;
  *) printf '%s\n' "$id" | exec '{real}' cat-file --batch ;;
  esac ;;
hash-object) cat > /dev/null; cat '{last}'; echo ;;
*) exec '{real}' "$@" ;;
esac
"#,
        last = last.display(),
        real = real,
        forged = forged.display()
    );
    let fake = bin_dir.path().join("git");
    std::fs::write(&fake, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = [
        ("GITHUB_WORKFLOW_SHA", head.as_str()),
        ("PATH", path.as_str()),
    ];
    let (code, _, _, err) = run(p, &env, &["check-config"]);
    assert_eq!(code, 2, "the forged config was taken: {err}");
    assert!(err.contains("does not hash to its name"), "{err}");
}
