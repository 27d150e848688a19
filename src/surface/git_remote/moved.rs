//! A remote that moves what was pushed (issue 38, hole 3): a server-side
//! hook that renames `refs/heads/X` to `refs/heads/archive/X` after every
//! push, or points `X` somewhere else. The name run A pushed then no longer
//! shows run A's objects, while any `git clone --mirror` still reads them
//! under the other name.
//!
//! - Recovery: a content carrier's agreed ref that is not listed under its
//!   name, or is listed without the nonce run A pushed there, is a route
//!   that contradicts run A's report: the carrier is not current. Run B
//!   then reads the listed refs whose names carry the probe id
//!   ([`Elsewhere`]; every ref run A makes carries it): the nonce there is
//!   FAIL, named under the ref it sits; not there is ERROR, never PASS.
//! - Cleanup: a journalled ref no longer under its name is gone only when
//!   no listed ref points at the object runwarden pushed ([`Now`]); one
//!   that does is left, and named: runwarden removes only the names it
//!   pushed.
//! - The control's route fault ([`knobs`]): `Knob::RenameRefs` writes a
//!   post-receive hook into the control that moves each pushed branch
//!   under `refs/heads/archive/`.

use super::GitRemote;
use super::recover::{Fetched, Wanted, needle_ref, specs};
use crate::escape;
use crate::fault::Fault;
use crate::loopback::Knob;
use crate::surface::{CleanupOutcome, RecoverOutcome, plain_ref};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// What a content carrier's ERROR says when its agreed ref is listed
/// nowhere run B could read it (the name carriers' misses then count for
/// nothing either: `GitRemote::look`).
pub(super) const NOT_LISTED: &str = "is not listed under its name";

/// At most this many listed refs are read besides the agreed ones. Why a
/// bound: the listing is the remote's, and a hostile one can list any
/// number of names holding the probe id. A plant makes about a dozen refs,
/// so a remote that moved every one of them stays far inside it; past it,
/// the rest are not read, and a carrier not found is ERROR, which says so.
const ELSEWHERE_MAX: usize = 256;

/// The listed refs whose names carry the probe id, besides the agreed
/// ones: where a remote that moves what was pushed keeps run A's objects.
#[derive(Default)]
pub(super) struct Elsewhere {
    /// The first [`ELSEWHERE_MAX`], in listing order.
    pub(super) refs: Vec<String>,
    /// How many more the listing held.
    pub(super) more: u64,
    /// Whether they were fetched and their objects searched.
    pub(super) read: bool,
    /// Why reading them failed, when they were read apart from the agreed
    /// refs (see [`GitRemote::second_look`]).
    pub(super) error: Option<String>,
    /// Per wanted carrier, whether its nonce was among the objects after
    /// they were read apart.
    pub(super) seen: Option<Vec<bool>>,
}

impl Elsewhere {
    /// Keeps listed ref `name` when it carries `probe` and a fetch can name
    /// it (a plain ref name: not a tag's peeled `^{}` line, nothing a
    /// refspec would read as a pattern).
    pub(super) fn offer(&mut self, name: &str, probe: &str) {
        if !name.contains(probe) || !plain_ref(name) {
            return;
        }
        if self.refs.len() < ELSEWHERE_MAX {
            self.refs.push(name.to_string());
        } else {
            self.more += 1;
        }
    }

    /// Where `agreed`'s objects were most likely found, for people: the
    /// read ref whose name ends in the agreed one's (past `refs/<space>/`),
    /// as a remote that moves a ref under a prefix leaves it; else every
    /// read ref (the first three). The search reads all fetched objects at
    /// once, so this names where, not which object.
    fn named_for(&self, agreed: &str) -> String {
        let tail = agreed.splitn(3, '/').nth(2).unwrap_or(agreed);
        let suffix = format!("/{tail}");
        if let Some(r) = self.refs.iter().find(|r| r.ends_with(&suffix)) {
            return escape::bytes(r.as_bytes());
        }
        if self.refs.is_empty() {
            return "the other listed refs run B fetched".into();
        }
        let shown: Vec<String> = self
            .refs
            .iter()
            .take(3)
            .map(|r| escape::bytes(r.as_bytes()))
            .collect();
        let rest = self.refs.len().saturating_sub(3);
        match rest {
            0 => format!("one of {}", shown.join(", ")),
            n => format!("one of {} (or {n} more)", shown.join(", ")),
        }
    }

    /// What run B read besides the agreed refs, for an ERROR.
    fn account(&self) -> String {
        let mut s = match (self.refs.len(), self.read) {
            (0, _) => "no other listed ref carries the probe id".to_string(),
            (n, true) => format!(
                "run B also read the {n} listed refs whose names carry the probe id: no nonce"
            ),
            (n, false) => {
                format!("the {n} listed refs whose names carry the probe id were not read")
            }
        };
        if let Some(e) = &self.error {
            s.push_str(&format!(" (reading them failed: {e})"));
        }
        if self.more > 0 {
            s.push_str(&format!(
                "; {} more such refs were not read (at most {ELSEWHERE_MAX})",
                self.more
            ));
        }
        s
    }
}

