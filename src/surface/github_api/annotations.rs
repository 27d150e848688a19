//! `run-annotation`'s look: the annotations of the run's ended jobs'
//! check runs, or, when GitHub refuses run B the jobs listing, the
//! annotations of the commit's check runs (run B's other route); each
//! look current once an annotation is run A's witness notice.

use super::answers;
use super::traces::Look;
use super::{GitHubApi, carriers, read_outcome};
use crate::escape;
use crate::github::{Api, ApiError};
use crate::surface::RecoverOutcome;

impl GitHubApi {
    /// The annotations of the `ended` jobs: the look's end (the nonce
    /// found, refused, or not current), or a miss the witness notice shows
    /// current.
    pub(super) fn look_annotations(
        &self,
        api: &Api<'_>,
        rp: &str,
        run: u64,
        ended: &[&answers::Job],
        needle: &str,
        witness: &str,
    ) -> Option<Look> {
        let source = &self.settings.read_token_source;
        let what = "the annotations of the check runs";
        let mut seen = false;
        // The annotations alone: the nonce, and the witness notice
        // that shows the runner took the step's workflow commands (a
        // log, which shows only that run A's output reached it, and
        // its refusal, answer for another carrier).
        let mut denied: Vec<RecoverOutcome> = vec![];
        for j in ended {
            match self.annotations_hold(api, rp, j, needle, witness) {
                Ok((Some(detail), _)) => {
                    return Some(Look::Done(RecoverOutcome::Found {
                        detail: format!("run {run}: {detail}"),
                    }));
                }
                Ok((None, w)) => seen |= w,
                Err(e) if e.is_permission_refusal() => denied.push(read_outcome(&e, source)),
                Err(e) => return Some(Look::Done(read_outcome(&e, source))),
            }
        }
        match denied.len() {
            0 => {}
            n if n == ended.len() => return Some(Look::Done(denied.swap_remove(0))),
            _ => {
                return Some(Look::Done(RecoverOutcome::Error {
                    reason: format!(
                        "GitHub refused {what} of some jobs of run {run} and gave others: \
                         no full look"
                    ),
                }));
            }
        }
        if !seen {
            return Some(Look::NotCurrent(format!(
                "no annotation of run {run} is the witness notice run A printed after the \
                 plant (workflow commands stopped, or the step's 10 notices used up, drop \
                 both)"
            )));
        }
        None
    }

    /// GitHub refused the jobs listing (`actions: read`): an annotation is
    /// still reachable through the commit's check runs (`GET
    /// …/commits/{sha}/check-runs`, `checks: read`), run B's other route.
    /// Both refused is PASS with both refusals; read, the look is current
    /// once an annotation there is run A's witness notice (printed after
    /// the nonce's, so the nonce's is there too).
    pub(super) fn annotations_by_commit(
        &self,
        api: &Api<'_>,
        rp: &str,
        run: u64,
        needle: &str,
        witness: &str,
        jobs: &ApiError,
    ) -> Look {
        let source = &self.settings.read_token_source;
        let shown_source = escape::bytes(source.as_bytes());
        let Some(sha) = self.settings.commit.as_deref() else {
            return Look::Done(RecoverOutcome::Error {
                reason: format!(
                    "GitHub refused run {run}'s jobs listing ({}), and run B knows no commit to \
                     read the check runs of, its other route (GITHUB_SHA is unset; set `commit`)",
                    jobs.text()
                ),
            });
        };
        let mut checks: Vec<u64> = vec![];
        let list = |api: &Api<'_>, checks: &mut Vec<u64>| {
            checks.clear();
            api.list(
                &format!("{rp}/commits/{sha}/check-runs"),
                Some("check_runs"),
                &format!("listing commit {sha}'s check runs"),
                &mut |c| checks.extend(c["id"].as_u64()),
            )
        };
        // Run B may read without its token too: a public repository's
        // check runs and annotations are anyone's.
        let anonymous = Api {
            token: "",
            source: "no token",
            ..*api
        };
        let mut reader = api;
        match list(api, &mut checks) {
            Ok(_) => {}
            Err(e) if e.is_permission_refusal() => match list(&anonymous, &mut checks) {
                Ok(_) => reader = &anonymous,
                Err(_) => {
                    return Look::Done(RecoverOutcome::Denied {
                        reason: format!(
                            "GitHub refused both of run B's routes to the annotation with \
                             {shown_source}: run {run}'s jobs listing ({}) and commit {sha}'s \
                             check runs ({}), which it does not show without a token either",
                            jobs.text(),
                            e.text()
                        ),
                    });
                }
            },
            Err(e) => return Look::Done(read_outcome(&e, source)),
        }
        let api = reader;
        let shown_source = escape::bytes(api.source.as_bytes());
        let mut seen = false;
        for check in &checks {
            match self.check_annotations(api, rp, *check, needle, witness) {
                Ok((Some(detail), _)) => {
                    return Look::Done(RecoverOutcome::Found {
                        detail: format!(
                            "commit {sha} (run {run}'s jobs listing refused): {detail}"
                        ),
                    });
                }
                Ok((None, w)) => seen |= w,
                // One check run's annotations refused while the listing
                // was not: no full look.
                Err(e) => {
                    return Look::Done(RecoverOutcome::Error {
                        reason: format!(
                            "listing check run {check}'s annotations: {}: no full look",
                            e.text()
                        ),
                    });
                }
            }
        }
        if !seen {
            return Look::NotCurrent(format!(
                "no annotation of commit {sha}'s check runs is the witness notice run A printed \
                 after the plant"
            ));
        }
        Look::Done(RecoverOutcome::NotFound {
            detail: format!(
                "GitHub refused run {run}'s jobs listing ({}); run B read the annotations of \
                 commit {sha}'s {} check runs with {shown_source} instead, and an annotation is \
                 run A's witness notice; none holds the nonce",
                jobs.text(),
                checks.len()
            ),
        })
    }

    /// Where the job's check run's annotations hold the nonce, if they do,
    /// and whether one holds the witness.
    fn annotations_hold(
        &self,
        api: &Api<'_>,
        rp: &str,
        job: &answers::Job,
        needle: &str,
        witness: &str,
    ) -> Result<(Option<String>, bool), ApiError> {
        let check = job
            .check_run_url
            .as_deref()
            .and_then(|u| u.rsplit('/').next())
            .and_then(|id| id.parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::Failed("a job of the listing names no check run (check_run_url)".into())
            })?;
        self.check_annotations(api, rp, check, needle, witness)
    }

    /// Where check run `check`'s annotations hold the nonce, if they do,
    /// and whether one holds the witness.
    fn check_annotations(
        &self,
        api: &Api<'_>,
        rp: &str,
        check: u64,
        needle: &str,
        witness: &str,
    ) -> Result<(Option<String>, bool), ApiError> {
        let path = format!("{rp}/check-runs/{check}/annotations");
        let mut found = None;
        let mut seen = false;
        api.list(
            &path,
            None,
            &format!("listing check run {check}'s annotations"),
            &mut |a| {
                seen |= carriers::field_holding(a, witness).is_some();
                if found.is_none()
                    && let Some(f) = carriers::field_holding(a, needle)
                {
                    found = Some(format!(
                        "an annotation of check run {check} has the nonce in its field {f}"
                    ));
                }
            },
        )?;
        Ok((found, seen))
    }
}
