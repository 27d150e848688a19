//! Run B reads what it fetched in-process: every object of the packs git's
//! fetch kept in run B's scratch repository, inflated (deltas applied) and
//! handed over one at a time, as `git cat-file --batch-all-objects --batch`
//! would stream them, without its process (a probe reads its real remote
//! and its control: two git processes fewer).
//!
//! Why a reader of our own: the packs are git's (index-pack checked every
//! object and the pack's checksum as it kept it), so what is read is only
//! the pack format itself: a header, entries of a type and a size, zlib
//! streams, and offset deltas. Anything else this reader does not read is
//! no guess: [`each_object`] says so, and the caller asks `cat-file` as
//! before. That is a loose object (fetch.unpackLimit=1 keeps every fetch a
//! pack, so run B makes none), an alternate, a delta against an object
//! named by id (a thin pack's base, which a fresh repository never asks
//! for), a pack or its objects beyond the caps.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// The most pack bytes read in all (a fetch of run A's plants is a few
/// kilobytes; beyond this, `cat-file` streams what a remote sent).
const MAX_PACK_BYTES: u64 = 32 << 20;

/// The most inflated bytes held at once (every object is kept while the
/// pack is read, as a later delta may name it as its base).
const MAX_HELD: usize = 64 << 20;

/// The most objects one pack may hold to be read here (a fetch of run
/// A's plants is a few dozen).
const MAX_OBJECTS: usize = 100_000;

/// Why the packs were not read here: the caller asks git instead (and
/// the tests, which show the reason).
#[derive(Debug)]
pub(super) struct Unread(
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the tests"))] String,
);

fn unread(why: impl Into<String>) -> Unread {
    Unread(why.into())
}

/// Feeds every object of every pack in bare repository `repo` to `each`
/// (its content, whole); `Err` when the repository holds anything this
/// reader does not read, before or after some objects were fed (the
/// caller's search then starts again with git: a search only ever adds).
pub(super) fn each_object(repo: &Path, each: &mut dyn FnMut(&[u8])) -> Result<(), Unread> {
    let objects = repo.join("objects");
    // Only `pack` and `info` may be there, and no alternates in `info`
    // (objects kept elsewhere, which `cat-file` would read too).
    for entry in read_dir(&objects)? {
        match entry.as_str() {
            "pack" => {}
            "info" => {
                let info = read_dir(&objects.join("info"))?;
                if let Some(a) = info.iter().find(|n| n.contains("alternates")) {
                    return Err(unread(format!("objects/info/{a}")));
                }
            }
            other => return Err(unread(format!("objects/{other} is not a pack"))),
        }
    }
    let dir = objects.join("pack");
    let mut packs: Vec<String> = read_dir(&dir)?
        .into_iter()
        .filter(|n| n.ends_with(".pack"))
        .collect();
    packs.sort();
    let mut total: u64 = 0;
    for name in packs {
        let data = read_capped(&dir.join(&name), MAX_PACK_BYTES - total)?;
        total += data.len() as u64;
        read_pack(&data, each)?;
    }
    Ok(())
}

/// The names in `dir` (a directory git made in run B's own repository).
fn read_dir(dir: &Path) -> Result<Vec<String>, Unread> {
    let mut names = vec![];
    let entries = std::fs::read_dir(dir).map_err(|e| unread(format!("{}: {e}", dir.display())))?;
    for e in entries {
        let e = e.map_err(|e| unread(e.to_string()))?;
        let name = e
            .file_name()
            .into_string()
            .map_err(|_| unread("a name not UTF-8"))?;
        names.push(name);
    }
    Ok(names)
}

/// A whole file of at most `cap` bytes, never through a symlink (the
/// repository is run B's own, and so is every name in it).
fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, Unread> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| unread(format!("{}: {e}", path.display())))?;
    let mut data = vec![];
    f.take(cap + 1)
        .read_to_end(&mut data)
        .map_err(|e| unread(e.to_string()))?;
    if data.len() as u64 > cap {
        return Err(unread("the fetched packs are larger than read here"));
    }
    Ok(data)
}

const COMMIT: u8 = 1;
const TAG: u8 = 4;
const OFS_DELTA: u8 = 6;

