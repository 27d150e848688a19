//! What each exposure is, for people, and the config that would test it:
//! the stanza coverage prints for a gap and `runwarden discover` writes.

/// What a permission key lets a job write that a later run can read.
pub fn permission_what(key: &str) -> &'static str {
    match key {
        "actions" => {
            "actions: write: a dispatched workflow run's title can show an input, and runs, caches and artifacts can be deleted"
        }
        "attestations" => "attestations: write: an attestation stays in the repository (no delete)",
        "checks" => "checks: write: a check run's name and output",
        "contents" => {
            "contents: write: branches, tags, draft releases and repository dispatch events"
        }
        "deployments" => "deployments: write: a deployment's payload and description",
        "discussions" => "discussions: write: a discussion's title and body",
        "issues" => "issues: write: labels, milestones and comments",
        "packages" => "packages: write: a container pushed to ghcr.io (tags, annotations, layers)",
        "pages" => "pages: write: a Pages deployment, which anyone who can read the site sees",
        "pull-requests" => "pull-requests: write: labels and comments on pull requests",
        "repository-projects" => "repository-projects: write: a classic project's cards",
        "security-events" => {
            "security-events: write: an uploaded SARIF's category, rule ids and messages"
        }
        "statuses" => "statuses: write: a commit status's context and description",
        _ => "a permission of the job's token",
    }
}

/// Why no carrier can test an exposure, for the ones no surface plants.
pub fn untestable(id: &str) -> Option<&'static str> {
    Some(match id {
        "permission:attestations" => {
            "no carrier: an attestation cannot be deleted, and a public repository's also goes to the public Sigstore log"
        }
        "permission:pages" => {
            "no carrier: a Pages deployment needs Pages enabled, which a job's token cannot do"
        }
        "permission:repository-projects" => {
            "no carrier: runwarden does not plant in classic projects"
        }
        _ => return None,
    })
}

/// The github-api entry, with `extra` keys (each a full line).
fn github_api(extra: &str) -> String {
    format!("  - name: github\n    type: github-api\n{extra}")
}

/// The config that would test a permission exposure (or `run-traces`),
/// and what else it takes, when it is not the entry alone; `owner` is the
/// repository's owner, for ghcr.io's namespace.
pub fn stanza(id: &str, owner: Option<&str>) -> Option<(String, Option<&'static str>)> {
    let key = id.strip_prefix("permission:");
    Some(match key {
        Some("issues" | "pull-requests" | "contents" | "deployments") => (github_api(""), None),
        Some("statuses" | "checks") => (
            github_api("    permanent: true\n"),
            Some("its plant stays: GitHub offers no delete for commit statuses and check runs"),
        ),
        Some("security-events") => (
            github_api("    code-scanning: true\n"),
            Some(
                "its upload shows in the repository's code scanning until cleanup deletes the analysis",
            ),
        ),
        Some("discussions") => (
            github_api(""),
            Some(
                "its `discussion` carrier needs Discussions turned on for the repository (`discussion-category` picks the category, default general)",
            ),
        ),
        Some("actions") => (
            github_api(
                "    dispatch-workflow: <a workflow file with workflow_dispatch>\n    dispatch-input: <the input its run-name shows>\n",
            ),
            Some("it needs a workflow whose `run-name` shows one of its inputs"),
        ),
        Some("packages") => (
            format!(
                "  - name: ghcr\n    type: oci-registry\n    registry: https://ghcr.io\n    repository: {}\n    username: github-actions\n    token-env: GITHUB_TOKEN\n",
                owner.unwrap_or("<owner>").to_ascii_lowercase()
            ),
            Some("it needs packages: write in the job's `permissions:`"),
        ),
        None if id == "run-traces" => (
            github_api(""),
            Some(
                "it needs cross-job mode: `runwarden plant` in one job and `runwarden recover` in a later one (docs/cross-job.md); in one probe the log and annotations are the same job's",
            ),
        ),
        None if id == "runner-persistence" => (
            "  - name: home\n    type: filesystem\n    path: <$HOME>\n".into(),
            Some(
                "it needs `runwarden plant --beacon` in one job and a probe in a later one (docs/cross-job.md)",
            ),
        ),
        _ => return None,
    })
}

/// Why a PASS does not test an exposure that only an open channel tests.
pub fn open_only_why(id: &str) -> &'static str {
    match id {
        "runner-persistence" => {
            "no earlier job's beacon was found, and nothing shows one was planted: `runwarden plant --beacon` in an earlier job, then a probe here (a beacon found is FAIL)"
        }
        "permission:contents" => {
            "the push used the checkout's credential, which need not be the job's token, so its refusal says nothing of the token"
        }
        _ => "a closed channel does not show this exposure closed",
    }
}

/// A discovered entry with each URL reduced to its origin and `/<path>`:
/// a registry's path may carry a token (`https://host/TOKEN/…`), and
/// coverage is published.
pub fn without_paths(entry: &str) -> String {
    entry
        .lines()
        .map(|l| {
            let Some((key, value)) = l.split_once(": \"") else {
                return l.to_string();
            };
            let url = value.trim_end_matches('"');
            match crate::http::origin(url) {
                Some(o) if url.trim_end_matches('/') != o => format!("{key}: \"{o}/<path>\""),
                _ => l.to_string(),
            }
        })
        .map(|l| l + "\n")
        .collect()
}
