//! A loopback GitHub: the REST API's objects one run writes and another
//! reads, and the artifact results service (v4) with its signed blob URLs.
//! It is the known-open control of the `actions-artifacts` and
//! `github-api` surfaces, and the tests' stand-in for GitHub.
//!
//! It follows the documented shapes (../shared/reference/github-api-facts.md)
//! and rejects what GitHub rejects: tokens carry a permission map like the
//! `GITHUB_TOKEN`'s, and a call the map does not allow gets GitHub's 403
//! (`Resource not accessible by integration`) with the
//! `X-Accepted-GitHub-Permissions` header, also on success; listings page
//! with `per_page`/`page` and a `Link` header; a check run takes at most
//! 50 annotations per request and a 40-hex `head_sha`; draft releases are
//! listed only to tokens that may write contents. The artifact side is
//! Twirp JSON under `/twirp/github.actions.results.api.v1.ArtifactService/`
//! with a runtime token whose `scp` claim carries the run's backend ids, and
//! Azure block-blob uploads (Put Blob, or Put Block then Put Block List).
//!
//! `tests/loopback/github_artifacts.rs` and `github_rest.rs` prove it
//! against the real clients, npm `@actions/artifact` and `@octokit/rest`.
//! It accepts only tokens it minted and blob URLs it signed, each with a
//! fresh random secret.

mod artifacts;
mod graphql;
mod rest;
mod rest_analyses;
mod rest_artifacts;
mod rest_commits;
mod rest_deploy;
mod rest_dispatch;
mod rest_issues;
mod rest_runs;
mod rest_scanning;

pub use rest_dispatch::{DISPATCH_WORKFLOW, Workflow};
pub use rest_runs::Job;
pub use rest_scanning::{MAX_GZIP, Processing, Upload};

use super::{Reply, header, lock};
use crate::fault::Fault;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// One uploaded artifact.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub id: u64,
    pub repo: String,
    pub run_id: u64,
    pub run_backend: String,
    pub job_backend: String,
    pub name: String,
    /// The committed blob (None until uploaded).
    pub data: Option<Vec<u8>>,
    /// Staged blocks, by block id, until a block list commits them.
    pub blocks: HashMap<String, Vec<u8>>,
    /// `sha256:<hex>` as FinalizeArtifact said.
    pub digest: Option<String>,
    pub finalized: bool,
}

/// One REST object: its kind (`label`, `comment`, `milestone`, `release`,
/// `deployment`, `deployment-status`, `environment`, `variable`,
/// `status`, `check-run`, `commit`), its repository and its fields as
/// GitHub returns them.
#[derive(Clone, Debug)]
pub struct Object {
    pub kind: &'static str,
    pub repo: String,
    pub fields: Value,
}

/// What a token may do: permission -> `read` or `write`, named as GitHub
/// names them (`actions`, `checks`, `contents`, `deployments`, `issues`,
/// `pull_requests`, `statuses`, `actions_variables`, `administration`).
pub type Permissions = BTreeMap<String, String>;

#[derive(Default)]
pub struct State {
    /// REST tokens this server minted.
    pub tokens: HashMap<String, Permissions>,
    /// Who a token writes as, when not `github-actions[bot]`: (login, and
    /// whether it is a user's token, which `GET /user` answers).
    pub logins: HashMap<String, (String, bool)>,
    /// Runtime tokens' run backend id -> (repository, run id).
    pub runs: HashMap<String, (String, u64)>,
    pub artifacts: Vec<Artifact>,
    pub objects: Vec<Object>,
    next: u64,
    /// Code scanning uploads, oldest first.
    pub sarifs: Vec<Upload>,
    /// How uploads are processed (status reads).
    pub processing: Processing,
    /// Workflow runs' jobs (rest_runs.rs).
    pub jobs: Vec<Job>,
    /// The signatures of the job log URLs handed out, each once: its job.
    pub log_urls: HashMap<String, u64>,
    /// The workflows dispatches start runs of (rest_dispatch.rs), and the
    /// status a new run has (`None`: completed).
    pub workflows: Vec<Workflow>,
    pub dispatched_status: Option<String>,
    /// Repositories whose discussions are turned off (graphql.rs).
    pub discussions_off: std::collections::HashSet<String>,
    /// Repositories whose code scanning is off (no GitHub Code Security).
    pub scanning_off: std::collections::HashSet<String>,
    /// Every request: (method, url, Authorization header).
    pub log: Vec<(String, String, String)>,
    /// The signature every signed blob URL carries.
    pub sig: String,
    token_sig: String,
    /// While listings lag: the newest id they show (the artifact listing
    /// and every object listing; a query by name, or one object by its
    /// path, still shows every one).
    pub lag_after: Option<u64>,
    /// The page shift of every numbered listing ([`super::knobs::Shifter`]).
    pub shifter: super::knobs::Shifter,
}

