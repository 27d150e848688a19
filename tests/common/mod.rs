//! Helpers shared by the integration tests: run the real binary with a
//! clean environment, mount real filesystems, read reports.
#![allow(dead_code)]

pub mod buildcache;
pub mod containers;
pub mod githttp;
pub mod hostile;
pub mod markdown;
pub mod registries;
pub mod registry_token;
pub mod seaweed;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The runwarden binary with `GITHUB_*`, `RUNNER_*`, `ACTIONS_*`, `INPUT_*`
/// and `RUNWARDEN_*` removed from its environment: tests must not depend on (or
/// leak into) the CI runner they happen to run on.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runwarden"));
    strip_runner_env(&mut c);
    c
}

/// Removes `GITHUB_*`, `RUNNER_*`, `ACTIONS_*`, `INPUT_*` and `RUNWARDEN_*`
/// from what `c` inherits, so a test sets exactly the runner it simulates.
pub fn strip_runner_env(c: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if ["GITHUB_", "RUNNER_", "ACTIONS_", "INPUT_", "RUNWARDEN_"]
            .iter()
            .any(|p| k.starts_with(p))
        {
            c.env_remove(&k);
        }
    }
}

pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// Skips (returns true, printing one line naming `tool` and how to get
/// it) when `present` is false, so that `cargo test` on a fresh machine
/// runs what it can; under `CI=true` a missing tool fails instead (CI
/// installs every one: .ci/run).
pub fn needs_tool(tool: &str, present: bool, how: &str) -> bool {
    if present {
        return false;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{tool} is missing ({how}): CI must have it");
    }
    eprintln!("skipped: needs {tool} ({how})");
    true
}

