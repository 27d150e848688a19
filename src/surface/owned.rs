//! Names and ownership, for every surface type: the tagged names plants
//! on network surfaces carry, the forms only a plant of this probe makes
//! ([`owned_name`], [`plain_segment`]), and the engine's check of every
//! journal entry before any removal ([`cleanup_owned`]).

use super::{Carrier, CleanupOutcome, Instance, RunCtx};
use crate::fault::Fault;
use crate::nonce::Nonce;
use serde_json::Value;

/// The name of a plant on a network surface:
/// `runwarden-<probe id>-<carrier>[-<nonce>]-<tag>`, where the tag is a MAC
/// under the marker key over the rest of the name and `bound` (whatever
/// else identifies the plant, such as a cache entry's version). Leftovers
/// are identifiable by the prefix; cleanup by probe id takes only names
/// whose tag verifies ([`tagged_carrier`]), so it finds the plants of a
/// probe whose nonces were random, and never a name someone else made.
pub fn tagged_name(ctx: &RunCtx<'_>, carrier: &str, nonce: Option<&Nonce>, bound: &str) -> String {
    let body = match nonce {
        Some(n) => format!("runwarden-{}-{carrier}-{}", ctx.probe_id, n.hex()),
        None => format!("runwarden-{}-{carrier}", ctx.probe_id),
    };
    let tag = ctx.key.name_tag(ctx.probe_id, &tagged(&body, bound, ctx));
    format!("{body}-{tag}")
}

/// What a [`tagged_name`]'s tag is over: the name's body, what it is
/// bound to, and the surface's tag ([`RunCtx::surface_tag`]). So two
/// surfaces that are one store under two names (two URLs of one registry)
/// never make the same name for a carrier without a nonce: their tags
/// differ. The form of the name does not change.
fn tagged(body: &str, bound: &str, ctx: &RunCtx<'_>) -> String {
    match ctx.surface_tag() {
        t if t.is_empty() => format!("{body}|{bound}"),
        t => format!("{body}|{bound}|surface:{t}"),
    }
}

/// The carrier (one of `carriers`) a [`tagged_name`] of this probe was made
/// for, when its tag verifies; `None` for any other name.
pub fn tagged_carrier(
    ctx: &RunCtx<'_>,
    carriers: &[Carrier],
    name: &str,
    bound: &str,
) -> Option<&'static str> {
    let prefix = format!("runwarden-{}-", ctx.probe_id);
    let rest = name.strip_prefix(&prefix)?;
    let (part, tag) = rest.rsplit_once('-')?;
    let body = &name[..name.len() - tag.len() - 1];
    // This surface's tag, or 0.11.0's (bound to no surface): a name a
    // probe of 0.11.0 made is still its own.
    let verifies = |over: &str| ctx.key.check_name_tag(ctx.probe_id, over, tag);
    if tag.len() != 16
        || !(verifies(&tagged(body, bound, ctx)) || verifies(&format!("{body}|{bound}")))
    {
        return None;
    }
    carriers
        .iter()
        .map(|c| c.name)
        .find(|c| part == *c || part.strip_prefix(c).is_some_and(|r| r.starts_with('-')))
}

/// A name or path segment that is safe in any URL and any directory: only
/// letters, digits, `-` and `_` (so no `/`, `..`, `%`, `@`, `?`, `#`, `\\`
/// that a server or a proxy could turn into another path or host).
pub fn plain_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `r` is a ref name git would take and no path trick: under
/// `refs/`, no `..`, `@{`, `//`, control or special character. (Other
/// characters than ASCII are git's to take: a branch may be named in any
/// script.)
pub fn plain_ref(r: &str) -> bool {
    let bad = |b: u8| b.is_ascii_control() || b" ~^:?*[\\".contains(&b);
    r.starts_with("refs/")
        && !r.contains("..")
        && !r.contains("@{")
        && !r.contains("//")
        && !r.ends_with('/')
        && !r.ends_with(".lock")
        && !r.bytes().any(bad)
}

