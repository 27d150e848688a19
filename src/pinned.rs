//! The config as committed: in GitHub Actions, the config file at
//! `GITHUB_WORKFLOW_SHA`, the commit GitHub ran the workflow at (for a
//! pull request its merge commit, whose diff reviewers see), never what an
//! earlier step of the job left in the work tree. An agent that edits
//! `.github/runwarden.yml` before runwarden runs could otherwise declare
//! every open channel and every coverage gap and make the run green.
//!
//! Read through the contents API with the job's token, else from the
//! checkout's own git objects, each one hashed again here, in this process
//! (an earlier step can write `.git` as well as the work tree, and put a
//! `git` of its own on PATH: an object whose content is not its name is
//! not taken, whoever handed it over). Outside Actions nothing changes. A config
//! the commit does not have (written by an earlier step) is no config: the
//! caller stops with exit 2, naming `--config-from-worktree`, the explicit
//! way to take the work tree's.

use crate::escape;
use crate::git::Git;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// Where a config came from, when it was pinned to a commit: what the
/// report and every output say of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pin {
    /// The commit (`GITHUB_WORKFLOW_SHA`).
    pub commit: String,
    /// Repo-relative.
    pub path: String,
    /// `api` (the contents API), `git` (the checkout's objects), or
    /// `worktree` (taken from the work tree on purpose:
    /// `--config-from-worktree`).
    pub via: String,
    /// The work tree's file differs from the commit's, and was not used.
    pub worktree_differs: bool,
}

/// What pinning made of a config file.
pub enum Pinned {
    /// Not in Actions, or no `GITHUB_WORKFLOW_SHA`: the work tree's, as
    /// ever.
    Unpinned,
    /// The text at the commit, and where it came from.
    At(String, Pin),
    /// Why the commit's config cannot be had (absent there, or neither
    /// route could read it): exit 2.
    Refused(String),
}

/// A full lowercase 40-hex commit id.
fn commit_id(s: &str) -> bool {
    crate::surface::lower_hex(s, 40)
}

/// `path` relative to the checkout `root`, in plain names only (no `..`
/// above the root, nothing outside it).
fn repo_relative(root: &Path, path: &Path) -> Option<String> {
    let abs = std::path::absolute(path).ok()?;
    let root = std::path::absolute(root).ok()?;
    let rel = abs.strip_prefix(&root).ok()?;
    let mut parts: Vec<String> = vec![];
    for c in rel.components() {
        match c {
            Component::Normal(n) => parts.push(n.to_str()?.to_string()),
            Component::CurDir => {}
            Component::ParentDir if !parts.is_empty() => {
                parts.pop();
            }
            _ => return None,
        }
    }
    let ok = !parts.is_empty()
        && parts.iter().all(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        });
    ok.then(|| parts.join("/"))
}

/// The commit the environment `var` pins configs to: in GitHub Actions,
/// `GITHUB_WORKFLOW_SHA`; `None` elsewhere (nothing is pinned).
pub fn commit(var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    if var("GITHUB_ACTIONS").as_deref() != Some("true") {
        return None;
    }
    var("GITHUB_WORKFLOW_SHA").filter(|s| commit_id(s))
}

/// Whether the pinned commit has the file `file`: how the default config
/// files are looked for in Actions (one an earlier step removed from the
/// work tree is still the config; one it wrote is not).
pub fn committed(file: &Path, var: &dyn Fn(&str) -> Option<String>) -> bool {
    let Some(sha) = commit(var) else {
        return false;
    };
    // An empty variable is none (the action's `github-token` input left
    // blank is an empty INPUT_GITHUB-TOKEN): never a token to send.
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    let root = workspace(&var);
    repo_relative(&root, file)
        .is_some_and(|rel| matches!(read_at(&var, &root, &rel, &sha), Ok(Some(_))))
}