/// Whether Python 3 imports `module` (asked once a run).
pub fn python_has(module: &'static str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<&'static str, bool>>> = OnceLock::new();
    let mut seen = SEEN.get_or_init(Default::default).lock().unwrap();
    *seen.entry(module).or_insert_with(|| {
        Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Skips (returns true, printing why) unless running as root.
pub fn needs_root(what: &str) -> bool {
    if is_root() {
        false
    } else {
        eprintln!("skipped: {what} needs root");
        true
    }
}

pub struct Probe {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub report: Value,
}

impl Probe {
    pub fn finding(&self, channel: &str) -> &Value {
        self.report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["channel"] == channel)
            .unwrap_or_else(|| panic!("no finding {channel} in {}", self.report))
    }

    pub fn verdict(&self, channel: &str) -> String {
        self.finding(channel)["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Every finding of one surface, as (carrier, verdict).
    /// (carrier, verdict) of every message carrier of `surface`: all but
    /// runner-persistence, which looks for other probes' beacons.
    pub fn verdicts_of(&self, surface: &str) -> Vec<(String, String)> {
        self.report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["surface"] == surface && f["carrier"] != "runner-persistence")
            .map(|f| {
                (
                    f["carrier"].as_str().unwrap().into(),
                    f["verdict"].as_str().unwrap().into(),
                )
            })
            .collect()
    }
}

/// The coverage exposure `id` of a report, or a panic naming the
/// coverage there is.
pub fn exposure(p: &Probe, id: &str) -> Value {
    p.report["coverage"]["exposures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no {id} in {}", p.report["coverage"]))
}

/// No output of `p` (stdout, stderr, report) holds a credential.
/// The control a finding shows: a carrier found (FAIL, AUTHORIZED) needs
/// none, so run B does not read it (`not-run`), unless it read it anyway
/// (a transient carrier's control is read beside its surface); one that
/// passed, or failed to be found, had its control recovered.
pub fn assert_control_sound(f: &Value) {
    let want: &[&str] = match f["verdict"].as_str() {
        Some("fail" | "authorized") => &["not-run", "recovered"],
        _ => &["recovered"],
    };
    assert!(
        want.iter().any(|w| f["control"] == *w),
        "control {} is not {want:?}: {f}",
        f["control"]
    );
}

pub fn no_secrets(p: &Probe, secrets: &[&str]) {
    let all = format!("{}{}{}", p.stdout, p.stderr, p.report);
    for s in secrets {
        assert!(!all.contains(s), "a credential leaked:\n{all}");
    }
}

/// `text` with its wrapped prose joined again: each continuation line
/// (indented deeper than the line before it) joined to that line with a
/// space, so that a phrase can be looked for whatever width wrapped it.
pub fn unwrapped(text: &str) -> String {
    let indent = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let mut out: Vec<String> = Vec::new();
    let mut last = usize::MAX;
    for l in text.lines() {
        match out.last_mut() {
            Some(prev) if indent(l) > last && !l.trim().is_empty() => {
                prev.push(' ');
                prev.push_str(l.trim_start());
            }
            _ => {
                last = indent(l);
                out.push(l.to_string());
            }
        }
    }
    out.join("\n")
}

/// Writes `config` to a file and runs `probe` on it with a report.
pub fn probe(dir: &Path, config: &str, extra: &[&str]) -> Probe {
    let cfg = dir.join("runwarden.yml");
    std::fs::write(&cfg, config).unwrap();
    let report = dir.join("report.json");
    let _ = std::fs::remove_file(&report);
    let out = bin()
        .arg("probe")
        .arg("--config")
        .arg(&cfg)
        .arg("--report")
        .arg(&report)
        .args(extra)
        .output()
        .unwrap();
    finish(out, &report)
}

/// Runs `args` (a subcommand and its options) in `dir` with `config`
/// written to `dir/runwarden.yml`, TMPDIR set to `dir` and these
/// environment variables, and reads the report of `probe` and `recover`.
pub fn run_config(dir: &Path, config: &str, env: &[(&str, &str)], args: &[&str]) -> Probe {
    let cfg = dir.join("runwarden.yml");
    std::fs::write(&cfg, config).unwrap();
    let report = dir.join("report.json");
    let _ = std::fs::remove_file(&report);
    let mut c = bin();
    // In `dir`: a plant writes its receipt to the working directory.
    c.args(args)
        .arg("--config")
        .arg(&cfg)
        .current_dir(dir)
        .env("TMPDIR", dir);
    for (k, v) in env {
        c.env(k, v);
    }
    if args[0] == "probe" || args[0] == "recover" {
        c.arg("--report").arg(&report);
    }
    finish(c.output().unwrap(), &report)
}

pub fn finish(out: Output, report: &Path) -> Probe {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = match std::fs::read_to_string(report) {
        Ok(t) => serde_json::from_str(&t).unwrap(),
        Err(_) => Value::Null,
    };
    Probe {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr,
        report,
    }
}

/// A one-surface filesystem config.
pub fn fs_config(name: &str, path: &Path, extra: &str) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: {name}\n    type: filesystem\n    path: {}\n{extra}",
        serde_json::to_string(&path.to_string_lossy()).unwrap()
    )
}

/// A real filesystem mounted on a fresh directory, unmounted on drop.
pub struct Mount {
    pub dir: tempfile::TempDir,
}

impl Mount {
    pub fn new(fstype: &str, options: &str) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let st = Command::new("mount")
            .args(["-t", fstype, "-o", options, fstype])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount -t {fstype} failed");
        Mount { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Every file under `dir` (recursively) whose name ends in `.ext`, sorted.
pub fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// README.md and every `.md` file under docs/, sorted.
pub fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = vec![root.join("README.md")];
    out.extend(files_under(&root.join("docs"), "md"));
    out.sort();
    out
}

/// Everything about a directory's entries that runwarden must never change:
/// name, type, mode, size, mtime, content hash (regular files), link
/// target, xattrs. Sorted, for comparison before and after a probe.
pub fn snapshot(dir: &Path) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mut line = format!(
            "{:?} mode={:o} size={} mtime={}.{} ino={}",
            e.file_name().as_bytes(),
            m.mode(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ino()
        );
        if m.file_type().is_file() && m.mode() & 0o444 != 0 {
            let mut f = std::fs::File::open(&p).unwrap();
            let mut buf = Vec::new();
            use std::io::Read;
            (&mut f).take(1 << 20).read_to_end(&mut buf).unwrap();
            line += &format!(" content={:x}", fxhash(&buf));
        }
        if m.file_type().is_symlink() {
            line += &format!(" target={:?}", std::fs::read_link(&p).unwrap());
        }
        if let Ok(keys) = xattr::list(&p) {
            for k in keys {
                line += &format!(" xattr {:?}={:?}", k, xattr::get(&p, &k).ok().flatten());
            }
        }
        out.push(line);
    }
    out.sort();
    out
}

