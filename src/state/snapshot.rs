//! What a surface looks like at one moment, as watch mode records it: one
//! [`Entry`] per thing run B's listing would see (a directory entry, a
//! ref, a cache entry), streamed by the surface in [`key_order`] and kept
//! on disk, one line each ([`encode`]), so that the diff against the next
//! look holds two entries at a time, never the whole surface.
//!
//! Why not JSON: a watch writes and reads back every entry of a tree (a
//! million, on a runner's tool cache); parsing JSON was a fifth of a
//! watch's time. A snapshot is read only by the binary that wrote it, in
//! the same job, so its line needs no schema: tab-separated fields, each
//! escaped ([`escape_field`]).

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
        first.borrow_mut().find(key).map(|(e, _)| look(e))
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
    /// Entries read ahead of the diff, each with whether the second
    /// snapshot took it as unchanged ([`WatchCtx::unchanged`]).
    ahead: VecDeque<(Entry, bool)>,
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

    /// The next entry for the diff, past those taken as unchanged.
    pub fn take_next(&mut self) -> io::Result<Option<Entry>> {
        loop {
            let next = match self.ahead.pop_front() {
                Some(e) => Some(e),
                None => {
                    if let Some(e) = self.failed.take() {
                        return Err(e);
                    }
                    self.reader.next().transpose()?.map(|e| (e, false))
                }
            };
            match next {
                None => return Ok(None),
                Some((e, same)) => {
                    self.seen.see(&e);
                    if !same {
                        return Ok(Some(e));
                    }
                }
            }
        }
    }

    /// The entry under `key`, reading ahead up to the first key not before
    /// it. A read error stops the look (the entry is then unknown) and
    /// waits for the diff.
    fn find(&mut self, key: &[String]) -> Option<&mut (Entry, bool)> {
        while self.failed.is_none()
            && self
                .ahead
                .back()
                .is_none_or(|(b, _)| key_order(&b.key, key) == Ordering::Less)
        {
            match self.reader.next() {
                Some(Ok(e)) => self.ahead.push_back((e, false)),
                Some(Err(e)) => self.failed = Some(e),
                None => break,
            }
        }
        self.ahead
            .iter_mut()
            .rev()
            .take_while(|(e, _)| key_order(&e.key, key) != Ordering::Less)
            .find(|(e, _)| e.key == key)
    }

    /// Takes the entry under `key` as unchanged when `same` says so; the
    /// unchanged entries at the front are let go at once, so that memory
    /// holds what the diff has still to see, never the surface.
    fn mark(&mut self, key: &[String], same: impl FnOnce(&Entry) -> bool) -> bool {
        let Some(slot) = self.find(key) else {
            return false;
        };
        if !same(&slot.0) {
            return false;
        }
        slot.1 = true;
        while self.ahead.front().is_some_and(|(_, same)| *same) {
            if let Some((e, _)) = self.ahead.pop_front() {
                self.seen.see(&e);
            }
        }
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

/// Separates a key's components within its field.
const UNIT: u8 = 0x1f;

/// One entry as one snapshot line: `kind`, `id`, `at`, the key's
/// components (each after a 0x1f), then one `name=value` field per
/// attribute, tab-separated, each escaped, and a newline. An absent `id`
/// or `at` is an empty field; a present one starts with `+`.
pub fn encode(e: &Entry, out: &mut Vec<u8>) {
    escape_field(e.kind.as_bytes(), out);
    for opt in [&e.id, &e.at] {
        out.push(b'\t');
        if let Some(v) = opt {
            out.push(b'+');
            escape_field(v.as_bytes(), out);
        }
    }
    out.push(b'\t');
    for c in &e.key {
        out.push(UNIT);
        escape_field(c.as_bytes(), out);
    }
    for (k, v) in &e.attrs {
        out.push(b'\t');
        escape_field(k.as_bytes(), out);
        out.push(b'=');
        escape_field(v.as_bytes(), out);
    }
    out.push(b'\n');
}

/// Escapes what separates fields (`\t`, `\n`, 0x1f, `=`), `\r` and `%`
/// as `%XX`: lossless, and a field holds no separator.
pub fn escape_field(v: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in v {
        if matches!(b, b'%' | b'\t' | b'\n' | b'\r' | b'=' | UNIT) {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

/// The text an [`escape_field`] was made from.
fn unescape_field(v: &[u8]) -> io::Result<String> {
    let bad = || io::Error::other("a snapshot field badly escaped");
    if !v.contains(&b'%') {
        return String::from_utf8(v.to_vec()).map_err(|_| bad());
    }
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'%' {
            let h = v.get(i + 1..i + 3).ok_or_else(bad)?;
            let h = std::str::from_utf8(h).map_err(|_| bad())?;
            out.push(u8::from_str_radix(h, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(v[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// The entry an [`encode`]d line (without its newline) holds.
pub fn decode(line: &[u8]) -> io::Result<Entry> {
    let bad = |what: &str| io::Error::other(format!("a snapshot line without {what}"));
    let mut fields = line.split(|b| *b == b'\t');
    let kind = unescape_field(fields.next().ok_or_else(|| bad("a kind"))?)?;
    let mut opt = |what: &str| -> io::Result<Option<String>> {
        match fields.next().ok_or_else(|| bad(what))? {
            [] => Ok(None),
            [b'+', v @ ..] => unescape_field(v).map(Some),
            _ => Err(bad(what)),
        }
    };
    let id = opt("an id")?;
    let at = opt("a time")?;
    let key = match fields.next().ok_or_else(|| bad("a key"))? {
        [] => vec![],
        [UNIT, rest @ ..] => rest
            .split(|b| *b == UNIT)
            .map(unescape_field)
            .collect::<io::Result<Vec<String>>>()?,
        _ => return Err(bad("a key")),
    };
    let mut attrs = BTreeMap::new();
    for f in fields {
        let eq = f
            .iter()
            .position(|b| *b == b'=')
            .ok_or_else(|| bad("a value"))?;
        attrs.insert(unescape_field(&f[..eq])?, unescape_field(&f[eq + 1..])?);
    }
    Ok(Entry {
        key,
        kind,
        attrs,
        id,
        at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_holds_any_entry_exactly() {
        let odd = "a\tb\nc=d%e\x1ff\rg";
        let entries = [
            Entry {
                key: vec!["d".into(), odd.into(), "".into()],
                kind: odd.into(),
                attrs: [(odd.to_string(), odd.to_string()), ("k".into(), "".into())].into(),
                id: Some("".into()),
                at: None,
            },
            listed(
                vec!["refs/heads/main".into()],
                "ref",
                &[("oid", "abc".into())],
            ),
            listed(vec![], "x", &[]),
        ];
        for e in entries {
            let mut line = vec![];
            encode(&e, &mut line);
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
            assert_eq!(decode(&line[..line.len() - 1]).unwrap(), e);
        }
        assert!(decode(b"file").is_err());
        assert!(decode(b"file\t\t\tk\tno-equals").is_err());
        assert!(decode(b"file\tx\t\tk").is_err());
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
