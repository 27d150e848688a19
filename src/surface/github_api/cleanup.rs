//! Cleanup with the write token: each object read back, deleted only when
//! it still holds what the plant wrote (a deployment made inactive first,
//! as GitHub requires); objects GitHub cannot delete are listed as left.

use super::*;

/// Whether `o` holds every field of `m` as the plant wrote it.
fn holds(o: &Value, m: &Value) -> bool {
    m.as_object()
        .is_some_and(|m| m.iter().all(|(k, v)| o[k.as_str()] == *v))
}

impl Instance {
    pub(super) fn clean(&self, e: &Value) -> CleanupOutcome {
        if e["permanent"].is_string() {
            return CleanupOutcome::Kept {
                reason: "GitHub offers no way to delete it: it stays (planted because \
                         `permanent: true`)"
                    .into(),
            };
        }
        let api = match self.api(false) {
            Ok(a) => a,
            Err(reason) => return CleanupOutcome::Left { reason },
        };
        let (Some(object), Some(key)) = (e["object"].as_str(), e["key"].as_str()) else {
            return CleanupOutcome::Left {
                reason: "the journal entry says nothing to delete".into(),
            };
        };
        let m = &e["match"];
        let mut refs: Vec<Value> = vec![];
        if e["ref"].is_null() {
            // Killed before GitHub answered: find it by what it holds.
            let list = e["list"].as_str().unwrap_or("");
            let mut no_key = false;
            let r = api.list(
                list,
                e["items"].as_str(),
                "finding the plant to delete",
                &mut |o| {
                    if holds(o, m) {
                        match &o[key] {
                            Value::Null => no_key = true,
                            k => refs.push(k.clone()),
                        }
                    }
                },
            );
            if let Err(err) = r {
                return CleanupOutcome::Left { reason: err.text() };
            }
            if no_key {
                return CleanupOutcome::Left {
                    reason: format!("the listing shows the plant without its `{key}`: not removed"),
                };
            }
        } else {
            refs.push(e["ref"].clone());
        }
        let mut removed = false;
        for r in refs {
            let id = match &r {
                Value::String(s) => crate::http::percent_encode(s),
                other => other.to_string(),
            };
            let path = object.replace("{}", &id);
            match api.call(
                Method::GET,
                &path,
                None,
                "reading the plant before deleting it",
            ) {
                Err(ApiError::NotFound(_)) => continue,
                Err(err) => return CleanupOutcome::Left { reason: err.text() },
                Ok(a) if !holds(&a.json, m) => {
                    return CleanupOutcome::Left {
                        reason: "changed since it was planted: not removed".into(),
                    };
                }
                Ok(_) => {}
            }
            if e["deactivate"] == json!(true) {
                let inactive = json!({ "state": "inactive" });
                if let Err(err) = api.call(
                    Method::POST,
                    &format!("{path}/statuses"),
                    Some(&inactive),
                    "making the deployment inactive before deleting it",
                ) {
                    return CleanupOutcome::Left { reason: err.text() };
                }
            }
            match api.call(Method::DELETE, &path, None, "deleting the plant") {
                Ok(_) => removed = true,
                Err(ApiError::NotFound(_)) => {}
                Err(err) => return CleanupOutcome::Left { reason: err.text() },
            }
        }
        if removed {
            CleanupOutcome::Removed
        } else {
            CleanupOutcome::Gone
        }
    }

    /// An intent and the entry with its id are one object, cleaned once
    /// (by the fuller entry).
    pub(super) fn clean_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        crate::surface::cleanup_unretracted(entries, |e| {
            let fuller = e["ref"].is_null()
                && entries.iter().any(|o| {
                    o.get("retract").is_none()
                        && o["carrier"] == e["carrier"]
                        && o["match"] == e["match"]
                        && !o["ref"].is_null()
                });
            if fuller {
                CleanupOutcome::Superseded
            } else {
                self.clean(e)
            }
        })
    }
}
