//! The structure the kernel issue set, held by a test so that it stays: no
//! import cycle between the top-level modules of src/, `unsafe` only in
//! src/sys/, at most 5 glob imports and 25 `Result<_, String>` outside
//! tests, and no function over 120 lines, in a file of at most 600 lines.
//! Read from the source text before a `#[cfg(test)] mod tests`; comments
//! count for the cycles (a doc link is a reference) and are left out of
//! the rest, by a lexer ([`code_of`]) that knows Rust's comments, strings,
//! raw strings and character literals: a `//` inside a string (a URL) is
//! no comment, and a brace in a string or a comment is no brace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under src/, with its text before its tests (a doc link
/// to another module counts as a reference to it, as rustdoc resolves it).
fn sources() -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    crate::common::files_under(&root, "rs")
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
            (
                p.strip_prefix(&root).unwrap().to_path_buf(),
                code.to_string(),
            )
        })
        .collect()
}

/// The top-level module a file belongs to (`surface` for src/surface/…).
fn module(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

#[test]
fn no_import_cycle_between_top_level_modules() {
    let files = sources();
    let mods: BTreeSet<String> = files.iter().map(|(p, _)| module(p)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (p, code) in &files {
        let from = module(p);
        for (i, _) in code.match_indices("crate::") {
            let to: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if to != from && mods.contains(&to) && !["main", "lib"].contains(&from.as_str()) {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // A module on a cycle reaches itself.
    for m in &mods {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = edges.get(m).into_iter().flatten().collect();
        while let Some(n) = todo.pop() {
            assert!(
                n != m,
                "`{m}` reaches itself through its imports: {edges:?}"
            );
            if seen.insert(n.clone()) {
                todo.extend(edges.get(n).into_iter().flatten());
            }
        }
    }
}

#[test]
fn unsafe_globs_string_errors_and_long_functions_stay_within_bounds() {
    let files = sources();
    let (mut globs, mut string_errors) = (0, 0);
    let mut long = vec![];
    for (p, text) in &files {
        let code = &code_of(text);
        let whole =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(p))
                .unwrap();
        assert!(
            whole.lines().count() <= 600,
            "{}: over 600 lines",
            p.display()
        );
        if !p.starts_with("sys") {
            assert!(
                !code.contains("unsafe "),
                "{}: `unsafe` outside src/sys/",
                p.display()
            );
        }
        globs += code
            .lines()
            .filter(|l| l.trim_start().starts_with("use ") && l.trim_end().ends_with("::*;"))
            .count();
        string_errors += string_results(code);
        long.extend(long_functions(p, code));
    }
    assert!(long.is_empty(), "functions over 120 lines: {long:#?}");
    assert!(globs <= 5, "{globs} glob imports outside tests");
    assert!(
        string_errors <= 25,
        "{string_errors} `Result<_, String>` outside tests"
    );
}

/// How many `Result<…, String>` types `code` names.
fn string_results(code: &str) -> usize {
    let mut n = 0;
    for (i, _) in code.match_indices("Result<") {
        let rest = &code[i + 7..];
        let (mut depth, mut last_comma, mut end) = (0i32, None, None);
        for (j, c) in rest.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = Some(j);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(j),
                _ => {}
            }
        }
        if let (Some(c), Some(e)) = (last_comma, end)
            && rest[c + 1..e].trim() == "String"
        {
            n += 1;
        }
    }
    n
}

/// Every function body over 120 lines, as `path:line: n lines`. `code` is
/// [`code_of`]'s: every brace left in it is one.
fn long_functions(p: &Path, code: &str) -> Vec<String> {
    let mut out = vec![];
    let lines: Vec<&str> = code.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let is_fn = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
            "const fn ",
            "pub const fn ",
        ]
        .iter()
        .any(|k| t.starts_with(k));
        if !is_fn || t.ends_with(';') {
            continue;
        }
        let (mut depth, mut started) = (0i64, false);
        for (j, l) in lines[i..].iter().enumerate() {
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if started && depth <= 0 {
                if j >= 120 {
                    out.push(format!("{}:{}: {} lines", p.display(), i + 1, j + 1));
                }
                break;
            }
            if !started && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

/// `src` with every comment, and the contents of every string and
/// character literal, made blank (new lines kept, so line numbers hold):
/// what is left is code. Knows line and nested block comments, strings
/// with escapes, raw strings (`r"…"`, `r#"…"#`, `br"…"`), byte strings,
/// and a character literal from a lifetime.
fn code_of(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&s, i) {
            // r, optional b, the hashes and the quote are kept; the
            // contents until `"` and as many hashes are blank.
            let open = s[i..].iter().position(|&c| c == '"').unwrap() + 1;
            out.extend(&s[i..i + open]);
            i += open;
            let close: Vec<char> = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < s.len() && !s[i..].starts_with(&close) {
                out.push(blank(s[i]));
                i += 1;
            }
            out.extend(&close);
            i += close.len();
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < s.len() {
                    out.push(blank(s[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal: `'x'`, `'\n'`, `'\u{7f}'`, `'\''`;
            // anything else (`'a`, `'static`) is a lifetime or a label.
            let len = if next == Some('\\') {
                s.get(i + 3..)
                    .and_then(|r| r.iter().position(|&c| c == '\''))
                    .map(|p| p + 4)
            } else if s.get(i + 2) == Some(&'\'') {
                Some(3)
            } else {
                None
            };
            match len {
                Some(n) => {
                    out.push_str(&" ".repeat(n));
                    i += n;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Whether a raw string (`r"`, `r#"`, `br##"`) starts at `i` (not inside
/// an identifier such as `for`): how many `#` it has.
fn raw_string_start(s: &[char], i: usize) -> Option<usize> {
    if is_ident(i.checked_sub(1).map(|p| s[p])) {
        return None;
    }
    let mut j = i;
    if s.get(j) == Some(&'b') {
        j += 1;
    }
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = s[j..].iter().take_while(|&&c| c == '#').count();
    (s.get(j + hashes) == Some(&'"')).then_some(hashes)
}

/// Whether `c` can be part of an identifier.
fn is_ident(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

#[test]
fn the_lexer_knows_strings_from_comments() {
    let src = "let u = \"https://x/{\"; // {\nlet r = r#\"a\"{\"#; /* { /* } */ } */ let c = '{';\nfn f<'a>(x: &'a str) {}\n";
    let code = code_of(src);
    assert_eq!(code.lines().count(), src.lines().count());
    assert_eq!(code.matches('{').count(), 1, "{code}");
    assert_eq!(code.matches('}').count(), 1, "{code}");
    assert!(code.contains("fn f<'a>(x: &'a str)"), "{code}");
    assert!(!code.contains("https"), "{code}");
}
