//! A workflow run's jobs, as the REST API shows them to a later run
//! (../shared/reference/github-coverage-facts.md §3): `GET
//! …/actions/runs/{run_id}/jobs` (each job with the `check_run_url` of
//! its check run, a `check-run` object of rest_commits.rs, which serves
//! its annotations), and `GET …/actions/jobs/{job_id}/logs`, a 302 to a
//! signed one-shot URL on this server that serves the plain-text log and
//! refuses a request that carries an `Authorization` header (blob storage
//! takes no token).
//!
//! The stand-in is its own runner: [`runner_line`] takes a line a step
//! printed as the runner would, a workflow command
//! (`::notice|warning|error …::msg`) becoming an annotation of the job's
//! check run (the first 10 of each level per job kept), every other line
//! going to the job's log with a timestamp.

use super::rest::{Call, message, num};
use super::{Reply, State};
use serde_json::{Value, json};

/// Annotations of one level the runner keeps (per step on GitHub; per
/// job here).
const KEPT_PER_LEVEL: usize = 10;

/// One job of a workflow run.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: u64,
    pub repo: String,
    pub run_id: u64,
    pub name: String,
    /// `queued`, `in_progress` or `completed`.
    pub status: String,
    pub runner_name: String,
    /// The id of its check run (a `check-run` object).
    pub check_run: u64,
    /// Its log so far.
    pub log: Vec<u8>,
}

/// A workflow command's level and its annotation, when `line` is one.
fn command(line: &str) -> Option<(&'static str, Value)> {
    let rest = line.strip_prefix("::")?;
    let (head, msg) = rest.split_once("::")?;
    let (name, props) = head.split_once(' ').unwrap_or((head, ""));
    let level = match name.to_ascii_lowercase().as_str() {
        "notice" => "notice",
        "warning" => "warning",
        "error" => "failure",
        _ => return None,
    };
    let unescape = |s: &str| {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%3A", ":")
            .replace("%2C", ",")
            .replace("%25", "%")
    };
    let mut p = std::collections::HashMap::new();
    for kv in props.split(',').filter(|kv| !kv.is_empty()) {
        if let Some((k, v)) = kv.split_once('=') {
            p.insert(k.trim().to_ascii_lowercase(), unescape(v));
        }
    }
    let line_no = |k: &str| p.get(k).and_then(|v| v.parse::<u64>().ok());
    let start = line_no("line").unwrap_or(1);
    Some((
        level,
        json!({
            // (A row without `file` is observed as `.github`.)
            "path": p.get("file").cloned().unwrap_or_else(|| ".github".into()),
            "start_line": start, "end_line": line_no("endline").unwrap_or(start),
            "start_column": line_no("col"), "end_column": line_no("endcolumn"),
            "annotation_level": level,
            "title": p.get("title").cloned().unwrap_or_default(),
            "message": msg.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%"),
            "raw_details": null, "blob_href": null,
        }),
    ))
}

/// A line a step of the first job of `run_id` printed, taken as the
/// runner takes it; `false` when the run has no job here.
pub fn runner_line(st: &mut State, run_id: u64, line: &str) -> bool {
    let Some(j) = st.jobs.iter().position(|j| j.run_id == run_id) else {
        return false;
    };
    let line = line.trim_end_matches(['\r', '\n']);
    match command(line) {
        Some((level, note)) => {
            let (repo, check) = (st.jobs[j].repo.clone(), st.jobs[j].check_run);
            let Some(i) = super::rest::find(st, "check-run", &repo, "id", &json!(check)) else {
                return true;
            };
            let f = &mut st.objects[i].fields;
            if let Some(all) = f["output"]["annotations"].as_array_mut() {
                let kept = all
                    .iter()
                    .filter(|a| a["annotation_level"] == level)
                    .count();
                if kept < KEPT_PER_LEVEL {
                    all.push(note);
                }
                f["output"]["annotations_count"] = json!(all.len());
            }
        }
        None => {
            let log = &mut st.jobs[j].log;
            log.extend_from_slice(b"2026-11-30T00:00:00.0000000Z ");
            log.extend_from_slice(line.as_bytes());
            log.push(b'\n');
        }
    }
    true
}

