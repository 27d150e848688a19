//! Git as the runs use it: a fresh scratch repository per run (never the
//! user's checkout), every object of run A built by one `fast-import`,
//! pushes with leases and their porcelain report, ls-remote streamed.

use super::{IDENT_EMAIL, IDENT_NAME, Instance, RefUpdate, TRUST_FILE};
use crate::fault::Fault;
use crate::git;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;

/// One job's ref and object mark, before fast-import gives ids.
pub(super) type Planned = (Option<String>, Option<u32>);

/// A `git fast-import` stream under construction: all of run A's objects
/// are built by one git process instead of one per object.
pub(super) struct Stream {
    text: Vec<u8>,
    next: u32,
    time: u64,
}

impl Stream {
    pub(super) fn new() -> Stream {
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Stream {
            text: Vec::new(),
            next: 0,
            time,
        }
    }

    pub(super) fn mark(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    pub(super) fn line(&mut self, l: &str) {
        self.text.extend_from_slice(l.as_bytes());
        self.text.push(b'\n');
    }

    pub(super) fn data(&mut self, body: &str) {
        self.line(&format!("data {}", body.len()));
        self.line(body);
    }

    pub(super) fn blob(&mut self, content: &str) -> u32 {
        let m = self.mark();
        self.line("blob");
        self.line(&format!("mark :{m}"));
        self.data(content);
        m
    }

    /// A root commit holding `files` (path, blob mark). Each commit goes on
    /// a scratch ref of its own: a commit with no `from` on a new ref has
    /// no parent.
    pub(super) fn commit(
        &mut self,
        author: &(String, String),
        message: &str,
        files: &[(&str, u32)],
    ) -> u32 {
        let m = self.mark();
        let t = self.time;
        self.line(&format!("commit refs/runwarden-build/{m}"));
        self.line(&format!("mark :{m}"));
        self.line(&format!("author {} <{}> {t} +0000", author.0, author.1));
        self.line(&format!("committer {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000"));
        self.data(message);
        for (path, blob) in files {
            self.line(&format!("M 100644 :{blob} {path}"));
        }
        self.line("");
        m
    }

    pub(super) fn tag(&mut self, name: &str, target: u32, message: &str) -> u32 {
        let m = self.mark();
        let t = self.time;
        self.line(&format!("tag {name}"));
        self.line(&format!("mark :{m}"));
        self.line(&format!("from :{target}"));
        self.line(&format!("tagger {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000"));
        self.data(message);
        m
    }

    /// A notes commit whose tree notes `target` with `note`.
    pub(super) fn note(&mut self, target: u32, note: &str) -> u32 {
        let m = self.mark();
        let t = self.time;
        self.line(&format!("commit refs/runwarden-build/notes-{m}"));
        self.line(&format!("mark :{m}"));
        self.line(&format!("committer {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000"));
        self.data("Notes added by runwarden");
        self.line(&format!("N inline :{target}"));
        self.data(note);
        self.line("");
        m
    }
}

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

impl Instance {
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
        let url = self.s.url.as_str();
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
        let ls = self.remote_stream(dir, &["ls-remote".into(), self.s.url.clone()], |line| {
            let l = String::from_utf8_lossy(line);
            if let Some((sha, name)) = l.split_once('\t')
                && keep(name)
            {
                refs.insert(name.to_string(), sha.to_string());
            }
        });
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

    /// Runs one `git fast-import` over `stream` and returns each mark's
    /// object id; `Broken` when git fails.
    pub(super) fn fast_import(
        &self,
        dir: &Path,
        stream: &Stream,
    ) -> Result<HashMap<u32, String>, Fault> {
        let marks = dir.join("runwarden-marks");
        let args = vec![
            "fast-import".to_string(),
            "--quiet".into(),
            format!("--export-marks={}", marks.display()),
        ];
        let (out, _) = self.git.run(dir, &os(&args), &[], &stream.text);
        if !out.success {
            return Err(Fault::broken(format!(
                "git fast-import failed: {}",
                out.reason()
            )));
        }
        let text = std::fs::read_to_string(&marks)
            .map_err(|e| Fault::broken(format!("fast-import marks: {e}")))?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let (m, sha) = l.strip_prefix(':')?.split_once(' ')?;
                Some((m.parse().ok()?, sha.to_string()))
            })
            .collect())
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
        args.push(self.s.url.clone());
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
