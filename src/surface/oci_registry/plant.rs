//! Run A: what a carrier's plant is (a repository, tags, one manifest of
//! unique content and, for `blob-content`, one layer blob), computed from
//! the probe id, the carrier and the nonce alone, so that cleanup can
//! check a journal entry is exactly what a plant makes; and the push (the
//! blobs, then the manifest under each tag) and how far it got.
//!
//! `tag-name`, `manifest-annotation` and `blob-content` are planted in one
//! repository every probe shares ([`shared_repository`]): no registry API
//! removes a repository, so one per probe would pile up in the catalog
//! (and, on ghcr.io, in the owner's packages). What tells the plants apart
//! is their tags ([`agreed_tag`], a tagged name of the probe, the carrier
//! and the surface) and their manifests (the probe in an annotation).
//! `repository-name` (opt-in) stays in a repository of its own, since its
//! nonce is the name, and puts a second one beside it, the catalog's
//! witness ([`catalog_witness`]). Before 0.12 every carrier had a
//! repository of its own ([`legacy_plan`]): cleanup still owns those.

use super::{Entry, Oci, OciRegistry};
use crate::escape;
use crate::nonce::Nonce;
use crate::surface::{Journal, RunCtx, tagged_name};
use serde_json::json;
use sha2::{Digest, Sha256};

/// The OCI image manifest media type every plant is pushed as.
pub(super) const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// The OCI empty descriptor's blob (`{}`): the config of every plant and
/// the layer of those without one of their own. Shared with every OCI
/// artifact in a repository, so it is never deleted.
pub(super) const EMPTY: &[u8] = b"{}";
const EMPTY_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// The tag a plant in a repository of its own is under (`repository-name`,
/// its catalog witness, and every carrier before 0.12).
pub(super) const PLANT_TAG: &str = "plant";

/// The name, below the namespace, of the repository every probe's
/// `tag-name`, `manifest-annotation` and `blob-content` share. No tagged
/// name has this form (one always has a carrier and a tag after the probe
/// id), so it is never taken for a probe's.
pub(super) const SHARED: &str = "runwarden-plants";

/// The witness tag `tag-name` pushes after the nonce's: named for this
/// plant's nonce (which run B knows), so a tag an earlier run left where
/// cleanup could not delete never shows a lagging listing as current.
pub(super) fn witness_tag(nonce: &Nonce) -> String {
    let d = digest_of(format!("runwarden witness {}", nonce.hex()).as_bytes());
    let h = d.strip_prefix("sha256:").unwrap_or(&d);
    format!("runwarden-witness-{}", &h[..16])
}

/// The annotation that makes each manifest unique content.
pub(super) const PLANT_KEY: &str = "dev.runwarden.plant";

/// `sha256:<hex>` of `data`.
pub(super) fn digest_of(data: &[u8]) -> String {
    format!("sha256:{}", crate::nonce::to_hex(&Sha256::digest(data)))
}

/// One carrier's plant.
pub(super) struct Plan {
    pub repository: String,
    /// Ours, first the one the carrier reads.
    pub tags: Vec<String>,
    pub manifest: Vec<u8>,
    pub digest: String,
    /// The layer blob unique to this plant (`blob-content`'s).
    pub layer: Option<Vec<u8>>,
}

/// The repository the carriers B names share: `<namespace>/runwarden-plants`.
pub(super) fn shared_repository(ns: &str) -> String {
    format!("{ns}/{SHARED}")
}

/// The repository a carrier had to itself before 0.12:
/// `<namespace>/<tagged name>` (cleanup still owns and finds it).
pub(super) fn legacy_repository(ctx: &RunCtx<'_>, ns: &str, carrier: Oci) -> String {
    format!("{ns}/{}", tagged_name(ctx, carrier.name(), None, ""))
}

/// The tag B names a `manifest-annotation` or `blob-content` plant by in
/// the shared repository: a tagged name of the probe and the carrier (and
/// the surface: two surfaces on one registry never share it).
pub(super) fn agreed_tag(ctx: &RunCtx<'_>, carrier: Oci) -> String {
    tagged_name(ctx, carrier.name(), None, "")
}