/// Adds a job of run `run_id` of `repo` with its check run (on `sha`).
pub fn add_job(
    st: &mut State,
    repo: &str,
    run_id: u64,
    name: &str,
    status: &str,
    sha: &str,
) -> u64 {
    let check = super::rest::create(
        st,
        "check-run",
        repo,
        json!({ "name": name, "head_sha": sha, "status": status,
                "output": { "title": null, "summary": null, "annotations": [], "annotations_count": 0 } }),
    );
    let id = check["id"].as_u64().unwrap_or(0);
    st.jobs.push(Job {
        id,
        repo: repo.into(),
        run_id,
        name: name.into(),
        status: status.into(),
        runner_name: format!("GitHub Actions {id}"),
        check_run: id,
        log: vec![],
    });
    id
}

fn shown(j: &Job, port: u16) -> Value {
    let api = format!("http://127.0.0.1:{port}/api/repos/{}", j.repo);
    json!({
        "id": j.id, "run_id": j.run_id, "name": j.name, "status": j.status,
        "conclusion": (j.status == "completed").then_some("success"),
        "runner_name": j.runner_name,
        "check_run_url": format!("{api}/check-runs/{}", j.check_run),
        "url": format!("{api}/actions/jobs/{}", j.id), "steps": [],
    })
}

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    Some(match (c.method, c.p) {
        ("GET", ["actions", "runs", run, "jobs"]) => {
            let run = num(run);
            let items: Vec<Value> = st
                .jobs
                .iter()
                .filter(|j| j.repo == c.repo && json!(j.run_id) == run)
                .map(|j| shown(j, c.port))
                .collect();
            if items.is_empty() {
                return Some(message(404, "Not Found"));
            }
            super::rest::page_of(items, c.url, c.port, "jobs")
        }
        ("GET", ["actions", "jobs", id, "logs"]) => {
            let Some(j) = st
                .jobs
                .iter()
                .find(|j| j.repo == c.repo && json!(j.id) == num(id))
            else {
                return Some(message(404, "Not Found"));
            };
            let job = j.id;
            let sig = match super::super::secret() {
                Ok(s) => s,
                Err(_) => return Some(message(500, "no secret")),
            };
            st.log_urls.insert(sig.clone(), job);
            let to = format!("http://127.0.0.1:{}{LOGS}{job}?sig={sig}", c.port);
            Reply::raw(302, "text/plain", vec![]).with("Location", &to)
        }
        _ => return None,
    })
}

/// Where the signed log URLs point.
pub const LOGS: &str = "/_blob/job-logs/";

/// `GET {LOGS}{job}?sig=…`: the log, once per signature; a request with
/// an `Authorization` header is refused, as blob storage refuses it.
pub fn log_blob(st: &mut State, job: &str, url: &str, auth: &str) -> Reply {
    if !auth.is_empty() {
        return Reply::raw(
            403,
            "application/xml",
            b"<Error><Code>AuthenticationFailed</Code></Error>".to_vec(),
        );
    }
    let q = super::super::query(url);
    let id = job.parse::<u64>().ok();
    let signed = q.get("sig").and_then(|s| st.log_urls.get(s)).copied();
    if signed.is_none() || signed != id {
        return Reply::raw(
            403,
            "application/xml",
            b"<Error><Code>AuthenticationFailed</Code></Error>".to_vec(),
        );
    }
    if let Some(s) = q.get("sig") {
        st.log_urls.remove(s);
    }
    match st.jobs.iter().find(|j| Some(j.id) == id) {
        Some(j) => Reply::raw(200, "text/plain; charset=utf-8", j.log.clone()),
        None => Reply::raw(404, "application/xml", b"BlobNotFound".to_vec()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn workflow_commands_become_annotations_and_other_lines_do_not() {
        let (level, a) = super::command("::notice title=rw-x%3Ay::runwarden probe %25 1").unwrap();
        assert_eq!(level, "notice");
        assert_eq!(a["title"], "rw-x:y");
        assert_eq!(a["message"], "runwarden probe % 1");
        assert_eq!(a["path"], ".github");
        assert_eq!(
            super::command("::error file=a.rs,line=3::bad").unwrap().1["start_line"],
            3
        );
        assert!(super::command("runwarden probe 1 log line").is_none());
        assert!(super::command("::add-mask::x").is_none());
    }
}
