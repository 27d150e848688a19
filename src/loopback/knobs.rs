//! The faults a control's service can be made to show, for the
//! conformance suite: each is a way a real store's read route stops being
//! current, and every surface type whose routes it reaches must then give
//! no PASS ([`Knob`]). A service says which it has ([`Knobs::knob`]).
//!
//! [`Shifter`] is the page shift, for a service whose listings page by
//! number: it stands between the service's own listing and the client.

use super::Reply;
use serde_json::Value;
use std::collections::HashMap;

/// A fault of a read route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    /// Listings leave out whatever was made since the knob was turned on;
    /// every other route still serves it (eventual consistency).
    Lag,
    /// Listings paged by number hand over one item a page, and while the
    /// first pass of each is read an item ahead of the newest goes: the
    /// newest item (the plant, made moments ago) moves onto a page already
    /// read and is never handed over. Later passes are whole.
    ShiftOnce,
    /// As [`Knob::ShiftOnce`], on every pass (another item goes each time,
    /// as in a listing that changes all the while).
    ShiftEvery,
    /// As [`Knob::ShiftOnce`], and an item is added at the listing's end
    /// as the one ahead goes (an upload that finished meanwhile), so the
    /// pass's `total_count` matches what it handed over.
    ShiftKeepingCount,
    /// Documents read by name (a package's, a project's) answer "not
    /// found", while the search, reads by exact URL and writes are
    /// current: a CDN in front serving a stale copy.
    StaleDocument,
    /// Everything the store holds but its newest entry goes, as an
    /// eviction between run A and run B drops the oldest first (a cache
    /// past its size limit; a store that keeps no order loses everything):
    /// what is gone is really gone.
    Evict,
    /// The server moves what is pushed: after every push a hook renames
    /// each new branch `refs/heads/X` to `refs/heads/archive/X`, so the
    /// objects stay reachable under a listed name that is not the one
    /// pushed. Turned off, the hook goes; what it moved stays moved.
    RenameRefs,
}

impl Knob {
    pub const ALL: [Knob; 7] = [
        Knob::Lag,
        Knob::ShiftOnce,
        Knob::ShiftEvery,
        Knob::ShiftKeepingCount,
        Knob::StaleDocument,
        Knob::Evict,
        Knob::RenameRefs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Knob::Lag => "a lagging listing",
            Knob::ShiftOnce => "a listing shifted once while paged",
            Knob::ShiftEvery => "a listing shifted on every pass",
            Knob::ShiftKeepingCount => "a late insert that keeps the total count",
            Knob::StaleDocument => "a document stale while the search is current",
            Knob::Evict => "an eviction of the oldest entries between run A and run B",
            Knob::RenameRefs => "a server that renames what was pushed",
        }
    }
}

/// A service whose routes can be made to fail as real stores' do.
pub trait Knobs {
    /// Turns `knob` on or off; false when this service has no such fault.
    fn knob(&mut self, knob: Knob, on: bool) -> bool;
}

/// [`Knobs::knob`] of a service whose one fault is a stale document
/// ([`Knob::StaleDocument`]), kept in `stale`.
pub fn stale_document(stale: &mut bool, knob: Knob, on: bool) -> bool {
    if knob != Knob::StaleDocument {
        return false;
    }
    *stale = on;
    true
}

/// The page shift of a service whose listings page by number
/// ([`Knob::ShiftOnce`], [`Knob::ShiftEvery`], [`Knob::ShiftKeepingCount`]):
/// which one is on, and how many passes of each listing it has seen.
#[derive(Default)]
pub struct Shifter {
    knob: Option<Knob>,
    /// The item a shifted pass skips, by `id`, where it is listed (a
    /// test's aim at one plant); else the newest.
    pub aim: Option<u64>,
    /// A listing (its URL without `page` and `per_page`) -> its passes
    /// begun (first pages asked for) since the knob was turned on.
    passes: HashMap<String, u32>,
}

impl Shifter {
    /// Turns a shift knob on or off; false for any other knob.
    pub fn set(&mut self, knob: Knob, on: bool) -> bool {
        if !matches!(
            knob,
            Knob::ShiftOnce | Knob::ShiftEvery | Knob::ShiftKeepingCount
        ) {
            return false;
        }
        self.knob = on.then_some(knob);
        self.passes.clear();
        true
    }

