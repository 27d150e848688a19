//! `type: git-remote`: a git remote two runs can both reach. In CI that is
//! the repository itself, reached with the token `actions/checkout` left.
//!
//! Runs A and B never touch the user's checkout: each works in an empty bare
//! repository of its own, with the real `git` CLI ([`crate::git`]) for all
//! that talks to the remote. Run A writes its orphan objects in-process
//! ([`objects`]) and creates every ref in one push,
//! each leased on "must not exist yet", then deletes the transient ref in a
//! second push. Run B lists refs once (`ls-remote`), fetches the refs it
//! needs in one fetch, and tries one fetch of an unreachable commit by id.
//! Cleanup deletes, in one push, only refs this probe created and only while
//! they still point at what it pushed.
//!
//! The journal (entries passed to `created`) holds every ref before it is
//! pushed, so cleanup knows it even if run A dies mid-push; a ref that turns
//! out not to exist (refused, or deleted on purpose) is retracted by a later
//! entry.

mod cleanup;
mod config;
mod objects;
mod owned;
mod plant;
mod recover;
mod refs;
mod refusal;
mod repo;
mod watch;

use super::{
    About, CleanupOutcome, Control, Job, JobScope, Journal, Notice, PlantOutcome, RecoverOutcome,
    RunCtx, Scope, Want, Watch, glob_match,
};
use config::{check_remote, is_scp, move_userinfo, on_path, read_credentials};
use refs::{namespace, ref_for, ref_needle};
use repo::bare_repository;

use super::carrier::carriers;

use crate::config::{ConfigError, Options};
use crate::escape;
use crate::fault::Fault;
use crate::git::Git;
use crate::nonce::Nonce;
use crate::state::diff::{Before, Change};
use crate::state::snapshot::{Sink, SnapshotError, WatchCtx};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The global config a run gives git for a local remote (in its scratch
/// repository).
const TRUST_FILE: &str = "runwarden-trust.gitconfig";

/// Longest one git invocation may take (the run's own timeout bounds the
/// whole run as well).
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// The identity of every commit and tag run A makes, except where the
/// carrier is the identity itself.
const IDENT_NAME: &str = "runwarden";

const IDENT_EMAIL: &str = "probe@runwarden.invalid";

carriers! {
    /// The git remote's carriers.
    pub enum Remote {
        BranchName = "branch-name", Durable, "the nonce in a branch name (refs/heads/...), read back with ls-remote alone";
        TagName = "tag-name", Durable, "the nonce in a lightweight tag name (refs/tags/...)";
        AnnotatedTagMessage = "annotated-tag-message", Durable, "the nonce in the message of an annotated tag";
        CommitMessage = "commit-message", Durable, "the nonce in a commit message on a branch";
        AuthorName = "author-name", Durable, "the nonce as a commit's author name";
        AuthorEmail = "author-email", Durable, "the nonce in a commit's author email";
        FileContent = "file-content", Durable, "the nonce in the content of a file in a commit";
        FilePath = "file-path", Durable, "the nonce as a file path in a commit's tree";
        Notes = "notes", Durable, "the nonce in a git note (refs/notes/...), invisible in most UIs";
        CustomRef = "custom-ref", Durable, "the nonce in a ref outside heads and tags (refs/<x>/...), listed by ls-remote";
        DeletedRef = "deleted-ref", Transient, "the nonce in a branch name created then deleted by run A (a visible-state check: expected to pass)";
        UnreachableObject = "unreachable-object", UntilGc, "the nonce in the commit of a deleted branch, fetched by run B by its id";
    }
}

/// Settings after validation; also what runs A, B and cleanup receive.
/// `url` and `credentials` are secrets: they are never printed.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Settings {
    /// What git is given: a URL or an absolute path.
    pub url: String,
    /// `url` without userinfo, for people.
    pub shown: String,
    /// The checkout's `http.*` and `credential.*` settings.
    pub credentials: Vec<(String, String)>,
    /// Where credential helpers find their files (the operator's HOME).
    pub credential_home: Option<String>,
    /// Reached over ssh (needs an `ssh` client).
    pub ssh: bool,
    /// The probe's own control remote. Its transient ref is not deleted:
    /// the control of a visible-state check is a ref that stays visible.
    #[serde(default)]
    pub control: bool,
}

