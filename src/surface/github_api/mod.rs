//! `type: github-api`: objects in a GitHub repository that one run writes
//! and another reads through the REST API (labels, comments, milestones,
//! draft releases, deployments, variables, and, only when the operator
//! accepts leaving them, commit statuses and check runs), and, with
//! `code-scanning: true`, a SARIF upload's analysis and alerts
//! ([`scanning`]); and the traces a step leaves in its own run without
//! any write permission, a `::notice` and a log line, read by a later job
//! ([`traces`]); a discussion, through GraphQL ([`discussion`]); and,
//! when the operator names a workflow that shows them, dispatches
//! ([`dispatch`]).
//!
//! Every GitHub-hosted runner's egress allows api.github.com, so these
//! channels stay open behind any firewall; what closes them is the token.
//! Run A plants each carrier with the write token, run B reads it back
//! with the read token through every route it has ([`carriers`]: the
//! listing, and the agreed name where there is one). GitHub's 403 with its
//! error body is a refusal ([`crate::github`]) and the detail names the
//! permission GitHub said it wanted; 401, 5xx, rate limits GitHub does not
//! lift in time and everything else are errors. Cleanup reads each object
//! back, deletes it only when it still holds what the plant wrote, and
//! lists what it could not delete. The control is the loopback GitHub
//! ([`crate::loopback::github`]) with a token that may do everything.

mod carriers;
mod cleanup;
mod discussion;
mod dispatch;
mod plant;
mod recover;
mod scanning;
mod traces;

