//! The one renderer of untrusted text into GitHub Markdown (the sticky
//! comment, the check run's summary, the job summary).
//!
//! Everything a surface, a server or a relayed report says is untrusted:
//! names, details, fact keys and values, labels. GitHub turns far more
//! than HTML into live markup: cmark-gfm autolinks bare `www.` domains and
//! URLs, and after rendering GitHub's own filters turn `@user`,
//! `@org/team`, `#N`, `owner/repo#N` and commit SHAs in the text into
//! mentions and references, entity-escaped or not (an `&#64;` is an `@`
//! once decoded: github/cmark-gfm#181). The one place none of that
//! happens is a code span: no autolink, no entity decoding, no HTML, and
//! GitHub's mention and reference filters skip `<code>`. So untrusted
//! text is only ever written as a code span, whose fence is longer than
//! any run of backticks inside it, on one line, with no control or
//! invisible formatting character (a bidi override could make it read as
//! something else), and inside a table with every `|` escaped (the table
//! extension splits cells before inline parsing, even inside a code
//! span, and takes `\|` back to `|`).
//!
//! `tests/common/markdown.rs` renders every Markdown output with
//! cmark-gfm itself (PyPI `cmarkgfm`) and checks that surface data makes
//! no element but `<code>`.

/// Untrusted text as an inert code span in running text (a list item, a
/// sentence). Empty text is `""` in a code span, so the reader sees that
/// it was empty.
pub fn text(s: &str) -> String {
    span(s, false)
}

/// Untrusted text as an inert code span inside a table cell (nothing at
/// all for empty text: the cell shows it is empty).
pub fn cell(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    span(s, true)
}

/// An identifier (a surface name, a channel id, a fact key) as plain text
/// when it is one that can make no markup: lowercase letters, digits and
/// `-`, with at most one `:` between two of them (a channel id; `:x:` is
/// an emoji, `_x_` emphasis), and no run of hex digits long enough to be
/// taken for a commit; anything else as a code span (safe in a table cell
/// too).
pub fn word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b':'))
        && s.matches(':').count() <= 1
        && !s.starts_with(':')
        && !s.ends_with(':')
        && !s
            .split(|c: char| !c.is_ascii_hexdigit())
            .any(|run| run.len() >= 7);
    if plain { s.to_string() } else { span(s, true) }
}

fn span(s: &str, in_table: bool) -> String {
    let mut body = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '|' if in_table => body.push_str("\\|"),
            c if c.is_control() => body.push(' '),
            c if invisible(c) => body.push('?'),
            c => body.push(c),
        }
    }
    if body.is_empty() {
        body.push_str("\"\"");
    }
    // Markdown outputs are also printed where the runner reads workflow
    // commands (a job log): `##[` anywhere in a line would be one. A word
    // joiner between the two `#` keeps it from being one, and shows as
    // nothing.
    let body = body.replace("##[", "#\u{2060}#[");
    // A fence one backtick longer than the longest run inside, and a
    // space on each side (CommonMark strips exactly one), so a leading or
    // trailing backtick cannot close the span.
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    format!("{fence} {body} {fence}")
}

use crate::escape::invisible;

/// A link to the docs of a carrier, built only from what runwarden itself
/// knows: a registered surface type (or the canary kind) and a kebab-case
/// carrier id; anything else (a relayed report can say anything) links
/// to the docs index.
pub fn docs_link(surface_type: &str, carrier: &str) -> String {
    const BASE: &str = "https://github.com/runwarden/action/blob/main/docs";
    if surface_type == crate::report::CANARY_TYPE {
        return format!("{BASE}/watch.md#canaries");
    }
    let known = crate::surface::by_name(surface_type).is_some();
    let kebab = !carrier.is_empty()
        && carrier.len() <= 64
        && carrier
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if known && kebab {
        format!("{BASE}/surfaces/{surface_type}.md#{carrier}")
    } else {
        format!("{BASE}/surfaces/README.md")
    }
}

/// A link to the "Close it" section of a surface type's docs (the docs
/// index for a type runwarden does not know, or the canaries).
pub fn close_link(surface_type: &str) -> String {
    const BASE: &str = "https://github.com/runwarden/action/blob/main/docs";
    if surface_type == crate::report::CANARY_TYPE {
        return format!("{BASE}/watch.md#canaries");
    }
    match crate::surface::by_name(surface_type) {
        Some(t) => format!("{BASE}/surfaces/{}.md#close-it", t.name()),
        None => format!("{BASE}/surfaces/README.md"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_fenced_past_backticks() {
        assert_eq!(text("a"), "` a `");
        assert_eq!(text("a`b"), "`` a`b ``");
        assert_eq!(text("``x"), "``` ``x ```");
        assert_eq!(text(""), "` \"\" `");
        assert_eq!(cell("a|b\nc"), "` a\\|b c `");
        assert_eq!(text("a|b"), "` a|b `");
        assert_eq!(text("a\u{202e}b"), "` a?b `");
        assert_eq!(cell(""), "");
        assert!(!text("x##[error]y").contains("##["));
        assert_eq!(word("home:file-content"), "home:file-content");
        assert_eq!(word("deadbeef1"), "` deadbeef1 `");
        assert_eq!(word("@acme/team"), "` @acme/team `");
        assert_eq!(word(":shipit:"), "` :shipit: `");
        assert_eq!(word("_pwn_"), "` _pwn_ `");
        assert_eq!(word("a|b"), "` a\\|b `");
    }

    #[test]
    fn docs_links_come_from_known_parts_only() {
        assert!(
            docs_link("filesystem", "file-name").ends_with("/surfaces/filesystem.md#file-name")
        );
        assert!(docs_link("filesystem", "x)![i](y").ends_with("/surfaces/README.md"));
        assert!(docs_link("x)<img>", "file-name").ends_with("/surfaces/README.md"));
    }
}
