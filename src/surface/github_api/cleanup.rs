//! Cleanup with the write token: each object read back, deleted only when
//! it still holds what the plant wrote (a deployment made inactive first,
//! as GitHub requires); objects GitHub cannot delete are listed as left.

use super::entry::{Entry, Object, Permanent, Ref};
use super::{Gh, GitHubApi, Settings, carriers};
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::surface::{CleanupOutcome, RunCtx};
use ::http::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Whether `o` holds every field of `m` as the plant wrote it (an empty
/// `m` holds nothing: it would match every object).
fn holds(o: &Value, m: &BTreeMap<String, String>) -> bool {
    !m.is_empty() && m.iter().all(|(k, v)| o[k.as_str()] == *v)
}

/// The nonce (hex) a journal entry's `match` carries in the form its
/// carrier's plant writes it.
fn match_nonce<'e>(
    ctx: &RunCtx<'_>,
    carrier: Gh,
    m: &'e BTreeMap<String, String>,
) -> Option<&'e str> {
    let named = format!("rw-{}-", &ctx.probe_id[..ctx.probe_id.len().min(12)]);
    let field = |k: &str| m.get(k).map(String::as_str);
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
        // Permanent plants: their entries hold no `match` (`owns`
        // checks them by their text).
        Gh::CommitStatus | Gh::CheckRun => None,
        // Their own entry forms (scanning.rs, traces.rs).
        _ => None,
    }
}

/// A commit status's or a check run's entry: never removed (GitHub has
/// no delete), only listed as kept. Its text names the plant's nonce name,
/// and its tag binds the probe.
pub(super) fn owned_permanent(
    ctx: &RunCtx<'_>,
    carrier: Option<Gh>,
    e: &Permanent,
) -> Result<(), Fault> {
    let not = Fault::invalid;
    let Some(carrier) = carrier.filter(|c| carriers::PERMANENT.contains(c)) else {
        return Err(not("not a permanent plant's entry"));
    };
    let what = if carrier == Gh::CommitStatus {
        "commit status"
    } else {
        "check run"
    };
    let named = format!("{what} rw-{}-", &ctx.probe_id[..ctx.probe_id.len().min(12)]);
    // `<what> rw-<probe>-<32 hex> on <commit>`, and nothing else.
    let hex = e
        .permanent
        .strip_prefix(&named)
        .and_then(|t| t.split_once(" on "))
        .filter(|(h, c)| {
            // (The commit as the config or GITHUB_SHA gave it: either case.)
            crate::surface::lower_hex(h, 32)
                && matches!(c.len(), 40 | 64)
                && c.bytes().all(|b| b.is_ascii_hexdigit())
        })
        .map(|(h, _)| h)
        .ok_or_else(|| not("not a permanent plant's entry"))?;
    let tagged = crate::marker::same(
        e.tag.as_bytes(),
        carriers::entry_tag(ctx, carrier, hex).as_bytes(),
    );
    tagged
        .then_some(())
        .ok_or_else(|| not("not this probe's permanent plant"))
}

/// A table object's entry: rebuilt from the nonce its `match` holds.
pub(super) fn owned_object(
    s: &Settings,
    ctx: &RunCtx<'_>,
    carrier: Option<Gh>,
    e: &Object,
) -> Result<(), Fault> {
    let not = Fault::invalid;
    let (carrier, hex) = carrier
        .and_then(|c| Some((c, match_nonce(ctx, c, &e.matches)?)))
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    let nonce = crate::nonce::Nonce::from_hex(hex)
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    // The issue and commit are this job's; the entry's own issue is only
    // taken when it is a number (a comment lives where it was made).
    let mut s = s.clone();
    if carrier == Gh::IssueComment {
        let rp = format!("/repos/{}/issues/", s.repository.as_deref().unwrap_or(""));
        s.issue = e
            .list
            .strip_prefix(&rp)
            .and_then(|l| l.strip_suffix("/comments")?.parse().ok());
    }
    s.commit.get_or_insert_with(|| "0".repeat(40));
    // (What this job cannot plant, the entry does not name: not ours.)
    let want = carriers::plant_request(&s, ctx, carrier, &nonce)
        .map_err(|f| Fault::Invalid(f.into_reason()))?
        .entry;
    let mut got = Entry::Object(e.clone());
    if let (Entry::Object(w), Entry::Object(g)) = (&want, &mut got)
        && w.id.is_none()
    {
        if matches!(g.id, Some(Ref::Name(_))) {
            return Err(not("its id is not a number"));
        }
        g.id = None;
    }
    (got == want)
        .then_some(())
        .ok_or_else(|| not("not the entry this probe's plant journals"))
}

