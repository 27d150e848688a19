//! Escaping for everything runwarden prints.
//!
//! Names found on shared surfaces are attacker controlled. Two layers keep
//! them harmless:
//! - [`bytes`] renders raw surface data (a file name, a link target) as a
//!   quoted, ASCII-only string, so no control character, newline or invalid
//!   UTF-8 ever reaches a report or a terminal as such;
//! - [`line`] makes any text safe to print on one line of a GitHub Actions
//!   log: it applies the workflow-command data escaping (`%`, `\r`, `\n`) and
//!   breaks the two command forms the runner honours, a line whose trimmed
//!   start is `::` and a `##[` anywhere in a line.

use std::fmt::Write as _;

/// Renders raw bytes as a double-quoted, printable ASCII string.
///
/// Printable ASCII stays as it is (with `"` and `\` escaped); every other
/// byte becomes `\n`, `\t`, `\r` or `\xNN`. Valid multi-byte UTF-8 is also
/// escaped: a name that looks like another name (homoglyphs, bidi controls)
/// must not deceive the reader.
pub fn bytes(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len() + 2);
    out.push('"');
    for &b in raw {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    out
}

/// Characters that change how text around them reads without showing
/// themselves: bidi controls, zero-width characters, the BOM, tags.
pub fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{e0000}'..='\u{e007f}')
}

/// At most `max` characters of `s`, with `…` where it was cut.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Makes `text` safe as (part of) one line of an Actions log.
///
/// `%` -> `%25`, `\r` -> `%0D`, `\n` -> `%0A` (the runner's data escaping,
/// `%` first), other control characters -> `%XX`, an [`invisible`]
/// character (a bidi control, a zero-width one) -> `\u{XXXX}`, a leading
/// `::` (after whitespace) gets its first colon escaped as `%3A`, and
/// every `##[` loses its first `#` to `%23`. The result never contains a
/// line break, never starts a workflow command, never contains `##[`, and
/// reads as it shows.
pub fn line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let lead = chars.iter().take_while(|c| c.is_whitespace()).count();
    for (i, &c) in chars.iter().enumerate() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            ':' if i == lead && chars.get(i + 1) == Some(&':') => out.push_str("%3A"),
            '#' if chars.get(i + 1) == Some(&'#') && chars.get(i + 2) == Some(&'[') => {
                out.push_str("%23")
            }
            c if invisible(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "%{b:02X}");
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// A line's start made safe on its own: when its trimmed start is `::`
/// (a workflow command), the first colon becomes `%3A`, as [`line`] does.
/// For a piece of an already escaped line that now starts a line of its
/// own (a wrapped line's continuation): [`line`] checked only the start
/// of the whole.
pub fn start(piece: &str) -> String {
    let rest = piece.trim_start();
    match rest.strip_prefix("::") {
        Some(after) => format!("{}%3A:{after}", &piece[..piece.len() - rest.len()]),
        None => piece.to_string(),
    }
}

/// The runner's data escaping only (`%`, `\r`, `\n`): for the value of a
/// command such as `::add-mask::`, which the runner unescapes exactly so.
pub fn data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Makes a serialized JSON document safe to print in an Actions log.
///
/// serde_json already escapes control characters inside strings, and no
/// JSON line can start with `::` outside a string, so the one remaining
/// hazard is a `##[` inside a string value: its first `#` becomes the JSON
/// escape `\u0023`, which decodes to the same text.
pub fn json(serialized: &str) -> String {
    serialized.replace("##[", "\\u0023#[")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_that_starts_a_line_cannot_start_a_command() {
        assert_eq!(start("  ::error::x"), "  %3A:error::x");
        assert_eq!(start("a ::error::x"), "a ::error::x");
        assert_eq!(start(":x"), ":x");
    }

    #[test]
    fn bytes_escapes_everything_unprintable() {
        assert_eq!(bytes(b"a\nb"), r#""a\nb""#);
        assert_eq!(bytes(b"\xff\x00"), r#""\xff\x00""#);
        assert_eq!(bytes("é".as_bytes()), r#""\xc3\xa9""#);
        assert_eq!(bytes(b"q\"\\"), r#""q\"\\""#);
    }

    #[test]
    fn line_breaks_commands() {
        assert_eq!(line("::set-output name=a::b"), "%3A:set-output name=a::b");
        assert_eq!(line("  ::x"), "  %3A:x");
        assert_eq!(line("a ::b"), "a ::b");
        assert_eq!(line("x##[error]y"), "x%23#[error]y");
        assert_eq!(line("###[e"), "#%23#[e");
        assert_eq!(line("%0A::warning::y"), "%250A::warning::y");
        assert_eq!(line("a\nb\rc"), "a%0Ab%0Dc");
        assert_eq!(line("a\u{1b}[31m"), "a%1B[31m");
        for hostile in [
            "x\n::set-output name=a::b",
            "##[error]x",
            "%0A::warning::y",
            "\n##[x",
        ] {
            let out = line(hostile);
            assert!(
                !out.contains('\n') && !out.contains("##[") && !out.trim_start().starts_with("::")
            );
        }
    }

    #[test]
    fn json_keeps_meaning() {
        let s = serde_json::to_string(&"a##[b").unwrap();
        let safe = json(&s);
        assert!(!safe.contains("##["));
        assert_eq!(serde_json::from_str::<String>(&safe).unwrap(), "a##[b");
    }
}
