//! Cleanup's steps: a plant's manifest deleted by digest once it is read
//! back byte for byte and no foreign tag shares its digest (a delete by
//! digest removes every tag on it), the check of a repository's foreign
//! tags; and, to find a probe's plants without its receipt, the nonces
//! held by the catalog's names, the agreed repositories' tags and the
//! manifest under the agreed tag.

use super::plant::{PLANT_KEY, PLANT_TAG, digest_of, nonce_in_layer};
use super::protocol::{AUTH, outcome_reason};
use super::{Oci, OciRegistry};
use crate::escape;
use crate::nonce::Nonce;
use crate::surface::carrier::CarrierSet;
use crate::surface::listing::until_current;
use crate::surface::{RecoverOutcome, RunCtx};
use ::http::Method;
use serde_json::Value;

/// Foreign tags of one repository whose digests are checked at most; a
/// repository with more is left alone (no full check is possible).
pub(super) const MAX_TAGS: usize = 1_000;

/// A repository's tags that are not the plant's ([`OciRegistry::others`]).
struct Others {
    names: Vec<String>,
    /// The plant's own tags the listing shows.
    listed_ours: Vec<String>,
}

/// What the foreign tags of a repository hold ([`OciRegistry::tags_check`]).
#[derive(Default)]
struct TagCheck {
    /// Escaped: on the plant's digest.
    foreign: Vec<String>,
    /// Escaped: referencing one of the plant's blobs.
    users: Vec<String>,
    /// Every tag read, as listed.
    checked: Vec<String>,
}

impl OciRegistry {
    /// Deletes `repo@digest` if it is still the plant and no tag but
    /// `ours` is on it: `Ok(true)` deleted, `Ok(false)` not there, `Err`
    /// why it stays.
    pub(super) fn delete_manifest(
        &self,
        repo: &str,
        digest: &str,
        ours: &[String],
        blobs: &[String],
    ) -> Result<(bool, Vec<String>), String> {
        let shown = escape::bytes(format!("{repo}@{digest}").as_bytes());
        match self.manifest(repo, digest) {
            Err(o) => return Err(outcome_reason(o)),
            // Gone: no tag of ours can show the tags listing current, so
            // no manifest of someone else's is ruled out of using the
            // layer blob, which then stays (a blob left over loses
            // nothing; one deleted under a manifest breaks it).
            Ok(None) => return Ok((false, vec![])),
            Ok(Some(body)) if digest_of(&body) != digest => {
                return Err(format!(
                    "what the registry serves as {shown} is not the manifest planted; left alone"
                ));
            }
            Ok(Some(_)) => {}
        }
        let check = self.tags_check(repo, digest, ours, blobs)?;
        if !check.foreign.is_empty() {
            let foreign = &check.foreign;
            return Err(format!(
                "{shown}: the tag{} {} of someone else share{} its digest, and a delete by digest would remove {}; left in place",
                if foreign.len() == 1 { "" } else { "s" },
                foreign.join(", "),
                if foreign.len() == 1 { "s" } else { "" },
                if foreign.len() == 1 { "it" } else { "them" },
            ));
        }
        // Listed once more just before the DELETE: a tag made while the
        // others were checked is not deleted unchecked (the race left
        // after this one: LIMITATIONS).
        let again = self.others(repo, ours)?;
        if let Some(t) = again.names.iter().find(|t| !check.checked.contains(t)) {
            return Err(format!(
                "{shown}: the tag {} appeared while the others were checked; left in place",
                escape::bytes(t.as_bytes())
            ));
        }
        let url = self.at(&format!("/v2/{repo}/manifests/{digest}"));
        let r = self
            .call(Method::DELETE, &url, "*/*", None)
            .map_err(String::from)?;
        let tags = ours
            .iter()
            .map(|t| escape::bytes(t.as_bytes()))
            .collect::<Vec<_>>()
            .join(", ");
        match r.status {
            200..=299 => Ok((true, check.users)),
            404 => Ok((false, check.users)),
            // (Refused or credentials not accepted: either way it stays.)
            s if AUTH.contains(&s) => Err(format!(
                "the registry refused to delete {shown} (HTTP {}); it stays, with its tags {tags}, until someone with delete rights removes it",
                r.status
            )),
            // Distribution without `delete: enabled` (405 UNSUPPORTED), or
            // a registry that never deletes.
            s => Err(format!(
                "the registry does not delete {shown} (HTTP {s}); left: the manifest and its tags {tags}"
            )),
        }
    }

    /// The tags of `repo` that are not `ours`, at most [`MAX_TAGS`]
    /// (more: an error).
    fn others(&self, repo: &str, ours: &[String]) -> Result<Others, String> {
        let mut names = vec![];
        let mut count = 0;
        let mut listed_ours = vec![];
        let url = self.at(&format!("/v2/{repo}/tags/list"));
        let what = format!("the tags of {}", escape::bytes(repo.as_bytes()));
        self.list(&url, "tags", &what, &mut |t| {
            if ours.iter().any(|o| o == t) {
                listed_ours.push(t.to_string());
            } else {
                count += 1;
                if names.len() < MAX_TAGS {
                    names.push(t.to_string());
                }
            }
        })
        .map_err(outcome_reason)?;
        if count > MAX_TAGS {
            return Err(format!(
                "{what}: more than {MAX_TAGS} tags not ours; whether one shares the plant's digest or its blob is not checked, so it is left in place"
            ));
        }
        Ok(Others { names, listed_ours })
    }

