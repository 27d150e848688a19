//! The difference between two snapshots of one surface, computed as the
//! second is taken: the first is read back from disk in step, so memory
//! holds the changes (what the watched command did), never the surface.

use super::snapshot::{Entry, Lookahead, Reader, check_order, key_order};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::io;
use std::rc::Rc;

/// What the first snapshot held that attribution needs besides the
/// change itself: every object id (`oid`) it listed, so that a ref moved
/// to an object nobody named before is known to carry a new commit; and
/// when it began.
#[derive(Debug, Default)]
pub struct Before {
    pub oids: HashSet<String>,
    /// When the first snapshot began (Unix seconds): a new entry whose
    /// mtime is earlier (or later than the second) was given its time on
    /// purpose.
    pub since: i64,
}

impl Before {
    /// Notes what an entry of the first snapshot holds.
    pub(super) fn see(&mut self, e: &Entry) {
        if let Some(oid) = e.attrs.get("oid") {
            self.oids.insert(oid.clone());
        }
    }
}

/// What happened to one entry between the snapshots.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangeKind {
    Created,
    Removed,
    /// The attributes whose values differ.
    Changed(Vec<String>),
    /// Removed under one key and created under another with the same
    /// identity (inode); `Changed` attributes too, when some differ.
    Renamed(Vec<String>),
}

/// One change: the entry before and after (one of them for a creation or
/// a removal).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kind: ChangeKind,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

impl Change {
    /// The entry as it is now (or was, for a removal).
    pub fn entry(&self) -> &Entry {
        self.after
            .as_ref()
            .or(self.before.as_ref())
            .expect("a change has an entry")
    }
}

/// Compares a snapshot being taken (`push`, in key order) with the one on
/// disk, noting what attribution needs of the first ([`Before`]) as it
/// reads it: the first snapshot is read once.
pub struct Differ {
    /// The first snapshot, shared with the second as it is taken
    /// ([`crate::state::snapshot::WatchCtx::earlier`]).
    before: Rc<RefCell<Lookahead>>,
    /// The next entry of the first snapshot, read but not yet compared.
    pending: Option<Entry>,
    last: Option<Vec<String>>,
    changes: Vec<Change>,
}

impl Differ {
    /// `since`: when the first snapshot began (Unix seconds).
    pub fn new(before: Reader, since: i64) -> Differ {
        Differ {
            before: Rc::new(RefCell::new(Lookahead::new(before, since))),
            pending: None,
            last: None,
            changes: Vec::new(),
        }
    }

    /// The first snapshot, for the second to consult as it is taken.
    pub fn first(&self) -> Rc<RefCell<Lookahead>> {
        Rc::clone(&self.before)
    }

    /// The next entry of the first snapshot (the pending one first).
    fn next_before(&mut self) -> io::Result<Option<Entry>> {
        match self.pending.take() {
            Some(e) => Ok(Some(e)),
            None => self.before.borrow_mut().take_next(),
        }
    }

    pub fn push(&mut self, now: Entry) -> io::Result<()> {
        check_order(&mut self.last, &now.key)?;
        loop {
            let Some(b) = self.next_before()? else {
                self.changes.push(Change {
                    kind: ChangeKind::Created,
                    before: None,
                    after: Some(now),
                });
                return Ok(());
            };
            match key_order(&b.key, &now.key) {
                Ordering::Less => self.removed(b),
                Ordering::Equal => {
                    self.compare(b, now);
                    return Ok(());
                }
                Ordering::Greater => {
                    self.pending = Some(b);
                    self.changes.push(Change {
                        kind: ChangeKind::Created,
                        before: None,
                        after: Some(now),
                    });
                    return Ok(());
                }
            }
        }
    }

    fn removed(&mut self, b: Entry) {
        self.changes.push(Change {
            kind: ChangeKind::Removed,
            before: Some(b),
            after: None,
        });
    }

