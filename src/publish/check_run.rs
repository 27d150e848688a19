//! The check run: one per run, on the commit reviewers see, with every
//! FAIL and ERROR annotated on the config line that declares its surface.
//! GitHub takes at most 50 annotations per request, so the run is created
//! (in progress) with the first 50 and updated with the next 50 until none
//! are left, the conclusion going with the last request. If an update
//! fails, the run is closed with its conclusion and a summary that says
//! how many annotations are missing.

use super::{Outcome, Target, refused};
use crate::github::Api;
use crate::output::repo::Context;
use crate::output::review::{self, Annotation};
use crate::report::Report;
use ::http::Method;
use serde_json::{Value, json};

/// GitHub's limit per request.
pub const PER_REQUEST: usize = 50;

fn annotation(a: &Annotation) -> Value {
    json!({
        "path": a.path,
        "start_line": a.line,
        "end_line": a.line,
        "start_column": a.column,
        "end_column": a.column,
        "annotation_level": a.level,
        "title": a.title,
        "message": a.message,
    })
}

pub(super) fn publish(
    api: &Api<'_>,
    target: &Target,
    report: &Report,
    ctx: &Context,
    name: &str,
) -> Outcome {
    let Some(sha) = &target.head_sha else {
        return Outcome::Failed("no commit to put it on: GITHUB_SHA is unset (pass --sha)".into());
    };
    let (notes, homeless) = review::annotations(report, ctx);
    let conclusion = review::conclusion(report);
    let mut summary = review::check_summary(report);
    if homeless > 0 {
        summary = format!(
            "{homeless} findings have no file in the repository to point at; they are in the table below.\n\n{summary}"
        );
    }
    let output = |chunk: &[Annotation]| {
        json!({
            "title": review::headline(report),
            "summary": summary,
            "annotations": chunk.iter().map(annotation).collect::<Vec<_>>(),
        })
    };
    let chunks: Vec<&[Annotation]> = if notes.is_empty() {
        vec![&[]]
    } else {
        notes.chunks(PER_REQUEST).collect()
    };
    let last = chunks.len() - 1;
    let finish = |body: &mut Value| {
        body["conclusion"] = json!(conclusion);
        body["completed_at"] = json!(report.finished_at);
    };
    let mut first = json!({
        "name": name,
        "head_sha": sha,
        "external_id": report.probe_id,
        "started_at": report.started_at,
        "output": output(chunks[0]),
    });
    if let Some(u) = &target.run_url {
        first["details_url"] = json!(u);
    }
    if last == 0 {
        finish(&mut first);
    } else {
        first["status"] = json!("in_progress");
    }
    let path = format!("/repos/{}/check-runs", target.repository);
    let created = match api.call(Method::POST, &path, Some(&first), "creating the check run") {
        Ok(a) => a,
        Err(e) => return refused("creating the check run", &e, "`checks: write`", target),
    };
    let Some(id) = created.json["id"].as_u64() else {
        return Outcome::Failed(format!(
            "creating the check run: GitHub's answer holds no id{}",
            if last == 0 {
                ""
            } else {
                " (the run, if made, stays in progress)"
            }
        ));
    };
    let mut requests = 1;
    for (i, chunk) in chunks.iter().enumerate().skip(1) {
        let mut body = json!({ "output": output(chunk) });
        if i == last {
            finish(&mut body);
        }
        let what = "adding annotations to the check run";
        if let Err(e) = api.call(Method::PATCH, &format!("{path}/{id}"), Some(&body), what) {
            // Close the run rather than leave it in progress forever: with
            // what it has, and saying that the rest is missing.
            let mut close = json!({ "output": {
                "title": review::headline(report),
                "summary": format!(
                    "Only {} of {} annotations could be added ({}); the report has them all.\n\n{summary}",
                    i * PER_REQUEST, notes.len(), crate::output::markdown::text(&e.text())
                ),
            }});
            finish(&mut close);
            let closed = api
                .call(Method::PATCH, &format!("{path}/{id}"), Some(&close), what)
                .is_ok();
            return Outcome::Failed(format!(
                "{what}: {} ({} of {} annotations added; {})",
                e.text(),
                i * PER_REQUEST,
                notes.len(),
                if closed {
                    "the run is closed with its conclusion"
                } else {
                    "closing the run failed too: it stays in progress"
                }
            ));
        }
        requests += 1;
    }
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    Outcome::Done(format!(
        "`{name}` on {}: {conclusion}, {} in {}",
        &sha[..7],
        plural(notes.len(), "annotation"),
        plural(requests, "request")
    ))
}
