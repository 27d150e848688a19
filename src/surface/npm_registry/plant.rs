//! What run A publishes for a carrier: the package's name and version
//! (which run B and cleanup derive too), and the publish document with its
//! tarball, as `npm publish` sends them.

use super::Npm;
use super::protocol::{class, path_of};
use super::{Entry, NpmRegistry};
use crate::escape;
use crate::http::answer::Class;
use crate::nonce::Nonce;
use crate::surface::witness::{self, Side};
use crate::surface::{Journal, PlantOutcome, RunCtx};
use ::http::Method;
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha512};

/// The route the witnesses stand in: a package's document read by its
/// name (what every carrier but package-name reads).
pub(super) const DOCUMENT: &str = "document";

/// The one version a witness publishes.
pub(super) const WITNESS_VERSION: &str = "0.0.0";

/// The name of the document route's witness on `side`.
pub(super) fn witness_package(ctx: &RunCtx<'_>, side: Side) -> String {
    witness::name(ctx, DOCUMENT, side, "")
}

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
    /// Publishes the document route's witness on `side`: a package of one
    /// version that carries no nonce.
    pub(super) fn publish_witness(
        &self,
        ctx: &RunCtx<'_>,
        side: Side,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let name = witness_package(ctx, side);
        // (A package-name plant's document, which holds nothing of a nonce
        // but its name, and this name holds none.)
        let none = Nonce::from_hex(&"0".repeat(32)).expect("32 hex digits");
        let doc = publish_doc(
            &self.settings.url,
            ctx.probe_id,
            Npm::PackageName,
            &name,
            WITNESS_VERSION,
            &none,
        );
        self.publish(&name, WITNESS_VERSION, &doc, journal)
    }

    /// One `npm publish` of `doc` (`name`@`version`): journalled before the
    /// request and taken back only when the registry's answer says nothing
    /// was published; the plant's outcome when it was not.
    pub(super) fn publish(
        &self,
        name: &str,
        version: &str,
        doc: &Value,
        journal: &mut Journal<'_, Entry>,
    ) -> Result<(), PlantOutcome<Nonce>> {
        let shown = escape::bytes(name.as_bytes());
        let entry = Entry {
            name: name.to_string(),
            versions: vec![version.to_string()],
        };
        journal.record(&entry);
        let url = format!("{}{}", self.settings.url, path_of(name));
        let publish = self.call(Method::PUT, &url, Some(doc));
        // A 4xx says nothing was published; a 5xx may come after it was
        // (a gateway's), so the entry stays journalled.
        if publish
            .as_ref()
            .is_ok_and(|r| (400..500).contains(&r.status))
        {
            journal.retract(&entry);
        }
        match publish {
            Err(f) => Err(PlantOutcome::Error { reason: f.into() }),
            // (A version that exists is a conflict: protocol::REGISTRY.)
            Ok(r) if class(&r) == Class::Refused => Err(PlantOutcome::Refused {
                reason: format!("the registry refused the publish (HTTP {})", r.status),
            }),
            Ok(r) if !(200..300).contains(&r.status) => Err(PlantOutcome::Error {
                reason: format!(
                    "publishing {shown}: HTTP {} {}",
                    r.status,
                    escape::bytes(&r.body[..r.body.len().min(200)])
                ),
            }),
            Ok(_) => Ok(()),
        }
    }
}