impl GitHubApi {
    /// An object: read back (found by what it holds, when GitHub's id was
    /// never journalled), deleted only while it holds what was planted.
    pub(super) fn clean_object(&self, e: &Object) -> CleanupOutcome {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return CleanupOutcome::Left { reason: f.into() },
        };
        let Some(object) = e.object.as_deref() else {
            return CleanupOutcome::Left {
                reason: "the journal entry says nothing to delete".into(),
            };
        };
        let refs = match &e.id {
            // Killed before GitHub answered: find it by what it holds.
            None => match self.by_content(&api, e) {
                Ok(r) => r,
                Err(o) => return o,
            },
            Some(Ref::Id(n)) => vec![json!(n)],
            Some(Ref::Name(n)) => vec![json!(n)],
        };
        let removed = match self.delete_refs(&api, e, object, refs) {
            Ok(r) => r,
            Err(o) => return o,
        };
        if removed {
            return CleanupOutcome::Removed;
        }
        if e.id.is_none() {
            return CleanupOutcome::Gone;
        }
        // Nothing under the id the entry names: gone, or the id is not the
        // plant's (an unsigned receipt's "fuller" entry with a made-up id
        // takes the intent's place). Only the listing, searched for what
        // the plant holds, shows it gone.
        match self.by_content(&api, e) {
            Ok(refs) if refs.is_empty() => CleanupOutcome::Gone,
            Ok(refs) => match self.delete_refs(&api, e, object, refs) {
                Ok(_) => CleanupOutcome::Removed,
                Err(o) => o,
            },
            Err(o) => o,
        }
    }

    /// The ids (`key`) of what the listing shows holding the plant's
    /// fields; a hit without its key stays (`Err`).
    fn by_content(&self, api: &Api<'_>, e: &Object) -> Result<Vec<Value>, CleanupOutcome> {
        let key = e.key.as_str();
        let m = &e.matches;
        let mut refs: Vec<Value> = vec![];
        let mut no_key = false;
        let r = api.list(
            &e.list,
            e.items.as_deref(),
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
            return Err(CleanupOutcome::Left { reason: err.text() });
        }
        if no_key {
            return Err(CleanupOutcome::Left {
                reason: format!("the listing shows the plant without its `{key}`: not removed"),
            });
        }
        Ok(refs)
    }

    /// Reads each of `refs` back and deletes it while it holds what was
    /// planted: `Ok(true)` when one was deleted.
    fn delete_refs(
        &self,
        api: &Api<'_>,
        e: &Object,
        object: &str,
        refs: Vec<Value>,
    ) -> Result<bool, CleanupOutcome> {
        let m = &e.matches;
        let mut removed = false;
        for r in refs {
            // One path segment, whatever the value says: an id is a number,
            // a name is encoded whole (`/` too).
            let id = match &r {
                Value::String(s) => match crate::wire::percent_segment(s) {
                    Ok(seg) => seg,
                    Err(f) => return Err(CleanupOutcome::Left { reason: f.into() }),
                },
                Value::Number(n) if n.is_u64() => n.to_string(),
                _ => {
                    return Err(CleanupOutcome::Left {
                        reason: "the plant's id is neither a number nor a name".into(),
                    });
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
                Err(err) => return Err(CleanupOutcome::Left { reason: err.text() }),
                Ok(a) if !holds(&a.json, m) => {
                    return Err(CleanupOutcome::Left {
                        reason: "changed since it was planted: not removed".into(),
                    });
                }
                Ok(_) => {}
            }
            if e.deactivate == Some(true) {
                let inactive = json!({ "state": "inactive" });
                if let Err(err) = api.call(
                    Method::POST,
                    &format!("{path}/statuses"),
                    Some(&inactive),
                    "making the deployment inactive before deleting it",
                ) {
                    return Err(CleanupOutcome::Left { reason: err.text() });
                }
            }
            match api.call(Method::DELETE, &path, None, "deleting the plant") {
                Ok(_) => removed = true,
                Err(ApiError::NotFound(_)) => {}
                Err(err) => return Err(CleanupOutcome::Left { reason: err.text() }),
            }
        }
        Ok(removed)
    }
}

/// Whether `o` is the fuller entry of what intent `e` names: the same
/// carrier and object (code-scanning's: the same category; a
/// discussion's: the same title; an object's: the same fields), with the
/// id GitHub gave, which `e` has not.
pub(super) fn fuller(o: &Entry, e: &Entry) -> bool {
    match (o, e) {
        (Entry::Object(o), Entry::Object(e)) => {
            e.id.is_none() && o.carrier == e.carrier && o.matches == e.matches && o.id.is_some()
        }
        (Entry::Scanning(o), Entry::Scanning(e)) => {
            e.sarif_id.is_none()
                && o.carrier == e.carrier
                && o.category == e.category
                && o.sarif_id.is_some()
        }
        (Entry::Discussion(o), Entry::Discussion(e)) => {
            e.id.is_none() && o.carrier == e.carrier && o.title == e.title && o.id.is_some()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marker::Key;

    #[test]
    fn a_permanent_plants_commit_is_its_own_in_either_case() {
        let key = Key::new(Some(b"k".to_vec()));
        let ctx = RunCtx {
            probe_id: "p1",
            key: &key,
            surface: "test",
        };
        let hex = "0123456789abcdef0123456789abcdef";
        let entry = |commit: &str| Permanent {
            carrier: "commit-status".into(),
            permanent: format!("commit status rw-p1-{hex} on {commit}"),
            tag: carriers::entry_tag(&ctx, Gh::CommitStatus, hex),
        };
        for commit in ["c0ffee".repeat(6) + "c0ff", "C0FFEE".repeat(6) + "C0FF"] {
            assert_eq!(
                owned_permanent(&ctx, Some(Gh::CommitStatus), &entry(&commit)),
                Ok(())
            );
        }
        for bad in ["c0ffee", &format!("{}/../x", "c0ffee".repeat(6) + "c0ff")] {
            assert!(owned_permanent(&ctx, Some(Gh::CommitStatus), &entry(bad)).is_err());
        }
    }
}
