//! Each run's trust: what triggered it, and so whether what it writes may
//! be what a release reads. The channels that matter most run one way,
//! from a low-trust run (a fork's pull request, `pull_request_target`,
//! `issue_comment`, an agent) to a trusted one (a push to a protected
//! branch, a release); a FAIL in that direction is cache poisoning
//! (TanStack's compromise of May 2026, Cacheract, CREEP), and every output
//! leads with it ([`direction`]).
//!
//! The class comes from the event and its payload (a fork's head
//! repository), never from `GITHUB_REF`: on `pull_request_target` the ref
//! is the base branch. Whether a ref is protected is the API's branch
//! `protected` field (the job's token, `contents: read`). Run A's trust,
//! in a recover, is the API's record of the planting run when run B can
//! read it ([`of_run`]); a receipt's word is only a claim, and said so.

use crate::fault::Fault;
use crate::github::{Api, ApiError};
use ::http::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's trust class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Its writes can be a stranger's: `pull_request_target`, an event
    /// anyone can cause (`issue_comment`, `issues`, `discussion`,
    /// `discussion_comment`, `fork`, `watch`), a pull request from a fork,
    /// a `workflow_run` of one.
    Untrusted,
    /// `push`, `schedule` or `workflow_dispatch` on a protected branch (a
    /// `release`'s ref is a tag, whose protection is not read: never
    /// trusted here).
    Trusted,
    /// Anything else: a same-repository pull request, `merge_group`,
    /// `workflow_call`, a ref the API did not say was protected, a run
    /// outside GitHub Actions.
    Unclassified,
}

/// One run's trust, as the report carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trust {
    pub class: Class,
    /// `GITHUB_EVENT_NAME` (or the API run's `event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// Whether the pull request (or the run a `workflow_run` follows)
    /// comes from a fork.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork: Option<bool>,
    /// The actor's type (`User`, `Bot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_type: Option<String>,
    /// Why this class.
    pub why: String,
    /// Where it was read: this job's environment and event payload, the
    /// API's record of a run, or a receipt's claim.
    pub source: String,
}

/// What the report says of both runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusts {
    pub a: Trust,
    pub b: Trust,
    /// When a channel is open (FAIL) from an untrusted run A to a trusted
    /// run B: the line every output leads with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poisoning: Option<String>,
}

/// The events whose run is trusted on a protected branch.
const TRUSTED_EVENTS: [&str; 4] = ["push", "schedule", "workflow_dispatch", "release"];

/// The events anyone may cause, whose run is the default branch's
/// workflow with its secrets: untrusted whatever their ref.
pub const STRANGERS: [&str; 7] = [
    "pull_request_target",
    "issue_comment",
    "issues",
    "discussion",
    "discussion_comment",
    "fork",
    "watch",
];

/// Every event name GitHub documents that a run's trust can name: any
/// other text from a payload, an environment or a receipt is shown as
/// "(unrecognised event)" in the poisoning line (it leads a comment's
/// heading and a check run's title).
const KNOWN_EVENTS: &[&str] = &[
    "branch_protection_rule",
    "check_run",
    "check_suite",
    "create",
    "delete",
    "deployment",
    "deployment_status",
    "discussion",
    "discussion_comment",
    "fork",
    "gollum",
    "issue_comment",
    "issues",
    "label",
    "merge_group",
    "milestone",
    "page_build",
    "public",
    "pull_request",
    "pull_request_review",
    "pull_request_review_comment",
    "pull_request_target",
    "push",
    "registry_package",
    "release",
    "repository_dispatch",
    "schedule",
    "status",
    "watch",
    "workflow_call",
    "workflow_dispatch",
    "workflow_run",
];

