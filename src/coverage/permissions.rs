//! What the job's `GITHUB_TOKEN` may write, as far as anything says: the
//! workflow's `permissions:` (the job's own, else the workflow's), read
//! through the API at `GITHUB_WORKFLOW_SHA`, the commit GitHub ran it
//! from. Never from the work tree: an agent in the job can edit that, but
//! not the commit the run started from. Where neither level sets
//! `permissions:`, every key is `unknown`: the default depends on a
//! repository (or organization) setting the job cannot see, and is never
//! guessed.

use crate::report::PermissionLevel;
use serde_json::Value;

pub use crate::plan::PERMISSION_KEYS as KEYS;

/// The job's level for each of [`KEYS`] (`write`, `read`, `none`,
/// `unknown`), and what said so.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    pub levels: Vec<(&'static str, &'static str)>,
    /// `workflow` when the file said, else `unknown`.
    pub from: &'static str,
    /// For people: the file and job read, or why nothing was.
    pub source: String,
}

impl Known {
    /// As a report or receipt lists them.
    pub fn listed(&self) -> Vec<PermissionLevel> {
        self.levels
            .iter()
            .map(|(k, l)| PermissionLevel {
                key: k.to_string(),
                level: l.to_string(),
                from: if *l == "unknown" {
                    "unknown"
                } else {
                    self.from
                }
                .into(),
            })
            .collect()
    }

    /// What a plant receipt says of the planting job's permissions, when
    /// it can be trusted (`signed`: its MAC verified under a configured
    /// key); else every key `unknown`, saying why. A key the receipt
    /// does not list, or lists with a level GitHub does not have, is
    /// `unknown`.
    pub fn from_receipt(listed: &[PermissionLevel], source: &str, signed: bool) -> Known {
        if !signed {
            return Known::unknown(
                "the plant receipt is not signed with a configured key (RUNWARDEN_KEY), so what it says of the plant job's permissions could be anyone's: unknown".into(),
            );
        }
        if listed.is_empty() {
            return Known::unknown("the plant receipt lists no permissions (the plant ran outside GitHub Actions, or before 0.11.0): unknown".into());
        }
        let level = |k: &str| {
            let l = listed.iter().find(|p| p.key == k).map(|p| p.level.as_str());
            ["write", "read", "none"]
                .into_iter()
                .find(|x| Some(*x) == l)
                .unwrap_or("unknown")
        };
        Known {
            levels: KEYS.iter().map(|k| (*k, level(k))).collect(),
            from: "workflow",
            source: format!(
                "the plant job's, from its receipt: {}",
                crate::escape::line(source)
            ),
        }
    }

    /// Every key `unknown`, saying why.
    pub fn unknown(source: String) -> Known {
        Known {
            levels: KEYS.iter().map(|k| (*k, "unknown")).collect(),
            from: "unknown",
            source,
        }
    }
}

/// Reads the job's permissions through `env` (the process environment in
/// a run): `None` outside GitHub Actions, where no `GITHUB_TOKEN` is the
/// job's.
pub fn read(env: &dyn Fn(&str) -> Option<String>) -> Option<Known> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    if var("GITHUB_ACTIONS").as_deref() != Some("true") {
        return None;
    }
    let Some((repo, path)) = var("GITHUB_WORKFLOW_REF").as_deref().and_then(workflow_of) else {
        return Some(Known::unknown(
            "GITHUB_WORKFLOW_REF is unset or not a workflow file: the permissions are unknown"
                .into(),
        ));
    };
    let sha =
        var("GITHUB_WORKFLOW_SHA").filter(|s| s.len() == 40 && crate::surface::lower_hex(s, 40));
    let (Some(sha), Some(job)) = (sha, var("GITHUB_JOB")) else {
        return Some(Known::unknown(
            "GITHUB_WORKFLOW_SHA or GITHUB_JOB is unset: the permissions are unknown".into(),
        ));
    };
    let Some((source, token)) = ["GITHUB_TOKEN", "GH_TOKEN"]
        .iter()
        .find_map(|k| var(k).map(|t| (*k, t)))
    else {
        return Some(Known::unknown(
            "no GITHUB_TOKEN to read the workflow file with: the permissions are unknown".into(),
        ));
    };
    let base = var("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into());
    let shown = crate::escape::bytes(format!("{path}@{sha}").as_bytes());
    let text = match crate::github::file_at(&base, &repo, &path, &sha, source, &token) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Some(Known::unknown(format!(
                "reading {shown} failed (GitHub answered 404: no such file at that commit): the permissions are unknown"
            )));
        }
        Err(e) => {
            let why = e.text();
            return Some(Known::unknown(format!(
                "reading {shown} failed ({why}): the permissions are unknown"
            )));
        }
    };
    Some(match levels_of(&text, &job, fork_pull_request(&var)) {
        Ok(k) => Known {
            source: format!("{shown}, {}", k.source),
            ..k
        },
        Err(why) => Known::unknown(format!("{shown}: {why}: the permissions are unknown")),
    })
}

