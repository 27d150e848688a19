//! Run B's steps: the one ls-remote, the fetch of the agreed refs and the
//! unreachable commit by id (split in two when the remote refuses it, to
//! tell whose refusal it was), the search of every fetched object as it
//! streams, and what reading back each carrier comes to.

use super::moved::{Elsewhere, NOT_LISTED};
use super::pack;
use super::refs::{is_name_carrier, marker_hex};
use super::refusal::{is_refusal, no_credential, unquoted};
use super::repo::os;
use super::{GitRemote, Needle, Remote};
use crate::escape;
use crate::fault::Fault;
use crate::surface::{Notice, NoticeKind, RecoverOutcome, RunCtx, Want};
use std::collections::HashSet;
use std::path::Path;

impl GitRemote {
    /// A failure of run B's git, as the outcome it means.
    pub(super) fn failure(&self, reason: String) -> RecoverOutcome {
        if self.refused(&reason) {
            RecoverOutcome::Denied {
                reason: format!("the remote refused run B: {reason}"),
            }
        } else {
            RecoverOutcome::Error { reason }
        }
    }

    /// One fetch of `refspecs` (and the object `by_id`, when given) into
    /// run B's scratch repository; the failure (`Broken`, git's words:
    /// whose refusal it was is read from them by the caller).
    pub(super) fn fetch(
        &self,
        dir: &Path,
        refspecs: &[String],
        by_id: Option<&str>,
    ) -> Result<(), Fault> {
        let mut args: Vec<String> = vec![
            "fetch".into(),
            "--no-tags".into(),
            "-q".into(),
            self.settings.url.clone(),
        ];
        args.extend(refspecs.iter().cloned());
        args.extend(by_id.map(String::from));
        let (out, _) = self.remote_run(dir, &args);
        if out.success {
            Ok(())
        } else {
            Err(Fault::broken(out.reason()))
        }
    }

    /// The unreachable commit's fetch, failed: the server declining to
    /// serve an unadvertised object is its own policy (the channel is
    /// closed); anything else is what [`GitRemote::failure`] says.
    fn by_id_failure(&self, reason: String) -> RecoverOutcome {
        if unadvertised(&reason) {
            RecoverOutcome::Denied {
                reason: format!("the remote does not serve unadvertised objects: {reason}"),
            }
        } else {
            self.failure(reason)
        }
    }

    /// Every object in run B's scratch repository (what it fetched, and
    /// nothing else), read in-process from the packs git kept ([`pack`]),
    /// else streamed through one `cat-file`: which `texts` it holds;
    /// `Broken` when git fails.
    pub(super) fn search_objects(&self, dir: &Path, texts: &[String]) -> Result<Vec<bool>, Fault> {
        let mut needles = crate::scan::Needles::new(texts.to_vec());
        // Objects apart, as cat-file's header lines keep them.
        let read = pack::each_object(dir, &mut |object| {
            needles.feed(object);
            needles.feed(b"\n");
        });
        if read.is_ok() {
            return Ok((0..texts.len()).map(|i| needles.found(i)).collect());
        }
        // What the reader does not read, git does: a search only adds, so
        // what it fed already stands.
        let args: Vec<String> = vec![
            "cat-file".into(),
            "--batch-all-objects".into(),
            "--batch".into(),
        ];
        let out = self.git.stream(dir, &os(&args), &[], b"", |line| {
            needles.feed(line);
            needles.feed(b"\n");
        });
        if !out.success {
            return Err(Fault::broken(format!(
                "git cat-file failed: {}",
                out.reason()
            )));
        }
        Ok((0..texts.len()).map(|i| needles.found(i)).collect())
    }
}

/// One carrier to recover, with git-remote's needle.
pub(super) type Wanted = Want<Remote, Needle>;

/// The nonce a wanted needle holds (empty when it holds none).
pub(super) fn needle_text(w: &Wanted) -> String {
    w.needle.text.clone()
}

/// The ref a content carrier's needle is agreed to be under.
pub(super) fn needle_ref(w: &Wanted) -> Option<String> {
    w.needle.refname.clone()
}

/// What run B's one fetch brought: which agreed refs exist (from the
/// listing), the other listed refs that carry the probe id, the
/// unreachable commit's id, and what failed.
pub(super) struct Fetched {
    pub(super) present: HashSet<String>,
    pub(super) elsewhere: Elsewhere,
    pub(super) fetch_error: Option<String>,
    pub(super) by_id: Option<String>,
    pub(super) by_id_error: Option<RecoverOutcome>,
    /// Per wanted carrier, whether the fetched objects hold its nonce.
    pub(super) seen: Result<Vec<bool>, Fault>,
}

