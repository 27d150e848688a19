//! `workflow-dispatch` and `repository-dispatch` (opt-in): a dispatch that
//! starts a workflow run whose title shows the nonce
//! (../shared/reference/github-coverage-facts.md §7). Runs carry no
//! inputs or payload a reader can list: only `display_title`, which a
//! workflow's `run-name` makes, shows them. So each needs the operator's
//! word that such a workflow exists: `dispatch-workflow` (a workflow `on:
//! workflow_dispatch`) with `dispatch-input` (the input its `run-name`
//! shows), and `repository-dispatch: true` (a workflow `on:
//! repository_dispatch` with `run-name: ${{ github.event.action }}`).
//!
//! Run A dispatches with a name carrying the nonce (the input's value, or
//! the `event_type`); run B lists the runs of that event created since
//! the plant (`…/actions/runs?event=…&created=>=…`) and searches their
//! titles, the writer's token telling lag from hiding as for every
//! listing ([`super::recover`]). Cleanup cancels a run of the plant still
//! going, then deletes it (`actions: write`).
//!
//! An entry is `{carrier, name, event, since, tag}` ([`entry::Dispatch`]):
//! `since` the time the listing starts from (null when found by probe
//! id).

use super::answers::{Run, node};
use super::entry::{self, Entry, Needle, Planted};
use super::{Gh, GitHubApi, Settings, carriers};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::nonce::Nonce;
use crate::surface::{CleanupOutcome, Job, Journal, PlantOutcome, RunCtx};
use ::http::Method;
use serde_json::json;

/// How far before the plant the listing starts: the runner's clock and
/// GitHub's may differ.
const SKEW_SECS: i64 = 300;

/// The event a dispatch carrier's runs have.
pub fn event(carrier: Gh) -> &'static str {
    if carrier == Gh::WorkflowDispatch {
        "workflow_dispatch"
    } else {
        "repository_dispatch"
    }
}

/// Whether `s` is `YYYY-MM-DDTHH:MM:SSZ`.
fn valid_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// The entry of a dispatch of `nonce` (`since`: where the listing starts).
pub fn entry(ctx: &RunCtx<'_>, carrier: Gh, nonce: &Nonce, since: Option<&str>) -> Entry {
    Entry::Dispatch(entry::Dispatch {
        carrier: carrier.name().to_string(),
        name: carriers::nonce_name(ctx, nonce),
        event: event(carrier).to_string(),
        since: since.map(String::from),
        tag: carriers::entry_tag(ctx, carrier, &nonce.hex()),
    })
}

/// The entry this probe's plant journals for what dispatch entry `e`
/// names (rebuilt from its nonce name and its time, tag and all: the
/// caller compares the two); `Invalid` when it names no such plant.
pub fn wanted(ctx: &RunCtx<'_>, carrier: Gh, e: &entry::Dispatch) -> Result<Entry, Fault> {
    let not = Fault::invalid;
    let nonce = carriers::nonce_in_name(ctx, Some(&e.name))
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    let since = match e.since.as_deref() {
        None => None,
        Some(t) if valid_time(t) => Some(t),
        Some(_) => return Err(not("its time is not in runwarden's form")),
    };
    Ok(entry(ctx, carrier, &nonce, since))
}

/// The runs listing of `event` since `since`.
pub fn runs_path(s: &Settings, event: &str, since: Option<&str>) -> String {
    let rp = format!("/repos/{}", s.repository.as_deref().unwrap_or(""));
    match since {
        Some(t) => format!("{rp}/actions/runs?event={event}&created=%3E%3D{t}"),
        None => format!("{rp}/actions/runs?event={event}"),
    }
}

/// Whether run `r` is one the dispatch of `name` (event `ev`, sent after
/// `since`) made, so cleanup may delete it. Why this narrow: a title is
/// any text a workflow's `run-name` makes, and a run another workflow
/// made (a deploy whose title a sender made carry the name) is not the
/// probe's. A `workflow_dispatch` run must be of the configured
/// `dispatch-workflow` and its title hold the name; a
/// `repository_dispatch` run's title must be the name itself (what
/// `run-name: ${{ github.event.action }}`, which `repository-dispatch:
/// true` says the repository has, shows); both made no earlier than
/// `since` (GitHub's `created` filter, checked again here).
pub fn made_by(s: &Settings, ev: &str, name: &str, since: Option<&str>, r: &Run) -> bool {
    let title = r.display_title.as_deref().unwrap_or("");
    let whose = match ev {
        "workflow_dispatch" => {
            let wf = s.dispatch_workflow.as_deref().unwrap_or("");
            !wf.is_empty()
                && r.path.as_deref() == Some(&format!(".github/workflows/{wf}"))
                && title.contains(name)
        }
        "repository_dispatch" => title == name,
        _ => false,
    };
    whose && made_by_time(since, r) && r.event.as_deref() == Some(ev) && r.id.is_some()
}