/// Whether `s` is exactly `n` lowercase hex digits.
pub fn lower_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The ownership rule of every [`tagged_name`]: `name` is exactly
/// `runwarden-<probe id>-<carrier>[-<32 hex>]-<16 hex tag>`, made of
/// [`plain_segment`] characters only, with a nonce exactly when
/// `with_nonce(carrier)` says the carrier's plant puts one in the name,
/// and its tag verifies under the run's key. Returns the carrier
/// (`Invalid` for any other name). Without
/// a configured key the tag is public, but the form alone keeps every
/// name outside this probe's namespace out of reach.
pub fn owned_name(
    ctx: &RunCtx<'_>,
    carriers: &[Carrier],
    name: &str,
    bound: &str,
    with_nonce: &dyn Fn(&str) -> bool,
) -> Result<&'static str, Fault> {
    let shown = crate::escape::bytes(name.as_bytes());
    if !plain_segment(name) {
        return Err(Fault::invalid(format!("{shown} is not a runwarden name")));
    }
    let c = tagged_carrier(ctx, carriers, name, bound).ok_or_else(|| {
        Fault::invalid(format!("no plant of probe {} named {shown}", ctx.probe_id))
    })?;
    let rest = &name[format!("runwarden-{}-{c}-", ctx.probe_id).len()..];
    let ok = match rest.split_once('-') {
        None => !with_nonce(c) && lower_hex(rest, 16),
        Some((n, tag)) => with_nonce(c) && lower_hex(n, 32) && lower_hex(tag, 16),
    };
    ok.then_some(c)
        .ok_or_else(|| Fault::invalid(format!("{shown} is not the name a {c} plant makes")))
}

/// A journal entry that takes `entry` back: the server answered its write
/// with a refusal or an error, so nothing was created. (Network surfaces
/// journal each entry before its write, as every surface must, so that a
/// probe killed mid-request still knows what to look for.)
pub fn retraction(entry: &Value) -> Value {
    serde_json::json!({ "retract": entry })
}

/// The engine's check before any removal: every entry [`Instance::owns`]
/// refuses is [`CleanupOutcome::Foreign`] and never reaches the surface;
/// the rest go to [`Instance::cleanup_all`] as one journal. One outcome per
/// entry, in order. A retraction is checked by what it takes back (a
/// foreign one could only keep an entry of ours from being removed).
pub fn cleanup_owned(
    inst: &dyn Instance,
    ctx: &RunCtx<'_>,
    entries: &[Value],
) -> Vec<CleanupOutcome> {
    by_slot(
        entries,
        |e| {
            // A retraction is `{"retract": …}` and nothing else: an entry
            // that also names something of its own would pass as the
            // retraction and be removed as the other.
            let checked = match e.get("retract") {
                Some(_) if e.as_object().is_some_and(|o| o.len() != 1) => Err(Fault::invalid(
                    "a retraction that names something besides what it takes back",
                )),
                Some(inner) => inst.owns(ctx, inner),
                None => inst.owns(ctx, e),
            };
            checked
                .map(|()| e.clone())
                .map_err(|why| CleanupOutcome::Foreign {
                    reason: format!("not runwarden's: left alone ({why})"),
                })
        },
        |owned| inst.cleanup_all(&owned),
        || CleanupOutcome::Left {
            reason: "cleanup never reported this entry".into(),
        },
    )
}

/// One outcome per item of `items`, in order: `pick` answers an item at
/// once (`Err`) or passes it on (`Ok`); `run` answers every item passed on
/// at once, in order (it is not called when none is); an item it leaves
/// unanswered is `missing`'s.
pub(super) fn by_slot<I, T, O: Clone>(
    items: &[I],
    mut pick: impl FnMut(&I) -> Result<T, O>,
    run: impl FnOnce(Vec<T>) -> Vec<O>,
    missing: impl Fn() -> O,
) -> Vec<O> {
    let mut out: Vec<Option<O>> = vec![None; items.len()];
    let (mut passed, mut at) = (Vec::new(), Vec::new());
    for (i, item) in items.iter().enumerate() {
        match pick(item) {
            Ok(t) => {
                passed.push(t);
                at.push(i);
            }
            Err(o) => out[i] = Some(o),
        }
    }
    if !passed.is_empty() {
        for (i, o) in at.into_iter().zip(run(passed)) {
            out[i] = Some(o);
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(&missing))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::plain_ref;

    #[test]
    fn a_plain_ref_is_one_git_takes_in_any_script_and_no_path_trick() {
        for ok in [
            "refs/heads/main",
            "refs/heads/überarbeitung",
            "refs/pull/7/merge",
        ] {
            assert!(plain_ref(ok), "{ok}");
        }
        for bad in [
            "refs/heads/x/../../y",
            "heads/main",
            "refs/heads/a b",
            "refs/heads/a@{1}",
            "refs/heads//x",
            "refs/heads/x/",
            "refs/heads/x.lock",
            "refs/heads/\u{7}",
        ] {
            assert!(!plain_ref(bad), "{bad}");
        }
    }
}
