//! The loopback GitHub's artifact side (src/loopback/github/artifacts.rs and
//! rest_artifacts.rs) proven against the real client, npm
//! `@actions/artifact`: one run uploads through the results service (Twirp,
//! runtime token, Azure Put Block / Put Block List), another run lists and
//! downloads it by run id and a REST token as download-artifact does with
//! `run-id` + `github-token`; a duplicate name in one run is refused with
//! GitHub's 409, a run deletes its own artifact, and a REST token without
//! `actions` gets GitHub's 403. Only a stand-in that passes these may be
//! used to test runwarden's own client.

use crate::common::strip_runner_env;
use runwarden::loopback::github::GitHubServer;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const CLIENT: &str = "@actions/artifact@6.2.1";

/// `@actions/artifact`'s entry point, installed once under the target dir.
fn client_lib() -> PathBuf {
    crate::common::npm_client(
        "npm-actions-artifact",
        CLIENT,
        "@actions/artifact/lib/artifact.js",
    )
}

/// Runs the real client once, as a step of the run that holds
/// `runtime_token` would, and returns its result (or `{"error": …}`).
fn client(svc: &GitHubServer, runtime_token: &str, dir: &Path, request: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/actions-artifact-client.mjs");
    let mut c = Command::new("node");
    c.arg(script)
        .env("CLIENT_REQUEST", request.to_string())
        .current_dir(dir);
    strip_runner_env(&mut c);
    let out = c
        .env("ACTIONS_ARTIFACT_LIB", client_lib())
        .env("ACTIONS_RESULTS_URL", svc.results_url())
        .env("ACTIONS_RUNTIME_TOKEN", runtime_token)
        // The client refuses every call unless this host is github.com,
        // *.ghe.com or *.localhost (lib/internal/shared/config.js isGhes);
        // it is only checked, never contacted.
        .env(
            "GITHUB_SERVER_URL",
            format!("http://github.localhost:{}", svc.port),
        )
        .env("GITHUB_API_URL", svc.api_url())
        .env("GITHUB_WORKSPACE", dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the client failed:\n{all}");
    let last = stdout.lines().last().unwrap_or("null");
    let v: Value = serde_json::from_str(last).unwrap_or(Value::Null);
    assert!(v.is_object(), "no result from the client:\n{all}");
    v
}

/// The files to upload, under `root`: text, a nested binary file and one
/// big enough (and incompressible) to take two 8 MiB blocks.
fn files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut big = Vec::with_capacity(9 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while big.len() < 9 << 20 {
        // xorshift64: incompressible, so the zip stays over one block.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        big.extend_from_slice(&x.to_le_bytes());
    }
    let files = vec![
        ("a.txt".to_string(), b"alpha\n".to_vec()),
        ("sub/b.bin".to_string(), vec![0, 1, 2, 255, 254, 10, 13]),
        ("sub/big.bin".to_string(), big),
    ];
    for (rel, data) in &files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    files
}

fn upload(svc: &GitHubServer, token: &str, dir: &Path, name: &str, root: &Path) -> Value {
    let paths: Vec<String> = walk(root)
        .into_iter()
        .map(|p| root.join(p).to_string_lossy().into_owned())
        .collect();
    client(
        svc,
        token,
        dir,
        json!({ "op": "upload", "name": name, "files": paths, "root": root }),
    )
}

/// The relative paths of the regular files under `root`, sorted.
fn walk(root: &Path) -> Vec<String> {
    let mut out = vec![];
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// The entry names of a zip, from its central directory.
fn zip_entries(zip: &[u8]) -> Vec<String> {
    let u16_at = |i: usize| u16::from_le_bytes([zip[i], zip[i + 1]]) as usize;
    let u32_at = |i: usize| u32::from_le_bytes(zip[i..i + 4].try_into().unwrap()) as usize;
    let eocd = (0..=zip.len() - 22)
        .rev()
        .find(|&i| zip[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .expect("no end of central directory: not a zip");
    let (count, mut at) = (u16_at(eocd + 10), u32_at(eocd + 16));
    let mut names = vec![];
    for _ in 0..count {
        assert_eq!(zip[at..at + 4], [0x50, 0x4b, 0x01, 0x02], "bad entry");
        let (n, extra, comment) = (u16_at(at + 28), u16_at(at + 30), u16_at(at + 32));
        names.push(String::from_utf8_lossy(&zip[at + 46..at + 46 + n]).into_owned());
        at += 46 + n + extra + comment;
    }
    names
}

/// download-artifact's `run-id` + `github-token` + `repository`.
fn find_by(token: &str, run_id: u64) -> Value {
    json!({ "token": token, "workflowRunId": run_id,
        "repositoryOwner": "octo", "repositoryName": "repo" })
}

#[test]
fn one_run_uploads_and_another_lists_and_downloads_by_run_id() {
    let svc = GitHubServer::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("up");
    let sent = files(&root);
    let run1 = svc.runtime_token("octo/repo", 1);
    let up = upload(&svc, &run1, work.path(), "mailbox", &root);
    assert!(up["id"].as_u64().unwrap() > 0, "{up}");
    let stored = svc.artifacts();
    assert_eq!(stored.len(), 1);
    let a = &stored[0];
    assert!(a.finalized && a.name == "mailbox" && a.run_id == 1 && a.repo == "octo/repo");
    assert_eq!(a.id, up["id"].as_u64().unwrap());
    let blob = a.data.as_ref().unwrap();
    assert!(blob.len() > 8 << 20, "the zip should take two blocks");
    assert_eq!(up["size"].as_u64(), Some(blob.len() as u64));
    assert_eq!(
        a.digest.as_deref(),
        Some(format!("sha256:{}", up["digest"].as_str().unwrap()).as_str())
    );
    // As Azure's SDK stages a block blob: one Put Block per 8 MiB, then
    // Put Block List; never a single Put Blob.
    let puts: Vec<String> = svc
        .lock()
        .log
        .iter()
        .filter(|(m, _, _)| m == "PUT")
        .map(|(_, u, _)| {
            u.rsplit('&')
                .find(|p| p.starts_with("comp="))
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(puts, ["comp=block", "comp=block", "comp=blocklist"]);
    let names: Vec<&str> = sent.iter().map(|(n, _)| n.as_str()).collect();
    let mut entries = zip_entries(blob);
    entries.sort();
    assert_eq!(entries, names);

    // Run 2 sees none of run 1's artifacts through its own runtime token…
    let run2 = svc.runtime_token("octo/repo", 2);
    let own = client(&svc, &run2, work.path(), json!({ "op": "list" }));
    assert_eq!(own["artifacts"], json!([]), "{own}");
    // …but lists and downloads them by run id with an `actions: read` token.
    let rest = svc.token(&[("actions", "read")]);
    let listed = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "list", "findBy": find_by(&rest, 1) }),
    );
    let l = &listed["artifacts"];
    assert_eq!(l.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(l[0]["name"], "mailbox");
    assert_eq!(l[0]["id"], up["id"]);
    assert_eq!(l[0]["size"].as_u64(), Some(blob.len() as u64));
    assert_eq!(l[0]["digest"].as_str(), a.digest.as_deref());
    // download-artifact's `name` input: the run's listing `?name=`.
    let by_name = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "get", "name": "mailbox", "findBy": find_by(&rest, 1) }),
    );
    assert_eq!(by_name["artifact"]["id"], up["id"], "{by_name}");
    let down = work.path().join("down");
    let got = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "download", "id": up["id"], "path": down, "findBy": find_by(&rest, 1),
            "expectedHash": l[0]["digest"] }),
    );
    assert_eq!(got["digestMismatch"], false, "{got}");
    // The zip came through GitHub's redirect to a signed URL, fetched
    // without the token.
    let log = svc.lock().log.clone();
    let zip = format!("/api/repos/octo/repo/actions/artifacts/{}/zip", up["id"]);
    let at = log.iter().position(|(m, u, _)| m == "GET" && *u == zip);
    let blob_get = log
        .iter()
        .skip(at.expect("no REST zip request"))
        .find(|(m, u, _)| m == "GET" && u.starts_with("/artifact-blobs/"));
    assert_eq!(blob_get.map(|(_, _, auth)| auth.as_str()), Some(""));
    assert_eq!(walk(&down), names);
    for (rel, data) in &sent {
        assert!(std::fs::read(down.join(rel)).unwrap() == *data, "{rel}");
    }
}

