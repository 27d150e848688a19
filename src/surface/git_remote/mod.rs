//! `type: git-remote`: a git remote two runs can both reach. In CI that is
//! the repository itself, reached with the token `actions/checkout` left.
//!
//! Runs A and B never touch the user's checkout: each works in an empty bare
//! repository of its own, with the real `git` CLI ([`crate::git`]) for all
//! that talks to the remote. Run A writes its orphan objects in-process
//! ([`objects`]) and creates every ref in one push,
//! each leased on "must not exist yet", then deletes the transient ref in a
//! second push. Run B lists refs once (`ls-remote`), fetches the refs it
//! needs in one fetch, and tries one fetch of an unreachable commit by id;
//! where the remote moved what run A pushed, it reads the other listed
//! refs that carry the probe id ([`moved`]). Cleanup deletes, in one push,
//! only refs this probe created and only while they still point at what it
//! pushed; a ref moved by the remote is left, named.
//!
//! The journal (entries passed to `created`) holds every ref before it is
//! pushed, so cleanup knows it even if run A dies mid-push; a ref that turns
//! out not to exist (refused, or deleted on purpose) is retracted by a later
//! entry.

mod config;
mod moved;
mod objects;
mod owned;
mod pack;
mod plant;
mod recover;
mod refs;
mod refusal;
mod repo;
mod surface;
mod watch;

use super::{PlantOutcome, glob_match};
use refs::namespace;

use super::carrier::carriers;

use crate::escape;
use crate::fault::Fault;
use crate::git::Git;
use serde::{Deserialize, Serialize};
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
    let named =
        |stag| refs::ref_named(carrier, "000000000000", stag, &sample, None).unwrap_or_default();
    // (With a surface's tag, and without: 0.11.0's form.)
    let (outside, untagged) = (named("00000000"), named(""));
    if glob_match(pattern, &outside) || glob_match(pattern, &untagged) {
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
    /// Derived from the key and probe id, not reported by a plant: a
    /// content carrier's agreed ref that is not listed then contradicts no
    /// one (the plant may never have run), and the kernel, which knows no
    /// plant was confirmed, decides what finding nothing is worth.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    derived: bool,
}

impl super::Needle for Needle {}

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
