//! `runwarden publish`: puts a finished report where reviewers look,
//! through GitHub's REST API with the job's token. Three parts, each
//! switchable: a check run on the head commit with every FAIL and ERROR
//! annotated ([`check_run`]), one sticky pull request comment per config
//! that says what changed ([`comment`]), and the SARIF upload to code
//! scanning ([`sarif`]).
//!
//! Publishing never changes a verdict. GitHub's refusal (a read-only token,
//! a pull request from a fork, code scanning not enabled) is a notice that
//! names the permission GitHub wanted; a part that broke (the API
//! unreachable, an answer GitHub would not give, processing that failed)
//! is an error. Every request goes through [`crate::github::Api`]: bounded
//! by timeouts, rate limits waited out when GitHub says how long, the
//! token only in a header and registered with [`crate::redact`].

mod check_run;
mod comment;
mod sarif;

use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::output::repo::Context;
use crate::report::{Mode, Report};
use std::time::Duration;

/// When the pull request comment is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CommentMode {
    /// Create or update it on every run.
    Always,
    /// Update it when a verdict changed since the comment; create it when
    /// the run is not green (a pull request that was always green gets
    /// none).
    OnChange,
    /// Never write one.
    Never,
}

/// Which parts to publish, and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The check run's name; `None`: no check run.
    pub check_run: Option<String>,
    pub comment: CommentMode,
    /// The comment's author to look for (default: who the token is, else
    /// `github-actions[bot]`, the `GITHUB_TOKEN`'s identity).
    pub comment_author: Option<String>,
    /// The code scanning category; `None`: no upload.
    pub sarif_category: Option<String>,
    /// How long to wait for code scanning to process the upload.
    pub sarif_wait: Duration,
    /// The marker key: signs the comment's state (and finds it by that).
    pub key: crate::marker::Key,
}

/// Where to publish: the repository, the token and what the run is about.
#[derive(Debug, Clone)]
pub struct Target {
    /// The API base URL, without a trailing `/`.
    pub api_url: String,
    /// `owner/name`.
    pub repository: String,
    /// (variable it came from, value).
    pub token: (String, String),
    /// The commit the run checked (`GITHUB_SHA`: for a pull request, the
    /// merge commit): the SARIF's `commit_sha`.
    pub sha: Option<String>,
    /// The commit reviewers see (a pull request's head, else `sha`): the
    /// check run's `head_sha`.
    pub head_sha: Option<String>,
    /// `GITHUB_REF` (`refs/pull/N/merge` for a pull request): the SARIF's
    /// `ref`.
    pub git_ref: Option<String>,
    /// The pull request number, when the run is about one.
    pub pr: Option<u64>,
    /// The pull request comes from a fork (its token is read-only).
    pub fork: bool,
    /// A link to the workflow run.
    pub run_url: Option<String>,
}

/// What the command line overrides.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub repository: Option<String>,
    pub sha: Option<String>,
    pub git_ref: Option<String>,
    pub pr: Option<u64>,
    pub token_env: Option<String>,
    pub api_url: Option<String>,
}

/// A GitHub event payload larger than this is not read (GitHub's webhook
/// payloads are capped at 25 MB).
const MAX_EVENT: u64 = 32 << 20;

