//! The structure the kernel issue set, held by a test so that it stays: no
//! import cycle between the top-level modules of src/, `unsafe` only in
//! src/sys/, at most 5 glob imports and 25 `Result<_, String>` outside
//! tests, and no function over 120 lines, in a file of at most 600 lines.
//! Read from the source text before a `#[cfg(test)] mod tests`; comments
//! count for the cycles (a doc link is a reference) and are left out of
//! the rest.

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
    for (p, text) in &files {
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect();
        let code = &code.join("\n");
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
        long_functions(p, code);
    }
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

/// Panics on a function body over 120 lines (braces counted outside
/// string and char literals).
fn long_functions(p: &Path, code: &str) {
    let lines: Vec<&str> = code.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let is_fn = [
            "fn ",
            "pub fn ",
            "pub(crate) fn ",
            "pub(super) fn ",
            "async fn ",
        ]
        .iter()
        .any(|k| t.starts_with(k));
        if !is_fn || t.ends_with(';') {
            continue;
        }
        let (mut depth, mut started) = (0i64, false);
        for (j, l) in lines[i..].iter().enumerate() {
            let mut in_str = false;
            let mut prev = ' ';
            for c in l.chars() {
                match c {
                    '"' if prev != '\\' && prev != '\'' => in_str = !in_str,
                    '{' if !in_str && prev != '\'' => {
                        depth += 1;
                        started = true;
                    }
                    '}' if !in_str && prev != '\'' => depth -= 1,
                    _ => {}
                }
                prev = if prev == '\\' && c == '\\' { ' ' } else { c };
            }
            if started && depth <= 0 {
                assert!(
                    j < 120,
                    "{}:{}: a function of {} lines",
                    p.display(),
                    i + 1,
                    j + 1
                );
                break;
            }
            if !started && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
}