impl GitRemote {
    /// The refspecs of run B's fetch once the listing is in: when an agreed
    /// ref is not listed under its name, the agreed refs it lists and the
    /// refs [`Elsewhere`] kept, fetched in one (marked read); else none
    /// (`None`: the first fetch stands).
    pub(super) fn refetch(
        &self,
        agreed: &HashSet<String>,
        present: &HashSet<String>,
        elsewhere: &mut Elsewhere,
        first_failed: bool,
    ) -> Option<Vec<String>> {
        if present.len() >= agreed.len() || (!first_failed && elsewhere.refs.is_empty()) {
            return None;
        }
        elsewhere.read = !elsewhere.refs.is_empty();
        let mut again = present.clone();
        again.extend(elsewhere.refs.iter().cloned());
        Some(specs(&again))
    }

    /// The second look, only when a content carrier's agreed ref is listed
    /// and its objects do not hold the nonce run A pushed there (the remote
    /// pointed the name elsewhere): the refs [`Elsewhere`] kept, fetched and
    /// searched for every carrier's `texts` (two more git processes).
    pub(super) fn second_look(
        &self,
        dir: &Path,
        wanted: &[Wanted],
        texts: &[String],
        f: &mut Fetched,
    ) {
        let Ok(seen) = &f.seen else { return };
        let rewritten = wanted
            .iter()
            .enumerate()
            .any(|(i, w)| needle_ref(w).is_some_and(|r| f.present.contains(&r)) && !seen[i]);
        if !rewritten || f.fetch_error.is_some() || f.elsewhere.read || f.elsewhere.refs.is_empty()
        {
            return;
        }
        let refs: HashSet<String> = f.elsewhere.refs.iter().cloned().collect();
        f.elsewhere.read = true;
        match self
            .fetch(dir, &specs(&refs), None)
            .and_then(|()| self.search_objects(dir, texts))
        {
            Ok(s) => f.elsewhere.seen = Some(s),
            Err(e) => f.elsewhere.error = Some(e.into_reason()),
        }
    }

    /// What reading back content carrier `i` (`w`, agreed ref `r`) comes
    /// to: `Ok(Some(detail))` when its nonce was read back, `Err` when it
    /// was not. `Ok(None)` only for a needle no plant reported (derived)
    /// whose ref is not listed: a content carrier's ref exists once run A
    /// reported it pushed, so where its nonce is missing the remote showed
    /// run B something else than it kept, and the absence proves nothing.
    pub(super) fn read_content(
        &self,
        w: &Wanted,
        i: usize,
        r: &str,
        f: &Fetched,
    ) -> Result<Option<String>, RecoverOutcome> {
        let c = &w.carrier;
        let shown = escape::bytes(r.as_bytes());
        let listed = f.present.contains(r);
        // A derived needle (no receipt) names the ref a plant would push.
        let pushed = if w.needle.derived {
            format!("the agreed ref {shown}")
        } else {
            format!("the ref run A pushed, {shown},")
        };
        let missing = format!(
            "not current: {pushed} {NOT_LISTED} (the remote moved or dropped it); its absence proves nothing"
        );
        match (&f.fetch_error, &f.seen) {
            (Some(e), _) if listed && !f.elsewhere.read => return Err(self.failure(e.clone())),
            // The fetch also took the refs the remote moved: its refusal
            // may be of those alone, so it says nothing of this route.
            (Some(e), _) if listed => {
                return Err(RecoverOutcome::Error {
                    reason: format!(
                        "run B's fetch of {shown} with the listed refs that carry the probe id failed: {e}"
                    ),
                });
            }
            // What was not listed under its name is never read as a
            // refusal: the route was not current to begin with.
            (Some(e), _) => {
                return Err(RecoverOutcome::Error {
                    reason: format!("{missing}; and run B's fetch failed: {e}"),
                });
            }
            // Local plumbing in run B's own scratch repository: the
            // remote had no say, so never a refusal.
            (None, Err(e)) => {
                return Err(RecoverOutcome::Error {
                    reason: e.reason().to_string(),
                });
            }
            (None, Ok(_)) => {}
        }
        let first = matches!(&f.seen, Ok(s) if s[i]);
        let apart = f.elsewhere.seen.as_ref().is_some_and(|s| s[i]);
        let place = f.elsewhere.named_for(r);
        match (listed, first, apart) {
            (true, true, _) => Ok(Some(format!(
                "run B fetched {shown} and found the nonce among the objects it fetched (its {c})"
            ))),
            (false, true, _) => Ok(Some(format!(
                "{pushed} is not listed under its name; run B read the listed refs that carry the probe id and found the nonce (its {c}) under {place}, not the name run A pushed"
            ))),
            (true, false, true) => Ok(Some(format!(
                "the ref run A pushed, {shown}, no longer holds the nonce; run B read the listed refs that carry the probe id and found it (its {c}) under {place}, not the name run A pushed"
            ))),
            // No plant reported it: nothing it says is contradicted.
            (false, false, _) if w.needle.derived => Ok(None),
            (false, false, _) => Err(RecoverOutcome::Error {
                reason: format!("{missing}; {}", f.elsewhere.account()),
            }),
            (true, false, false) => Err(RecoverOutcome::Error {
                reason: format!(
                    "not current: the ref run A pushed, {shown}, is listed, but the nonce run A pushed there is not among its objects (the remote pointed it elsewhere); its absence proves nothing; {}",
                    f.elsewhere.account()
                ),
            }),
        }
    }
}