fn fxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100000001b3)
    })
}

/// Names in `dir` that runwarden planted (they all start `.runwarden-`).
pub fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".runwarden-"))
        .collect()
}

/// The filesystem carriers that carry a message from run A to run B (the
/// catalogue adds runner-persistence).
pub const ALL_CARRIERS: [&str; 9] = [
    "file-content",
    "file-name",
    "directory-name",
    "symlink-target",
    "xattr",
    "xattr-name",
    "mtime",
    "file-size",
    "special-file-name",
];

/// The uid tests drop run B to.
pub const NOBODY: &str = "65534:65534";

/// The file `entry` (relative to `node_modules`) of an npm client
/// installed once with its dependencies under the target directory, in a
/// folder `prefix` of its own: the real clients the loopback services are
/// proven against. Installs are serialized: tests run in parallel, and two
/// npm installs into one prefix would trip over each other.
pub fn npm_client(prefix: &str, spec: &str, entry: &str) -> PathBuf {
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALLING.lock().unwrap_or_else(|e| e.into_inner());
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(prefix);
    let lib = prefix.join("node_modules").join(entry);
    if !lib.exists() {
        let st = Command::new("npm")
            .args([
                "install",
                "--silent",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(&prefix)
            .arg(spec)
            .status()
            .expect("npm is needed for the real clients");
        assert!(st.success(), "npm install {spec} failed");
    }
    lib
}

/// A file from an npm package, fetched once with `npm pack` into the
/// target directory (never committed): the official SARIF schema, the
/// published action metadata schema.
pub fn npm_file(package: &str, version: &str, inner: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("npm")
        .join(format!("{package}@{version}").replace('/', "_"));
    let file = dir.join("package").join(inner);
    if !file.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("npm")
            .args([
                "pack",
                &format!("{package}@{version}"),
                "--silent",
                "--pack-destination",
            ])
            .arg(&dir)
            .status()
            .expect("npm is needed to fetch test schemas");
        assert!(st.success(), "npm pack {package}@{version} failed");
        let tgz = format!(
            "{}-{version}.tgz",
            package.trim_start_matches('@').replace('/', "-")
        );
        let st = Command::new("tar")
            .args(["-xzf", &tgz, &format!("package/{inner}")])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(st.success());
    }
    file
}

/// Validates a JSON document against a JSON schema with Python's
/// jsonschema (installed by .ci/run); the error text on failure.
pub fn schema_errors(schema: &Path, document: &Path) -> Option<String> {
    if needs_tool(
        "Python's jsonschema",
        python_has("jsonschema"),
        "pip install jsonschema",
    ) {
        return None;
    }
    let script = "import json,sys,jsonschema\ns=json.load(open(sys.argv[1]))\nd=json.load(open(sys.argv[2]))\njsonschema.validators.validator_for(s)(s).validate(d)\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(schema)
        .arg(document)
        .output()
        .unwrap();
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A report built by hand around `findings`, for output tests.
pub fn report_of(findings: Vec<runwarden::report::Finding>) -> runwarden::report::Report {
    use runwarden::report::*;
    Report {
        schema: SCHEMA.into(),
        tool: Tool::default(),
        mode: Mode::Probe,
        probe_id: "p".into(),
        label: None,
        started_at: "2026-11-30T00:00:00Z".into(),
        finished_at: "2026-11-30T00:00:01Z".into(),
        config: runwarden::plan::ConfigSource {
            path: Some("rw.yml".into()),
            embedded_default: false,
            discovered: None,
            pinned: None,
        },
        runs: Runs {
            a: "a".into(),
            b: "b".into(),
            a_uid: None,
            b_uid: None,
        },
        key: KeyKind::DerivedDefault,
        cross_job: None,
        surfaces: vec![],
        summary: Summary::of(&findings),
        findings,
        notices: vec![],
        cleanup: Cleanup::default(),
        watch: None,
        coverage: None,
        trust: None,
    }
}

/// A filesystem finding for output tests.
pub fn finding(
    carrier: &str,
    verdict: runwarden::verdict::Verdict,
    detail: &str,
) -> runwarden::report::Finding {
    runwarden::report::Finding {
        channel: format!("s:{carrier}"),
        surface: "s".into(),
        surface_type: "filesystem".into(),
        carrier: carrier.into(),
        verdict,
        persistence: runwarden::surface::Persistence::Durable,
        declared: verdict == runwarden::verdict::Verdict::Authorized,
        control: runwarden::verdict::Control::Recovered,
        detail: detail.into(),
        location: None,
        declared_at: None,
        declared_reason: None,
        scope: None,
        observed: vec![],
        observed_omitted: 0,
    }
}

/// Runs git with no system or global config; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An empty commit with `message` in the repository at `dir`.
pub fn empty_commit(dir: &Path, message: &str) {
    git(
        dir,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            message,
        ],
    );
}

/// A bare repository `remote.git` under `root` holding a few foreign refs
/// (a `main` branch and a `v1` tag), pushable over smart HTTP.
pub fn bare_remote(root: &Path) -> PathBuf {
    let remote = root.join("remote.git");
    git(root, &["init", "-q", "--bare", "remote.git"]);
    git(&remote, &["config", "http.receivepack", "true"]);
    let seed = root.join("seed");
    git(root, &["init", "-q", "seed"]);
    empty_commit(&seed, "foreign");
    git(&seed, &["tag", "v1"]);
    git(
        &seed,
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            "HEAD:refs/heads/main",
            "v1",
        ],
    );
    remote
}

