//! `run-annotation` and `run-log`: the traces a step leaves in its own
//! workflow run without any write permission
//! (../shared/reference/github-coverage-facts.md §3). Run A prints a line
//! to the job log: `::notice title=<nonce name>::…<nonce>` (an
//! annotation of the job's check run) or a plain line carrying the nonce.
//! Run B, in a later job or run, lists the run's jobs (`GET
//! …/actions/runs/{id}/jobs?filter=all`) and reads each job's check run's
//! annotations (`checks: read`) or its log (`actions: read`: a 302 to a
//! signed URL, followed without the token and searched as it arrives).
//!
//! Why stderr: the runner takes workflow commands from a step's stderr as
//! from its stdout (actions/runner `ScriptHandler.cs` gives both streams
//! an `OutputManager` with the `ActionCommandManager`), and runwarden's
//! stdout may be its JSON report, which a line of ours would corrupt. Run
//! A's stderr reaches the job log through the engine (redacted, a line at
//! a time: the nonce is no secret). The runner's masking is left as it
//! is: the lines carry nothing masked.
//!
//! A look is current only once the run's jobs have ended (but run B's
//! own) and the route shows the plant's witness, `runwarden probe <probe
//! id> <carrier> witness <tag>` (the tag a MAC over the carrier and the
//! nonce, which it does not show): for `run-log` a plain line in a job's
//! log, for `run-annotation` a second notice, printed after the nonce's,
//! among the annotations. Without it nothing tells a closed carrier from
//! a line that never reached the log (run A's stderr kept from it by a
//! wrapper) or a notice the runner did not take (commands stopped, the
//! step's 10 notices used up).
//!
//! Nothing is removed: the annotation and the log belong to the run
//! (`DELETE …/runs/{id}/logs` needs `actions: write` and deletes every log
//! of the run), so the journal lists the plant as kept, for the log
//! retention.

use super::answers::{self, node};
use super::entry::{self, Entry, Needle, Planted};
use super::recover::Wanted;
use super::{Gh, GitHubApi, carriers, read_outcome};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::http::Request;
use crate::nonce::Nonce;
use crate::scan::Needles;
use crate::surface::{CleanupOutcome, Job, Journal, PlantOutcome, RecoverOutcome, RunCtx};
use ::http::Method;
use serde_json::json;

/// The most of one job's log run B reads: past it, the log is not fully
/// searched, which is an error (GitHub documents no limit on a log).
const MAX_LOG: u64 = 512 * 1024 * 1024;

/// Why a trace is kept, not removed.
pub const KEPT: &str = "the run's own: GitHub keeps a job's log and its check run's annotations \
     for the log retention (90 days by default, 1 to 400 as the repository sets it); `DELETE \
     …/actions/runs/{id}/logs` needs actions: write and deletes every log of the run, so \
     runwarden does not";

/// A workflow command's data, escaped as the runner unescapes it.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The witness line run A prints with a trace: in the job log, it shows
/// that run A's output reached it.
pub fn witness(ctx: &RunCtx<'_>, carrier: Gh, hex: &str) -> String {
    data(&format!(
        "runwarden probe {} {carrier} witness {}",
        ctx.probe_id,
        carriers::entry_tag(ctx, carrier, hex)
    ))
}

/// The witness as run A prints it for `carrier`: for a log line, the bare
/// line; for an annotation, a second notice, printed after the nonce's.
/// Why a notice: only an annotation shows that the runner took the step's
/// workflow commands (`::stop-commands::`, or a step's first 10 notices
/// used up, drop the notice and keep the log line), and after the nonce's
/// so that a cap which drops the nonce's drops the witness too.
pub fn witness_line(ctx: &RunCtx<'_>, carrier: Gh, hex: &str) -> String {
    match carrier {
        Gh::RunAnnotation => format!(
            "::notice title={}::{}",
            property("runwarden probe witness"),
            witness(ctx, carrier, hex)
        ),
        _ => witness(ctx, carrier, hex),
    }
}

