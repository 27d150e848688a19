//! The command line (src/cli/, src/main.rs): config discovery, formats,
//! the report file, exit codes.

use crate::common::*;
use std::process::Command;

#[test]
fn version_and_bad_arguments() {
    let out = bin().arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("runwarden {}", env!("CARGO_PKG_VERSION"))
    );
    for args in [
        &["probe", "--frobnicate"][..],
        &["probe", "--format", "xml"],
        &["probe", "--run-b-as", "nobody"],
        &["probe", "--timeout", "0"],
        &[],
    ] {
        assert_eq!(
            bin().args(args).output().unwrap().status.code(),
            Some(2),
            "{args:?}"
        );
    }
}

#[test]
fn carriers_lists_every_carrier() {
    let out = bin().arg("carriers").output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("filesystem: "));
    for c in ALL_CARRIERS {
        assert!(table.contains(&format!("  {c} ")), "{c} missing:\n{table}");
    }
    let out = bin()
        .args(["carriers", "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = &v["surface_types"][0];
    assert_eq!(fs["type"], "filesystem");
    let names: Vec<&str> = fs["carriers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["carrier"].as_str().unwrap())
        .collect();
    assert_eq!(names[..9], ALL_CARRIERS);
    assert_eq!(names[9..], ["runner-persistence"]);
    assert!(
        fs["carriers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["persistence"] == "durable")
    );
}

#[test]
fn with_no_config_it_probes_the_discovered_surfaces_and_says_so() {
    // A fixture home (never this machine's) with an npm cache, a temp
    // dir, and a git checkout outside CI (so never written to).
    let cwd = tempfile::tempdir().unwrap();
    let home = cwd.path().join("home");
    std::fs::create_dir_all(home.join(".npm")).unwrap();
    std::fs::create_dir(cwd.path().join("tmp")).unwrap();
    git(cwd.path(), &["init", "-q", "."]);
    git(
        cwd.path(),
        &["remote", "add", "origin", "https://example.invalid/r.git"],
    );
    let report = cwd.path().join("r.json");
    let out = bin()
        .current_dir(cwd.path())
        .args(["probe", "--report", report.to_str().unwrap()])
        .env("TMPDIR", cwd.path().join("tmp"))
        .env("HOME", &home)
        .output()
        .unwrap();
    let p = finish(out, &report);
    assert_eq!(p.code, 1, "{}", p.stderr);
    assert!(p.stderr.contains("no config found"), "{}", p.stderr);
    assert!(
        p.stderr
            .contains("using the discovered config (not-actions runner)"),
        "{}",
        p.stderr
    );
    // Said once: the count on stderr, the reason under the table (the
    // remote, and the /tmp other jobs share, which TMPDIR moved away
    // from).
    assert!(
        p.stderr.contains("2 skipped (listed with the findings)"),
        "{}",
        p.stderr
    );
    assert!(!p.stderr.contains("skipped: origin"), "{}", p.stderr);
    assert!(
        p.stdout.contains("skipped: origin: outside CI"),
        "{}",
        p.stdout
    );
    let config = &p.report["config"];
    assert_eq!(config["embedded_default"], true);
    assert!(config["path"].is_null());
    assert_eq!(config["discovered"]["runner"], "not-actions");
    let skipped = config["discovered"]["skipped"].as_array().unwrap();
    assert!(
        skipped
            .iter()
            .any(|s| s.as_str().unwrap().starts_with("origin: ")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|s| s.as_str().unwrap().starts_with("tmp: ")),
        "{skipped:?}"
    );
    let surfaces: std::collections::BTreeSet<&str> = p.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["surface"].as_str().unwrap())
        .collect();
    assert!(
        surfaces.contains("home") && surfaces.contains("npm-cache"),
        "{surfaces:?}"
    );
    assert!(surfaces.contains("system-temp"), "{surfaces:?}");
    assert!(!surfaces.contains("origin"), "{surfaces:?}");
    assert_eq!(p.verdict("system-temp:file-name"), "fail");
    assert!(p.finding("system-temp:file-name")["location"].is_null());
    assert!(
        p.stdout
            .contains("no config file: probed the surfaces discovered"),
        "{}",
        p.stdout
    );
    for d in [cwd.path().join("tmp"), home.clone(), home.join(".npm")] {
        assert!(leftovers(&d).is_empty(), "{}", d.display());
    }
    let out = bin()
        .current_dir(cwd.path())
        .arg("check-config")
        .env("TMPDIR", cwd.path().join("tmp"))
        .env("HOME", &home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the discovered config"));
}

#[test]
fn config_discovery_order() {
    let cwd = tempfile::tempdir().unwrap();
    let shared = cwd.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let named = |name: &str| fs_config(name, &shared, "");
    std::fs::write(cwd.path().join("runwarden.yml"), named("plain")).unwrap();
    let check = |env: Option<&str>| {
        let mut c = bin();
        c.current_dir(cwd.path()).arg("check-config");
        if let Some(e) = env {
            c.env("RUNWARDEN_CONFIG", e);
        }
        let out = c.output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert!(check(None).1.contains("runwarden.yml is valid"));
    std::fs::create_dir(cwd.path().join(".github")).unwrap();
    std::fs::write(cwd.path().join(".github/runwarden.yml"), named("gh")).unwrap();
    assert!(check(None).1.contains(".github/runwarden.yml is valid"));
    std::fs::write(cwd.path().join("env.yml"), named("env")).unwrap();
    assert!(check(Some("env.yml")).1.contains("env.yml is valid"));
    // A variable naming a missing file is an error, not a fallback.
    assert_eq!(check(Some("missing.yml")).0, 2);
    // --config beats everything.
    let report = cwd.path().join("r.json");
    let out = bin()
        .current_dir(cwd.path())
        .env("RUNWARDEN_CONFIG", "env.yml")
        .args(["probe", "--config", "runwarden.yml", "--report", "r.json"])
        .output()
        .unwrap();
    let p = finish(out, &report);
    assert_eq!(p.report["config"]["path"], "runwarden.yml");
    assert_eq!(p.report["findings"][0]["surface"], "plain");
    assert_eq!(
        p.report["findings"][0]["location"],
        serde_json::json!({"path": "runwarden.yml", "line": 3, "column": 5})
    );
}

#[test]
fn json_format_prints_the_report() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let p = probe(
        work.path(),
        &fs_config("s", &shared, ""),
        &["--format", "json"],
    );
    let printed: serde_json::Value = serde_json::from_str(&p.stdout).unwrap();
    assert_eq!(printed, p.report);
    let written = std::fs::read_to_string(work.path().join("report.json")).unwrap();
    assert_eq!(written, p.stdout, "the file holds exactly what json prints");
}

#[test]
fn report_schema() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let p = probe(
        work.path(),
        &fs_config("s", &shared, "declared:\n  - s:xattr\n"),
        &[],
    );
    let r = &p.report;
    let keys = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(r),
        [
            "cleanup",
            "config",
            "coverage",
            "findings",
            "finished_at",
            "key",
            "mode",
            "probe_id",
            "runs",
            "schema",
            "started_at",
            "summary",
            "tool",
            "trust"
        ]
    );
    assert_eq!(r["schema"], "runwarden-report/1");
    assert_eq!(r["tool"]["name"], "runwarden");
    assert_eq!(r["tool"]["version"], env!("CARGO_PKG_VERSION"));
    for t in ["started_at", "finished_at"] {
        let s = r[t].as_str().unwrap();
        assert!(
            s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T',
            "{s}"
        );
    }
    assert_eq!(
        keys(&r["summary"]),
        ["authorized", "error", "fail", "pass", "skipped"]
    );
    assert_eq!(r["summary"]["fail"], 8);
    assert_eq!(r["summary"]["authorized"], 1);
    let f = p.finding("s:xattr");
    assert_eq!(
        keys(f),
        [
            "carrier",
            "channel",
            "control",
            "declared",
            "declared_at",
            "detail",
            "location",
            "persistence",
            "surface",
            "surface_type",
            "verdict"
        ]
    );
    assert_eq!(f["declared_at"]["line"], 7);
    assert!(p.finding("s:mtime").get("declared_at").is_none());
    assert_eq!(f["surface_type"], "filesystem");
    assert_eq!(f["carrier"], "xattr");
    assert_eq!(f["verdict"], "authorized");
    assert_ne!(r["runs"]["a"], r["runs"]["b"]);
    assert!(r["runs"].get("b_uid").is_none());
    assert_eq!(
        keys(&r["cleanup"]),
        ["already_gone", "deleted", "deleted_on", "left", "removed"]
    );
    assert_eq!(r["cleanup"]["deleted_on"], serde_json::json!(["s"]));
}

#[test]
fn an_unwritable_report_is_exit_2_before_any_work() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let cfg = work.path().join("rw.yml");
    std::fs::write(&cfg, fs_config("s", &shared, "")).unwrap();
    let out = bin()
        .args(["probe", "--config"])
        .arg(&cfg)
        .args(["--report", "/nonexistent-dir/report.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "cannot write /nonexistent-dir/report.json: the directory /nonexistent-dir does not exist"
    ));
    assert!(std::fs::read_dir(&shared).unwrap().next().is_none());
}

