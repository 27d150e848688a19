//! Cleanup's account: each plant removed as far as the registry allows
//! (its manifest by digest, then its unique layer blob; where GitHub's
//! package versions are on and the registry does not delete, the version
//! that is the plant's), and then every repository and blob that stays,
//! listed by name and why.
//!
//! What always stays: the repository (no registry API removes one; on
//! ghcr.io it is a package in the owner's list) and the empty config blob
//! `{}` in it (every OCI artifact there shares it, so it is never
//! deleted). Each repository a cleanup touches is listed once, in the
//! account of the last entry cleaned in it: a plant removed whole there
//! becomes Kept (nothing can remove what stays, and the plant itself is
//! gone), one left keeps its reason with the repository added.

use super::packages::VersionsGone;
use super::plant::{EMPTY, PLANT_TAG, SHARED, digest_of};
use super::protocol::error_code;
use super::{Entry, Oci, OciRegistry};
use crate::escape;
use crate::surface::CleanupOutcome;
use ::http::Method;

/// What a plant's cleanup did before the account of its repository.
enum Did {
    /// The manifest deleted now (`true`) or already gone (`false`), and
    /// its layer blob with it.
    Done(bool),
    /// Something stays, and why.
    Left(String),
}

impl OciRegistry {
    /// Every entry cleaned ([`OciRegistry::clean_entry`]), then each
    /// repository's account added once.
    pub(super) fn clean_all(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        let did: Vec<Did> = entries.iter().map(|e| self.clean_entry(e)).collect();
        let mut out: Vec<Option<CleanupOutcome>> = vec![None; entries.len()];
        for (i, e) in entries.iter().enumerate() {
            let last = !entries[i + 1..]
                .iter()
                .any(|o| o.repository == e.repository);
            out[i] = Some(match (&did[i], last) {
                (Did::Done(true), false) => CleanupOutcome::Removed,
                (Did::Done(false), false) => CleanupOutcome::Gone,
                (Did::Left(why), false) => CleanupOutcome::Left {
                    reason: why.clone(),
                },
                (Did::Done(removed), true) => CleanupOutcome::Kept {
                    reason: format!(
                        "the plant's manifest {}{}; {}",
                        if *removed { "is deleted" } else { "was gone" },
                        if e.blobs.is_empty() {
                            ""
                        } else {
                            " with its layer blob"
                        },
                        self.what_stays(e)
                    ),
                },
                (Did::Left(why), true) => CleanupOutcome::Left {
                    reason: format!("{why}; {}", self.what_stays(e)),
                },
            });
        }
        out.into_iter()
            .map(|o| o.unwrap_or(CleanupOutcome::Superseded))
            .collect()
    }

    /// What stays of the repository of `e` whatever cleanup does: the
    /// repository, and the empty config blob when it is still linked there
    /// (a HEAD says).
    fn what_stays(&self, e: &Entry) -> String {
        let repo = e.repository.as_str();
        let shown = escape::bytes(repo.as_bytes());
        let ns = self.settings.repository.as_str();
        let whose = if repo == format!("{ns}/{SHARED}") {
            "shared by every probe's tag-name, manifest-annotation and blob-content plants"
        } else if Oci::parse(&e.carrier) == Some(Oci::RepositoryName) && e.tags == [PLANT_TAG] {
            if repo.contains(&e.nonce) {
                "its name is the repository-name plant's nonce, accepted with `repository-name: true`"
            } else {
                "the repository-name plant's catalog witness, accepted with `repository-name: true`"
            }
        } else {
            "this probe's own, as versions before 0.12 planted"
        };
        let package = match &self.settings.packages {
            Some(_) => "; on GitHub, a package in the owner's list",
            None => "",
        };
        let empty = digest_of(EMPTY);
        let url = self.at(&format!("/v2/{repo}/blobs/{empty}"));
        let blob = match self.call(Method::HEAD, &url, "*/*", None) {
            Ok(r) if r.status == 200 => format!(
                ", and the empty config blob {empty} in it stays (every OCI artifact there shares it, so it is never deleted)"
            ),
            Ok(r) if r.status == 404 => String::new(),
            Ok(r) => format!(
                ", and the empty config blob {empty} in it may (its check answered HTTP {})",
                r.status
            ),
            Err(f) => format!(
                ", and the empty config blob {empty} in it may (its check failed: {})",
                f.into_reason()
            ),
        };
        format!(
            "left: the repository {shown} ({whose}{package}): no registry API removes a repository{blob}"
        )
    }

