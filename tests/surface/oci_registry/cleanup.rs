//! Cleanup against the real `docker-registry`: the plant's own layer blob
//! stays when a tagged manifest of someone else references it (deleting
//! it would break their manifest), and that manifest stays whole; probes
//! share one repository, and cleanup lists every repository and blob that
//! stays.

use super::config;
use crate::common::registries::{DockerRegistry, EMPTY_DIGEST};
use crate::common::*;
use serde_json::{Value, json};

#[test]
fn a_layer_blob_another_manifest_references_stays() {
    let r = DockerRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let env = [("REGISTRY_TOKEN", r.password)];
    let cfg = config(&r.url, "");
    let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "oci-3"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let (repo, tag) = super::plant_tag(&r, "runwarden-oci-3-blob-content-");
    let manifest = |tag: &str| -> serde_json::Value {
        let (code, text) = r.api(
            "GET",
            &format!("/v2/{repo}/manifests/{tag}"),
            &["accept: application/vnd.oci.image.manifest.v1+json"],
            None,
        );
        assert_eq!(code, 200, "{text}");
        serde_json::from_str(text.split("\r\n\r\n").last().unwrap()).unwrap()
    };
    let m = manifest(&tag);
    let layer = m["layers"][0].clone();
    let digest = layer["digest"].as_str().unwrap().to_string();
    // Someone's own manifest (its own annotation) on the plant's layer.
    let theirs = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": m["config"],
        "layers": [layer],
        "annotations": { "note": "theirs, on that layer" },
    })
    .to_string();
    let (code, text) = r.api(
        "PUT",
        &format!("/v2/{repo}/manifests/theirs"),
        &["content-type: application/vnd.oci.image.manifest.v1+json"],
        Some(theirs.as_bytes()),
    );
    assert_eq!(code, 201, "{text}");
    let clean = run_config(dir.path(), &cfg, &env, &["cleanup", "--probe-id", "oci-3"]);
    assert_eq!(
        clean.code, 1,
        "a blob left is no green cleanup\n{}",
        clean.stdout
    );
    assert!(
        clean.stdout.contains("\"theirs\"") && clean.stdout.contains("reference"),
        "{}",
        clean.stdout
    );
    let (code, _) = r.api("HEAD", &format!("/v2/{repo}/blobs/{digest}"), &[], None);
    assert_eq!(code, 200, "their manifest's layer went");
    assert_eq!(
        manifest("theirs")["annotations"]["note"],
        "theirs, on that layer"
    );
}

/// Issue 39: probes share one repository for the carriers that are not
/// opt-in, so two probes leave one repository in the catalog, not three
/// each; each plant's unique layer blob is unlinked (only the shared empty
/// config blob stays in the repository's storage); and cleanup's account
/// lists every repository and blob that stays, by name and why: the
/// shared repository and its empty blob once, `repository-name`'s
/// repository and its catalog witness.
#[test]
fn probes_share_one_repository_and_cleanup_lists_every_repository_and_blob_left() {
    let r = DockerRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let env = [("REGISTRY_TOKEN", r.password)];
    let cfg = config(&r.url, "").replace("    repository-name: true\n", "");
    let shared = "ci/runwarden/runwarden-plants";
    let ours = || -> Vec<String> {
        r.catalog()
            .into_iter()
            .filter(|n| n.starts_with("ci/runwarden/runwarden"))
            .collect()
    };
    for _ in 0..2 {
        let p = run_config(dir.path(), &cfg, &env, &["probe"]);
        assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
        let c = &p.report["cleanup"];
        assert_eq!(c["left"], json!([]), "{c}");
        assert_eq!(
            (c["removed"].as_u64(), c["deleted"].as_u64()),
            (Some(2), Some(2)),
            "{c}"
        );
        let kept = c["kept"].as_array().unwrap();
        assert_eq!(kept.len(), 1, "{c}");
        let why = kept[0]["reason"].as_str().unwrap();
        for said in [
            &format!("the repository \"{shared}\""),
            "no registry API removes a repository",
            &format!("the empty config blob {EMPTY_DIGEST} in it stays"),
        ] {
            assert!(why.contains(said), "{said}: {why}");
        }
    }
    assert_eq!(ours(), [shared], "one repository for every probe");
    assert_eq!(
        r.get(&format!("/v2/{shared}/tags/list"))["tags"],
        Value::Null
    );
    // Of the blobs linked in the repository, only the empty one stays.
    let layers = r
        .dir
        .path()
        .join("data/docker/registry/v2/repositories")
        .join(shared)
        .join("_layers/sha256");
    let linked: Vec<String> = std::fs::read_dir(&layers)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.path()
                .join("link")
                .exists()
                .then(|| format!("sha256:{}", e.file_name().to_string_lossy()))
        })
        .collect();
    assert_eq!(linked, [EMPTY_DIGEST], "a plant's layer blob stays linked");

    // With `repository-name`: its repository and its catalog witness stay,
    // each listed.
    let p = run_config(dir.path(), &config(&r.url, ""), &env, &["probe"]);
    assert_eq!(p.code, 1, "{}\n{}", p.stdout, p.stderr);
    let c = &p.report["cleanup"];
    assert_eq!(c["left"], json!([]), "{c}");
    let kept: Vec<&str> = c["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["reason"].as_str().unwrap())
        .collect();
    assert_eq!(kept.len(), 3, "{c}");
    let now = ours();
    assert_eq!(now.len(), 3, "{now:?}");
    for repo in &now {
        let named = format!("the repository \"{repo}\"");
        assert_eq!(
            kept.iter().filter(|k| k.contains(&named)).count(),
            1,
            "{repo}: {kept:#?}"
        );
    }
    assert!(
        kept.iter().any(|k| k.contains("catalog witness")),
        "{kept:#?}"
    );
}