use super::{
    Carrier, CleanupOutcome, Control, Notice, PlantJob, PlantOutcome, RecoverOutcome, RunCtx,
    SurfaceType, Wanted,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::http::LazyClient;
use carriers::{CARRIERS, Gh, PERMANENT};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use discussion::{DOCUMENTS as GRAPHQL_DOCUMENTS, graphql_url};

pub struct GitHubApi;

/// What every step gets. Holds credentials: never printed, never in a
/// report (only [`SurfaceType::facts`] describes them, by source).
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Settings {
    api_url: String,
    repository: Option<String>,
    token: Option<String>,
    token_source: String,
    read_token: Option<String>,
    read_token_source: String,
    /// Why there is no write or read token or no repository: every
    /// carrier is SKIPPED with it.
    missing: Option<String>,
    /// The issue or pull request for issue-comment, and where it came
    /// from.
    issue: Option<u64>,
    issue_source: String,
    /// The commit for deployment, commit-status and check-run.
    commit: Option<String>,
    permanent: bool,
    /// `code-scanning: true`: the operator accepts an upload that changes
    /// what the repository's code scanning shows.
    #[serde(default)]
    code_scanning: bool,
    /// The ref code-scanning uploads for (`ref`, else `GITHUB_REF`), when
    /// it is one code scanning takes.
    #[serde(default)]
    git_ref: Option<String>,
    /// The workflow run and attempt run A is in (`GITHUB_RUN_ID`,
    /// `GITHUB_RUN_ATTEMPT`), and the runner (`RUNNER_NAME`): for the
    /// run traces.
    #[serde(default)]
    run_id: Option<u64>,
    #[serde(default)]
    run_attempt: Option<u64>,
    #[serde(default)]
    runner_name: Option<String>,
    /// The category a discussion goes in (`discussion-category`: a name
    /// or a slug); `None`: `general`, else the first listed.
    #[serde(default)]
    discussion_category: Option<String>,
    /// `dispatch-workflow` and `dispatch-input`: the workflow
    /// workflow-dispatch starts and the input its `run-name` shows.
    #[serde(default)]
    dispatch_workflow: Option<String>,
    #[serde(default)]
    dispatch_input: Option<String>,
    /// `repository-dispatch: true`: a workflow shows the event's action.
    #[serde(default)]
    repository_dispatch: bool,
    /// How long a listing that shows neither run B nor the writer the
    /// plant is taken again (`consistency-wait`).
    #[serde(default = "super::listing::default_wait_ms")]
    consistency_wait_ms: u64,
    control: bool,
}

/// The pull request (or issue) the run's event is about, from
/// `GITHUB_EVENT_PATH`.
fn event_issue(opts: &Options<'_>) -> Option<u64> {
    let path = opts.env("GITHUB_EVENT_PATH")?;
    // (A regular file, bounded: the job can write where it lies.)
    let text = crate::sys::read_regular(std::path::Path::new(&path), 64 << 20).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    v["pull_request"]["number"]
        .as_u64()
        .or(v["issue"]["number"].as_u64())
}

impl SurfaceType for GitHubApi {
    fn name(&self) -> &'static str {
        "github-api"
    }

    fn description(&self) -> &'static str {
        "objects of a GitHub repository one run writes and another reads through the REST and GraphQL APIs (labels, comments, milestones, releases, deployments, variables, statuses, check runs, discussions, code scanning analyses) and the traces a step leaves in its run (annotations, log lines)"
    }

    fn carriers(&self) -> &'static [Carrier] {
        CARRIERS
    }

    fn later_job_only(&self, carrier: &str) -> bool {
        matches!(Gh::parse(carrier), Some(Gh::RunAnnotation | Gh::RunLog))
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "repository",
            "api-url",
            "token-env",
            "read-token-env",
            "issue",
            "commit",
            "permanent",
            "code-scanning",
            "ref",
            "discussion-category",
            "dispatch-workflow",
            "dispatch-input",
            "repository-dispatch",
            "consistency-wait",
        ]
    }

    fn validate(&self, mut opts: Options<'_>) -> Result<Value, ConfigError> {
        let repository = crate::github::repository_option(&mut opts)?;
        let api_url = crate::github::api_url_option(&mut opts)?;
        let token_source =
            super::env_name(&mut opts, "token-env")?.unwrap_or_else(|| "GITHUB_TOKEN".into());
        let read_token_source =
            super::env_name(&mut opts, "read-token-env")?.unwrap_or_else(|| token_source.clone());
        let (issue, issue_source) = match opts.string("issue")? {
            Some((n, pos)) => match n.parse::<u64>() {
                Ok(n) if n > 0 => (Some(n), "the config".to_string()),
                _ => {
                    return Err(opts.error(pos, "`issue` must be an issue or pull request number"));
                }
            },
            None => (event_issue(&opts), "the event".to_string()),
        };
        let commit = match opts.string("commit")? {
            Some((c, pos)) => {
                if c.len() != 40 || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(opts.error(pos, "`commit` must be a full 40-hex commit sha"));
                }
                Some(c)
            }
            None => opts
                .env("GITHUB_SHA")
                .filter(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit())),
        };
        let permanent = opts.bool("permanent")?.unwrap_or(false);
        let name_key = |opts: &mut Options<'_>, key: &str| -> Result<Option<String>, ConfigError> {
            match opts.string(key)? {
                Some((v, pos)) if !super::plain_segment(&v.replace('.', "_")) => Err(opts.error(
                    pos,
                    format!("`{key}` must be a name (letters, digits, `-`, `_`, `.`)"),
                )),
                other => Ok(other.map(|(v, _)| v)),
            }
        };
        let dispatch_workflow = name_key(&mut opts, "dispatch-workflow")?;
        let dispatch_input = name_key(&mut opts, "dispatch-input")?;
        let repository_dispatch = opts.bool("repository-dispatch")?.unwrap_or(false);
        let code_scanning = opts.bool("code-scanning")?.unwrap_or(false);
        let git_ref = match opts.string("ref")? {
            Some((r, pos)) if !scanning::valid_ref(&r) => {
                return Err(opts.error(
                    pos,
                    "`ref` must be refs/heads/…, refs/tags/… or refs/pull/…",
                ));
            }
            Some((r, _)) => Some(r),
            None => opts.env("GITHUB_REF").filter(|r| scanning::valid_ref(r)),
        };
        let token = opts.env(&token_source);
        let read_token = opts.env(&read_token_source);
        let missing = if repository.is_none() {
            Some("no repository: GITHUB_REPOSITORY is unset; set `repository`".to_string())
        } else if token.is_none() {
            Some(format!(
                "no write token: {token_source} is unset or empty (the action passes \
                 `github-token`; elsewhere set it or `token-env`)"
            ))
        } else if read_token.is_none() {
            Some(format!(
                "no read token: {read_token_source} is unset or empty"
            ))
        } else {
            None
        };
        let s = Settings {
            api_url,
            repository,
            token,
            token_source,
            read_token,
            read_token_source,
            missing,
            issue,
            issue_source,
            commit,
            permanent,
            code_scanning,
            git_ref,
            run_id: opts.env("GITHUB_RUN_ID").and_then(|r| r.parse().ok()),
            run_attempt: opts.env("GITHUB_RUN_ATTEMPT").and_then(|r| r.parse().ok()),
            runner_name: opts.env("RUNNER_NAME"),
            discussion_category: opts.string("discussion-category")?.map(|(c, _)| c),
            dispatch_workflow,
            dispatch_input,
            repository_dispatch,
            consistency_wait_ms: super::listing::wait_option(&mut opts)?.as_millis() as u64,
            control: false,
        };
        Ok(serde_json::to_value(s).expect("settings serialize"))
    }

    fn control(&self, _settings: &Value, _dir: &std::path::Path) -> Result<Control, Fault> {
        let server = crate::loopback::github::GitHubServer::start()?;
        let repo = "runwarden/control";
        let sha = "c0ffee0000000000000000000000000000c0ffee";
        server.add("commit", repo, json!({ "sha": sha }));
        // The workflows the control's dispatches start.
        server.add_workflow(repo, crate::loopback::github::DISPATCH_WORKFLOW, "title");
        server.add_dispatch_workflow(repo);
        // The run the control's traces go to: its one job has ended.
        let run_id = 4242;
        server.add_job(repo, run_id, "control", "completed", sha);
        let mut all: Vec<(&str, &str)> = crate::loopback::github::WRITE_ALL.to_vec();
        all.push(("actions_variables", "write"));
        let token = server.token(&all);
        let s = Settings {
            api_url: server.api_url(),
            repository: Some(repo.into()),
            read_token: Some(token.clone()),
            token: Some(token),
            token_source: "the control's own".into(),
            read_token_source: "the control's own".into(),
            missing: None,
            issue: Some(1),
            issue_source: "the control".into(),
            commit: Some(sha.into()),
            permanent: true,
            code_scanning: true,
            git_ref: Some("refs/heads/main".into()),
            run_id: Some(run_id),
            run_attempt: Some(1),
            runner_name: None,
            discussion_category: None,
            dispatch_workflow: Some(crate::loopback::github::DISPATCH_WORKFLOW.into()),
            dispatch_input: Some("title".into()),
            repository_dispatch: true,
            consistency_wait_ms: super::listing::default_wait_ms(),
            control: true,
        };
        Ok(Control::served_listing(json!(s), server))
    }

    fn exposures(&self, settings: &Value, carrier: &str, env: super::Env<'_>) -> Vec<String> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        // The job's own: both runs with the job's token, on the job's
        // repository and API. A PAT, another repository or another
        // server tests something, but not what this job's token can do.
        let api = env("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into());
        let own = s.token_source == "GITHUB_TOKEN"
            && s.read_token_source == "GITHUB_TOKEN"
            && s.repository.is_some()
            && s.repository == env("GITHUB_REPOSITORY")
            && s.api_url == api.trim_end_matches('/');
        // A comment tests pull-requests only on a pull request: the
        // event's, when it is one.
        let on_pr = s.issue_source == "the event"
            && env("GITHUB_EVENT_NAME").is_some_and(|e| e.starts_with("pull_request"));
        carriers::permissions_of(carrier)
            .iter()
            .filter(|p| own || **p == "run-traces")
            .filter(|p| carrier != "issue-comment" || **p != "pull-requests" || on_pr)
            .map(|p| match *p {
                "run-traces" => "run-traces".to_string(),
                p => format!("permission:{p}"),
            })
            .collect()
    }

    fn facts(&self, settings: &Value) -> Vec<(&'static str, String)> {
        let Ok(s) = serde_json::from_value::<Settings>(settings.clone()) else {
            return vec![];
        };
        let mut f = vec![
            ("write-token", escape::bytes(s.token_source.as_bytes())),
            ("read-token", escape::bytes(s.read_token_source.as_bytes())),
        ];
        if let Some(r) = &s.repository {
            f.push(("repository", escape::bytes(r.as_bytes())));
        }
        f.push((
            "issue",
            match s.issue {
                Some(n) => format!("#{n} (from {})", s.issue_source),
                None => "none".into(),
            },
        ));
        f.push(("commit", s.commit.clone().unwrap_or_else(|| "none".into())));
        f.push(("permanent", s.permanent.to_string()));
        f.push(("code-scanning", s.code_scanning.to_string()));
        if let Some(r) = &s.git_ref {
            f.push(("ref", escape::bytes(r.as_bytes())));
        }
        f
    }

    fn open(&self, settings: &Value) -> Result<Box<dyn crate::surface::Instance>, Fault> {
        let s: Settings = serde_json::from_value(settings.clone())
            .map_err(|_| Fault::invalid("bad github-api settings"))?;
        let client = LazyClient::new(
            [&s.token, &s.read_token]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
        );
        Ok(Box::new(Instance { s, client }))
    }
}