fn is_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Target {
    /// From the environment GitHub Actions sets, with `o` winning. The
    /// event payload (`GITHUB_EVENT_PATH`) gives the pull request's number,
    /// head commit and whether it comes from a fork. Every `Err` is
    /// `Invalid`: what the environment or the command line gave (or left
    /// out) is not a target.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>, o: &Overrides) -> Result<Target, Fault> {
        let repository = o
            .repository
            .clone()
            .or_else(|| env("GITHUB_REPOSITORY"))
            .ok_or_else(|| {
                Fault::invalid(
                    "publish needs the repository: GITHUB_REPOSITORY is unset; pass --repository",
                )
            })?;
        crate::github::check_repository(&repository)
            .map_err(|m| m.context(format_args!("repository `{repository}`")))?;
        let sources: Vec<String> = match &o.token_env {
            Some(n) => vec![n.clone()],
            None => ["GITHUB_TOKEN", "INPUT_GITHUB-TOKEN", "GH_TOKEN"]
                .map(String::from)
                .to_vec(),
        };
        let token = sources
            .iter()
            .find_map(|n| env(n).map(|v| (n.clone(), v)))
            .ok_or_else(|| {
                let named: Vec<&str> = sources
                    .iter()
                    .map(String::as_str)
                    .filter(|n| !n.starts_with("INPUT_"))
                    .collect();
                Fault::invalid(format!(
                    "publish needs a token: {} is unset (the action passes its `github-token`)",
                    named.join(" / ")
                ))
            })?;
        let api_url = o
            .api_url
            .clone()
            .or_else(|| env("GITHUB_API_URL"))
            .unwrap_or_else(|| "https://api.github.com".into());
        crate::http::check_url(&api_url).map_err(|m| Fault::invalid(format!("API URL: {m}")))?;
        let event_name = env("GITHUB_EVENT_NAME").unwrap_or_default();
        // A workflow_run's GITHUB_SHA and GITHUB_REF are the default
        // branch's, not the probed run's: publishing there would put the
        // results on main.
        if event_name == "workflow_run" && (o.sha.is_none() || o.git_ref.is_none()) {
            return Err(Fault::invalid(
                "publishing from a workflow_run event: its GITHUB_SHA and GITHUB_REF \
                        are the default branch's, not those of the run that made the report; \
                        pass --sha, --ref and --pr, or publish from the probing workflow",
            ));
        }
        let event = env("GITHUB_EVENT_PATH")
            .and_then(|p| read_event(&p))
            .unwrap_or(serde_json::Value::Null);
        let pr_of_event = &event["pull_request"];
        let pr = o.pr.or_else(|| pr_of_event["number"].as_u64());
        let head_of_event = pr_of_event["head"]["sha"]
            .as_str()
            .filter(|s| is_sha(s))
            .map(str::to_string);
        // Only `pull_request` runs of a fork get a read-only token;
        // `pull_request_target` runs hold the base repository's.
        let fork = event_name == "pull_request"
            && pr_of_event["head"]["repo"]["full_name"]
                .as_str()
                .is_some_and(|h| !h.eq_ignore_ascii_case(&repository));
        let sha = match &o.sha {
            Some(s) if is_sha(s) => Some(s.clone()),
            Some(s) => {
                return Err(Fault::invalid(format!(
                    "--sha `{s}` is not a commit id (40 hex digits)"
                )));
            }
            None => env("GITHUB_SHA").filter(|s| is_sha(s)),
        };
        let head_sha = match &o.sha {
            Some(_) => sha.clone(),
            None => head_of_event.or_else(|| sha.clone()),
        };
        let run_url = match (env("GITHUB_SERVER_URL"), env("GITHUB_RUN_ID")) {
            (Some(server), Some(run)) if run.bytes().all(|b| b.is_ascii_digit()) => Some(format!(
                "{}/{repository}/actions/runs/{run}",
                server.trim_end_matches('/')
            )),
            _ => None,
        };
        Ok(Target {
            api_url: api_url.trim_end_matches('/').to_string(),
            repository,
            token,
            sha,
            head_sha,
            // A commit given without its ref would pair it with the
            // run's own ref (`refs/pull/N/merge` and a head commit).
            git_ref: match (&o.sha, &o.git_ref) {
                (_, Some(r)) => Some(r.clone()),
                (Some(_), None) => None,
                (None, None) => env("GITHUB_REF"),
            },
            pr,
            fork,
            run_url,
        })
    }
}

fn read_event(path: &str) -> Option<serde_json::Value> {
    use std::io::Read as _;
    let mut text = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_EVENT)
        .read_to_end(&mut text)
        .ok()?;
    serde_json::from_slice(&text).ok()
}