impl State {
    fn next_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

impl super::Knobs for State {
    fn knob(&mut self, knob: super::Knob, on: bool) -> bool {
        if knob == super::Knob::Lag {
            self.lag_after = on.then_some(self.next);
            return true;
        }
        self.shifter.set(knob, on)
    }
}

/// The service; [`GitHubServer::start`] starts one.
pub type GitHubServer = super::Service<State>;

/// The permissions of `GITHUB_TOKEN` with `permissions: write-all` (every
/// key GitHub lets a workflow grant).
pub const WRITE_ALL: &[(&str, &str)] = &[
    ("actions", "write"),
    ("checks", "write"),
    ("contents", "write"),
    ("deployments", "write"),
    ("discussions", "write"),
    ("issues", "write"),
    ("pull_requests", "write"),
    ("security_events", "write"),
    ("statuses", "write"),
];

/// The restricted default `GITHUB_TOKEN`: `contents: read` (and metadata).
pub const CONTENTS_READ: &[(&str, &str)] = &[("contents", "read")];

impl super::Service<State> {
    /// Starts serving on a fresh loopback port until dropped.
    pub fn start() -> Result<GitHubServer, Fault> {
        let state = State {
            sig: super::secret()?,
            token_sig: super::secret()?,
            ..State::default()
        };
        super::Service::serve(state, serve)
    }

    /// A REST token with these permissions (`("issues", "write")`…).
    pub fn token(&self, perms: &[(&str, &str)]) -> String {
        let token = format!(
            "ghs_{}",
            super::secret().unwrap_or_else(|_| format!("fallback{}", self.port))
        );
        let map = perms
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.lock().tokens.insert(token.clone(), map);
        token
    }

    /// A user's token (a PAT) with these permissions: it writes as
    /// `login`, and `GET /user` says so.
    pub fn user_token(&self, perms: &[(&str, &str)], login: &str) -> String {
        let t = self.token(perms);
        self.lock().logins.insert(t.clone(), (login.into(), true));
        t
    }

    /// A GitHub App's installation token: it writes as `login`
    /// (`<app>[bot]`), and `GET /user` refuses it, as it does
    /// `GITHUB_TOKEN`.
    pub fn app_token(&self, perms: &[(&str, &str)], login: &str) -> String {
        let t = self.token(perms);
        self.lock().logins.insert(t.clone(), (login.into(), false));
        t
    }

    /// A runtime token (`ACTIONS_RUNTIME_TOKEN`) of workflow run `run_id`
    /// of `repo`: a JWT whose `scp` claim carries fresh backend ids, signed
    /// with this server's secret.
    pub fn runtime_token(&self, repo: &str, run_id: u64) -> String {
        let mut st = self.lock();
        let n = st.next_id();
        let run = format!("{run_id:08x}-0000-4000-8000-{n:012x}");
        let job = format!("{n:08x}-1111-4000-8000-{run_id:012x}");
        st.runs.insert(run.clone(), (repo.to_string(), run_id));
        let claims = json!({
            "scp": format!("Actions.ExampleScope Actions.Results:{run}:{job}"),
            "iss": "runwarden-github-server",
        });
        format!(
            "{}.{}.{}",
            crate::wire::b64url(br#"{"alg":"RS256","typ":"JWT"}"#),
            crate::wire::b64url(claims.to_string().as_bytes()),
            st.token_sig
        )
    }

    /// `GITHUB_API_URL` for this server.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}/api", self.port)
    }

