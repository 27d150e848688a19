//! Cleanup's steps: a plant's manifest deleted by digest once it is read
//! back byte for byte and no foreign tag shares its digest (a delete by
//! digest removes every tag on it), the check of a repository's foreign
//! tags (in the shared repository, every other probe's are foreign too);
//! and, to find a probe's plants without its receipt, the nonces held by
//! the catalog's names, the shared repository's tags and the manifests
//! under the agreed tags, in the shared repository and in the
//! repositories of its own each carrier had before 0.12.

use super::plant::{
    PLANT_KEY, PLANT_TAG, Plan, agreed_tag, digest_of, legacy_plan, legacy_repository,
    nonce_in_layer, plan, shared_repository, witness_plan,
};
use super::protocol::{AUTH, outcome_reason};
use super::{Entry, Oci, OciRegistry};
use crate::escape;
use crate::fault::Fault;
use crate::nonce::Nonce;
use crate::surface::carrier::CarrierSet;
use crate::surface::listing::until_current;
use crate::surface::{Job, RecoverOutcome, RunCtx};
use ::http::Method;
use serde_json::Value;

/// Why a plant's manifest stays ([`OciRegistry::delete_manifest`]).
pub(super) struct Stay {
    pub reason: String,
    /// Every check passed (the plant's own, no foreign tag on it) and the
    /// registry then refused or does not delete: GitHub's package versions
    /// may still remove it.
    pub checked: bool,
    /// The foreign tags whose manifests reference the plant's blobs.
    pub users: Vec<String>,
}

