//! The SARIF upload to code scanning, as `POST …/code-scanning/sarifs`
//! takes it: the report's SARIF (the category in
//! `runs[].automationDetails.id`), gzip then base64, with `commit_sha`,
//! `ref`, `checkout_uri`, `started_at` and `tool_name`; then the
//! processing status is read until it is `complete` or `failed` (its
//! errors said), or the wait is over.
//!
//! Why the gzip is stored, not compressed: [`crate::archive::gzip_stored`]
//! is already in the binary and a runwarden SARIF is far below code
//! scanning's 10 MB; one over it is refused here, before it is sent.

use super::{Outcome, Target, refused};
use crate::github::Api;
use crate::output::repo::Context;
use crate::report::Report;
use ::http::Method;
use base64::Engine as _;
use serde_json::json;
use std::time::{Duration, Instant};

/// Code scanning's limit on the gzipped SARIF.
pub const MAX_GZIP: usize = 10 * 1024 * 1024;

const FALLBACK: &str = "`security-events: write` (and code scanning enabled for the repository)";

/// The waits between status reads: short first (a small SARIF is
/// processed in seconds), then every 15 s.
fn pause(n: u32) -> Duration {
    Duration::from_secs(match n {
        0 => 1,
        1 => 2,
        2 => 4,
        3 => 8,
        _ => 15,
    })
}

pub(super) fn publish(
    api: &Api<'_>,
    target: &Target,
    report: &Report,
    ctx: &Context,
    category: &str,
    wait: Duration,
) -> Outcome {
    let (Some(sha), Some(git_ref)) = (&target.sha, &target.git_ref) else {
        return Outcome::Failed(
            "code scanning needs the commit and the ref together: GITHUB_SHA or GITHUB_REF is \
             unset, or --sha came without --ref"
                .into(),
        );
    };
    let mut ctx = ctx.clone();
    ctx.set_category(category);
    let gzip = match gzipped_sarif(report, &ctx) {
        Ok(gzip) => gzip,
        Err(outcome) => return outcome,
    };
    let root = std::path::absolute(&ctx.root).unwrap_or_else(|_| ctx.root.clone());
    let body = json!({
        "commit_sha": sha,
        "ref": git_ref,
        "sarif": base64::engine::general_purpose::STANDARD.encode(&gzip),
        "checkout_uri": format!("file://{}", root.display()),
        "started_at": report.started_at,
        "tool_name": "runwarden",
    });
    let path = format!("/repos/{}/code-scanning/sarifs", target.repository);
    let id = match upload(api, target, &path, &body) {
        Ok(id) => id,
        Err(outcome) => return outcome,
    };
    if wait.is_zero() {
        return with_cut(
            report,
            Outcome::Done(format!(
                "uploaded as {id} ({category}, {git_ref}); not waiting for processing"
            )),
        );
    }
    let up = Uploaded {
        path,
        id,
        category,
        git_ref,
    };
    with_cut(report, await_processing(api, target, &up, wait))
}

/// The outcome of an upload, saying how many findings the SARIF left out
/// when it had to (said whatever came of the upload: the cut is ours).
fn with_cut(report: &Report, outcome: Outcome) -> Outcome {
    let cut = crate::output::sarif::left_out(report);
    if cut == 0 {
        return outcome;
    }
    let said = format!(
        "; {cut} findings over the {} results a run keeps are only in the report (AUTHORIZED first, then ERROR)",
        crate::output::sarif::MAX_RESULTS
    );
    match outcome {
        Outcome::Done(m) => Outcome::Done(m + &said),
        Outcome::Notice(m) => Outcome::Notice(m + &said),
        Outcome::Failed(m) => Outcome::Failed(m + &said),
        Outcome::Skipped(m) => Outcome::Skipped(m + &said),
    }
}