/// Whether run `r` was made no earlier than `since` (GitHub's `created`
/// filter, checked again here; RFC 3339 times in UTC order as text).
fn made_by_time(since: Option<&str>, r: &Run) -> bool {
    since.is_none_or(|t| r.created_at.as_deref().is_some_and(|c| c >= t))
}

/// Whether `title` is the name another runwarden dispatch sends
/// (`rw-<probe>-<32 hex>`): the run of a workflow whose `run-name` shows
/// the event, which that dispatch, not this one, started.
fn another_dispatch(title: Option<&str>) -> bool {
    title.is_some_and(|t| {
        t.starts_with("rw-")
            && t.len() > 36
            && t.is_char_boundary(t.len() - 33)
            && t[t.len() - 33..].starts_with('-')
            && crate::surface::lower_hex(&t[t.len() - 32..], 32)
    })
}

/// Runs cleanup names in one reason at most; the rest are counted.
const MAX_NAMED: usize = 20;

/// The ref a workflow is dispatched on: a branch or a tag (a pull
/// request's ref is none GitHub dispatches on).
pub fn dispatch_ref(s: &Settings) -> Option<&str> {
    s.git_ref
        .as_deref()
        .filter(|r| r.starts_with("refs/heads/") || r.starts_with("refs/tags/"))
}

/// Why a dispatch carrier is not planted here, if it is not.
pub fn unavailable(s: &Settings, carrier: Gh) -> Option<String> {
    if carrier == Gh::WorkflowDispatch {
        if s.dispatch_workflow.is_none() || s.dispatch_input.is_none() {
            return Some(
                "no workflow to dispatch: set `dispatch-workflow` (a workflow `on: \
                 workflow_dispatch` of the repository) and `dispatch-input` (the input its \
                 `run-name` shows); without one, nothing shows a dispatch back"
                    .into(),
            );
        }
        if dispatch_ref(s).is_none() {
            return Some(
                "no branch or tag to dispatch on: GITHUB_REF is unset or a pull request's; set \
                 `ref` to refs/heads/…"
                    .into(),
            );
        }
    } else if !s.repository_dispatch {
        return Some(
            "planted only with `repository-dispatch: true`, which says the repository has a \
             workflow `on: repository_dispatch` with `run-name: ${{ github.event.action }}`: \
             without one, nothing shows a dispatch back"
                .into(),
        );
    }
    None
}

