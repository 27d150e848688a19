//! The actions-artifacts surface type's operations: its config and
//! settings, its control, the upload of each carrier, recovery, the
//! ownership rule, cleanup (by receipt and by probe id) and what watch mode
//! lists.

use super::plant::{Create, Finalize};
use super::recover::Look;
use super::recover::{ROUTES, route_of};
use super::{
    ActionsArtifacts, Artifact, Entry, Item, Named, Settings, TwirpError, archive, artifact_name,
    facts, planted_carrier,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::github::host_of;
use crate::http::LazyClient;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::carrier::CarrierSet;
use crate::surface::{
    About, CleanupOutcome, Control, Job, Journal, Notice, PlantOutcome, RecoverOutcome, RunCtx,
    Want, Watch,
};
use serde_json::json;

impl crate::surface::Surface for ActionsArtifacts {
    const NAME: &'static str = "actions-artifacts";
    const DESCRIPTION: &'static str = "the workflow artifacts of a repository (artifact v4 results service to upload; REST API to list, download and delete)";
    const KEYS: &'static [&'static str] = &[
        "results-url",
        "token-env",
        "api-url",
        "repository",
        "api-token-env",
        "consistency-wait",
    ];
    const WATCH: Watch<Artifact> = Watch::Yes {
        unwatched: &[],
        changes: changes_of,
    };
    const ROUTES: &'static [crate::surface::routes::Route<Artifact>] = ROUTES;
    type Carrier = Artifact;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Nonce;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let token_env = crate::surface::env_name(&mut opts, "token-env")?;
        let api_token_env = crate::surface::env_name(&mut opts, "api-token-env")?;
        let rt = crate::github::runtime(&mut opts, token_env, "results service")?;
        let (token, results_url, no_token) = (rt.token, rt.results_url, rt.missing);
        let api_url = crate::github::api_url_option(&mut opts)?;
        let repository = crate::github::repository_option(&mut opts)?;
        let (api, api_sources) = crate::github::api_token(&opts, api_token_env, &api_url)?;
        let no_listing = match (&api, &repository) {
            (None, _) => Some(format!(
                "run B reads artifacts of another run through the REST API, which needs a token \
                 with actions: read, and {api_sources} is unset (the action passes `github-token`; \
                 elsewhere set `api-token-env`)"
            )),
            (_, None) => Some(
                "run B needs the repository: GITHUB_REPOSITORY is unset; set `repository`".into(),
            ),
            _ => None,
        };
        let (api_token_source, api_token) = api.unzip();
        let (token_source, token) = token.unzip();
        Ok(Settings {
            results_url,
            token_source,
            token,
            no_token,
            api_url,
            repository,
            api_token,
            api_token_source,
            no_listing,
            consistency_wait_ms: crate::surface::listing::wait_option(&mut opts)?.as_millis()
                as u64,
            control: false,
        })
    }

    fn about(s: &Settings) -> About<Artifact> {
        let place = if s.control {
            "the control".to_string()
        } else {
            escape::bytes(s.repository.as_deref().unwrap_or("?").as_bytes())
        };
        let mut about = facts(s, About::new(format!("of {place}"))).exposure("actions-artifacts");
        // Run A needs the runtime token, run B the listing: without either,
        // every carrier is skipped (no token said first).
        for why in [&s.no_token, &s.no_listing].into_iter().flatten() {
            about = about.unavailable(why.clone());
        }
        about
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
        let server = crate::loopback::github::GitHubServer::start()?;
        let repo = "runwarden/control";
        let s = Settings {
            results_url: Some(server.results_url()),
            token: Some(server.runtime_token(repo, 1)),
            token_source: Some("the control's own".into()),
            no_token: None,
            api_url: server.api_url(),
            repository: Some(repo.into()),
            api_token: Some(server.token(&[("actions", "write")])),
            api_token_source: Some("the control's own".into()),
            no_listing: None,
            consistency_wait_ms: crate::surface::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_with_knobs(s, server))
    }

    fn open(settings: Settings) -> Result<ActionsArtifacts, Fault> {
        let client = LazyClient::new([&settings.token, &settings.api_token].into_iter().flatten());
        Ok(ActionsArtifacts { settings, client })
    }

    /// Run A: one artifact per carrier, created, uploaded and finalized as
    /// `@actions/artifact` does, journalled before the first request and taken
    /// back only when the service refused it.
    fn plant_one(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Artifact>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Nonce> {
        let carrier = job.carrier;
        let Some(run) = self
            .settings
            .token
            .as_deref()
            .and_then(crate::wire::jwt_backend_ids)
        else {
            return PlantOutcome::Error {
                reason: format!(
                    "the runtime token ({}) names no workflow run (its `scp` claim has no \
                     Actions.Results:<run>:<job> scope), so the results service cannot take an upload",
                    self.settings.token_source.as_deref().unwrap_or("?")
                ),
            };
        };
        let name = artifact_name(ctx, carrier, &job.nonce);
        let shown = escape::bytes(name.as_bytes());
        let zip = archive(ctx, carrier, &job.nonce);
        let intent = Entry::upload(&name, &run, None);
        // Journalled before the request that creates the artifact.
        journal.record(&intent);
        let of = Named {
            workflow_run_backend_id: &run.0,
            workflow_job_run_backend_id: &run.1,
            name: &name,
        };
        let body = Create {
            of: &of,
            version: 7,
            mime_type: "application/zip",
        };
        let upload_url = match self.twirp("CreateArtifact", &body) {
            Err(TwirpError::Denied(reason)) => {
                journal.retract(&intent);
                return PlantOutcome::Refused { reason };
            }
            Err(TwirpError::Failed(reason)) => return PlantOutcome::Error { reason },
            Err(TwirpError::NotFound) => {
                return PlantOutcome::Error {
                    reason: format!("CreateArtifact for {shown}: HTTP 404 not_found"),
                };
            }
            Ok(v) if v["ok"] != json!(true) => {
                journal.retract(&intent);
                return PlantOutcome::Error {
                    reason: format!("CreateArtifact for {shown}: the service answered not ok"),
                };
            }
            Ok(v) => match v["signed_upload_url"]
                .as_str()
                .or(v["signedUploadUrl"].as_str())
            {
                Some(u) if !u.is_empty() => u.to_string(),
                _ => {
                    return PlantOutcome::Error {
                        reason: format!(
                            "CreateArtifact for {shown} answered ok without an upload URL"
                        ),
                    };
                }
            },
        };
        let (hash, size) = match self.put_zip(&upload_url, zip, &shown) {
            Ok(x) => x,
            Err(o) => return o,
        };
        let body = Finalize {
            of: &of,
            size: size.to_string(),
            hash,
        };
        let id = match self.twirp("FinalizeArtifact", &body) {
            Err(TwirpError::Denied(reason)) => return PlantOutcome::Refused { reason },
            Err(TwirpError::Failed(reason)) => return PlantOutcome::Error { reason },
            Err(TwirpError::NotFound) => {
                return PlantOutcome::Error {
                    reason: format!("FinalizeArtifact for {shown}: HTTP 404 not_found"),
                };
            }
            Ok(v) if v["ok"] != json!(true) => {
                return PlantOutcome::Error {
                    reason: format!("FinalizeArtifact for {shown}: the service answered not ok"),
                };
            }
            Ok(v) => {
                let id = &v["artifact_id"];
                id.as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .or(id.as_u64())
            }
        };
        if let Some(id) = id {
            journal.record(&Entry::upload(&name, &run, Some(id)));
        }
        let id = id.map(|i| format!(" (id {i})")).unwrap_or_default();
        PlantOutcome::Planted {
            needle: job.nonce,
            persistence: None,
            detail: format!(
                "artifact {shown}{id} uploaded to {} of {}; any later run with actions: read \
                 lists and downloads it until its retention ends",
                host_of(self.settings.results_url.as_deref().unwrap_or("")),
                if self.settings.control {
                    "the control".to_string()
                } else {
                    self.repo()
                }
            ),
        }
    }

    /// Run B: every route a later run has, as `actions/download-artifact`
    /// with `run-id` and `github-token` takes it. The listing of every
    /// artifact of the repository (the only route to a nonce in a name), the
    /// query for each agreed name, and the download of every candidate's zip,
    /// searched as it arrives. A carrier is closed only when every route ran
    /// and missed.
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Artifact, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<crate::surface::routes::Recovered> {
        crate::surface::routes::through(wanted.iter().map(|w| w.carrier), route_of, || {
            let api = match self.api() {
                Ok(a) => a,
                Err(why) => {
                    let reason = format!("run B has no route ({why})");
                    return vec![RecoverOutcome::Error { reason }; wanted.len()];
                }
            };
            let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
            let mut looks: Vec<Look> = wanted.iter().map(|_| Look::default()).collect();
            let kinds: Vec<Artifact> = wanted.iter().map(|w| w.carrier).collect();
            let hex: Vec<String> = wanted.iter().map(|w| w.needle.hex()).collect();
            // The agreed name of each content carrier (none for artifact-name,
            // whose name only run A knows): the listing's witnesses.
            let agreed: Vec<Option<String>> = wanted
                .iter()
                .map(|w| {
                    (w.carrier != Artifact::Name).then(|| artifact_name(ctx, w.carrier, &w.needle))
                })
                .collect();
            // Route 1: the listing, until it shows its witnesses.
            let listing = crate::surface::listing::until_current(wait, || {
                self.list_once(&api, ctx, &kinds, &hex, &agreed)
            });
            let listed = match &listing {
                Ok(c) => {
                    for n in &c.value.notices {
                        notice(n.clone());
                    }
                    for (j, look) in looks.iter_mut().enumerate() {
                        look.found = c.value.found[j].clone();
                        look.candidates = c.value.candidates[j].clone();
                    }
                    Some(c)
                }
                Err(_) => None,
            };
            let mut by_name_waits = vec![None; wanted.len()];
            for j in 0..wanted.len() {
                let needle = &hex[j];
                looks[j].route(listing.as_ref().map(|_| ()).map_err(Clone::clone));
                // Route 2: the agreed name, asked for, until it names one.
                let Some(name) = &agreed[j] else { continue };
                let asked =
                    crate::surface::listing::until_current(wait, || self.by_name(&api, name));
                if let Ok(c) = &asked {
                    for id in &c.value {
                        if !looks[j].candidates.contains(id) {
                            looks[j].candidates.push(*id);
                        }
                    }
                    by_name_waits[j] = Some((c.tries, c.waited));
                }
                looks[j].route(asked.map(|_| ()));
                // Then every candidate's zip.
                let place = if kinds[j] == Artifact::FilePath {
                    "a file's path"
                } else {
                    "a file"
                };
                self.search_zips(&api, &mut looks[j], name, needle, place);
            }
            let witnesses: Vec<String> = agreed
                .iter()
                .flatten()
                .map(|a| escape::bytes(a.as_bytes()))
                .collect();
            looks
                .into_iter()
                .zip(kinds)
                .zip(by_name_waits)
                .map(|((look, carrier), waited)| match look.found {
                    Some(detail) => RecoverOutcome::Found { detail },
                    None => match (look.failed, look.denied) {
                        (Some(f), _) => f,
                        // Denied only when GitHub refused every route.
                        (None, Some(d)) if look.ran == 0 => d,
                        (None, Some(_)) => RecoverOutcome::Error {
                            reason: "GitHub refused one route and answered another: no full look"
                                .into(),
                        },
                        (None, None) => {
                            self.missed(carrier, listed, &witnesses, look.candidates.len(), waited)
                        }
                    },
                })
                .collect()
        })
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        Artifact::owned(ctx, &entry.name, "artifact", &|c| c == Artifact::Name).map(|_| ())
    }

    /// Journals hold an intent before each upload and the entry with its
    /// id after: one artifact, cleaned once (by the fullest entry).
    /// (Retractions and what they took back are set aside by the kernel.)
    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        entries
            .iter()
            .map(|e| {
                let fuller =
                    e.id.is_none() && entries.iter().any(|o| o.name == e.name && o.id.is_some());
                if fuller {
                    CleanupOutcome::Superseded
                } else {
                    self.clean_entry(e)
                }
            })
            .collect()
    }

    /// Every artifact of the repository whose name is a verified plant
    /// name of this probe, as journal entries. `Broken` when the listing
    /// fails.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        _jobs: &[Job<Artifact>],
    ) -> Result<crate::surface::Found<Entry>, Fault> {
        let api = self.api()?;
        let mut found = vec![];
        api.list(
            &format!("{}/actions/artifacts", self.repo_path()),
            Some("artifacts"),
            "listing artifacts to find the plants",
            &mut |a| {
                if let Some(Item { id, name }) = Item::of(a)
                    && planted_carrier(ctx, &name).is_some()
                {
                    found.push(Entry {
                        name,
                        id: Some(id),
                        run: None,
                        job: None,
                    });
                }
            },
        )
        .map_err(|e| Fault::broken(e.text()))?;
        Ok(found.into())
    }

    /// Watch mode: every artifact of the repository from the REST listing run
    /// B starts from. An artifact is its name and id (names repeat across
    /// runs).
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let api = self
            .api()
            .map_err(|why| SnapshotError::Failed(format!("no listing of the artifacts ({why})")))?;
        let mut all = Vec::new();
        let mut malformed = false;
        api.list(
            &format!("{}/actions/artifacts", self.repo_path()),
            Some("artifacts"),
            &format!("listing the artifacts of {}", self.repo()),
            &mut |a| match Item::of(a) {
                Some(Item { id, name }) => all.push(listed(
                    vec![component(name.as_bytes()), id.to_string()],
                    "artifact",
                    &[("size", a["size_in_bytes"].to_string())],
                )),
                None => malformed = true,
            },
        )
        .map_err(|e| SnapshotError::Failed(e.text()))?;
        if malformed {
            return Err(SnapshotError::Failed(
                "an artifact of the listing lacks its id or name".into(),
            ));
        }
        emit_sorted(all, sink)
    }
}