/// The line run A prints for `carrier`.
pub fn line(ctx: &RunCtx<'_>, carrier: Gh, nonce: &Nonce) -> String {
    let text = format!("runwarden probe {} {carrier} {}", ctx.probe_id, nonce.hex());
    match carrier {
        Gh::RunAnnotation => format!(
            "::notice title={}::{}",
            property(&carriers::nonce_name(ctx, nonce)),
            data(&text)
        ),
        _ => data(&text),
    }
}

/// The journal entry of a trace: what it is and in which run (`None`:
/// found by probe id, in a run this job does not know), to be listed as
/// kept.
pub fn entry(ctx: &RunCtx<'_>, carrier: Gh, nonce: &Nonce, run_id: Option<u64>) -> Entry {
    Entry::Trace(entry::Trace {
        carrier: carrier.name().to_string(),
        name: carriers::nonce_name(ctx, nonce),
        run_id,
        tag: carriers::entry_tag(ctx, carrier, &nonce.hex()),
    })
}

/// The entry this probe's plant journals for what trace entry `e` names
/// (rebuilt from its nonce name and run, tag and all: the caller compares
/// the two); `Invalid` when it names no such plant.
pub fn wanted(ctx: &RunCtx<'_>, carrier: Gh, e: &entry::Trace) -> Result<Entry, Fault> {
    let nonce = carriers::nonce_in_name(ctx, Some(&e.name))
        .ok_or_else(|| Fault::invalid("holds no nonce in runwarden's form"))?;
    Ok(entry(ctx, carrier, &nonce, e.run_id))
}

/// What cleanup says of a trace.
pub fn kept() -> CleanupOutcome {
    CleanupOutcome::Kept {
        reason: KEPT.into(),
    }
}

/// What one look at the run came to: an outcome, or "not current" (a job
/// still running, or none listed) with why.
pub(super) enum Look {
    Done(RecoverOutcome),
    NotCurrent(String),
}