/// How many other names of one pushed object cleanup keeps to name. Why
/// a bound: a hostile listing can point any number of refs at it.
const NAMES_KEPT: usize = 4;

/// What one ls-remote shows cleanup of the refs its push did not delete:
/// where each journalled name points now, and which other listed refs
/// point at an object runwarden pushed.
#[derive(Default)]
pub(super) struct Now {
    names: HashMap<String, String>,
    /// Pushed object -> other listed names of it (escaped, the first
    /// [`NAMES_KEPT`]) and how many more.
    at: HashMap<String, (Vec<String>, u64)>,
}

impl GitRemote {
    /// One streamed ls-remote, after the deleting push: what it shows of
    /// `live`'s refs (ref name, object pushed). `Broken` when git fails.
    pub(super) fn now_listed(
        &self,
        dir: &Path,
        live: &[(usize, String, String)],
    ) -> Result<Now, Fault> {
        let names: HashSet<&str> = live.iter().map(|(_, r, _)| r.as_str()).collect();
        let shas: HashSet<&str> = live.iter().map(|(_, _, s)| s.as_str()).collect();
        let mut now = Now::default();
        let ls = self.remote_stream(
            dir,
            &["ls-remote".into(), self.settings.url.clone()],
            |line| {
                let Some(tab) = line.iter().position(|b| *b == b'\t') else {
                    return;
                };
                let (sha, name) = (String::from_utf8_lossy(&line[..tab]), &line[tab + 1..]);
                // A tag's `^{}` line names the object the tag points at:
                // that tag holds it too, under the tag's own name.
                let base = name.strip_suffix(b"^{}").unwrap_or(name);
                if let Ok(n) = std::str::from_utf8(base)
                    && names.contains(n)
                {
                    // One of runwarden's own names: its own entry's case.
                    if base.len() == name.len() {
                        now.names.insert(n.to_string(), sha.into_owned());
                    }
                    return;
                }
                if let Some(pushed) = shas.get(sha.as_ref()) {
                    let (kept, more) = now.at.entry(pushed.to_string()).or_default();
                    if kept.len() < NAMES_KEPT {
                        kept.push(escape::bytes(base));
                    } else {
                        *more += 1;
                    }
                }
            },
        );
        if ls.success {
            Ok(now)
        } else {
            Err(Fault::broken(format!("ls-remote failed: {}", ls.reason())))
        }
    }
}

impl GitRemote {
    /// What cleanup's deleting push (`results`) did to each of `live`'s
    /// refs (`(slot in outcomes, ref, object pushed)`).
    pub(super) fn deleted(
        &self,
        dir: &Path,
        live: &[(usize, String, String)],
        results: &Result<HashMap<String, (char, String)>, Fault>,
        outcomes: &mut [CleanupOutcome],
    ) {
        // A refused lease cannot tell a ref that is gone (run A died
        // before its push) from one someone moved: only then, ask the
        // remote once which of them still exist, and which other names
        // hold what was pushed (gone only when none does).
        let rejected = matches!(results, Ok(res) if live.iter().any(|(_, r, _)| !matches!(res.get(r), Some(('-', _)))));
        let now = rejected.then(|| self.now_listed(dir, live).ok()).flatten();
        for (i, r, pushed) in live {
            let here = now.as_ref().and_then(|n| n.outcome(r, pushed));
            outcomes[*i] = match (results, here) {
                (Err(e), _) => CleanupOutcome::Left {
                    reason: format!("the deleting push failed: {e}"),
                },
                (Ok(res), _) if matches!(res.get(r), Some(('-', _))) => CleanupOutcome::Removed,
                (Ok(_), Some(o)) => o,
                (Ok(res), None) => CleanupOutcome::Left {
                    reason: res
                        .get(r)
                        .map_or("the push reported nothing for this ref".into(), |(_, s)| {
                            format!("not deleted: {s}")
                        }),
                },
            };
        }
    }
}

