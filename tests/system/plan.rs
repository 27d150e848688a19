//! Config validation (src/config.rs, src/plan.rs): every error names
//! file:line:column and exits 2, through the real binary.

use crate::common::*;

/// Runs `check-config` on `text`; returns (exit code, stderr).
fn check(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rw.yml");
    std::fs::write(&f, text).unwrap();
    let out = bin()
        .arg("check-config")
        .arg(&f)
        .env("PRESENT", "/srv/x")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).replace(&*f.to_string_lossy(), "FILE");
    (out.status.code().unwrap(), err)
}

fn assert_error(text: &str, at: &str, says: &str) {
    let (code, err) = check(text);
    assert_eq!(code, 2, "expected exit 2 for:\n{text}\nstderr: {err}");
    assert!(
        err.contains(&format!("FILE:{at}: ")),
        "expected position {at} in: {err}"
    );
    assert!(err.contains(says), "expected `{says}` in: {err}");
}

const OK: &str =
    "version: 1\nsurfaces:\n  - name: shared-tmp\n    type: filesystem\n    path: /tmp\n";

#[test]
fn valid_config() {
    let (code, err) = check(&format!(
        "{OK}declared:\n  - shared-tmp:directory-name\n  - channel: shared-tmp:xattr\n    reason: agents share notes\n"
    ));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("is valid: 1 surface, 10 channels, 2 declared"),
        "{err}"
    );
}

#[test]
fn version_errors() {
    assert_error("surfaces: []\n", "1:1", "missing `version: 1`");
    assert_error(
        "version: 2\nsurfaces: []\n",
        "1:10",
        "unsupported config version 2",
    );
    assert_error(
        "version: one\nsurfaces: []\n",
        "1:10",
        "`version` must be the number 1, not a string",
    );
}

#[test]
fn structure_errors() {
    assert_error("", "1:1", "the config is empty");
    assert_error("version: 1\n", "1:1", "missing `surfaces:`");
    assert_error("version: 1\nsurfaces: []\n", "2:11", "`surfaces` is empty");
    assert_error(
        "version: 1\nsurface: []\n",
        "2:1",
        "unknown field `surface`",
    );
    assert_error("version: 1\nsurfaces: [\n", "2:11", "unclosed bracket");
    assert_error("version: 1\nsurfaces:\n  - 3\n", "3:5", "mapping");
}

#[test]
fn surface_errors() {
    assert_error(
        &OK.replace("path: /tmp", "pth: /tmp"),
        "5:5",
        "unknown key `pth` (did you mean `path`?) for a surface of type filesystem; known keys: name, type, path, content-reads",
    );
    assert_error(
        &OK.replace("path: /tmp", "path: /tmp\n    content-read: false"),
        "6:5",
        "unknown key `content-read` (did you mean `content-reads`?)",
    );
    assert_error(&OK.replace("    path: /tmp\n", ""), "3:5", "needs `path:`");
    assert_error(
        &OK.replace("filesystem", "filesytem"),
        "4:11",
        "unknown surface type `filesytem`; known types: filesystem",
    );
    assert_error(
        &OK.replace("shared-tmp", "Shared_Tmp"),
        "3:11",
        "invalid surface name `Shared_Tmp`",
    );
    assert_error(
        &OK.replace("shared-tmp", "-x"),
        "3:11",
        "invalid surface name",
    );
    assert_error(
        &OK.replace("- name: shared-tmp\n    type", "- type"),
        "3:5",
        "without `name:`",
    );
    assert_error(
        &OK.replace("    type: filesystem\n", ""),
        "3:5",
        "has no `type:`",
    );
    assert_error(
        &format!("{OK}    content-reads: maybe\n"),
        "6:20",
        "`content-reads` must be true or false, not a string",
    );
    assert_error(
        &format!("{OK}    path: /var\n"),
        "6:5",
        "duplicate key `path`",
    );
    assert_error(
        &OK.replace("path: /tmp", "path: [a]"),
        "5:11",
        "`path` must be a string, not a list",
    );
    let two = format!("{OK}  - name: shared-tmp\n    type: filesystem\n    path: /var\n");
    assert_error(
        &two,
        "6:11",
        "duplicate surface name `shared-tmp` (first at line 3)",
    );
}

