//! Run B's routes: the shared repository's tags list (`tag-name`, with
//! GitHub's package versions where they are on), the manifest under the
//! agreed tag and its layer blob read by name (`manifest-annotation`,
//! `blob-content`), and the catalog (`repository-name`, current when it
//! lists the plant's catalog witness); and how long a listing is waited
//! on.

use super::plant::{EMPTY, PLANT_TAG, digest_of, plan, witness_plan, witness_tag};
use super::{Oci, OciRegistry};
use crate::escape;
use crate::nonce::Nonce;
use crate::surface::carrier::CarrierSet;
use crate::surface::listing::{self, until_current};
use crate::surface::routes;
use crate::surface::{Notice, NoticeKind, RecoverOutcome, RunCtx};
use serde_json::Value;
use std::time::Duration;

/// Layers of one manifest pulled at most (a plant has one).
const MAX_LAYERS: usize = 16;

/// Run B's routes ([`crate::surface::routes`]): the catalog for
/// repository-name, the shared repository's tags list for tag-name, the
/// manifest under the agreed tag and its layer blobs read by name for the
/// rest.
pub(super) const ROUTES: &[routes::Route<Oci>] = &[
    routes::Route {
        name: "catalog",
        kind: routes::Kind::Search,
        carriers: &[Oci::RepositoryName],
    },
    routes::Route {
        name: "tags",
        kind: routes::Kind::Listing,
        carriers: &[Oci::TagName],
    },
    routes::Route {
        name: "manifest",
        kind: routes::Kind::ByName,
        carriers: &[Oci::ManifestAnnotation, Oci::BlobContent],
    },
];

/// A carrier's route, and what shows a miss there current: the catalog
/// lists every catalog witness B read by name (the repository run A made
/// after the nonce's), the tags list (read whole, every probe's tags in
/// it) shows the witness tag run A pushed beside the nonce's, and the
/// manifest read back is the plant's own by its digest (content
/// addressing: nothing stale has that digest).
pub(super) fn route_of(c: Oci) -> (&'static str, routes::Proof) {
    match c {
        Oci::RepositoryName => ("catalog", routes::Proof::Listed),
        Oci::TagName => ("tags", routes::Proof::Listed),
        Oci::ManifestAnnotation | Oci::BlobContent => (
            "manifest",
            routes::Proof::Protocol("the plant's own manifest, read back by its digest"),
        ),
    }
}

impl OciRegistry {
    pub(super) fn wait(&self) -> Duration {
        Duration::from_millis(self.settings.consistency_wait_ms)
    }

    /// `tag-name`'s routes: the registry's tags list, then, where it is
    /// on, GitHub's package versions ([`super::packages`]). Found by
    /// either is FAIL; a route that broke or lags is ERROR; the versions
    /// route unread (no token, GitHub's refusal) leaves the registry's
    /// verdict, saying so.
    pub(super) fn tag_routes(&self, repo: &str, nonce: &Nonce) -> RecoverOutcome {
        use super::packages::Versions;
        let reg = self.read_tags(repo, nonce);
        let Some(p) = &self.settings.packages else {
            return reg;
        };
        if matches!(
            reg,
            RecoverOutcome::Found { .. } | RecoverOutcome::Error { .. }
        ) {
            return reg;
        }
        match (self.read_versions(p, repo, nonce), reg) {
            (Versions::Found(detail), _) => RecoverOutcome::Found { detail },
            (Versions::Fails(o), _) => o,
            (Versions::Clean(d), RecoverOutcome::NotFound { detail }) => RecoverOutcome::NotFound {
                detail: format!("{detail}; {d}"),
            },
            // The registry refused run B; GitHub's listing did not.
            (Versions::Clean(d), RecoverOutcome::Denied { reason }) => RecoverOutcome::NotFound {
                detail: format!("{reason}; {d}"),
            },
            (Versions::Unread(why), RecoverOutcome::NotFound { detail }) => {
                RecoverOutcome::NotFound {
                    detail: format!("{detail}; GitHub's package versions were not read: {why}"),
                }
            }
            (Versions::Unread(why), RecoverOutcome::Denied { reason }) => RecoverOutcome::Denied {
                reason: format!("{reason}; GitHub's package versions were not read: {why}"),
            },
            (_, other) => other,
        }
    }

