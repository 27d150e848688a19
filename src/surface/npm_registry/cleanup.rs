//! Cleanup: finding a probe's packages by name and search, and
//! unpublishing each after checking it holds exactly A's versions.

use super::plant::package_for;
use super::protocol::{class, path_of};
use super::{Entry, Npm, NpmRegistry};
use crate::fault::Fault;
use crate::http::answer::Class;
use crate::surface::carrier::CarrierSet;
use crate::surface::{CleanupOutcome, Job, RecoverOutcome, RunCtx};
use ::http::Method;

impl NpmRegistry {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Npm>],
    ) -> Result<Vec<Entry>, Fault> {
        // Every name but package-name's is derived without the nonce being
        // random; package-name's is found by search.
        let mut found = vec![];
        for j in jobs {
            let (name, version) = package_for(ctx, j.carrier, &j.nonce);
            match self.packument(&name) {
                // The name's tag proves it is this probe's; a version of
                // another form (someone published to it) makes cleanup
                // leave it.
                Ok(Some(doc)) => {
                    let versions: Vec<&String> = doc["versions"]
                        .as_object()
                        .map(|m| m.keys().collect())
                        .unwrap_or_default();
                    let ours = |v: &str| {
                        v == "0.0.0"
                            || v.strip_prefix("0.0.0-").is_some_and(|h| {
                                h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit())
                            })
                    };
                    let versions = match versions.as_slice() {
                        [v] if ours(v) => vec![v.to_string()],
                        _ => vec![version],
                    };
                    found.push(Entry { name, versions });
                }
                Ok(None) => {}
                Err(RecoverOutcome::Error { reason }) => return Err(Fault::Broken(reason)),
                // The registry's access control: no look can be had here.
                Err(RecoverOutcome::Denied { reason }) => return Err(Fault::Unsupported(reason)),
                Err(_) => {}
            }
        }
        if jobs.iter().any(|j| j.carrier == Npm::PackageName) {
            let text = format!("runwarden-{}", ctx.probe_id);
            let mut names = vec![];
            self.search_names(&text, &mut |name| {
                if Npm::tagged(ctx, name, "") == Some(Npm::PackageName) {
                    names.push(name.to_string());
                }
            })
            .map_err(|o| match o {
                RecoverOutcome::Error { reason } => Fault::Broken(reason),
                RecoverOutcome::Denied { reason } => Fault::Unsupported(reason),
                _ => Fault::broken("the search could not be read"),
            })?;
            for name in names {
                if !found.iter().any(|f| f.name == name) {
                    found.push(Entry {
                        name,
                        versions: vec!["0.0.0".into()],
                    });
                }
            }
        }
        Ok(found)
    }
}

impl NpmRegistry {
    pub(super) fn clean_entry(&self, entry: &Entry) -> CleanupOutcome {
        let name = entry.name.as_str();
        if !name.starts_with("runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden package; nothing is unpublished".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        let url = format!("{}{}?write=true", self.settings.url, path_of(name));
        let doc = match self.call(Method::GET, &url, None) {
            Err(f) => return left(f.into()),
            Ok(r) if r.status == 404 => return CleanupOutcome::Gone,
            Ok(r) if r.status != 200 => {
                return left(format!("reading it before unpublishing: HTTP {}", r.status));
            }
            Ok(r) => match r.json() {
                Ok(v) => v,
                Err(f) => return left(f.into()),
            },
        };
        // Checked before removal: exactly the versions A published.
        let mut have: Vec<String> = doc["versions"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        let mut want = entry.versions.clone();
        have.sort();
        want.sort();
        if have != want {
            return left(
                "its versions changed since it was published: someone else published to it".into(),
            );
        }
        let Some(rev) = doc["_rev"].as_str() else {
            return left("the registry gave no revision to unpublish".into());
        };
        let url = format!("{}{}/-rev/{rev}", self.settings.url, path_of(name));
        match self.call(Method::DELETE, &url, None) {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) if matches!(class(&r), Class::Refused | Class::NotTheServer) => left(format!(
                "the registry refused to unpublish it (HTTP {}); it stays until someone with unpublish rights removes it",
                r.status
            )),
            Ok(r) => left(format!("unpublishing: HTTP {}", r.status)),
            Err(f) => left(f.into()),
        }
    }
}
