//! Run B's routes: reads by agreed key, as a build reads the cache (no
//! listing), each miss shown current by the witnesses run A made through
//! the same route before and after the plants. The witness made after is
//! read first (a lag shows there before the plants are read), the one
//! made before last (an eviction that a read of the plants makes room for
//! shows there after).

use super::plant::ROUTE;
use super::protocol::{Got, Read};
use super::{Build, BuildCache, Kind, PLAIN_TAG, Protocol, agreed, bazel, cas_body, key_of};
use crate::escape;
use crate::nonce::Nonce;
use crate::surface::RecoverOutcome;
use crate::surface::routes::{self, Recovered};
use crate::surface::witness::{self, Currency, Seen, Side};
use crate::surface::{RunCtx, Want};

/// Run B's routes ([`crate::surface::routes`]): the entry at an agreed key
/// (for Bazel, the action result and the blobs it points at), and a
/// Bazel blob at a key run B computes.
pub(super) const ROUTES: &[routes::Route<Build>] = &[
    routes::Route {
        name: ROUTE,
        kind: routes::Kind::ByName,
        carriers: &[Build::EntryContent, Build::ArtifactTag],
    },
    routes::Route {
        name: "cas",
        kind: routes::Kind::ByName,
        carriers: &[Build::CasBlob],
    },
];

/// What a read of one witness found: its entry, and (Bazel) the blob its
/// action result points at.
#[derive(Clone, Debug, PartialEq, Eq)]
enum W {
    There,
    Missing,
    /// The action result is there and its blob is gone: the store dropped
    /// part of it.
    Partial,
    /// The read was refused (a 403): run B may not read here, or the
    /// cache answers a missing key so.
    Refused(String),
    Failed(String),
}

impl W {
    /// Whether the cache answered the read (there or not).
    fn answered(&self) -> bool {
        matches!(self, W::There | W::Missing | W::Partial)
    }
}

struct Witnessed {
    entry: W,
    blob: W,
    /// Turborepo: the tag the server handed back with it.
    tag: Option<String>,
}

/// What the witnesses' tags say of the server (Turborepo).
#[derive(PartialEq)]
enum Tags {
    /// Both came back with the tag run A sent.
    Kept,
    /// Neither came back with one: the server keeps no tags.
    NotKept,
    /// Anything else: nothing can be said.
    Unclear,
}

impl BuildCache {
    /// Reads the witness `name` through the route run B reads plants by.
    fn read_witness(&self, name: &str) -> Witnessed {
        let key = key_of(name);
        let w = |r: &Read, ours: &dyn Fn(&Got) -> bool| match r {
            Read::There(g) if ours(g) => W::There,
            // (Something else at the witness's key is no witness.)
            Read::There(_) | Read::Absent => W::Missing,
            Read::Refused(m) => W::Refused(m.clone()),
            Read::Failed(m) => W::Failed(m.clone()),
        };
        let read = self.read(Kind::Entry, &key, None);
        let tag = match &read {
            Read::There(g) => g.tag.clone(),
            _ => None,
        };
        let entry = w(&read, &|g| g.names(name));
        if self.settings.protocol != Protocol::Bazel || entry != W::There {
            let blob = entry.clone();
            return Witnessed { entry, blob, tag };
        }
        let Read::There(g) = &read else {
            unreachable!("a witness there was read")
        };
        // An action result holding the witness inline (its blob's write
        // was refused) is one; there is then no blob to read.
        if bazel::inline_text(&g.head).is_some() {
            return Witnessed {
                entry: W::There,
                blob: W::Missing,
                tag,
            };
        }
        let Some(hash) = bazel::decode(&g.head).and_then(|d| d.digests.first().cloned()) else {
            return Witnessed {
                entry: W::Missing,
                blob: W::Missing,
                tag,
            };
        };
        let blob = w(&self.read(Kind::Blob, &hash, None), &|b| b.names(name));
        let entry = if blob == W::There {
            W::There
        } else {
            W::Partial
        };
        Witnessed { entry, blob, tag }
    }