/// Every object of one pack (version 2 or 3), in the pack's order.
fn read_pack(data: &[u8], each: &mut dyn FnMut(&[u8])) -> Result<(), Unread> {
    if data.len() < 12 || &data[..4] != b"PACK" {
        return Err(unread("not a pack"));
    }
    let version = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
    if version != 2 && version != 3 {
        return Err(unread(format!("pack version {version}")));
    }
    let count = u32::from_be_bytes([data[8], data[9], data[10], data[11]]);
    // Each object held costs its entry as well as its bytes: a pack of
    // millions of tiny objects is for git to read.
    if count as usize > MAX_OBJECTS {
        return Err(unread(format!("{count} objects in one pack")));
    }
    // Every object, by the offset it starts at: a delta names its base so.
    let mut held: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut held_bytes = 0usize;
    let mut pos = 12;
    for _ in 0..count {
        let start = pos;
        let (kind, size) = entry_header(data, &mut pos)?;
        let base = match kind {
            COMMIT..=TAG => None,
            OFS_DELTA => {
                let back = ofs(data, &mut pos)?;
                let at = start
                    .checked_sub(back)
                    .ok_or_else(|| unread("a delta before the pack"))?;
                Some(
                    held.get(&at)
                        .ok_or_else(|| unread("a delta's base is no object"))?,
                )
            }
            other => return Err(unread(format!("an entry of type {other}"))),
        };
        if held_bytes.saturating_add(size) > MAX_HELD {
            return Err(unread("the fetched objects are larger than held here"));
        }
        let (raw, used) = inflate(data.get(pos..).unwrap_or_default(), size)?;
        pos += used;
        let content = match base {
            Some(b) => apply_delta(b, &raw)?,
            None => raw,
        };
        held_bytes += content.len();
        if held_bytes > MAX_HELD {
            return Err(unread("the fetched objects are larger than held here"));
        }
        each(&content);
        held.insert(start, content);
    }
    Ok(())
}

/// An entry's type and inflated size (git's variable-length header).
fn entry_header(data: &[u8], pos: &mut usize) -> Result<(u8, usize), Unread> {
    let mut c = byte(data, pos)?;
    let kind = (c >> 4) & 7;
    let mut size = u64::from(c & 15);
    let mut shift = 4;
    while c & 0x80 != 0 {
        c = byte(data, pos)?;
        if shift > 56 {
            return Err(unread("an entry size too large"));
        }
        size |= u64::from(c & 0x7f) << shift;
        shift += 7;
    }
    let size = usize::try_from(size).map_err(|_| unread("an entry size too large"))?;
    Ok((kind, size))
}

/// An offset delta's distance back to its base (git's offset encoding:
/// each continuation adds one before shifting).
fn ofs(data: &[u8], pos: &mut usize) -> Result<usize, Unread> {
    let mut c = byte(data, pos)?;
    let mut off = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        c = byte(data, pos)?;
        if off >= 1 << 50 {
            return Err(unread("a delta offset too large"));
        }
        off = ((off + 1) << 7) | u64::from(c & 0x7f);
    }
    usize::try_from(off).map_err(|_| unread("a delta offset too large"))
}

fn byte(data: &[u8], pos: &mut usize) -> Result<u8, Unread> {
    let b = *data
        .get(*pos)
        .ok_or_else(|| unread("the pack ends early"))?;
    *pos += 1;
    Ok(b)
}

/// One zlib stream inflating to exactly `size` bytes: (the bytes, how
/// much input it took).
fn inflate(input: &[u8], size: usize) -> Result<(Vec<u8>, usize), Unread> {
    use miniz_oxide::inflate::TINFLStatus;
    use miniz_oxide::inflate::core::{DecompressorOxide, decompress, inflate_flags};
    let mut out = vec![0u8; size];
    let mut d = DecompressorOxide::new();
    let flags = inflate_flags::TINFL_FLAG_PARSE_ZLIB_HEADER
        | inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
    let (status, used, made) = decompress(&mut d, input, &mut out, 0, flags);
    match status {
        TINFLStatus::Done if made == size => Ok((out, used)),
        _ => Err(unread("an entry does not inflate to its size")),
    }
}

/// A git delta applied to `base`: the result's size is the delta's word.
fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>, Unread> {
    let mut pos = 0;
    let base_size = varint(delta, &mut pos)?;
    let size = varint(delta, &mut pos)?;
    if base_size != base.len() {
        return Err(unread("a delta for another base"));
    }
    if size > MAX_HELD {
        return Err(unread("the fetched objects are larger than held here"));
    }
    let mut out = Vec::with_capacity(size);
    while pos < delta.len() {
        let op = delta[pos];
        pos += 1;
        if op & 0x80 != 0 {
            // Copy from the base: up to four offset bytes, three size bytes.
            let mut offset = 0usize;
            for i in 0..4 {
                if op & (1 << i) != 0 {
                    offset |= usize::from(byte(delta, &mut pos)?) << (8 * i);
                }
            }
            let mut len = 0usize;
            for i in 0..3 {
                if op & (0x10 << i) != 0 {
                    len |= usize::from(byte(delta, &mut pos)?) << (8 * i);
                }
            }
            if len == 0 {
                len = 0x10000;
            }
            let piece = offset
                .checked_add(len)
                .and_then(|end| base.get(offset..end))
                .ok_or_else(|| unread("a delta copies past its base"))?;
            out.extend_from_slice(piece);
        } else if op != 0 {
            let n = usize::from(op);
            let piece = delta
                .get(pos..pos + n)
                .ok_or_else(|| unread("a delta ends early"))?;
            out.extend_from_slice(piece);
            pos += n;
        } else {
            return Err(unread("a delta opcode 0"));
        }
        if out.len() > size {
            return Err(unread("a delta longer than it says"));
        }
    }
    if out.len() != size {
        return Err(unread("a delta shorter than it says"));
    }
    Ok(out)
}

