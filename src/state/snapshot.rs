//! What a surface looks like at one moment, as watch mode records it: one
//! [`Entry`] per thing run B's listing would see (a directory entry, a
//! ref, a cache entry), streamed by the surface in [`key_order`] and kept
//! on disk, one line each ([`super::line`]), so that the diff against the
//! next look holds two entries at a time, never the whole surface.

use super::line::{decode, encode};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;
use std::rc::Rc;

/// One thing a surface holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Where it is: path components from the surface's root (escaped
    /// losslessly with [`component`]), or one name (a ref, a cache key).
    pub key: Vec<String>,
    /// What it is: `file`, `dir`, `symlink`, `special`, `ref`, `cache-entry`.
    pub kind: String,
    /// What a change of is a change of the entry: sizes, times, digests,
    /// object ids. Compared as strings.
    #[serde(default)]
    pub attrs: BTreeMap<String, String>,
    /// What the entry is regardless of its name (an inode): pairs a
    /// removal with a creation into a rename. Never compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When the surface says it last changed (RFC 3339), where it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

impl Entry {
    /// The entry for people: its key joined with `/` (already escaped).
    pub fn shown(&self) -> String {
        let raw: Vec<Vec<u8>> = self.key.iter().map(|c| uncomponent(c)).collect();
        crate::escape::bytes(&raw.join(&b'/'))
    }
}

/// One path component (or name), escaped losslessly into text: UTF-8 is
/// kept, except `%` (`%25`); every byte that is not UTF-8 is `%XX`. Two
/// different names never give the same text, so snapshots compare names
/// exactly, and the order of the texts is the one both snapshots sort by.
pub fn component(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '%' {
                out.push_str("%25");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The name a [`component`] was made from.
pub fn uncomponent(c: &str) -> Vec<u8> {
    let b = c.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = c
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// The order every snapshot streams in: component by component, and an
/// entry after everything under it (post-order), so that a directory
/// comes once its children have been compared.
pub fn key_order(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.cmp(y) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    b.len().cmp(&a.len())
}

/// Why a surface could not be looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SnapshotError {
    /// This surface type has no snapshot (yet): SKIPPED.
    Unsupported(String),
    /// The look broke: ERROR.
    Failed(String),
}

/// Where a snapshot streams its entries (in [`key_order`]).
pub type Sink<'s> = dyn FnMut(Entry) -> io::Result<()> + 's;

/// Streams entries a surface listed in whatever order it lists them (a
/// ref list, a cache listing: small next to a directory tree), sorted
/// first into [`key_order`].
pub fn emit_sorted(mut entries: Vec<Entry>, sink: &mut Sink<'_>) -> Result<(), SnapshotError> {
    entries.sort_by(|a, b| key_order(&a.key, &b.key));
    entries.dedup_by(|a, b| a.key == b.key);
    for e in entries {
        sink(e).map_err(|e| SnapshotError::Failed(format!("writing the snapshot: {e}")))?;
    }
    Ok(())
}

/// An entry of a listed surface: one name, its kind, its attributes.
pub fn listed(key: Vec<String>, kind: &str, attrs: &[(&str, String)]) -> Entry {
    Entry {
        key,
        kind: kind.into(),
        attrs: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        id: None,
        at: None,
    }
}

/// What a snapshot must leave out (runwarden's own work directory, when it
/// lies inside a surface: its device and inode) and, for the second
/// snapshot, the first one to consult as it is taken.
#[derive(Debug, Default, Clone)]
pub struct WatchCtx {
    pub skip: Vec<(u64, u64)>,
    /// The first snapshot, read in step with the second (`None` while the
    /// first is taken).
    pub first: Option<Rc<RefCell<Lookahead>>>,
    /// When the first snapshot began (Unix seconds).
    pub since: i64,
}

impl WatchCtx {
    /// What `look` makes of the entry the first snapshot recorded under
    /// `key`, if it holds `key`. Keys must be asked in [`key_order`], each before it is
    /// streamed: what the first snapshot holds between two asks (entries
    /// the second will not have) stays in memory until the diff takes it,
    /// so memory holds the changes, never the surface. `None` too when the
    /// first snapshot cannot be read (the diff then says so).
    pub fn earlier<R>(&self, key: &[String], look: impl FnOnce(&Entry) -> R) -> Option<R> {
        let first = self.first.as_ref()?;
        let mut first = first.borrow_mut();
        let i = first.find(key)?;
        Some(look(&first.ahead[i]))
    }

    /// Whether the entry the first snapshot recorded under `key` is, by
    /// `same`, exactly the entry the second would stream now: then it is
    /// taken as streamed, unchanged, and the caller streams nothing for it
    /// (no entry built, no comparison: most of a tree is as it was).
    /// Asked as [`WatchCtx::earlier`] is.
    pub fn unchanged(&self, key: &[String], same: impl FnOnce(&Entry) -> bool) -> bool {
        let Some(first) = self.first.as_ref() else {
            return false;
        };
        first.borrow_mut().mark(key, same)
    }
}

/// A snapshot read back with entries kept ahead of the diff: what lets the
/// second snapshot ask the first about an entry before streaming it
/// ([`WatchCtx::earlier`]), while the diff ([`super::diff::Differ`])
/// takes every entry exactly once, in order, through the same reader (one
/// read and one digest of the file).
pub struct Lookahead {
    reader: Reader,
    /// Entries read ahead of the diff: those the second snapshot has not
    /// taken as unchanged ([`WatchCtx::unchanged`] lets its entry go at
    /// once), so what is held is what changed and one entry read ahead.
    ahead: VecDeque<Entry>,
    /// A read that failed: kept for the diff to report.
    failed: Option<io::Error>,
    /// What attribution needs of every entry read.
    pub(super) seen: super::diff::Before,
}

impl std::fmt::Debug for Lookahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lookahead({} ahead)", self.ahead.len())
    }
}