impl Now {
    /// The outcome of journalled ref `r` (object `pushed`) that the push
    /// did not delete; `None` while it is still there as pushed (the
    /// push's own report says why it stayed).
    pub(super) fn outcome(&self, r: &str, pushed: &str) -> Option<CleanupOutcome> {
        match self.names.get(r) {
            Some(sha) if sha == pushed => None,
            Some(_) => Some(CleanupOutcome::Left {
                reason: "it now points at another object than runwarden pushed: someone moved it; left alone".into(),
            }),
            None => Some(match self.at.get(pushed) {
                None => CleanupOutcome::Gone,
                Some((kept, more)) => {
                    let others = kept.len() as u64 - 1 + more;
                    let also = match others {
                        0 => String::new(),
                        n => format!(" (and {n} other names of the object)"),
                    };
                    CleanupOutcome::Left {
                        reason: format!(
                            "moved by the remote to {}{also}: not removed (runwarden removes only the names it pushed)",
                            kept.first().map(String::as_str).unwrap_or("?")
                        ),
                    }
                }
            }),
        }
    }
}

/// The control's route faults: [`Knob::RenameRefs`] alone, by the
/// post-receive hook of the control repository `dir` ([`RENAME_HOOK`]).
/// On writes the hook; off removes it (what it moved stays moved).
pub(super) fn knobs(dir: &Path) -> Box<dyn Fn(Knob, bool) -> bool + Send + Sync> {
    let hooks = dir.join("hooks");
    Box::new(move |knob, on| knob == Knob::RenameRefs && rename_hook(&hooks, on).is_ok())
}

/// The hook a server that moves what was pushed runs: each branch a push
/// made or moved (not one already under `refs/heads/archive/`) is created
/// under `refs/heads/archive/` at the pushed object, then deleted under
/// the pushed name. Why a shell script: it is git's hook, run by git's
/// receive-pack in the control, not a command runwarden builds. It runs
/// with the pushing git's environment; of it, the script relies on git's
/// own `GIT_DIR` only (receive-pack sets it to the control), and a
/// deletion (an all-zero new id) is let be.
const RENAME_HOOK: &str = "#!/bin/sh
# runwarden control, Knob::RenameRefs: a server that moves what was pushed.
while read old new ref; do
  case \"$ref\" in
    refs/heads/archive/*) continue ;;
    refs/heads/*) ;;
    *) continue ;;
  esac
  case \"$new\" in
    *[!0]*) ;;
    *) continue ;;
  esac
  git update-ref \"refs/heads/archive/${ref#refs/heads/}\" \"$new\" || exit 1
  git update-ref -d \"$ref\" \"$new\" || exit 1
done
";

/// Writes (`on`) or removes the rename hook in `hooks`.
fn rename_hook(hooks: &Path, on: bool) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let hook = hooks.join("post-receive");
    if !on {
        return match std::fs::remove_file(&hook) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
    }
    std::fs::create_dir_all(hooks)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o755)
        .open(&hook)?;
    std::io::Write::write_all(&mut file, RENAME_HOOK.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_ref_is_named_by_the_read_ref_that_ends_like_it() {
        let mut e = Elsewhere::default();
        for r in [
            "refs/tags/runwarden-p1-0123",
            "refs/heads/archive/runwarden/p1/commit-message",
            "refs/heads/x^{}",
            "refs/heads/other",
        ] {
            e.offer(r, "p1");
        }
        assert_eq!(e.refs.len(), 2, "{:?}", e.refs);
        assert_eq!(
            e.named_for("refs/heads/runwarden/p1/commit-message"),
            "\"refs/heads/archive/runwarden/p1/commit-message\""
        );
        assert!(
            e.named_for("refs/notes/runwarden-p1")
                .starts_with("one of ")
        );
    }

    #[test]
    fn a_ref_gone_from_its_name_is_gone_only_when_no_other_name_holds_its_object() {
        let mut now = Now::default();
        now.at
            .insert("b".repeat(40), (vec!["\"refs/heads/archive/x\"".into()], 0));
        assert_eq!(
            now.outcome("refs/heads/x", &"a".repeat(40)),
            Some(CleanupOutcome::Gone)
        );
        assert!(matches!(
            now.outcome("refs/heads/x", &"b".repeat(40)),
            Some(CleanupOutcome::Left { reason }) if reason.starts_with("moved by the remote to \"refs/heads/archive/x\":")
        ));
        now.names.insert("refs/heads/y".into(), "c".repeat(40));
        assert_eq!(now.outcome("refs/heads/y", &"c".repeat(40)), None);
    }
}