/// The catalog's witness of a `repository-name` plant: a repository run A
/// makes right after the nonce's, named for the nonce (which run B knows)
/// but without it. A catalog that lists it is current as of the plant; the
/// shared repository could not show that (an older probe made it).
pub(super) fn catalog_witness(ns: &str, nonce: &Nonce) -> String {
    let d = digest_of(format!("runwarden catalog witness {}", nonce.hex()).as_bytes());
    let h = d.strip_prefix("sha256:").unwrap_or(&d);
    format!("{ns}/runwarden-witness-{}", &h[..16])
}

/// What `blob-content`'s layer holds.
fn layer_of(probe_id: &str, nonce: &Nonce) -> Vec<u8> {
    format!("runwarden plant\nprobe {probe_id}\nnonce {}\n", nonce.hex()).into_bytes()
}

/// The nonce a `blob-content` layer holds, read back (for cleanup by
/// probe id).
pub(super) fn nonce_in_layer(data: &[u8]) -> Option<Nonce> {
    let text = std::str::from_utf8(data).ok()?;
    let hex = text.lines().find_map(|l| l.strip_prefix("nonce "))?;
    Nonce::from_hex(hex)
}

/// What `dev.runwarden.plant` says: the nonce itself for
/// `manifest-annotation` (it is the message), else its hash (unique, but
/// no second route to a nonce another carrier carries).
fn plant_value(carrier: Oci, nonce: &Nonce) -> String {
    match carrier {
        Oci::ManifestAnnotation => nonce.hex(),
        _ => digest_of(format!("runwarden plant {}", nonce.hex()).as_bytes()),
    }
}

/// A carrier's plant as this version makes it.
pub(super) fn plan(ctx: &RunCtx<'_>, ns: &str, carrier: Oci, nonce: &Nonce) -> Plan {
    let repository = match carrier {
        Oci::RepositoryName => {
            format!("{ns}/{}", tagged_name(ctx, carrier.name(), Some(nonce), ""))
        }
        _ => shared_repository(ns),
    };
    let tags = match carrier {
        Oci::TagName => vec![
            tagged_name(ctx, carrier.name(), Some(nonce), ""),
            witness_tag(nonce),
        ],
        Oci::RepositoryName => vec![PLANT_TAG.to_string()],
        _ => vec![agreed_tag(ctx, carrier)],
    };
    plan_in(ctx, repository, tags, carrier, nonce)
}

/// A carrier's plant as versions before 0.12 made it: in a repository of
/// its own, under [`PLANT_TAG`] (the manifest is the same).
pub(super) fn legacy_plan(ctx: &RunCtx<'_>, ns: &str, carrier: Oci, nonce: &Nonce) -> Plan {
    let mut p = plan(ctx, ns, carrier, nonce);
    if carrier != Oci::RepositoryName {
        p.repository = legacy_repository(ctx, ns, carrier);
    }
    if carrier != Oci::TagName {
        p.tags = vec![PLANT_TAG.to_string()];
    }
    p
}

/// The catalog witness of a `repository-name` plant ([`catalog_witness`]):
/// the plant's own manifest, in the witness repository.
pub(super) fn witness_plan(ctx: &RunCtx<'_>, ns: &str, nonce: &Nonce) -> Plan {
    let mut p = plan(ctx, ns, Oci::RepositoryName, nonce);
    p.repository = catalog_witness(ns, nonce);
    p
}

/// The manifest (and layer) of a plant in `repository` under `tags`.
fn plan_in(
    ctx: &RunCtx<'_>,
    repository: String,
    tags: Vec<String>,
    carrier: Oci,
    nonce: &Nonce,
) -> Plan {
    let empty = json!({ "mediaType": EMPTY_TYPE, "digest": digest_of(EMPTY), "size": EMPTY.len() });
    let layer = (carrier == Oci::BlobContent).then(|| layer_of(ctx.probe_id, nonce));
    let layers = match &layer {
        Some(l) => json!([{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": digest_of(l),
            "size": l.len(),
        }]),
        None => json!([empty]),
    };
    // serde_json keeps keys sorted: the same plan always makes the same
    // bytes, so cleanup can check a digest without the plant's receipt.
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": empty,
        "layers": layers,
        "annotations": {
            "org.opencontainers.image.description": "runwarden plant",
            "dev.runwarden.probe": ctx.probe_id,
            "dev.runwarden.carrier": carrier.name(),
            PLANT_KEY: plant_value(carrier, nonce),
        },
    })
    .to_string()
    .into_bytes();
    Plan {
        repository,
        tags,
        digest: digest_of(&manifest),
        manifest,
        layer,
    }
}

