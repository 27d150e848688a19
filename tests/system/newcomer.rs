//! A newcomer's first hour, scripted from the README alone: propose a
//! config (`discover --write`), cut it down as its header says, check it,
//! probe with it and read the table, watch an agent script with it, and
//! read the pull request comment its report makes. The docs tests check
//! the rest of what the docs claim (configs, workflows and their lint,
//! pins, Close it sections, man pages).

use crate::common::{bin, markdown};
use runwarden::marker::Key;
use runwarden::output::comment::{CommentContext, Earlier, comment};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// `runwarden ARGS` in `root`, with a home and a temp directory of its own
/// (never this machine's).
fn rw(root: &Path, args: &[&str]) -> Output {
    let mut c: Command = bin();
    c.args(args)
        .current_dir(root)
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env_remove("GOMODCACHE")
        .env_remove("RUNWARDEN_CONFIG");
    c.output().unwrap()
}

/// A home, a temp directory and a `shared` directory under `root`, and
/// `rw.yml` probing `shared`, with `extra` after it.
fn shared_config(root: &Path, extra: &str) {
    for d in ["home", "tmp", "shared"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(
        root.join("rw.yml"),
        format!(
            "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n{extra}",
            serde_json::to_string(&root.join("shared")).unwrap()
        ),
    )
    .unwrap();
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_newcomer_s_session_from_the_readme() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = dir.path();
    // A fresh repository has no .github/ yet: `discover --write` makes it
    // (0.11.0 failed with "No such file or directory").
    for d in ["home", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    // README: `runwarden discover --write .github/runwarden.yml`.
    let o = rw(root, &["discover", "--write", ".github/runwarden.yml"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("runwarden check-config .github/runwarden.yml"));
    // Its header says: review it, remove what you do not want probed.
    // This machine's /dev/shm is not this test's to probe.
    let cfg = root.join(".github/runwarden.yml");
    let proposed = std::fs::read_to_string(&cfg).unwrap();
    assert!(proposed.contains("Review it, remove what you do not want probed"));
    let kept: String = proposed
        .split("\n  # ")
        .filter(|entry| !entry.contains("path: \"/dev/shm\""))
        .collect::<Vec<_>>()
        .join("\n  # ");
    std::fs::write(&cfg, kept).unwrap();
    // README: `runwarden check-config .github/runwarden.yml`.
    let o = rw(root, &["check-config", ".github/runwarden.yml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("is valid: 2 surfaces"), "{}", text(&o));
    // README's first line: probe with the config, a report and a SARIF.
    let o = rw(
        root,
        &[
            "probe",
            "--config",
            ".github/runwarden.yml",
            "--report",
            "runwarden-report.json",
            "--sarif",
            "runwarden.sarif",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "open channels fail: {}", text(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("FAIL     home:file-name"), "{table}");
    assert!(table.contains("system-temp"), "{table}");
    // README: watch an agent script with the config.
    let o = rw(
        root,
        &[
            "watch",
            "--config",
            ".github/runwarden.yml",
            "--report",
            "watch.json",
            "--",
            "sh",
            "-c",
            "echo remember > \"$TMPDIR/agent-note\"",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let w: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("watch.json")).unwrap()).unwrap();
    let used = w["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["channel"] == "system-temp:file-name")
        .unwrap();
    assert_eq!(used["verdict"], "fail", "{used}");
    // The pull request comment that report makes, as GitHub renders it.
    let report =
        serde_json::from_str(&std::fs::read_to_string(root.join("runwarden-report.json")).unwrap())
            .unwrap();
    let key = Key::new(None);
    let cx = CommentContext {
        sha: None,
        run_url: None,
        key: &key,
        at: "octo/app#1",
    };
    let body = comment(&report, Earlier::None, &cx);
    assert!(body.contains("| home (filesystem) |"), "{body}");
    assert!(body.contains("[close it](https://github.com/runwarden/action/blob/main/docs/surfaces/filesystem.md#close-it)"));
    markdown::assert_inert(&body);
}

/// `cargo test` on a fresh machine without Python's cmarkgfm (an optional
/// tool .ci/run installs): a test that renders Markdown runs the rest of
/// its checks and says in one line what it skipped and how to get it;
/// under `CI=true` the missing tool fails it (0.11.0 failed nine tests on
/// a newcomer's machine, and cargo stopped before tests/watch).
#[test]
fn a_fresh_machine_without_cmarkgfm_skips_that_check_and_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    // A python3 that has no cmarkgfm, whatever this machine has.
    let fake = dir.path().join("python3");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$*\" in *cmarkgfm*) echo \"No module named 'cmarkgfm'\" >&2; exit 1;; esac\nexec /usr/bin/env -u PATH python3 \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let real = std::env::var("PATH").unwrap_or_default();
    let path = format!("{}:{real}", dir.path().display());
    let me = std::env::current_exe().unwrap();
    let test = "output::comment::thousands_of_channels_fit_grouped_with_the_table_collapsed";
    let run = |ci: Option<&str>| {
        let mut c = Command::new(&me);
        c.args([test, "--exact", "--nocapture"]).env("PATH", &path);
        match ci {
            Some(v) => c.env("CI", v),
            None => c.env_remove("CI"),
        };
        c.output().unwrap()
    };
    let o = run(None);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("skipped: needs Python's cmarkgfm") && out.contains("pip install cmarkgfm"),
        "{out}"
    );
    let o = run(Some("true"));
    assert!(!o.status.success(), "{}", text(&o));
}

/// A git remote that does not exist: the push fails before anything is
/// sent, so nothing was planted and cleanup leaves nothing (0.11.0 said
/// "cleanup left 11 planted entries in place", in eleven long lines).
#[test]
fn a_remote_that_does_not_exist_plants_nothing_and_cleanup_says_nothing_left() {
    let root = tempfile::tempdir().unwrap();
    for d in ["home", "tmp"] {
        std::fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let missing = root.path().join("nope.git");
    std::fs::write(
        root.path().join("rw.yml"),
        format!(
            "version: 1\nsurfaces:\n  - name: origin\n    type: git-remote\n    remote: {}\n",
            serde_json::to_string(&missing).unwrap()
        ),
    )
    .unwrap();
    let o = rw(root.path(), &["probe", "--config", "rw.yml"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("does not appear to be a git repository"),
        "{out}"
    );
    assert!(!out.contains("cleanup left"), "{out}");
    assert!(!missing.exists());
}

/// Even checks before a run: a local git remote that does not exist warns
/// as a missing directory does, and a misspelled top-level key gets the
/// "did you mean" a surface key gets (0.11.0: silent, and no hint).
#[test]
fn check_config_warns_of_a_missing_local_remote_and_hints_a_top_level_typo() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("nope.git");
    let cfg = format!(
        "version: 1\nsurfaces:\n  - name: origin\n    type: git-remote\n    remote: {}\n",
        serde_json::to_string(&missing).unwrap()
    );
    std::fs::write(root.path().join("rw.yml"), &cfg).unwrap();
    let o = rw(root.path(), &["check-config", "rw.yml"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("warning: surface origin: remote") && out.contains("does not exist here"),
        "{out}"
    );
    std::fs::write(
        root.path().join("rw.yml"),
        cfg.replace("surfaces:", "surface:"),
    )
    .unwrap();
    let o = rw(root.path(), &["check-config", "rw.yml"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("(did you mean `surfaces`?)"), "{out}");
}

/// In Actions a run that could not happen says so where people look: a
/// config error is an `::error` at its file and line, a missing config
/// file names the one it may have meant, and the job summary says nothing
/// was probed (0.11.0: one bare stderr line).
#[test]
fn in_actions_a_config_error_is_an_annotation_and_a_summary() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(".github")).unwrap();
    std::fs::write(
        root.path().join(".github/runwarden.yml"),
        "version: 1\nsurfaces:\n  - name: s\n    type: filesytem\n    path: /tmp\n",
    )
    .unwrap();
    let summary = root.path().join("summary.md");
    let run = |args: &[&str]| {
        let mut c = bin();
        c.current_dir(root.path())
            .args(args)
            .env("GITHUB_ACTIONS", "true")
            .env_remove("GITHUB_WORKFLOW_SHA")
            .env("GITHUB_STEP_SUMMARY", &summary);
        c.output().unwrap()
    };
    let o = run(&["probe", "--config", ".github/runwarden.yml"]);
    assert_eq!(o.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("::error file=.github/runwarden.yml,line=4,col=11,title=runwarden could not run::unknown surface type `filesytem`"),
        "{stdout}"
    );
    let s = std::fs::read_to_string(&summary).unwrap();
    assert!(
        s.contains("## runwarden did not run") && s.contains("Nothing was probed"),
        "{s}"
    );
    let o = run(&["probe", "--config", ".github/runwarden.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("::error title=runwarden could not run::")
            && stdout.contains("did you mean \".github/runwarden.yml\"?"),
        "{stdout}"
    );
    markdown::assert_inert(&std::fs::read_to_string(&summary).unwrap());
}

/// A probe done in well under a second draws no progress line on a
/// terminal (0.11.0 drew a 120-step bar for a 0.05 s probe).
#[test]
fn a_fast_probe_draws_no_progress_on_a_terminal() {
    let root = tempfile::tempdir().unwrap();
    let d = root.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let cfg = root.path().join("rw.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n",
            serde_json::to_string(&d).unwrap()
        ),
    )
    .unwrap();
    let bin_path = env!("CARGO_BIN_EXE_runwarden");
    // stderr to the terminal, stdout away: what the terminal shows of the
    // progress.
    let cmd = format!(
        "stty cols 120; {bin_path} probe --config {} >/dev/null",
        cfg.display()
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env_remove("GITHUB_ACTIONS")
        .output()
        .expect("script (util-linux) gives the probe a terminal");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(!shown.contains("planting"), "{shown}");
}

/// A plant and a recover run by hand, outside Actions: no job token, so no
/// token permission is an exposure (0.11.0 listed thirteen "unknown"
/// permissions among twenty gaps).
#[test]
fn a_local_plant_and_recover_list_no_token_permissions() {
    let root = tempfile::tempdir().unwrap();
    shared_config(root.path(), "");
    let strip = |args: &[&str]| {
        let mut c: Command = bin();
        c.args(args)
            .current_dir(root.path())
            .env("HOME", root.path().join("home"))
            .env("TMPDIR", root.path().join("tmp"))
            .env_remove("GITHUB_ACTIONS")
            .env_remove("RUNWARDEN_CONFIG");
        c.output().unwrap()
    };
    let p = strip(&["plant", "--config", "rw.yml", "--probe-id", "nc-1"]);
    assert!(p.status.success(), "{}", text(&p));
    let r = strip(&["recover", "--config", "rw.yml", "--probe-id", "nc-1"]);
    let out = text(&r);
    assert!(!out.contains("permission:"), "{out}");
}

/// What `cmd` prints on a terminal `cols` columns wide (a pty from
/// util-linux `script`), carriage returns and colours taken out.
fn on_terminal(root: &Path, cols: usize, cmd: &str) -> String {
    let out = Command::new("script")
        // (Rows too: a terminal of no rows is no terminal to clap.)
        .args([
            "-qec",
            &format!("stty rows 40 cols {cols}; {cmd}"),
            "/dev/null",
        ])
        .current_dir(root)
        .env("HOME", root.join("home"))
        .env("TMPDIR", root.join("tmp"))
        .env_remove("GITHUB_ACTIONS")
        .env_remove("RUNWARDEN_CONFIG")
        .env_remove("NO_COLOR")
        .output()
        .expect("script (util-linux) gives the command a terminal");
    let shown = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let mut plain = String::new();
    let mut rest = shown.as_str();
    // Colour codes (`ESC [ digits m`) and the progress line's clearing.
    while let Some(i) = rest.find('\x1b') {
        plain.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let end = after
            .find(|c: char| c.is_ascii_alphabetic())
            .map_or(after.len(), |e| e + 1);
        rest = &after[end..];
    }
    plain + rest
}

/// Nothing printed starts a workflow command or forges one, and (except
/// a line holding a link, which is never cut) no line is wider than
/// `width` characters.
fn fits(text: &str, width: usize, what: &str) {
    for line in text.lines() {
        assert!(
            !line.trim_start().starts_with("::") && !line.contains("##["),
            "{what}: a command line printed: {line}\n{text}"
        );
        if !line.contains("https://") {
            assert!(
                line.chars().count() <= width,
                "{what}: {} columns: {line}\n{text}",
                line.chars().count()
            );
        }
    }
}

/// A config of a shared directory whose name is hostile (workflow
/// commands after spaces, so that any wrap lands on one) and a second one
/// that does not exist, named as hostilely: its path is in the errors.
fn hostile_config(root: &Path) -> std::path::PathBuf {
    for d in ["home", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let words = " ::error::a ::warning::b ##[group]c ::set-output name=x::y".repeat(3);
    let shared = root.join(format!("shared{words}"));
    std::fs::create_dir(&shared).unwrap();
    let gone = root.join(format!("gone{words}"));
    let cfg = root.join("rw.yml");
    std::fs::write(
        &cfg,
        format!(
            "version: 1\nsurfaces:\n  - name: shared\n    type: filesystem\n    path: {}\n  - name: gone\n    type: filesystem\n    path: {}\n  - name: remote\n    type: git-remote\n    remote: {}\n",
            serde_json::to_string(&shared).unwrap(),
            serde_json::to_string(&gone).unwrap(),
            serde_json::to_string(&root.join(format!("no-such-remote{}", "-x".repeat(60)))).unwrap(),
        ),
    )
    .unwrap();
    cfg
}

/// Every line runwarden writes to a terminal of 80 or 120 columns fits it
/// (the brief table, `-v`'s rows, the coverage, stderr's notes), links
/// excepted and never cut; piped, rows stay whole and prose wraps at 100.
/// Surface data that wraps never starts a line with a workflow command
/// (0.11.0 wrote 254 columns on a 120-column terminal, 318 piped).
#[test]
fn every_line_fits_the_terminal_and_piped_prose_wraps_at_100() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let cfg = hostile_config(root);
    let bin_path = env!("CARGO_BIN_EXE_runwarden");
    for cols in [80, 120] {
        for flag in ["", "-v"] {
            let shown = on_terminal(
                root,
                cols,
                &format!("{bin_path} probe {flag} --config {}", cfg.display()),
            );
            assert!(shown.contains("fail,"), "{shown}");
            fits(&shown, cols, &format!("probe {flag} at {cols}"));
        }
        let shown = on_terminal(
            root,
            cols,
            &format!("{bin_path} check-config {}", cfg.display()),
        );
        assert!(shown.contains("no-such-remote"), "{shown}");
        fits(&shown, cols, &format!("check-config at {cols}"));
        // The help, the carriers' catalogue and a proposed config too.
        for what in ["--help", "probe --help", "carriers", "discover"] {
            let shown = on_terminal(root, cols, &format!("{bin_path} {what}"));
            assert!(shown.len() > 200, "{what}: {shown}");
            fits(&shown, cols, &format!("{what} at {cols}"));
        }
    }
    // Piped: a row is whole, one line each; everything else wraps at 100.
    let o = rw(root, &["probe", "--config", "rw.yml"]);
    let piped = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = piped
        .lines()
        .filter(|l| {
            [
                "FAIL ",
                "PASS ",
                "ERROR ",
                "SKIPPED ",
                "AUTHORIZED ",
                "VERDICT ",
            ]
            .iter()
            .any(|w| l.starts_with(w))
        })
        .collect();
    assert!(rows.iter().any(|r| r.chars().count() > 100), "{piped}");
    let prose: String = piped
        .lines()
        .filter(|l| !rows.contains(l))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(prose.contains("coverage"), "{piped}");
    fits(&prose, 100, "piped prose");
    fits(&piped, usize::MAX, "piped");
}

/// What the second trial from the README read wrong, said truly now: a
/// plant says runner-persistence waits for `--beacon` (it said "18 of 18
/// planted" of 20 channels), check-config counts declared channels and
/// declared exposures apart, a coverage gap says it can be declared, and
/// a discovered config proposes the /tmp other jobs share when TMPDIR
/// moves this job's temp directory.
#[test]
fn a_plant_a_check_and_a_proposal_say_what_they_leave_out() {
    let root = tempfile::tempdir().unwrap();
    shared_config(
        root.path(),
        "declared:\n  - channel: shared:mtime\n    reason: stamps\n  - exposure: runner-persistence\n    reason: ephemeral runners\n",
    );
    let o = rw(root.path(), &["check-config", "rw.yml"]);
    assert!(
        text(&o).contains("1 surface, 10 channels, 1 declared open, 1 exposure declared untested"),
        "{}",
        text(&o)
    );
    let o = rw(
        root.path(),
        &["plant", "--config", "rw.yml", "--probe-id", "nc-2"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("runner-persistence was not planted: `runwarden plant --beacon`"),
        "{}",
        text(&o)
    );
    let o = rw(
        root.path(),
        &["cleanup", "--probe-id", "nc-2", "--config", "rw.yml"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = rw(root.path(), &["probe", "--config", "rw.yml"]);
    assert!(
        crate::common::unwrapped(&String::from_utf8_lossy(&o.stdout))
            .contains("a gap you accept: declare it in the config (`exposure:` and `reason:`"),
        "{}",
        text(&o)
    );
    let o = rw(root.path(), &["discover"]);
    let proposed = String::from_utf8_lossy(&o.stdout);
    assert!(
        proposed.contains("  # - name: tmp\n  #   type: filesystem\n  #   path: \"/tmp\""),
        "{proposed}"
    );
}
