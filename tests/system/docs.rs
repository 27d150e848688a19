//! The config examples in README.md and docs/ (every `.md` below it): each
//! YAML block that is a runwarden config is a complete file that
//! `runwarden check-config` accepts as it stands, with no `GITHUB_*`,
//! `RUNNER_*` or `ACTIONS_*` variables set, from a temporary directory of
//! its own. A reader can copy it into a file and use it.
//!
//! Which blocks are configs: a fenced block tagged `yaml` (or `yml`) is a
//! config when one of its top-level keys (a key at column 0; blank lines
//! and comments aside) is `version`, `surfaces` or `declared`, runwarden's
//! only top-level keys. Every other block (a workflow, a list of steps,
//! `permissions:`, `env:`) is not a config and is skipped. An HTML comment
//! on the line right before the opening fence says more:
//!
//! - `<!-- fragment: WHERE -->`: part of a config (a `declared:` list, a
//!   surface entry), WHERE saying what file or section it belongs in. It is
//!   not run through check-config; it must still be YAML, and a mapping
//!   with runwarden's top-level keys only.
//! - `<!-- needs-checkout -->`: a complete config that names a remote of
//!   the checkout (`remote: origin`). It is checked inside a temporary git
//!   repository whose `origin` is a local bare repository.
//! - `<!-- not-config -->`: skipped, for a block that the rule above would
//!   take for a config but that is not one.
//!
//! `needs-checkout` on a block that is not a config, or any of the three
//! markers not right before a fence, is an error. When the fenced block
//! right after a config is a `sh` block that shows check-config's
//! `… is valid: N surfaces, …` line, the config's own check-config must
//! report the same counts.

use crate::common::*;
use std::path::{Path, PathBuf};

/// runwarden's top-level config keys.
const CONFIG_KEYS: [&str; 3] = ["version", "surfaces", "declared"];

/// What the comment right before a block's fence says about it.
#[derive(Debug, Clone, PartialEq)]
enum Marker {
    None,
    Fragment(String),
    NeedsCheckout,
    NotConfig,
}

/// One fenced block of a Markdown file.
struct Block {
    /// `file:line` of the opening fence, the file relative to the crate.
    at: String,
    lang: String,
    text: String,
    marker: Marker,
}

/// The marker an HTML comment line stands for, if it is one of ours.
fn marker_of(line: &str) -> Option<Marker> {
    let body = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    if let Some(place) = body.strip_prefix("fragment:") {
        return Some(Marker::Fragment(place.trim().to_string()));
    }
    match body {
        "needs-checkout" => Some(Marker::NeedsCheckout),
        "not-config" => Some(Marker::NotConfig),
        _ if body.starts_with("fragment") => Some(Marker::Fragment(String::new())),
        _ => None,
    }
}

/// The fenced blocks of one Markdown file, and the errors of its markers
/// (one not right before a fence, a fragment that names no place).
fn blocks(root: &Path, file: &Path, errors: &mut Vec<String>) -> Vec<Block> {
    let name = file.strip_prefix(root).unwrap().display().to_string();
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start_matches(' ').len();
        let fence = line[indent..].len() - line[indent..].trim_start_matches('`').len();
        if indent > 3 || fence < 3 {
            if let Some(m) = marker_of(line) {
                let next = lines.get(i + 1).map(|l| l.trim_start());
                if !next.is_some_and(|l| l.starts_with("```")) {
                    errors.push(format!(
                        "{name}:{}: `{}` is not on the line right before a fence",
                        i + 1,
                        line.trim()
                    ));
                }
                if m == Marker::Fragment(String::new()) {
                    errors.push(format!(
                        "{name}:{}: a fragment says what it belongs in: `<!-- fragment: WHERE -->`",
                        i + 1
                    ));
                }
            }
            i += 1;
            continue;
        }
        let lang = line[indent + fence..].trim().to_string();
        let marker = i
            .checked_sub(1)
            .and_then(|p| marker_of(lines[p]))
            .unwrap_or(Marker::None);
        let close = |l: &str| {
            let t = l.trim();
            t.len() >= fence && t.chars().all(|c| c == '`')
        };
        let end = (i + 1..lines.len())
            .find(|&j| close(lines[j]))
            .unwrap_or(lines.len());
        let body: String = lines[i + 1..end]
            .iter()
            .map(|l| {
                let strip = l.len() - l.trim_start_matches(' ').len();
                format!("{}\n", &l[strip.min(indent)..])
            })
            .collect();
        out.push(Block {
            at: format!("{name}:{}", i + 1),
            lang,
            text: body,
            marker,
        });
        i = end + 1;
    }
    out
}

/// The keys at column 0 of a YAML text (comments, blank lines, list items
/// and document markers aside).
fn top_level_keys(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '-']) && !l.trim().is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.trim()))
        .collect()
}

fn is_config(text: &str) -> bool {
    top_level_keys(text).iter().any(|k| CONFIG_KEYS.contains(k))
}

/// A checkout whose `origin` is a local bare repository, made once.
struct Checkout {
    _root: tempfile::TempDir,
    ws: PathBuf,
}

impl Checkout {
    fn new() -> Checkout {
        let root = tempfile::tempdir().unwrap();
        let remote = bare_remote(root.path());
        let ws = root.path().join("ws");
        git(root.path(), &["init", "-q", ws.to_str().unwrap()]);
        git(&ws, &["remote", "add", "origin", remote.to_str().unwrap()]);
        Checkout { _root: root, ws }
    }
}