    /// `tag-name`: the shared repository's tags, read whole (other
    /// probes' tags and foreign ones with them), until they show the
    /// witness tag run A pushed beside the nonce's.
    fn read_tags(&self, repo: &str, nonce: &Nonce) -> RecoverOutcome {
        let shown = escape::bytes(repo.as_bytes());
        let (hex, wt) = (nonce.hex(), witness_tag(nonce));
        let hex = hex.as_str();
        let url = self.at(&format!("/v2/{repo}/tags/list"));
        let listed = until_current(self.wait(), || {
            let mut hit = None;
            let mut witness = false;
            let n = self.list(&url, "tags", &format!("the tags of {shown}"), &mut |t| {
                witness |= t == wt;
                if hit.is_none() && t.contains(hex) {
                    hit = Some(escape::bytes(t.as_bytes()));
                }
            })?;
            // No such repository (404 NAME_UNKNOWN) is no look either:
            // run A made it, with the witness, so a registry that does
            // not know it yet lags (or is not the one A pushed to).
            Ok(((n, hit, witness), n.is_some() && witness))
        });
        let c = match listed {
            Ok(c) => c,
            Err(o) => return o,
        };
        let (n, hit, _) = &c.value;
        match (n, hit) {
            (_, Some(t)) => RecoverOutcome::Found {
                detail: format!("{shown} has the tag {t}"),
            },
            (None, None) => listing::not_current(
                &format!("{shown} (its tags list answers 404: no such repository) or its tag {wt}"),
                &c,
            ),
            (Some(n), None) if c.current => RecoverOutcome::NotFound {
                detail: format!("{shown} lists {n} tags; none carries it"),
            },
            (Some(_), None) => listing::not_current(&format!("the tag {wt} of {shown}"), &c),
        }
    }

    /// `manifest-annotation` and `blob-content`: the manifest under the
    /// agreed tag of the shared repository, its annotations, and for
    /// blob-content its layers pulled. Only the plant's own manifest (the
    /// digest B computes from the plan) counts: another under the tag (a
    /// tenant's re-tag, a replica behind) is read again within
    /// `consistency-wait`, then ERROR.
    pub(super) fn read_manifest(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Oci,
        nonce: &Nonce,
    ) -> RecoverOutcome {
        let p = plan(ctx, &self.settings.repository, carrier, nonce);
        let (repo, hex, tag) = (p.repository.as_str(), nonce.hex(), p.tags[0].as_str());
        let shown = escape::bytes(format!("{repo}:{tag}").as_bytes());
        let read = until_current(self.wait(), || {
            let body = self.manifest(repo, tag)?;
            // (A 404 is no look either: run A pushed it, so a registry
            // that does not have it lags, or is not the one A pushed to.)
            let current = body.as_ref().is_some_and(|b| digest_of(b) == p.digest);
            Ok((body, current))
        });
        let c = match read {
            Ok(c) => c,
            Err(o) => return o,
        };
        let body = match &c.value {
            None => {
                return listing::not_current(&format!("the manifest {shown} (it answers 404)"), &c);
            }
            Some(b) if !c.current => {
                return RecoverOutcome::Error {
                    reason: format!(
                        "the manifest under {shown} is {}, not this plant's {} ({} reads over {:.1} s): re-tagged or not yet current, so it proves nothing",
                        digest_of(b),
                        p.digest,
                        c.tries,
                        c.waited.as_secs_f64()
                    ),
                };
            }
            Some(b) => b.clone(),
        };
        let hex = hex.as_str();
        let Ok(doc) = serde_json::from_slice::<Value>(&body) else {
            return RecoverOutcome::Error {
                reason: format!("the manifest {shown} is not JSON"),
            };
        };
        if carrier == Oci::ManifestAnnotation {
            let Some(notes) = doc["annotations"].as_object() else {
                return RecoverOutcome::NotFound {
                    detail: format!("the manifest {shown} has no annotations"),
                };
            };
            return match notes
                .iter()
                .find(|(_, v)| v.as_str().is_some_and(|s| s.contains(hex)))
            {
                Some((k, _)) => RecoverOutcome::Found {
                    detail: format!(
                        "the annotation {} of {shown} holds it",
                        escape::bytes(k.as_bytes())
                    ),
                },
                None => RecoverOutcome::NotFound {
                    detail: format!("no annotation of {shown} holds it"),
                },
            };
        }
        let empty = digest_of(EMPTY);
        let layers: Vec<&str> = doc["layers"]
            .as_array()
            .map(|a| a.iter().filter_map(|l| l["digest"].as_str()).collect())
            .unwrap_or_default();
        let mut pulled = 0;
        for d in layers.iter().filter(|d| **d != empty).take(MAX_LAYERS) {
            // A digest is part of a URL path: only the form the spec gives.
            if !d
                .strip_prefix("sha256:")
                .is_some_and(|h| crate::surface::lower_hex(h, 64))
            {
                continue;
            }
            match self.blob_holds(repo, d, hex) {
                Err(o) => return o,
                Ok(true) => {
                    return RecoverOutcome::Found {
                        detail: format!("the layer {d} of {shown} holds it"),
                    };
                }
                Ok(false) => pulled += 1,
            }
        }
        if pulled == 0 {
            return RecoverOutcome::Error {
                reason: format!("no layer blob of {shown} was pulled: nothing was looked at"),
            };
        }
        RecoverOutcome::NotFound {
            detail: format!("{pulled} layer blobs of {shown} pulled; none holds it"),
        }
    }