impl Lookahead {
    pub fn new(reader: Reader, since: i64) -> Lookahead {
        Lookahead {
            reader,
            ahead: VecDeque::new(),
            failed: None,
            seen: super::diff::Before {
                since,
                ..Default::default()
            },
        }
    }

    /// The next entry for the diff (an entry taken as unchanged is gone
    /// already).
    pub fn take_next(&mut self) -> io::Result<Option<Entry>> {
        if let Some(e) = self.ahead.pop_front() {
            return Ok(Some(e));
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let next = self.reader.next().transpose()?;
        if let Some(e) = &next {
            self.seen.see(e);
        }
        Ok(next)
    }

    /// Where the entry under `key` is in `ahead`, reading ahead up to the
    /// first key not before it. A read error stops the look (the entry is
    /// then unknown) and waits for the diff.
    fn find(&mut self, key: &[String]) -> Option<usize> {
        while self.failed.is_none()
            && self
                .ahead
                .back()
                .is_none_or(|b| key_order(&b.key, key) == Ordering::Less)
        {
            match self.reader.next() {
                Some(Ok(e)) => {
                    self.seen.see(&e);
                    self.ahead.push_back(e);
                }
                Some(Err(e)) => self.failed = Some(e),
                None => break,
            }
        }
        // From the back: the entry asked for is the last read, or close.
        let n = self.ahead.len();
        self.ahead
            .iter()
            .rev()
            .take_while(|e| key_order(&e.key, key) != Ordering::Less)
            .position(|e| e.key == key)
            .map(|back| n - 1 - back)
    }

    /// Takes the entry under `key` as unchanged when `same` says so: it is
    /// let go at once, wherever it is (entries before it the second
    /// snapshot never asked about, which it will not have, stay for the
    /// diff), so that memory holds the changes, never the surface.
    fn mark(&mut self, key: &[String], same: impl FnOnce(&Entry) -> bool) -> bool {
        let Some(i) = self.find(key) else {
            return false;
        };
        if !same(&self.ahead[i]) {
            return false;
        }
        self.ahead.remove(i);
        true
    }

    /// The SHA-256 of everything read so far.
    pub fn digest(&self) -> String {
        self.reader.digest()
    }
}

/// A snapshot being written: entries checked to come in [`key_order`],
/// and the SHA-256 of what was written, so that a snapshot changed on disk
/// afterwards (by the watched command, which may write there) is known.
pub struct Writer {
    out: BufWriter<std::fs::File>,
    /// The line being written (its buffer reused).
    line: Vec<u8>,
    last: Option<Vec<String>>,
    hash: Sha256,
    pub count: u64,
}

/// The hex of a finished SHA-256.
pub fn hex(h: Sha256) -> String {
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl Writer {
    pub fn create(path: &Path) -> io::Result<Writer> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Writer {
            out: BufWriter::with_capacity(1 << 16, f),
            line: Vec::with_capacity(256),
            last: None,
            hash: Sha256::new(),
            count: 0,
        })
    }

    pub fn push(&mut self, e: &Entry) -> io::Result<()> {
        check_order(&mut self.last, &e.key)?;
        self.line.clear();
        encode(e, &mut self.line);
        self.hash.update(&self.line);
        self.out.write_all(&self.line)?;
        self.count += 1;
        Ok(())
    }

    /// Flushes the snapshot; the SHA-256 of its bytes. (No fsync: the
    /// snapshot is read back on this machine, by this job, from the page
    /// cache; a crash in between ends the job anyway, and a snapshot that
    /// reads back other than written fails its digest.)
    pub fn finish(mut self) -> io::Result<String> {
        self.out.flush()?;
        Ok(hex(self.hash))
    }
}

