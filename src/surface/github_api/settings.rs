//! github-api's settings (the `Settings` type), and the helpers the type's
//! `validate` and `about` use: the issue an event names, a full commit id,
//! the job's own context, the facts the report shows, and which carriers
//! the settings rule out, and why.

use super::carriers::{Gh, PERMANENT};
use super::dispatch;
use crate::config::Options;
use crate::escape;
use crate::surface::About;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What every step gets. Holds credentials: never printed, never in a
/// report (only the facts of the type's `about` describe them, by source).
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub(super) api_url: String,
    pub(super) repository: Option<String>,
    pub(super) token: Option<String>,
    pub(super) token_source: String,
    pub(super) read_token: Option<String>,
    pub(super) read_token_source: String,
    /// Why there is no write or read token or no repository: every
    /// carrier is SKIPPED with it.
    pub(super) missing: Option<String>,
    /// Whether `missing` is a token the config names (`token-env`,
    /// `read-token-env`) that is unset here.
    #[serde(default)]
    pub(super) missing_is_secret: bool,
    /// The issue or pull request for issue-comment, and where it came
    /// from.
    pub(super) issue: Option<u64>,
    pub(super) issue_source: String,
    /// The commit for deployment, commit-status and check-run.
    pub(super) commit: Option<String>,
    pub(super) permanent: bool,
    /// `code-scanning: true`: the operator accepts an upload that changes
    /// what the repository's code scanning shows.
    #[serde(default)]
    pub(super) code_scanning: bool,
    /// The ref code-scanning uploads for (`ref`, else `GITHUB_REF`), when
    /// it is one code scanning takes.
    #[serde(default)]
    pub(super) git_ref: Option<String>,
    /// The workflow run and attempt run A is in (`GITHUB_RUN_ID`,
    /// `GITHUB_RUN_ATTEMPT`), and the runner (`RUNNER_NAME`): for the
    /// run traces.
    #[serde(default)]
    pub(super) run_id: Option<u64>,
    #[serde(default)]
    pub(super) run_attempt: Option<u64>,
    #[serde(default)]
    pub(super) runner_name: Option<String>,
    /// The category a discussion goes in (`discussion-category`: a name
    /// or a slug); `None`: `general`, else the first listed.
    #[serde(default)]
    pub(super) discussion_category: Option<String>,
    /// `dispatch-workflow` and `dispatch-input`: the workflow
    /// workflow-dispatch starts and the input its `run-name` shows.
    #[serde(default)]
    pub(super) dispatch_workflow: Option<String>,
    #[serde(default)]
    pub(super) dispatch_input: Option<String>,
    /// `repository-dispatch: true`: a workflow shows the event's action.
    #[serde(default)]
    pub(super) repository_dispatch: bool,
    /// How long a listing that shows neither run B nor the writer the
    /// plant is taken again (`consistency-wait`).
    #[serde(default = "crate::surface::listing::default_wait_ms")]
    pub(super) consistency_wait_ms: u64,
    pub(super) control: bool,
    /// Both runs write and read with the job's own token, on the job's
    /// repository and API: a `permission:` exposure is this job's.
    /// Why here: coverage asks for exposures with the settings alone, and
    /// this is what the environment it reads (`GITHUB_API_URL`,
    /// `GITHUB_REPOSITORY`) said; `validate` sees that same environment.
    #[serde(default)]
    pub(super) job_own: bool,
    /// The issue is the event's, and the event a pull request's
    /// (`GITHUB_EVENT_NAME`): a comment then tests pull-requests. (Read in
    /// `validate`, as `job_own`.)
    #[serde(default)]
    pub(super) on_pull_request: bool,
}

/// The pull request (or issue) the run's event is about, from
/// `GITHUB_EVENT_PATH`.
pub(super) fn event_issue(opts: &Options<'_>) -> Option<u64> {
    let path = opts.env("GITHUB_EVENT_PATH")?;
    // (A regular file, bounded: the job can write where it lies.)
    let text = crate::sys::read_regular(std::path::Path::new(&path), 64 << 20).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    v["pull_request"]["number"]
        .as_u64()
        .or(v["issue"]["number"].as_u64())
}