/// `owner/repo` and the file path of `GITHUB_WORKFLOW_REF`
/// (`owner/repo/.github/workflows/ci.yml@refs/heads/main`), when it names
/// a workflow file in plain characters.
fn workflow_of(r: &str) -> Option<(String, String)> {
    let (full, _ref) = r.split_once('@')?;
    let mut parts = full.splitn(3, '/');
    let (owner, name, path) = (parts.next()?, parts.next()?, parts.next()?);
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b))
            && !s.split('/').any(|p| p.is_empty() || p == "." || p == "..")
    };
    (plain(owner) && plain(name) && plain(path) && path.starts_with(".github/workflows/"))
        .then(|| (format!("{owner}/{name}"), path.to_string()))
}

/// Whether write is capped for this event: a pull request from a fork
/// gets a read-only token unless the repository sends write tokens to
/// fork pull requests, which the job cannot see.
fn fork_pull_request(var: &dyn Fn(&str) -> Option<String>) -> bool {
    let Some(event) = var("GITHUB_EVENT_NAME") else {
        return false;
    };
    if !event.starts_with("pull_request") || event == "pull_request_target" {
        return false;
    }
    let v = crate::trust::event_payload(var);
    let pr = &v["pull_request"];
    pr["head"]["repo"]["full_name"] != pr["base"]["repo"]["full_name"]
}

/// The levels the workflow `text` gives job `job`: its `permissions:`,
/// else the workflow's; `Err` with why when that cannot be told.
pub fn levels_of(text: &str, job: &str, fork: bool) -> Result<Known, String> {
    let doc: Value =
        serde_saphyr::from_str(text).map_err(|_| "it is not a YAML workflow".to_string())?;
    // A job that calls a reusable workflow runs the called one's jobs,
    // whose GITHUB_JOB is a job id of that file, not this one's: which
    // job of this file it is cannot be told.
    if doc["jobs"]
        .as_object()
        .is_some_and(|m| m.values().any(|j| j.get("uses").is_some()))
    {
        return Err("a job of it calls a reusable workflow, so GITHUB_JOB may name a job of the called file".into());
    }
    let Some(j) = doc["jobs"].get(job) else {
        return Err(format!(
            "it has no job {} (a reusable workflow's job?)",
            crate::escape::bytes(job.as_bytes())
        ));
    };
    let (set, at) = match (j.get("permissions"), doc.get("permissions")) {
        (Some(p), _) => (p, "the job's permissions"),
        (None, Some(p)) => (p, "the workflow's permissions"),
        (None, None) => {
            return Err(
                "neither the job nor the workflow sets `permissions:`, so the default depends on a repository setting the job cannot see"
                    .into(),
            );
        }
    };
    let level = |k: &str| -> Result<&'static str, String> {
        let l = match set {
            Value::String(s) if s == "write-all" => "write",
            Value::String(s) if s == "read-all" => "read",
            Value::Object(m) => match m.get(k).and_then(Value::as_str) {
                Some("write") => "write",
                Some("read") => "read",
                Some("none") | None => "none",
                Some(_) => return Err(format!("its {at} give {k} a level GitHub does not have")),
            },
            _ => {
                return Err(format!(
                    "its {at} are neither a mapping nor read-all/write-all"
                ));
            }
        };
        // A fork's pull request: write may be read only (the setting
        // that decides is the repository's).
        Ok(if l == "write" && fork { "unknown" } else { l })
    };
    let levels = KEYS
        .iter()
        .map(|k| level(k).map(|l| (*k, l)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Known {
        levels,
        from: "workflow",
        source: format!(
            "{at} of job {}{}",
            crate::escape::bytes(job.as_bytes()),
            if fork {
                "; a pull request from a fork: write is unknown (the repository decides whether forks get write tokens)"
            } else {
                ""
            }
        ),
    })
}