    /// Looks for one wanted carrier at its agreed key. A miss is only an
    /// agreed key with nothing at it: run B knows what run A wrote there,
    /// so anything else at it (overwritten, someone else's) is ERROR.
    fn look(&self, ctx: &RunCtx<'_>, w: &Want<Build, Nonce>) -> RecoverOutcome {
        let name = agreed(ctx, w.carrier);
        let hex = w.needle.hex();
        let (kind, key) = match w.carrier {
            Build::CasBlob => (Kind::Blob, super::sha256_hex(&cas_body(&name, &w.needle))),
            _ => (Kind::Entry, key_of(&name)),
        };
        let place = self.place(kind, &key);
        let g = match self.read(kind, &key, Some(&hex)) {
            Read::There(g) => g,
            Read::Absent => {
                return RecoverOutcome::NotFound {
                    detail: format!("GET {place}: nothing at the agreed key"),
                };
            }
            Read::Refused(reason) => return RecoverOutcome::Denied { reason },
            Read::Failed(reason) => return RecoverOutcome::Error { reason },
        };
        let not_ours = |what: &str| RecoverOutcome::Error {
            reason: format!(
                "GET {place}: {what} at the agreed key, and not what run A wrote there (overwritten, or someone else's): the plant's absence proves nothing"
            ),
        };
        match w.carrier {
            // Its key is the SHA-256 of what holds the nonce: a blob there
            // whose content hashes to it is the message.
            Build::CasBlob if g.found || g.sha256 == key => RecoverOutcome::Found {
                detail: format!(
                    "GET {place}: the cache holds the blob whose key run B computed from the nonce"
                ),
            },
            Build::CasBlob => RecoverOutcome::Error {
                reason: format!(
                    "GET {place}: the cache answered with content whose SHA-256 is not its key"
                ),
            },
            _ if g.found => RecoverOutcome::Found {
                detail: format!("GET {place} returns the nonce"),
            },
            Build::ArtifactTag => match &g.tag {
                Some(t) if t.contains(&hex) => RecoverOutcome::Found {
                    detail: format!("GET {place}: its x-artifact-tag is the nonce"),
                },
                _ if !(g.whole && g.head == super::body(&name, None)) => not_ours("an artifact"),
                Some(t) => RecoverOutcome::NotFound {
                    detail: format!(
                        "GET {place}: run A's artifact, its x-artifact-tag {}",
                        escape::bytes(t.as_bytes())
                    ),
                },
                None => RecoverOutcome::NotFound {
                    detail: format!("GET {place}: run A's artifact, with no x-artifact-tag"),
                },
            },
            _ if self.settings.protocol == Protocol::Bazel => self.follow(&place, &g, &hex),
            _ => not_ours("an entry without the nonce"),
        }
    }

    /// Bazel: the blobs an action result `g` (at `place`, without the
    /// nonce itself) points at, read for the nonce `hex`, as a build
    /// restores its outputs. Finding it nowhere is never a miss: an action
    /// result is at the agreed key, and run A's points at the nonce.
    fn follow(&self, place: &str, g: &Got, hex: &str) -> RecoverOutcome {
        let error = |reason: String| RecoverOutcome::Error { reason };
        if !g.whole {
            return error(format!(
                "GET {place}: an action result larger than 64 KiB, whose outputs were not followed"
            ));
        }
        let Some(d) = bazel::decode(&g.head) else {
            return error(format!(
                "GET {place}: something that is no action result is at the agreed key, without the nonce: not run A's plant"
            ));
        };
        if d.more {
            return error(format!(
                "GET {place}: an action result pointing at more than {} blobs, not all followed",
                bazel::MAX_DIGESTS
            ));
        }
        let mut gone = 0;
        for h in &d.digests {
            let bp = self.place(Kind::Blob, h);
            match self.read(Kind::Blob, h, Some(hex)) {
                Read::There(b) if b.found => {
                    return RecoverOutcome::Found {
                        detail: format!("GET {place}: its output {bp} holds the nonce"),
                    };
                }
                Read::There(_) => {}
                Read::Absent => gone += 1,
                Read::Refused(reason) => return RecoverOutcome::Denied { reason },
                Read::Failed(reason) => return error(reason),
            }
        }
        if gone > 0 {
            // A build would take it for a miss; run B cannot tell what the
            // missing blob held.
            return error(format!(
                "GET {place}: an action result {gone} of whose {} output blobs are gone (an eviction?): what they held cannot be told",
                d.digests.len()
            ));
        }
        error(format!(
            "GET {place}: an action result whose {} output blobs do not hold the nonce: not run A's plant (overwritten, or someone else's)",
            d.digests.len()
        ))
    }