#[test]
fn table_counts_and_exit_code() {
    let work = tempfile::tempdir().unwrap();
    let shared = work.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let p = probe(work.path(), &fs_config("s", &shared, ""), &[]);
    assert_eq!(p.code, 1);
    let mut lines = p.stdout.lines();
    assert!(lines.next().unwrap().starts_with("VERDICT"));
    assert!(
        p.stdout
            .contains("9 fail, 0 error, 0 authorized, 0 skipped, 1 pass"),
        "{}",
        p.stdout
    );
}

/// Every carrier of every surface type has its anchor on its type's page,
/// the place SARIF's help links and the report's channel ids point to.
#[test]
fn every_carrier_has_its_anchor_on_its_surface_page() {
    let out = bin()
        .args(["carriers", "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for ty in v["surface_types"].as_array().unwrap() {
        let name = ty["type"].as_str().unwrap();
        let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("docs/surfaces/{name}.md"));
        let text = std::fs::read_to_string(&page).unwrap_or_else(|_| panic!("no page for {name}"));
        for c in ty["carriers"].as_array().unwrap() {
            let c = c["carrier"].as_str().unwrap();
            // An explicit anchor, or a heading GitHub slugs to the id.
            let anchored = text.contains(&format!("<a id=\"{c}\"></a>"))
                || text
                    .lines()
                    .any(|l| l == format!("### {c}") || l == format!("### `{c}`"));
            assert!(anchored, "{name}.md has no anchor for {c}");
        }
    }
}