impl ActionsArtifacts {
    /// Cleanup: an artifact whose name is exactly what the plant wrote,
    /// deleted by id through the REST API (`actions: write`), else through
    /// the results service in the run that uploaded it; left and listed
    /// when neither may delete it. The REST route first (it works from any
    /// run), then the results service (only the uploading run's token may
    /// delete there).
    fn clean_entry(&self, e: &Entry) -> CleanupOutcome {
        let name = e.name.as_str();
        let rest = match self.api() {
            Ok(api) => self.delete_rest(&api, name, e.id),
            Err(why) => Err(why.into_reason()),
        };
        let why_rest = match rest {
            Ok(done) => return done,
            Err(why) => why,
        };
        match self.delete_twirp(e, name) {
            Ok(done) => done,
            Err(why) => CleanupOutcome::Left {
                reason: format!(
                    "not deleted, left until its retention ends: {why_rest}; and the results \
                     service: {why}"
                ),
            },
        }
    }
}

/// A new artifact carries its name, its files' paths and their content;
/// a removed one its name.
fn changes_of(c: &Change, _before: &Before) -> Vec<Artifact> {
    match c.kind {
        ChangeKind::Created => vec![Artifact::Content, Artifact::FilePath, Artifact::Name],
        ChangeKind::Removed | ChangeKind::Renamed(_) => vec![Artifact::Name],
        ChangeKind::Changed(_) => vec![Artifact::Content],
    }
}
