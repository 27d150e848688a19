//! One snapshot entry as one line of text: tab-separated fields, each
//! escaped ([`escape_field`]).
//!
//! Why not JSON: a watch writes and reads back every entry of a tree (a
//! million, on a runner's tool cache); parsing JSON was a fifth of a
//! watch's time. A snapshot is read only by the binary that wrote it, in
//! the same job, so its line needs no schema.

use super::snapshot::Entry;
use std::collections::BTreeMap;
use std::io;

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
    use crate::state::snapshot::listed;

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
}
