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

mod answers;
mod carriers;
mod cleanup;
mod discussion;
mod dispatch;
mod entry;
mod graphql;
mod plant;
mod recover;
mod scanning;
mod settings;
mod traces;

use super::{
    About, CleanupOutcome, Control, Job, Journal, Notice, PlantOutcome, RecoverOutcome, RunCtx,
    Want,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::http::LazyClient;
use carriers::Gh;
use entry::{Entry, Needle};
use serde_json::json;
use settings::Settings;

pub use graphql::{DOCUMENTS as GRAPHQL_DOCUMENTS, graphql_url};

/// An open GitHub repository: its settings, and the client both tokens
/// go through.
pub struct GitHubApi {
    settings: Settings,
    client: LazyClient,
}

impl super::Surface for GitHubApi {
    const NAME: &'static str = "github-api";
    const DESCRIPTION: &'static str = "objects of a GitHub repository one run writes and another reads through the REST and GraphQL APIs (labels, comments, milestones, releases, deployments, variables, statuses, check runs, discussions, code scanning analyses) and the traces a step leaves in its run (annotations, log lines)";
    const KEYS: &'static [&'static str] = &[
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
    ];
    const LATER_JOB_ONLY: &'static [Gh] = &[Gh::RunAnnotation, Gh::RunLog];
    type Carrier = Gh;
    type Settings = Settings;
    type Entry = Entry;
    type Needle = Needle;

    fn validate(opts: Options<'_>) -> Result<Settings, ConfigError> {
        settings::validate(opts)
    }

    fn about(s: &Settings) -> About<Gh> {
        settings::about(s)
    }

    fn control(
        _like: Option<&Settings>,
        _dir: &std::path::Path,
    ) -> Result<Control<Settings>, Fault> {
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
            job_own: false,
            on_pull_request: false,
        };
        Ok(Control::served_listing(s, server))
    }

    fn open(settings: Settings) -> Result<GitHubApi, Fault> {
        let client = LazyClient::new(
            [&settings.token, &settings.read_token]
                .into_iter()
                .flatten()
                .cloned()
                .collect(),
        );
        Ok(GitHubApi { settings, client })
    }

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Gh>],
        journal: &mut Journal<'_, Entry>,
    ) -> Vec<PlantOutcome<Needle>> {
        super::each(jobs, |job| match job.carrier {
            Gh::CodeScanning => self.plant_scanning(ctx, job, journal),
            Gh::Discussion => self.plant_discussion(ctx, job, journal),
            Gh::WorkflowDispatch | Gh::RepositoryDispatch => self.plant_dispatch(ctx, job, journal),
            Gh::RunAnnotation | Gh::RunLog => self.plant_trace(ctx, job, journal),
            _ => self.plant_carrier(ctx, job, journal),
        })
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Gh, Needle>],
        _notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        wanted
            .iter()
            .map(|w| match w.carrier {
                Gh::RunAnnotation | Gh::RunLog => self.recover_trace(ctx, w),
                Gh::Discussion => self.recover_discussion(w),
                _ => self.recover_carrier(ctx, w),
            })
            .collect()
    }

    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Gh>]) -> Result<Vec<Entry>, Fault> {
        let mut found = vec![];
        for j in jobs
            .iter()
            .filter(|j| settings::unavailable(&self.settings, j.carrier).is_none())
        {
            match j.carrier {
                // Found by its category on whatever ref it was uploaded for.
                Gh::CodeScanning => found.extend(self.find_scanning(ctx, &j.nonce)?),
                Gh::Discussion => found.push(discussion::entry(ctx, &j.nonce, None)),
                c @ (Gh::WorkflowDispatch | Gh::RepositoryDispatch) => {
                    found.push(dispatch::entry(ctx, c, &j.nonce, None))
                }
                // Nothing to find: kept, in the run it was printed in.
                c @ (Gh::RunAnnotation | Gh::RunLog) => {
                    found.push(traces::entry(ctx, c, &j.nonce, None))
                }
                carrier => found.extend(
                    carriers::plant_request(&self.settings, ctx, carrier, &j.nonce)
                        .map(|p| p.entry)
                        .ok(),
                ),
            }
        }
        Ok(found)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Entry) -> Result<(), Fault> {
        cleanup::owned_entry(&self.settings, ctx, entry)
    }

    fn clean(&self, entries: &[Entry]) -> Vec<CleanupOutcome> {
        self.clean_all(entries)
    }
}

impl GitHubApi {
    /// The API with the write token (`read: false`) or the read token;
    /// `Unsupported` when what it needs is missing here.
    fn api(&self, read: bool) -> Result<Api<'_>, Fault> {
        if let Some(why) = &self.settings.missing {
            return Err(Fault::unsupported(why.clone()));
        }
        let (token, source) = if read {
            (&self.settings.read_token, &self.settings.read_token_source)
        } else {
            (&self.settings.token, &self.settings.token_source)
        };
        Ok(Api {
            client: self.client.get()?,
            base: &self.settings.api_url,
            token: token.as_deref().unwrap_or(""),
            source,
        })
    }

    fn repo(&self) -> String {
        if self.settings.control {
            return "the control".into();
        }
        escape::bytes(
            self.settings
                .repository
                .as_deref()
                .unwrap_or("?")
                .as_bytes(),
        )
    }
}

/// `ApiError` from run B as a recovery outcome: GitHub refusing the token
/// a permission is a denial, and says what GitHub wanted; any other
/// refusal proves nothing closed (as [`GitHubApi::refused`] for a plant).
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