/// `-q` prints nothing but errors (the exit code says the rest), `-o`
/// puts what `--format` prints in a file, and the completions and the man
/// page come from the command line's own definition.
#[test]
fn quiet_output_completions_and_man() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let cfg = dir.path().join("rw.yml");
    std::fs::write(&cfg, fs_config("shared", &shared, "")).unwrap();
    let quiet = bin()
        .args(["-q", "probe", "--config"])
        .arg(&cfg)
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(quiet.status.code(), Some(1), "open channels: exit 1");
    assert!(
        quiet.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stdout)
    );
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let bad = bin()
        .args(["-q", "check-config", "/nonexistent.yml"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(!bad.stderr.is_empty(), "errors still print");

    let out = dir.path().join("report.json");
    let p = bin()
        .args(["probe", "--format", "json", "-o"])
        .arg(&out)
        .arg("--config")
        .arg(&cfg)
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(p.stdout.is_empty());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "runwarden-report/1");

    for shell in ["bash", "zsh", "fish", "powershell"] {
        let c = bin().args(["completions", shell]).output().unwrap();
        assert!(c.status.success());
        let text = String::from_utf8_lossy(&c.stdout);
        assert!(
            text.contains("recover") && text.contains("receipt"),
            "{shell}"
        );
    }
    let man = bin().arg("man").output().unwrap();
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(
        text.contains(".TH runwarden 1") && text.contains("probe"),
        "{text}"
    );
}

