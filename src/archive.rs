//! Package archives for the registry surfaces: a ustar archive inside a
//! gzip member whose deflate blocks are stored, not compressed (npm
//! tarballs, Python sdists), and a zip of stored entries (Python wheels).
//!
//! Why stored: the plant's nonce then stands in the archive's raw bytes,
//! so run B finds it by searching the download as it arrives, with no
//! decompressor in the binary. The result is a valid `.tgz` / `.tar.gz`
//! that npm, pip and tar read like any other.

/// One regular file: path inside the archive and content.
pub type File<'a> = (&'a str, &'a [u8]);

/// A ustar archive of `files` (mode 0644, mtime 0, owner 0).
pub fn tar(files: &[File<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, data) in files {
        let mut h = [0u8; 512];
        let name = path.as_bytes();
        h[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
        let octal = |h: &mut [u8; 512], at: usize, len: usize, v: u64| {
            let s = format!("{v:0w$o}\0", w = len - 1);
            h[at..at + len].copy_from_slice(s.as_bytes());
        };
        octal(&mut h, 100, 8, 0o644);
        octal(&mut h, 108, 8, 0);
        octal(&mut h, 116, 8, 0);
        octal(&mut h, 124, 12, data.len() as u64);
        octal(&mut h, 136, 12, 0);
        h[148..156].copy_from_slice(b"        ");
        h[156] = b'0';
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        let s = format!("{sum:06o}\0 ");
        h[148..156].copy_from_slice(s.as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

/// `data` as one gzip member of stored deflate blocks.
pub fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(c) = chunks.next() {
        let last = u8::from(chunks.peek().is_none());
        let len = c.len() as u16;
        out.push(last);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// A `.tgz` of `files`.
pub fn tgz(files: &[File<'_>]) -> Vec<u8> {
    gzip_stored(&tar(files))
}

/// A zip of `files`, every entry stored (method 0), no timestamps.
pub fn zip_stored(files: &[File<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (path, data) in files {
        let offset = out.len() as u32;
        let crc = crc32(data);
        let size = data.len() as u32;
        let name = path.as_bytes();
        let common = |v: &mut Vec<u8>| {
            v.extend_from_slice(&20u16.to_le_bytes()); // version needed
            v.extend_from_slice(&0u16.to_le_bytes()); // flags
            v.extend_from_slice(&0u16.to_le_bytes()); // stored
            v.extend_from_slice(&0u16.to_le_bytes()); // time
            v.extend_from_slice(&0x21u16.to_le_bytes()); // date: 1980-01-01
            v.extend_from_slice(&crc.to_le_bytes());
            v.extend_from_slice(&size.to_le_bytes());
            v.extend_from_slice(&size.to_le_bytes());
            v.extend_from_slice(&(name.len() as u16).to_le_bytes());
            v.extend_from_slice(&0u16.to_le_bytes()); // extra
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name);
        out.extend_from_slice(data);
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // made by
        common(&mut central);
        central.extend_from_slice(&[0; 6]); // comment, disk, internal attrs
        central.extend_from_slice(&0u32.to_le_bytes()); // external attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name);
    }
    let cd_offset = out.len() as u32;
    let n = files.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// The files of a zip whose names `want` takes, each at most `max` bytes
/// inflated: stored or deflated entries, read through the central
/// directory, each checked against its CRC-32. A zip is hostile (an
/// artifact an untrusted run uploaded): anything out of bounds, a zip64
/// size, another method, a CRC that does not match, or more than 64
/// entries is an error.
pub fn unzip(
    zip: &[u8],
    max: usize,
    want: &dyn Fn(&str) -> bool,
) -> Result<Vec<(String, Vec<u8>)>, crate::fault::Fault> {
    use crate::fault::Fault;
    let short = || Fault::invalid("the zip is cut short");
    let u16_at = |at: usize| {
        zip.get(at..at + 2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])))
            .ok_or_else(short)
    };
    let u32_at = |at: usize| {
        zip.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(short)
    };
    // The end of central directory record: within the last 64 KiB + 22.
    let floor = zip.len().saturating_sub(65_557);
    let eocd = (floor..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| zip[i..i + 4] == 0x0605_4b50u32.to_le_bytes())
        .ok_or_else(|| Fault::invalid("no zip end record: not a zip"))?;
    let entries = u16_at(eocd + 10)?;
    if entries > 64 {
        return Err(Fault::invalid(format!(
            "the zip holds {entries} entries, more than 64"
        )));
    }
    let mut at = u32_at(eocd + 16)? as usize;
    let mut out = vec![];
    // Entries that share data (a zip bomb of 64 names over one deflated
    // stream) are refused, and all of them together stay under `max`.
    let mut offsets = std::collections::HashSet::new();
    let mut total = 0usize;
    for _ in 0..entries {
        if u32_at(at)? != 0x0201_4b50 {
            return Err(Fault::invalid(
                "a central directory entry is not where the zip says",
            ));
        }
        let method = u16_at(at + 10)?;
        let crc = u32_at(at + 16)?;
        let (packed, size) = (u32_at(at + 20)?, u32_at(at + 24)?);
        let (n, e, c) = (u16_at(at + 28)?, u16_at(at + 30)?, u16_at(at + 32)?);
        let local = u32_at(at + 42)? as usize;
        let name = zip.get(at + 46..at + 46 + n).ok_or_else(short)?;
        let name = String::from_utf8_lossy(name).into_owned();
        at += 46 + n + e + c;
        if !want(&name) {
            continue;
        }
        if packed == u32::MAX || size == u32::MAX || size as usize > max {
            return Err(Fault::invalid(format!(
                "{name} in the zip is larger than {max} bytes"
            )));
        }
        total += size as usize;
        if total > max || !offsets.insert(local) {
            return Err(Fault::invalid(
                "the zip's entries share data or together exceed the bound",
            ));
        }
        if u32_at(local)? != 0x0403_4b50 {
            return Err(Fault::invalid("a local header is not where the zip says"));
        }
        let start = local + 30 + u16_at(local + 26)? + u16_at(local + 28)?;
        let data = zip.get(start..start + packed as usize).ok_or_else(short)?;
        let data = match method {
            0 => data.to_vec(),
            8 => miniz_oxide::inflate::decompress_to_vec_with_limit(data, max).map_err(|e| {
                Fault::invalid(format!("{name} in the zip does not inflate: {e:?}"))
            })?,
            m => {
                return Err(Fault::invalid(format!(
                    "{name} in the zip uses compression method {m}"
                )));
            }
        };
        if data.len() != size as usize || crc32(&data) != crc {
            return Err(Fault::invalid(format!(
                "{name} in the zip does not match its CRC-32 and size"
            )));
        }
        out.push((name, data));
    }
    Ok(out)
}

/// CRC-32 (IEEE), bit by bit: archives here are a few KiB.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zip_reads_back_and_a_hostile_one_is_refused() {
        let z = zip_stored(&[("a.json", b"{}"), ("b.txt", b"x")]);
        let got = unzip(&z, 1024, &|n| n.ends_with(".json")).unwrap();
        assert_eq!(got, vec![("a.json".to_string(), b"{}".to_vec())]);
        // Every prefix and a flipped byte: an error, never a panic.
        for n in 0..z.len() {
            let _ = unzip(&z[..n], 1024, &|_| true);
        }
        let mut bad = z.clone();
        bad[40] ^= 1;
        assert!(unzip(&bad, 1024, &|_| true).is_err());
        assert!(unzip(&z, 1, &|_| true).is_err());
        // Two names over one entry's data: refused.
        let mut twice = zip_stored(&[("a.json", b"{}"), ("b.json", b"{}")]);
        let cd = u32::from_le_bytes(twice[twice.len() - 6..twice.len() - 2].try_into().unwrap())
            as usize;
        let second = cd + 46 + "a.json".len();
        twice[second + 42..second + 46].copy_from_slice(&0u32.to_le_bytes());
        assert!(unzip(&twice, 1024, &|_| true).is_err());
        // Python's zipfile with deflate, as upload-artifact compresses.
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("d.zip");
        let make = "import zipfile,sys;z=zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_DEFLATED);z.writestr('r.json','{\"k\": '+'1'*5000+'}');z.close()";
        stdout_of(
            std::process::Command::new("python3")
                .args(["-c", make])
                .arg(&f),
        );
        let got = unzip(&std::fs::read(&f).unwrap(), 1 << 20, &|_| true).unwrap();
        assert_eq!(got[0].1.len(), 5007);
    }

    #[test]
    fn crc32_matches_the_check_value() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    /// What `cmd` prints, asserting it succeeded.
    fn stdout_of(cmd: &mut std::process::Command) -> Vec<u8> {
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        out.stdout
    }

    #[test]
    fn tar_gzip_and_zip_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.tgz");
        std::fs::write(&f, tgz(&[("package/x.txt", b"hello nonce\n")])).unwrap();
        let tar = stdout_of(std::process::Command::new("tar").arg("-xzOf").arg(&f));
        assert_eq!(tar, b"hello nonce\n");
        // Python's zipfile reads the wheel form.
        let w = dir.path().join("a.whl");
        let wheel = zip_stored(&[("a/METADATA", b"Name: a\n"), ("a/RECORD", b"")]);
        std::fs::write(&w, wheel).unwrap();
        let check = "import zipfile,sys;z=zipfile.ZipFile(sys.argv[1]);assert z.testzip() is None;print(z.read('a/METADATA').decode(),end='')";
        let py = stdout_of(
            std::process::Command::new("python3")
                .args(["-c", check])
                .arg(&w),
        );
        assert_eq!(py, b"Name: a\n");
    }
}