impl Stay {
    fn unchecked(reason: String) -> Stay {
        Stay {
            reason,
            checked: false,
            users: vec![],
        }
    }
}

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
    /// `ours` is on it: `Ok(true)` deleted, `Ok(false)` not there, with
    /// the foreign tags that reference `blobs`; `Err` why it stays.
    pub(super) fn delete_manifest(
        &self,
        repo: &str,
        digest: &str,
        ours: &[String],
        blobs: &[String],
    ) -> Result<(bool, Vec<String>), Stay> {
        let shown = escape::bytes(format!("{repo}@{digest}").as_bytes());
        match self.manifest(repo, digest) {
            Err(o) => return Err(Stay::unchecked(outcome_reason(o))),
            // Gone: no tag of ours can show the tags listing current, so
            // no manifest of someone else's is ruled out of using the
            // layer blob, which then stays (a blob left over loses
            // nothing; one deleted under a manifest breaks it).
            Ok(None) => return Ok((false, vec![])),
            Ok(Some(body)) if digest_of(&body) != digest => {
                return Err(Stay::unchecked(format!(
                    "what the registry serves as {shown} is not the manifest planted; left alone"
                )));
            }
            Ok(Some(_)) => {}
        }
        let check = self
            .tags_check(repo, digest, ours, blobs)
            .map_err(Stay::unchecked)?;
        if !check.foreign.is_empty() {
            let foreign = &check.foreign;
            return Err(Stay::unchecked(format!(
                "{shown}: the tag{} {} of someone else share{} its digest, and a delete by digest would remove {}; left in place",
                if foreign.len() == 1 { "" } else { "s" },
                foreign.join(", "),
                if foreign.len() == 1 { "s" } else { "" },
                if foreign.len() == 1 { "it" } else { "them" },
            )));
        }
        // Listed once more just before the DELETE: a tag made while the
        // others were checked is not deleted unchecked (the race left
        // after this one: LIMITATIONS).
        let again = self.others(repo, ours).map_err(Stay::unchecked)?;
        if let Some(t) = again.names.iter().find(|t| !check.checked.contains(t)) {
            return Err(Stay::unchecked(format!(
                "{shown}: the tag {} appeared while the others were checked; left in place",
                escape::bytes(t.as_bytes())
            )));
        }
        let url = self.at(&format!("/v2/{repo}/manifests/{digest}"));
        let r = self
            .call(Method::DELETE, &url, "*/*", None)
            .map_err(|f| Stay::unchecked(f.into()))?;
        let refused = |reason: String| Stay {
            reason,
            checked: true,
            users: check.users.clone(),
        };
        let tags = ours
            .iter()
            .map(|t| escape::bytes(t.as_bytes()))
            .collect::<Vec<_>>()
            .join(", ");
        match r.status {
            200..=299 => Ok((true, check.users)),
            404 => Ok((false, check.users)),
            // (Refused or credentials not accepted: either way it stays.)
            s if AUTH.contains(&s) => Err(refused(format!(
                "the registry refused to delete {shown} (HTTP {}); it stays, with its tags {tags}, until someone with delete rights removes it",
                r.status
            ))),
            // Distribution without `delete: enabled` (405 UNSUPPORTED), or
            // a registry that never deletes (ghcr.io: its package
            // versions then may).
            s => Err(refused(format!(
                "the registry does not delete {shown} (HTTP {s}); left: the manifest and its tags {tags}"
            ))),
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

    /// Cleanup by probe id: the plants of `jobs` this probe left, as
    /// journal entries, each only when its manifest is there byte for
    /// byte. Where: the catalog's names (`repository-name`, and its
    /// witness), the shared repository's tags and agreed tags, and the
    /// repository of its own each carrier had before 0.12.
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Oci>],
    ) -> Result<Vec<Entry>, Fault> {
        let fault = |o: RecoverOutcome| match o {
            RecoverOutcome::Denied { reason } => Fault::Unsupported(reason),
            o => Fault::Broken(outcome_reason(o)),
        };
        let ns = self.settings.repository.as_str();
        let mut found = vec![];
        for job in jobs {
            let carrier = job.carrier;
            let mut plans: Vec<(Plan, Nonce)> = vec![];
            if carrier == Oci::RepositoryName {
                for n in self.catalog_nonces(ctx).map_err(fault)? {
                    plans.push((plan(ctx, ns, carrier, &n), n));
                    plans.push((witness_plan(ctx, ns, &n), n));
                }
            }
            for legacy in [false, true] {
                let (repo, tag) = match legacy {
                    false => (shared_repository(ns), agreed_tag(ctx, carrier)),
                    true => (legacy_repository(ctx, ns, carrier), PLANT_TAG.to_string()),
                };
                let nonces = match carrier {
                    Oci::RepositoryName => Ok(vec![]),
                    Oci::TagName => self.tag_nonces(ctx, &repo),
                    _ => self.nonce_under_tag(carrier, &repo, &tag),
                };
                // A registry that refuses a read of a repository that is
                // not there (ghcr.io's 403 for an unknown package) has no
                // plant of before 0.12 to give.
                let nonces = match nonces {
                    Err(RecoverOutcome::Denied { .. }) if legacy => vec![],
                    n => n.map_err(fault)?,
                };
                plans.extend(nonces.into_iter().map(|n| match legacy {
                    false => (plan(ctx, ns, carrier, &n), n),
                    true => (legacy_plan(ctx, ns, carrier, &n), n),
                }));
            }
            for (p, n) in &plans {
                // Only what is there and is byte for byte a plant.
                if self
                    .manifest(&p.repository, &p.digest)
                    .map_err(fault)?
                    .is_some()
                {
                    let e = p.entry(carrier, n);
                    if !found.contains(&e) {
                        found.push(e);
                    }
                }
            }
        }
        Ok(found)
    }

    /// The nonces of this probe's `tag-name` tags in `repo`: only those,
    /// and at most [`MAX_TAGS`] of them, so memory stays bounded.
    fn tag_nonces(&self, ctx: &RunCtx<'_>, repo: &str) -> Result<Vec<Nonce>, RecoverOutcome> {
        let mut nonces = vec![];
        let url = self.at(&format!("/v2/{repo}/tags/list"));
        let what = format!("the tags of {}", escape::bytes(repo.as_bytes()));
        self.list(&url, "tags", &what, &mut |t| {
            if nonces.len() < MAX_TAGS
                && let Some(n) = nonce_of_name(ctx, t, Oci::TagName)
            {
                nonces.push(n);
            }
        })?;
        Ok(nonces)
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

    /// The nonce the manifest under `tag` of `repo` was planted with: its
    /// annotation (`manifest-annotation`) or its layer (`blob-content`).
    fn nonce_under_tag(
        &self,
        carrier: Oci,
        repo: &str,
        tag: &str,
    ) -> Result<Vec<Nonce>, RecoverOutcome> {
        let Some(body) = self.manifest(repo, tag)? else {
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