    /// Run B: the later witness, every wanted carrier, the earlier witness;
    /// each miss counts only where both witnesses were seen through its
    /// route.
    pub(super) fn recover_all(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Build, Nonce>],
    ) -> Vec<Recovered> {
        let after = self.read_witness(&witness::name(ctx, ROUTE, Side::After, ""));
        let looked: Vec<RecoverOutcome> = wanted.iter().map(|w| self.look(ctx, w)).collect();
        let before = self.read_witness(&witness::name(ctx, ROUTE, Side::Before, ""));
        let by_key = currency(
            "the cache's reads by agreed key",
            &before.entry,
            &after.entry,
        );
        let cas = currency(
            "the cache's reads of blobs by key",
            &before.blob,
            &after.blob,
        );
        let tags = match (before.tag.as_deref(), after.tag.as_deref()) {
            (Some(PLAIN_TAG), Some(PLAIN_TAG)) => Tags::Kept,
            (None, None) => Tags::NotKept,
            _ => Tags::Unclear,
        };
        looked
            .into_iter()
            .zip(wanted)
            .map(|(o, w)| {
                let (route, current, seen) = match w.carrier {
                    Build::CasBlob => ("cas", &cas, [&before.blob, &after.blob]),
                    _ => (ROUTE, &by_key, [&before.entry, &after.entry]),
                };
                match o {
                    // The same credential read both witnesses through the
                    // route: a 403 to this one key is no access control (a
                    // backend that may not list answers a missing key so).
                    RecoverOutcome::Denied { reason } if seen.iter().all(|s| s.answered()) => {
                        Recovered::Error {
                            reason: format!(
                                "{reason}, while it answered the reads of run A's witnesses through the same route: a 403 for a missing key (a bucket behind the cache that may not be listed), not access control, so whether the plant is there cannot be told"
                            ),
                        }
                    }
                    RecoverOutcome::NotFound { detail } if w.carrier == Build::ArtifactTag => {
                        match tags {
                            Tags::NotKept => Recovered::missed_through(
                                route,
                                format!("{detail}; the server handed back no x-artifact-tag with the witnesses either (turborepo-remote-cache keeps tags only when it verifies signatures): the tag carries nothing here"),
                                current,
                            ),
                            Tags::Kept => Recovered::Error {
                                reason: format!("{detail}, while the witnesses came back with their tags: the server dropped or changed this one, so its absence proves nothing"),
                            },
                            Tags::Unclear => Recovered::Error {
                                reason: format!("{detail}; the witnesses' tags do not show whether the server keeps tags ({}; {}), so its absence proves nothing", shown(&before.tag), shown(&after.tag)),
                            },
                        }
                    }
                    RecoverOutcome::NotFound { detail } => {
                        Recovered::missed_through(route, detail, current)
                    }
                    o => o.into(),
                }
            })
            .collect()
    }
}

/// A witness's tag, for people.
fn shown(tag: &Option<String>) -> String {
    match tag {
        Some(t) => format!("tag {}", escape::bytes(t.as_bytes())),
        None => "no tag".into(),
    }
}

/// What the witnesses read through `route` say of its misses.
fn currency(route: &str, before: &W, after: &W) -> Currency {
    for w in [after, before] {
        if let W::Failed(why) | W::Refused(why) = w {
            return Currency::NotCurrent(format!(
                "whether run A's witnesses are there could not be told through {route} ({why}), so nothing shows it current"
            ));
        }
    }
    if *before == W::Partial || *after == W::Partial {
        return Currency::NotCurrent(witness::dropped(route));
    }
    let seen = Seen {
        before: *before == W::There,
        after: *after == W::There,
    };
    witness::currency(route, seen, || None)
}