/// The class of a run of `event` with `payload` on `git_ref`; `protected`
/// answers whether a branch is protected (the API's word, or why it could
/// not say). Returns the class, why, and whether it came from a fork.
pub fn classify(
    event: &str,
    payload: &Value,
    git_ref: Option<&str>,
    protected: &dyn Fn(&str) -> Result<bool, Fault>,
) -> (Class, String, Option<bool>) {
    let repo = payload["repository"]["full_name"].as_str();
    // A head repository that is not the base's, or gone (a deleted fork).
    let forked = |head: &Value| match (head["full_name"].as_str(), repo) {
        (Some(h), Some(r)) => Some(h != r),
        (None, Some(_)) if head.is_null() => Some(true),
        _ => None,
    };
    match event {
        "pull_request_target" => (
            Class::Untrusted,
            "pull_request_target runs the base branch's workflow with its secrets for a pull request anyone may open".into(),
            forked(&payload["pull_request"]["head"]["repo"]),
        ),
        e if STRANGERS.contains(&e) => (
            Class::Untrusted,
            format!("{e} runs the default branch's workflow with its secrets on something anyone may do"),
            None,
        ),
        "pull_request" | "pull_request_review" | "pull_request_review_comment" => {
            match forked(&payload["pull_request"]["head"]["repo"]) {
                Some(true) => (Class::Untrusted, format!("{event} from a fork"), Some(true)),
                Some(false) => (
                    Class::Unclassified,
                    format!("{event} from a branch of the repository itself: its author may push here"),
                    Some(false),
                ),
                None => (
                    Class::Unclassified,
                    format!("{event} whose payload does not say where the pull request comes from"),
                    None,
                ),
            }
        }
        "workflow_run" => {
            let wr = &payload["workflow_run"];
            let of = wr["event"].as_str().unwrap_or("");
            let fork = forked(&wr["head_repository"]);
            if STRANGERS.contains(&of)
                || (of.starts_with("pull_request") && fork == Some(true))
            {
                (
                    Class::Untrusted,
                    format!("workflow_run of an untrusted run ({of}{})", if fork == Some(true) { " from a fork" } else { "" }),
                    fork,
                )
            } else {
                (
                    Class::Unclassified,
                    format!("workflow_run of a {} run", if of.is_empty() { "(unnamed)" } else { of }),
                    fork,
                )
            }
        }
        e if TRUSTED_EVENTS.contains(&e) => match git_ref.and_then(|r| r.strip_prefix("refs/heads/")) {
            Some(branch) => match protected(branch) {
                Ok(true) => (Class::Trusted, format!("{e} on the protected branch {branch}"), None),
                Ok(false) => (
                    Class::Unclassified,
                    format!("{e} on {branch}, which the API says is not protected"),
                    None,
                ),
                Err(why) => (
                    Class::Unclassified,
                    format!(
                        "{e} on {branch}, whose protection the API did not say ({})",
                        why.reason()
                    ),
                    None,
                ),
            },
            None => (
                Class::Unclassified,
                format!(
                    "{e} on {}: only a branch's protection is read (the API's branch `protected`)",
                    git_ref.unwrap_or("no ref")
                ),
                None,
            ),
        },
        e => (
            Class::Unclassified,
            format!("{e}: neither an untrusted nor a trusted event"),
            None,
        ),
    }
}

/// The API the job's token reaches: `GITHUB_API_URL`, `GITHUB_REPOSITORY`,
/// and `GITHUB_TOKEN` (else `GH_TOKEN`).
pub struct JobApi {
    base: String,
    pub repo: String,
    token: String,
    source: &'static str,
    client: crate::http::LazyClient,
}

impl JobApi {
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Option<JobApi> {
        let get = |k: &str| env(k).filter(|v| !v.is_empty());
        let (token, source) = match (get("GITHUB_TOKEN"), get("GH_TOKEN")) {
            (Some(t), _) => (t, "GITHUB_TOKEN"),
            (None, Some(t)) => (t, "GH_TOKEN"),
            _ => return None,
        };
        let repo = get("GITHUB_REPOSITORY")?;
        crate::github::check_repository(&repo).ok()?;
        let base = get("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into());
        let base = base.trim_end_matches('/').to_string();
        Some(JobApi {
            client: crate::http::LazyClient::new(vec![token.clone()]),
            base,
            repo,
            token,
            source,
        })
    }

    /// The API, its client made on first use.
    fn api(&self) -> Result<Api<'_>, ApiError> {
        let client = self
            .client
            .get()
            .map_err(|f| ApiError::Failed(f.to_string()))?;
        Ok(Api {
            client,
            base: &self.base,
            token: &self.token,
            source: self.source,
        })
    }

    /// One GET of `path` (under the API's base).
    pub fn get(&self, path: &str, what: &str) -> Result<Value, ApiError> {
        self.api()?
            .call(Method::GET, path, None, what)
            .map(|a| a.json)
    }

    /// One DELETE of `path` (under the API's base).
    pub fn delete(&self, path: &str, what: &str) -> Result<(), ApiError> {
        self.api()?
            .call(Method::DELETE, path, None, what)
            .map(|_| ())
    }

    /// Where GitHub redirects a download of `path` to (a signed URL,
    /// fetched without the token: [`JobApi::fetch_signed`]).
    pub fn redirect(&self, path: &str, what: &str) -> Result<String, ApiError> {
        self.api()?.redirect(path, what)
    }

    /// A signed URL's body, without the token, at most 16 MiB.
    pub fn fetch_signed(&self, url: &str) -> Result<Vec<u8>, Fault> {
        let client = self.client.get()?;
        let r = client.send(&crate::http::Request::new(Method::GET, url))?;
        if r.status != 200 {
            return Err(Fault::broken(format!(
                "the signed URL answered HTTP {}",
                r.status
            )));
        }
        Ok(r.body)
    }