/// The checkout: `GITHUB_WORKSPACE`, else the working directory.
fn workspace(var: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    var("GITHUB_WORKSPACE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default()
}

/// The config at `file` (whose work tree text is `worktree`; `None`: the
/// work tree has no such file) as the environment `var` pins it.
/// `from_worktree`: the operator took the work tree's on purpose.
pub fn pin(
    file: &Path,
    worktree: Option<&str>,
    var: &dyn Fn(&str) -> Option<String>,
    from_worktree: bool,
) -> Pinned {
    let Some(sha) = commit(var) else {
        return Pinned::Unpinned;
    };
    let var = |k: &str| var(k).filter(|v| !v.is_empty());
    let root = workspace(&var);
    let rel = repo_relative(&root, file);
    if from_worktree {
        return Pinned::At(
            worktree.unwrap_or_default().to_string(),
            Pin {
                commit: sha,
                path: rel.unwrap_or_else(|| file.to_string_lossy().into_owned()),
                via: "worktree".into(),
                worktree_differs: false,
            },
        );
    }
    let shown = escape::bytes(file.as_os_str().as_encoded_bytes());
    let flag = "--config-from-worktree (the action's `config-from-worktree: true`) takes the \
                work tree's on purpose";
    let Some(rel) = rel else {
        return Pinned::Refused(format!(
            "the config {shown} is not a file of the checkout (GITHUB_WORKSPACE), so it is not \
             the one committed at GITHUB_WORKFLOW_SHA {sha} but whatever an earlier step wrote; \
             {flag}"
        ));
    };
    let (text, via) = match read_at(&var, &root, &rel, &sha) {
        Ok(Some(found)) => found,
        Ok(None) => {
            return Pinned::Refused(format!(
                "the config {} is not in commit {sha} (GITHUB_WORKFLOW_SHA): an earlier step of \
                 this job wrote it, and runwarden takes the config as committed; {flag}",
                escape::bytes(rel.as_bytes())
            ));
        }
        Err(why) => {
            return Pinned::Refused(format!(
                "cannot read the config {} as committed at {sha} (GITHUB_WORKFLOW_SHA): {why}; \
                 {flag}",
                escape::bytes(rel.as_bytes())
            ));
        }
    };
    let differs = worktree != Some(text.as_str());
    Pinned::At(
        text,
        Pin {
            commit: sha,
            path: rel,
            via: via.into(),
            worktree_differs: differs,
        },
    )
}

/// The file `rel` at `sha`: through the API with the job's token, else
/// from the checkout's objects. `Ok(None)`: the commit has no such file
/// (as either route that could read the commit says).
fn read_at(
    var: &dyn Fn(&str) -> Option<String>,
    root: &Path,
    rel: &str,
    sha: &str,
) -> Result<Option<(String, &'static str)>, String> {
    let mut why = vec![];
    let repo = var("GITHUB_REPOSITORY");
    // (The action gets the job's token as its `github-token` input.)
    let token = ["GITHUB_TOKEN", "GH_TOKEN", "INPUT_GITHUB-TOKEN"]
        .iter()
        .find_map(|k| var(k).map(|t| (*k, t)));
    match (&repo, token) {
        (Some(repo), Some((source, token))) => {
            let base = var("GITHUB_API_URL").unwrap_or_else(|| "https://api.github.com".into());
            match crate::github::file_at(&base, repo, rel, sha, source, &token) {
                Ok(Some(t)) => return Ok(Some((t, "api"))),
                // (404 to a token that may read the repository: absent.
                // One that may not gets 404 too: the checkout decides.)
                Ok(None) => why.push("the API answered 404".to_string()),
                Err(e) => why.push(format!("through the API: {}", e.text())),
            }
        }
        _ => why.push("no GITHUB_TOKEN and GITHUB_REPOSITORY to ask the API with".into()),
    }
    match from_objects(root, rel, sha) {
        Ok(Some(t)) => Ok(Some((t, "git"))),
        Ok(None) => Ok(None),
        // The API's 404 stands when the checkout cannot say.
        Err(_) if why.iter().any(|w| w == "the API answered 404") => Ok(None),
        Err(e) => {
            why.push(format!("from the checkout: {e}"));
            Err(why.join("; "))
        }
    }
}

/// One object of the checkout, `(type, content)`, checked to hash to its
/// name.
fn object(git: &Git, root: &Path, id: &str) -> Result<(String, Vec<u8>), String> {
    let args: Vec<&OsStr> = ["cat-file", "--batch"].iter().map(OsStr::new).collect();
    let (o, out) = git.run(root, &args, &[], format!("{id}\n").as_bytes());
    if !o.success {
        return Err(format!("git cat-file: {}", o.reason()));
    }
    let nl = out
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("git cat-file gave no header")?;
    let head = String::from_utf8_lossy(&out[..nl]).to_string();
    let mut f = head.split(' ');
    let (name, kind, size) = (
        f.next(),
        f.next(),
        f.next().and_then(|s| s.parse::<usize>().ok()),
    );
    let (Some(name), Some(kind), Some(size)) = (name, kind, size) else {
        return Err(format!("the checkout has no object {id}"));
    };
    if name != id || out.len() < nl + 1 + size {
        return Err(format!("git cat-file gave a short answer for {id}"));
    }
    let body = out[nl + 1..nl + 1 + size].to_vec();
    // Its name is its hash, computed here: `.git` is the work tree's too,
    // and so may be the `git` on PATH (an earlier step can change PATH),
    // which could answer for its own check. Whatever git hands over, only
    // the object named `id` passes.
    use sha1::Digest as _;
    let mut h = sha1::Sha1::new();
    h.update(format!("{kind} {}\0", body.len()).as_bytes());
    h.update(&body);
    if crate::nonce::to_hex(&h.finalize()) != id {
        return Err(format!(
            "the checkout's object {id} does not hash to its name: it was changed"
        ));
    }
    Ok((kind.to_string(), body))
}

/// The id of the entry `name` in the tree `body` (git's binary tree:
/// `<mode> <name>\0<20-byte id>` each).
fn tree_entry(body: &[u8], name: &str) -> Option<String> {
    let mut rest = body;
    while !rest.is_empty() {
        let nul = rest.iter().position(|b| *b == 0)?;
        let (head, tail) = (&rest[..nul], &rest[nul + 1..]);
        if tail.len() < 20 {
            return None;
        }
        let entry = head.splitn(2, |b| *b == b' ').nth(1)?;
        if entry == name.as_bytes() {
            return Some(crate::nonce::to_hex(&tail[..20]));
        }
        rest = &tail[20..];
    }
    None
}

/// `rel` at commit `sha` from the checkout's objects: `Ok(None)` when the
/// commit's tree has no such file.
fn from_objects(root: &Path, rel: &str, sha: &str) -> Result<Option<String>, String> {
    let git = Git::new(vec![], None, Duration::from_secs(30), "");
    let (kind, commit) = object(&git, root, sha)?;
    if kind != "commit" {
        return Err(format!("{sha} is a {kind}, not a commit"));
    }
    let tree = commit
        .strip_prefix(b"tree ")
        .and_then(|t| t.get(..40))
        .map(|t| String::from_utf8_lossy(t).to_string())
        .filter(|t| commit_id(t))
        .ok_or("the commit names no tree")?;
    let mut id = tree;
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let (kind, body) = object(&git, root, &id)?;
        if kind != "tree" {
            return Ok(None);
        }
        match tree_entry(&body, part) {
            Some(next) => id = next,
            None => return Ok(None),
        }
        if i == parts.len() - 1 {
            let (kind, body) = object(&git, root, &id)?;
            if kind != "blob" {
                return Ok(None);
            }
            if body.len() > 1 << 20 {
                return Err("the committed config is over 1 MiB".into());
            }
            return String::from_utf8(body)
                .map(Some)
                .map_err(|_| "the committed config is not UTF-8".into());
        }
    }
    Ok(None)
}