struct Instance {
    s: Settings,
    client: LazyClient,
}

impl Instance {
    /// The API with the write token (`read: false`) or the read token;
    /// `Unsupported` when what it needs is missing here.
    fn api(&self, read: bool) -> Result<Api<'_>, Fault> {
        if let Some(why) = &self.s.missing {
            return Err(Fault::unsupported(why.clone()));
        }
        let (token, source) = if read {
            (&self.s.read_token, &self.s.read_token_source)
        } else {
            (&self.s.token, &self.s.token_source)
        };
        Ok(Api {
            client: self.client.get()?,
            base: &self.s.api_url,
            token: token.as_deref().unwrap_or(""),
            source,
        })
    }

    fn repo(&self) -> String {
        if self.s.control {
            return "the control".into();
        }
        escape::bytes(self.s.repository.as_deref().unwrap_or("?").as_bytes())
    }
}

impl crate::surface::Instance for Instance {
    fn unavailable(&self, carrier: &str) -> Option<String> {
        if let Some(why) = &self.s.missing {
            return Some(why.clone());
        }
        let carrier = Gh::parse(carrier)?;
        if PERMANENT.contains(&carrier) && !self.s.permanent {
            return Some(format!(
                "GitHub offers no way to delete a {}: planted only with `permanent: true`",
                if carrier == Gh::CheckRun {
                    "check run"
                } else {
                    "commit status"
                }
            ));
        }
        if carrier == Gh::IssueComment && self.s.issue.is_none() {
            return Some(
                "no issue or pull request to comment on: the event is no pull request; set `issue`"
                    .into(),
            );
        }
        if matches!(carrier, Gh::RunAnnotation | Gh::RunLog) && self.s.run_id.is_none() {
            return Some(
                "not in GitHub Actions: GITHUB_RUN_ID is unset (annotations and logs belong to a \
                 workflow run)"
                    .into(),
            );
        }
        if matches!(carrier, Gh::WorkflowDispatch | Gh::RepositoryDispatch) {
            return dispatch::unavailable(&self.s, carrier);
        }
        if carrier == Gh::CodeScanning && !self.s.code_scanning {
            return Some(
                "uploading a SARIF changes what the repository's code scanning shows (an \
                 analysis and an alert, deleted by cleanup where GitHub allows): planted only \
                 with `code-scanning: true`"
                    .into(),
            );
        }
        if matches!(
            carrier,
            Gh::Deployment | Gh::CommitStatus | Gh::CheckRun | Gh::CodeScanning
        ) && self.s.commit.is_none()
        {
            return Some("no commit: GITHUB_SHA is unset; set `commit`".into());
        }
        if carrier == Gh::CodeScanning && self.s.git_ref.is_none() {
            return Some(
                "no ref: GITHUB_REF is unset or not refs/heads/…, refs/tags/… or refs/pull/…; \
                 set `ref`"
                    .into(),
            );
        }
        None
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        job: &PlantJob,
        created: &mut dyn FnMut(Value),
    ) -> PlantOutcome {
        match Gh::parse(&job.carrier) {
            Some(Gh::CodeScanning) => self.plant_scanning(ctx, job, created),
            Some(Gh::Discussion) => self.plant_discussion(ctx, job, created),
            Some(c @ (Gh::WorkflowDispatch | Gh::RepositoryDispatch)) => {
                self.plant_dispatch(ctx, c, job, created)
            }
            Some(c @ (Gh::RunAnnotation | Gh::RunLog)) => self.plant_trace(ctx, c, job, created),
            Some(carrier) => self.plant_carrier(ctx, carrier, job, created),
            None => PlantOutcome::Error {
                reason: format!("{} is not a carrier of github-api", job.carrier),
            },
        }
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        wanted
            .iter()
            .map(|w| match Gh::parse(&w.carrier) {
                Some(c @ (Gh::RunAnnotation | Gh::RunLog)) => self.recover_trace(ctx, c, w),
                Some(Gh::Discussion) => self.recover_discussion(w),
                _ => self.recover_carrier(ctx, w),
            })
            .collect()
    }