impl GitHubApi {
    /// Run A: the line printed to the job log (the control: handed to the
    /// stand-in's runner), the entry journalled first.
    pub(super) fn plant_trace(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Gh>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Needle> {
        let carrier = job.carrier;
        let Some(run) = self.settings.run_id else {
            return PlantOutcome::Error {
                reason: "not in GitHub Actions: GITHUB_RUN_ID is unset".into(),
            };
        };
        journal.record(&entry(ctx, carrier, &job.nonce, Some(run)));
        let lines = [
            line(ctx, carrier, &job.nonce),
            witness_line(ctx, carrier, &job.nonce.hex()),
        ];
        let how = if self.settings.control {
            let api = match self.api(false) {
                Ok(a) => a,
                Err(f) => return PlantOutcome::Error { reason: f.into() },
            };
            let path = format!("/_runner/runs/{run}/lines");
            let what = "handing the line to the control's runner";
            for l in &lines {
                if let Err(e) = api.call(Method::POST, &path, Some(&json!({ "line": l })), what) {
                    return PlantOutcome::Error { reason: e.text() };
                }
            }
            "handed to the control's runner (the stand-in)".to_string()
        } else {
            eprintln!("{}\n{}", lines[0], lines[1]);
            "printed on stderr, which the runner reads for the job log and workflow commands"
                .to_string()
        };
        let attempt = self.settings.run_attempt.unwrap_or(1);
        let what = if carrier == Gh::RunAnnotation {
            format!("a notice titled {}", carriers::nonce_name(ctx, &job.nonce))
        } else {
            "a log line".into()
        };
        PlantOutcome::Planted {
            needle: Needle::Planted(Planted {
                run_id: Some(run),
                run_attempt: Some(attempt),
                ..Planted::of(&job.nonce)
            }),
            persistence: None,
            detail: format!(
                "{what} of run {run} (attempt {attempt}) of {}, {how}; no write permission \
                 needed; kept for the log retention",
                self.repo()
            ),
        }
    }

    /// Run B: the run's jobs until they are all completed (but run B's
    /// own), within the consistency wait; then each job's annotations or
    /// log.
    pub(super) fn recover_trace(&self, ctx: &RunCtx<'_>, w: &Wanted) -> RecoverOutcome {
        let carrier = w.carrier;
        let api = match self.api(true) {
            Ok(a) => a,
            Err(f) => return RecoverOutcome::Error { reason: f.into() },
        };
        let needle = w.needle.nonce().hex();
        let needle = needle.as_str();
        // The run run A printed in, as its plant said; else this run
        // (a later job of the same run).
        let said = w.needle.planted().and_then(|n| n.run_id);
        let Some(run) = said.or(self.settings.run_id) else {
            return RecoverOutcome::Error {
                reason: "run B has no run to look in: no receipt, and GITHUB_RUN_ID is unset"
                    .into(),
            };
        };
        let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
        let c = crate::surface::listing::until_current(wait, || {
            let l = self.look_trace(&api, carrier, run, needle, &witness(ctx, carrier, needle));
            let current = matches!(l, Look::Done(_));
            Ok::<_, std::convert::Infallible>((l, current))
        });
        let c = match c {
            Ok(c) => c,
            Err(never) => match never {},
        };
        match c.value {
            Look::Done(o) => o,
            Look::NotCurrent(why) => RecoverOutcome::Error {
                reason: format!(
                    "not current: {why} after {} listings over {:.1} s (a job's log and \
                     annotations are complete only once it ended): its silence proves nothing",
                    c.tries,
                    c.waited.as_secs_f64()
                ),
            },
        }
    }

    fn look_trace(
        &self,
        api: &Api<'_>,
        carrier: Gh,
        run: u64,
        needle: &str,
        witness: &str,
    ) -> Look {
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        let source = &self.settings.read_token_source;
        let mut jobs: Vec<answers::Job> = vec![];
        let listing = format!("{rp}/actions/runs/{run}/jobs?filter=all");
        let r = api.list(
            &listing,
            Some("jobs"),
            &format!("listing run {run}'s jobs"),
            &mut |j| jobs.push(node(j)),
        );
        match r {
            Ok(_) => {}
            Err(e) if e.is_permission_refusal() && carrier == Gh::RunAnnotation => {
                return self.annotations_by_commit(api, &rp, run, needle, witness, &e);
            }
            Err(e) if e.is_permission_refusal() => {
                return Look::Done(self.jobs_refused(api, run, &e));
            }
            Err(e) => return Look::Done(read_outcome(&e, source)),
        }
        if jobs.is_empty() {
            return Look::NotCurrent(format!("run {run} lists no jobs"));
        }
        // Run B's own job (same run, its runner, not yet ended) may still
        // run; an ended job on the same runner (a persistent one) is
        // another's, and read.
        let ended_ = |j: &answers::Job| j.status.as_deref() == Some("completed");
        let own = |j: &answers::Job| {
            Some(run) == self.settings.run_id
                && self.settings.runner_name.is_some()
                && j.runner_name == self.settings.runner_name
                && !ended_(j)
        };
        if let Some(j) = jobs.iter().find(|j| !ended_(j) && !own(j)) {
            return Look::NotCurrent(format!(
                "job {} of run {run} is {}",
                escape::bytes(j.name.as_deref().unwrap_or("?").as_bytes()),
                escape::bytes(j.status.as_deref().unwrap_or("?").as_bytes())
            ));
        }
        // A job skipped never ran: it has no log and no annotation.
        let ended: Vec<&answers::Job> = jobs
            .iter()
            .filter(|j| !own(j) && j.conclusion.as_deref() != Some("skipped"))
            .collect();
        let what = if carrier == Gh::RunAnnotation {
            "the annotations of the check runs"
        } else {
            "the logs"
        };
        let early = if carrier == Gh::RunAnnotation {
            self.look_annotations(api, &rp, run, &ended, needle, witness)
        } else {
            self.look_logs(api, &rp, run, &ended, needle, witness)
        };
        if let Some(end) = early {
            return end;
        }
        let shown = if carrier == Gh::RunAnnotation {
            "an annotation is run A's witness notice"
        } else {
            "a log shows run A's witness line"
        };
        Look::Done(RecoverOutcome::NotFound {
            detail: format!(
                "listed {} jobs of run {run} (all ended), read {what} of {} with {}, and {shown}; \
                 none holds the nonce",
                jobs.len(),
                ended.len(),
                escape::bytes(source.as_bytes())
            ),
        })
    }

    /// The logs of the `ended` jobs: as [`Self::look_annotations`], the
    /// witness a line in a log.
    fn look_logs(
        &self,
        api: &Api<'_>,
        rp: &str,
        run: u64,
        ended: &[&answers::Job],
        needle: &str,
        witness: &str,
    ) -> Option<Look> {
        let source = &self.settings.read_token_source;
        let mut seen = false;
        // The logs: the nonce and the witness line.
        for j in ended {
            match self.log_holds(api, rp, j, &[needle, witness]) {
                Ok((true, _, detail)) => {
                    return Some(Look::Done(RecoverOutcome::Found {
                        detail: format!("run {run}: {detail}"),
                    }));
                }
                Ok((_, w, _)) => seen |= w,
                Err(e) => return Some(Look::Done(read_outcome(&e, source))),
            }
        }
        if !seen {
            return Some(Look::NotCurrent(format!(
                "no job log of run {run} shows the witness line run A printed with the \
                 plant (its stderr may not reach the job log)"
            )));
        }
        None
    }

    /// GitHub refused the jobs listing: for a log, the run's log archive
    /// (`…/runs/{id}/logs`, the same permission) must be refused too to
    /// count (an annotation has its own other route:
    /// [`Self::annotations_by_commit`]).
    fn jobs_refused(&self, api: &Api<'_>, run: u64, e: &ApiError) -> RecoverOutcome {
        let source = &self.settings.read_token_source;
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        match api.redirect(
            &format!("{rp}/actions/runs/{run}/logs"),
            "asking for the run's logs",
        ) {
            Err(e2 @ ApiError::Denied { .. }) => read_outcome(&e2, source),
            Ok(_) => RecoverOutcome::Error {
                reason: format!(
                    "GitHub refused run {run}'s jobs listing ({}) but offered the run's log \
                     archive, which run B does not read: not tested",
                    e.text()
                ),
            },
            Err(e2) => read_outcome(&e2, source),
        }
    }

    /// Whether the job's log holds each of `needles`: the 302's
    /// `Location` (https, or the stand-in's loopback when the API is on
    /// one) fetched without the token, searched as it arrives.
    fn log_holds(
        &self,
        api: &Api<'_>,
        rp: &str,
        job: &answers::Job,
        needles: &[&str; 2],
    ) -> Result<(bool, bool, String), ApiError> {
        let id = job
            .id
            .ok_or_else(|| ApiError::Failed("a job of the listing has no id".into()))?;
        let what = format!("downloading job {id}'s log");
        let location = api.redirect(&format!("{rp}/actions/jobs/{id}/logs"), &what)?;
        let loopback = |u: &str| {
            ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"]
                .iter()
                .any(|p| u.starts_with(p))
        };
        if !(location.starts_with("https://")
            || (loopback(&location) && loopback(&self.settings.api_url)))
        {
            return Err(ApiError::Failed(format!(
                "{what}: GitHub redirected to a URL that is not https: not followed"
            )));
        }
        let mut needles = Needles::new(needles.iter().map(|n| n.to_string()).collect());
        let mut read = 0u64;
        let (status, _) = api
            .client
            .stream(&Request::new(Method::GET, &location), &mut |chunk| {
                read += chunk.len() as u64;
                if read > MAX_LOG {
                    return Err(Fault::broken(format!("the log is over {MAX_LOG} bytes")));
                }
                needles.feed(chunk);
                Ok(())
            })
            .map_err(|f| ApiError::Failed(format!("{what}: {f}")))?;
        if status != 200 {
            return Err(ApiError::Failed(format!(
                "{what}: the signed URL answered HTTP {status}"
            )));
        }
        Ok((
            needles.found(0),
            needles.found(1),
            format!("job {id}'s log holds the nonce ({read} bytes read)"),
        ))
    }
}