    /// Whether `branch` of the repository is protected: the API's branch
    /// `protected` field (`contents: read`).
    pub fn protected(&self, branch: &str) -> Result<bool, Fault> {
        if !crate::surface::plain_ref(&format!("refs/heads/{branch}")) {
            return Err(Fault::invalid("not a branch name the API is asked about"));
        }
        let v = self
            .get(
                &format!("/repos/{}/branches/{branch}", self.repo),
                "reading the branch's protection",
            )
            .map_err(|e| Fault::broken(e.text()))?;
        v["protected"]
            .as_bool()
            .ok_or_else(|| Fault::broken("the branch's answer has no `protected`"))
    }
}

/// The job's event payload (`GITHUB_EVENT_PATH`): a regular file of at
/// most 64 MiB (the job can write where it lies), JSON; `Null` when there
/// is none.
pub fn event_payload(env: &dyn Fn(&str) -> Option<String>) -> Value {
    env("GITHUB_EVENT_PATH")
        .filter(|p| !p.is_empty())
        .and_then(|p| crate::sys::read_regular(std::path::Path::new(&p), 64 << 20).ok())
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default()
}

/// This job's trust, from its environment and event payload (a regular
/// file of at most 64 MiB: the job can write where it lies) and, when
/// `ask`, the API's word on its branch (only a recovering run asks: a
/// probe's two runs are one job, and a plant's trust is only a claim, so
/// neither sends the token anywhere for it).
pub fn this_job(env: &dyn Fn(&str) -> Option<String>, ask: bool) -> Trust {
    let get = |k: &str| env(k).filter(|v| !v.is_empty());
    if get("GITHUB_ACTIONS").as_deref() != Some("true") {
        return Trust {
            class: Class::Unclassified,
            event: None,
            git_ref: None,
            fork: None,
            actor_type: None,
            why: "not in GitHub Actions".into(),
            source: "this process's environment".into(),
        };
    }
    let event = get("GITHUB_EVENT_NAME").unwrap_or_default();
    let payload = event_payload(env);
    let git_ref = get("GITHUB_REF");
    let api = if ask { JobApi::from_env(env) } else { None };
    let protected = |b: &str| match &api {
        Some(a) => a.protected(b),
        None if !ask => Err(Fault::unsupported(
            "not asked: only a recovering run reads a branch's protection",
        )),
        None => Err(Fault::unsupported(
            "no GITHUB_TOKEN or GH_TOKEN to ask with",
        )),
    };
    let (class, why, fork) = classify(&event, &payload, git_ref.as_deref(), &protected);
    Trust {
        class,
        event: (!event.is_empty()).then_some(event),
        git_ref,
        fork,
        actor_type: payload["sender"]["type"].as_str().map(String::from),
        why,
        source: "this job's environment and event payload".into(),
    }
}

/// A run's trust from the API's record of it (`GET
/// /repos/{repo}/actions/runs/{id}`): its event, its head repository, its
/// actor. Never trusted: the record's `head_branch` may be a tag's name
/// (a tag's push), so a protected branch is not read from it; and a
/// `workflow_run` run's record does not say which run started it
/// (unclassified). It is the planting run's: what matters is whether it
/// is untrusted.
pub fn of_run(api: &JobApi, run_id: &str) -> Result<Trust, Fault> {
    if run_id.is_empty() || !run_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Fault::invalid("not a run id"));
    }
    let run = api
        .get(
            &format!("/repos/{}/actions/runs/{run_id}", api.repo),
            "reading the planting run",
        )
        .map_err(|e| Fault::broken(e.text()))?;
    let event = run["event"].as_str().unwrap_or("").to_string();
    let head = run["head_branch"].as_str().map(String::from);
    // The run's own fields, in the payload's shape.
    let payload = serde_json::json!({
        "repository": { "full_name": run["repository"]["full_name"] },
        "pull_request": { "head": { "repo": run["head_repository"] } },
    });
    let git_ref = head.as_ref().map(|b| format!("refs/heads/{b}"));
    let (class, why, fork) = if event == "workflow_run" {
        (
            Class::Unclassified,
            "workflow_run: the API's run does not say which run started it".into(),
            None,
        )
    } else {
        classify(&event, &payload, git_ref.as_deref(), &|_| {
            Err(Fault::unsupported(
                "a planting run's record does not say its ref is a branch",
            ))
        })
    };
    Ok(Trust {
        class,
        event: (!event.is_empty()).then_some(event),
        git_ref,
        fork,
        actor_type: run["actor"]["type"].as_str().map(String::from),
        why,
        source: format!("the API's record of run {run_id}"),
    })
}

