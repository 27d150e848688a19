//! Cleanup against the real `docker-registry`: the plant's own layer blob
//! stays when a tagged manifest of someone else references it (deleting
//! it would break their manifest), and that manifest stays whole.

use super::config;
use crate::common::registries::DockerRegistry;
use crate::common::*;

#[test]
fn a_layer_blob_another_manifest_references_stays() {
    let r = DockerRegistry::start();
    let dir = tempfile::tempdir().unwrap();
    let env = [("REGISTRY_TOKEN", r.password)];
    let cfg = config(&r.url, "");
    let plant = run_config(dir.path(), &cfg, &env, &["plant", "--probe-id", "oci-3"]);
    assert_eq!(plant.code, 0, "{}\n{}", plant.stdout, plant.stderr);
    let repo = r
        .catalog()
        .into_iter()
        .find(|n| n.contains("runwarden-oci-3-blob-content-"))
        .unwrap();
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
    let m = manifest("plant");
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
