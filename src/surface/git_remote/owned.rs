//! Ownership: which refs are runwarden's (the rule itself is the type's
//! `owns`). A journal entry is this probe's only when its ref has a form
//! only [`ref_for`] gives this probe id (a valid ref name, no `..`, under
//! runwarden's own names or with `runwarden-<probe id>-<leaf>` as the
//! component a declared scope placed) and a full object id, and (with a
//! configured key) its tag, a MAC over the ref and the object run A pushed,
//! verifies. Cleanup by probe id has
//! no journal: the refs it finds under the derived names are fetched and
//! their objects read first, and only a commit or tag runwarden's plant
//! writes (its identity, a root commit, its message) is taken for a plant.
//!
//! [`ref_for`]: super::refs::ref_for

use super::repo::os;
use super::{GitRemote, IDENT_EMAIL, IDENT_NAME, Remote};
use crate::fault::Fault;
use crate::surface::{RunCtx, lower_hex};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Content carriers, whose ref ends in the carrier's own name.
const CONTENT: [Remote; 7] = [
    Remote::CommitMessage,
    Remote::AuthorName,
    Remote::AuthorEmail,
    Remote::FileContent,
    Remote::FilePath,
    Remote::AnnotatedTagMessage,
    Remote::Notes,
];

/// The leaf of a ref this probe's plant makes, if `r` is one.
pub(super) fn planted_leaf(r: &str, ctx: &RunCtx<'_>) -> bool {
    let probe = ctx.probe_id;
    // A name without a nonce ends in this surface's tag (none for a run
    // bound to no surface: 0.11.0's form, which the kernel asks about
    // apart); the leaf without it.
    let stag = ctx.surface_tag();
    let untagged = |leaf: &str| -> Option<String> {
        match stag.as_str() {
            "" => Some(leaf.to_string()),
            t => leaf
                .strip_suffix(t)
                .and_then(|l| l.strip_suffix('-'))
                .map(str::to_string),
        }
    };
    let heads = format!("refs/heads/runwarden/{probe}/");
    if let Some(leaf) = r.strip_prefix(&heads) {
        return lower_hex(leaf, 32)
            || leaf
                .strip_prefix("deleted-")
                .is_some_and(|h| lower_hex(h, 32))
            || CONTENT
                .iter()
                .any(|c| untagged(leaf).as_deref() == Some(c.name()));
    }
    if let Some(leaf) = r.strip_prefix(&format!("refs/tags/runwarden-{probe}-")) {
        return lower_hex(leaf, 32) || untagged(leaf).as_deref() == Some("annotated");
    }
    if let Some(leaf) = r.strip_prefix(&format!("refs/runwarden/{probe}/")) {
        return lower_hex(leaf, 32);
    }
    if untagged(r) == Some(format!("refs/notes/runwarden-{probe}")) {
        return true;
    }
    // Inside a declared `refs:` scope: the pattern's `*` became
    // `runwarden-<probe>-<nonce or carrier[-tag]>`, with the pattern's own
    // text around it (`refs/heads/memory-*`, `…/*-x`).
    let marker = format!("runwarden-{probe}-");
    r.match_indices(&marker).any(|(i, _)| {
        let leaf = &r[i + marker.len()..];
        leaf.get(..32).is_some_and(|h| lower_hex(h, 32))
            || CONTENT.iter().any(|c| leaf.starts_with(c.name()))
    })
}

/// The tag of a journal entry: a MAC under the run's key over the ref and
/// the object run A pushed to it (or found there and read back).
pub(super) fn tag(ctx: &RunCtx<'_>, refname: &str, sha: &str) -> String {
    ctx.key
        .name_tag(ctx.probe_id, &format!("git-remote|{refname}|{sha}"))
}

/// Whether one object (`cat-file --batch` form: headers, a blank line,
/// the message) is one runwarden's plant writes: a root commit it
/// committed with its message, or a tag it tagged.
fn runwarden_object(kind: &str, body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    let (head, message) = text.split_once("\n\n").unwrap_or((&text, ""));
    let ident = format!("{IDENT_NAME} <{IDENT_EMAIL}> ");
    match kind {
        "commit" => {
            !head.lines().any(|l| l.starts_with("parent "))
                && head.lines().any(|l| {
                    l.strip_prefix("committer ")
                        .is_some_and(|i| i.starts_with(&ident))
                })
                && (message.starts_with("runwarden probe ")
                    || message.trim_end() == "Notes added by runwarden")
        }
        "tag" => head.lines().any(|l| {
            l.strip_prefix("tagger ")
                .is_some_and(|i| i.starts_with(&ident))
        }),
        _ => false,
    }
}

impl GitRemote {
    /// Of the refs `now` lists (name to the object it points at), the
    /// objects that are runwarden's: the refs fetched into `dir` in one
    /// fetch, their objects read by one `cat-file --batch`. `Broken` when
    /// either failed (then nothing is deleted).
    pub(super) fn runwarden_objects(
        &self,
        dir: &Path,
        now: &HashMap<String, String>,
    ) -> Result<HashSet<String>, Fault> {
        if now.is_empty() {
            return Ok(HashSet::new());
        }
        let mut args: Vec<String> = vec![
            "fetch".into(),
            "--no-tags".into(),
            "--no-write-fetch-head".into(),
            "-q".into(),
            self.settings.url.clone(),
        ];
        for (i, r) in now.keys().enumerate() {
            args.push(format!("+{r}:refs/runwarden-check/{i}"));
        }
        let (out, _) = self.remote_run(dir, &args);
        if !out.success {
            return Err(Fault::broken(format!(
                "could not read the refs back before deleting them: {}",
                out.reason()
            )));
        }
        let input: String = now.values().map(|sha| format!("{sha}\n")).collect();
        let mut ours = HashSet::new();
        let mut current: Option<(String, String, usize)> = None;
        let mut body = Vec::new();
        let args: Vec<String> = vec!["cat-file".into(), "--batch".into()];
        let out = self
            .git
            .stream(dir, &os(&args), &[], input.as_bytes(), |line| {
                let Some((sha, kind, size)) = current.take() else {
                    // A header: `<sha> <type> <size>` (`<sha> missing` is not).
                    let l = String::from_utf8_lossy(line);
                    let mut it = l.split(' ');
                    if let (Some(sha), Some(kind), Some(size)) = (it.next(), it.next(), it.next())
                        && let Ok(size) = size.parse::<usize>()
                    {
                        body.clear();
                        current = Some((sha.to_string(), kind.to_string(), size));
                    }
                    return;
                };
                body.extend_from_slice(line);
                body.push(b'\n');
                if body.len() >= size {
                    body.truncate(size);
                    if runwarden_object(&kind, &body) {
                        ours.insert(sha);
                    }
                } else {
                    current = Some((sha, kind, size));
                }
            });
        if !out.success {
            return Err(Fault::broken(format!(
                "git cat-file failed: {}",
                out.reason()
            )));
        }
        Ok(ours)
    }
}
