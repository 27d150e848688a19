//! Cleanup with the write token: each object read back, deleted only when
//! it still holds what the plant wrote (a deployment made inactive first,
//! as GitHub requires); objects GitHub cannot delete are listed as left.

use super::{Gh, Instance, Settings, carriers};
use crate::fault::Fault;
use crate::github::ApiError;
use crate::surface::{CleanupOutcome, RunCtx};
use ::http::Method;
use serde_json::{Value, json};

/// Whether `o` holds every field of `m` as the plant wrote it (an empty
/// `m` holds nothing: it would match every object).
fn holds(o: &Value, m: &Value) -> bool {
    m.as_object()
        .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| o[k.as_str()] == *v))
}

/// The nonce (hex) a journal entry's `match` carries in the form its
/// carrier's plant writes it.
fn match_nonce<'e>(ctx: &RunCtx<'_>, carrier: Gh, m: &'e Value) -> Option<&'e str> {
    let named = format!("rw-{}-", &ctx.probe_id[..ctx.probe_id.len().min(12)]);
    let field = |k: &str| m[k].as_str();
    match carrier {
        Gh::LabelName | Gh::ReleaseDraft => field("name")?.strip_prefix(&named),
        Gh::MilestoneTitle => field("title")?.strip_prefix(&named),
        Gh::LabelDescription | Gh::Deployment => {
            field("description")?.strip_prefix("runwarden probe ")
        }
        Gh::IssueComment => {
            field("body")?.strip_prefix(&format!("<!-- runwarden probe {} -->\n", ctx.probe_id))
        }
        Gh::ActionsVariable => field("value"),
        // Permanent plants: their entries hold no `match` ([`owned_entry`]
        // checks them by their text).
        Gh::CommitStatus | Gh::CheckRun => None,
        // Their own entry forms (scanning.rs, traces.rs).
        _ => None,
    }
}

/// Whether a journal entry is this probe's plant: rebuilt from the
/// configured repository, the carrier and the nonce its `match` holds, it
/// is the very entry the plant journals (so its paths, listing and key
/// fields are runwarden's own, never a path a receipt made up); `ref`, an
/// id GitHub gave, is a number or the plant's own name. `Invalid` for
/// anything else.
pub(super) fn owned_entry(s: &Settings, ctx: &RunCtx<'_>, e: &Value) -> Result<(), Fault> {
    let not = Fault::invalid;
    // `None`: not a carrier of github-api, whose entry holds nothing of
    // a plant's.
    let carrier = Gh::parse(
        e["carrier"]
            .as_str()
            .ok_or_else(|| not("names no carrier"))?,
    );
    match carrier {
        Some(Gh::CodeScanning) => return super::scanning::owned(ctx, e),
        Some(Gh::Discussion) => return super::discussion::owned(ctx, e),
        Some(c @ (Gh::WorkflowDispatch | Gh::RepositoryDispatch)) => {
            return super::dispatch::owned(ctx, c, e);
        }
        Some(c @ (Gh::RunAnnotation | Gh::RunLog)) => return super::traces::owned(ctx, c, e),
        _ => {}
    }
    if let Some(carrier) = carrier.filter(|c| carriers::PERMANENT.contains(c)) {
        // Never removed (GitHub has no delete), only listed as kept: its
        // text names the plant's nonce name, and its tag binds the probe.
        let what = if carrier == Gh::CommitStatus {
            "commit status"
        } else {
            "check run"
        };
        let named = format!("{what} rw-{}-", &ctx.probe_id[..ctx.probe_id.len().min(12)]);
        let hex = e["permanent"]
            .as_str()
            .and_then(|t| t.strip_prefix(&named))
            .and_then(|t| t.get(..32))
            .filter(|h| crate::surface::lower_hex(h, 32))
            .ok_or_else(|| not("not a permanent plant's entry"))?;
        let tagged = e["tag"].as_str().is_some_and(|t| {
            crate::marker::same(
                t.as_bytes(),
                carriers::entry_tag(ctx, carrier, hex).as_bytes(),
            )
        });
        let form = e.as_object().is_some_and(|o| o.len() == 3);
        return (tagged && form)
            .then_some(())
            .ok_or_else(|| not("not this probe's permanent plant"));
    }
    let (carrier, hex) = carrier
        .and_then(|c| Some((c, match_nonce(ctx, c, &e["match"])?)))
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    let nonce: crate::nonce::Nonce = serde_json::from_value(json!(hex))
        .map_err(|_| not("holds no nonce in runwarden's form"))?;
    // The issue and commit are this job's; the entry's own issue is only
    // taken when it is a number (a comment lives where it was made).
    let mut s = s.clone();
    if carrier == Gh::IssueComment {
        let rp = format!("/repos/{}/issues/", s.repository.as_deref().unwrap_or(""));
        s.issue = e["list"]
            .as_str()
            .and_then(|l| l.strip_prefix(&rp)?.strip_suffix("/comments")?.parse().ok());
    }
    s.commit.get_or_insert_with(|| "0".repeat(40));
    // (What this job cannot plant, the entry does not name: not ours.)
    let want = carriers::plant_request(&s, ctx, carrier, &nonce)
        .map_err(|f| Fault::Invalid(f.into_reason()))?
        .entry;
    let mut got = e.clone();
    if want["ref"].is_null() {
        if !(e["ref"].is_null() || e["ref"].is_u64()) {
            return Err(not("its id is not a number"));
        }
        got["ref"] = Value::Null;
    }
    (got == want)
        .then_some(())
        .ok_or_else(|| not("not the entry this probe's plant journals"))
}

impl Instance {
    pub(super) fn clean(&self, e: &Value) -> CleanupOutcome {
        match Gh::parse(e["carrier"].as_str().unwrap_or("")) {
            Some(Gh::CodeScanning) => return self.clean_scanning(e),
            Some(Gh::Discussion) => return self.clean_discussion(e),
            Some(Gh::WorkflowDispatch | Gh::RepositoryDispatch) => return self.clean_dispatch(e),
            Some(Gh::RunAnnotation | Gh::RunLog) => return super::traces::kept(),
            _ => {}
        }
        if e["permanent"].is_string() {
            return CleanupOutcome::Kept {
                reason: "GitHub offers no way to delete it: it stays (planted because \
                         `permanent: true`)"
                    .into(),
            };
        }
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return CleanupOutcome::Left { reason: f.into() },
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
            // One path segment, whatever the value says: an id is a number,
            // a name is encoded whole (`/` too).
            let id = match &r {
                Value::String(s) => match crate::wire::percent_segment(s) {
                    Ok(seg) => seg,
                    Err(f) => return CleanupOutcome::Left { reason: f.into() },
                },
                Value::Number(n) if n.is_u64() => n.to_string(),
                _ => {
                    return CleanupOutcome::Left {
                        reason: "the plant's id is neither a number nor a name".into(),
                    };
                }
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
            // (code-scanning's: the same category, and the upload's id.)
            let (id, same) = match Gh::parse(e["carrier"].as_str().unwrap_or("")) {
                Some(Gh::CodeScanning) => ("sarif_id", "category"),
                Some(Gh::Discussion) => ("id", "title"),
                _ => ("ref", "match"),
            };
            let fuller = e[id].is_null()
                && entries.iter().any(|o| {
                    o.get("retract").is_none()
                        && o["carrier"] == e["carrier"]
                        && o[same] == e[same]
                        && !o[id].is_null()
                });
            if fuller {
                CleanupOutcome::Superseded
            } else {
                self.clean(e)
            }
        })
    }
}
