//! github-api's settings: what `validate` takes from the config and the
//! environment, and what the settings say about themselves (the facts the
//! report shows, the exposures each carrier tests, and which carriers they
//! rule out, and why).

use super::carriers::{self, Gh, PERMANENT};
use super::{dispatch, scanning};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::surface::About;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What every step gets. Holds credentials: never printed, never in a
/// report (only the facts of [`about`] describe them, by source).
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
fn event_issue(opts: &Options<'_>) -> Option<u64> {
    let path = opts.env("GITHUB_EVENT_PATH")?;
    // (A regular file, bounded: the job can write where it lies.)
    let text = crate::sys::read_regular(std::path::Path::new(&path), 64 << 20).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    v["pull_request"]["number"]
        .as_u64()
        .or(v["issue"]["number"].as_u64())
}

/// Whether a commit is a full 40-hex sha.
fn full_sha(c: &str) -> bool {
    c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Takes github-api's keys from a config entry.
pub fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
    let repository = crate::github::repository_option(&mut opts)?;
    let api_url = crate::github::api_url_option(&mut opts)?;
    let token_source =
        crate::surface::env_name(&mut opts, "token-env")?.unwrap_or_else(|| "GITHUB_TOKEN".into());
    let read_token_source = crate::surface::env_name(&mut opts, "read-token-env")?
        .unwrap_or_else(|| token_source.clone());
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
            if !full_sha(&c) {
                return Err(opts.error(pos, "`commit` must be a full 40-hex commit sha"));
            }
            Some(c)
        }
        None => opts.env("GITHUB_SHA").filter(|c| full_sha(c)),
    };
    let permanent = opts.bool("permanent")?.unwrap_or(false);
    let name_key = |opts: &mut Options<'_>, key: &str| -> Result<Option<String>, ConfigError> {
        match opts.string(key)? {
            Some((v, pos)) if !crate::surface::plain_segment(&v.replace('.', "_")) => Err(opts
                .error(
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
    let mut s = Settings {
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
        consistency_wait_ms: crate::surface::listing::wait_option(&mut opts)?.as_millis() as u64,
        control: false,
        job_own: false,
        on_pull_request: false,
    };
    (s.job_own, s.on_pull_request) = job_context(&s, &opts);
    Ok(s)
}

/// Whether these are the job's own token, repository and API, and whether
/// the issue is the event's pull request, as the environment says.
fn job_context(s: &Settings, opts: &Options<'_>) -> (bool, bool) {
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

/// What the settings say: entries live `of` the repository; the facts;
/// each carrier's exposures; the carriers ruled out, in the order the
/// checks are made (the first that rules a carrier out says why).
pub fn about(s: &Settings) -> About<Gh> {
    let place = if s.control {
        "the control".to_string()
    } else {
        escape::bytes(s.repository.as_deref().unwrap_or("?").as_bytes())
    };
    let mut about = facts(s, About::new(format!("of {place}")));
    for &c in Gh::ALL {
        for p in carriers::permissions_of(c.name())
            .iter()
            .filter(|p| s.job_own || **p == "run-traces")
            .filter(|p| c != Gh::IssueComment || **p != "pull-requests" || s.on_pull_request)
        {
            about = about.exposure_of(
                c,
                match *p {
                    "run-traces" => "run-traces".to_string(),
                    p => format!("permission:{p}"),
                },
            );
        }
    }
    if let Some(why) = &s.missing {
        about = about.unavailable(why.clone());
    }
    for &c in Gh::ALL {
        if let Some(why) = ruled_out(s, c) {
            about = about.unavailable_of(c, why);
        }
    }
    about
}

/// The facts the report shows: the tokens by source, the repository, the
/// issue and where it came from, the commit, the opt-ins, the ref.
fn facts(s: &Settings, about: About<Gh>) -> About<Gh> {
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
fn ruled_out(s: &Settings, carrier: Gh) -> Option<String> {
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
