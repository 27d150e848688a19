//! The refs a plant makes: their names (every one carries the probe id;
//! a declared scope places some inside it), the needles recovery looks
//! for, and the marker form a forged ref is recognised by.

use super::{Needle, Remote};
use crate::surface::routes::{Kind, Route};
use crate::surface::{JobScope, RunCtx};

/// Carriers whose nonce is in a ref name (found by `ls-remote` alone).
pub(super) fn is_name_carrier(carrier: Remote) -> bool {
    matches!(
        carrier,
        Remote::BranchName | Remote::TagName | Remote::CustomRef | Remote::DeletedRef
    )
}

/// The ref a carrier is planted under (none for `unreachable-object`, which
/// rides on the deleted branch). Every name carries the probe id; a name
/// without a nonce ends in the surface's tag ([`RunCtx::surface_tag`]), so
/// two surfaces on one remote never push the same ref. Inside a declared
/// `refs:` scope, the pattern's `*` becomes
/// `runwarden-<probe-id>-<nonce or carrier[-tag]>`.
pub(super) fn ref_for(
    carrier: Remote,
    ctx: &RunCtx<'_>,
    hex: &str,
    scope: Option<&JobScope>,
) -> Option<String> {
    ref_named(carrier, ctx.probe_id, &ctx.surface_tag(), hex, scope)
}

/// [`ref_for`] by its parts: the probe id and the surface's tag (empty:
/// 0.11.0's names, bound to no surface).
pub(super) fn ref_named(
    carrier: Remote,
    probe: &str,
    stag: &str,
    hex: &str,
    scope: Option<&JobScope>,
) -> Option<String> {
    let tagged = |name: String| match stag {
        "" => name,
        t => format!("{name}-{t}"),
    };
    if let Some(sc) = scope.filter(|s| s.inside) {
        let leaf = if is_name_carrier(carrier) {
            hex.to_string()
        } else {
            tagged(carrier.name().to_string())
        };
        return Some(
            sc.value
                .replacen('*', &format!("runwarden-{probe}-{leaf}"), 1),
        );
    }
    let heads = format!("refs/heads/runwarden/{probe}");
    Some(match carrier {
        Remote::BranchName => format!("{heads}/{hex}"),
        Remote::TagName => format!("refs/tags/runwarden-{probe}-{hex}"),
        Remote::CustomRef => format!("refs/runwarden/{probe}/{hex}"),
        Remote::DeletedRef => format!("{heads}/deleted-{hex}"),
        Remote::AnnotatedTagMessage => tagged(format!("refs/tags/runwarden-{probe}-annotated")),
        Remote::Notes => tagged(format!("refs/notes/runwarden-{probe}")),
        Remote::UnreachableObject => return None,
        Remote::CommitMessage
        | Remote::AuthorName
        | Remote::AuthorEmail
        | Remote::FileContent
        | Remote::FilePath => tagged(format!("{heads}/{carrier}")),
    })
}

/// The nonce of a ref named like a name-carrier marker of `probe`: a last
/// component `<32 hex>` under `…/runwarden/<probe>/` (`deleted-<32 hex>`
/// too), or `runwarden-<probe>-<32 hex>` (`tag`) anywhere (tags, scoped
/// refs).
pub(super) fn marker_hex<'n>(name: &'n [u8], probe: &str, tag: &str) -> Option<&'n str> {
    let name = std::str::from_utf8(name).ok()?;
    let (dir, leaf) = name.rsplit_once('/')?;
    let hex = if let Some(h) = leaf.strip_prefix(tag) {
        h
    } else if dir.ends_with(&format!("runwarden/{probe}")) {
        leaf.strip_prefix("deleted-").unwrap_or(leaf)
    } else {
        return None;
    };
    (hex.len() == 32
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(hex)
}

/// What recovery looks for in a carrier that lives in a ref: the nonce,
/// and for content carriers the ref it is agreed to be under.
pub(super) fn ref_needle(carrier: Remote, hex: &str, refname: &str) -> Needle {
    Needle {
        text: hex.to_string(),
        refname: (!is_name_carrier(carrier)).then(|| refname.to_string()),
        sha: None,
        derived: false,
    }
}

/// The namespace a carrier's ref must live in to be that carrier.
pub(super) fn namespace(carrier: Remote) -> Option<&'static str> {
    match carrier {
        Remote::BranchName => Some("refs/heads/"),
        Remote::TagName | Remote::AnnotatedTagMessage => Some("refs/tags/"),
        Remote::Notes => Some("refs/notes/"),
        _ => None,
    }
}

/// Run B's routes ([`crate::surface::routes`]): the ref advertisement for
/// the carriers whose nonce is a ref's name, the fetch of the agreed refs
/// for those whose nonce is in what a ref holds, the fetch by id for the
/// unreachable commit.
pub(super) const ROUTES: &[Route<Remote>] = &[
    Route {
        name: "ls-remote",
        kind: Kind::Listing,
        carriers: &[
            Remote::BranchName,
            Remote::TagName,
            Remote::CustomRef,
            Remote::DeletedRef,
        ],
    },
    Route {
        name: "fetch",
        kind: Kind::ByName,
        carriers: &[
            Remote::AnnotatedTagMessage,
            Remote::Notes,
            Remote::CommitMessage,
            Remote::AuthorName,
            Remote::AuthorEmail,
            Remote::FileContent,
            Remote::FilePath,
        ],
    },
    Route {
        name: "fetch-by-id",
        kind: Kind::ById,
        carriers: &[Remote::UnreachableObject],
    },
];

/// A carrier's route, and why a miss there is current by the protocol.
pub(super) fn route_of(carrier: Remote) -> (&'static str, &'static str) {
    if is_name_carrier(carrier) {
        ("ls-remote", "git's one ref advertisement, whole")
    } else if carrier == Remote::UnreachableObject {
        ("fetch-by-id", "the remote's own answer to a fetch by id")
    } else {
        (
            "fetch",
            "a fetch of the refs the one advertisement showed (moved refs read where they went)",
        )
    }
}
