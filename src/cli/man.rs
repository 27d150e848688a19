//! `runwarden man`: one man page per command, generated from the same clap
//! definition (so a flag never drifts from its page), with the sections a
//! page needs that clap does not know: exit status, the config reference
//! (from the surface registry) and the other pages.

use super::Cli;
use super::Failure;
use super::outputs::print_stdout;
use clap::CommandFactory;
use roff::{Roff, bold, roman};
use std::path::Path;

/// The exit codes every command but `watch` and `publish` uses.
const EXIT: &[(&str, &str)] = &[
    (
        "0",
        "no open undeclared channel, no ERROR, nothing left behind",
    ),
    (
        "1",
        "at least one FAIL or ERROR, or a planted entry cleanup had to leave \
         (for merge: any report would; for publish: a part it was asked for broke, \
         while a refusal by GitHub is a notice)",
    ),
    (
        "2",
        "could not run: bad arguments, a bad config, a receipt refused, a report not writable",
    ),
];

/// What `watch` adds.
const WATCH_EXIT: &[(&str, &str)] = &[
    ("3", "a canary credential was read"),
    (
        "other",
        "the command's own exit status when nothing failed (128+N when signal N ended it)",
    ),
];

/// The top page, every subcommand's page, or all of them into `dir`.
pub(super) fn man(command: Option<&str>, dir: Option<&Path>) -> Result<i32, Failure> {
    let mut cli = Cli::command().disable_help_subcommand(true);
    // Why build first: it gives each subcommand its display name
    // (`runwarden-probe`), which names its page.
    cli.build();
    let pages = pages(&cli);
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).map_err(|e| {
            Failure::Other(format!(
                "cannot make {}: {e}",
                crate::escape::bytes(dir.as_os_str().as_encoded_bytes())
            ))
        })?;
        for (name, page) in &pages {
            let path = dir.join(format!("{name}.1"));
            std::fs::write(&path, page).map_err(|e| {
                Failure::Other(format!(
                    "cannot write {}: {e}",
                    crate::escape::bytes(path.as_os_str().as_encoded_bytes())
                ))
            })?;
            print_stdout(&format!("{}\n", path.display()))?;
        }
        return Ok(0);
    }
    let want = match command {
        Some(c) => format!("runwarden-{c}"),
        None => "runwarden".into(),
    };
    match pages.iter().find(|(n, _)| *n == want) {
        Some((_, page)) => {
            print_stdout(page)?;
            Ok(0)
        }
        None => Err(Failure::Other(format!(
            "no man page for `{}`; commands: {}",
            crate::escape::line(command.unwrap_or_default()),
            pages
                .iter()
                .filter_map(|(n, _)| n.strip_prefix("runwarden-"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Every page, the top one first, as (name, roff).
fn pages(cli: &clap::Command) -> Vec<(String, String)> {
    let subs: Vec<&clap::Command> = cli.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    let names: Vec<String> = subs.iter().map(|s| page_name(s)).collect();
    let mut out = vec![("runwarden".to_string(), page(cli, "runwarden", &names))];
    for (s, name) in subs.iter().zip(&names) {
        let others: Vec<String> = std::iter::once("runwarden".to_string())
            .chain(names.iter().filter(|n| *n != name).cloned())
            .collect();
        out.push((name.clone(), page(s, name, &others)));
    }
    out
}

fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .map(str::to_string)
        .unwrap_or_else(|| format!("runwarden-{}", cmd.get_name()))
}

/// One page: clap's sections, then exit status, configuration and the
/// other pages.
fn page(cmd: &clap::Command, name: &str, see_also: &[String]) -> String {
    let man = clap_mangen::Man::new(cmd.clone()).title(name);
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = man.render_title(&mut out);
    let _ = man.render_name_section(&mut out);
    let _ = man.render_synopsis_section(&mut out);
    let _ = man.render_description_section(&mut out);
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        let _ = man.render_options_section(&mut out);
    }
    if cmd.has_subcommands() {
        let _ = man.render_subcommands_section(&mut out);
    }
    let mut roff = Roff::new();
    exit_status(&mut roff, cmd.get_name());
    if matches!(
        cmd.get_name(),
        "runwarden" | "probe" | "plant" | "recover" | "cleanup" | "watch" | "check-config"
    ) {
        configuration(&mut roff);
    }
    roff.control("SH", ["SEE ALSO"]);
    let refs: Vec<String> = see_also.iter().map(|n| format!("{n}(1)")).collect();
    roff.text([roman(format!(
        "{}. The full documentation: docs/ of the runwarden repository (docs/config.md, docs/verdicts.md).",
        refs.join(", ")
    ))]);
    roff.control("SH", ["VERSION"]);
    roff.text([roman(format!("v{}", env!("CARGO_PKG_VERSION")))]);
    let _ = roff.to_writer(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn exit_status(roff: &mut Roff, command: &str) {
    roff.control("SH", ["EXIT STATUS"]);
    let codes: Vec<(&str, &str)> = match command {
        "watch" => EXIT
            .iter()
            .chain(WATCH_EXIT)
            .copied()
            .filter(|(c, _)| *c != "0")
            .collect(),
        "check-config" => vec![("0", "the config is valid"), ("2", "it is not")],
        "completions" | "man" | "carriers" | "discover" => {
            vec![
                ("0", "printed"),
                ("2", "bad arguments, or the output not writable"),
            ]
        }
        "rendezvous" => vec![
            ("0", "stopped by SIGINT or SIGTERM"),
            (
                "2",
                "could not start: bad arguments, no token, a port not free",
            ),
        ],
        _ => EXIT.to_vec(),
    };
    for (code, what) in codes {
        roff.control("TP", []);
        roff.text([bold(code)]);
        roff.text([roman(what)]);
    }
}

/// The config reference: the file's keys, then every surface type with its
/// keys and carriers, from the registry itself.
fn configuration(roff: &mut Roff) {
    roff.control("SH", ["CONFIGURATION"]);
    roff.text([roman(
        "Without --config: $RUNWARDEN_CONFIG, then .github/runwarden.yml, then runwarden.yml, \
         then the config runwarden discover proposes (not for watch, which needs a config). \
         Top-level keys: version (always 1), surfaces \
         (a list; each entry has name, type and the type's keys), declared (channels opened \
         on purpose: a surface:carrier id, or a mapping of channel, an optional reason and, \
         where the type has one, a scope key).",
    )]);
    for t in crate::surface::REGISTRY {
        roff.control("TP", []);
        roff.text([bold(format!("type: {}", t.name()))]);
        let keys = if t.keys().is_empty() {
            "no keys".to_string()
        } else {
            format!("keys: {}", t.keys().join(", "))
        };
        let carriers: Vec<&str> = t.carriers().iter().map(|c| c.name).collect();
        roff.text([roman(format!(
            "{}. {keys}; carriers: {}.",
            t.description(),
            carriers.join(", ")
        ))]);
    }
}
