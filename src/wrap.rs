//! Lines fitted to a width, below every module that prints: what
//! runwarden writes to a terminal fits the terminal, and the prose of what it writes elsewhere (a pipe, a file, a
//! log) is wrapped at [`PROSE`] columns, while table rows stay whole there
//! (a program or `grep` reads them).
//!
//! Wrapping works on text that is already escaped ([`crate::escape`]), so
//! it must keep what escaping promised: a piece of a line that starts a
//! line of its own passes through [`crate::escape::start`] (a wrapped
//! `a ::error::x` must not leave `::error::x` at a line's start), and it
//! breaks only at a space, which cannot split a `##[` into being. Widths
//! count terminal columns, a character other than ASCII as two
//! ([`cols`]).

/// The width piped prose is wrapped at.
pub const PROSE: usize = 100;

/// The fewest columns a wrapped line's text gets beside its hanging
/// indent: below this the indent shrinks instead.
const MIN_TEXT: usize = 24;

/// Every line of `text` fitted to `width`, each continuation indented two
/// columns past its line's own indent.
pub fn text(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for l in text.split_inclusive('\n') {
        let (body, nl) = match l.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (l, ""),
        };
        let indent = body.len() - body.trim_start_matches(' ').len();
        let lines = line(body, width, indent, indent + 2);
        out.push_str(&lines.join("\n"));
        out.push_str(nl);
    }
    out
}

/// `l` fitted to `width`: broken at spaces after its first `keep` bytes
/// (a row's padded columns, a line's indent), each continuation indented
/// `hang` columns (less when that would leave under [`MIN_TEXT`]). A
/// word longer than a line is cut, except a link, which is never cut: it
/// goes on a line of its own, unindented when it does not fit indented.
pub fn line(l: &str, width: usize, keep: usize, hang: usize) -> Vec<String> {
    if cols(l) <= width || width == 0 {
        return vec![l.to_string()];
    }
    // At least one column: only a row starts at column 0 (a continuation
    // there could pass for a row of its own), and a link that cannot fit.
    let hang = if width.saturating_sub(hang) < MIN_TEXT {
        width.saturating_sub(MIN_TEXT).clamp(1, 2)
    } else {
        hang.max(1)
    };
    let keep = keep.min(l.len());
    let mut out: Vec<String> = Vec::new();
    let mut rest = l;
    // The first line keeps its head whole; a continuation starts at the
    // hanging indent.
    let mut head = keep;
    let mut indent = 0;
    loop {
        // A piece that will start a line with `::` gets two characters
        // more (see [`piece`]).
        let guarded = if rest.trim_start().starts_with("::") {
            2
        } else {
            0
        };
        let room = width.saturating_sub(indent + guarded).max(1);
        if cols(rest) <= room {
            out.push(piece(indent, rest));
            break;
        }
        let (cut, next) = break_at(rest, head, room);
        out.push(piece(indent, &rest[..cut]));
        rest = &rest[next..];
        if rest.is_empty() {
            break;
        }
        head = 0;
        indent = hang;
        // A link that does not fit at the indent goes unindented.
        let word = rest.split(' ').next().unwrap_or("");
        if is_link(word) && cols(word) > width.saturating_sub(hang) {
            indent = 0;
        }
    }
    out
}

/// Where to cut `s` so that its first part has at most `room` characters:
/// (the end of that part, where the rest starts). At the last space within
/// `room` after byte `head` (the space is dropped); with none, after the
/// first word when it is a link (a link is never cut), else at `room`.
fn break_at(s: &str, head: usize, room: usize) -> (usize, usize) {
    let limit = at_column(s, room);
    if limit <= head {
        // The kept head is wider than the line: it ends this line (its
        // padding dropped), the rest starts the next.
        return (s[..head].trim_end().len(), head);
    }
    let space = if s[limit..].starts_with(' ') {
        Some(limit)
    } else {
        s[..limit].rfind(' ')
    };
    if let Some(sp) = space.filter(|&sp| sp > head) {
        return (sp, sp + 1);
    }
    let word_start = s[..head]
        .rfind(' ')
        .map_or(0, |i| i + 1)
        .max(head.min(s.len()));
    let word_end = s[word_start..]
        .find(' ')
        .map_or(s.len(), |i| word_start + i);
    if is_link(&s[word_start..word_end]) {
        // A link whole, passing the width.
        return match s[word_end..].strip_prefix(' ') {
            Some(_) => (word_end, word_end + 1),
            None => (word_end, word_end),
        };
    }
    (limit, limit)
}

