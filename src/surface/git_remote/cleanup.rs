//! Cleanup: one push deleting every live ref, each leased on the commit
//! run A pushed; refs found again by their exact derived names, and taken
//! only when their objects are runwarden's (read back first).

use super::refs::ref_for;
use super::{GitRemote, Line, RefEntry, RefUpdate, Remote};
use crate::fault::Fault;
use crate::surface::{CleanupOutcome, Job, RunCtx};
use std::collections::{HashMap, HashSet};

impl GitRemote {
    /// One ls-remote; every ref a plant of `jobs` would have made that
    /// exists, leased on what it points at now. The deleted ref is included
    /// (a plant killed before deleting it leaves it behind). `Broken` when
    /// git fails.
    pub(super) fn find_refs(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Remote>],
    ) -> Result<Vec<Line>, Fault> {
        let expected: HashSet<String> = jobs
            .iter()
            .filter_map(|j| ref_for(j.carrier, ctx.probe_id, &j.nonce.hex(), j.scope.as_ref()))
            .collect();
        let work = self.scratch()?;
        let refs = self.ls_refs(work.path(), |name| expected.contains(name))?;
        // A name alone proves nothing: only refs whose object is one
        // runwarden's plant writes are taken, and tagged as read.
        let ours = self.runwarden_objects(work.path(), &refs)?;
        let found: Vec<Line> = refs
            .into_iter()
            .filter(|(_, sha)| ours.contains(sha))
            .map(|(refname, sha)| {
                let tag = Some(super::owned::tag(ctx, &refname, &sha));
                Line::Ref(RefEntry { refname, sha, tag })
            })
            .collect();
        Ok(found)
    }

    /// Deletes every live ref in one push. (Retractions and the refs they
    /// took back are set aside by the kernel; a ref name alone is what a
    /// 0.11.0 retraction took back, and needs nothing.)
    pub(super) fn clean_refs(&self, entries: &[Line]) -> Vec<CleanupOutcome> {
        let live: Vec<(usize, String, String)> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Line::Ref(e) => Some((i, e.refname.clone(), e.sha.clone())),
                Line::Name(_) => None,
            })
            .collect();
        let mut outcomes: Vec<CleanupOutcome> =
            entries.iter().map(|_| CleanupOutcome::Superseded).collect();
        if live.is_empty() {
            return outcomes;
        }
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => {
                for (i, _, _) in &live {
                    outcomes[*i] = CleanupOutcome::Left {
                        reason: e.reason().to_string(),
                    };
                }
                return outcomes;
            }
        };
        // One push deleting every live ref, each leased on the commit this
        // probe pushed: a ref someone moved since is left alone.
        let deletes: Vec<RefUpdate> = live
            .iter()
            .map(|(_, r, sha)| RefUpdate {
                src: String::new(),
                dst: r.clone(),
                expect: Some(sha.clone()),
            })
            .collect();
        let results = self.push(work.path(), &deletes);
        // A refused lease cannot tell a ref that is gone (run A died
        // before its push) from one someone moved: only then, ask the
        // remote once which of them still exist.
        let rejected = matches!(&results, Ok(res) if live.iter().any(|(_, r, _)| !matches!(res.get(r), Some(('-', _)))));
        let now: Option<HashMap<String, String>> = rejected
            .then(|| {
                let wanted: HashSet<&str> = live.iter().map(|(_, r, _)| r.as_str()).collect();
                self.ls_refs(work.path(), |name| wanted.contains(name)).ok()
            })
            .flatten();
        for (i, r, pushed) in &live {
            outcomes[*i] = match &results {
                Err(e) => CleanupOutcome::Left { reason: format!("the deleting push failed: {e}") },
                Ok(res) => match (res.get(r), &now) {
                    (Some(('-', _)), _) => CleanupOutcome::Removed,
                    (_, Some(now)) if !now.contains_key(r) => CleanupOutcome::Gone,
                    (_, Some(now)) if now.get(r) != Some(pushed) => CleanupOutcome::Left {
                        reason: "it now points at another object than runwarden pushed: someone moved it; left alone".into(),
                    },
                    (Some((_, summary)), _) => CleanupOutcome::Left { reason: format!("not deleted: {summary}") },
                    (None, _) => CleanupOutcome::Left { reason: "the push reported nothing for this ref".into() },
                },
            };
        }
        outcomes
    }
}
