//! Where a finished report goes: the chosen format on stdout, the report
//! and SARIF files (each written atomically, opened before any work), and
//! the runner's files.

use super::action::{GithubOptions, github_files};
use super::{Failure, OutputArgs, Outputs, in_actions, note};
use crate::output::table::Fit;
use crate::output::{self, Format};
use crate::report::{Mode, Report};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// An output file's temp file, opened before any work: an unwritable
/// location is "could not run", not a surprise after the probe.
pub(super) fn pending(path: Option<&Path>) -> Result<Option<(&Path, Pending)>, Failure> {
    path.map(|p| Pending::open(p).map(|o| (p, o))).transpose()
}

impl OutputArgs {
    pub(super) fn open(&self) -> Result<Outputs<'_>, Failure> {
        Ok(Outputs {
            report: pending(self.report.as_deref())?,
            sarif: pending(self.sarif.as_deref())?,
            format: match self.format {
                Format::Table if self.verbose => Format::TableWide,
                f => f,
            },
            output: pending(self.output.as_deref())?,
        })
    }
}

/// Prints and writes a finished report; returns its exit code.
pub(super) fn write_outputs(
    report: &Report,
    outs: Outputs<'_>,
    gh: &GithubOptions,
) -> Result<i32, Failure> {
    let args = &outs;
    // The results are printed first: a report that cannot be written at the
    // end (a full disk) must not swallow them.
    let report_path = args
        .report
        .as_ref()
        .map(|(p, _)| p.to_string_lossy().into_owned());
    let sarif_path = args
        .sarif
        .as_ref()
        .map(|(p, _)| p.to_string_lossy().into_owned());
    let ctx = output::sarif::Context::from_env(report);
    let to_stdout = args.output.is_none() && !super::quiet();
    let text = match args.format {
        Format::Json => output::json::render(report),
        // Brief only for a person at a terminal: a pipe, a file and a log
        // keep every channel (they are read later, or by a program).
        Format::Table if to_stdout && std::io::stdout().is_terminal() => {
            output::table::render_brief(report, terminal_width())
        }
        // -v on a terminal: every row, fitted to it.
        Format::TableWide if to_stdout && std::io::stdout().is_terminal() => {
            output::table::render_wide(report, Fit::Terminal(terminal_width()))
        }
        Format::Table | Format::TableWide | Format::Github => output::table::render(report),
    };
    if to_stdout {
        let shown = if args.format != Format::Json && colour() {
            output::table::colour(&text)
        } else {
            text.clone()
        };
        print_stdout(&shown)?;
    }
    // Annotations are workflow commands for the runner: on stdout whatever
    // `--output` or `--quiet` do with the table (in a file or unprinted
    // they would be lost, and they are the errors `-q` still shows).
    if args.format == Format::Github && gh.annotations && report.mode != Mode::Cleanup {
        print_stdout(&output::github::annotations(
            report,
            &ctx,
            report_path.as_deref(),
        ))?;
    }
    if let Some(sig) = crate::signals::received() {
        note(&if report.mode == Mode::Watch {
            format!("{sig} passed on to the watched command; the canaries were removed")
        } else {
            format!("interrupted by {sig}; cleanup ran; unfinished carriers are ERROR")
        });
    }
    let Outputs {
        report: report_out,
        sarif: sarif_out,
        format,
        output,
    } = outs;
    if let Some((_, out)) = output {
        out.write(&text)?;
    }
    if let Some((_, out)) = report_out {
        out.write(&output::json::render(report))?;
    }
    if let Some((_, out)) = sarif_out {
        out.write(&output::sarif::render(report, &ctx))?;
        let cut = output::sarif::left_out(report);
        if cut > 0 {
            // Printed even with --quiet: a SARIF never drops a finding
            // silently.
            super::error(&format!(
                "warning: the SARIF holds {} results, as many as code scanning keeps per run: {cut} more (AUTHORIZED first, then ERROR) are only in the report",
                output::sarif::MAX_RESULTS
            ));
        }
    }
    if format == Format::Github && report.mode != Mode::Cleanup {
        github_files(
            report,
            report_path.as_deref(),
            sarif_path.as_deref(),
            gh.summary,
        )?;
    }
    if report.nothing_tested() {
        // Printed even with --quiet: the exit code says it fails.
        super::error(
            "nothing was tested: every carrier of every surface was SKIPPED (each says why); exit 1",
        );
    }
    Ok(report.exit_code())
}

/// An output file written atomically: a temporary file in the target's
/// directory, made before the probe starts, renamed over the target at the
/// end.
pub(super) struct Pending {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl Pending {
    pub(super) fn open(path: &Path) -> Result<Pending, Failure> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // Said plainly: the temporary file's own error would name a file
        // the user never asked for.
        if !dir.is_dir() {
            return Err(Failure::Other(format!(
                "cannot write {}: the directory {} does not exist",
                path.display(),
                dir.display()
            )));
        }
        let tmp = tempfile::Builder::new()
            .prefix(".runwarden-")
            .tempfile_in(&dir)
            .map_err(|e| {
                Failure::Other(format!(
                    "cannot write {}: the directory {} is not writable ({})",
                    path.display(),
                    dir.display(),
                    std::io::Error::from(e.kind())
                ))
            })?;
        Ok(Pending {
            tmp,
            path: path.to_path_buf(),
        })
    }