    fn find_planted(&self, ctx: &RunCtx<'_>, jobs: &[PlantJob]) -> Result<Vec<Value>, Fault> {
        let mut found = vec![];
        for j in jobs
            .iter()
            .filter(|j| self.unavailable(&j.carrier).is_none())
        {
            match Gh::parse(&j.carrier) {
                // Found by its category on whatever ref it was uploaded for.
                Some(Gh::CodeScanning) => found.extend(self.find_scanning(ctx, &j.nonce)?),
                Some(Gh::Discussion) => found.push(discussion::entry(ctx, &j.nonce, None)),
                Some(c @ (Gh::WorkflowDispatch | Gh::RepositoryDispatch)) => {
                    found.push(dispatch::entry(ctx, c, &j.nonce, None))
                }
                // Nothing to find: kept, in the run it was printed in.
                Some(c @ (Gh::RunAnnotation | Gh::RunLog)) => {
                    found.push(traces::entry(ctx, c, &j.nonce, None))
                }
                Some(carrier) => found.extend(
                    carriers::plant_request(&self.s, ctx, carrier, &j.nonce)
                        .map(|p| p.entry)
                        .ok(),
                ),
                None => {}
            }
        }
        Ok(found)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Value) -> Result<(), Fault> {
        cleanup::owned_entry(&self.s, ctx, entry)
    }

