//! Dispatches and the runs they start
//! (../shared/reference/github-coverage-facts.md §7): `POST
//! …/actions/workflows/{file}/dispatches` (`actions: write`) and `POST
//! …/dispatches` (`contents: write`), each 204; a run is made only when the
//! repository has a workflow that takes the event (a test registers it:
//! [`add_workflow`], [`add_dispatch_workflow`]), titled as its `run-name`
//! would show the input or the event's action. `GET …/actions/runs`
//! lists runs newest first, filtered by `event`, `status` and
//! `created=>=…` (and `…/actions/workflows/{file}/runs` one workflow's); a run can be read, cancelled (a completed one: 409) and
//! deleted (one not completed: 409, this stand-in's choice).

use super::rest::{Call, find, invalid, list, message, no_content, num, one, page_of, str_of};
use super::{Object, Reply, State};
use serde_json::{Value, json};

/// A workflow the stand-in's repositories have: `file` `on:
/// workflow_dispatch` whose `run-name` shows input `input`, or (`file`
/// [`REPOSITORY_DISPATCH`]) one `on: repository_dispatch` whose
/// `run-name` is the event's action, or (`titled`) one `on:
/// repository_dispatch` whose every run has that title: GitHub starts
/// every workflow on the event.
#[derive(Clone, Debug)]
pub struct Workflow {
    pub repo: String,
    pub file: String,
    pub input: String,
    pub titled: Option<String>,
}

/// The `file` of a workflow `on: repository_dispatch`.
pub const REPOSITORY_DISPATCH: &str = "(repository_dispatch)";

/// The workflow file the control dispatches.
pub const DISPATCH_WORKFLOW: &str = "runwarden-probe.yml";

pub fn add_workflow(st: &mut State, repo: &str, file: &str, input: &str) {
    st.workflows.push(Workflow {
        repo: repo.into(),
        file: file.into(),
        input: input.into(),
        titled: None,
    });
}

/// A workflow `file` `on: repository_dispatch` of `repo` whose runs are
/// all titled `title` (a `run-name` that does not show the event).
pub fn add_titled_dispatch_workflow(st: &mut State, repo: &str, file: &str, title: &str) {
    st.workflows.push(Workflow {
        repo: repo.into(),
        file: file.into(),
        input: String::new(),
        titled: Some(title.into()),
    });
}

pub fn add_dispatch_workflow(st: &mut State, repo: &str) {
    add_workflow(st, repo, REPOSITORY_DISPATCH, "");
}

/// A run of `file` for `event`, titled `title`.
fn start(st: &mut State, repo: &str, file: &str, event: &str, title: &str, branch: &str) {
    let id = st.next_id();
    let n = st
        .objects
        .iter()
        .filter(|o| o.kind == "workflow-run")
        .count()
        + 1;
    let status = st
        .dispatched_status
        .clone()
        .unwrap_or_else(|| "completed".into());
    st.objects.push(Object {
        kind: "workflow-run",
        repo: repo.into(),
        fields: json!({
            "id": id, "name": file, "display_title": title, "event": event,
            "status": status, "conclusion": (status == "completed").then_some("success"),
            "head_branch": branch, "path": format!(".github/workflows/{file}"),
            "run_number": n, "run_attempt": 1, "created_at": crate::timefmt::now_rfc3339(),
        }),
    });
}

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    let (repo, body) = (c.repo, c.body);
    Some(match (c.method, c.p) {
        ("POST", ["actions", "workflows", file, "dispatches"]) => {
            let Some(wf) = st
                .workflows
                .iter()
                .find(|w| w.repo == repo && w.file == *file)
                .cloned()
            else {
                return Some(message(404, "Not Found"));
            };
            let r = str_of(body, "ref");
            let branch = r
                .strip_prefix("refs/heads/")
                .or_else(|| r.strip_prefix("refs/tags/"))
                .unwrap_or(r);
            if branch.is_empty() || r.starts_with("refs/pull/") {
                return Some(invalid(&format!("No ref found for: {r}")));
            }
            let inputs = body["inputs"].as_object().cloned().unwrap_or_default();
            let unexpected: Vec<&String> = inputs.keys().filter(|k| **k != wf.input).collect();
            if !unexpected.is_empty() {
                return Some(invalid(&format!(
                    "Unexpected inputs provided: {unexpected:?}"
                )));
            }
            let title = inputs
                .get(&wf.input)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            start(st, repo, file, "workflow_dispatch", &title, branch);
            no_content()
        }
        ("POST", ["dispatches"]) => {
            let event = str_of(body, "event_type").to_string();
            if event.is_empty() || event.chars().count() > 100 {
                return Some(invalid("event_type must be 1 to 100 characters"));
            }
            // Any event is taken; a run of every workflow that takes it.
            let takers: Vec<Workflow> = st
                .workflows
                .iter()
                .filter(|w| w.repo == repo && (w.file == REPOSITORY_DISPATCH || w.titled.is_some()))
                .cloned()
                .collect();
            for w in takers {
                let title = w.titled.clone().unwrap_or_else(|| event.clone());
                start(st, repo, &w.file, "repository_dispatch", &title, "main");
            }
            no_content()
        }
        ("GET", ["actions", "runs"]) => {
            let q = super::super::query(c.url);
            let since = q.get("created").and_then(|c| c.strip_prefix(">="));
            let mut items = list(st, "workflow-run", repo, |f| {
                q.get("event").is_none_or(|e| f["event"] == e.as_str())
                    && q.get("status").is_none_or(|s| f["status"] == s.as_str())
                    && since.is_none_or(|t| f["created_at"].as_str().is_some_and(|c| c >= t))
            });
            items.reverse();
            page_of(items, c.url, c.port, "workflow_runs")
        }
        ("GET", ["actions", "runs", id]) => one(st, find(st, "workflow-run", repo, "id", &num(id))),
        // One workflow's runs, newest first (the poisoning drill finds the
        // planting run so).
        ("GET", ["actions", "workflows", file, "runs"]) => {
            let q = super::super::query(c.url);
            let path = format!(".github/workflows/{file}");
            let mut items = list(st, "workflow-run", repo, |f| {
                f["path"] == path.as_str()
                    && q.get("status").is_none_or(|s| f["status"] == s.as_str())
            });
            items.reverse();
            page_of(items, c.url, c.port, "workflow_runs")
        }
        ("POST", ["actions", "runs", id, "cancel"]) => {
            let Some(i) = find(st, "workflow-run", repo, "id", &num(id)) else {
                return Some(message(404, "Not Found"));
            };
            let f = &mut st.objects[i].fields;
            if f["status"] == "completed" {
                return Some(message(
                    409,
                    "Cannot cancel a workflow run that is completed.",
                ));
            }
            f["status"] = json!("completed");
            f["conclusion"] = json!("cancelled");
            Reply::json(202, json!({}))
        }
        ("DELETE", ["actions", "runs", id]) => {
            let at = find(st, "workflow-run", repo, "id", &num(id));
            if at.is_some_and(|i| st.objects[i].fields["status"] != "completed") {
                return Some(message(
                    409,
                    "Cannot delete a workflow run that is not completed.",
                ));
            }
            super::rest::remove(st, at)
        }
        _ => return None,
    })
}