/// How many terminal columns `s` takes, counted so that it never takes
/// more than this: ASCII one each, any other character two (a CJK
/// character is two; a combining one, counted two, only makes the line
/// shorter than it could be). Surface data that `escape::line` keeps as
/// it is (printable non-ASCII) must not pass the edge and let the
/// terminal's own wrap start a line with it.
pub fn cols(s: &str) -> usize {
    s.chars().map(|c| if c.is_ascii() { 1 } else { 2 }).sum()
}

/// The byte index in `s` where its first `room` columns ([`cols`]) end.
fn at_column(s: &str, room: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += if c.is_ascii() { 1 } else { 2 };
        // (Never before the first character: every line takes one.)
        if used > room && i > 0 {
            return i;
        }
    }
    s.len()
}

/// A URL: never cut, so that it still leads somewhere.
fn is_link(word: &str) -> bool {
    word.starts_with("https://") || word.starts_with("http://")
}

/// One line of the result: `indent` spaces, then `text`, its start made
/// safe again (see the module doc).
fn piece(indent: usize, text: &str) -> String {
    crate::escape::start(&format!("{:indent$}{text}", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_at_spaces_with_a_hanging_indent() {
        let l = "  not-tested path:/tmp: no channel of the config tests it";
        assert_eq!(
            line(l, 30, 2, 4),
            [
                "  not-tested path:/tmp: no",
                "    channel of the config",
                "    tests it"
            ]
        );
        for w in [10, 20, 30, 40, 80] {
            for piece in line(l, w, 2, 4) {
                assert!(piece.chars().count() <= w, "{w}: {piece:?}");
            }
        }
    }

    #[test]
    fn a_row_keeps_its_columns_and_hangs_its_last_one() {
        let l = "FAIL     s:file-name  run B listed the entry whose name carries the nonce";
        let got = line(l, 50, 21, 21);
        assert_eq!(got[0], "FAIL     s:file-name  run B listed the entry whose");
        assert_eq!(got[1], "                     name carries the nonce");
    }

    #[test]
    fn a_link_is_never_cut() {
        let link =
            "https://github.com/runwarden/action/blob/main/docs/surfaces/filesystem.md#close-it";
        let got = line(&format!("close it: {link}"), 40, 0, 4);
        assert_eq!(got, ["close it:".to_string(), link.to_string()]);
        let got = line(&format!("{link} then more words"), 40, 0, 4);
        assert_eq!(got[0], link);
    }

    #[test]
    fn a_long_word_is_cut_and_nothing_is_lost() {
        let l = "x".repeat(95) + " tail";
        let got = line(&l, 40, 0, 2);
        assert!(got.iter().all(|p| p.chars().count() <= 40), "{got:?}");
        let joined: String = got.iter().map(|p| p.trim_start()).collect();
        assert_eq!(joined, l);
    }

    #[test]
    fn wide_characters_count_two_columns() {
        let l = format!("  origin: {}PASS     s:forged  job", "漢".repeat(35));
        for piece in line(&l, 80, 0, 2) {
            assert!(cols(&piece) <= 80, "{piece}");
        }
        assert_eq!(cols("a漢"), 3);
        // One column of room still moves on, a character at a time.
        assert_eq!(line("漢漢", 1, 0, 0).len(), 2);
    }

    #[test]
    fn a_continuation_never_starts_at_column_0() {
        let l = "detail: PASS     forged:row  PASS     forged:row";
        for w in 6..l.len() {
            for piece in &line(l, w, 0, 0)[1..] {
                assert!(piece.starts_with(' '), "{w}: {piece:?}");
            }
        }
    }

    #[test]
    fn no_piece_starts_a_workflow_command() {
        let l = "detail: a ::error::x ::warning::y ::notice::z ::set-output name=a::b";
        for w in 8..l.len() {
            for piece in line(l, w, 0, 2) {
                assert!(!piece.trim_start().starts_with("::"), "{w}: {piece:?}");
                assert!(piece.chars().count() <= w.max(8), "{w}: {piece:?}");
            }
        }
    }
}