#[test]
fn a_duplicate_name_in_one_run_is_refused_with_409() {
    let svc = GitHubServer::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("up");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("note.txt"), "first\n").unwrap();
    let run1 = svc.runtime_token("octo/repo", 1);
    let first = upload(&svc, &run1, work.path(), "dup", &root);
    assert!(first["id"].as_u64().is_some(), "{first}");
    std::fs::write(root.join("note.txt"), "second\n").unwrap();
    let again = upload(&svc, &run1, work.path(), "dup", &root);
    let err = again["error"].as_str().unwrap_or_default();
    assert!(
        err.contains(
            "Failed to CreateArtifact: Received non-retryable error: Failed request: (409) \
             Conflict: an artifact with this name already exists on the workflow run"
        ),
        "{again}"
    );
    assert_eq!(svc.artifacts().len(), 1);
    // Names are per run: another run may use the same one.
    let run2 = svc.runtime_token("octo/repo", 2);
    let other = upload(&svc, &run2, work.path(), "dup", &root);
    assert!(other["id"].as_u64().is_some(), "{other}");
    assert_eq!(svc.artifacts().len(), 2);
}

#[test]
fn a_run_deletes_its_own_artifact() {
    let svc = GitHubServer::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("up");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("gone.txt"), "soon gone\n").unwrap();
    let run1 = svc.runtime_token("octo/repo", 1);
    let up = upload(&svc, &run1, work.path(), "temp", &root);
    let listed = client(&svc, &run1, work.path(), json!({ "op": "list" }));
    assert_eq!(listed["artifacts"][0]["id"], up["id"], "{listed}");
    // The same run downloads through the results service (no REST token).
    let down = work.path().join("down");
    let got = client(
        &svc,
        &run1,
        work.path(),
        json!({ "op": "download", "id": up["id"], "path": down }),
    );
    assert_eq!(got["digestMismatch"], false, "{got}");
    assert_eq!(
        std::fs::read_to_string(down.join("gone.txt")).unwrap(),
        "soon gone\n"
    );
    let del = client(
        &svc,
        &run1,
        work.path(),
        json!({ "op": "delete", "name": "temp" }),
    );
    assert_eq!(del["id"], up["id"], "{del}");
    assert!(svc.artifacts().is_empty());
    let listed = client(&svc, &run1, work.path(), json!({ "op": "list" }));
    assert_eq!(listed["artifacts"], json!([]), "{listed}");
    let rest = svc.token(&[("actions", "read")]);
    let listed = client(
        &svc,
        &run1,
        work.path(),
        json!({ "op": "list", "findBy": find_by(&rest, 1) }),
    );
    assert_eq!(listed["artifacts"], json!([]), "{listed}");
    let again = client(
        &svc,
        &run1,
        work.path(),
        json!({ "op": "delete", "name": "temp" }),
    );
    assert!(
        again["error"]
            .as_str()
            .is_some_and(|e| e.contains("Artifact not found for name: temp")),
        "{again}"
    );
}

