//! `runwarden publish` (and the action's publish step after a probe or
//! recover): reads a report, publishes it (src/publish/) and says what
//! became of each part: on stderr, and in GitHub Actions also as
//! `::notice` (a refusal: the permission that is missing) or `::error`
//! (a part that broke) so that both show on the run's page.

use super::commands::read_report;
use super::outputs::print_stdout;
use super::{Failure, error, in_actions, note};
use crate::marker::Key;
use crate::publish::{self, CommentMode, Outcome, Overrides, Target};
use crate::report::Report;
use crate::{escape, output};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// The JSON report a `probe` or `recover` wrote.
    #[arg(long, value_name = "FILE")]
    pub report: PathBuf,
    /// Do not create the check run (it needs `checks: write`).
    #[arg(long)]
    pub no_check_run: bool,
    /// The check run's name (default: `runwarden`, or `runwarden (LABEL)`
    /// for a labelled report).
    #[arg(long, value_name = "NAME")]
    pub check_name: Option<String>,
    /// When to write the sticky pull request comment (it needs
    /// `pull-requests: write`).
    #[arg(long, value_enum, default_value_t = CommentMode::OnChange)]
    pub pr_comment: CommentMode,
    /// The login the comment is written as (default: who the token is,
    /// else github-actions[bot]).
    #[arg(long, value_name = "LOGIN")]
    pub comment_author: Option<String>,
    /// Upload the SARIF to code scanning (it needs `security-events:
    /// write`).
    #[arg(long)]
    pub upload_sarif: bool,
    /// The code scanning category (default: `runwarden`, or
    /// `runwarden/LABEL` for a labelled report).
    #[arg(long, value_name = "CATEGORY")]
    pub category: Option<String>,
    /// Seconds to wait for code scanning to process the upload (0: do not
    /// wait).
    #[arg(long, value_name = "SECONDS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(0..=3_600))]
    pub sarif_wait: u64,
    /// `owner/name` (default: $GITHUB_REPOSITORY).
    #[arg(long, value_name = "OWNER/NAME")]
    pub repository: Option<String>,
    /// The commit (default: $GITHUB_SHA for the upload, the pull
    /// request's head for the check run).
    #[arg(long, value_name = "SHA")]
    pub sha: Option<String>,
    /// The ref the SARIF is for (default: $GITHUB_REF).
    #[arg(long = "ref", value_name = "REF")]
    pub git_ref: Option<String>,
    /// The pull request number (default: from $GITHUB_EVENT_PATH).
    #[arg(long, value_name = "N")]
    pub pr: Option<u64>,
    /// The variable holding the token (default: GITHUB_TOKEN, else
    /// GH_TOKEN).
    #[arg(long, value_name = "VAR")]
    pub token_env: Option<String>,
}

/// Which parts, as the action's inputs or the flags ask.
pub(super) struct Parts {
    pub check_run: bool,
    pub check_name: Option<String>,
    pub comment: CommentMode,
    pub comment_author: Option<String>,
    pub upload_sarif: bool,
    pub category: Option<String>,
    pub sarif_wait: u64,
}

impl Parts {
    pub fn any(&self) -> bool {
        self.check_run || self.comment != CommentMode::Never || self.upload_sarif
    }
}

pub(super) fn publish_command(args: PublishArgs) -> Result<i32, Failure> {
    let parts = Parts {
        check_run: !args.no_check_run,
        check_name: args.check_name,
        comment: args.pr_comment,
        comment_author: args.comment_author,
        upload_sarif: args.upload_sarif,
        category: args.category,
        sarif_wait: args.sarif_wait,
    };
    let o = Overrides {
        repository: args.repository,
        sha: args.sha,
        git_ref: args.git_ref,
        pr: args.pr,
        token_env: args.token_env,
        api_url: None,
    };
    publish_report(&args.report, &parts, &o, Key::from_env())
}

/// Publishes the report at `path`: 0 when every part landed, was skipped
/// or was refused by GitHub (a notice), 1 when a part broke.
pub(super) fn publish_report(
    path: &Path,
    parts: &Parts,
    o: &Overrides,
    key: Key,
) -> Result<i32, Failure> {
    let report = read_report(path)?;
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let target = Target::from_env(&env, o)?;
    publish_to(&report, &target, parts, key)
}

/// The action's publish step: as [`publish_report`], but where there is
/// nothing to publish to (no repository or token in the environment: the
/// action run outside a workflow), a note instead of an error.
/// Never an error: the probe's exit code is the step's, and a report that
/// cannot be read back is a part that broke (1).
pub(super) fn publish_after_action(path: &Path, parts: &Parts, key: Key) -> i32 {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let target = match Target::from_env(&env, &Overrides::default()) {
        Ok(t) => t,
        Err(why) => {
            note(&format!("publish: skipped: {why}"));
            return 0;
        }
    };
    match read_report(path).and_then(|r| publish_to(&r, &target, parts, key)) {
        Ok(code) => code,
        Err(e) => {
            error(&format!("publish: {e}"));
            1
        }
    }
}

fn publish_to(report: &Report, target: &Target, parts: &Parts, key: Key) -> Result<i32, Failure> {
    let label = report.label.as_deref();
    let opts = publish::Options {
        check_run: parts.check_run.then(|| {
            parts.check_name.clone().unwrap_or_else(|| match label {
                // A relayed report's label: shown, never a flood or
                // invisible characters, in GitHub's list and in the log.
                Some(l) => format!("runwarden ({})", escape::line(&escape::clip(l, 100))),
                None => "runwarden".into(),
            })
        }),
        comment: parts.comment,
        comment_author: parts.comment_author.clone(),
        sarif_category: parts.upload_sarif.then(|| {
            parts
                .category
                .clone()
                .unwrap_or_else(|| output::repo::default_category(report))
        }),
        sarif_wait: Duration::from_secs(parts.sarif_wait),
        key,
    };
    let ctx = output::repo::Context::from_env(report);
    let results = publish::publish(report, &ctx, target, &opts);
    let in_actions = in_actions();
    let mut broke = false;
    for (part, outcome) in &results {
        let (kind, text) = match outcome {
            Outcome::Done(t) => (None, t),
            Outcome::Skipped(t) => (None, t),
            Outcome::Notice(t) => (Some("notice"), t),
            Outcome::Failed(t) => {
                broke = true;
                (Some("error"), t)
            }
        };
        let text = crate::redact::text(text);
        let line = format!("{part}: {text}");
        if in_actions && let Some(kind) = kind {
            // The title names the part; the message is the rest.
            print_stdout(&format!(
                "::{kind} title=runwarden {part}::{}\n",
                super::log_line(&text)
            ))?;
        } else if kind == Some("error") {
            error(&line);
        } else {
            note(&line);
        }
    }
    Ok(i32::from(broke))
}