/// Runs check-config on `text` written to `name` in `dir`, from `dir`:
/// whether it passed, and what it printed.
fn check_config(dir: &Path, name: &str, text: &str) -> (bool, String) {
    std::fs::write(dir.join(name), text).unwrap();
    let out = bin()
        .args(["check-config", name])
        .current_dir(dir)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), said.trim().to_string())
}

/// The counts (`4 surfaces, 28 channels, 5 declared`) of a check-config
/// line a `sh` block shows, if it shows one.
fn documented_counts(sh: &Block) -> Option<String> {
    sh.text
        .lines()
        .find_map(|l| l.split_once(" is valid: "))
        .map(|(_, counts)| counts.trim().to_string())
}

#[test]
fn every_config_block_in_the_docs_validates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut errors = vec![];
    let mut checkout: Option<Checkout> = None;
    let (mut checked, mut in_checkout, mut fragments, mut counts_compared) = (0, 0, 0, 0);
    for file in doc_files() {
        let all = blocks(root, &file, &mut errors);
        for (n, b) in all.iter().enumerate() {
            if b.lang != "yaml" && b.lang != "yml" {
                if !matches!(b.marker, Marker::None | Marker::NotConfig) {
                    errors.push(format!("{}: {:?} on a `{}` block", b.at, b.marker, b.lang));
                }
                continue;
            }
            let config = is_config(&b.text);
            match &b.marker {
                Marker::NotConfig => continue,
                Marker::Fragment(_) => {
                    fragments += 1;
                    match serde_saphyr::from_str::<serde_json::Value>(&b.text) {
                        Err(e) => {
                            errors.push(format!("{}: a fragment that is not YAML: {e}", b.at))
                        }
                        Ok(serde_json::Value::Object(m)) => {
                            for k in m.keys().filter(|k| !CONFIG_KEYS.contains(&k.as_str())) {
                                errors.push(format!(
                                    "{}: a fragment with `{k}:`, not a runwarden config key",
                                    b.at
                                ));
                            }
                            if m.contains_key("version") && m.contains_key("surfaces") {
                                errors.push(format!(
                                    "{}: a fragment with `version:` and `surfaces:` is a whole config: drop the marker",
                                    b.at
                                ));
                            }
                        }
                        Ok(_) => {}
                    }
                    continue;
                }
                Marker::NeedsCheckout if !config => {
                    errors.push(format!("{}: needs-checkout on a block that is not a config (no top-level version, surfaces or declared)", b.at));
                    continue;
                }
                _ if !config => continue,
                _ => {}
            }
            checked += 1;
            let name = format!("block-{checked}.yml");
            let (ok, said) = if b.marker == Marker::NeedsCheckout {
                in_checkout += 1;
                let ws = &checkout.get_or_insert_with(Checkout::new).ws;
                check_config(ws, &name, &b.text)
            } else {
                let dir = tempfile::tempdir().unwrap();
                check_config(dir.path(), &name, &b.text)
            };
            if !ok {
                errors.push(format!("{}: does not validate: {said}", b.at));
                continue;
            }
            if let Some(sh) = all.get(n + 1).filter(|s| s.lang == "sh")
                && let Some(counts) = documented_counts(sh)
            {
                counts_compared += 1;
                if !said.ends_with(&format!(" is valid: {counts}")) {
                    errors.push(format!(
                        "{}: says check-config prints `… is valid: {counts}`, but it prints: {said}",
                        sh.at
                    ));
                }
            }
        }
    }
    assert!(
        errors.is_empty(),
        "{} problem(s) with config blocks in the docs:\n{}",
        errors.len(),
        errors.join("\n")
    );
    // The rule found what the docs hold (and did not pass by finding
    // nothing): the surface pages, the README, the gh-aw recipe.
    assert!(checked >= 10, "only {checked} config blocks found");
    assert!(in_checkout >= 1 && fragments >= 1 && counts_compared >= 1);
}

#[test]
fn the_block_rule_tells_configs_from_workflows() {
    assert!(is_config("version: 1\nsurfaces: []\n"));
    assert!(is_config("# a comment\ndeclared:\n  - a:b\n"));
    assert!(is_config("surfaces:\n  - name: x\n"));
    assert!(!is_config(
        "- uses: runwarden/action@v1\n  with:\n    config: x\n"
    ));
    assert!(!is_config(
        "name: ci\non: [push]\njobs:\n  a:\n    surfaces: 1\n"
    ));
    assert!(!is_config("permissions:\n  issues: write\n"));
    assert!(!is_config("env:\n  RUNWARDEN_KEY: x\n"));
    assert_eq!(
        marker_of("<!-- needs-checkout -->"),
        Some(Marker::NeedsCheckout)
    );
    assert_eq!(
        marker_of("<!-- fragment: the declared: list -->"),
        Some(Marker::Fragment("the declared: list".into()))
    );
    assert_eq!(marker_of("<!-- a note -->"), None);
}

/// Every surface type has a page with a `## Close it` section (the comment
/// and the table link there), and the index lists every page.
#[test]
fn every_surface_type_says_how_to_close_it() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/surfaces");
    let index = std::fs::read_to_string(root.join("README.md")).unwrap();
    for t in runwarden::surface::REGISTRY {
        let page = std::fs::read_to_string(root.join(format!("{}.md", t.name())))
            .unwrap_or_else(|e| panic!("{}: {e}", t.name()));
        assert_eq!(page.matches("\n## Close it\n").count(), 1, "{}", t.name());
        assert!(
            index.contains(&format!("]({}.md)", t.name())),
            "{}",
            t.name()
        );
    }
}