    /// `ACTIONS_RESULTS_URL` for this server.
    pub fn results_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// The objects of one kind, oldest first.
    pub fn objects(&self, kind: &str) -> Vec<Value> {
        self.lock()
            .objects
            .iter()
            .filter(|o| o.kind == kind)
            .map(|o| o.fields.clone())
            .collect()
    }

    /// Every object, as (kind, fields): for "nothing left" checks.
    pub fn all_objects(&self) -> Vec<(&'static str, Value)> {
        self.lock()
            .objects
            .iter()
            .map(|o| (o.kind, o.fields.clone()))
            .collect()
    }

    /// Adds an object as someone else made it (foreign objects for tests);
    /// its `id` (and `number` for milestones) is assigned here.
    pub fn add(&self, kind: &'static str, repo: &str, mut fields: Value) -> u64 {
        let mut st = self.lock();
        let id = st.next_id();
        fields["id"] = json!(id);
        if kind == "milestone" {
            fields["number"] = json!(id);
        }
        st.objects.push(Object {
            kind,
            repo: repo.into(),
            fields,
        });
        id
    }

    /// Adds a finalized artifact of run `run_id` (foreign artifacts).
    pub fn add_artifact(&self, repo: &str, run_id: u64, name: &str, data: &[u8]) -> u64 {
        let mut st = self.lock();
        let id = st.next_id();
        st.artifacts.push(Artifact {
            id,
            repo: repo.into(),
            run_id,
            run_backend: format!("foreign-{run_id}"),
            job_backend: "foreign".into(),
            name: name.into(),
            data: Some(data.to_vec()),
            blocks: HashMap::new(),
            digest: Some(artifacts::digest(data)),
            finalized: true,
        });
        id
    }

    /// Adds a job of workflow run `run_id` of `repo`, with its check run
    /// on `sha`; its id (the check run's too).
    pub fn add_job(&self, repo: &str, run_id: u64, name: &str, status: &str, sha: &str) -> u64 {
        rest_runs::add_job(&mut self.lock(), repo, run_id, name, status, sha)
    }

    /// Sets a job's status (`in_progress`, `completed`).
    pub fn set_job_status(&self, job: u64, status: &str) {
        let mut st = self.lock();
        if let Some(j) = st.jobs.iter_mut().find(|j| j.id == job) {
            j.status = status.into();
        }
    }

    /// A line a step of run `run_id`'s first job printed, taken as the
    /// runner takes it (a workflow command becomes an annotation); `false`
    /// when the run has no job here.
    pub fn runner_line(&self, run_id: u64, line: &str) -> bool {
        rest_runs::runner_line(&mut self.lock(), run_id, line)
    }

    /// A workflow `on: workflow_dispatch` of `repo` in `file`, whose
    /// `run-name` shows its input `input`.
    pub fn add_workflow(&self, repo: &str, file: &str, input: &str) {
        rest_dispatch::add_workflow(&mut self.lock(), repo, file, input);
    }

    /// A workflow `on: repository_dispatch` of `repo` with `run-name: ${{
    /// github.event.action }}`.
    pub fn add_dispatch_workflow(&self, repo: &str) {
        rest_dispatch::add_dispatch_workflow(&mut self.lock(), repo);
    }

    /// A workflow `file` `on: repository_dispatch` of `repo` whose runs are
    /// all titled `title`.
    pub fn add_titled_dispatch_workflow(&self, repo: &str, file: &str, title: &str) {
        rest_dispatch::add_titled_dispatch_workflow(&mut self.lock(), repo, file, title);
    }

