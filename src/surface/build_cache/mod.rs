//! `type: build-cache`: a content-addressed remote build cache that every
//! CI run of a repository shares: Bazel's HTTP cache (`/ac/` action
//! results pointing at `/cas/` blobs), Gradle's HTTP build cache
//! (`<url><key>`), Nx's self-hosted remote cache (`/v1/cache/<hash>`) and
//! Turborepo's remote cache API (`/v8/artifacts/<hash>`).
//!
//! These caches have no listing: a build finds an entry by computing its
//! key from its inputs, and so does a poisoned one. Both runs here derive
//! the agreed keys from the probe id and the surface's name ([`key_of`]
//! over a [`super::tagged_name`]), as builds derive theirs. Run A writes
//! the nonce into the entry at an agreed key (for Bazel, an action result
//! whose output is a blob holding it), into an artifact's
//! `x-artifact-tag` (Turborepo), or into a blob whose content-addressed
//! key run B can compute (Bazel's CAS). Run B reads the agreed keys.
//!
//! A miss counts only with both witnesses seen through the same route:
//! two entries at agreed keys run A writes before and after the plants
//! ([`super::witness`]); a store that drops entries proves nothing closed.
//! A refusal is the cache's 403 to the very write or read, by a
//! credential it accepted; a 401 to a credential is ERROR (the cache did
//! not take it).
//!
//! Nothing is lost: every entry is journalled before its write, and
//! cleanup deletes only an entry that still holds exactly what was
//! written and names this probe's tagged name, and only where the server
//! takes a DELETE (an nginx cache with `dav_methods DELETE`). Turborepo's
//! and Nx's APIs delete nothing one by one (Turborepo's `POST /v8/clean`
//! removes every artifact of a team not read for N days, whoever wrote
//! it: never used): there, and on a server that refuses DELETE, carriers
//! are planted only with `permanent: true`, and what they wrote is listed
//! as kept, by key.

mod bazel;
mod config;
mod plant;
mod protocol;
mod recover;
mod surface;

use super::carrier::carriers;
use super::{HttpAuth, RunCtx};
use crate::escape;
use crate::http::LazyClient;
use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

carriers! {
    /// The build cache's carriers.
    pub enum Build {
        EntryContent = "entry-content", UntilEvicted, "the nonce in the cache entry at an agreed key (Bazel: an action result at /ac/<key> whose output is a /cas/ blob holding it; Gradle and Nx: the entry; Turborepo: the artifact); run B reads that key, as a build that computes it does (no listing)";
        ArtifactTag = "artifact-tag", UntilEvicted, "Turborepo only: the nonce in the x-artifact-tag of an artifact at an agreed key, which the server hands back with the artifact; run B reads that key (no listing)";
        CasBlob = "cas-blob", UntilEvicted, "Bazel only: the nonce in a content-addressed blob no action result points at, whose key (/cas/<sha256>) run B computes from the nonce it looks for (no listing)";
    }
}

/// Which API the cache speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Bazel,
    Gradle,
    Nx,
    Turborepo,
}

impl Protocol {
    pub const ALL: [Protocol; 4] = [
        Protocol::Bazel,
        Protocol::Gradle,
        Protocol::Nx,
        Protocol::Turborepo,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Bazel => "bazel",
            Protocol::Gradle => "gradle",
            Protocol::Nx => "nx",
            Protocol::Turborepo => "turborepo",
        }
    }

    /// The API's name in prose.
    pub fn title(self) -> &'static str {
        match self {
            Protocol::Bazel => "Bazel",
            Protocol::Gradle => "Gradle",
            Protocol::Nx => "Nx",
            Protocol::Turborepo => "Turborepo",
        }
    }

    /// Why nothing of the API deletes one entry, where it has none.
    fn no_delete(self) -> String {
        match self {
            Protocol::Turborepo => "Turborepo's API has no delete for one artifact (its POST /v8/clean removes every artifact of a team not read for N days, whoever wrote it: runwarden never calls it)".into(),
            p => format!("{}'s API has no delete for one entry", p.title()),
        }
    }

    /// Whether the API has a delete for one entry at all. Bazel's and
    /// Gradle's HTTP caches are plain HTTP stores, whose server may take a
    /// DELETE (nginx with `dav_methods DELETE`); Turborepo's API (and
    /// Vercel's) and Nx's specification have none.
    fn may_delete(self) -> bool {
        matches!(self, Protocol::Bazel | Protocol::Gradle)
    }
}

/// Turborepo's team, as its query names it: `teamId` for an id (Vercel's
/// start with `team_`), else `slug`, as turbo itself sends `TURBO_TEAM`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    param: String,
    value: String,
}