/// The report's SARIF, gzipped; or why it is not sent (a finding with no
/// file to point at, or over code scanning's limit).
fn gzipped_sarif(report: &Report, ctx: &Context) -> Result<Vec<u8>, Outcome> {
    // A result without a file of the checkout to point at would point at
    // the SARIF's stand-in, which matches none of its alerts: code
    // scanning would close each and open another.
    let homeless = report
        .findings
        .iter()
        .filter(|f| f.verdict.is_shown())
        .filter(|f| ctx.location(f).is_none())
        .count();
    if homeless > 0 {
        return Err(Outcome::Failed(format!(
            "not uploaded: {homeless} findings have no file in this checkout to point at (check \
             out the repository first), and code scanning would take their absence for fixes"
        )));
    }
    let text = crate::output::sarif::render(report, ctx);
    let gzip = crate::archive::gzip_stored(text.as_bytes());
    if gzip.len() > MAX_GZIP {
        return Err(Outcome::Failed(format!(
            "the SARIF is {} bytes gzipped, over code scanning's limit of {MAX_GZIP}; not sent",
            gzip.len()
        )));
    }
    Ok(gzip)
}

/// `POST …/code-scanning/sarifs`: the upload's id, or the outcome of a
/// refusal or an answer without a usable id.
fn upload(
    api: &Api<'_>,
    target: &Target,
    path: &str,
    body: &serde_json::Value,
) -> Result<String, Outcome> {
    let what = "uploading the SARIF";
    match api.call(Method::POST, path, Some(body), what) {
        Ok(a) => match a.json["id"].as_str() {
            Some(id)
                if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
            {
                Ok(id.to_string())
            }
            _ => Err(Outcome::Failed(format!(
                "{what}: GitHub's answer holds no usable id"
            ))),
        },
        Err(e) => Err(refused(what, &e, FALLBACK, target)),
    }
}

/// An upload code scanning took, and what its messages name.
struct Uploaded<'a> {
    /// Where SARIFs are uploaded (the status is at `{path}/{id}`).
    path: String,
    id: String,
    category: &'a str,
    git_ref: &'a str,
}

/// Reads the upload's processing status until it is `complete` or
/// `failed`, or `wait` is over.
fn await_processing(api: &Api<'_>, target: &Target, up: &Uploaded<'_>, wait: Duration) -> Outcome {
    let Uploaded {
        path,
        id,
        category,
        git_ref,
    } = up;
    let start = Instant::now();
    let mut n = 0;
    loop {
        let d = pause(n);
        if start.elapsed() + d > wait {
            return Outcome::Notice(format!(
                "uploaded as {id} ({category}, {git_ref}); code scanning was still processing it \
                 after {} s",
                start.elapsed().as_secs()
            ));
        }
        std::thread::sleep(d);
        n += 1;
        let what = format!("uploaded as {id}, but reading its processing status");
        let status = match api.call(Method::GET, &format!("{path}/{id}"), None, &what) {
            Ok(a) => a.json,
            // It landed; code scanning processes it in the background
            // (codeql-action says as much in this case).
            Err(e @ crate::github::ApiError::Denied { .. }) => {
                return refused(&what, &e, "`security-events: read`", target);
            }
            Err(e) => return Outcome::Notice(format!("{what} failed: {}", e.text())),
        };
        if let Some(outcome) = processed(&status, up) {
            return outcome;
        }
    }
}

/// What a processing status says: None while it is `pending`.
fn processed(status: &serde_json::Value, up: &Uploaded<'_>) -> Option<Outcome> {
    let Uploaded {
        id,
        category,
        git_ref,
        ..
    } = up;
    match status["processing_status"].as_str() {
        Some("complete") => Some(Outcome::Done(format!(
            "uploaded as {id} ({category}, {git_ref}); code scanning processed it"
        ))),
        Some("failed") => {
            let errors: Vec<String> = status["errors"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e.as_str())
                        .map(|e| crate::escape::bytes(e.as_bytes()))
                        .collect()
                })
                .unwrap_or_default();
            Some(Outcome::Failed(format!(
                "code scanning could not process upload {id}: {}",
                if errors.is_empty() {
                    "it gave no reason".into()
                } else {
                    errors.join("; ")
                }
            )))
        }
        Some("pending") => None,
        _ => Some(Outcome::Failed(
            "reading the upload's status: GitHub's answer holds no processing_status".into(),
        )),
    }
}