/// A surface that streams out of order would make the diff lie: it is an
/// error, never a reordering (which would need the whole surface in
/// memory).
pub(super) fn check_order(last: &mut Option<Vec<String>>, key: &[String]) -> io::Result<()> {
    if let Some(prev) = last
        && key_order(prev, key) != Ordering::Less
    {
        return Err(io::Error::other(format!(
            "the snapshot came out of order ({} after {})",
            crate::escape::line(&key.join("/")),
            crate::escape::line(&prev.join("/"))
        )));
    }
    // The last key's strings are reused: a clone per entry is a
    // measurable part of a snapshot of a million.
    match last {
        Some(prev) => {
            prev.truncate(key.len());
            for (p, k) in prev.iter_mut().zip(key) {
                p.clone_from(k);
            }
            let have = prev.len();
            prev.extend(key[have..].iter().cloned());
        }
        None => *last = Some(key.to_vec()),
    }
    Ok(())
}

/// Reads a snapshot back, one entry at a time, checking the order again
/// and hashing what it read: at the end, [`Reader::digest`] must be what
/// [`Writer::finish`] returned, or the snapshot was changed on disk.
pub struct Reader {
    input: io::BufReader<std::fs::File>,
    last: Option<Vec<String>>,
    hash: Sha256,
}

/// The longest line a snapshot holds (an entry of a path at the longest
/// Linux allows is far below it).
const MAX_LINE: u64 = 64 * 1024;

impl Reader {
    pub fn open(path: &Path) -> io::Result<Reader> {
        Ok(Reader {
            input: io::BufReader::new(crate::sys::open_regular(path)?),
            last: None,
            hash: Sha256::new(),
        })
    }

    /// The SHA-256 of everything read so far (all of it, once the
    /// iterator has ended).
    pub fn digest(&self) -> String {
        hex(self.hash.clone())
    }
}

impl Iterator for Reader {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<io::Result<Entry>> {
        let mut line = Vec::new();
        match io::Read::take(&mut self.input, MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) => return None,
            Ok(_) if !line.ends_with(b"\n") => {
                return Some(Err(io::Error::other(
                    "a snapshot line too long or cut short",
                )));
            }
            Ok(_) => {}
            Err(e) => return Some(Err(e)),
        }
        self.hash.update(&line);
        let e = match decode(&line[..line.len() - 1]) {
            Ok(e) => e,
            Err(e) => return Some(Err(e)),
        };
        Some(check_order(&mut self.last, &e.key).map(|()| e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From a review: an entry the second walk never asks about (the
    /// command deleted it) must not keep every unchanged entry behind it
    /// in memory.
    #[test]
    fn a_deleted_first_entry_does_not_hold_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("first");
        let n = 20_000;
        let mut w = Writer::create(&path).unwrap();
        for i in 0..n {
            w.push(&listed(vec![format!("{i:06}")], "file", &[]))
                .unwrap();
        }
        w.finish().unwrap();
        let la = Rc::new(RefCell::new(Lookahead::new(
            Reader::open(&path).unwrap(),
            0,
        )));
        let ctx = WatchCtx {
            first: Some(Rc::clone(&la)),
            ..WatchCtx::default()
        };
        // "000000" is gone; the rest are asked about, all unchanged.
        for i in 1..n {
            assert!(ctx.unchanged(&[format!("{i:06}")], |_| true));
        }
        assert_eq!(la.borrow().ahead.len(), 1);
        // The diff still gets the deleted entry, then nothing.
        let mut la = la.borrow_mut();
        assert_eq!(la.take_next().unwrap().unwrap().key, ["000000"]);
        assert!(la.take_next().unwrap().is_none());
        assert_eq!(la.digest(), w_digest(&path));
    }

    fn w_digest(path: &Path) -> String {
        let mut h = Sha256::new();
        h.update(std::fs::read(path).unwrap());
        hex(h)
    }

    #[test]
    fn components_are_lossless_and_ordered_post_order() {
        assert_eq!(component(b"a%b"), "a%25b");
        assert_eq!(component(b"x\xffy"), "x%FFy");
        assert_ne!(component(b"%FF"), component(b"\xff"));
        for raw in [&b"a%b"[..], b"x\xffy", b"%FF"] {
            assert_eq!(uncomponent(&component(raw)), raw);
        }
        let k = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
        assert_eq!(key_order(&k("a/b"), &k("a")), Ordering::Less);
        assert_eq!(key_order(&k("a"), &k("ab")), Ordering::Less);
        assert_eq!(key_order(&k("a/z"), &k("ab/c")), Ordering::Less);
    }
}