impl Plan {
    /// The journal entry of this plan: everything cleanup needs, and what
    /// the ownership rule (`owns`) recomputes to check it.
    pub(super) fn entry(&self, carrier: Oci, nonce: &Nonce) -> Entry {
        Entry {
            carrier: carrier.name().to_string(),
            repository: self.repository.clone(),
            tags: self.tags.clone(),
            digest: self.digest.clone(),
            nonce: nonce.hex(),
            blobs: self.layer.iter().map(|l| digest_of(l)).collect(),
        }
    }
}

impl OciRegistry {
    /// `repository-name`'s catalog witness ([`catalog_witness`]), pushed
    /// after the nonce's repository and journalled before: what the detail
    /// adds (nothing, or why it is missing; run B's miss then has no
    /// witness and is ERROR).
    pub(super) fn push_witness(
        &self,
        ctx: &RunCtx<'_>,
        nonce: &Nonce,
        journal: &mut Journal<'_, Entry>,
    ) -> String {
        let w = witness_plan(ctx, &self.settings.repository, nonce);
        let entry = w.entry(Oci::RepositoryName, nonce);
        journal.record(&entry);
        let (reason, nothing) = match self.push(Oci::RepositoryName, &w) {
            Ok(()) => return String::new(),
            Err(Pushed::Refused {
                reason, nothing, ..
            })
            | Err(Pushed::Failed { reason, nothing }) => (reason, nothing),
        };
        if nothing {
            journal.retract(&entry);
        }
        format!(
            "; its catalog witness {} was not pushed ({reason}), so a miss in the catalog will not count",
            escape::bytes(w.repository.as_bytes())
        )
    }

    /// The blobs, then the manifest under each tag (`tag-name`'s nonce tag
    /// first, then its witness: a listing that shows the witness was
    /// taken after the nonce's).
    pub(super) fn push(&self, carrier: Oci, p: &Plan) -> Result<(), Pushed> {
        let mut blobs: Vec<&[u8]> = vec![EMPTY];
        blobs.extend(p.layer.as_deref());
        // Until one write is taken, a 4xx says nothing was created.
        let mut nothing = true;
        let mut nonce = Placed::No;
        let in_name = carrier == Oci::RepositoryName;
        for b in blobs {
            let mut started = false;
            let put = self.put_blob(&p.repository, b, &mut started);
            nothing &= !started;
            let wrote = put.as_ref().is_ok_and(|w| *w);
            if wrote {
                nothing = false;
                // A repository holding only a blob is in the catalog; the
                // layer of blob-content holds the nonce itself.
                if in_name {
                    nonce = Placed::Listed;
                } else if p.layer.as_deref() == Some(b) {
                    nonce = nonce.max(Placed::Written);
                }
            }
            put.map_err(|e| e.with(nothing, nonce))?;
        }
        for tag in &p.tags {
            self.put_manifest(&p.repository, tag, &p.manifest, &p.digest)
                .map_err(|e| e.with(nothing, nonce))?;
            nothing = false;
            nonce = nonce.max(Placed::Written);
        }
        Ok(())
    }
}

/// How far a push placed the nonce before it stopped.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Placed {
    /// No write that carries or reveals it was taken.
    No,
    /// One was (a manifest, the nonce tag, the nonce's layer), but not
    /// all the plant needs.
    Written,
    /// `repository-name`'s repository exists (holds a blob): listed.
    Listed,
}

/// Why a push did not complete; `nothing`: a 4xx answered before any
/// write was taken, so nothing was created and the journal entry is taken
/// back.
pub(super) enum Pushed {
    Refused {
        reason: String,
        nothing: bool,
        nonce: Placed,
    },
    Failed {
        reason: String,
        nothing: bool,
    },
}

/// A write the registry did not take: refused by its access control, or
/// failed (`client`: it answered 4xx, so it did not act).
pub(super) enum WriteError {
    Refused(String),
    Failed { reason: String, client: bool },
}

impl WriteError {
    fn with(self, nothing_yet: bool, nonce: Placed) -> Pushed {
        match self {
            WriteError::Refused(reason) => Pushed::Refused {
                reason,
                nothing: nothing_yet,
                nonce,
            },
            WriteError::Failed { reason, client } => Pushed::Failed {
                reason,
                nothing: nothing_yet && client,
            },
        }
    }
}