impl GitRemote {
    /// Each carrier's outcome: what the listing `found`, else what reading
    /// back the `fetched` objects showed (after `listed` refs).
    pub(super) fn outcomes(
        &self,
        wanted: &[Wanted],
        kinds: &[Remote],
        mut found: Vec<Option<String>>,
        fetched: &Fetched,
        listed: u64,
    ) -> Vec<RecoverOutcome> {
        let mut failures: Vec<Option<RecoverOutcome>> = wanted.iter().map(|_| None).collect();
        for (i, w) in wanted.iter().enumerate() {
            if found[i].is_some() {
                continue;
            }
            match self.read_back(w, kinds[i], i, fetched) {
                Ok(hit) => found[i] = hit,
                Err(o) => failures[i] = Some(o),
            }
        }

        (0..wanted.len())
            .map(|i| {
                if let Some(d) = found[i].take() {
                    RecoverOutcome::Found { detail: d }
                } else if let Some(o) = failures[i].take() {
                    o
                } else {
                    RecoverOutcome::NotFound {
                        detail: format!(
                            "run B listed {listed} refs of {} and read what it could; no nonce",
                            self.settings.shown
                        ),
                    }
                }
            })
            .collect()
    }

    /// The one ls-remote, streamed (memory holds only the agreed refs it
    /// shows): each name carrier of `names` (wanted index, nonce) whose
    /// nonce a ref name holds goes to `found`; refs in the form of this
    /// probe's markers that no plant made are notices. Returns the agreed
    /// refs that exist, how many refs were listed and the other refs that
    /// carry the probe id, or the outcome of every carrier when the
    /// listing failed.
    pub(super) fn list_refs(
        &self,
        dir: &Path,
        ctx: &RunCtx<'_>,
        names: &[(usize, String)],
        agreed: &HashSet<String>,
        found: &mut [Option<String>],
        notice: &mut dyn FnMut(Notice),
    ) -> Result<(HashSet<String>, u64, Elsewhere), RecoverOutcome> {
        let mut present: HashSet<String> = HashSet::new();
        let mut elsewhere = Elsewhere::default();
        let mut listed: u64 = 0;
        // This probe's name markers: any other ref in that form is one no
        // plant with this key made.
        let tag = format!("runwarden-{}-", ctx.probe_id);
        let ours: HashSet<&str> = names.iter().map(|(_, t)| t.as_str()).collect();
        let ls = self.remote_stream(dir, &["ls-remote".into(), self.settings.url.clone()], |line| {
            listed += 1;
            let Some(tab) = line.iter().position(|b| *b == b'\t') else {
                return;
            };
            let name = &line[tab + 1..];
            if !ours.is_empty()
                && let Some(hex) = marker_hex(name, ctx.probe_id, &tag)
                && !ours.contains(hex)
            {
                notice(Notice {
                    kind: NoticeKind::ForgedMarker,
                    entry: escape::bytes(name),
                    detail: "a ref named like a marker of this probe, with a nonce no plant with this key made: someone else writes here".into(),
                    beacon: None,
                });
            }
            for (i, t) in names {
                if found[*i].is_none() && memchr::memmem::find(name, t.as_bytes()).is_some() {
                    found[*i] = Some(format!(
                        "run B listed ref {} whose name carries the nonce",
                        escape::bytes(name)
                    ));
                }
            }
            match std::str::from_utf8(name) {
                Ok(n) if agreed.contains(n) => {
                    present.insert(n.to_string());
                }
                Ok(n) => elsewhere.offer(n, ctx.probe_id),
                Err(_) => {}
            }
        });
        if ls.success {
            return Ok((present, listed, elsewhere));
        }
        let reason = ls.reason();
        Err(if self.refused(&reason) {
            RecoverOutcome::Denied {
                reason: format!("the remote refused run B's ls-remote: {reason}"),
            }
        } else {
            let what = if no_credential(&unquoted(&reason)) {
                "the remote asked for credentials and runwarden had none to give"
            } else if is_refusal(&reason) {
                "authentication failed and the only credential is a credential helper, which may work in the job but not here"
            } else {
                "remote unreachable"
            };
            RecoverOutcome::Error {
                reason: format!("{what}: ls-remote {} failed: {reason}", self.settings.shown),
            }
        })
    }