    fn cleanup(&self, entry: &Value) -> CleanupOutcome {
        self.clean(entry)
    }

    fn cleanup_all(&self, entries: &[Value]) -> Vec<CleanupOutcome> {
        self.clean_all(entries)
    }

    fn describe(&self, entry: &Value) -> String {
        if let Some(p) = entry["permanent"].as_str() {
            return format!("{} of {}", escape::bytes(p.as_bytes()), self.repo());
        }
        let carrier = entry["carrier"].as_str().unwrap_or("?");
        if let Some(c @ (Gh::RunAnnotation | Gh::RunLog)) = Gh::parse(carrier) {
            return format!(
                "the {} {} in {} of {}",
                if c == Gh::RunAnnotation {
                    "annotation"
                } else {
                    "log line"
                },
                escape::bytes(entry["name"].as_str().unwrap_or("?").as_bytes()),
                match entry["run_id"].as_u64() {
                    Some(r) => format!("run {r}"),
                    None => "run A's run".into(),
                },
                self.repo()
            );
        }
        if let Some(Gh::WorkflowDispatch | Gh::RepositoryDispatch) = Gh::parse(carrier) {
            return format!(
                "the {} runs titled with {} of {}",
                escape::bytes(entry["event"].as_str().unwrap_or("?").as_bytes()),
                escape::bytes(entry["name"].as_str().unwrap_or("?").as_bytes()),
                self.repo()
            );
        }
        if carrier == Gh::Discussion.name() {
            return format!(
                "the discussion {} of {}",
                escape::bytes(entry["title"].as_str().unwrap_or("?").as_bytes()),
                self.repo()
            );
        }
        if carrier == Gh::CodeScanning.name() {
            let category = entry["category"].as_str().unwrap_or("?");
            let upload = entry["sarif_id"].as_str().unwrap_or("not recorded");
            return format!(
                "code scanning analyses of category {} (upload {}) of {}",
                escape::bytes(category.as_bytes()),
                escape::bytes(upload.as_bytes()),
                self.repo()
            );
        }
        let what = entry["match"]
            .as_object()
            .and_then(|m| m.values().next())
            .and_then(Value::as_str)
            .unwrap_or("?");
        let what: String = what.chars().take(80).collect();
        format!(
            "{carrier} object {} of {}",
            escape::bytes(what.as_bytes()),
            self.repo()
        )
    }
}

/// `ApiError` from run B as a recovery outcome: GitHub refusing the token
/// a permission is a denial, and says what GitHub wanted; any other
/// refusal proves nothing closed (as [`Instance::refused`] for a plant).
fn read_outcome(e: &ApiError, source: &str) -> RecoverOutcome {
    match e {
        ApiError::Denied { .. } if e.is_permission_refusal() => RecoverOutcome::Denied {
            reason: format!(
                "GitHub refused the read token ({}): {}",
                escape::bytes(source.as_bytes()),
                e.text()
            ),
        },
        _ => RecoverOutcome::Error { reason: e.text() },
    }
}
