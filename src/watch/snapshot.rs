//! What a surface looks like at one moment, as watch mode records it: one
//! [`Entry`] per thing run B's listing would see (a directory entry, a
//! ref, a cache entry), streamed by the surface in [`key_order`] and kept
//! on disk, one JSON line each, so that the diff against the next look
//! holds two entries at a time, never the whole surface.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;

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
        crate::escape::line(&self.key.join("/"))
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

/// What a snapshot must leave out: runwarden's own work directory, when it
/// lies inside a surface (its device and inode).
#[derive(Debug, Default, Clone)]
pub struct WatchCtx {
    pub skip: Vec<(u64, u64)>,
}

/// A snapshot being written: entries checked to come in [`key_order`].
pub struct Writer {
    out: BufWriter<std::fs::File>,
    last: Option<Vec<String>>,
    pub count: u64,
}

impl Writer {
    pub fn create(path: &Path) -> io::Result<Writer> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Writer {
            out: BufWriter::new(f),
            last: None,
            count: 0,
        })
    }

    pub fn push(&mut self, e: &Entry) -> io::Result<()> {
        check_order(&mut self.last, &e.key)?;
        serde_json::to_writer(&mut self.out, e)?;
        self.out.write_all(b"\n")?;
        self.count += 1;
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        self.out.get_ref().sync_all()?;
        Ok(self.count)
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
    *last = Some(key.to_vec());
    Ok(())
}

/// Reads a snapshot back, one entry at a time.
pub struct Reader {
    lines: io::Lines<io::BufReader<std::fs::File>>,
}

impl Reader {
    pub fn open(path: &Path) -> io::Result<Reader> {
        Ok(Reader {
            lines: io::BufReader::new(std::fs::File::open(path)?).lines(),
        })
    }
}

impl Iterator for Reader {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<io::Result<Entry>> {
        let line = match self.lines.next()? {
            Ok(l) => l,
            Err(e) => return Some(Err(e)),
        };
        Some(serde_json::from_str(&line).map_err(io::Error::other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_lossless_and_ordered_post_order() {
        assert_eq!(component(b"a%b"), "a%25b");
        assert_eq!(component(b"x\xffy"), "x%FFy");
        assert_ne!(component(b"%FF"), component(b"\xff"));
        let k = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
        assert_eq!(key_order(&k("a/b"), &k("a")), Ordering::Less);
        assert_eq!(key_order(&k("a"), &k("ab")), Ordering::Less);
        assert_eq!(key_order(&k("a/z"), &k("ab/c")), Ordering::Less);
    }
}