#[test]
fn env_expansion_errors() {
    assert_error(
        &OK.replace("/tmp", "${UNSET_RUNWARDEN_TEST_VAR}/x"),
        "5:11",
        "environment variable UNSET_RUNWARDEN_TEST_VAR is not set or empty",
    );
    assert_error(&OK.replace("/tmp", "${PRESENT"), "5:11", "unclosed");
    let (code, err) = check(&OK.replace("/tmp", "${PRESENT}/y"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn declared_errors() {
    assert_error(
        &format!("{OK}declared:\n  - shared-tmp\n"),
        "7:5",
        "malformed declaration `shared-tmp`: expected `surface:carrier`",
    );
    assert_error(
        &format!("{OK}declared:\n  - other:file-name\n"),
        "7:5",
        "names no surface `other`; surfaces: shared-tmp",
    );
    assert_error(
        &format!("{OK}declared:\n  - shared-tmp:file-nmae\n"),
        "7:5",
        "has no carrier `file-nmae`; its carriers: file-content, file-name, directory-name, symlink-target, xattr, xattr-name, mtime, file-size, special-file-name",
    );
    assert_error(
        &format!("{OK}declared:\n  - shared-tmp:mtime\n  - shared-tmp:mtime\n"),
        "8:5",
        "declared twice (first at line 7)",
    );
    assert_error(
        &format!("{OK}declared:\n  - channel: shared-tmp:mtime\n    refs: x\n"),
        "8:5",
        "unknown key `refs` in a declaration",
    );
    assert_error(
        &format!("{OK}declared:\n  - 3\n"),
        "7:5",
        "a declaration is a `surface:carrier` string",
    );
}

#[test]
fn probe_refuses_a_bad_config_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let p = probe(
        dir.path(),
        &fs_config("s", &shared, "declared:\n  - s:nope\n"),
        &[],
    );
    assert_eq!(p.code, 2, "{}", p.stderr);
    assert!(p.stderr.contains("runwarden.yml:7:5: "), "{}", p.stderr);
    assert!(
        std::fs::read_dir(&shared).unwrap().next().is_none(),
        "nothing planted"
    );
    assert!(p.report.is_null(), "no report written");
}

#[test]
fn missing_config_file_is_exit_2() {
    let out = bin()
        .args(["check-config", "/nonexistent/rw.yml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read config /nonexistent/rw.yml")
    );
}

#[test]
fn the_shipped_example_validates_on_a_runner() {
    // Simulates a runner: RUNNER_* set (they are stripped by default).
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/example.yml");
    let out = bin()
        .args(["check-config", fixture])
        .env("RUNNER_TEMP", "/home/runner/_work/_temp")
        .env("RUNNER_TOOL_CACHE", "/opt/hostedtoolcache")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("is valid: 2 surfaces, 20 channels, 2 declared"),
        "{err}"
    );
    // Off a runner the variables are unset: an error, never a probe of `/..`.
    let out = bin().args(["check-config", fixture]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "example.yml:7:11: `path`: environment variable RUNNER_TEMP is not set or empty"
    ));
}

