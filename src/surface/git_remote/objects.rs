//! Run A's git objects, written in-process as loose objects of the scratch
//! repository: nothing here talks to a remote, so no git process is needed
//! for it (the push that follows is the real `git` CLI).
//!
//! A loose object is `objects/<2 hex>/<38 hex>`, the zlib stream of
//! `"<type> <size>\0<body>"`, named by the SHA-1 of that header and body
//! (gitformat-loose(5)). The scratch repository is SHA-1 (what
//! [`super::repo::bare_repository`] writes), so that is the only format
//! made here.
//!
//! Why stored (uncompressed) deflate blocks: the objects are a few hundred
//! bytes, git inflates any valid zlib stream, and pack-objects compresses
//! them again for the push; a stored block needs no compressor.

use super::{IDENT_EMAIL, IDENT_NAME};
use sha1::{Digest, Sha1};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes objects into one scratch repository's object store.
pub(super) struct Objects {
    dir: PathBuf,
    /// Seconds since the epoch, on every commit and tag.
    time: u64,
}

impl Objects {
    /// Objects of the bare repository at `repo`.
    pub(super) fn new(repo: &Path) -> Objects {
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Objects {
            dir: repo.join("objects"),
            time,
        }
    }

    /// Writes one object; its id (40 hex).
    fn write(&self, kind: &str, body: &[u8]) -> std::io::Result<String> {
        let mut raw = format!("{kind} {}\0", body.len()).into_bytes();
        raw.extend_from_slice(body);
        let id = crate::nonce::to_hex(&Sha1::digest(&raw));
        let fan = self.dir.join(&id[..2]);
        match std::fs::create_dir(&fan) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let path = fan.join(&id[2..]);
        // The same object twice (two carriers sharing a commit) is one
        // file: create_new on an existing one is no error here.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => f.write_all(&zlib_stored(&raw))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        Ok(id)
    }

    pub(super) fn blob(&self, content: &str) -> std::io::Result<String> {
        self.write("blob", content.as_bytes())
    }

    /// A tree of regular files, `(name, blob id)`; names sort as git sorts
    /// a tree of files (bytewise).
    fn tree(&self, files: &[(&str, &str)]) -> std::io::Result<String> {
        let mut sorted = files.to_vec();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut body = Vec::new();
        for (name, id) in sorted {
            body.extend_from_slice(b"100644 ");
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.extend_from_slice(&unhex(id));
        }
        self.write("tree", &body)
    }

    /// A root commit of `files` (name, blob id), by `author`, committed by
    /// runwarden; the message as given (no newline added).
    pub(super) fn commit(
        &self,
        author: &(String, String),
        message: &str,
        files: &[(&str, &str)],
    ) -> std::io::Result<String> {
        let tree = self.tree(files)?;
        let t = self.time;
        let body = format!(
            "tree {tree}\nauthor {} <{}> {t} +0000\ncommitter {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000\n\n{message}",
            author.0, author.1
        );
        self.write("commit", body.as_bytes())
    }

    /// An annotated tag `name` of commit `target`.
    pub(super) fn tag(&self, name: &str, target: &str, message: &str) -> std::io::Result<String> {
        let t = self.time;
        let body = format!(
            "object {target}\ntype commit\ntag {name}\ntagger {IDENT_NAME} <{IDENT_EMAIL}> {t} +0000\n\n{message}"
        );
        self.write("tag", body.as_bytes())
    }

    /// A notes commit whose tree notes `target` with `note` (the note's
    /// path is the target's id, as git notes writes it for a few notes).
    pub(super) fn note(&self, target: &str, note: &str) -> std::io::Result<String> {
        let blob = self.blob(note)?;
        let ident = (IDENT_NAME.to_string(), IDENT_EMAIL.to_string());
        self.commit(&ident, "Notes added by runwarden", &[(target, &blob)])
    }
}

/// `data` as a zlib stream (RFC 1950) of stored deflate blocks (RFC 1951
/// section 3.2.4): the header, blocks of at most 65,535 bytes, Adler-32.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 16);
    // CMF 0x78 (deflate, 32 KiB window), FLG 0x01: no dictionary, the
    // lowest level, and (0x7801 % 31 == 0) a valid check.
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        // One empty final block.
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let len = chunk.len() as u16;
        out.push(u8::from(last));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    // 5,552 bytes is the most that cannot overflow before the modulo.
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

fn unhex(id: &str) -> Vec<u8> {
    (0..id.len() / 2)
        .filter_map(|i| u8::from_str_radix(id.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_matches_rfc_1950_example() {
        // "Wikipedia" is the usual worked example: 0x11E60398.
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn the_empty_tree_has_gits_id() {
        let dir = tempfile::tempdir().unwrap();
        super::super::repo::bare_repository(dir.path()).unwrap();
        let o = Objects::new(dir.path());
        assert_eq!(
            o.tree(&[]).unwrap(),
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
        );
        assert_eq!(
            o.blob("").unwrap(),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
    }
}