impl Team {
    fn new(value: &str) -> Team {
        let param = if value.starts_with("team_") {
            "teamId"
        } else {
            "slug"
        };
        Team {
            param: param.into(),
            value: value.into(),
        }
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The cache's base URL, ending in `/`: the entries are under it.
    url: String,
    protocol: Protocol,
    auth: HttpAuth,
    team: Option<Team>,
    /// `permanent: true`: carriers whose entries cannot be deleted here
    /// are planted all the same, and kept (listed by key).
    #[serde(default)]
    permanent: bool,
    control: bool,
}

/// What is at a journal entry's URL: an entry at an agreed key (an action
/// result, a Gradle or Nx entry, a Turborepo artifact), or a Bazel CAS
/// blob, at the SHA-256 of its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Entry,
    Blob,
}

/// One thing run A writes: journalled before its write. `name` is the
/// tagged name it belongs to (a carrier's, a witness's, the delete
/// check's), which its content carries; `key` is where it is (an entry:
/// [`key_of`] the name; a blob: its content's SHA-256); `sha256`, what
/// was written. Cleanup deletes it only while it holds exactly that and
/// names `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    name: String,
    kind: Kind,
    key: String,
    sha256: String,
}

impl Entry {
    fn at_key(name: &str, body: &[u8]) -> Entry {
        Entry {
            name: name.into(),
            kind: Kind::Entry,
            key: key_of(name),
            sha256: sha256_hex(body),
        }
    }

    fn blob(name: &str, body: &[u8]) -> Entry {
        let sha = sha256_hex(body);
        Entry {
            name: name.into(),
            kind: Kind::Blob,
            key: sha.clone(),
            sha256: sha,
        }
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            Kind::Entry => "entry",
            Kind::Blob => "blob",
        };
        write!(
            f,
            "{what} {} ({})",
            escape::bytes(self.key.as_bytes()),
            escape::bytes(self.name.as_bytes())
        )
    }
}

/// The agreed key of a tagged name: 64 hex digits, the form every one of
/// these caches takes (Bazel's action keys are SHA-256), derived as a
/// build derives its keys from its inputs.
pub(crate) fn key_of(name: &str) -> String {
    sha256_hex(format!("runwarden-build-cache/1\0{name}").as_bytes())
}

/// The agreed name of a carrier's plant (no nonce in it: both runs
/// derive it).
fn agreed(ctx: &RunCtx<'_>, carrier: Build) -> String {
    super::tagged_name(ctx, carrier.name(), None, "")
}

/// What an entry of `name` holds: a line naming it, and the nonce's hex
/// when it carries one. Cleanup takes only content that names its entry.
fn body(name: &str, nonce: Option<&Nonce>) -> Vec<u8> {
    let mut b = format!("runwarden build-cache entry {name}\n");
    if let Some(n) = nonce {
        b.push_str(&n.hex());
        b.push('\n');
    }
    b.into_bytes()
}

/// The cas-blob carrier's blob: what run B computes from the nonce it
/// looks for, and so its key.
fn cas_body(name: &str, nonce: &Nonce) -> Vec<u8> {
    format!("runwarden build-cache blob {name}\n{}\n", nonce.hex()).into_bytes()
}

/// Whether `bytes` is exactly what a plant of `name` writes as a plain
/// entry or blob: [`body`] (with or without a nonce's 32 hex digits) or
/// [`cas_body`]. Cleanup and cleanup by probe id take nothing else: a
/// blob is at its content's hash whatever it holds, so only its whole
/// form shows it is runwarden's.
fn plain_form(name: &str, bytes: &[u8]) -> bool {
    ["entry", "blob"].iter().any(|what| {
        let head = format!("runwarden build-cache {what} {name}\n");
        let Some(rest) = bytes.strip_prefix(head.as_bytes()) else {
            return false;
        };
        let nonce = |r: &[u8]| {
            r.len() == 33
                && r[32] == b'\n'
                && r[..32]
                    .iter()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        (*what == "entry" && rest.is_empty()) || nonce(rest)
    })
}

/// Whether `bytes` is exactly an action result a Bazel plant of `name`
/// writes: one output at `runwarden/<name>` pointing at a blob of a plain
/// entry's size, or no output and a plain entry inline (its stdout).
fn action_result_form(name: &str, bytes: &[u8]) -> bool {
    if let Some(text) = bazel::inline_text(bytes) {
        return plain_form(name, text);
    }
    let Some(d) = bazel::decode(bytes) else {
        return false;
    };
    let path = format!("runwarden/{name}");
    let [hash] = d.digests.as_slice() else {
        return false;
    };
    let plain = body(name, None).len();
    [plain, plain + 33]
        .iter()
        .any(|n| bazel::action_result(&path, hash, *n) == bytes)
}

/// The tag every artifact run A writes to a Turborepo cache carries, but
/// artifact-tag's: a server that verifies signatures answers an artifact
/// stored without one as missing.
const PLAIN_TAG: &str = "runwarden";

fn sha256_hex(data: &[u8]) -> String {
    crate::nonce::to_hex(&Sha256::digest(data))
}

/// An open build cache.
pub struct BuildCache {
    settings: Settings,
    client: LazyClient,
}