impl GitHubApi {
    /// Run A: the intent, then the dispatch.
    pub(super) fn plant_dispatch(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Gh>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Needle> {
        let carrier = job.carrier;
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let since = crate::timefmt::rfc3339(now - SKEW_SECS);
        let name = carriers::nonce_name(ctx, &job.nonce);
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        let (path, body, what) = if carrier == Gh::WorkflowDispatch {
            let wf = self.settings.dispatch_workflow.as_deref().unwrap_or("");
            let input = self.settings.dispatch_input.as_deref().unwrap_or("");
            let Ok(wf_seg) = crate::wire::percent_segment(wf) else {
                return PlantOutcome::Error {
                    reason: "`dispatch-workflow` is no file name".into(),
                };
            };
            (
                format!("{rp}/actions/workflows/{wf_seg}/dispatches"),
                json!({ "ref": dispatch_ref(&self.settings).unwrap_or(""), "inputs": { input: name } }),
                format!(
                    "dispatching {} of {}",
                    escape::bytes(wf.as_bytes()),
                    self.repo()
                ),
            )
        } else {
            (
                format!("{rp}/dispatches"),
                json!({ "event_type": name, "client_payload": { "runwarden": ctx.probe_id } }),
                format!("sending a repository_dispatch to {}", self.repo()),
            )
        };
        let intent = entry(ctx, carrier, &job.nonce, Some(&since));
        journal.record(&intent);
        match api.call(Method::POST, &path, Some(&body), &what) {
            Ok(_) => PlantOutcome::Planted {
                needle: Needle::Planted(Planted {
                    event: Some(event(carrier).to_string()),
                    since: Some(since),
                    ..Planted::of(&job.nonce)
                }),
                persistence: None,
                detail: format!(
                    "{what} with {name} (written with {}): a real workflow run, deleted by cleanup",
                    escape::bytes(self.settings.token_source.as_bytes())
                ),
            },
            Err(e @ ApiError::Denied { .. }) => {
                journal.retract(&intent);
                self.refused(&e)
            }
            // GitHub knows no such workflow: nothing was dispatched.
            Err(e @ ApiError::NotFound(_)) => {
                journal.retract(&intent);
                PlantOutcome::Error {
                    reason: format!(
                        "{}: is `dispatch-workflow` a workflow of the repository?",
                        e.text()
                    ),
                }
            }
            Err(e) => PlantOutcome::Error { reason: e.text() },
        }
    }

    /// Cleanup: every run the plant's dispatch made, as [`made_by`] tells
    /// them, cancelled when it still runs (and waited for, within the
    /// consistency wait), then deleted; what stays is listed.
    pub(super) fn clean_dispatch(&self, e: &entry::Dispatch) -> CleanupOutcome {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return CleanupOutcome::Left { reason: f.into() },
        };
        let (name, ev, since) = (e.name.as_str(), e.event.as_str(), e.since.as_deref());
        if name.is_empty() {
            return CleanupOutcome::Left {
                reason: "the entry names no dispatch".into(),
            };
        }
        let mut runs: Vec<Run> = vec![];
        // Runs that show the name but that the dispatch did not make, as
        // far as cleanup can tell: listed, never removed.
        let mut near: Vec<String> = vec![];
        // A repository_dispatch starts every workflow on the event, and a
        // run whose title does not show the name may be one the plant
        // started all the same: listed as possibly the plant's, never
        // removed. (Only with `since`, from the plant's journal: found by
        // probe id, cleanup knows no time to tell such runs by.)
        let mut maybe: Vec<String> = vec![];
        let list = runs_path(&self.settings, ev, since);
        let r = api.list(
            &list,
            Some("workflow_runs"),
            "listing the dispatched runs",
            &mut |v| {
                let r: Run = node(v);
                if made_by(&self.settings, ev, name, since, &r) {
                    runs.push(r);
                } else if r.display_title.as_deref().is_some_and(|t| t.contains(name)) {
                    // (The id as GitHub wrote it, whatever its type.)
                    near.push(v["id"].to_string());
                } else if ev == "repository_dispatch"
                    && since.is_some()
                    && r.event.as_deref() == Some(ev)
                    && made_by_time(since, &r)
                    && !another_dispatch(r.display_title.as_deref())
                {
                    maybe.push(v["id"].to_string());
                }
            },
        );
        if let Err(err) = r {
            return CleanupOutcome::Left { reason: err.text() };
        }
        let near = (!near.is_empty()).then(|| {
            format!(
                "run(s) {} show the plant's name but are not of the configured workflow, or \
                 not titled the name itself: not removed",
                escape::bytes(near.join(", ").as_bytes())
            )
        });
        let maybe = (!maybe.is_empty()).then(|| {
            let n = maybe.len();
            maybe.truncate(MAX_NAMED);
            format!(
                "run(s) {}{} of the repository_dispatch event since the plant do not show its \
                 name, yet may be its dispatch's (it starts every workflow on the event): not \
                 removed",
                escape::bytes(maybe.join(", ").as_bytes()),
                if n > MAX_NAMED {
                    format!(" and {} more", n - MAX_NAMED)
                } else {
                    String::new()
                }
            )
        });
        let near: Option<String> = match (near, maybe) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        if runs.is_empty()
            && let Some(reason) = near
        {
            return CleanupOutcome::Left { reason };
        }
        if runs.is_empty() {
            // Found by probe id: nothing of it here. From the plant's
            // journal: the dispatch went out, so a run may yet show (the
            // listing lags), unless no workflow takes it.
            return if since.is_none() {
                CleanupOutcome::Gone
            } else {
                CleanupOutcome::Left {
                    reason: "no run of the event since the plant shows its name: none was made \
                             (no workflow shows the dispatch), or the listing lags; nothing \
                             removed"
                        .into(),
                }
            };
        }
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        let mut left = vec![];
        for r in &runs {
            let id = r.id.unwrap_or(0);
            let running = r.status.as_deref() != Some("completed");
            if let Err(why) = self.delete_run(&api, &rp, id, running) {
                left.push(format!("run {id}: {why}"));
            }
        }
        left.extend(near);
        if left.is_empty() {
            CleanupOutcome::Removed
        } else {
            CleanupOutcome::Left {
                reason: left.join("; "),
            }
        }
    }

    /// Cancels run `id` when it still runs (and waits for it to end), then
    /// deletes it.
    fn delete_run(&self, api: &Api<'_>, rp: &str, id: u64, running: bool) -> Result<(), String> {
        let path = format!("{rp}/actions/runs/{id}");
        if running {
            let cancel = format!("{path}/cancel");
            if let Err(e) = api.call(Method::POST, &cancel, None, "cancelling the dispatched run") {
                return Err(e.text());
            }
            let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
            let ended = crate::surface::listing::until_current(wait, || {
                let a = api.call(Method::GET, &path, None, "reading the cancelled run")?;
                let run: Run = node(&a.json);
                Ok::<_, ApiError>(((), run.status.as_deref() == Some("completed")))
            });
            match ended {
                Ok(c) if c.current => {}
                Ok(_) => return Err("still running after it was cancelled".into()),
                Err(e) => return Err(e.text()),
            }
        }
        match api.call(Method::DELETE, &path, None, "deleting the dispatched run") {
            Ok(_) | Err(ApiError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.text()),
        }
    }
}
