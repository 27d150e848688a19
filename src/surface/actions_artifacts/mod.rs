//! `type: actions-artifacts`: the workflow artifacts of a repository,
//! written the way `@actions/artifact` (upload-artifact v4+) writes them
//! and read the way a later workflow run reads them.
//!
//! Run A uploads one artifact per carrier through the results service
//! (artifact v4: Twirp `CreateArtifact`, one block-blob upload of a zip to
//! the signed URL, `FinalizeArtifact`) with the runtime token, whose `scp`
//! claim names the run. Run B, in another run, finds them as
//! `actions/download-artifact` with `run-id` and `github-token` does:
//! through the REST API with an API token (`actions: read`), by listing
//! every artifact of the repository (the only route to a nonce in a name)
//! and by asking for the agreed names, then downloading each candidate's
//! zip (a redirect to a signed URL, fetched without the token) and
//! searching it as it arrives. A refusal is the service's
//! `permission_denied` to run A's upload, or GitHub's 403 to run B's
//! listing ([`crate::github`]); anything else is an error. Cleanup deletes
//! by id through the REST API (`actions: write`), else through the results
//! service in the run that uploaded (which may delete its own run's
//! artifacts), and lists what neither could delete.
//!
//! Names are [`super::tagged_name`]s: leftovers are identifiable by the
//! prefix, and cleanup takes only names whose tag verifies under the
//! marker key. The control instance is the loopback GitHub
//! ([`crate::loopback::github`]).

mod cleanup;
mod plant;
mod recover;
mod watch;

use super::carrier::{CarrierSet, carriers};
use super::{
    Carrier, CleanupOutcome, Control, Notice, PlantJob, PlantOutcome, RecoverOutcome, RunCtx,
    SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::http::{Failure, LazyClient, Request};
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub struct ActionsArtifacts;

const TWIRP: &str = "twirp/github.actions.results.api.v1.ArtifactService";

carriers! {
    /// The artifacts' carriers. Artifacts last until their retention
    /// period ends (90 days by default, up to 400 on private
    /// repositories), or until deleted.
    enum Artifact {
        Name = "artifact-name", UntilEvicted, "the nonce in an artifact's name; run B finds it by listing every artifact of the repository (REST API), without knowing it";
        Content = "artifact-content", UntilEvicted, "the nonce in a file of an artifact with an agreed name; run B downloads it (REST API) and reads it";
        FilePath = "artifact-file-path", UntilEvicted, "the nonce in the path of a file inside an artifact with an agreed name; run B downloads it and reads the zip's entry names";
    }
}

/// What every step gets. Holds credentials: never printed, never in a
/// report (only [`SurfaceType::facts`] describes them, by source).
#[derive(Clone, Serialize, Deserialize)]
struct Settings {
    /// The results service base URL, ending in `/`.
    results_url: Option<String>,
    token: Option<String>,
    token_source: Option<String>,
    /// Why run A cannot upload: every carrier is SKIPPED with it.
    no_token: Option<String>,
    /// The REST API base URL, without a trailing `/`.
    api_url: String,
    repository: Option<String>,
    api_token: Option<String>,
    api_token_source: Option<String>,
    /// Why run B has no route (no API token or no repository).
    no_listing: Option<String>,
    /// How long a listing that does not show its witness is retried
    /// (`consistency-wait`).
    #[serde(default = "super::listing::default_wait_ms")]
    consistency_wait_ms: u64,
    control: bool,
}

/// The name of a carrier's artifact: the nonce in it for artifact-name,
/// an agreed name (derived from the probe id and key) otherwise.
fn artifact_name(ctx: &RunCtx<'_>, carrier: Artifact, nonce: &crate::nonce::Nonce) -> String {
    let in_name = carrier == Artifact::Name;
    super::tagged_name(ctx, carrier.name(), in_name.then_some(nonce), "artifact")
}

/// The carrier of an artifact name in this probe's form whose tag
/// verifies.
fn planted_carrier(ctx: &RunCtx<'_>, name: &str) -> Option<Artifact> {
    Artifact::tagged(ctx, name, "artifact")
}

/// The zip a carrier uploads: one small text file, whose path or content
/// holds the nonce for the two content carriers.
fn archive(ctx: &RunCtx<'_>, carrier: Artifact, nonce: &crate::nonce::Nonce) -> Vec<u8> {
    let text = match carrier {
        Artifact::Content => format!(
            "runwarden actions-artifacts plant, probe {}\n{}\n",
            ctx.probe_id,
            nonce.hex()
        ),
        _ => format!(
            "runwarden actions-artifacts plant, probe {}\n",
            ctx.probe_id
        ),
    };
    let path = match carrier {
        Artifact::FilePath => format!("runwarden-{}.txt", nonce.hex()),
        _ => "runwarden.txt".to_string(),
    };
    crate::archive::zip_stored(&[(&path, text.as_bytes())])
}

impl SurfaceType for ActionsArtifacts {
    fn name(&self) -> &'static str {
        "actions-artifacts"
    }

    fn description(&self) -> &'static str {
        "the workflow artifacts of a repository (artifact v4 results service to upload; REST API to list, download and delete)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "results-url",
            "token-env",
            "api-url",
            "repository",
            "api-token-env",
            "consistency-wait",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let token_env = super::env_name(&mut opts, "token-env")?;
        let api_token_env = super::env_name(&mut opts, "api-token-env")?;
        let rt = crate::github::runtime(&mut opts, token_env, "results service")?;
        let (token, results_url, no_token) = (rt.token, rt.results_url, rt.missing);
        let api_url = crate::github::api_url_option(&mut opts)?;
        let repository = crate::github::repository_option(&mut opts)?;
        let (api, api_sources) = crate::github::api_token(&opts, api_token_env);
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
        let s = Settings {
            results_url,
            token_source,
            token,
            no_token,
            api_url,
            repository,
            api_token,
            api_token_source,
            no_listing,
            consistency_wait_ms: super::listing::wait_option(&mut opts)?.as_millis() as u64,
            control: false,
        };
        Ok(serde_json::to_value(s).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, Fault> {
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
            consistency_wait_ms: super::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_listing(
            serde_json::to_value(s).expect("settings serialize"),
            server,
        ))
    }

    fn exposures(&self, _settings: &Value, _carrier: &str, _env: super::Env<'_>) -> Vec<String> {
        vec!["actions-artifacts".into()]
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        let mut f = vec![(
            "runtime-token",
            s.token_source.clone().unwrap_or_else(|| "none".into()),
        )];
        if let Some(t) = &s.token {
            let run = match crate::wire::jwt_backend_ids(t) {
                Some(_) => "it names its workflow run (an Actions.Results scope)",
                None => "it names no workflow run (no Actions.Results scope): uploads cannot work",
            };
            f.push(("run", run.to_string()));
        }
        if let Some(u) = &s.results_url {
            f.push(("service", host_of(u)));
        }
        f.push((
            "api-token",
            s.api_token_source.clone().unwrap_or_else(|| "none".into()),
        ));
        if let Some(r) = &s.repository {
            f.push(("repository", escape::bytes(r.as_bytes())));
        }
        f
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn crate::surface::Instance>, Fault> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| Fault::invalid("bad actions-artifacts settings"))?;
        let client = LazyClient::new(
            [&s.token, &s.api_token]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
        );
        Ok(Box::new(Instance { s, client }))
    }
}