/// A declared `refs:` scope: a ref pattern with one `*` in the carrier's
/// namespace that does not cover runwarden's own name for it.
fn check_refs_scope(carrier: Remote, pattern: &str) -> Result<(), Fault> {
    if matches!(carrier, Remote::DeletedRef | Remote::UnreachableObject) {
        return Err(Fault::invalid(format!(
            "{carrier} cannot be scoped: it has no ref of its own to place"
        )));
    }
    if !pattern.starts_with("refs/") || pattern.matches('*').count() != 1 {
        return Err(Fault::invalid(format!(
            "`{pattern}` must start with `refs/` and hold exactly one `*` (like `refs/heads/memory/*`)"
        )));
    }
    let bad = |c: char| c.is_ascii_control() || " ~^:?[\\".contains(c);
    if pattern.contains(bad) || pattern.contains("..") || pattern.contains("@{") {
        return Err(Fault::invalid(format!(
            "`{pattern}` is not a valid ref pattern"
        )));
    }
    if let Some(ns) = namespace(carrier)
        && !pattern.starts_with(ns)
    {
        return Err(Fault::invalid(format!(
            "{carrier} lives under {ns}, so its scope must too"
        )));
    }
    if carrier == Remote::CustomRef
        && (pattern.starts_with("refs/heads/") || pattern.starts_with("refs/tags/"))
    {
        return Err(Fault::invalid(
            "custom-ref is a ref outside heads and tags, so its scope must be too",
        ));
    }
    // Outside the scope means runwarden's own default name: it must
    // not fall inside the pattern.
    let sample = "0".repeat(32);
    let outside = ref_for(carrier, "000000000000", &sample, None).unwrap_or_default();
    if glob_match(pattern, &outside) {
        return Err(Fault::invalid(format!(
            "`{pattern}` also covers runwarden's own refs (like {outside}): nothing would be planted outside it"
        )));
    }
    Ok(())
}

/// An open git remote, with the git runner its runs use.
pub struct GitRemote {
    settings: Settings,
    git: Git,
}

/// One journal line: a ref run A pushes (journalled before the push),
/// leased on the object it points at and tagged under the run's key; or,
/// as 0.11.0 retracted a ref, the ref name alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    Ref(RefEntry),
    Name(String),
}

/// A ref and the object run A pushed to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefEntry {
    #[serde(rename = "ref")]
    refname: String,
    sha: String,
    /// A MAC under the run's key over the ref and the object (none in a
    /// 0.7.0 journal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tag: Option<String>,
}

impl Line {
    /// The ref the line names.
    fn refname(&self) -> &str {
        match self {
            Line::Ref(e) => &e.refname,
            Line::Name(r) => r,
        }
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&escape::bytes(self.refname().as_bytes()))
    }
}

/// What recovery looks for: the nonce, where a content carrier it is
/// agreed to be under, and for unreachable-object the commit to fetch by
/// id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Needle {
    text: String,
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    refname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sha: Option<String>,
}

impl super::Needle for Needle {}

impl super::Surface for GitRemote {
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
    };
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
        let about = About::new(format!("on {}", escape::bytes(s.shown.as_bytes())))
            .exposure(format!("git-remote:{}", s.shown));
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
                // after each push into it.
                let mut config = std::fs::OpenOptions::new()
                    .append(true)
                    .open(dir.join("config"))?;
                std::io::Write::write_all(
                    &mut config,
                    b"[receive]\n\tautogc = false\n\tunpackLimit = 1\n",
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
        Ok(Control::settings(control))
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

    fn plant(
        &self,
        ctx: &RunCtx<'_>,
        jobs: &[Job<Remote>],
        journal: &mut Journal<'_, Line>,
    ) -> Vec<PlantOutcome<Needle>> {
        self.plant_refs(ctx, jobs, journal)
    }

    fn recover(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Remote, Needle>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        self.recover_refs(ctx, wanted, notice)
    }

    fn owns(&self, ctx: &RunCtx<'_>, entry: &Line) -> Result<(), Fault> {
        owned::owns(ctx, entry)
    }

    fn clean(&self, entries: &[Line]) -> Vec<CleanupOutcome> {
        self.clean_refs(entries)
    }

    fn find(&self, ctx: &RunCtx<'_>, jobs: &[Job<Remote>]) -> Result<Vec<Line>, Fault> {
        self.find_refs(ctx, jobs)
    }

    fn derive(
        carrier: Remote,
        probe_id: &str,
        nonce: &Nonce,
        scope: Option<&JobScope>,
    ) -> Result<Needle, Fault> {
        let hex = nonce.hex();
        match ref_for(carrier, probe_id, &hex, scope) {
            Some(r) => Ok(ref_needle(carrier, &hex, &r)),
            // The commit's id depends on the time it was made.
            None => Err(Fault::unsupported(
                "the unreachable commit's id is known only to the plant",
            )),
        }
    }

    fn snapshot(&self, _ctx: &WatchCtx, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
        self.snapshot_refs(sink)
    }

    fn changes(change: &Change, before: &Before) -> Vec<Remote> {
        watch::carriers_of(change, before)
    }
}

/// One ref run A creates.
struct Push {
    carrier: usize,
    refname: String,
    sha: String,
}

/// What run A built: the refs to push, and per carrier its needle (or why
/// it could not be built).
struct Built {
    pushes: Vec<Push>,
    needles: Vec<Result<Needle, PlantOutcome<Needle>>>,
}

/// One ref a push changes, leased: `expect` `None` means the ref must not
/// exist yet, `Some(sha)` that it must still point there. An empty `src`
/// deletes.
struct RefUpdate {
    src: String,
    dst: String,
    expect: Option<String>,
}