/// Independent errors are all reported in one run, each on its own line
/// with its place; a declaration of a surface that has an error of its own
/// is not reported again.
#[test]
fn every_independent_error_in_one_run() {
    let (code, err) = check(
        "version: 1\nsurfaces:\n  - name: a\n    type: filesystem\n    pth: /tmp\n  - name: b\n    type: filesytem\n  - name: c\n    type: filesystem\n    path: /tmp\ndeclared:\n  - c:file-nam\n  - a:file-name\n  - d:file-name\n",
    );
    assert_eq!(code, 2, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(lines[0].contains("FILE:5:5: unknown key `pth`"), "{err}");
    assert!(
        lines[1].contains("FILE:7:11: unknown surface type `filesytem`"),
        "{err}"
    );
    assert!(lines[2].contains("FILE:12:5: `c:file-nam`"), "{err}");
    assert!(
        lines[3].contains("FILE:14:5: `d:file-name` names no surface `d`"),
        "{err}"
    );
}

/// `check-config` on `text` with `env` added: (exit code, stderr).
fn check_with(text: &str, env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rw.yml");
    std::fs::write(&f, text).unwrap();
    let mut c = bin();
    c.arg("check-config").arg(&f);
    for v in [
        "GITHUB_API_URL",
        "ACTIONS_RESULTS_URL",
        "GITHUB_TOKEN",
        "GH_TOKEN",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).replace(&*f.to_string_lossy(), "FILE");
    (out.status.code().unwrap(), err)
}

/// The config sits in the work tree an agent can edit: no `*-env` key may
/// name runwarden's own key, the runner's tokens or a rendezvous's read
/// token, and the job's GitHub token goes to GitHub's API or ghcr.io
/// alone (0.11.0 took every one of these as valid and sent the secret).
#[test]
fn a_config_cannot_send_runwardens_own_secrets_anywhere() {
    let entry = |body: &str| format!("version: 1\nsurfaces:\n  - name: s\n{body}");
    let http = |key: &str, var: &str| {
        entry(&format!(
            "    type: http-cache\n    url: https://cache.example/dav/\n    {key}: {var}\n"
        ))
    };
    let refused = [
        (
            http("token-env", "RUNWARDEN_KEY"),
            "runwarden's own variables",
        ),
        (
            entry(
                "    type: npm-registry\n    url: https://npm.example/\n    token-env: ACTIONS_RUNTIME_TOKEN\n",
            ),
            "only the runner's results service gets it",
        ),
        // The username is sent too (the review's: basic auth carried the
        // job's token as its user).
        (
            entry(
                "    type: http-cache\n    url: https://cache.example/dav/\n    username-env: GITHUB_TOKEN\n    password-env: X\n",
            ),
            "`username-env` (GITHUB_TOKEN) would send the job's GitHub token",
        ),
        // The action's `key` input is the marker key.
        (
            http("token-env", "INPUT_KEY"),
            "the action's inputs (its marker key among them)",
        ),
        (
            http("token-env", "RUNWARDEN_WATCH_STATE"),
            "runwarden's own variables",
        ),
        (
            entry(
                "    type: pypi-index\n    upload-url: https://pypi.example/legacy/\n    simple-url: https://pypi.example/simple/\n    username-env: U\n    password-env: ACTIONS_ID_TOKEN_REQUEST_TOKEN\n",
            ),
            "names ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        ),
        (
            // The egress entry comes after the one that names its token.
            format!(
                "{}  - name: egress\n    type: network-egress\n    rendezvous: https://rv.example\n    token-env: RV_TOKEN\n",
                http("token-env", "RV_TOKEN")
            ),
            "the read token of a network-egress surface",
        ),
        (
            http("token-env", "GITHUB_TOKEN"),
            "would send the job's GitHub token to https://cache.example/dav/",
        ),
        (
            entry(
                "    type: network-egress\n    rendezvous: https://rv.example\n    token-env: GH_TOKEN\n",
            ),
            "(GH_TOKEN) would send the job's GitHub token",
        ),
        (
            entry(
                "    type: github-api\n    repository: octo/repo\n    api-url: https://evil.example/api\n",
            ),
            "not GitHub's API (https://api.github.com)",
        ),
        (
            entry("    type: actions-cache\n    results-url: https://evil.example/\n"),
            "`results-url` is not the runner's results service",
        ),
    ];
    let env = [
        ("GITHUB_TOKEN", "ghs_x"),
        ("ACTIONS_RUNTIME_TOKEN", "rt"),
        ("ACTIONS_RESULTS_URL", "https://results.example/"),
    ];
    for (text, says) in &refused {
        let (code, err) = check_with(text, &env);
        assert_eq!(code, 2, "{text}\n{err}");
        assert!(err.contains(says), "expected `{says}`:\n{text}\n{err}");
    }
    // What stays valid: GitHub's token to ghcr.io and to the runner's own
    // API, the runtime token to the runner's results service, and the
    // egress entry naming its own token.
    let allowed = [
        entry(
            "    type: oci-registry\n    registry: https://ghcr.io\n    repository: octo\n    username: u\n    token-env: GITHUB_TOKEN\n",
        ),
        entry(
            "    type: github-api\n    repository: octo/repo\n    api-url: https://ghe.example/api/v3\n",
        ),
        entry("    type: actions-cache\n    results-url: https://results.example/x/\n"),
        entry(
            "    type: network-egress\n    rendezvous: https://rv.example\n    token-env: RV_TOKEN\n",
        ),
        // (The read token's documented variable.)
        entry(
            "    type: network-egress\n    rendezvous: https://rv.example\n    token-env: RUNWARDEN_RENDEZVOUS_TOKEN\n",
        ),
        http("token-env", "CACHE_TOKEN"),
    ];
    let env = [
        ("GITHUB_TOKEN", "ghs_x"),
        ("GITHUB_API_URL", "https://ghe.example/api/v3"),
        ("ACTIONS_RUNTIME_TOKEN", "rt"),
        ("ACTIONS_RESULTS_URL", "https://results.example/"),
    ];
    for text in &allowed {
        let (code, err) = check_with(text, &env);
        assert_eq!(code, 0, "{text}\n{err}");
    }
}