    /// One fetch of the agreed refs that exist and the unreachable commit
    /// by its id. Refused as a whole, it is split in two, so that each
    /// carrier gets its own route's answer. Returns why the refs could not
    /// be fetched and the commit's outcome when it could not be.
    pub(super) fn fetch_agreed(
        &self,
        dir: &Path,
        refspecs: &[String],
        by_id: Option<&str>,
    ) -> (Option<String>, Option<RecoverOutcome>) {
        if refspecs.is_empty() && by_id.is_none() {
            return (None, None);
        }
        let Err(fault) = self.fetch(dir, refspecs, by_id) else {
            return (None, None);
        };
        let reason = fault.into_reason();
        // Split only when the remote refused the commit by id: the agreed
        // refs may still come alone. A refusal of run B as a whole, a
        // timeout or an unreachable remote would only fail twice more, the
        // same way.
        match (by_id, refspecs.is_empty()) {
            (None, _) => (Some(reason), None),
            (Some(_), true) => (None, Some(self.by_id_failure(reason))),
            (Some(_), false) if !unadvertised(&reason) => {
                (Some(reason.clone()), Some(self.failure(reason)))
            }
            (Some(sha), false) => {
                let fetch_error = self
                    .fetch(dir, refspecs, None)
                    .err()
                    .map(Fault::into_reason);
                let by_id_error = self
                    .fetch(dir, &[], Some(sha))
                    .err()
                    .map(|f| self.by_id_failure(f.into_reason()));
                (fetch_error, by_id_error)
            }
        }
    }

    /// What the fetch says of wanted carrier `i` (`kind`) that the listing
    /// did not find: `Ok(Some(detail))`
    /// when its nonce was read back, `Ok(None)` when it was looked for and
    /// is not there, `Err` when it could not be looked for (or, for a
    /// content carrier, was not where run A pushed it: see
    /// [`GitRemote::read_content`]).
    pub(super) fn read_back(
        &self,
        w: &Wanted,
        kind: Remote,
        i: usize,
        f: &Fetched,
    ) -> Result<Option<String>, RecoverOutcome> {
        // Nothing to look for is no look: never a PASS.
        if needle_text(w).is_empty() {
            return Err(RecoverOutcome::Error {
                reason: "the plant's needle holds no text: nothing to look for".into(),
            });
        }
        let hit = |what: String| match &f.seen {
            Ok(seen) if seen[i] => Ok(Some(what)),
            Ok(_) => Ok(None),
            // Local plumbing in run B's own scratch repository: the
            // remote had no say, so never a refusal.
            Err(f) => Err(RecoverOutcome::Error {
                reason: f.reason().to_string(),
            }),
        };
        let c = &w.carrier;
        match (kind, needle_ref(w)) {
            (Remote::UnreachableObject, _) => match (&f.by_id, &f.by_id_error) {
                (None, _) => Err(RecoverOutcome::Error {
                    reason: "no object id to fetch".into(),
                }),
                (_, Some(e)) => Err(e.clone()),
                (Some(sha), None) => hit(format!(
                    "run B fetched commit {} by id (no ref points at it) and read the nonce",
                    &sha[..12.min(sha.len())]
                )),
            },
            // Name carriers were looked for in the listing.
            (k, None) if is_name_carrier(k) => Ok(None),
            // A content carrier without its agreed ref was never read:
            // that is no PASS.
            (_, None) => Err(RecoverOutcome::Error {
                reason: format!("no agreed ref to read {c} from"),
            }),
            (_, Some(r)) => self.read_content(w, i, &r, f),
        }
    }
}

/// The refspecs that fetch `refs` into run B's scratch repository.
pub(super) fn specs(refs: &HashSet<String>) -> Vec<String> {
    let mut refs: Vec<&String> = refs.iter().collect();
    refs.sort();
    refs.iter()
        .enumerate()
        .map(|(i, r)| format!("+{r}:refs/runwarden-b/{i}"))
        .collect()
}

/// The fetch's answer when its thread ended without one (it panicked).
pub(super) fn stopped() -> (Option<String>, Option<RecoverOutcome>) {
    let broken = "run B's fetch stopped without an answer".to_string();
    (
        Some(broken.clone()),
        Some(RecoverOutcome::Error { reason: broken }),
    )
}

/// Whether git's error says the remote will not serve an object no ref
/// advertises (a fetch by id).
fn unadvertised(reason: &str) -> bool {
    reason.contains("not our ref") || reason.contains("unadvertised object")
}

