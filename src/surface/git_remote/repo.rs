//! Git as the runs use it: a fresh scratch repository per run (never the
//! user's checkout), pushes with leases and their porcelain report,
//! ls-remote streamed.

use super::{GitRemote, RefUpdate, TRUST_FILE};
use crate::fault::Fault;
use crate::git;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;

/// A push's per-ref results from `--porcelain`: ref -> (flag, summary).
pub(super) fn porcelain(stdout: &[u8]) -> HashMap<String, (char, String)> {
    let mut out = HashMap::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(flag), Some(refs), summary) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Some(flag) = flag.chars().next() else {
            continue;
        };
        if let Some((_, dst)) = refs.rsplit_once(':') {
            // The reason is the server's words: redacted before it is kept.
            let summary = crate::redact::text(summary.unwrap_or(""));
            out.insert(dst.to_string(), (flag, summary));
        }
    }
    out
}

/// Makes `dir` an empty bare repository by writing what git looks for
/// (`HEAD`, `objects/`, `refs/`, a config saying `bare`), as `git init
/// --bare` would, minus the sample hooks and description.
///
/// Why not `git init`: every run makes one, and a git process is a few
/// milliseconds of a probe whose whole budget is a dozen of them. Git
/// recognises any directory with these entries as a repository and makes
/// `objects/pack` and the rest on first use.
pub(super) fn bare_repository(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("objects"))?;
    std::fs::create_dir_all(dir.join("refs"))?;
    std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(
        dir.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n",
    )
}

/// The arguments as the `OsStr` list [`Git`] takes.
///
/// [`Git`]: crate::git::Git
pub(super) fn os(args: &[String]) -> Vec<&OsStr> {
    args.iter().map(OsStr::new).collect()
}

impl GitRemote {
    /// A fresh, empty bare repository in the run's TMPDIR (removed on
    /// drop): runs never touch the user's checkout. `Broken` when it
    /// cannot be made.
    pub(super) fn scratch(&self) -> Result<tempfile::TempDir, Fault> {
        let w = tempfile::Builder::new()
            .prefix("runwarden-git-")
            .tempdir()
            .map_err(|e| Fault::broken(format!("scratch repository: {e}")))?;
        self.init(w.path())?;
        // A remote on this machine owned by another user (run B as another
        // uid, a shared runner directory) trips git's `safe.directory`
        // check: a client-side safety rule, not the surface's access
        // control, so a run trusts exactly that one repository. It has to
        // be a global config file: git drops command-line and environment
        // config when it starts upload-pack in the other repository.
        if let Some(path) = self.local_path() {
            let quoted = path.replace('\\', "\\\\").replace('"', "\\\"");
            std::fs::write(
                w.path().join(TRUST_FILE),
                format!("[safe]\n\tdirectory = \"{quoted}\"\n"),
            )
            .map_err(|e| Fault::broken(format!("scratch repository: {e}")))?;
        }
        Ok(w)
    }

    /// The repository path of a remote on this machine (a path or file://).
    pub(super) fn local_path(&self) -> Option<&str> {
        let url = self.settings.url.as_str();
        url.strip_prefix("file://")
            .or_else(|| url.starts_with('/').then_some(url))
    }

    /// Environment for git that talks to the remote: the trust file of a
    /// local remote as the (otherwise empty) global config.
    pub(super) fn remote_env(&self, dir: &Path) -> Option<String> {
        self.local_path()
            .map(|_| dir.join(TRUST_FILE).to_string_lossy().into_owned())
    }

    pub(super) fn remote_run(&self, dir: &Path, args: &[String]) -> (git::Outcome, Vec<u8>) {
        let global = self.remote_env(dir);
        let envs: Vec<(&str, &str)> = global
            .iter()
            .map(|g| ("GIT_CONFIG_GLOBAL", g.as_str()))
            .collect();
        self.git.run(dir, &os(args), &envs, b"")
    }

    /// One streamed `ls-remote`: the refs `keep` picks, name to object id
    /// (memory holds only those). `Broken` when git fails.
    pub(super) fn ls_refs(
        &self,
        dir: &Path,
        keep: impl Fn(&str) -> bool,
    ) -> Result<HashMap<String, String>, Fault> {
        let mut refs = HashMap::new();
        let ls = self.remote_stream(
            dir,
            &["ls-remote".into(), self.settings.url.clone()],
            |line| {
                let l = String::from_utf8_lossy(line);
                if let Some((sha, name)) = l.split_once('\t')
                    && keep(name)
                {
                    refs.insert(name.to_string(), sha.to_string());
                }
            },
        );
        if ls.success {
            Ok(refs)
        } else {
            Err(Fault::broken(format!("ls-remote failed: {}", ls.reason())))
        }
    }

    pub(super) fn remote_stream(
        &self,
        dir: &Path,
        args: &[String],
        line: impl FnMut(&[u8]),
    ) -> git::Outcome {
        let global = self.remote_env(dir);
        let envs: Vec<(&str, &str)> = global
            .iter()
            .map(|g| ("GIT_CONFIG_GLOBAL", g.as_str()))
            .collect();
        self.git.stream(dir, &os(args), &envs, b"", line)
    }

    pub(super) fn init(&self, dir: &Path) -> Result<(), Fault> {
        bare_repository(dir).map_err(|e| Fault::broken(format!("scratch repository: {e}")))
    }

    /// One push; returns per-ref results, or the whole push's failure
    /// (`Broken`, git's words: whether the remote refused it is for the
    /// caller to read).
    pub(super) fn push(
        &self,
        dir: &Path,
        updates: &[RefUpdate],
    ) -> Result<HashMap<String, (char, String)>, Fault> {
        let mut args: Vec<String> = vec!["push".into(), "--porcelain".into(), "--no-verify".into()];
        for u in updates {
            args.push(format!(
                "--force-with-lease={}:{}",
                u.dst,
                u.expect.as_deref().unwrap_or("")
            ));
        }
        args.push(self.settings.url.clone());
        for u in updates {
            args.push(format!("{}:{}", u.src, u.dst));
        }
        let (out, stdout) = self.remote_run(dir, &args);
        let results = porcelain(&stdout);
        if results.is_empty() && !out.success {
            return Err(Fault::broken(out.reason()));
        }
        Ok(results)
    }
}
