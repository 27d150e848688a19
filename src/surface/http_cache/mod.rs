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

mod cleanup;
mod plant;
mod protocol;
mod recover;
mod watch;

use super::carrier::{CarrierSet, carriers};
use super::{
    Carrier, CleanupOutcome, Control, HttpAuth, Notice, PlantJob, PlantOutcome, RecoverOutcome,
    RunCtx, SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::{LazyClient, check_url};
use crate::nonce::Nonce;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub struct HttpCache;

/// The dead property the `property` carrier sets.
const PROP_NS: &str = "urn:runwarden:1";

carriers! {
    /// The HTTP cache's carriers.
    enum Http {
        CacheKey = "cache-key", UntilEvicted, "the nonce in the path of a PUT; run B finds it in the cache's listing";
        NegativeLookup = "negative-lookup", UntilEvicted, "a GET miss on a path carrying the nonce, which a cache that remembers misses answers from its memory later";
        CollectionName = "collection-name", UntilEvicted, "the nonce in the name of a WebDAV collection (MKCOL), found in the listing";
        Property = "property", UntilEvicted, "the nonce in a WebDAV dead property (PROPPATCH) of an agreed resource, read back with PROPFIND";
    }
}

#[derive(Clone, Serialize, Deserialize)]
struct Settings {
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

impl SurfaceType for HttpCache {
    fn name(&self) -> &'static str {
        "http-cache"
    }

    fn description(&self) -> &'static str {
        "a generic HTTP or WebDAV cache at a URL (PUT, cached misses, MKCOL, PROPPATCH; listed with PROPFIND)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "url",
            "token-env",
            "username-env",
            "password-env",
            "index-url",
            "consistency-wait",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let Some((url, pos)) = opts.string("url")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "an http-cache surface needs `url:` (the cache's base URL)",
            ));
        };
        check_url(&url).map_err(|m| opts.error(pos, format!("`url`: {m}")))?;
        if url.contains('?') || url.contains('#') {
            return Err(opts.error(pos, "`url`: no query or fragment: a base URL"));
        }
        let index_url = match opts.string("index-url")? {
            Some((u, p)) => {
                check_url(&u).map_err(|m| opts.error(p, format!("`index-url`: {m}")))?;
                Some(u)
            }
            None => None,
        };
        let auth = HttpAuth::from_config(&mut opts)?;
        let url = if url.ends_with('/') {
            url
        } else {
            format!("{url}/")
        };
        let s = Settings {
            url,
            auth,
            index_url,
            consistency_wait_ms: super::listing::wait_option(&mut opts)?.as_millis() as u64,
            control: false,
        };
        Ok(serde_json::to_value(s).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, Fault> {
        let server = crate::loopback::dav::DavServer::start(false)?;
        let token = server.token()?;
        let s = Settings {
            url: server.url(),
            auth: HttpAuth::bearer_for_control(token),
            index_url: None,
            consistency_wait_ms: super::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_listing(
            serde_json::to_value(s).expect("settings serialize"),
            server,
        ))
    }

    fn exposures(&self, settings: &Value, _carrier: &str, _env: super::Env<'_>) -> Vec<String> {
        serde_json::from_value::<Settings>(settings.clone())
            .ok()
            .and_then(|s| crate::http::origin(&s.url))
            .map(|o| vec![format!("cache:{o}")])
            .unwrap_or_default()
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        vec![
            ("credentials", s.auth.describe()),
            (
                "listing",
                match &s.index_url {
                    Some(u) => format!("GET {}", escape::bytes(u.as_bytes())),
                    None => "PROPFIND depth 1".into(),
                },
            ),
        ]
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn crate::surface::Instance>, Fault> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| Fault::invalid("bad http-cache settings"))?;
        let client = LazyClient::new(s.auth.secrets());
        Ok(Box::new(Instance { s, client }))
    }
}

struct Instance {
    s: Settings,
    client: LazyClient,
}

impl crate::surface::Instance for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        self.s.auth.missing.clone()
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        match Http::of_job(job) {
            Ok(carrier) => self.plant_carrier(ctx, carrier, job, created),
            Err(o) => o,
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_carriers(ctx, wanted, notice)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        self.find_plants(ctx, jobs)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
        let name = entry["name"]
            .as_str()
            .ok_or_else(|| Fault::invalid("no name"))?;
        let c = Http::owned(ctx, name, "", &|c| c != Http::Property)?;
        let ok = match (c, entry["kind"].as_str()) {
            (Http::CollectionName, Some("collection")) => true,
            (Http::CacheKey | Http::Property, Some("file")) => {
                entry["sha256"].as_str() == Some(sha256_hex(&innocuous(ctx.probe_id)).as_str())
            }
            _ => false,
        };
        ok.then_some(())
            .ok_or_else(|| Fault::invalid(format!("a {c} plant makes no such entry")))
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.clean_entry(entry)
    }

    fn watch(&self) -> Result<&dyn super::Watchable, &'static str> {
        Ok(self)
    }

    fn describe(&self, entry: &Value) -> String {
        let name = entry["name"].as_str().unwrap_or("?");
        let slash = if entry["kind"] == "collection" {
            "/"
        } else {
            ""
        };
        format!(
            "{}{slash} under {}",
            escape::bytes(name.as_bytes()),
            if self.s.control {
                "the control".to_string()
            } else {
                self.shown()
            }
        )
    }
}