/// Adds `n` foreign branches to a remote, `refs/heads/foreign/<i>/<name>`
/// with names taken in turn from `names`, all at `main`.
pub fn add_refs(remote: &Path, n: usize, names: &[&str]) {
    use std::io::Write;
    let sha = git(remote, &["rev-parse", "refs/heads/main"])
        .trim()
        .to_string();
    let input: String = (0..n)
        .map(|i| {
            format!(
                "create refs/heads/foreign/{i}/{} {sha}\n",
                names[i % names.len()]
            )
        })
        .collect();
    let mut child = Command::new("git")
        .args(["update-ref", "--stdin"])
        .current_dir(remote)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
}

/// A remote's refs, for comparing before and after a probe.
pub fn refs(remote: &Path) -> String {
    git(
        remote,
        &["for-each-ref", "--format=%(objectname) %(refname)"],
    )
}

/// What a hostile server echoes of a request's `Authorization` header: the
/// header, and the credentials it decodes to.
pub fn echo_of(authorization: &str) -> String {
    use base64::Engine as _;
    let decoded = authorization
        .split_whitespace()
        .nth(1)
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|d| String::from_utf8_lossy(&d).into_owned())
        .unwrap_or_default();
    format!("you sent {authorization} ({decoded})")
}

/// A config with one `git-remote` surface named `origin` at `remote`.
pub fn origin_config(remote: &Path) -> String {
    format!(
        "version: 1\nsurfaces:\n  - name: origin\n    type: git-remote\n    remote: {}\n",
        serde_json::to_string(remote).unwrap()
    )
}
