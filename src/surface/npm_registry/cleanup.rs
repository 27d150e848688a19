//! Cleanup: finding a probe's packages by name and search, and
//! unpublishing each after checking it holds exactly A's versions.

use super::plant::package_for;
use super::protocol::path_of;
use super::{Instance, Npm};
use crate::fault::Fault;
use crate::surface::carrier::CarrierSet;
use crate::surface::{CleanupOutcome, PlantJob, RecoverOutcome, RunCtx};
use ::http::Method;
use serde_json::{Value, json};

impl Instance {
    pub(super) fn find_plants(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[PlantJob],
    ) -> Result<Vec<Value>, Fault> {
        // Every name but package-name's is derived without the nonce being
        // random; package-name's is found by search.
        let mut found = vec![];
        let carriers: Vec<(&PlantJob, Npm)> = jobs
            .iter()
            .filter_map(|j| Some((j, Npm::parse(&j.carrier)?)))
            .collect();
        for (j, carrier) in &carriers {
            let (name, version) = package_for(ctx, *carrier, &j.nonce);
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
                    match versions.as_slice() {
                        [v] if ours(v) => found.push(json!({ "name": name, "versions": [v] })),
                        _ => found.push(json!({ "name": name, "versions": [version] })),
                    }
                }
                Ok(None) => {}
                Err(RecoverOutcome::Failed { reason }) => return Err(Fault::Broken(reason)),
                // The registry's access control: no look can be had here.
                Err(RecoverOutcome::Denied { reason }) => return Err(Fault::Unsupported(reason)),
                Err(_) => {}
            }
        }
        if carriers.iter().any(|(_, c)| *c == Npm::PackageName) {
            let text = format!("runwarden-{}", ctx.probe_id);
            let mut names = vec![];
            self.search_names(&text, &mut |name| {
                if Npm::tagged(ctx, name, "") == Some(Npm::PackageName) {
                    names.push(name.to_string());
                }
            })
            .map_err(|o| match o {
                RecoverOutcome::Failed { reason } => Fault::Broken(reason),
                RecoverOutcome::Denied { reason } => Fault::Unsupported(reason),
                _ => Fault::broken("the search could not be read"),
            })?;
            for name in names {
                if !found.iter().any(|f| f["name"] == name.as_str()) {
                    found.push(json!({ "name": name, "versions": ["0.0.0"] }));
                }
            }
        }
        Ok(found)
    }
}

impl Instance {
    pub(super) fn clean_entry(&self, entry: &Value) -> CleanupOutcome {
        let name = entry["name"].as_str().unwrap_or("");
        if !name.starts_with("runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden package; nothing is unpublished".into(),
            };
        }
        let left = |reason: String| CleanupOutcome::Left { reason };
        let url = format!("{}{}?write=true", self.s.url, path_of(name));
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
        let mut want = crate::surface::string_array(&entry["versions"]);
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
        let url = format!("{}{}/-rev/{rev}", self.s.url, path_of(name));
        match self.call(Method::DELETE, &url, None) {
            Ok(r) if (200..300).contains(&r.status) => CleanupOutcome::Removed,
            Ok(r) if r.status == 404 => CleanupOutcome::Gone,
            Ok(r) if r.status == 401 || r.status == 403 => left(format!(
                "the registry refused to unpublish it (HTTP {}); it stays until someone with unpublish rights removes it",
                r.status
            )),
            Ok(r) => left(format!("unpublishing: HTTP {}", r.status)),
            Err(f) => left(f.into()),
        }
    }
}