    /// The tags of `repo` that are not `ours`, each read: those whose
    /// manifest is `digest` (`foreign`) and those whose manifest
    /// references one of `blobs` (`users`), escaped. The listing counts
    /// only once it shows every tag of `ours` that resolves to `digest`
    /// (its witnesses), within `consistency-wait`; and a listed tag whose
    /// manifest does not answer leaves the plant (it may be on it).
    fn tags_check(
        &self,
        repo: &str,
        digest: &str,
        ours: &[String],
        blobs: &[String],
    ) -> Result<TagCheck, String> {
        let shown = escape::bytes(format!("{repo}@{digest}").as_bytes());
        let mut witnesses = vec![];
        for t in ours {
            if self.digest_at(repo, t).map_err(String::from)?.as_deref() == Some(digest) {
                witnesses.push(t.clone());
            }
        }
        if !ours.is_empty() && witnesses.is_empty() {
            return Err(format!(
                "{shown}: no tag of the plant's names it any more, so no tags listing can be shown current and a foreign tag on it may go unseen; left in place"
            ));
        }
        let listed = until_current(self.wait(), || {
            let o = self.others(repo, ours)?;
            let current = witnesses.iter().all(|w| o.listed_ours.contains(w));
            Ok::<_, String>((o, current))
        })?;
        if !listed.current {
            return Err(format!(
                "{shown}: the tags list does not show the plant's own tags on it ({} listings over {:.1} s), so its silence on foreign ones proves nothing; left in place",
                listed.tries,
                listed.waited.as_secs_f64()
            ));
        }
        let mut c = TagCheck::default();
        for t in listed.value.names {
            let name = escape::bytes(t.as_bytes());
            // A tag is part of a URL path: one the spec's grammar allows.
            let plain = !t.is_empty()
                && t.len() <= 128
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            if !plain {
                c.foreign.push(name);
                continue;
            }
            let body = match self.manifest(repo, &t) {
                Ok(Some(b)) => b,
                Ok(None) => {
                    return Err(format!(
                        "{shown}: the tag {name} is listed but its manifest answers 404, so whether it shares the plant's digest is unknown; left in place"
                    ));
                }
                Err(o) => {
                    return Err(format!(
                        "{shown}: the tag {name} could not be read ({}); left in place",
                        outcome_reason(o)
                    ));
                }
            };
            if digest_of(&body) == digest {
                c.foreign.push(name.clone());
            }
            let text = String::from_utf8_lossy(&body);
            if blobs.iter().any(|b| text.contains(b.as_str())) {
                c.users.push(name);
            }
            c.checked.push(t);
        }
        Ok(c)
    }

    /// The nonces of the `repository-name` plants of this probe the
    /// catalog lists.
    pub(super) fn catalog_nonces(&self, ctx: &RunCtx<'_>) -> Result<Vec<Nonce>, RecoverOutcome> {
        let mut out = vec![];
        let prefix = format!("{}/", self.settings.repository);
        self.list(
            &self.catalog_url(),
            "repositories",
            "the catalog",
            &mut |name| {
                if let Some(n) = name
                    .strip_prefix(&prefix)
                    .and_then(|rest| nonce_of_name(ctx, rest, Oci::RepositoryName))
                {
                    out.push(n);
                }
            },
        )?;
        Ok(out)
    }

    /// The nonce the manifest under the agreed tag was planted with: its
    /// annotation (`manifest-annotation`) or its layer (`blob-content`).
    pub(super) fn nonce_under_plant_tag(
        &self,
        carrier: Oci,
        repo: &str,
    ) -> Result<Vec<Nonce>, RecoverOutcome> {
        let Some(body) = self.manifest(repo, PLANT_TAG)? else {
            return Ok(vec![]);
        };
        let doc: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if carrier == Oci::ManifestAnnotation {
            let hex = doc["annotations"][PLANT_KEY].as_str();
            return Ok(hex.and_then(Nonce::from_hex).into_iter().collect());
        }
        let Some(layer) = doc["layers"][0]["digest"].as_str() else {
            return Ok(vec![]);
        };
        if !layer
            .strip_prefix("sha256:")
            .is_some_and(|h| crate::surface::lower_hex(h, 64))
        {
            return Ok(vec![]);
        }
        let url = self.at(&format!("/v2/{repo}/blobs/{layer}"));
        let r = self
            .call(Method::GET, &url, "*/*", None)
            .map_err(|f| RecoverOutcome::Error { reason: f.into() })?;
        // A plant's layer is a few bytes; anything else is not one.
        if r.status != 200 || r.body.len() > 4096 {
            return Ok(vec![]);
        }
        Ok(nonce_in_layer(&r.body).into_iter().collect())
    }
}

/// The nonce in a [`crate::surface::tagged_name`] of `carrier` by this
/// probe, when the name is one (its tag verifies).
pub(super) fn nonce_of_name(ctx: &RunCtx<'_>, name: &str, carrier: Oci) -> Option<Nonce> {
    let c = Oci::owned(ctx, name, "", &|c| c == carrier).ok()?;
    if c != carrier {
        return None;
    }
    let rest = name.strip_prefix(&format!("runwarden-{}-{}-", ctx.probe_id, carrier.name()))?;
    let (hex, _) = rest.split_once('-')?;
    Nonce::from_hex(hex)
}
