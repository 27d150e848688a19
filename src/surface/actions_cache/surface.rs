//! The actions-cache surface type's operations: its config and settings,
//! its control, the plant of each carrier, recovery, the ownership rule,
//! cleanup (by receipt and by probe id) and what watch mode lists.

use super::plant::RESTORE;
use super::recover::Wanted;
use super::{
    ActionsCache, Cache, Entry, ListError, Settings, check_keys_scope, entry_for, facts,
    fixed_version, planted_carrier, probe_prefix,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::http::LazyClient;
use crate::http::answer::{self, Class};
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::carrier::CarrierSet;
use crate::surface::routes::{Kind, Look, Proof, Recovered, Route};
use crate::surface::witness::{self, Side};

/// Run B's routes ([`crate::surface::routes`]): the REST listing, the
/// restore lookup by the agreed key and by the generic prefix.
const LISTING: &str = "listing";
const BY_KEY: &str = "restore-by-key";
const BY_PREFIX: &str = "restore-by-prefix";
use crate::surface::{
    About, CleanupOutcome, Control, Job, JobScope, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Scope, Want, Watch,
};
use ::http::Method;

impl crate::surface::Surface for ActionsCache {
    const NAME: &'static str = "actions-cache";
    const DESCRIPTION: &'static str =
        "the GitHub Actions cache of a repository (cache service v2; REST API to list and delete)";
    const KEYS: &'static [&'static str] = &[
        "results-url",
        "token-env",
        "api-url",
        "repository",
        "api-token-env",
        "consistency-wait",
    ];
    const SCOPES: &'static [Scope<Cache>] = &[Scope {
        key: "keys",
        check: check_keys_scope,
    }];
    const WATCH: Watch<Cache> = Watch::Yes {
        unwatched: &[(
            Cache::RestorePrefix,
            "which entry a prefix restore returns is not in the listing; a new entry is reported under its key, version and content",
        )],
        changes: changes_of,
    };
    const ROUTES: &'static [Route<Cache>] = &[
        Route {
            name: LISTING,
            kind: Kind::Listing,
            carriers: &[Cache::Key, Cache::Version],
        },
        Route {
            name: BY_KEY,
            kind: Kind::ByName,
            carriers: &[Cache::Content],
        },
        Route {
            name: BY_PREFIX,
            kind: Kind::Prefix,
            carriers: &[Cache::RestorePrefix],
        },
    ];
    type Carrier = Cache;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let token_env = crate::surface::env_name(&mut opts, "token-env")?;
        let api_token_env = crate::surface::env_name(&mut opts, "api-token-env")?;
        let rt = crate::github::runtime(&mut opts, token_env, "cache service")?;
        let (found, results_url, no_token) = (rt.token, rt.results_url, rt.missing);
        let api_url = crate::github::api_url_option(&mut opts)?;
        let repository = crate::github::repository_option(&mut opts)?;
        let (api, api_sources) = crate::github::api_token(&opts, api_token_env, &api_url)?;
        let no_listing = match (&api, &repository) {
            (None, _) => Some(format!(
                "listing entries needs an API token with actions: read, and {api_sources} is unset (the action \
                 passes `github-token`; elsewhere set `api-token-env`)"
            )),
            (_, None) => Some(
                "listing entries needs the repository: GITHUB_REPOSITORY is unset; set `repository`"
                    .into(),
            ),
            _ => None,
        };
        let (token_source, token) = found.unzip();
        let (api_token_source, api_token) = api.unzip();
        Ok(Settings {
            results_url,
            token,
            token_source,
            no_token,
            api_url,
            repository,
            api_token,
            api_token_source,
            no_listing,
            cache_mode: opts.env("ACTIONS_CACHE_MODE"),
            consistency_wait_ms: crate::surface::listing::wait_option(&mut opts)?.as_millis()
                as u64,
            control: false,
        })
    }

    fn about(s: &Settings) -> About<Cache> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.repository.as_deref().unwrap_or("?").as_bytes())
        };
        let mut about = facts(s, About::new(format!("of {place}"))).exposure("actions-cache");
        if let Some(why) = &s.no_token {
            about = about.unavailable(why.clone());
        }
        // The listing is the only route to a nonce in a key or version.
        if let Some(why) = &s.no_listing {
            for c in Cache::ALL.iter().filter(|c| c.listed()) {
                about = about.unavailable_of(*c, why.clone());
            }
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::actions_cache::CacheServer::start()?;
        let s = Settings {
            results_url: Some(server.results_url()),
            token: Some(server.runtime_token(&[("refs/heads/runwarden-control", 3)])),
            token_source: Some("the control's own".into()),
            no_token: None,
            api_url: server.api_url(),
            repository: Some("runwarden/control".into()),
            api_token: Some(server.api_token(true)),
            api_token_source: Some("the control's own".into()),
            no_listing: None,
            cache_mode: None,
            consistency_wait_ms: crate::surface::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<ActionsCache, Fault> {
        let client = LazyClient::new([&settings.token, &settings.api_token].into_iter().flatten());
        Ok(ActionsCache { settings, client })
    }

    /// Run A: the route's witness made before the plants, one entry per
    /// carrier, then the witness made after them
    /// ([`crate::surface::witness`]); each entry reserved, uploaded and
    /// finalized as `@actions/cache` does.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Cache>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Nonce>> {
        crate::surface::between(
            jobs,
            Self::PLANTED_LAST,
            journal,
            |side, journal| {
                let _ = self.plant_witness(ctx, side, journal);
            },
            |job, journal| {
                let (key, version, archive) =
                    entry_for(ctx, job.carrier, &job.nonce, job.scope.as_ref());
                self.put(&key, &version, archive, journal)
                    .map(|scope| PlantOutcome::Planted {
                        needle: job.nonce,
                        persistence: None,
                        detail: format!(
                            "entry {} written to scope {scope} of {}; entries on the default \
                             branch are restorable from every branch and pull request",
                            escape::bytes(key.as_bytes()),
                            self.service()
                        ),
                    })
                    .unwrap_or_else(|o| o)
            },
        )
    }

    /// Run B: the listing for the carriers whose nonce is in a key or a
    /// version (their only route), the agreed key for `cache-content`, the
    /// generic prefix for `restore-prefix`.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Cache, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<Recovered> {
        let to_list: Vec<&Wanted> = wanted.iter().filter(|w| w.carrier.listed()).collect();
        // What the listing must show to be current: the restore route's
        // witnesses (before, then after the plants), and the keys of this
        // plant run B knows by name.
        let witnesses: Vec<String> = Side::BOTH
            .iter()
            .map(|s| Self::witness_key(ctx, *s))
            .chain(
                wanted
                    .iter()
                    .filter(|w| matches!(w.carrier, Cache::Content | Cache::RestorePrefix))
                    .map(|w| entry_for(ctx, w.carrier, &w.needle, w.scope.as_ref()).0),
            )
            .collect();
        let mut by_listing = if to_list.is_empty() {
            vec![]
        } else {
            self.recover_listed(ctx, &to_list, &witnesses, notice)
        }
        .into_iter();
        // The restore route's witnesses, read once, only for a miss.
        let restore = std::cell::OnceCell::new();
        let through = |route: &'static str, o: RecoverOutcome| match o {
            RecoverOutcome::NotFound { detail } => Recovered::missed_through(
                route,
                detail,
                restore.get_or_init(|| self.restore_currency(ctx)),
            ),
            o => o.into(),
        };
        wanted
            .iter()
            .map(|w| match w.carrier {
                // (recover_listed answers one outcome per listed carrier;
                // a miss only from a listing that showed every witness and
                // was read whole.)
                Cache::Key | Cache::Version => {
                    match by_listing
                        .next()
                        .expect("one listed outcome per listed carrier")
                    {
                        RecoverOutcome::NotFound { detail } => Recovered::Missed {
                            detail,
                            looks: vec![Look {
                                route: LISTING,
                                proof: Proof::Listed,
                            }],
                        },
                        o => o.into(),
                    }
                }
                Cache::Content => through(BY_KEY, self.recover_content(ctx, w)),
                Cache::RestorePrefix => through(BY_PREFIX, self.recover_prefix(ctx, w, notice)),
            })
            .collect()
    }

    /// Whether a journal entry is this probe's plant: its key holds a
    /// [`crate::surface::tagged_name`] of this probe bound to its version
    /// (inside a declared `keys:` pattern, the pattern's text around it),
    /// and the version is the one that carrier's plant writes. `Invalid`
    /// for anything else.
    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        let (key, version) = (entry.key.as_str(), entry.version.as_str());
        if !entry.scope.as_deref().is_none_or(crate::surface::plain_ref) {
            return Err(Fault::invalid("its scope is not a ref"));
        }
        let fixed = fixed_version();
        // The restore route's witnesses: exactly their names, unscoped.
        if witness::is_witness(ctx, RESTORE, key, &fixed) && version == fixed {
            return Ok(());
        }
        let prefix = probe_prefix(ctx.probe_id);
        // The tagged name's length is fixed by its carrier: at most two
        // candidates per carrier at each place the probe's prefix occurs.
        for (start, _) in key.match_indices(&prefix) {
            for c in Cache::ALL {
                let len =
                    prefix.len() + c.name().len() + if c.in_key() { 1 + 32 } else { 0 } + 1 + 16;
                let Some(name) = key.get(start..start + len) else {
                    continue;
                };
                let Ok(carrier) = Cache::owned(ctx, name, version, &Cache::in_key) else {
                    continue;
                };
                let version_ok = match carrier {
                    Cache::Version => {
                        version
                            .get(..32)
                            .is_some_and(|h| crate::surface::lower_hex(h, 32))
                            && version.get(32..) == fixed.get(32..)
                    }
                    _ => version == fixed,
                };
                if version_ok {
                    return Ok(());
                }
            }
        }
        Err(Fault::invalid(format!(
            "the key {} holds no name a plant of probe {} makes for its version",
            escape::bytes(key.as_bytes()),
            ctx.probe_id
        )))
    }

    /// Deletes an entry by id after checking its key, version and scope.
    fn clean_one(&self, entry: &Entry) -> CleanupOutcome {
        let (key, version) = (entry.key.as_str(), entry.version.as_str());
        let scope = entry.scope.as_deref();
        let evicted = "it is evicted after 7 days unused";
        // (Inside a declared scope the key has the pattern around it.)
        if !key.contains("runwarden-") {
            return CleanupOutcome::Left {
                reason: "not a runwarden cache key; nothing is deleted".into(),
            };
        }
        let (token, repo) = match self.rest() {
            Ok(r) => r,
            Err(why) => {
                return CleanupOutcome::Left {
                    reason: format!("{why}; {evicted}"),
                };
            }
        };
        // Checked before removal: exactly this key and version, in the
        // scope it was written to.
        let mut ids = vec![];
        if let Err(ListError::Denied(m) | ListError::Failed(m)) = self.list(Some(key), &mut |e| {
            if e.key == key && e.version == version && scope.is_none_or(|s| s == e.scope) {
                ids.push(e.id);
            }
        }) {
            return CleanupOutcome::Left {
                reason: format!("{m}; {evicted}"),
            };
        }
        if ids.is_empty() {
            // Not listed: gone, or not listed yet (a listing lags). Only
            // the service's own lookup of exactly this key and version
            // tells them apart.
            return self.clean_unlisted(key, version, scope, token, repo);
        }
        let client = match self.client() {
            Ok(c) => c,
            Err(m) => return CleanupOutcome::Left { reason: m.into() },
        };
        for id in ids {
            let url = format!("{}/repos/{repo}/actions/caches/{id}", self.settings.api_url);
            match client.send(&self.rest_request(Method::DELETE, &url, token)) {
                Ok(r) if r.status == 204 || r.status == 200 || r.status == 404 => {}
                Ok(r) if answer::classify(&(&r).into(), &crate::github::REST) == Class::Refused => {
                    return CleanupOutcome::Left {
                        reason: format!(
                            "the API token ({}) may not delete caches (needs actions: write); {evicted}",
                            self.settings.api_token_source.as_deref().unwrap_or("?")
                        ),
                    };
                }
                Ok(r) => {
                    return CleanupOutcome::Left {
                        reason: format!("deleting it: HTTP {}; {evicted}", r.status),
                    };
                }
                Err(f) => {
                    return CleanupOutcome::Left {
                        reason: format!("deleting it: {f}; {evicted}"),
                    };
                }
            }
        }
        CleanupOutcome::Removed
    }

    /// Cleanup by probe id: finding a probe's entries in the listing.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Cache>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        self.rest()?;
        // By tag, not by derived nonce: the plants of an in-job probe had
        // random nonces, and their tags still verify.
        let mut found = vec![];
        // A plant inside a declared scope has the pattern around its key:
        // then every entry is listed, and each scope's pattern taken off.
        let scopes: Vec<&JobScope> = jobs
            .iter()
            .filter_map(|j| j.scope.as_ref().filter(|s| s.inside))
            .collect();
        let carriers: Vec<Cache> = jobs.iter().map(|j| j.carrier).collect();
        let prefix = probe_prefix(ctx.probe_id);
        let filter = scopes.is_empty().then_some(prefix.as_str());
        self.list(filter, &mut |e| {
            let carrier = std::iter::once(e.key.as_str())
                .chain(scopes.iter().filter_map(|s| s.unplace(&e.key)))
                .find_map(|k| planted_carrier(ctx, k, &e.version));
            let witnessed = witness::is_witness(ctx, RESTORE, &e.key, &e.version);
            if witnessed || carrier.is_some_and(|c| carriers.contains(&c)) {
                found.push(Entry {
                    key: e.key.clone(),
                    version: e.version.clone(),
                    scope: Some(e.scope.clone()),
                });
            }
        })
        .map_err(|e| match e {
            // The service's access control: no look can be had here.
            ListError::Denied(m) => Fault::Unsupported(m),
            ListError::Failed(m) => Fault::Broken(m),
        })?;
        Ok(found.into())
    }

    /// Watch mode: every entry of the repository's cache from the REST
    /// listing run B reads. The listing is sorted in memory before it is
    /// streamed (a cache holds thousands of entries at most: 10 GB per
    /// repository). (What the listing cannot see is `WATCH`.)
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let mut all: Vec<crate::state::snapshot::Entry> = Vec::new();
        self.list(None, &mut |l| {
            all.push(listed(
                vec![
                    component(l.key.as_bytes()),
                    component(l.version.as_bytes()),
                    component(l.scope.as_bytes()),
                ],
                "cache-entry",
                &[("id", l.id.to_string())],
            ))
        })
        .map_err(|e| match e {
            ListError::Denied(r) => {
                SnapshotError::Failed(format!("the cache listing was refused: {r}"))
            }
            ListError::Failed(r) => SnapshotError::Failed(r),
        })?;
        emit_sorted(all, sink)
    }
}

/// A cache entry carries its key, its version and its archive; one saved
/// again under the same key and version (after a delete) its archive.
fn changes_of(c: &Change, _before: &Before) -> Vec<Cache> {
    match c.kind {
        ChangeKind::Created => vec![Cache::Content, Cache::Key, Cache::Version],
        ChangeKind::Removed | ChangeKind::Renamed(_) => vec![Cache::Key],
        ChangeKind::Changed(_) => vec![Cache::Content],
    }
}
