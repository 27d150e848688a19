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

    /// A path as a repo-relative, percent-encoded uri of an existing file.
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
        if rel.as_os_str().is_empty() || !abs.is_file() {
            return None;
        }
        let parts: Vec<String> = rel
            .components()
            .map(|c| encode(&c.as_os_str().to_string_lossy()))
            .collect();
        Some(parts.join("/"))
    }

    /// Where a result points when its surface has no config entry in the
    /// repository (a discovered config): the step of the workflow file
    /// that runs runwarden, else the first line of a real file at the
    /// repository root.
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
        let mut names: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        names.sort();
        let preferred = ["README.md", "README", "readme.md"];
        let pick = preferred
            .iter()
            .map(|n| self.root.join(n))
            .find(|p| p.is_file())
            .or_else(|| names.into_iter().next())?;
        Some((self.uri(&pick.to_string_lossy())?, 1, 1))
    }

    pub fn location(&self, f: &Finding) -> Option<(String, u64, u64)> {
        f.location
            .as_ref()
            .and_then(|l| Some((self.uri(&l.path)?, l.line, l.column)))
            .or_else(|| self.fallback())
    }
}

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

/// Percent-encodes one path segment for a uri (RFC 3986 unreserved and a
/// few sub-delimiters stay as they are).
fn encode(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'.'
            | b'_'
            | b'~'
            | b'+'
            | b'='
            | b'@' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub fn decode(seg: &str) -> String {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&seg[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_encoded_and_decoded() {
        assert_eq!(encode("a b#c"), "a%20b%23c");
        assert_eq!(decode("a%20b%23c"), "a b#c");
    }
}
