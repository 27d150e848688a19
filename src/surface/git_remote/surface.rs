//! The git-remote surface type's operations: its config and settings, its
//! control, the plant of every carrier in one push, recovery, the
//! ownership rule, cleanup (by receipt and by probe id), the needle derived
//! without a receipt, and watch mode's listing of refs and the carriers of
//! a change.

use super::config::{check_remote, is_scp, move_userinfo, on_path, read_credentials};
use super::owned::{planted_leaf, tag};
use super::plant::Outcome;
use super::recover::Wanted;
use super::refs::{ROUTES, ref_for, ref_needle, route_of};
use super::repo::bare_repository;
use super::watch::{COMMIT_CARRIERS, name_carrier};
use super::{
    Built, GIT_TIMEOUT, GitRemote, Line, Needle, RefEntry, RefUpdate, Remote, Settings,
    check_refs_scope,
};
use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::git::Git;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx, component, emit_sorted, listed};
use crate::surface::routes::{Proof, Recovered, Route};
use crate::surface::{
    About, CleanupOutcome, Control, Job, JobScope, Journal, Notice, RunCtx, Scope, Watch, lower_hex,
};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

impl crate::surface::Surface for GitRemote {
    const NAME: &'static str = "git-remote";
    const DESCRIPTION: &'static str =
        "a git remote both runs can reach (in CI: the repository, with the checkout's token)";
    const KEYS: &'static [&'static str] = &["remote", "repo"];
    const SCOPES: &'static [Scope<Remote>] = &[Scope {
        key: "refs",
        check: check_refs_scope,
    }];
    const WATCH: Watch<Remote> = Watch::Yes {
        unwatched: &[
            (
                Remote::DeletedRef,
                "a ref made and deleted between the two snapshots is in neither listing",
            ),
            (
                Remote::UnreachableObject,
                "a commit no ref names is in no listing (run B fetches it by an id it was told)",
            ),
        ],
        changes: changes_of,
    };
    const ROUTES: &'static [Route<Remote>] = ROUTES;
    type Carrier = Remote;
    type Settings = Settings;
    type Entry = Line;
    type Needle = Needle;

    fn validate(mut opts: Options<'_>) -> Result<Settings, ConfigError> {
        let Some((remote, pos)) = opts.string("remote")? else {
            return Err(opts.error(
                opts.entry_pos(),
                "a git-remote surface needs `remote:` (a remote name, a path or a URL)",
            ));
        };
        let repo = match opts.string("repo")? {
            Some((r, _)) => PathBuf::from(r),
            None => opts
                .env("GITHUB_WORKSPACE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(".")),
        };
        let repo =
            std::path::absolute(&repo).map_err(|e| opts.error(pos, format!("`repo`: {e}")))?;
        check_remote(&remote).map_err(|m| opts.error(pos, format!("`remote`: {m}")))?;
        let mut credentials = vec![];
        let url = if let Some((scheme, _)) = remote.split_once("://") {
            if !["file", "http", "https", "ssh", "git"].contains(&scheme) {
                return Err(opts.error(pos, format!("`remote`: unsupported URL scheme `{scheme}`")));
            }
            remote.clone()
        } else if is_scp(&remote) {
            remote.clone()
        } else if remote.starts_with('/') || remote.starts_with('.') || remote.contains('/') {
            std::path::absolute(&remote)
                .map_err(|e| opts.error(pos, format!("`remote`: {e}")))?
                .to_string_lossy()
                .into_owned()
        } else {
            // A remote name of the checkout at `repo`: its URL and its
            // credential settings, as the job itself would use them.
            let operator = Git::operator(Duration::from_secs(20));
            let args: [&OsStr; 6] = [
                "-C".as_ref(),
                repo.as_os_str(),
                "remote".as_ref(),
                "get-url".as_ref(),
                "--push".as_ref(),
                remote.as_ref(),
            ];
            let (out, stdout) = operator.run(Path::new("/"), &args, &[], b"");
            if !out.success {
                return Err(opts.error(
                    pos,
                    format!(
                        "`remote`: `{remote}` is not a remote of {}: {}",
                        escape::bytes(repo.as_os_str().as_encoded_bytes()),
                        out.reason()
                    ),
                ));
            }
            let url = String::from_utf8_lossy(&stdout).trim().to_string();
            // The checkout's own URL is held to the same rules.
            check_remote(&url).map_err(|m| {
                opts.error(
                    pos,
                    format!("`remote`: `{remote}` resolves to a URL that {m}"),
                )
            })?;
            credentials = read_credentials(&operator, &repo);
            // A relative local URL is relative to the checkout.
            if !url.contains("://") && !is_scp(&url) && !url.starts_with('/') {
                repo.join(&url).to_string_lossy().into_owned()
            } else {
                url
            }
        };
        let ssh = url.starts_with("ssh://") || (is_scp(&url) && !url.contains("://"));
        let url = move_userinfo(url, &mut credentials).map_err(|m| opts.error(pos, m))?;
        let settings = Settings {
            shown: crate::redact::userinfo(&url),
            url,
            credentials,
            credential_home: opts.env("HOME"),
            ssh,
            control: false,
        };
        Ok(settings)
    }

    fn about(s: &Settings) -> About<Remote> {
        let mut about = About::new(format!("on {}", escape::bytes(s.shown.as_bytes())))
            .exposure(format!("git-remote:{}", s.shown));
        // A remote on this machine (a path, `file://`) can be looked at
        // now, as a filesystem surface's directory is.
        let local = s.url.strip_prefix("file://").unwrap_or(&s.url);
        if local.starts_with('/') && !s.control && !Path::new(local).exists() {
            about = about.warning(format!(
                "remote {} does not exist here: valid, since it may exist where the probe runs (a runner), but a probe here gives ERROR",
                escape::bytes(s.shown.as_bytes())
            ));
        }
        if s.ssh && !on_path("ssh") {
            about.unavailable("the remote is reached over ssh and no ssh client is on PATH")
        } else {
            about
        }
    }

    fn control(_like: Option<&Settings>, dir: &Path) -> Result<Control<Settings>, Fault> {
        bare_repository(dir)
            .and_then(|()| {
                // The control is probed once and removed: no automatic gc
                // after each push into it, and no fsync of what it keeps.
                let mut config = std::fs::OpenOptions::new()
                    .append(true)
                    .open(dir.join("config"))?;
                std::io::Write::write_all(
                    &mut config,
                    b"[receive]\n\tautogc = false\n\tunpackLimit = 1\n[core]\n\tfsync = none\n",
                )
            })
            .map_err(|e| Fault::broken(format!("the control remote: {e}")))?;
        let path = dir.to_string_lossy().into_owned();
        let control = Settings {
            url: path.clone(),
            shown: path,
            credentials: vec![],
            credential_home: None,
            ssh: false,
            control: true,
        };
        // Its one route fault: a server that moves what was pushed.
        let knobs = Some(super::moved::knobs(dir));
        Ok(Control {
            knobs,
            ..Control::settings(control)
        })
    }

    fn open(settings: Settings) -> Result<GitRemote, Fault> {
        let git = Git::new(
            settings.credentials.clone(),
            settings.credential_home.clone(),
            GIT_TIMEOUT,
            &settings.url,
        );
        Ok(GitRemote { settings, git })
    }

    /// Run A: every carrier's objects written in-process, every ref in one
    /// push (each journalled before it, taken back only when the remote
    /// rejected it), then the transient ref deleted again.
    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        carriers: &[Job<Remote>],
        journal: &mut Journal<'_, Line>,
    ) -> Vec<Outcome> {
        let all = |o: Outcome| carriers.iter().map(|_| o.clone()).collect::<Vec<_>>();
        if let Some(sig) = crate::signals::received() {
            return all(crate::surface::interrupted(sig));
        }
        let work = match self.scratch() {
            Ok(w) => w,
            Err(e) => return all(Outcome::Error { reason: e.into() }),
        };
        let dir = work.path();
        let kinds: Vec<Remote> = carriers.iter().map(|j| j.carrier).collect();
        let Built { pushes, needles } = match self.build(dir, ctx, carriers) {
            Ok(x) => x,
            Err(e) => return all(Outcome::Error { reason: e.into() }),
        };
        // Journal every ref before the push that creates it.
        for p in &pushes {
            journal.record(&p.entry(ctx));
        }
        let results = self.push_creates(dir, &pushes);
        // Per carrier: Ok(()) when its ref was created (or it has none).
        let mut status: Vec<Result<(), Outcome>> = carriers.iter().map(|_| Ok(())).collect();
        for p in &pushes {
            let outcome = self.created_ref(p, &results);
            // Taken back only when the remote said this ref was not made (a
            // rejection in the push's own report, or the whole push
            // refused): a push that failed otherwise (a timeout, a reset,
            // a 5xx) may have made it, and the journal keeps it for
            // cleanup's leased delete.
            let rejected = match &results {
                Ok(r) => matches!(r.get(&p.refname), Some(('!', _))),
                // Refused as a whole (401/403, a hook), or failed before
                // anything was sent (no such repository, no connection):
                // nothing was made.
                Err(f) => self.refused(f.reason()) || super::refusal::nothing_sent(f.reason()),
            };
            if outcome.is_err() && rejected {
                journal.retract(&p.entry(ctx));
            }
            status[p.carrier] = outcome;
        }
        // The transient ref: delete it again (second push), leased on the
        // commit just pushed.
        let deleted = kinds.iter().position(|k| *k == Remote::DeletedRef);
        let mut transient_detail = String::new();
        if self.settings.control {
            transient_detail = "kept visible on the control remote".into();
        } else if let (Some(d), Some(sig)) = (deleted, crate::signals::received()) {
            // Stopped: the ref stays journalled, and cleanup deletes it.
            status[d] = Err(crate::surface::interrupted(sig));
        } else if let Some(d) = deleted
            && status[d].is_ok()
            && let Some(p) = pushes.iter().find(|p| p.carrier == d)
        {
            transient_detail = self.delete_transient(ctx, dir, p, journal);
        }
        // unreachable-object rides on the deleted branch's push.
        let unreachable = kinds.iter().position(|k| *k == Remote::UnreachableObject);
        if let (Some(u), Some(d)) = (unreachable, deleted) {
            status[u] = status[d].clone();
        } else if let Some(u) = unreachable {
            status[u] = Err(Outcome::Error {
                reason: "unreachable-object needs the deleted-ref carrier".into(),
            });
        }
        self.carrier_outcomes(&kinds, status, needles, &pushes, transient_detail)
    }

    /// Run B ([`GitRemote::look`]), each miss with the look of its route:
    /// git's one ref advertisement for a name carrier, the fetch of what it
    /// advertised for a content carrier, the fetch by id for the
    /// unreachable commit. Each is complete and current by the protocol
    /// (the content carriers' moved refs are read where they went:
    /// `moved`).
    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<Recovered> {
        self.look(ctx, wanted, notice)
            .into_iter()
            .zip(wanted)
            .map(|(o, w)| {
                let (route, why) = route_of(w.carrier);
                Recovered::via(o, route, Proof::Protocol(why))
            })
            .collect()
    }

    /// Ownership for git-remote: an entry `{ref, sha, tag}`, or the ref a
    /// 0.11.0 retraction names. Without a configured key the tag is public (a
    /// 0.7.0 journal has none): then the form alone decides. `Invalid` for
    /// anything else.
    fn owns(&self, ctx: &RunCtx<'_>, line: &Line) -> Result<(), Fault> {
        let r = line.refname();
        let shown = escape::bytes(r.as_bytes());
        if let Line::Ref(e) = line {
            let sha = &e.sha;
            if !(lower_hex(sha, 40) || lower_hex(sha, 64)) {
                return Err(Fault::invalid(format!("{shown} is leased on no object id")));
            }
            let tagged = e
                .tag
                .as_ref()
                .is_some_and(|t| crate::marker::same(t.as_bytes(), tag(ctx, r, sha).as_bytes()));
            if ctx.key.is_configured() && !tagged {
                return Err(Fault::invalid(format!(
                    "{shown}: its tag does not verify with RUNWARDEN_KEY"
                )));
            }
        }
        if crate::surface::plain_ref(r) && planted_leaf(r, ctx) {
            Ok(())
        } else {
            Err(Fault::invalid(format!(
                "{shown} is not a ref a plant of probe {} makes",
                ctx.probe_id
            )))
        }
    }

    /// 0.11.0 retracted a ref by its name alone: that takes back the ref's
    /// entry, whatever object it names.
    fn takes_back(taken: &Line, entry: &Line) -> bool {
        match (taken, entry) {
            (Line::Name(r), Line::Ref(e)) => *r == e.refname,
            _ => taken == entry,
        }
    }

    /// Deletes every live ref in one push. (Retractions and the refs they
    /// took back are set aside by the kernel; a ref name alone is what a
    /// 0.11.0 retraction took back, and needs nothing.)
    fn clean(&self, entries: &[Line]) -> Vec<CleanupOutcome> {
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
        self.deleted(work.path(), &live, &results, &mut outcomes);
        outcomes
    }

    /// One ls-remote; every ref a plant of `jobs` would have made that
    /// exists, leased on what it points at now. The deleted ref is included
    /// (a plant killed before deleting it leaves it behind). `Broken` when
    /// git fails.
    fn find(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Remote>],
    ) -> Result<crate::surface::Found<Line>, Fault> {
        let expected: HashSet<String> = jobs
            .iter()
            .filter_map(|j| ref_for(j.carrier, ctx, &j.nonce.hex(), j.scope.as_ref()))
            .collect();
        let work = self.scratch()?;
        let refs = self.ls_refs(work.path(), |name| expected.contains(name))?;
        // A name alone proves nothing: only refs whose object is one
        // runwarden's plant writes are taken, and tagged as read.
        let ours = self.runwarden_objects(work.path(), &refs)?;
        let (mine, theirs): (Vec<_>, Vec<_>) =
            refs.into_iter().partition(|(_, sha)| ours.contains(sha));
        let found: Vec<Line> = mine
            .into_iter()
            .map(|(refname, sha)| {
                let tag = Some(super::owned::tag(ctx, &refname, &sha));
                Line::Ref(RefEntry { refname, sha, tag })
            })
            .collect();
        // A ref under a plant's exact name whose object no plant writes is
        // someone else's: left, and said (a name alone proves nothing).
        let left = theirs
            .into_iter()
            .map(|(refname, sha)| {
                (
                    format!(
                        "{} at {}",
                        escape::bytes(refname.as_bytes()),
                        escape::bytes(sha.as_bytes())
                    ),
                    "found under the name a plant of this probe makes, but its object is not one \
                     runwarden writes: someone else's, left alone"
                        .to_string(),
                )
            })
            .collect();
        Ok(crate::surface::Found { ours: found, left })
    }

    fn derive(
        carrier: Remote,
        ctx: &RunCtx<'_>,
        nonce: &Nonce,
        scope: Option<&JobScope>,
    ) -> Result<Needle, Fault> {
        let hex = nonce.hex();
        match ref_for(carrier, ctx, &hex, scope) {
            Some(r) => Ok(Needle {
                derived: true,
                ..ref_needle(carrier, &hex, &r)
            }),
            // The commit's id depends on the time it was made.
            None => Err(Fault::unsupported(
                "the unreachable commit's id is known only to the plant",
            )),
        }
    }

    /// Watch mode: the remote's refs from one `ls-remote` (the listing run B
    /// starts from), sorted and streamed to `sink`. They are sorted in
    /// memory before they are streamed ([`emit_sorted`]): ls-remote gives
    /// no order both snapshots could share.
    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        let dir = self
            .scratch()
            .map_err(|e| SnapshotError::Failed(e.into_reason()))?;
        let mut refs: Vec<(String, String)> = Vec::new();
        let ls = self.remote_stream(
            dir.path(),
            &["ls-remote".into(), self.settings.url.clone()],
            |line| {
                if let Some(tab) = line.iter().position(|b| *b == b'\t') {
                    refs.push((
                        component(&line[tab + 1..]),
                        String::from_utf8_lossy(&line[..tab]).into_owned(),
                    ));
                }
            },
        );
        if !ls.success {
            return Err(SnapshotError::Failed(format!(
                "ls-remote {} failed: {}",
                self.settings.shown,
                ls.reason()
            )));
        }
        // A tag's `^{}` line says it is annotated: its plain entry keeps
        // that (`peeled`, the commit), so a change of a lightweight tag is
        // never taken for a new tag message.
        let peeled: std::collections::HashMap<String, String> = refs
            .iter()
            .filter_map(|(n, oid)| Some((n.strip_suffix("^{}")?.to_string(), oid.clone())))
            .collect();
        let entries = refs
            .into_iter()
            .map(|(name, oid)| match peeled.get(&name) {
                Some(p) => listed(vec![name], "ref", &[("oid", oid), ("peeled", p.clone())]),
                None => listed(vec![name], "ref", &[("oid", oid)]),
            })
            .collect();
        emit_sorted(entries, sink)
    }
}

