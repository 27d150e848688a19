//! What run A publishes for a carrier: the package's name and version
//! (which run B and cleanup derive too), and the publish document with its
//! tarball, as `npm publish` sends them.

use super::Npm;
use crate::nonce::Nonce;
use crate::surface::RunCtx;
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha512};

/// (package name, version) of a carrier's plant.
pub(super) fn package_for(ctx: &RunCtx<'_>, carrier: Npm, nonce: &Nonce) -> (String, String) {
    let name = crate::surface::tagged_name(
        ctx,
        carrier.name(),
        (carrier == Npm::PackageName).then_some(nonce),
        "",
    );
    let version = if carrier == Npm::Version {
        format!("0.0.0-{}", nonce.hex())
    } else {
        "0.0.0".to_string()
    };
    (name, version)
}

/// The publish document and tarball of a carrier's plant.
pub(super) fn publish_doc(
    url: &str,
    probe_id: &str,
    carrier: Npm,
    name: &str,
    version: &str,
    nonce: &Nonce,
) -> Value {
    let readme = if carrier == Npm::Readme {
        format!("runwarden plant\n\n{}\n", nonce.hex())
    } else {
        "runwarden plant\n".to_string()
    };
    let manifest = json!({ "name": name, "version": version, "description": format!("runwarden plant, probe {probe_id}") });
    let mut files: Vec<(String, Vec<u8>)> = vec![(
        "package/package.json".into(),
        manifest.to_string().into_bytes(),
    )];
    if carrier == Npm::TarballContent {
        files.push((
            "package/note.txt".into(),
            format!("{}\n", nonce.hex()).into_bytes(),
        ));
    }
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_str(), d.as_slice()))
        .collect();
    let tgz = crate::archive::tgz(&refs);
    let file = format!("{}-{version}.tgz", name.rsplit('/').next().unwrap_or(name));
    let integrity = format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(&tgz))
    );
    json!({
        "_id": name,
        "name": name,
        "description": format!("runwarden plant, probe {probe_id}"),
        "dist-tags": { "latest": version },
        "readme": readme,
        "versions": { version: {
            "name": name,
            "version": version,
            "description": format!("runwarden plant, probe {probe_id}"),
            "readme": readme,
            "dist": { "tarball": format!("{url}{name}/-/{file}"), "integrity": integrity },
        }},
        "_attachments": { file: {
            "content_type": "application/octet-stream",
            "data": base64::engine::general_purpose::STANDARD.encode(&tgz),
            "length": tgz.len(),
        }},
    })
}