impl GitRemote {
    /// Run B's reads: one ls-remote for the name carriers (their only route) and, at
    /// the same time, one fetch of the agreed refs together with the
    /// unreachable commit by id (made again with the listed refs, and those
    /// that carry the probe id, when one is gone: see `moved`), and every
    /// fetched object read in-process from the pack git kept ([`pack`];
    /// else by one `cat-file --batch-all-objects --batch`), searched for
    /// every content carrier's nonce: two git processes. A fetch the remote refuses is
    /// split in two (the refs, the commit by id) to tell whose refusal it was.
    pub(super) fn look(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let all = |o: RecoverOutcome| wanted.iter().map(|_| o.clone()).collect::<Vec<_>>();
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => return all(RecoverOutcome::Error { reason: e.into() }),
        };
        let dir = work.path();
        let mut found: Vec<Option<String>> = wanted.iter().map(|_| None).collect();
        let kinds: Vec<Remote> = wanted.iter().map(|w| w.carrier).collect();

        // 1. One ls-remote: ref names carry the name carriers; it also
        // tells which agreed refs exist.
        let names: Vec<(usize, String)> = wanted
            .iter()
            .enumerate()
            .filter(|(i, _)| is_name_carrier(kinds[*i]))
            .map(|(i, w)| (i, needle_text(w)))
            .collect();
        let agreed: HashSet<String> = wanted.iter().filter_map(needle_ref).collect();
        let by_id = wanted
            .iter()
            .find(|w| w.carrier == Remote::UnreachableObject)
            .and_then(|w| w.needle.sha.clone());
        // 2. One fetch: the agreed refs and the unreachable commit by its
        // id, started beside the listing rather than after it (two round
        // trips at once). A fetch of a ref that is gone fails as a whole:
        // then, and only then, it is made again with the refs the listing
        // showed, as it would have been after the listing.
        let mut refspecs = specs(&agreed);
        let (listing, eager) = std::thread::scope(|scope| {
            let eager = scope.spawn(|| self.fetch_agreed(dir, &refspecs, by_id.as_deref()));
            let listing = self.list_refs(dir, ctx, &names, &agreed, &mut found, notice);
            (listing, eager.join())
        });
        let (present, listed, mut elsewhere) = match listing {
            Ok(x) => x,
            Err(o) => return all(o),
        };
        let (mut fetch_error, mut by_id_error) = eager.unwrap_or_else(|_| stopped());
        // An agreed ref not listed under its name: again, with the listed
        // refs that carry the probe id, where a remote that moves what was
        // pushed keeps it.
        let failed = fetch_error.is_some() || by_id_error.is_some();
        if let Some(again) = self.refetch(&agreed, &present, &mut elsewhere, failed) {
            refspecs = again;
            (fetch_error, by_id_error) = self.fetch_agreed(dir, &refspecs, by_id.as_deref());
        }

        // 3. Every fetched object, read once, searched for every content
        // carrier's nonce. Failures are typed where they happen (a refusal
        // is Denied, anything else Failed), never re-read from their text.
        // (A carrier without a text is no search at all, below: it
        // searches for what no object holds, since an empty needle would
        // match everything.)
        let texts: Vec<String> = wanted
            .iter()
            .map(|w| {
                Some(needle_text(w))
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "\0\0none".into())
            })
            .collect();
        // Read only when something was fetched.
        let fetched = (!refspecs.is_empty() && fetch_error.is_none())
            || (by_id.is_some() && by_id_error.is_none());
        let seen = if fetched {
            self.search_objects(dir, &texts)
        } else {
            Ok(vec![false; texts.len()])
        };
        let mut fetched = Fetched {
            present,
            elsewhere,
            fetch_error,
            by_id,
            by_id_error,
            seen,
        };
        self.second_look(dir, wanted, &texts, &mut fetched);
        let mut out = self.outcomes(wanted, &kinds, found, &fetched, listed);
        // A ref run A pushed that the advertisement shows nowhere (not
        // under its name, its objects not under another): the same
        // advertisement is then not shown current for the name carriers
        // either (a stale replica, a cache in front), so their silence is
        // no look. (A remote that moves refs where run B finds them keeps
        // them current.)
        let unshown = out.iter().zip(wanted).find_map(|(o, w)| match o {
            RecoverOutcome::Error { reason }
                if !is_name_carrier(w.carrier) && reason.contains(NOT_LISTED) =>
            {
                needle_ref(w)
            }
            _ => None,
        });
        if let Some(r) = unshown {
            for (o, w) in out.iter_mut().zip(wanted) {
                if is_name_carrier(w.carrier) && matches!(o, RecoverOutcome::NotFound { .. }) {
                    *o = RecoverOutcome::Error {
                        reason: format!(
                            "not current: the ref advertisement does not show {}, which run A pushed, under any name run B could read: its silence proves nothing",
                            escape::bytes(r.as_bytes())
                        ),
                    };
                }
            }
        }
        out
    }
}