    /// The catalog witnesses ([`super::plant::catalog_witness`]) of the
    /// `repository-name` plants of `nonces` that B reads by name: each
    /// holds the plant's manifest under [`PLANT_TAG`], read back by its
    /// digest. One not there (not yet, or never pushed) is no witness.
    pub(super) fn catalog_witnesses(&self, ctx: &RunCtx<'_>, nonces: &[Nonce]) -> Vec<String> {
        let ns = &self.settings.repository;
        nonces
            .iter()
            .map(|n| witness_plan(ctx, ns, n))
            .filter(|w| {
                self.manifest(&w.repository, PLANT_TAG)
                    .is_ok_and(|b| b.is_some_and(|b| digest_of(&b) == w.digest))
            })
            .map(|w| w.repository)
            .collect()
    }

    /// `repository-name`: the catalog, until it lists every catalog
    /// witness B read by name (and there must be one).
    pub(super) fn search_catalog(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[(usize, String)],
        readable: &[String],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let prefix = format!("{}/runwarden-{}-", self.settings.repository, ctx.probe_id);
        let url = self.catalog_url();
        let listed = until_current(self.wait(), || {
            let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
            let mut ours: Vec<String> = vec![];
            let mut seen = 0;
            let n = self.list(&url, "repositories", "the catalog", &mut |name| {
                if readable.iter().any(|r| r == name) {
                    seen += 1;
                }
                if name.starts_with(&prefix) {
                    ours.push(name.to_string());
                }
                for (j, (_, hex)) in wanted.iter().enumerate() {
                    if hits[j].is_none() && name.contains(hex.as_str()) {
                        hits[j] = Some(escape::bytes(name.as_bytes()));
                    }
                }
            })?;
            let unlisted = readable.len() - seen.min(readable.len());
            let current = !readable.is_empty() && unlisted == 0;
            Ok(((n.unwrap_or(0), hits, ours, unlisted), current))
        });
        let c = match listed {
            Ok(c) => c,
            Err(o) => return vec![o; wanted.len()],
        };
        let (n, hits, ours, unlisted) = &c.value;
        for name in ours {
            let rest = &name[self.settings.repository.len() + 1..];
            if Oci::tagged(ctx, rest, "").is_none() {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name.as_bytes()),
                    detail:
                        "a repository name in this probe's form that no plant with this key made"
                            .into(),
                    beacon: None,
                });
            }
        }
        let why =
            listing::search_witnessed(readable.len(), *unlisted, "repositories", "the catalog");
        hits.iter()
            .map(|hit| match (hit, &why) {
                (Some(name), _) => RecoverOutcome::Found {
                    detail: format!("the catalog lists {name}"),
                },
                (None, Some(reason)) => RecoverOutcome::Error {
                    reason: format!(
                        "{reason} ({} listings over {:.1} s)",
                        c.tries,
                        c.waited.as_secs_f64()
                    ),
                },
                (None, None) => RecoverOutcome::NotFound {
                    detail: format!("the catalog lists {n} repositories; none carries it"),
                },
            })
            .collect()
    }
}