/// The line every output leads with when a channel is open from an
/// untrusted run A to a trusted run B, or `None`.
pub fn direction(a: &Trust, b: &Trust, open: bool) -> Option<String> {
    if !(open && a.class == Class::Untrusted && b.class == Class::Trusted) {
        return None;
    }
    // (Only GitHub's own event names and a plain branch name: the line
    // leads a comment's heading and a check run's title, raw.)
    let ev = |t: &Trust| match t.event.as_deref() {
        Some(e) if KNOWN_EVENTS.contains(&e) => e.to_string(),
        Some(_) => "(unrecognised event)".into(),
        None => "(unnamed)".into(),
    };
    let from = if a.fork == Some(true) {
        format!("a {} run from a fork", ev(a))
    } else {
        format!("a {} run", ev(a))
    };
    let on = b
        .git_ref
        .as_deref()
        .map(|r| {
            r.strip_prefix("refs/heads/")
                .or_else(|| r.strip_prefix("refs/tags/"))
                .unwrap_or(r)
        })
        .map(|r| {
            let plain = r.len() <= 100
                && r.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b));
            if plain {
                format!(" on {r}")
            } else {
                " on its branch".into()
            }
        })
        .unwrap_or_default();
    let claimed = if a.source.starts_with("claimed") {
        " (run A's trust as its receipt claims it: only the drill's own look at the planting run confirms it)"
    } else {
        ""
    };
    Some(format!(
        "a write by {from} reached a {} run{on}: poisoning{claimed}",
        ev(b)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn never(_: &str) -> Result<bool, Fault> {
        panic!("asked about protection")
    }

    #[test]
    fn the_event_and_its_payload_decide_never_the_ref() {
        let fork = json!({
            "repository": {"full_name": "o/r"},
            "pull_request": {"head": {"repo": {"full_name": "stranger/r"}}},
        });
        let same = json!({
            "repository": {"full_name": "o/r"},
            "pull_request": {"head": {"repo": {"full_name": "o/r"}}},
        });
        // On pull_request_target the ref is the base branch: not asked.
        let (c, _, f) = classify(
            "pull_request_target",
            &fork,
            Some("refs/heads/main"),
            &never,
        );
        assert_eq!((c, f), (Class::Untrusted, Some(true)));
        assert_eq!(
            classify("pull_request", &fork, None, &never).0,
            Class::Untrusted
        );
        assert_eq!(
            classify("pull_request", &same, None, &never).0,
            Class::Unclassified
        );
        assert_eq!(
            classify("issue_comment", &same, None, &never).0,
            Class::Untrusted
        );
        for e in [
            "issues",
            "discussion",
            "discussion_comment",
            "watch",
            "fork",
        ] {
            assert_eq!(classify(e, &same, None, &never).0, Class::Untrusted, "{e}");
        }
        let wr = json!({
            "repository": {"full_name": "o/r"},
            "workflow_run": {"event": "pull_request", "head_repository": {"full_name": "x/r"}},
        });
        assert_eq!(
            classify("workflow_run", &wr, None, &never).0,
            Class::Untrusted
        );
        assert_eq!(
            classify("merge_group", &same, None, &never).0,
            Class::Unclassified
        );
        let yes = |_: &str| Ok(true);
        let no = |_: &str| Ok(false);
        let unknown = |_: &str| Err(Fault::broken("403"));
        assert_eq!(
            classify("push", &same, Some("refs/heads/main"), &yes).0,
            Class::Trusted
        );
        assert_eq!(
            classify("push", &same, Some("refs/heads/dev"), &no).0,
            Class::Unclassified
        );
        assert_eq!(
            classify("schedule", &same, Some("refs/heads/main"), &unknown).0,
            Class::Unclassified
        );
        assert_eq!(
            classify("release", &same, Some("refs/tags/v1"), &never).0,
            Class::Unclassified
        );
    }

    #[test]
    fn only_an_open_channel_from_untrusted_to_trusted_is_poisoning() {
        let t = |class, event: &str| Trust {
            class,
            event: Some(event.into()),
            git_ref: Some("refs/heads/main".into()),
            fork: None,
            actor_type: None,
            why: String::new(),
            source: "x".into(),
        };
        let a = t(Class::Untrusted, "pull_request_target");
        let b = t(Class::Trusted, "push");
        assert_eq!(
            direction(&a, &b, true).unwrap(),
            "a write by a pull_request_target run reached a push run on main: poisoning"
        );
        // Text no event is named so, and a branch that is no plain name.
        let odd = t(
            Class::Untrusted,
            "x <!-- ![p](https://e.example/p)\n::error::hi",
        );
        let mut on = b.clone();
        on.git_ref = Some("refs/heads/a`b<!--".into());
        assert_eq!(
            direction(&odd, &on, true).unwrap(),
            "a write by a (unrecognised event) run reached a push run on its branch: poisoning"
        );
        assert!(direction(&a, &b, false).is_none());
        assert!(direction(&b, &a, true).is_none());
    }
}
