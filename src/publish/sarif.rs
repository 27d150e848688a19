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
    // A result without a file to point at is left out of the SARIF, and
    // code scanning would take its absence for a fix and close its alert.
    let homeless = report
        .findings
        .iter()
        .filter(|f| f.verdict.is_shown())
        .filter(|f| ctx.location(f).is_none())
        .count();
    if homeless > 0 {
        return Outcome::Failed(format!(
            "not uploaded: {homeless} findings have no file in this checkout to point at (check \
             out the repository first), and code scanning would take their absence for fixes"
        ));
    }
    let text = crate::output::sarif::render(report, &ctx);
    let gzip = crate::archive::gzip_stored(text.as_bytes());
    if gzip.len() > MAX_GZIP {
        return Outcome::Failed(format!(
            "the SARIF is {} bytes gzipped, over code scanning's limit of {MAX_GZIP}; not sent",
            gzip.len()
        ));
    }
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
    let what = "uploading the SARIF";
    let id = match api.call(Method::POST, &path, Some(&body), what) {
        Ok(a) => match a.json["id"].as_str() {
            Some(id)
                if !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
            {
                id.to_string()
            }
            _ => return Outcome::Failed(format!("{what}: GitHub's answer holds no usable id")),
        },
        Err(e) => return refused(what, &e, FALLBACK, target),
    };
    if wait.is_zero() {
        return Outcome::Done(format!(
            "uploaded as {id} ({category}, {git_ref}); not waiting for processing"
        ));
    }
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
        match status["processing_status"].as_str() {
            Some("complete") => {
                return Outcome::Done(format!(
                    "uploaded as {id} ({category}, {git_ref}); code scanning processed it"
                ));
            }
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
                return Outcome::Failed(format!(
                    "code scanning could not process upload {id}: {}",
                    if errors.is_empty() {
                        "it gave no reason".into()
                    } else {
                        errors.join("; ")
                    }
                ));
            }
            Some("pending") => {}
            _ => {
                return Outcome::Failed(
                    "reading the upload's status: GitHub's answer holds no processing_status"
                        .into(),
                );
            }
        }
    }
}