fn varint(data: &[u8], pos: &mut usize) -> Result<usize, Unread> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let c = byte(data, pos)?;
        if shift > 56 {
            return Err(unread("a delta size too large"));
        }
        v |= u64::from(c & 0x7f) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            break;
        }
    }
    usize::try_from(v).map_err(|_| unread("a delta size too large"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut c = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input).unwrap();
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "git {args:?}");
        out.stdout
    }

    /// Every object `cat-file` streams, as a sorted list of contents.
    fn cat_file(dir: &Path) -> Vec<Vec<u8>> {
        let out = git(dir, &["cat-file", "--batch-all-objects", "--batch"], b"");
        let mut objects = vec![];
        let mut rest = &out[..];
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            let header = std::str::from_utf8(&rest[..nl]).unwrap();
            let size: usize = header.rsplit(' ').next().unwrap().parse().unwrap();
            objects.push(rest[nl + 1..nl + 1 + size].to_vec());
            rest = &rest[nl + 2 + size..];
        }
        objects.sort();
        objects
    }

    #[test]
    fn reads_what_cat_file_reads_from_a_packed_repository_with_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "--bare", "."], b"");
        // Blobs alike enough for git to store them as offset deltas.
        let text: String = (0..400)
            .map(|i| format!("line {i} of the text\n"))
            .collect();
        let mut tree = String::new();
        for i in 0..6 {
            let blob = format!("{text}variant {i}\n");
            let id = git(repo, &["hash-object", "-w", "--stdin"], blob.as_bytes());
            let id = String::from_utf8(id).unwrap();
            tree.push_str(&format!("100644 blob {}\tf{i}\n", id.trim()));
        }
        // Reachable, so that repack packs them.
        let tree = String::from_utf8(git(repo, &["mktree"], tree.as_bytes())).unwrap();
        let commit = git(
            repo,
            &[
                "-c",
                "user.name=a",
                "-c",
                "user.email=a@b",
                "commit-tree",
                tree.trim(),
                "-m",
                "m",
            ],
            b"",
        );
        let commit = String::from_utf8(commit).unwrap();
        git(repo, &["update-ref", "refs/heads/main", commit.trim()], b"");
        git(repo, &["repack", "-adq", "--window=10"], b"");
        let listing =
            String::from_utf8(git(repo, &["verify-pack", "-v", &pack_idx(repo)], b"")).unwrap();
        assert!(
            listing.lines().any(|l| l.split_whitespace().count() == 7),
            "no delta in the pack:\n{listing}"
        );
        let mut ours = vec![];
        each_object(repo, &mut |o| ours.push(o.to_vec())).unwrap();
        ours.sort();
        assert_eq!(ours, cat_file(repo));
        // A loose object is for git to read.
        git(repo, &["hash-object", "-w", "--stdin"], b"loose");
        let e = each_object(repo, &mut |_| {}).unwrap_err();
        assert!(e.0.contains("is not a pack"), "{e:?}");
    }

    fn pack_idx(repo: &Path) -> String {
        let pack = repo.join("objects/pack");
        let idx = std::fs::read_dir(&pack)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .find(|n| n.ends_with(".idx"))
            .unwrap();
        pack.join(idx).to_string_lossy().into_owned()
    }

    #[test]
    fn a_pack_out_of_bounds_is_unread_never_a_panic() {
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
        // One blob claiming 2^60 bytes.
        pack.extend([0xb0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]);
        assert!(read_pack(&pack, &mut |_| {}).is_err());
        for cut in [0, 3, 11, 12, 13] {
            assert!(read_pack(&pack[..cut.min(pack.len())], &mut |_| {}).is_err());
        }
        // An offset delta reaching before the pack.
        let mut delta = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
        delta.extend([0x60, 0x7f]);
        assert!(read_pack(&delta, &mut |_| {}).is_err());
    }

    #[test]
    fn a_delta_copies_and_inserts() {
        let base = b"hello, world";
        // Base 12 bytes, result 12: copy 7 at 0 ("hello, "), insert 5.
        let mut d = vec![12, 12];
        d.extend([0x80 | 0x10, 7]);
        d.push(5);
        d.extend(b"there");
        assert_eq!(apply_delta(base, &d).unwrap(), b"hello, there");
        // A copy past the base is refused, not read.
        let bad = vec![12, 4, 0x80 | 0x01 | 0x10, 10, 4];
        assert!(apply_delta(base, &bad).is_err());
    }
}