#[test]
fn a_rest_token_without_actions_gets_403_and_delete_needs_write() {
    let svc = GitHubServer::start().unwrap();
    let work = tempfile::tempdir().unwrap();
    let id = svc.add_artifact("octo/repo", 1, "planted", b"PK\x05\x06");
    let run2 = svc.runtime_token("octo/repo", 2);
    let weak = svc.token(&[("contents", "write"), ("issues", "write")]);
    let listed = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "list", "findBy": find_by(&weak, 1) }),
    );
    let err = listed["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("Resource not accessible by integration"),
        "{listed}"
    );
    let got = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "download", "id": id, "path": work.path().join("d"),
            "findBy": find_by(&weak, 1) }),
    );
    let err = got["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("Resource not accessible by integration"),
        "{got}"
    );
    assert!(!work.path().join("d").join("planted").exists());
    // Deleting another run's artifact takes `actions: write`.
    let read = svc.token(&[("actions", "read")]);
    let del = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "delete", "name": "planted", "findBy": find_by(&read, 1) }),
    );
    let err = del["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("Resource not accessible by integration"),
        "{del}"
    );
    assert_eq!(svc.artifacts().len(), 1);
    let write = svc.token(&[("actions", "write")]);
    let del = client(
        &svc,
        &run2,
        work.path(),
        json!({ "op": "delete", "name": "planted", "findBy": find_by(&write, 1) }),
    );
    assert_eq!(del["id"], id, "{del}");
    assert!(svc.artifacts().is_empty());
}
