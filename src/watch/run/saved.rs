//! A watch saved by one process and finished by another: the action's
//! watch step and its post step, or `watch --start` and `--finish`.
//!
//! Everything saved is in the work directory, which the watched steps can
//! write. So the saved watch holds the config's text (the post step does
//! not read a config the steps could have edited) and each first
//! snapshot's SHA-256, and the process that saves it hands back a token,
//! `sha256:<hex>:<dir>`, whose hex is the SHA-256 of the saved watch. The
//! token goes where the steps cannot change it (the runner's
//! `$GITHUB_STATE`), and nothing is believed that does not match it.

use super::{First, Inst, Watch, WorkDir, before_path, ctx_of, open_surface, shown};
use crate::fault::Fault;
use crate::plan::{ConfigSource, Plan};
use crate::state::snapshot::SnapshotError;
use crate::timefmt;
use crate::watch::canary::{self, Armed, Detector, Spec};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The file in the work directory a saved watch is resumed from.
pub(super) const SAVED: &str = "watch.json";

#[derive(Serialize, Deserialize)]
struct Saved {
    probe_id: String,
    started_at: String,
    command_started_at: String,
    config_text: String,
    config_source: ConfigSource,
    /// The work directory's device and inode.
    dir_id: (u64, u64),
    /// Each surface's first snapshot: its SHA-256, or why there is none.
    firsts: Vec<Result<String, SnapshotError>>,
    /// When the first snapshots began (Unix seconds).
    since: i64,
    /// Each surface's settings as the watch step read them (SHA-256): the
    /// post step reads its environment again, which the steps between can
    /// change (`$GITHUB_ENV`).
    settings: Vec<String>,
    canaries: Option<canary::Saved>,
    arm_failure: Option<String>,
    specs: Vec<(String, PathBuf)>,
}

fn settings_digests(plan: &Plan) -> Vec<String> {
    plan.surfaces
        .iter()
        .map(|sp| sha256_hex(sp.settings.to_string().as_bytes()))
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::state::snapshot::hex({
        let mut h = Sha256::new();
        h.update(bytes);
        h
    })
}

impl Watch<'_> {
    /// Saves the watch for another process to finish ([`load`]); its
    /// token. `config_text` is the text the plan was built from. Only an
    /// atime watch of the canaries outlives this process: any other
    /// detector's canaries are removed here, and the saved watch has none.
    /// `Broken` when it cannot be written; `Unsupported` when its directory
    /// cannot be named in a token.
    pub fn save(mut self, config_text: &str) -> Result<String, Fault> {
        let firsts = self
            .insts
            .iter()
            .map(|i| {
                i.first
                    .as_ref()
                    .map(|f| f.digest.clone())
                    .map_err(Clone::clone)
            })
            .collect();
        let since = self
            .insts
            .iter()
            .filter_map(|i| i.first.as_ref().ok())
            .map(|f| f.since)
            .min()
            .unwrap_or_else(|| crate::sys::now_coarse().0);
        let canaries = match self.armed.take() {
            Some(a) if a.detector() == Detector::Atime => a.save(),
            Some(a) => {
                let _ = a.disarm();
                None
            }
            None => None,
        };
        let meta = std::fs::metadata(&self.work.path).map_err(|e| Fault::broken(e.to_string()))?;
        let saved = Saved {
            probe_id: self.probe_id.clone(),
            started_at: self.started_at.clone(),
            command_started_at: timefmt::now_rfc3339(),
            config_text: config_text.to_string(),
            config_source: self.plan.source.clone(),
            dir_id: (meta.dev(), meta.ino()),
            firsts,
            since,
            settings: settings_digests(self.plan),
            canaries,
            arm_failure: self.arm_failure.clone(),
            specs: self
                .specs
                .iter()
                .map(|s| (s.kind.as_str().to_string(), s.path.clone()))
                .collect(),
        };
        let text = serde_json::to_vec(&saved).map_err(|e| Fault::broken(e.to_string()))?;
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(self.work.path.join(SAVED))
                .and_then(|mut f| f.write_all(&text).and_then(|()| f.sync_all()))
                .map_err(|e| Fault::broken(format!("cannot save the watch: {e}")))?;
        }
        self.work.keep = true;
        let dir = self
            .work
            .path
            .to_str()
            .ok_or_else(|| Fault::unsupported("the watch's directory is not UTF-8"))?;
        Ok(format!("sha256:{}:{dir}", sha256_hex(&text)))
    }
}

