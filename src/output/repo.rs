//! The repository a report is about, for outputs that point into it (SARIF,
//! annotations): repo-relative uris of real files, and where results point
//! when there is no config file.

use crate::report::{Finding, Report};
use std::path::{Path, PathBuf};

/// What outputs for GitHub need beyond the report: where the repository
/// is (locations are repo-relative), and how this run is named.
#[derive(Debug, Clone)]
pub struct Context {
    /// The repository root: uris are relative to it, and the files they
    /// name are read for line fingerprints.
    pub root: PathBuf,
    /// The directory relative config paths are relative to.
    pub cwd: PathBuf,
    /// `automationDetails.id`: `category/run-id`.
    pub automation_id: String,
    /// The running workflow's file (from `GITHUB_WORKFLOW_REF`), where
    /// results of a discovered config (no config file) point.
    pub workflow: Option<String>,
}

impl Context {
    /// From the environment: `GITHUB_WORKSPACE` (else the working
    /// directory), `GITHUB_RUN_ID`/`GITHUB_RUN_ATTEMPT` (else the probe id)
    /// and `GITHUB_WORKFLOW_REF`.
    pub fn from_env(report: &Report) -> Context {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        let root = var("GITHUB_WORKSPACE")
            .map(PathBuf::from)
            .unwrap_or_else(|| cwd.clone());
        let run = match (var("GITHUB_RUN_ID"), var("GITHUB_RUN_ATTEMPT")) {
            (Some(id), Some(attempt)) => format!("{id}-{attempt}"),
            (Some(id), None) => id,
            _ => report.probe_id.clone(),
        };
        // owner/repo/.github/workflows/ci.yml@refs/heads/main
        let workflow = var("GITHUB_WORKFLOW_REF").and_then(|r| {
            let path = r.split('@').next()?;
            let mut parts = path.splitn(3, '/');
            let (_, _, file) = (parts.next()?, parts.next()?, parts.next()?);
            Some(file.to_string())
        });
        Context {
            root,
            cwd,
            automation_id: format!("{}/{run}", default_category(report)),
            workflow,
        }
    }

    /// Puts the SARIF in code scanning category `category`: the
    /// `automationDetails.id` becomes `category/<run>`.
    pub fn set_category(&mut self, category: &str) {
        let run = self
            .automation_id
            .rsplit_once('/')
            .map(|(_, r)| r.to_string())
            .unwrap_or_default();
        self.automation_id = format!("{}/{run}", category.trim_end_matches('/'));
    }

    /// A path as a repo-relative, percent-encoded uri of an existing file
    /// of the checkout: a regular file, reached from the root through
    /// plain names only (a `..` back over one of them is allowed). A location comes from a report that may have
    /// been made in another job (`publish` relays it), so `..`, a symlink
    /// on the way or a path outside the root is no file of the checkout
    /// (the file system would resolve `..` and symlinks to another file,
    /// and answer whether it exists on the publishing runner).
    pub fn uri(&self, path: &str) -> Option<String> {
        let p = Path::new(path);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cwd.join(p)
        };
        let abs = std::path::absolute(&abs).ok()?;
        let root = std::path::absolute(&self.root).ok()?;
        let rel = abs.strip_prefix(&root).ok()?;
        let mut parts = Vec::new();
        let mut at = root.clone();
        for c in rel.components() {
            match c {
                std::path::Component::Normal(name) => {
                    at.push(name);
                    // Never through a symlink: each step is looked at
                    // without following it.
                    let meta = std::fs::symlink_metadata(&at).ok()?;
                    if meta.file_type().is_symlink() {
                        return None;
                    }
                    parts.push(encode(&name.to_string_lossy()));
                }
                std::path::Component::CurDir => {}
                // Back one plain name, never above the root: with no
                // symlink on the way, that is where the file system goes.
                std::path::Component::ParentDir if !parts.is_empty() => {
                    parts.pop();
                    at.pop();
                }
                _ => return None,
            }
        }
        let meta = std::fs::symlink_metadata(&at).ok()?;
        if parts.is_empty() || !meta.file_type().is_file() {
            return None;
        }
        Some(parts.join("/"))
    }

    /// Where a result points when its surface has no config entry in the
    /// repository (a discovered config): the step of the workflow file
    /// that runs runwarden, else the first line of the repository's
    /// README. Never any other file at the root: that may be one runwarden
    /// itself is writing (an output's `.runwarden-XXXXXX` before its
    /// rename), or one that comes and goes between runs.
    fn fallback(&self) -> Option<(String, u64, u64)> {
        if let Some(w) = self.workflow.as_deref()
            && let Some(uri) = self.uri(&self.root.join(w).to_string_lossy())
        {
            // The step: the first line that runs runwarden (`uses:
            // runwarden/action…` or a `run:` of the binary), else line 1.
            let line = std::fs::read_to_string(self.root.join(w))
                .ok()
                .and_then(|t| t.lines().position(|l| l.contains("runwarden")))
                .map(|i| i as u64 + 1)
                .unwrap_or(1);
            return Some((uri, line, 1));
        }
        ["README.md", "README", "readme.md"]
            .iter()
            .map(|n| self.root.join(n))
            .find(|p| p.is_file())
            .and_then(|p| Some((self.uri(&p.to_string_lossy())?, 1, 1)))
    }

    /// Where a SARIF result points: [`Context::location`], else
    /// [`PSEUDO_LOCATION`]. A SARIF result needs a location (one without
    /// fails the whole upload), and leaving a finding out would make code
    /// scanning take its absence for a fix.
    pub fn sarif_location(&self, f: &Finding) -> (String, u64, u64) {
        self.location(f)
            .unwrap_or_else(|| (PSEUDO_LOCATION.to_string(), 1, 1))
    }

    pub fn location(&self, f: &Finding) -> Option<(String, u64, u64)> {
        f.location
            .as_ref()
            .and_then(|l| Some((self.uri(&l.path)?, l.line, l.column)))
            .or_else(|| self.fallback())
    }
}

/// Where SARIF results point when nothing in the checkout can be pointed
/// at (outside a repository, no workflow file, no README): the path a
/// config would have, the same on every run so that alerts stay matched.
/// It is repo-relative and not empty, as code scanning requires; when no
/// such file exists there is no source line to show.
pub const PSEUDO_LOCATION: &str = ".github/runwarden.yml";

/// The code scanning category of a report: `runwarden`, and for a report
/// with a label (one runner of a fleet) `runwarden/<label>`, so that the
/// uploads of a matrix do not replace each other's.
pub fn default_category(report: &Report) -> String {
    match &report.label {
        Some(l) => {
            let l: String = l
                .chars()
                .map(|c| match c {
                    'A'..='Z' | 'a'..='z' | '0'..='9' | '-' | '_' | '.' => c,
                    _ => '-',
                })
                .collect();
            format!("runwarden/{l}")
        }
        None => "runwarden".into(),
    }
}

/// What a uri segment keeps as it is: RFC 3986 unreserved characters and a
/// few sub-delimiters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'+')
    .remove(b'=')
    .remove(b'@');

/// Percent-encodes one path segment for a uri.
fn encode(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_encoded_and_decoded() {
        assert_eq!(encode("a b#c"), "a%20b%23c");
        assert_eq!(crate::wire::percent_decode("a%20b%23c"), "a b#c");
    }
}