/// Whether a commit is a full 40-hex sha.
pub(super) fn full_sha(c: &str) -> bool {
    c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether these are the job's own token, repository and API, and whether
/// the issue is the event's pull request, as the environment says.
pub(super) fn job_context(s: &Settings, opts: &Options<'_>) -> (bool, bool) {
    // The job's own: both runs with the job's token, on the job's
    // repository and API. A PAT, another repository or another server
    // tests something, but not what this job's token can do.
    let api = opts
        .env("GITHUB_API_URL")
        .unwrap_or_else(|| "https://api.github.com".into());
    let own = s.token_source == "GITHUB_TOKEN"
        && s.read_token_source == "GITHUB_TOKEN"
        && s.repository.is_some()
        && s.repository == opts.env("GITHUB_REPOSITORY")
        && s.api_url == api.trim_end_matches('/');
    // A comment tests pull-requests only on a pull request: the event's,
    // when it is one.
    let on_pr = s.issue_source == "the event"
        && opts
            .env("GITHUB_EVENT_NAME")
            .is_some_and(|e| e.starts_with("pull_request"));
    (own, on_pr)
}

/// The facts the report shows: the tokens by source, the repository, the
/// issue and where it came from, the commit, the opt-ins, the ref.
pub(super) fn facts(s: &Settings, about: About<Gh>) -> About<Gh> {
    let mut about = about
        .fact("write-token", escape::bytes(s.token_source.as_bytes()))
        .fact("read-token", escape::bytes(s.read_token_source.as_bytes()));
    if let Some(r) = &s.repository {
        about = about.fact("repository", escape::bytes(r.as_bytes()));
    }
    about = about
        .fact(
            "issue",
            match s.issue {
                Some(n) => format!("#{n} (from {})", s.issue_source),
                None => "none".into(),
            },
        )
        .fact("commit", s.commit.clone().unwrap_or_else(|| "none".into()))
        .fact("permanent", s.permanent.to_string())
        .fact("code-scanning", s.code_scanning.to_string());
    if let Some(r) = &s.git_ref {
        about = about.fact("ref", escape::bytes(r.as_bytes()));
    }
    about
}

/// Why `carrier` is not planted here, if it is not: what the settings lack
/// (the token, the repository), then what the carrier itself needs.
pub fn unavailable(s: &Settings, carrier: Gh) -> Option<String> {
    s.missing.clone().or_else(|| ruled_out(s, carrier))
}

/// Why `carrier` itself is not planted here (an opt-in not given, no
/// issue, commit, run or ref), the checks in the order 0.11.0 made them.
pub(super) fn ruled_out(s: &Settings, carrier: Gh) -> Option<String> {
    if PERMANENT.contains(&carrier) && !s.permanent {
        return Some(format!(
            "GitHub offers no way to delete a {}: planted only with `permanent: true`",
            if carrier == Gh::CheckRun {
                "check run"
            } else {
                "commit status"
            }
        ));
    }
    if carrier == Gh::IssueComment && s.issue.is_none() {
        return Some(
            "no issue or pull request to comment on: the event is no pull request; set `issue`"
                .into(),
        );
    }
    if matches!(carrier, Gh::RunAnnotation | Gh::RunLog) && s.run_id.is_none() {
        return Some(
            "not in GitHub Actions: GITHUB_RUN_ID is unset (annotations and logs belong to a \
             workflow run)"
                .into(),
        );
    }
    if matches!(carrier, Gh::WorkflowDispatch | Gh::RepositoryDispatch) {
        return dispatch::unavailable(s, carrier);
    }
    if carrier == Gh::CodeScanning && !s.code_scanning {
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
    ) && s.commit.is_none()
    {
        return Some("no commit: GITHUB_SHA is unset; set `commit`".into());
    }
    if carrier == Gh::CodeScanning && s.git_ref.is_none() {
        return Some(
            "no ref: GITHUB_REF is unset or not refs/heads/…, refs/tags/… or refs/pull/…; \
             set `ref`"
                .into(),
        );
    }
    None
}