    pub fn is_on(&self) -> bool {
        self.knob.is_some()
    }

    /// Answers the listing request `url` (GitHub's `page`/`per_page`, a
    /// `Link` header to `origin`, `wrap` holding the array beside
    /// `total_count`, or a bare array) with the shift on: `fetch` answers
    /// any URL of the service itself. One item a page; on a shifted pass, the view is a
    /// stranger item followed by the listing until the page after the
    /// newest item's, where the stranger has gone (and, keeping the count,
    /// a late item joins at the end). What is no listing passes through.
    pub fn serve(
        &mut self,
        origin: &str,
        url: &str,
        fetch: &mut dyn FnMut(&str) -> Reply,
    ) -> Reply {
        let Some(knob) = self.knob else {
            return fetch(url);
        };
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        let mut rest: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("page=") && !p.starts_with("per_page="))
            .collect();
        rest.sort_unstable();
        let base = format!("{path}?{}", rest.join("&"));
        let page_url = |n: usize| format!("{base}&per_page=1&page={n}");
        let asked: usize = super::query(url)
            .get("page")
            .and_then(|p| p.parse().ok())
            .unwrap_or(1usize)
            .max(1);
        // The listing as the service has it: one item a page.
        let mut items = vec![];
        let mut wrap: Option<String> = None;
        loop {
            let r = fetch(&page_url(items.len() + 1));
            let Some((item, w)) = one_item(&r) else {
                if items.is_empty() {
                    return fetch(url);
                }
                break;
            };
            wrap = w;
            items.push(item);
            if !has_next(&r) || items.len() > 10_000 {
                break;
            }
        }
        if asked == 1 {
            *self.passes.entry(base.clone()).or_default() += 1;
        }
        let pass = self.passes.get(&base).copied().unwrap_or(1);
        let shifted = knob == Knob::ShiftEvery || pass == 1;
        let id = |i: usize| items[i]["id"].as_u64().unwrap_or(0);
        let newest = (0..items.len())
            .find(|i| Some(id(*i)) == self.aim)
            .or_else(|| (0..items.len()).max_by_key(|i| id(*i)))
            .unwrap_or(0);
        let stranger = |tag: &str, n: u64| {
            let mut s = items[0].clone();
            s["id"] = Value::from(n);
            s["name"] = Value::from(format!("{tag}-{n}"));
            s
        };
        let n = items.len();
        // The view this page is served from, its length as the page says
        // it, and whether it still has a next page.
        let (item, total) = if !shifted {
            (items.get(asked - 1).cloned(), n)
        } else if asked == 1 {
            (Some(stranger("other", 3_000_000_000 + pass as u64)), n + 1)
        } else if asked <= newest + 1 {
            // Still behind the stranger: every item one page later.
            (items.get(asked - 2).cloned(), n + 1)
        } else if knob == Knob::ShiftKeepingCount {
            // The stranger went and a late item came: the count holds.
            let late = stranger("late", 3_500_000_000);
            (items.get(asked - 1).cloned().or(Some(late)), n + 1)
        } else {
            (items.get(asked - 1).cloned(), n)
        };
        let list = Value::Array(item.into_iter().collect());
        let body = match &wrap {
            Some(k) => serde_json::json!({ "total_count": total, k: list }),
            None => list,
        };
        let mut reply = Reply::json(200, body).paged();
        if asked < total {
            let next = format!("<{origin}{}>; rel=\"next\"", page_url(asked + 1));
            reply = reply.with("Link", &next);
        }
        reply
    }
}

/// Whether a page links to a next one.
fn has_next(r: &Reply) -> bool {
    r.headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("link") && v.contains("rel=\"next\""))
}

/// The one item of a page of one item of a listing paged by number, and
/// the field the array is in.
fn one_item(r: &Reply) -> Option<(Value, Option<String>)> {
    if r.status != 200 || !r.paged {
        return None;
    }
    let v: Value = serde_json::from_slice(&r.body).ok()?;
    match &v {
        Value::Array(a) => Some((a.first()?.clone(), None)),
        Value::Object(o) if o.contains_key("total_count") => o.iter().find_map(|(k, f)| {
            let a = f.as_array()?;
            Some((a.first()?.clone(), Some(k.clone())))
        }),
        _ => None,
    }
}
