//! Run A's steps: every carrier's objects written in-process, the one push
//! that creates every ref (each alone when a hook declined them all), each
//! ref's fate read from its report, the transient ref's deletion, and what
//! each carrier's plant came to.

use super::objects::Objects;
use super::refs::{ref_for, ref_needle};
use super::{
    Built, GitRemote, IDENT_EMAIL, IDENT_NAME, Line, Needle, Push, RefEntry, RefUpdate, Remote,
};
use crate::escape;
use crate::fault::Fault;
use crate::surface::{Job, Journal, PlantOutcome, RunCtx};
use std::collections::HashMap;
use std::path::Path;

/// What planting one carrier did, with git-remote's needle.
pub(super) type Outcome = PlantOutcome<Needle>;

/// One push's per-ref results (see [`GitRemote::push`]), or its failure.
type PushResults = Result<HashMap<String, (char, String)>, Fault>;

impl GitRemote {
    /// Builds every plant's objects in `dir`, in-process (see
    /// [`Objects`]); returns the refs to push and each job's needle (or why
    /// it could not be built). `Broken` when an object cannot be written.
    pub(super) fn build(
        &self,
        dir: &Path,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Remote>],
    ) -> Result<Built, Fault> {
        self.build_objects(&Objects::new(dir), ctx, jobs)
            .map_err(|e| Fault::broken(format!("writing run A's objects: {e}")))
    }

    fn build_objects(
        &self,
        st: &Objects,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Remote>],
    ) -> std::io::Result<Built> {
        let probe = ctx.probe_id;
        let innocuous = format!("runwarden probe {probe}");
        let ident = (IDENT_NAME.to_string(), IDENT_EMAIL.to_string());
        let plain = st.commit(&ident, &innocuous, &[])?;
        // The deleted branch's commit carries the unreachable-object nonce
        // (that carrier's only appearance); without it, the innocuous one.
        let unreachable = jobs.iter().find(|j| j.carrier == Remote::UnreachableObject);
        let doomed = match unreachable {
            Some(u) => st.commit(&ident, &format!("{innocuous}\n\n{}", u.nonce.hex()), &[])?,
            None => plain.clone(),
        };
        let mut pushes = Vec::new();
        let mut needles = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            let carrier = job.carrier;
            let hex = job.nonce.hex();
            let refname = ref_for(carrier, ctx, &hex, job.scope.as_ref());
            // The object the carrier's ref points at (none for
            // unreachable-object, which rides on the deleted branch).
            let object = match carrier {
                Remote::BranchName | Remote::TagName | Remote::CustomRef => Some(plain.clone()),
                Remote::DeletedRef => Some(doomed.clone()),
                Remote::UnreachableObject => None,
                Remote::AnnotatedTagMessage => {
                    let name = refname
                        .as_deref()
                        .unwrap_or_default()
                        .trim_start_matches("refs/tags/");
                    Some(st.tag(name, &plain, &hex)?)
                }
                Remote::CommitMessage => {
                    Some(st.commit(&ident, &format!("{innocuous}\n\n{hex}"), &[])?)
                }
                Remote::AuthorName => {
                    Some(st.commit(&(hex.clone(), IDENT_EMAIL.into()), &innocuous, &[])?)
                }
                Remote::AuthorEmail => Some(st.commit(
                    &(IDENT_NAME.into(), format!("{hex}@runwarden.invalid")),
                    &innocuous,
                    &[],
                )?),
                Remote::FileContent => {
                    let b = st.blob(&format!("{hex}\n"))?;
                    Some(st.commit(&ident, &innocuous, &[("notes.txt", &b)])?)
                }
                Remote::FilePath => {
                    let b = st.blob("runwarden probe\n")?;
                    Some(st.commit(&ident, &innocuous, &[(&hex, &b)])?)
                }
                Remote::Notes => Some(st.note(&plain, &format!("{hex}\n"))?),
            };
            needles.push(Ok(match (refname, object) {
                (Some(r), Some(sha)) => {
                    let needle = ref_needle(carrier, &hex, &r);
                    pushes.push(Push {
                        carrier: i,
                        refname: r,
                        sha,
                    });
                    needle
                }
                _ => Needle {
                    text: hex,
                    refname: None,
                    sha: Some(doomed.clone()),
                    derived: false,
                },
            }));
        }
        Ok(Built { pushes, needles })
    }

    /// What each carrier's plant came to, from its ref's fate (`status`)
    /// and its needle: the ref it pushed, or for the transient ref what
    /// became of it (`transient_detail`).
    pub(super) fn carrier_outcomes(
        &self,
        kinds: &[Remote],
        status: Vec<Result<(), Outcome>>,
        needles: Vec<Result<Needle, Outcome>>,
        pushes: &[Push],
        transient_detail: String,
    ) -> Vec<Outcome> {
        kinds
            .iter()
            .zip(status.into_iter().zip(needles))
            .enumerate()
            .map(|(i, (kind, (st, needle)))| match (st, needle) {
                (Err(o), _) | (Ok(()), Err(o)) => o,
                (Ok(()), Ok(needle)) => {
                    let pushed = pushes
                        .iter()
                        .find(|p| p.carrier == i)
                        .map(|p| p.refname.as_str())
                        .unwrap_or("");
                    let detail = match kind {
                        Remote::DeletedRef => transient_detail.clone(),
                        Remote::UnreachableObject => {
                            "a commit reachable only from the deleted branch".into()
                        }
                        _ => format!(
                            "pushed {} to {}",
                            escape::bytes(pushed.as_bytes()),
                            self.settings.shown
                        ),
                    };
                    Outcome::Planted {
                        needle,
                        persistence: None,
                        detail,
                    }
                }
            })
            .collect()
    }

    /// Creates every ref in one push, each leased on "must not exist yet".
    /// A pre-receive hook accepts or declines a push as a whole: one ref
    /// it refuses declines every other ref with it. When the remote
    /// declined every ref of the combined push, each ref is pushed alone,
    /// so each carrier gets its own ref's fate (the common case stays one
    /// push).
    pub(super) fn push_creates(&self, dir: &Path, pushes: &[Push]) -> PushResults {
        let creates: Vec<RefUpdate> = pushes
            .iter()
            .map(|p| RefUpdate {
                src: p.sha.clone(),
                dst: p.refname.clone(),
                expect: None,
            })
            .collect();
        let results = self.push(dir, &creates);
        if let Ok(r) = &results
            && creates.len() > 1
            && creates.iter().all(
                |c| matches!(r.get(&c.dst), Some(('!', why)) if why.contains("remote rejected")),
            )
        {
            let mut alone = HashMap::new();
            for c in &creates {
                let one = RefUpdate {
                    src: c.src.clone(),
                    dst: c.dst.clone(),
                    expect: None,
                };
                match self.push(dir, &[one]) {
                    Ok(r) => alone.extend(r),
                    Err(e) => {
                        alone.insert(c.dst.clone(), ('!', e.into_reason()));
                    }
                }
            }
            return Ok(alone);
        }
        results
    }

    /// Whether the push created `p`'s ref: `Err` is the carrier's outcome.
    pub(super) fn created_ref(&self, p: &Push, results: &PushResults) -> Result<(), Outcome> {
        match results {
            Err(f) => Err(self.push_failure(f.reason())),
            Ok(r) => match r.get(&p.refname) {
                Some(('*', _)) => Ok(()),
                Some((_, summary)) if self.refused(summary) => Err(Outcome::Refused {
                    reason: format!(
                        "the remote refused {}: {summary}",
                        escape::bytes(p.refname.as_bytes())
                    ),
                }),
                Some((_, summary)) => Err(Outcome::Error {
                    reason: format!(
                        "creating {} failed: {summary}",
                        escape::bytes(p.refname.as_bytes())
                    ),
                }),
                None => Err(Outcome::Error {
                    reason: "the push reported nothing for this ref".into(),
                }),
            },
        }
    }

    /// Deletes the transient ref `p` again (a second push, leased on the
    /// commit just pushed), retracting it once deleted; what the deleted-ref
    /// carrier's plant then says.
    pub(super) fn delete_transient(
        &self,
        ctx: &RunCtx<'_>,
        dir: &Path,
        p: &Push,
        journal: &mut Journal<'_, Line>,
    ) -> String {
        let delete = RefUpdate {
            src: String::new(),
            dst: p.refname.clone(),
            expect: Some(p.sha.clone()),
        };
        match self.push(dir, &[delete]) {
            Ok(r) if matches!(r.get(&p.refname), Some(('-', _))) => {
                journal.retract(&p.entry(ctx));
                "created, then deleted at once: the remote no longer lists it, yet its commit may stay fetchable by id".into()
            }
            Ok(r) => format!(
                "created, but deleting it failed ({}): it is still visible",
                r.get(&p.refname)
                    .map(|x| x.1.as_str())
                    .unwrap_or("no report")
            ),
            Err(e) => format!("created, but deleting it failed ({e}): it is still visible"),
        }
    }
}

impl Push {
    /// Its journal line: the ref, the object, their tag under the run's
    /// key.
    pub(super) fn entry(&self, ctx: &RunCtx<'_>) -> Line {
        Line::Ref(RefEntry {
            refname: self.refname.clone(),
            sha: self.sha.clone(),
            tag: Some(super::owned::tag(ctx, &self.refname, &self.sha)),
        })
    }
}