/// One man page per command, each with its exit status; every page a page
/// refers to exists; the config reference lists every surface type with
/// its keys; and `-q` is not offered where it means nothing.
#[test]
fn every_command_has_a_man_page_and_every_reference_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for cmd in [
        "probe",
        "plant",
        "recover",
        "cleanup",
        "merge",
        "publish",
        "watch",
        "check-config",
    ] {
        assert!(
            pages.contains(&format!("runwarden-{cmd}.1")),
            "{cmd}: {pages:?}"
        );
    }
    assert!(
        !pages
            .iter()
            .any(|p| p.contains("-run.") || p.contains("-help.")),
        "{pages:?}"
    );
    for page in &pages {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.contains(".SH \"EXIT STATUS\""), "{page}");
        let text = text.replace("\\-", "-");
        for (at, _) in text.match_indices("(1)") {
            let name = text[..at]
                .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap();
            assert!(
                pages.contains(&format!("{name}.1")),
                "{page} refers to {name}(1)"
            );
        }
    }
    let probe = std::fs::read_to_string(dir.path().join("runwarden-probe.1"))
        .unwrap()
        .replace("\\-", "-");
    for t in ["filesystem", "git-remote", "github-api", "network-egress"] {
        assert!(probe.contains(&format!("type: {t}")), "{t}");
    }
    assert!(probe.contains("content-reads") && probe.contains(".SH CONFIGURATION"));
    let watch = bin().args(["man", "watch"]).output().unwrap();
    assert!(String::from_utf8_lossy(&watch.stdout).contains("canary"));
    let help = |cmd: &str| {
        let o = bin().args([cmd, "--help"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(help("probe").contains("--quiet"));
    for cmd in ["man", "completions", "carriers"] {
        assert!(!help(cmd).contains("--quiet"), "{cmd}");
    }
    let none = bin().args(["man", "nosuch"]).output().unwrap();
    assert_eq!(none.status.code(), Some(2));
}

/// A path that does not exist here is valid (it may exist on the runner),
/// with a warning; a probe of it gives one clear row for the surface, and
/// the report still has every carrier's finding.
#[test]
fn a_missing_path_warns_at_check_config_and_is_one_row_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-here");
    let cfg = dir.path().join("rw.yml");
    std::fs::write(&cfg, fs_config("shared", &missing, "")).unwrap();
    let check = bin().arg("check-config").arg(&cfg).output().unwrap();
    assert_eq!(check.status.code(), Some(0));
    let err = String::from_utf8_lossy(&check.stderr);
    assert!(
        err.contains("warning: surface shared: path") && err.contains("does not exist here"),
        "{err}"
    );
    let p = probe(dir.path(), &std::fs::read_to_string(&cfg).unwrap(), &[]);
    assert_eq!(p.code, 1);
    let rows: Vec<&str> = p
        .stdout
        .lines()
        .filter(|l| l.starts_with("ERROR"))
        .collect();
    assert_eq!(rows.len(), 1, "{}", p.stdout);
    assert!(
        rows[0].contains("shared:* (10 carriers)")
            && rows[0].contains("(the carriers: file-content, file-name, "),
        "{}",
        p.stdout
    );
    assert_eq!(p.report["summary"]["error"], 10);
}

/// Progress: in GitHub Actions one line as each run starts; nothing in a
/// pipe outside CI, nothing in JSON mode. (On a terminal a line is kept up
/// to date in place; a test has no terminal.)
#[test]
fn progress_is_one_line_per_run_in_ci_and_nothing_in_pipes_or_json() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let cfg = dir.path().join("rw.yml");
    std::fs::write(&cfg, fs_config("shared", &shared, "")).unwrap();
    let run = |extra: &[&str], ci: bool| {
        let mut c = bin();
        c.arg("probe").arg("--config").arg(&cfg).args(extra);
        c.current_dir(dir.path()).env("TMPDIR", dir.path());
        if ci {
            c.env("GITHUB_ACTIONS", "true");
        }
        String::from_utf8_lossy(&c.output().unwrap().stderr).into_owned()
    };
    let ci = run(&[], true);
    let lines: Vec<&str> = ci
        .lines()
        .filter(|l| l.contains("carriers (the controls"))
        .collect();
    assert_eq!(lines.len(), 2, "{ci}");
    assert!(lines[0].contains("run A: planting 20 carriers"), "{ci}");
    assert!(ci.contains("cleaning up"), "{ci}");
    assert!(!run(&[], false).contains("planting"));
    assert!(!run(&["--format", "json"], true).contains("planting"));
}