use crate::github::host_of;

struct Instance {
    s: Settings,
    client: LazyClient,
}

/// A Twirp answer that is not a success.
enum TwirpError {
    /// 403 `permission_denied`: the service's access control.
    Denied(String),
    /// 404 with Twirp's `not_found`: no such artifact (read from the
    /// answer's code, never from its text).
    NotFound,
    /// Anything else, said for people.
    Failed(String),
}

impl Instance {
    fn repo(&self) -> String {
        escape::bytes(self.s.repository.as_deref().unwrap_or("?").as_bytes())
    }

    /// The REST API with run B's token, or why there is none
    /// (`Unsupported` without the token or the repository).
    fn api(&self) -> Result<Api<'_>, Fault> {
        match (&self.s.api_token, &self.s.repository, &self.s.no_listing) {
            (Some(token), Some(_), None) => Ok(Api {
                client: self.client.get()?,
                base: &self.s.api_url,
                token,
                source: self.s.api_token_source.as_deref().unwrap_or("?"),
            }),
            (_, _, why) => Err(Fault::unsupported(why.clone().unwrap_or_default())),
        }
    }

    /// `/repos/{owner}/{repo}`.
    fn repo_path(&self) -> String {
        format!("/repos/{}", self.s.repository.as_deref().unwrap_or(""))
    }

    /// One call of the results service with the runtime token: the
    /// answer's JSON object on HTTP 200.
    fn twirp(&self, method: &str, body: Value) -> Result<Value, TwirpError> {
        let (Some(base), Some(token)) = (&self.s.results_url, &self.s.token) else {
            return Err(TwirpError::Failed(
                self.s.no_token.clone().unwrap_or_default(),
            ));
        };
        let service = host_of(base);
        let url = crate::github::twirp_url(base, TWIRP, method);
        let req = Request::new(Method::POST, &url)
            .json(&body)
            .header("accept", "application/json")
            .secret_header("authorization", format!("Bearer {token}"));
        let client = self
            .client
            .get()
            .map_err(|f| TwirpError::Failed(f.into_reason()))?;
        let resp = client.send(&req).map_err(|f| {
            TwirpError::Failed(match f {
                Failure::Unreachable(m) => {
                    format!("cannot reach the results service {service}: {m}")
                }
                Failure::Broken(m) => format!("{method} at the results service {service}: {m}"),
            })
        })?;
        // Only a JSON object is the service's answer.
        let v = resp.json().ok().filter(Value::is_object);
        let msg = v
            .as_ref()
            .and_then(|v| v["msg"].as_str())
            .map(|m| escape::bytes(m.as_bytes()))
            .unwrap_or_default();
        match (resp.status, v) {
            (200, Some(v)) => Ok(v),
            (200, None) => Err(TwirpError::Failed(format!(
                "{method} at {service}: HTTP 200 with a body that is not a JSON object, so not \
                 the results service's answer"
            ))),
            (404, Some(v)) if v["code"] == "not_found" => Err(TwirpError::NotFound),
            (403, Some(v)) if v["code"] == "permission_denied" => Err(TwirpError::Denied(format!(
                "the results service refused {method}: HTTP 403 permission_denied {msg}"
            ))),
            (403, _) => Err(TwirpError::Failed(format!(
                "{method} at {service}: HTTP 403 without Twirp's permission_denied (a proxy or a \
                 firewall?) {msg}"
            ))),
            (401, _) => Err(TwirpError::Failed(format!(
                "the results service did not accept the runtime token ({}): HTTP 401 {msg}",
                self.s.token_source.as_deref().unwrap_or("?")
            ))),
            (s, v) => {
                let code = v
                    .as_ref()
                    .and_then(|v| v["code"].as_str())
                    .map(|c| escape::bytes(c.as_bytes()))
                    .unwrap_or_default();
                Err(TwirpError::Failed(format!(
                    "{method} at {service}: HTTP {s} {code} {msg}"
                )))
            }
        }
    }
}