    /// One plant: its manifest deleted by digest once it is read back
    /// byte for byte and no foreign tag shares its digest (a delete by
    /// digest removes every tag on it); where the registry then refuses
    /// or does not delete and GitHub's package versions are on, the
    /// version that is the plant's deleted there; then the layer blob
    /// unique to the plant, never the shared empty blob.
    fn clean_entry(&self, entry: &Entry) -> Did {
        let (repo, digest) = (entry.repository.as_str(), entry.digest.as_str());
        let blobs = &entry.blobs;
        let with_blobs = |why: String| match blobs.is_empty() {
            true => Did::Left(why),
            false => Did::Left(format!(
                "{why}; its layer blob {} stays with it",
                blobs.join(", ")
            )),
        };
        // The layer is unique content, but someone may have pushed a
        // manifest of their own on it: a tagged one is seen, by the same
        // check of the tags (shown current by the plant's own) that clears
        // the manifest's delete (an untagged one cannot be: LIMITATIONS).
        let (removed, users) = match self.delete_manifest(repo, digest, &entry.tags, blobs) {
            Ok((removed, users)) => {
                // (A registry that deleted it: GitHub's version, if any is
                // still listed, goes too; one not read changes nothing.)
                if let VersionsGone::Left(why) = self.delete_versions(entry) {
                    return with_blobs(why);
                }
                (removed, users)
            }
            Err(stay) if stay.checked && self.settings.packages.is_some() => {
                match self.delete_versions(entry) {
                    VersionsGone::Deleted => (true, stay.users),
                    VersionsGone::None(why) => {
                        return with_blobs(format!("{}; {why}", stay.reason));
                    }
                    VersionsGone::Left(why) => {
                        return with_blobs(format!("{}; {why}", stay.reason));
                    }
                }
            }
            Err(stay) => return with_blobs(stay.reason),
        };
        let state = if removed { "deleted" } else { "gone" };
        if !blobs.is_empty() && !users.is_empty() {
            return Did::Left(format!(
                "the manifest is {state}, but its layer blob {} stays: the tag{} {} of someone else reference{} it",
                blobs.join(", "),
                if users.len() == 1 { "" } else { "s" },
                users.join(", "),
                if users.len() == 1 { "s" } else { "" },
            ));
        }
        for blob in blobs {
            if let Some(why) = self.clean_blob(repo, blob, removed) {
                return Did::Left(format!("the manifest is {state}, but {why}"));
            }
        }
        Did::Done(removed)
    }

    /// The plant's layer blob `blob` of `repo`: deleted when the manifest
    /// just was (`removed`: the check of the tags that cleared it showed
    /// no other manifest uses it); else only looked at. `Some(why)` when
    /// it stays.
    fn clean_blob(&self, repo: &str, blob: &str, removed: bool) -> Option<String> {
        let url = self.at(&format!("/v2/{repo}/blobs/{blob}"));
        let method = if removed {
            Method::DELETE
        } else {
            Method::HEAD
        };
        let r = match self.call(method, &url, "*/*", None) {
            Ok(r) => r,
            Err(f) => return Some(format!("its layer blob {blob} stays ({})", f.into_reason())),
        };
        match r.status {
            404 => None,
            s if removed && (200..300).contains(&s) => None,
            // Gone already: no tag of the plant's shows the tags listing
            // current, so no manifest of someone else's is ruled out of
            // using it. A blob left over breaks nothing; one deleted under
            // a manifest breaks it.
            200 => Some(format!(
                "its layer blob {blob} is still in the repository: with no tag of the plant's left to show the tags list current, nothing shows no other manifest uses it, so it is not deleted"
            )),
            s => Some(format!(
                "its layer blob {blob} stays: the registry answered its {} with HTTP {s}{}",
                if removed { "DELETE" } else { "HEAD" },
                error_code(&r)
            )),
        }
    }
}
