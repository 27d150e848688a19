//! Watch mode: the remote's refs from one `ls-remote` (the listing run B
//! starts from), and which carriers a change of them would carry.
//!
//! The refs are sorted in memory before they are streamed
//! ([`emit_sorted`]): ls-remote gives no order both snapshots could share.

use super::{GitRemote, Remote};
use crate::state::diff::{Before, Change, ChangeKind};
use crate::state::snapshot::{Sink, SnapshotError, component, emit_sorted, listed};

/// A new commit (an object id no ref named before) carries everything a
/// commit holds.
const COMMIT_CARRIERS: &[Remote] = &[
    Remote::CommitMessage,
    Remote::AuthorName,
    Remote::AuthorEmail,
    Remote::FileContent,
    Remote::FilePath,
];

impl GitRemote {
    /// The refs, from one `ls-remote`, sorted and streamed to `sink`.
    pub(super) fn snapshot_refs(&self, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
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
pub(super) fn carriers_of(c: &Change, before: &Before) -> Vec<Remote> {
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

/// The carrier a ref's name is: a branch, a tag (its peeled `^{}` line
/// says it is annotated), a note, any other ref.
fn name_carrier(name: &str) -> Remote {
    if name.starts_with("refs/heads/") {
        Remote::BranchName
    } else if name.starts_with("refs/tags/") && name.ends_with("^{}") {
        Remote::AnnotatedTagMessage
    } else if name.starts_with("refs/tags/") {
        Remote::TagName
    } else if name.starts_with("refs/notes/") {
        Remote::Notes
    } else {
        Remote::CustomRef
    }
}
