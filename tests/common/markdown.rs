//! GitHub's renderer for the tests: Markdown through cmark-gfm itself
//! (PyPI `cmarkgfm`, the library GitHub's renderer is built on, with the
//! same extensions), then checked the way GitHub post-processes it.
//!
//! Outside `<code>`, surface data must make nothing live: no element but
//! the ones runwarden's own Markdown makes, no link but its own, and no
//! text GitHub would turn into a mention (`@user`, `@org/team`), an issue
//! reference (`#N`, `owner/repo#N`) or a commit link (7 or more hex
//! digits). `<code>` is the one place GitHub's filters skip.

use std::io::Write;
use std::process::{Command, Stdio};

/// `markdown` rendered by cmark-gfm with GitHub's extensions (tables,
/// autolinks, strikethrough, tag filter): the HTML; `None` (said) when
/// this machine has no cmarkgfm ([`super::needs_tool`]).
pub fn render(markdown: &str) -> Option<String> {
    if super::needs_tool(
        "Python's cmarkgfm (GitHub's Markdown renderer)",
        super::python_has("cmarkgfm"),
        "pip install cmarkgfm",
    ) {
        return None;
    }
    let script = "import sys, cmarkgfm\n\
        from cmarkgfm.cmark import Options\n\
        sys.stdout.write(cmarkgfm.github_flavored_markdown_to_html(sys.stdin.read(), options=Options.CMARK_OPT_UNSAFE))";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(markdown.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "cmarkgfm failed (`pip install cmarkgfm`; .ci/run installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8(out.stdout).unwrap())
}

/// The elements runwarden's own Markdown makes.
const OWN: &[&str] = &[
    "p",
    "h2",
    "h3",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "code",
    "pre",
    "strong",
    "em",
    "ul",
    "li",
    "sub",
    "a",
    "br",
    "details",
    "summary",
    "blockquote",
];

/// Where runwarden's own links go.
const OWN_LINKS: &[&str] = &[
    "https://github.com/runwarden/action/blob/main/docs/",
    "https://github.com/octo/",
    "http://127.0.0.1",
];

/// Renders `markdown` and panics, naming what it found, when anything
/// outside a code span is live: an element runwarden does not make, a
/// link it did not write, or text GitHub would make a mention, an issue
/// reference or a commit link. Returns the HTML (`None`: no cmarkgfm
/// here, said).
pub fn assert_inert(markdown: &str) -> Option<String> {
    let html = render(markdown)?;
    let outside = strip_code(&html);
    let mut rest = outside.as_str();
    while let Some(i) = rest.find('<') {
        let tag = &rest[i + 1..];
        let end = tag.find('>').unwrap_or(tag.len());
        let inner = &tag[..end];
        let name: String = inner
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(
            OWN.contains(&name.as_str()) || inner.starts_with("!--"),
            "live element <{inner}> in\n{html}\nfrom\n{markdown}"
        );
        if name == "a" && !inner.starts_with('/') {
            let href = inner
                .split("href=\"")
                .nth(1)
                .and_then(|h| h.split('"').next())
                .unwrap_or("");
            assert!(
                OWN_LINKS.iter().any(|p| href.starts_with(p)),
                "a link runwarden did not write: {href}\n{html}"
            );
        }
        if inner.starts_with("!--") {
            assert!(
                inner.starts_with("!-- runwarden-comment ")
                    || inner.starts_with("!-- runwarden-state"),
                "an HTML comment runwarden did not write: <{inner}>\n{html}"
            );
        }
        rest = &tag[end..];
    }
    let text = strip_tags(&outside);
    for w in text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',') {
        let mention = w.char_indices().any(|(i, c)| {
            (c == '@' || c == '#')
                && w[i + 1..]
                    .chars()
                    .next()
                    .is_some_and(|n| n.is_ascii_alphanumeric())
        });
        assert!(
            !mention,
            "a mention or reference outside code: {w:?}\n{html}"
        );
        // GitHub's emoji shortcodes (`:shipit:` becomes an image).
        let emoji = w.len() > 2
            && w.starts_with(':')
            && w.ends_with(':')
            && w[1..w.len() - 1]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_+-".contains(c));
        assert!(!emoji, "an emoji shortcode outside code: {w:?}\n{html}");
        let sha = w
            .split(|c: char| !c.is_ascii_hexdigit())
            .any(|run| run.len() >= 7 && run.chars().any(|c| c.is_ascii_alphabetic()));
        assert!(!sha, "a commit-like hex run outside code: {w:?}\n{html}");
    }
    Some(html)
}

/// The HTML with every `<code>…</code>` (and `<pre>…</pre>`) taken out.
fn strip_code(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    loop {
        let next = ["<code", "<pre"]
            .iter()
            .filter_map(|t| rest.find(t).map(|i| (i, *t)))
            .min();
        let Some((i, t)) = next else {
            out += rest;
            return out;
        };
        out += &rest[..i];
        let close = if t == "<code" { "</code>" } else { "</pre>" };
        match rest[i..].find(close) {
            Some(j) => rest = &rest[i + j + close.len()..],
            None => return out,
        }
    }
}

/// Text content: tags removed, entities decoded the way a browser does
/// for the characters that matter here.
fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in html.chars() {
        match c {
            '<' => inside = true,
            '>' => {
                inside = false;
                out.push(' ');
            }
            c if !inside => out.push(c),
            _ => {}
        }
    }
    // Numeric entities, as a browser decodes them.
    let mut decoded = String::new();
    let mut rest = out.as_str();
    while let Some(i) = rest.find("&#") {
        decoded += &rest[..i];
        let tail = &rest[i + 2..];
        let end = tail.find(';').unwrap_or(0);
        match tail[..end].parse::<u32>().ok().and_then(char::from_u32) {
            Some(c) => {
                decoded.push(c);
                rest = &tail[end + 1..];
            }
            None => {
                decoded += "&#";
                rest = tail;
            }
        }
    }
    decoded += rest;
    decoded
        .replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

/// The `|` of a table row that separate cells (not the `\|` inside one).
pub fn separators(row: &str) -> usize {
    row.replace("\\|", "").matches('|').count()
}