/// What became of one part.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done(String),
    /// Not attempted, and nothing wrong (not a pull request, nothing to
    /// say yet).
    Skipped(String),
    /// GitHub's access control refused (a read-only token, a fork's pull
    /// request, code scanning not enabled), or the outcome is not known
    /// yet (code scanning still processing): a notice, never a failure.
    Notice(String),
    /// The part did not land.
    Failed(String),
}

/// One part's name (`check run`, `pr comment`, `sarif upload`) and outcome.
pub type Part = (&'static str, Outcome);

/// Publishes `report`; one outcome per part asked for. `ctx` points
/// findings at repository files.
pub fn publish(report: &Report, ctx: &Context, target: &Target, opts: &Options) -> Vec<Part> {
    let mut parts = Vec::new();
    if report.mode == Mode::Cleanup {
        parts.push((
            "publish",
            Outcome::Skipped("a cleanup report has no verdicts to publish".into()),
        ));
        return parts;
    }
    let client = match crate::http::Client::new(
        Duration::from_secs(30),
        Duration::from_secs(120),
        vec![target.token.1.clone()],
    ) {
        Ok(c) => c,
        Err(e) => return vec![("publish", Outcome::Failed(e.into_reason()))],
    };
    let api = Api {
        client: &client,
        base: &target.api_url,
        token: &target.token.1,
        source: &target.token.0,
    };
    if let Some(name) = &opts.check_run {
        parts.push((
            "check run",
            check_run::publish(&api, target, report, ctx, name),
        ));
    }
    if opts.comment != CommentMode::Never {
        parts.push(("pr comment", comment::publish(&api, target, report, opts)));
    }
    if let Some(category) = &opts.sarif_category {
        parts.push((
            "sarif upload",
            sarif::publish(&api, target, report, ctx, category, opts.sarif_wait),
        ));
    }
    parts
}

/// A refusal as a notice: what was refused and the `permissions:` line
/// that would allow it (from `X-Accepted-GitHub-Permissions`, else
/// `fallback`), and why a fork's pull request cannot.
fn refused(what: &str, e: &ApiError, fallback: &str, target: &Target) -> Outcome {
    let ApiError::Denied {
        message, wanted, ..
    } = e
    else {
        return Outcome::Failed(format!("{what}: {}", e.text()));
    };
    let yaml = |w: &str| -> String {
        w.split(';')
            .map(|alt| {
                alt.split(',')
                    .filter_map(|p| p.trim().split_once('='))
                    .map(|(k, v)| format!("`{}: {}`", k.trim().replace('_', "-"), v.trim()))
                    .collect::<Vec<_>>()
                    .join(" and ")
            })
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let need = wanted
        .as_deref()
        .map(yaml)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| fallback.to_string());
    let fork = if target.fork {
        "; a pull request from a fork gets a read-only token whatever the workflow asks \
         (see docs/publish.md)"
    } else {
        ""
    };
    Outcome::Notice(format!(
        "{what}: GitHub refused ({message}); the job's `permissions:` need {need}{fork}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            api_url: "https://api.github.com".into(),
            repository: "o/r".into(),
            token: ("GITHUB_TOKEN".into(), "t".into()),
            sha: None,
            head_sha: None,
            git_ref: None,
            pr: None,
            fork: true,
            run_url: None,
        }
    }

    #[test]
    fn a_refusal_names_the_permission_as_yaml() {
        let e = ApiError::Denied {
            message: "Resource not accessible by integration".into(),
            wanted: Some("issues=write; pull_requests=write".into()),
            permission: true,
        };
        let Outcome::Notice(m) = refused("creating the comment", &e, "x", &target()) else {
            panic!()
        };
        assert!(
            m.contains("`issues: write` or `pull-requests: write`") && m.contains("fork"),
            "{m}"
        );
        let broke = ApiError::Failed("HTTP 500".into());
        assert!(matches!(
            refused("x", &broke, "y", &target()),
            Outcome::Failed(_)
        ));
    }
}
