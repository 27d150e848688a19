//! Run A: one small package per carrier, published as `npm publish`
//! does, journalled before the request and taken back only when the
//! registry refused it.

use super::Entry;
use super::protocol::{class, path_of};
use super::{Npm, NpmRegistry};
use crate::escape;
use crate::http::answer::Class;
use crate::nonce::Nonce;
use crate::surface::{Job, Journal, PlantOutcome, RunCtx};
use ::http::Method;
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

impl NpmRegistry {
    pub(super) fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Npm>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let carrier = job.carrier;
        let (name, version) = package_for(ctx, carrier, &job.nonce);
        let shown = escape::bytes(name.as_bytes());
        let doc = publish_doc(
            &self.settings.url,
            ctx.probe_id,
            carrier,
            &name,
            &version,
            &job.nonce,
        );
        let entry = Entry {
            name: name.clone(),
            versions: vec![version.clone()],
        };
        journal.record(&entry);
        let url = format!("{}{}", self.settings.url, path_of(&name));
        let refused = |status: u16, what: &str| PlantOutcome::Refused {
            reason: format!("the registry refused the {what} (HTTP {status})"),
        };
        let publish = self.call(Method::PUT, &url, Some(&doc));
        // A 4xx says nothing was published; a 5xx may come after it was
        // (a gateway's), so the entry stays journalled.
        if publish
            .as_ref()
            .is_ok_and(|r| (400..500).contains(&r.status))
        {
            journal.retract(&entry);
        }
        match publish {
            Err(f) => return PlantOutcome::Error { reason: f.into() },
            // (A version that exists is a conflict: protocol::REGISTRY.)
            Ok(r) if class(&r) == Class::Refused => return refused(r.status, "publish"),
            Ok(r) if !(200..300).contains(&r.status) => {
                return PlantOutcome::Error {
                    reason: format!(
                        "publishing {shown}: HTTP {} {}",
                        r.status,
                        escape::bytes(&r.body[..r.body.len().min(200)])
                    ),
                };
            }
            Ok(_) => {}
        }
        if carrier == Npm::DistTag {
            let tag = format!("n{}", job.nonce.hex());
            let url = format!(
                "{}-/package/{}/dist-tags/{tag}",
                self.settings.url,
                path_of(&name)
            );
            match self.call(Method::PUT, &url, Some(&json!(version))) {
                Err(f) => return PlantOutcome::Error { reason: f.into() },
                Ok(r) if class(&r) == Class::Refused => return refused(r.status, "dist-tag"),
                Ok(r) if !(200..300).contains(&r.status) => {
                    return PlantOutcome::Error {
                        reason: format!("adding the dist-tag: HTTP {}", r.status),
                    };
                }
                Ok(_) => {}
            }
        }
        PlantOutcome::Planted {
            needle: job.nonce,
            persistence: None,
            detail: format!(
                "published {shown}@{} to {}",
                escape::bytes(version.as_bytes()),
                self.shown()
            ),
        }
    }
}