impl crate::surface::Instance for Instance {
    fn unavailable(&self, _carrier: &str) -> Option<String> {
        self.s
            .no_token
            .clone()
            .or_else(|| self.s.no_listing.clone())
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        match Artifact::of_job(job) {
            Ok(carrier) => self.upload(ctx, carrier, job, created),
            Err(o) => o,
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_all(ctx, wanted, notice)
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, _jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        self.find_plants(ctx)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
        let name = entry["name"]
            .as_str()
            .ok_or_else(|| Fault::invalid("names no artifact"))?;
        let c = Artifact::owned(ctx, name, "artifact", &|c| c == Artifact::Name)?;
        let fields = entry
            .as_object()
            .ok_or_else(|| Fault::invalid("not an entry"))?;
        if let Some(k) = fields
            .keys()
            .find(|k| !["name", "id", "run", "job"].contains(&k.as_str()))
        {
            return Err(Fault::invalid(format!(
                "a {c} entry has no field {}",
                escape::bytes(k.as_bytes())
            )));
        }
        if fields.contains_key("id") && !entry["id"].is_u64() {
            return Err(Fault::invalid("its id is not a number"));
        }
        if ["run", "job"]
            .iter()
            .any(|k| fields.contains_key(*k) && !entry[*k].is_string())
        {
            return Err(Fault::invalid("its run is not a backend id"));
        }
        Ok(())
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.clean(entry)
    }

    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        self.clean_all(entries)
    }

    fn watch(&self) -> Result<&dyn super::Watchable, &'static str> {
        Ok(self)
    }

    fn describe(&self, entry: &Value) -> String {
        let name = entry["name"].as_str().unwrap_or("?");
        let of = if self.s.control {
            "the control".to_string()
        } else {
            self.repo()
        };
        match entry["id"].as_u64() {
            Some(id) => format!(
                "artifact {} (id {id}) of {of}",
                escape::bytes(name.as_bytes())
            ),
            None => format!("artifact {} of {of}", escape::bytes(name.as_bytes())),
        }
    }
}

/// `ApiError` as a recovery outcome: GitHub's refusal is a denial.
fn outcome_of(e: &ApiError) -> RecoverOutcome {
    match e {
        ApiError::Denied { .. } => RecoverOutcome::Denied {
            reason: format!("the API token may not read artifacts: {}", e.text()),
        },
        _ => RecoverOutcome::Error { reason: e.text() },
    }
}

/// The journal entry of one upload: its name and the run that made it
/// (the run's backend id, which the results service needs to delete it);
/// `id` once the service gave one.
fn entry(name: &str, run: &(String, String), id: Option<u64>) -> Value {
    let mut e = json!({ "name": name, "run": run.0, "job": run.1 });
    if let Some(id) = id {
        e["id"] = json!(id);
    }
    e
}
