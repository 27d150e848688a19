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
mod surface;

use super::carrier::{CarrierSet, carriers};
use super::{About, RecoverOutcome, RunCtx};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError, host_of};
use crate::http::answer::{self, Class};
use crate::http::{Failure, LazyClient, Request};
use crate::nonce::Nonce;
use ::http::Method;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

const TWIRP: &str = "twirp/github.actions.results.api.v1.ArtifactService";

carriers! {
    /// The artifacts' carriers. Artifacts last until their retention
    /// period ends (90 days by default, up to 400 on private
    /// repositories), or until deleted.
    pub enum Artifact {
        Name = "artifact-name", UntilEvicted, "the nonce in an artifact's name; run B finds it by listing every artifact of the repository (REST API), without knowing it";
        Content = "artifact-content", UntilEvicted, "the nonce in a file of an artifact with an agreed name; run B downloads it (REST API) and reads it";
        FilePath = "artifact-file-path", UntilEvicted, "the nonce in the path of a file inside an artifact with an agreed name; run B downloads it and reads the zip's entry names";
    }
}

/// What every step gets. Holds credentials: never printed, never in a
/// report (only the facts of [`ActionsArtifacts`]'s `about` describe them,
/// by source).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
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
fn artifact_name(ctx: &RunCtx<'_>, carrier: Artifact, nonce: &Nonce) -> String {
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
fn archive(ctx: &RunCtx<'_>, carrier: Artifact, nonce: &Nonce) -> Vec<u8> {
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

/// One journal line: an artifact run A uploads, by name, with the run
/// that made it (its backend ids, which the results service needs to
/// delete it): journalled before the upload without `id`, and again with
/// the id the service gave it (the first is then superseded). Cleanup by
/// probe id finds it by name and id alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    name: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    id: Option<u64>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    run: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    job: Option<String>,
}

/// An optional field that, when there, holds its value. Why: a journal
/// line with `"id": null` (or a null run) was never a plant's, and 0.11.0
/// did not take it for one; serde's `Option` alone would read it as absent.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl Entry {
    /// The entry of one upload by the run `run`; `id` once the service
    /// gave one.
    fn upload(name: &str, run: &(String, String), id: Option<u64>) -> Entry {
        Entry {
            name: name.to_string(),
            id,
            run: Some(run.0.clone()),
            job: Some(run.1.clone()),
        }
    }
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = escape::bytes(self.name.as_bytes());
        match self.id {
            Some(id) => write!(f, "artifact {name} (id {id})"),
            None => write!(f, "artifact {name}"),
        }
    }
}

/// The facts the report shows: the runtime token by source and whether
/// it names its run, the service, the API token by source, the
/// repository.
fn facts(s: &Settings, about: About<Artifact>) -> About<Artifact> {
    let mut about = about.fact(
        "runtime-token",
        s.token_source.clone().unwrap_or_else(|| "none".into()),
    );
    if let Some(t) = &s.token {
        let run = match crate::wire::jwt_backend_ids(t) {
            Some(_) => "it names its workflow run (an Actions.Results scope)",
            None => "it names no workflow run (no Actions.Results scope): uploads cannot work",
        };
        about = about.fact("run", run);
    }
    if let Some(u) = &s.results_url {
        about = about.fact("service", host_of(u));
    }
    about = about.fact(
        "api-token",
        s.api_token_source.clone().unwrap_or_else(|| "none".into()),
    );
    if let Some(r) = &s.repository {
        about = about.fact("repository", escape::bytes(r.as_bytes()));
    }
    about
}

/// The workflow artifacts of a repository, open.
pub struct ActionsArtifacts {
    settings: Settings,
    client: LazyClient,
}

/// The artifact a results-service request names: the run's backend ids
/// (from the runtime token) and its name.
#[derive(Serialize)]
struct Named<'a> {
    workflow_run_backend_id: &'a str,
    workflow_job_run_backend_id: &'a str,
    name: &'a str,
}

/// An artifact of a REST listing: its id and name (an item without
/// either is no full look).
#[derive(Deserialize)]
struct Item {
    id: u64,
    name: String,
}

impl Item {
    fn of(v: &Value) -> Option<Item> {
        Item::deserialize(v).ok()
    }
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

impl ActionsArtifacts {
    fn repo(&self) -> String {
        escape::bytes(
            self.settings
                .repository
                .as_deref()
                .unwrap_or("?")
                .as_bytes(),
        )
    }

    /// The REST API with run B's token, or why there is none
    /// (`Unsupported` without the token or the repository).
    fn api(&self) -> Result<Api<'_>, Fault> {
        match (
            &self.settings.api_token,
            &self.settings.repository,
            &self.settings.no_listing,
        ) {
            (Some(token), Some(_), None) => Ok(Api {
                client: self.client.get()?,
                base: &self.settings.api_url,
                token,
                source: self.settings.api_token_source.as_deref().unwrap_or("?"),
            }),
            (_, _, why) => Err(Fault::unsupported(why.clone().unwrap_or_default())),
        }
    }

    /// `/repos/{owner}/{repo}`.
    fn repo_path(&self) -> String {
        format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        )
    }

    /// One call of the results service with the runtime token: the
    /// answer's JSON object on HTTP 200.
    fn twirp(&self, method: &str, body: &impl Serialize) -> Result<Value, TwirpError> {
        let (Some(base), Some(token)) = (&self.settings.results_url, &self.settings.token) else {
            return Err(TwirpError::Failed(
                self.settings.no_token.clone().unwrap_or_default(),
            ));
        };
        let service = host_of(base);
        let url = crate::github::twirp_url(base, TWIRP, method);
        let req = Request::new(Method::POST, &url)
            .json(&serde_json::to_value(body).expect("requests serialize"))
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
        let class = answer::classify(&(&resp).into(), &crate::github::TWIRP);
        match (resp.status, v) {
            (200, Some(v)) => Ok(v),
            (200, None) => Err(TwirpError::Failed(format!(
                "{method} at {service}: HTTP 200 with a body that is not a JSON object, so not \
                 the results service's answer"
            ))),
            (404, Some(v)) if v["code"] == "not_found" => Err(TwirpError::NotFound),
            // (Twirp's `permission_denied` 403: crate::github::TWIRP.)
            _ if class == Class::Refused => Err(TwirpError::Denied(format!(
                "the results service refused {method}: HTTP 403 permission_denied {msg}"
            ))),
            (403, _) => Err(TwirpError::Failed(format!(
                "{method} at {service}: HTTP 403 without Twirp's permission_denied (a proxy or a \
                 firewall?) {msg}"
            ))),
            (401, _) => Err(TwirpError::Failed(format!(
                "the results service did not accept the runtime token ({}): HTTP 401 {msg}",
                self.settings.token_source.as_deref().unwrap_or("?")
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

/// `ApiError` as a recovery outcome: GitHub refusing the token a
/// permission is a denial (crate::github::REST); any other answer of
/// GitHub's, its other refusals too, an error.
fn outcome_of(e: &ApiError) -> RecoverOutcome {
    match e {
        e if e.is_permission_refusal() => RecoverOutcome::Denied {
            reason: format!("the API token may not read artifacts: {}", e.text()),
        },
        _ => RecoverOutcome::Error { reason: e.text() },
    }
}