    /// The status the runs dispatches start from now on have
    /// (`in_progress`; `None`: completed).
    pub fn set_dispatched_status(&self, status: Option<&str>) {
        self.lock().dispatched_status = status.map(String::from);
    }

    /// Turns `repo`'s discussions off.
    pub fn disable_discussions(&self, repo: &str) {
        self.lock().discussions_off.insert(repo.into());
    }

    /// Turns `repo`'s code scanning off.
    pub fn disable_code_scanning(&self, repo: &str) {
        self.lock().scanning_off.insert(repo.into());
    }

    /// Every job, in the order added.
    pub fn jobs(&self) -> Vec<Job> {
        self.lock().jobs.clone()
    }

    /// The code scanning uploads received, oldest first.
    pub fn sarifs(&self) -> Vec<Upload> {
        self.lock().sarifs.clone()
    }

    /// How uploads from now on are processed.
    pub fn set_processing(&self, p: Processing) {
        self.lock().processing = p;
    }

    /// Every request so far: (method, path and query). Never the
    /// Authorization header.
    pub fn requests(&self) -> Vec<(String, String)> {
        self.lock()
            .log
            .iter()
            .map(|(m, u, _)| (m.clone(), u.clone()))
            .collect()
    }

    pub fn artifacts(&self) -> Vec<Artifact> {
        self.lock().artifacts.clone()
    }
}

fn serve(mut req: tiny_http::Request, state: &Mutex<State>, port: u16) {
    let auth = header(&req, "Authorization").unwrap_or_default();
    let method = req.method().as_str().to_string();
    let url = req.url().to_string();
    let body = super::body(&mut req);
    let mut st = lock(state);
    st.log.push((method.clone(), url.clone(), auth.clone()));
    let path = url.split('?').next().unwrap_or("").to_string();
    let reply = if let Some(rpc) = path.strip_prefix(artifacts::TWIRP) {
        artifacts::twirp(&mut st, rpc, &auth, &body, port)
    } else if let Some(id) = path.strip_prefix(artifacts::BLOB) {
        let blob_type = header(&req, "x-ms-blob-type");
        artifacts::blob(&mut st, &method, id, &url, blob_type.as_deref(), body)
    } else if let Some(job) = path.strip_prefix(rest_runs::LOGS) {
        rest_runs::log_blob(&mut st, job, &url, &auth)
    } else if let Some(run) = path.strip_prefix("/api/_runner/runs/") {
        runner(&mut st, run, &auth, &body)
    } else if path == "/api/graphql" && method == "POST" {
        let n = st.log.len();
        graphql::serve(&mut st, &auth, &body)
            .with("X-GitHub-Request-Id", &format!("0000:{n:06X}:STANDIN"))
    } else if path == "/api/user" {
        rest::user(&st, &auth)
    } else if let Some(rest) = path.strip_prefix("/api/repos/") {
        rest::route(&mut st, &method, rest, &url, &auth, &body, port)
    } else {
        Reply::json(404, json!({ "message": "Not Found" }))
    };
    drop(st);
    reply.send(req);
}

/// The control's runner (no GitHub route): `POST
/// /api/_runner/runs/{run_id}/lines` with `{"line": …}` and a token this
/// server minted hands a line to the run's first job as if a step had
/// printed it ([`rest_runs::runner_line`]).
fn runner(st: &mut State, run: &str, auth: &str, body: &[u8]) -> Reply {
    let minted = auth
        .strip_prefix("Bearer ")
        .is_some_and(|t| st.tokens.contains_key(t));
    let run = run
        .strip_suffix("/lines")
        .and_then(|r| r.parse::<u64>().ok());
    let line: Option<String> = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["line"].as_str().map(String::from));
    match (minted, run, line) {
        (false, _, _) => rest::message(401, "Bad credentials"),
        (true, Some(run), Some(line)) if rest_runs::runner_line(st, run, &line) => {
            Reply::raw(204, "application/json", vec![])
        }
        _ => rest::message(404, "Not Found"),
    }
}
