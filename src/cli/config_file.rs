//! The config file: read bounded, never through a symlink, and in GitHub
//! Actions taken as committed at `GITHUB_WORKFLOW_SHA` unless
//! `--config-from-worktree` says otherwise ([`crate::pinned`]).

use super::{Failure, Found, error};
use crate::escape;
use crate::plan::ConfigSource;
use std::path::{Path, PathBuf};

/// `--config-from-worktree`.
static FROM_WORKTREE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether configs are pinned here: in GitHub Actions with
/// `GITHUB_WORKFLOW_SHA`, unless `--config-from-worktree`.
pub(super) fn pinning() -> bool {
    let env = |k: &str| std::env::var(k).ok();
    !FROM_WORKTREE.load(std::sync::atomic::Ordering::Relaxed)
        && crate::pinned::commit(&env).is_some()
}

/// Whether the default config file `p` is there: in the work tree, or,
/// pinned, in the commit (one an earlier step removed is still the
/// config).
pub(super) fn default_there(p: &Path) -> bool {
    let env = |k: &str| std::env::var(k).ok();
    p.is_file() || (pinning() && crate::pinned::committed(p, &env))
}

/// `--config-from-worktree`, as the action's input sets it.
pub(crate) fn set_config_from_worktree() {
    FROM_WORKTREE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Says on stderr where a pinned config came from, when that is news: a
/// work tree that differs from the commit, or the work tree's taken on
/// purpose.
fn pinned_note(pin: &crate::pinned::Pin) {
    let shown = escape::bytes(pin.path.as_bytes());
    if pin.via == "worktree" {
        error(&format!(
            "warning: the config {shown} is the work tree's (--config-from-worktree), not as committed at {}: an earlier step of this job could have written it",
            pin.commit
        ));
    } else if pin.worktree_differs {
        error(&format!(
            "warning: the work tree's {shown} is not the config committed at {} (GITHUB_WORKFLOW_SHA), which is the one used",
            pin.commit
        ));
    }
}

/// The most a config file may hold: a config of a hundred surfaces is a
/// few dozen KiB.
const MAX_CONFIG: u64 = 1 << 20;

/// A config file's text: a regular file (never a FIFO, which would block,
/// nor a device such as `/dev/zero`, which never ends), not through a
/// symlink (the config sits in the work tree: a link could name any file
/// this run can read, and a parse error quotes it), at most
/// [`MAX_CONFIG`] bytes, UTF-8.
pub(crate) fn read_config(p: &std::path::Path) -> std::io::Result<String> {
    let bytes = crate::sys::read_regular(p, MAX_CONFIG).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            std::io::Error::other(
                "it is a symlink, which runwarden does not follow; name the file itself",
            )
        } else {
            e
        }
    })?;
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("not UTF-8"))
}

/// The config file `p` (`from_env`: named by `$RUNWARDEN_CONFIG`) and its
/// source: the committed text in Actions, else the file's.
pub(super) fn read(p: &Path, from_env: bool) -> Result<(String, ConfigSource), Failure> {
    let env = |k: &str| std::env::var(k).ok();
    let from_worktree = FROM_WORKTREE.load(std::sync::atomic::Ordering::Relaxed);
    let text = match read_config(p) {
        Ok(t) => Some(t),
        // Pinned, a file the work tree lacks is still the commit's.
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                && !from_worktree
                && crate::pinned::commit(&env).is_some() =>
        {
            None
        }
        Err(e) => {
            let via = if from_env {
                " (named by $RUNWARDEN_CONFIG)"
            } else {
                ""
            };
            let near = if e.kind() == std::io::ErrorKind::NotFound {
                near_file(p)
            } else {
                String::new()
            };
            return Err(Failure::Other(format!(
                "cannot read config {}{via}: {e}{near}",
                p.display()
            )));
        }
    };
    let (text, pinned) = match crate::pinned::pin(p, text.as_deref(), &env, from_worktree) {
        crate::pinned::Pinned::Unpinned => (text.unwrap_or_default(), None),
        crate::pinned::Pinned::At(text, pin) => {
            pinned_note(&pin);
            (text, Some(pin))
        }
        crate::pinned::Pinned::Refused(why) => {
            // (A name the work tree lacks may be a typo of one it has.)
            let near = if text.is_none() {
                near_file(p)
            } else {
                String::new()
            };
            return Err(Failure::Other(format!("{why}{near}")));
        }
    };
    Ok((
        text,
        ConfigSource {
            path: Some(p.to_string_lossy().into_owned()),
            embedded_default: false,
            discovered: None,
            pinned,
        },
    ))
}

/// Where the config comes from: `--config`, else `$RUNWARDEN_CONFIG` (not
/// when pinned), else the default files, else discovery.
pub(super) fn find_config(explicit: Option<&Path>) -> Found {
    if let Some(p) = explicit {
        return Found::File(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("RUNWARDEN_CONFIG").filter(|p| !p.is_empty()) {
        // Pinned, an earlier step could name any committed file through
        // GITHUB_ENV: the workflow's own `--config` (the action's input)
        // names the config there.
        if !pinning() {
            return Found::FromEnv(PathBuf::from(p));
        }
        error(
            "warning: $RUNWARDEN_CONFIG is ignored in GitHub Actions (an earlier step can set it through GITHUB_ENV): give the action's `config` input, or --config",
        );
    }
    for p in [".github/runwarden.yml", "runwarden.yml"] {
        if default_there(Path::new(p)) {
            return Found::File(PathBuf::from(p));
        }
    }
    Found::Embedded
}

/// ` (did you mean <file>?)` for a file beside the missing `p` whose name
/// is a typo away (`runwarden.yaml` for `runwarden.yml`), else empty.
fn near_file(p: &Path) -> String {
    let (Some(dir), Some(name)) = (p.parent(), p.file_name().and_then(|n| n.to_str())) else {
        return String::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(list) = std::fs::read_dir(dir) else {
        return String::new();
    };
    list.flatten()
        .take(1_000)
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .map(|n| (strsim::levenshtein(&n, name), n))
        .filter(|(d, _)| (1..=2).contains(d))
        .min()
        .map(|(_, n)| {
            format!(
                " (did you mean {}?)",
                escape::bytes(dir.join(n).as_os_str().as_encoded_bytes())
            )
        })
        .unwrap_or_default()
}