    /// No fsync: the rename makes the write atomic for readers, and
    /// durability across a power cut (a journal commit, ~30 ms on ext4) is
    /// not worth it for a CI report.
    pub(super) fn write(mut self, body: &str) -> Result<(), Failure> {
        let failed = |e: &dyn std::fmt::Display| {
            Failure::Other(format!("cannot write {}: {e}", self.path.display()))
        };
        self.tmp
            .write_all(body.as_bytes())
            .map_err(|e| failed(&e))?;
        self.tmp.persist(&self.path).map_err(|e| failed(&e.error))?;
        Ok(())
    }
}

pub(super) fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`) is the reader's choice, not a failure.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Other(format!("cannot write to stdout: {e}"))),
    }
}

/// The width of the terminal on stdout (100 when it does not say).
fn terminal_width() -> usize {
    crate::sys::terminal_width(libc::STDOUT_FILENO).unwrap_or(crate::wrap::PROSE)
}

/// How a table printed on stdout fits: the terminal's width, or piped.
pub(super) fn stdout_fit() -> Fit {
    if std::io::stdout().is_terminal() {
        Fit::Terminal(terminal_width())
    } else {
        Fit::Piped
    }
}

/// Colour for the verdicts: only when stdout is a terminal, not under
/// `NO_COLOR` (no-color.org), and never in CI logs' pipes.
fn colour() -> bool {
    let tty = std::io::stdout().is_terminal();
    tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// What a command's runs plant: a probe's run A its carriers and the
/// controls', a plant's only its carriers, a recover's only the controls'.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Planting {
    Both,
    Carriers,
    Controls,
}

/// Progress on stderr while the runs work: on a terminal, one line kept up
/// to date (run by run, carrier by carrier) and cleared at the end; in
/// GitHub Actions, one line as each run starts; nothing in pipes, in JSON
/// mode or with `--quiet`.
pub(super) fn show_progress(format: Format, planting: Planting) {
    use crate::engine::Progress;
    if super::quiet() || format == Format::Json {
        return;
    }
    let tty = std::io::stderr().is_terminal();
    let ci = in_actions();
    let what = move |role: &str| match (role, planting) {
        ("A", Planting::Carriers) => ("run A: planting", "carriers"),
        ("A", Planting::Controls) => ("run A: planting", "carriers on the controls"),
        ("A", Planting::Both) => ("run A: planting", "carriers (the controls' included)"),
        ("B", _) => ("run B: recovering", "carriers (the controls' included)"),
        _ => ("cleaning up", "journal entries"),
    };
    if tty {
        // Drawn only once the run has taken a second: a probe done in a
        // blink gets no progress line flashing past.
        let since = std::time::Instant::now();
        let drawn = std::sync::atomic::AtomicBool::new(false);
        crate::engine::set_progress(Box::new(move |p| {
            use std::sync::atomic::Ordering;
            if since.elapsed() < std::time::Duration::from_secs(1) {
                return;
            }
            if matches!(p, Progress::Finished { .. }) && !drawn.load(Ordering::Relaxed) {
                return;
            }
            drawn.store(true, Ordering::Relaxed);
            let line = match p {
                Progress::Started { role, total } => format!("{} 0/{total}", what(role).0),
                Progress::Step { role, done, total } => format!("{} {done}/{total}", what(role).0),
                Progress::Finished { .. } => String::new(),
            };
            // \r and clear-to-end: the line is rewritten in place.
            eprint!(
                "\r\x1b[K{}",
                if line.is_empty() {
                    line
                } else {
                    format!("runwarden: {line}")
                }
            );
        }));
    } else if ci {
        crate::engine::set_progress(Box::new(move |p| {
            if let Progress::Started { role, total } = p {
                let (doing, units) = what(role);
                eprintln!("runwarden: {doing} {total} {units}");
            }
        }));
    }
}

/// Says why runwarden could not run (exit 2): each line on stderr, and in
/// GitHub Actions also an `::error` (at the config's line, for a config
/// error) and a job summary saying the run did not happen.
pub fn not_run(e: &Failure) {
    for line in e.lines() {
        super::error(&line);
    }
    if !super::in_actions() {
        return;
    }
    let lines: Vec<(Option<output::github::At>, String)> = match e {
        Failure::Config(errs) => errs
            .0
            .iter()
            .map(|c| {
                let at = (c.file.clone(), c.pos.line, c.pos.column);
                (Some(at), c.message.clone())
            })
            .collect(),
        Failure::Other(m) => vec![(None, m.clone())],
    };
    let lines: Vec<_> = lines
        .into_iter()
        .map(|(at, m)| (at, crate::redact::text(&m)))
        .collect();
    let (commands, summary) = output::github::not_run(&lines);
    let _ = super::print_stdout(&commands);
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .and_then(|mut f| f.write_all(summary.as_bytes()));
    }
}