/// What a newcomer trips over, said plainly: a $RUNWARDEN_CONFIG that
/// names no file says so, `discover --write` onto a file that exists says
/// it never writes over one, and a declaration naming no surface in a
/// config with no valid surface does not end in an empty list.
#[test]
fn first_hour_messages_name_what_went_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["check-config"])
        .env("RUNWARDEN_CONFIG", dir.path().join("nope.yml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("(named by $RUNWARDEN_CONFIG)"), "{err}");

    let existing = dir.path().join("rw.yml");
    std::fs::write(&existing, "mine\n").unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["discover", "--write"])
        .arg(&existing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("exists: never written over"), "{err}");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "mine\n");

    std::fs::write(
        &existing,
        "version: 1\nsurfaces:\n  - name: a\n    type: nosuch\ndeclared:\n  - b:file-name\n",
    )
    .unwrap();
    let out = bin().arg("check-config").arg(&existing).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("surfaces: \n") && !err.ends_with("surfaces: "),
        "{err}"
    );
}

/// On a terminal `probe` prints the brief table; `-v` and a pipe print
/// every channel. (`script` gives the probe a terminal.)
#[test]
fn a_terminal_gets_the_brief_table_and_v_the_full_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let cfg = dir.path().join("rw.yml");
    std::fs::write(&cfg, fs_config("shared", &d, "")).unwrap();
    let bin_path = env!("CARGO_BIN_EXE_runwarden");
    let on_tty = |extra: &str| {
        let cmd = format!(
            "stty cols 120; {bin_path} probe --config {} {extra} 2>/dev/null",
            cfg.display()
        );
        let out = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .expect("script (util-linux) gives the probe a terminal");
        String::from_utf8_lossy(&out.stdout).replace('\r', "")
    };
    let brief = on_tty("");
    assert!(
        brief.contains("shared (filesystem)")
            && brief.contains("— open: all but runner-persistence"),
        "{brief}"
    );
    assert!(!brief.contains("VERDICT"), "{brief}");
    let full = on_tty("-v");
    assert!(
        full.contains("VERDICT") && full.contains("shared:file-content"),
        "{full}"
    );
    let piped = bin()
        .args(["probe", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&piped.stdout).contains("VERDICT"));
}

/// `--config` is read bounded, as a regular file and never through a
/// symlink: a FIFO (0.11.0 blocked on it for ever), `/dev/zero` and a
/// symlink to it (0.11.0 read past 600 MB), and an endless-looking big
/// file are each exit 2 within moments, saying why.
#[test]
fn the_config_is_read_bounded_never_from_a_fifo_a_device_or_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.yml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let link = dir.path().join("zero.yml");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let big = dir.path().join("big.yml");
    let mut text = String::from("version: 1\nsurfaces:\n");
    while text.len() < (2 << 20) {
        text.push_str("# padding padding padding padding padding padding padding\n");
    }
    std::fs::write(&big, text).unwrap();
    let cases = [
        (fifo.as_path(), "not a regular file"),
        (std::path::Path::new("/dev/zero"), "not a regular file"),
        (link.as_path(), "symlink"),
        (big.as_path(), "larger than"),
    ];
    for (path, says) in cases {
        for cmd in ["check-config", "probe"] {
            let mut c = bin();
            c.current_dir(dir.path())
                .arg(cmd)
                .args(if cmd == "probe" {
                    vec!["--config"]
                } else {
                    vec![]
                })
                .arg(path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            let start = std::time::Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if start.elapsed() > std::time::Duration::from_secs(30) {
                    child.kill().unwrap();
                    panic!("{cmd} {} did not end", path.display());
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(status.code(), Some(2), "{cmd} {}: {err}", path.display());
            assert!(err.contains(says), "{cmd} {}: {err}", path.display());
        }
    }
}

/// A declaration of a carrier the surface's settings rule out (a build
/// cache's protocol without it) declares nothing that runs: check-config
/// says so; one of a carrier that runs, nothing.
#[test]
fn check_config_warns_of_a_declared_carrier_that_is_never_planted() {
    let work = tempfile::tempdir().unwrap();
    let cfg = work.path().join("c.yml");
    std::fs::write(
        &cfg,
        "version: 1\nsurfaces:\n  - name: bazel\n    type: build-cache\n    protocol: bazel\n    url: https://cache.example/\ndeclared:\n  - channel: bazel:artifact-tag\n    reason: one\n  - channel: bazel:entry-content\n    reason: two\n",
    )
    .unwrap();
    let out = bin().arg("check-config").arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("declared bazel:artifact-tag is never planted here (only Turborepo's API"),
        "{err}"
    );
    assert!(!err.contains("declared bazel:entry-content"), "{err}");
}