/// A saved watch, read back and checked against its token: the config it
/// started with, for the caller to build the plan from.
pub struct Resumed {
    pub config_text: String,
    pub config_source: ConfigSource,
    saved: Saved,
    dir: PathBuf,
}

/// Reads the watch a token names; it must be the one saved. `Invalid`: a
/// token that is not one, or a saved watch that is not the one it names;
/// `Broken`: it cannot be read.
pub fn load(token: &str) -> Result<Resumed, Fault> {
    let bad = || {
        Fault::invalid(
            "not a watch token (`sha256:<hex>:<directory>`, as `watch --start` prints it)",
        )
    };
    let rest = token.strip_prefix("sha256:").ok_or_else(bad)?;
    let (hex, dir) = rest.split_once(':').ok_or_else(bad)?;
    if hex.len() != 64 || dir.is_empty() {
        return Err(bad());
    }
    let dir = PathBuf::from(dir);
    // At most 16 MiB (a saved watch is a few KiB), read from a regular
    // file only: the directory is one the watched steps could write.
    let mut text = Vec::new();
    crate::sys::open_regular(&dir.join(SAVED))
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 16 << 20), &mut text))
        .map_err(|e| Fault::broken(format!("no saved watch in {}: {e}", shown(&dir))))?;
    if sha256_hex(&text) != hex {
        return Err(Fault::invalid(format!(
            "the saved watch in {} is not the one the token names: it was changed, and nothing in it can be trusted (its canaries, if any, are left where they are)",
            shown(&dir)
        )));
    }
    let saved: Saved = serde_json::from_slice(&text).map_err(|e| {
        Fault::invalid(format!(
            "the saved watch in {} is unreadable: {e}",
            shown(&dir)
        ))
    })?;
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| Fault::broken(e.to_string()))?;
    if !meta.is_dir() || (meta.dev(), meta.ino()) != saved.dir_id {
        return Err(Fault::invalid(format!(
            "{} is not the directory the watch was saved in",
            shown(&dir)
        )));
    }
    Ok(Resumed {
        config_text: saved.config_text.clone(),
        config_source: saved.config_source.clone(),
        saved,
        dir,
    })
}

impl Resumed {
    /// The watch, to finish with the plan built from `config_text`
    /// (`Invalid` when it is not that plan's).
    pub fn watch(self, plan: &Plan) -> Result<Watch<'_>, Fault> {
        let s = self.saved;
        let names: Vec<(String, String)> = plan
            .surfaces
            .iter()
            .map(|p| (p.name.clone(), p.type_name.to_string()))
            .collect();
        if s.firsts.len() != names.len() {
            return Err(Fault::invalid(
                "the plan is not the one the watch was saved with",
            ));
        }
        let work = WorkDir::new(self.dir);
        let ctx = ctx_of(&work.path)?;
        let now = settings_digests(plan);
        let mut insts = Vec::new();
        for (i, (sp, first)) in plan.surfaces.iter().zip(s.firsts).enumerate() {
            let first = match s.settings.get(i) {
                Some(d) if *d == now[i] => first,
                _ => Err(SnapshotError::Failed(
                    "its settings differ from the watch step's: an environment variable they are read from changed since (through $GITHUB_ENV?)"
                        .into(),
                )),
            };
            let surface = open_surface(sp);
            let first = first.map(|digest| First {
                path: before_path(&work.path, i),
                since: s.since,
                digest,
            });
            insts.push(Inst { surface, first });
        }
        let specs = s
            .specs
            .into_iter()
            .filter_map(|(k, path)| {
                Some(Spec {
                    kind: canary::Kind::from_name(&k)?,
                    path,
                })
            })
            .collect();
        Ok(Watch {
            plan,
            work,
            scope: "job",
            ctx,
            insts,
            armed: s.canaries.map(Armed::resume),
            arm_failure: s.arm_failure,
            specs,
            probe_id: s.probe_id,
            started_at: s.started_at,
            command_started_at: s.command_started_at,
        })
    }

    /// Gives the watch up (the plan could not be built): its canaries are
    /// removed and its directory emptied of runwarden's files; what could
    /// not be removed, with why.
    pub fn abandon(self) -> Vec<(PathBuf, String)> {
        let _work = WorkDir::new(self.dir);
        self.saved
            .canaries
            .map(|c| Armed::resume(c).disarm())
            .unwrap_or_default()
    }
}
