//! Bazel's `ActionResult` (the Remote Execution API's, protobuf), as much
//! of it as an action cache entry needs: encoded with one output file,
//! and decoded, bounded, to the digests of the blobs it points at.
//!
//! The wire format is five rules (varints, length-delimited fields): a
//! protobuf crate and its code generator for three messages would be two
//! dependencies and a build step. Field numbers (remote_execution.proto):
//! `ActionResult { repeated OutputFile output_files = 2; int32 exit_code
//! = 4; bytes stdout_raw = 5; Digest stdout_digest = 6; bytes stderr_raw =
//! 7; Digest stderr_digest = 8; }`, `OutputFile { string path = 1; Digest
//! digest = 2; }`, `Digest { string hash = 1; int64 size_bytes = 2; }`.
//! What a cache hands back is hostile: a decode that does not finish
//! inside the bytes is no action result.

/// The most digests one action result is followed to: a real one of a
/// single action has a handful; a hostile one may claim millions.
pub(super) const MAX_DIGESTS: usize = 64;

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes_field(num: u64, data: &[u8], out: &mut Vec<u8>) {
    varint((num << 3) | 2, out);
    varint(data.len() as u64, out);
    out.extend_from_slice(data);
}

fn digest(hash: &str, size: usize) -> Vec<u8> {
    let mut d = Vec::new();
    bytes_field(1, hash.as_bytes(), &mut d);
    if size > 0 {
        varint(2 << 3, &mut d);
        varint(size as u64, &mut d);
    }
    d
}

/// An action result with one output file at `path`, the blob of
/// `hash` (its SHA-256) and `size`.
pub(super) fn action_result(path: &str, hash: &str, size: usize) -> Vec<u8> {
    let mut file = Vec::new();
    bytes_field(1, path.as_bytes(), &mut file);
    bytes_field(2, &digest(hash, size), &mut file);
    let mut out = Vec::new();
    bytes_field(2, &file, &mut out);
    out
}

/// An action result with no output, whose stdout is `text` (the delete
/// check's entry: a valid action result that points at nothing).
pub(super) fn bare_result(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    bytes_field(5, text, &mut out);
    out
}

/// The stdout of an action result that is nothing else (one field:
/// [`bare_result`]'s form), when it is one.
pub(super) fn inline_text(buf: &[u8]) -> Option<&[u8]> {
    match fields(buf)?.as_slice() {
        [
            Field {
                num: 5,
                data: Some(d),
            },
        ] => Some(d),
        _ => None,
    }
}

/// One field of a message: its number, and its bytes when
/// length-delimited.
struct Field<'a> {
    num: u64,
    data: Option<&'a [u8]>,
}

/// The fields of `buf`, or `None` when it is no protobuf message (a
/// field runs past the end, a wire type that is not one, a group).
fn fields(buf: &[u8]) -> Option<Vec<Field<'_>>> {
    let mut at = 0usize;
    let mut out = vec![];
    let read_varint = |at: &mut usize| -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *buf.get(*at)?;
            *at += 1;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    };
    while at < buf.len() {
        let tag = read_varint(&mut at)?;
        let (num, wire) = (tag >> 3, tag & 7);
        if num == 0 {
            return None;
        }
        let data = match wire {
            0 => {
                read_varint(&mut at)?;
                None
            }
            1 | 5 => {
                at = at.checked_add(if wire == 1 { 8 } else { 4 })?;
                None
            }
            2 => {
                let len = usize::try_from(read_varint(&mut at)?).ok()?;
                let end = at.checked_add(len)?;
                let d = buf.get(at..end)?;
                at = end;
                Some(d)
            }
            _ => return None,
        };
        if at > buf.len() {
            return None;
        }
        out.push(Field { num, data });
    }
    Some(out)
}

/// The hash of a `Digest` message, when it is 64 lowercase hex digits
/// (SHA-256: the only hash a request is built from).
fn digest_hash(d: &[u8]) -> Option<String> {
    let f = fields(d)?;
    let h = f.iter().find(|x| x.num == 1)?.data?;
    let h = std::str::from_utf8(h).ok()?;
    crate::surface::lower_hex(h, 64).then(|| h.to_string())
}

/// What an action result points at: its output files' and its stdout's
/// and stderr's blobs (at most [`MAX_DIGESTS`], each once), and its
/// output files' paths. `None` when it is no action result.
pub(super) struct Decoded {
    pub digests: Vec<String>,
    pub paths: Vec<Vec<u8>>,
    /// More digests than were kept.
    pub more: bool,
}

pub(super) fn decode(buf: &[u8]) -> Option<Decoded> {
    let mut d = Decoded {
        digests: vec![],
        paths: vec![],
        more: false,
    };
    let add = |h: Option<String>, d: &mut Decoded| {
        if let Some(h) = h
            && !d.digests.contains(&h)
        {
            if d.digests.len() < MAX_DIGESTS {
                d.digests.push(h);
            } else {
                d.more = true;
            }
        }
    };
    for f in fields(buf)? {
        match (f.num, f.data) {
            (2, Some(file)) => {
                let ff = fields(file)?;
                if let Some(p) = ff.iter().find(|x| x.num == 1).and_then(|x| x.data) {
                    d.paths.push(p.to_vec());
                }
                let h = ff
                    .iter()
                    .find(|x| x.num == 2)
                    .and_then(|x| x.data)
                    .and_then(digest_hash);
                add(h, &mut d);
            }
            (6 | 8, Some(dg)) => add(digest_hash(dg), &mut d),
            _ => {}
        }
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_result_decodes_to_the_blob_it_points_at() {
        let h = "a".repeat(64);
        let ar = action_result("runwarden/x", &h, 12);
        let d = decode(&ar).unwrap();
        assert_eq!(d.digests, vec![h]);
        assert_eq!(d.paths, vec![b"runwarden/x".to_vec()]);
        assert!(decode(&bare_result(b"hello")).unwrap().digests.is_empty());
    }

    #[test]
    fn hostile_bytes_are_no_action_result_and_never_panic() {
        // A length past the end, a group, field 0, a varint that never ends.
        for bad in [
            &[0x12, 0x05, 0x01][..],
            &[0x13][..],
            &[0x00, 0x01][..],
            &[
                0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ][..],
        ] {
            assert!(decode(bad).is_none(), "{bad:?}");
        }
        // A hash that is no SHA-256 is not followed.
        let ar = action_result("p", "../../etc/passwd", 1);
        assert!(decode(&ar).unwrap().digests.is_empty());
        // Every prefix of a real one: decoded or refused, never a panic.
        let ar = action_result("runwarden/x", &"b".repeat(64), 3);
        for n in 0..ar.len() {
            let _ = decode(&ar[..n]);
        }
        // Thousands of outputs: at most MAX_DIGESTS followed.
        let mut many = vec![];
        for i in 0..200 {
            many.extend(action_result("p", &format!("{i:064x}"), 1));
        }
        let d = decode(&many).unwrap();
        assert_eq!(d.digests.len(), MAX_DIGESTS);
        assert!(d.more);
    }
}
