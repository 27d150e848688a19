//! What github-api writes down: its journal lines, one shape per kind of
//! plant (an object of the table's carriers, a permanent one, a trace, a
//! dispatch, a discussion, a code-scanning upload), and the needle a plant
//! reports for run B. On the wire exactly as 0.11.0 wrote them: a line's
//! nullable fields are always there (`null` until GitHub gave the id), and
//! a line that is not exactly one of these shapes parses as none, so it is
//! never this surface's own.

use crate::escape;
use crate::nonce::Nonce;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// One journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry {
    Object(Object),
    Permanent(Permanent),
    Trace(Trace),
    Dispatch(Dispatch),
    Discussion(Discussion),
    Scanning(Scanning),
}

// Why `deserialize_with = "Option::deserialize"` on the nullable fields
// below: 0.11.0 compared a whole line with the one its plant journals, so
// a line without one of them (rather than `null`) was never its own; serde
// alone would read a missing `Option` as `None`.

/// An object of a table carrier (a label, a comment, a milestone, a draft
/// release, a deployment, a variable): where to list it (`list`,
/// `items`), the fields that identify it (`match`), the path to read and
/// delete it with `{}` for its `key` field (`object`), and that field's
/// value (`ref`) when known: an agreed name from the start, or the id
/// GitHub gave, journalled again once it answered. A deployment must be
/// made inactive before it is deleted (`deactivate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Object {
    pub carrier: String,
    pub list: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub items: Option<String>,
    #[serde(rename = "match")]
    pub matches: BTreeMap<String, String>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub object: Option<String>,
    pub key: String,
    /// (Missing read as `null`, as 0.11.0's ownership check read it.)
    #[serde(rename = "ref", default)]
    pub id: Option<Ref>,
    pub tag: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub deactivate: Option<bool>,
}

/// What an object's `key` field holds: the id GitHub gave (a comment's,
/// a release's), or its name (a label's, a variable's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Ref {
    Id(u64),
    Name(String),
}

/// A commit status or a check run: GitHub offers no delete, so the line
/// says what stays (`commit status <name> on <sha>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permanent {
    pub carrier: String,
    pub permanent: String,
    pub tag: String,
}

/// A trace (an annotation, a log line) and the run it was printed in
/// (`null`: found by probe id, in a run this job does not know).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    pub carrier: String,
    pub name: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub run_id: Option<u64>,
    pub tag: String,
}

/// A dispatch: the name its runs' titles show, its event, and the time
/// the listing of its runs starts from (`null` when found by probe id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dispatch {
    pub carrier: String,
    pub name: String,
    pub event: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub since: Option<String>,
    pub tag: String,
}

/// A discussion: its title and body, and the node id and author's login
/// GitHub gave (`null` in the intent journalled before the mutation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Discussion {
    pub carrier: String,
    pub title: String,
    pub body: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub id: Option<String>,
    #[serde(deserialize_with = "Option::deserialize")]
    pub author: Option<String>,
    pub tag: String,
}

/// A SARIF upload: its ref and commit, its category (the nonce name), and
/// the upload's id GitHub gave (`null` in the intent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scanning {
    pub carrier: String,
    pub git_ref: String,
    pub commit: String,
    pub category: String,
    #[serde(deserialize_with = "Option::deserialize")]
    pub sarif_id: Option<String>,
    pub tag: String,
}

/// An optional field that, when there, holds its value. Why: `"deactivate":
/// null` was never a plant's line, and 0.11.0 did not take it for one;
/// serde's `Option` alone would read it as absent.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl Entry {
    /// The tag the line carries: a MAC over the whole probe id, the
    /// carrier and the nonce.
    pub fn tag(&self) -> &str {
        match self {
            Entry::Object(e) => &e.tag,
            Entry::Permanent(e) => &e.tag,
            Entry::Trace(e) => &e.tag,
            Entry::Dispatch(e) => &e.tag,
            Entry::Discussion(e) => &e.tag,
            Entry::Scanning(e) => &e.tag,
        }
    }

    /// Tags the line (see [`Entry::tag`]).
    pub fn set_tag(&mut self, tag: String) {
        match self {
            Entry::Object(e) => e.tag = tag,
            Entry::Permanent(e) => e.tag = tag,
            Entry::Trace(e) => e.tag = tag,
            Entry::Dispatch(e) => e.tag = tag,
            Entry::Discussion(e) => e.tag = tag,
            Entry::Scanning(e) => e.tag = tag,
        }
    }
}

/// The line for people, before where it lives ("of owner/repo").
impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let esc = |s: &str| escape::bytes(s.as_bytes());
        match self {
            Entry::Permanent(e) => f.write_str(&esc(&e.permanent)),
            Entry::Trace(e) => write!(
                f,
                "the {} {} in {}",
                if e.carrier == super::Gh::RunAnnotation.name() {
                    "annotation"
                } else {
                    "log line"
                },
                esc(&e.name),
                match e.run_id {
                    Some(r) => format!("run {r}"),
                    None => "run A's run".into(),
                }
            ),
            Entry::Dispatch(e) => {
                write!(f, "the {} runs titled with {}", esc(&e.event), esc(&e.name))
            }
            Entry::Discussion(e) => write!(f, "the discussion {}", esc(&e.title)),
            Entry::Scanning(e) => write!(
                f,
                "code scanning analyses of category {} (upload {})",
                esc(&e.category),
                esc(e.sarif_id.as_deref().unwrap_or("not recorded"))
            ),
            Entry::Object(e) => {
                let what = e.matches.values().next().map_or("?", String::as_str);
                let what: String = what.chars().take(80).collect();
                // A carrier's name as it is (0.11.0 printed it so); any
                // other text escaped.
                let carrier = super::Gh::parse(&e.carrier)
                    .map_or_else(|| esc(&e.carrier), |c| c.name().into());
                write!(f, "{carrier} object {}", esc(&what))
            }
        }
    }
}

/// What a plant reports for run B: the nonce, and where run A put it
/// when run B cannot know that from its own run. A needle derived without
/// a receipt is the bare nonce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Needle {
    Planted(Planted),
    Nonce(Nonce),
}

/// A plant's needle: `text`, the nonce; the issue it commented on, the
/// commit it marked, the ref it uploaded for (`ref`), the run it printed
/// in (`run_id`, `run_attempt`), the dispatch's event and the time its
/// runs' listing starts from (`since`), as its carrier has them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Planted {
    pub text: Nonce,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_attempt: Option<u64>,
}

impl Planted {
    /// The needle of a plant of `nonce`, nothing more said yet.
    pub fn of(nonce: &Nonce) -> Planted {
        Planted {
            text: *nonce,
            issue: None,
            commit: None,
            git_ref: None,
            event: None,
            since: None,
            run_id: None,
            run_attempt: None,
        }
    }
}

impl Needle {
    /// The nonce it holds.
    pub fn nonce(&self) -> Nonce {
        match self {
            Needle::Planted(p) => p.text,
            Needle::Nonce(n) => *n,
        }
    }

    /// What the plant said besides the nonce (nothing, for a needle
    /// derived without a receipt).
    pub fn planted(&self) -> Option<&Planted> {
        match self {
            Needle::Planted(p) => Some(p),
            Needle::Nonce(_) => None,
        }
    }
}

impl crate::surface::Needle for Needle {
    fn of_nonce(nonce: &Nonce) -> Option<Needle> {
        Some(Needle::Nonce(*nonce))
    }
}
