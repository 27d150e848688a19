//! `type: http-cache`: a generic HTTP or WebDAV cache (a build cache, an
//! Artifactory or Nexus generic repository, an nginx or Varnish proxy
//! cache) that two runs can both reach.
//!
//! Run A writes under the configured URL: a `PUT` whose path carries the
//! nonce, a `GET` miss on a path carrying it (a cache that remembers
//! misses keeps it), a `MKCOL` collection named with it, and a `PROPPATCH`
//! dead property holding it on a resource of its own. Run B lists the
//! cache the way the server offers (`PROPFIND` with depth 1, or the index
//! URL the config names) and reads the agreed paths. Cleanup deletes only
//! what A created, after checking each file's content and that each
//! collection is empty. A remembered miss cannot be deleted: it lasts for
//! the cache's negative TTL.
//!
//! Paths are [`super::tagged_name`]s, so leftovers are identifiable and
//! `cleanup --probe-id` takes only names whose tag verifies. Names read
//! from listings are attacker controlled: escaped when shown, never used
//! to build a request except for the exact names this probe derives.

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

/// The dead property the `property` carrier sets.
const PROP_NS: &str = "urn:runwarden:1";

carriers! {
    /// The HTTP cache's carriers.
    pub enum Http {
        CacheKey = "cache-key", UntilEvicted, "the nonce in the path of a PUT; run B finds it in the cache's listing";
        NegativeLookup = "negative-lookup", UntilEvicted, "a GET miss on a path carrying the nonce, which a cache that remembers misses answers from its memory later";
        CollectionName = "collection-name", UntilEvicted, "the nonce in the name of a WebDAV collection (MKCOL), found in the listing";
        Property = "property", UntilEvicted, "the nonce in a WebDAV dead property (PROPPATCH) of an agreed resource, read back with PROPFIND";
    }
}

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The cache's base URL, ending in `/`.
    url: String,
    auth: HttpAuth,
    /// A URL whose body lists the cache's names, instead of PROPFIND.
    index_url: Option<String>,
    /// How long a listing that does not show its witness is retried
    /// (`consistency-wait`).
    #[serde(default = "super::listing::default_wait_ms")]
    consistency_wait_ms: u64,
    control: bool,
}

/// What a journal entry names: a file (PUT) or a collection (MKCOL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Collection,
}

/// One path run A creates under the base URL: journalled before its
/// write; cleanup deletes a file only while it holds what was put
/// (`sha256`, files only), a collection only while it is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    name: String,
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
}

impl Entry {
    /// A file holding `body`.
    fn file(name: &str, body: &[u8]) -> Entry {
        Entry {
            name: name.to_string(),
            kind: Kind::File,
            sha256: Some(sha256_hex(body)),
        }
    }

    /// A collection.
    fn collection(name: &str) -> Entry {
        Entry {
            name: name.to_string(),
            kind: Kind::Collection,
            sha256: None,
        }
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let slash = if self.kind == Kind::Collection {
            "/"
        } else {
            ""
        };
        write!(f, "{}{slash}", escape::bytes(self.name.as_bytes()))
    }
}

/// What a file plant holds: no nonce (the carriers are the name and the
/// property), the same for every file of a probe.
fn innocuous(probe_id: &str) -> Vec<u8> {
    format!("runwarden http-cache plant, probe {probe_id}\n").into_bytes()
}

fn sha256_hex(data: &[u8]) -> String {
    crate::nonce::to_hex(&Sha256::digest(data))
}

/// The path (relative to the base URL) of a carrier's plant.
fn plant_name(ctx: &RunCtx<'_>, carrier: Http, nonce: &Nonce) -> String {
    let with_nonce = carrier != Http::Property;
    super::tagged_name(ctx, carrier.name(), with_nonce.then_some(nonce), "")
}

impl Http {
    /// Whether the listing is a route to it (negative-lookup's first).
    fn is_listed(self) -> bool {
        matches!(
            self,
            Http::CacheKey | Http::CollectionName | Http::NegativeLookup
        )
    }
}

/// An open HTTP cache.
pub struct HttpCache {
    settings: Settings,
    client: LazyClient,
}