    fn compare(&mut self, b: Entry, now: Entry) {
        if b.kind != now.kind {
            // Another kind of entry under the same name: one went, one came.
            self.removed(b);
            self.changes.push(Change {
                kind: ChangeKind::Created,
                before: None,
                after: Some(now),
            });
            return;
        }
        // Most entries are as they were: one comparison, no allocation.
        if b.attrs == now.attrs {
            return;
        }
        let changed = changed_attrs(&b, &now);
        if !changed.is_empty() {
            self.changes.push(Change {
                kind: ChangeKind::Changed(changed),
                before: Some(b),
                after: Some(now),
            });
        }
    }

    /// The rest of the first snapshot is what went; then renames are
    /// paired and a directory whose only change follows from its
    /// children's (or from runwarden's own `quiet` paths) is dropped.
    /// Also returns the SHA-256 of the first snapshot as read, to check
    /// against what was written, and what attribution needs of it.
    pub fn finish(
        mut self,
        quiet: &HashSet<Vec<String>>,
    ) -> io::Result<(Vec<Change>, String, Before)> {
        while let Some(b) = self.next_before()? {
            self.removed(b);
        }
        let changes = pair_renames(self.changes);
        // The directories whose entries came or went: their times moved
        // by that. A rewrite of an entry's content does not move them.
        let parents: HashSet<&[String]> = changes
            .iter()
            .filter(|c| !matches!(c.kind, ChangeKind::Changed(_)))
            .flat_map(|c| [c.before.as_ref(), c.after.as_ref()])
            .flatten()
            .filter_map(|e| e.key.split_last().map(|(_, p)| p))
            .collect();
        // A time-only change of such a directory is dropped only when it
        // looks natural: an entry coming or going sets the directory's
        // mtime and ctime to the same moment, while a time set by hand
        // (`touch -d`) leaves them apart.
        let keep = |c: &Change| match &c.kind {
            ChangeKind::Changed(attrs) if c.entry().kind == "dir" => {
                let e = c.entry();
                let only_times = attrs.iter().all(|a| a == "mtime" || a == "ctime");
                let natural = e.attrs.get("mtime") == e.attrs.get("ctime");
                let moved_by_entries = parents.contains(e.key.as_slice()) || quiet.contains(&e.key);
                !(only_times && natural && moved_by_entries)
            }
            _ => true,
        };
        let kept: Vec<bool> = changes.iter().map(keep).collect();
        let digest = self.before.borrow().digest();
        let seen = std::mem::take(&mut self.before.borrow_mut().seen);
        Ok((
            changes
                .into_iter()
                .zip(kept)
                .filter_map(|(c, k)| k.then_some(c))
                .collect(),
            digest,
            seen,
        ))
    }
}

fn changed_attrs(b: &Entry, now: &Entry) -> Vec<String> {
    let mut names: Vec<&String> = b.attrs.keys().chain(now.attrs.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|k| b.attrs.get(*k) != now.attrs.get(*k))
        .cloned()
        .collect()
}

/// A removal and a creation of the same identity and kind are one rename.
fn pair_renames(changes: Vec<Change>) -> Vec<Change> {
    let mut removed: HashMap<(String, String), usize> = HashMap::new();
    for (i, c) in changes.iter().enumerate() {
        if let (ChangeKind::Removed, Some(b)) = (&c.kind, &c.before)
            && let Some(id) = &b.id
        {
            removed.insert((b.kind.clone(), id.clone()), i);
        }
    }
    let mut taken: HashSet<usize> = HashSet::new();
    let mut out: Vec<Option<Change>> = changes.into_iter().map(Some).collect();
    for i in 0..out.len() {
        let Some(Change {
            kind: ChangeKind::Created,
            after: Some(a),
            ..
        }) = &out[i]
        else {
            continue;
        };
        let Some(id) = &a.id else { continue };
        let Some(&j) = removed.get(&(a.kind.clone(), id.clone())) else {
            continue;
        };
        if !taken.insert(j) {
            continue;
        }
        let b = out[j].take().and_then(|c| c.before).expect("a removal");
        let a = out[i].take().and_then(|c| c.after).expect("a creation");
        out[i] = Some(Change {
            kind: ChangeKind::Renamed(changed_attrs(&b, &a)),
            before: Some(b),
            after: Some(a),
        });
    }
    out.into_iter().flatten().collect()
}