/// A new or removed ref carries its name; a ref that now names an object
/// no ref named before carries a new object's contents too: a new commit's
/// for a branch or another ref, and for a tag (which may now be an
/// annotated tag, and whose `^{}` line names the commit) a new tag
/// message's as well. `before`: every object id the first snapshot listed.
fn changes_of(c: &Change, before: &Before) -> Vec<Remote> {
    let e = c.entry();
    let name = e.key.first().map(String::as_str).unwrap_or("");
    let carrier = name_carrier(name);
    let mut out = Vec::new();
    let new_object = c
        .after
        .as_ref()
        .and_then(|a| a.attrs.get("oid"))
        .is_some_and(|oid| !before.oids.contains(oid));
    match &c.kind {
        ChangeKind::Created | ChangeKind::Removed | ChangeKind::Renamed(_) => out.push(carrier),
        // Moved to an object that existed: where it points is the message
        // (a branch reset), its name's carrier.
        ChangeKind::Changed(_) if !new_object => out.push(carrier),
        ChangeKind::Changed(_) => {}
    }
    // An annotated tag's plain entry names the tag object (its
    // message); its `peeled` attribute, the commit. A lightweight tag
    // has none: it names a commit, and carries no message.
    let annotated = c
        .after
        .as_ref()
        .is_some_and(|a| a.attrs.contains_key("peeled"));
    let new_commit = c
        .after
        .as_ref()
        .and_then(|a| a.attrs.get("peeled"))
        .is_some_and(|oid| !before.oids.contains(oid));
    if new_object {
        match carrier {
            Remote::Notes => out.push(Remote::Notes),
            Remote::TagName if annotated => {
                out.push(Remote::AnnotatedTagMessage);
                if new_commit {
                    out.extend(COMMIT_CARRIERS);
                }
            }
            // The `^{}` line: the commit an annotated tag names.
            _ => out.extend(COMMIT_CARRIERS),
        }
    }
    out
}
