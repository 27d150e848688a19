//! Code scanning's SARIF upload: `POST …/code-scanning/sarifs` and the
//! processing status `GET …/code-scanning/sarifs/{id}`, behind
//! `security_events`. It rejects what GitHub rejects
//! (../shared/reference/github-api-facts.md §6): a `commit_sha` that is not
//! 40 hex digits, a `ref` that is not a branch, tag or pull request ref, a
//! `sarif` that is not base64 of a gzip member, and a gzipped SARIF over
//! 10 MB (413). It keeps the gzip bytes as they came; a test decompresses
//! them with the real `gzip` and validates what is inside. What
//! processing makes of them (analyses, alerts) is rest_analyses.rs.

use super::rest::{Call, invalid, is_sha, message, str_of};
use super::{Reply, State};
use base64::Engine as _;
use serde_json::json;

/// Code scanning's limit on the gzipped SARIF.
pub const MAX_GZIP: usize = 10 * 1024 * 1024;

/// One upload as the server received it.
#[derive(Clone, Debug)]
pub struct Upload {
    pub id: String,
    pub repo: String,
    /// The request body's fields, `sarif` left out.
    pub fields: serde_json::Value,
    /// The gzip member `sarif` carried (base64 decoded).
    pub gzip: Vec<u8>,
    /// Status reads so far.
    pub polls: u32,
    /// Why processing its SARIF failed (rest_analyses.rs), if it did.
    pub sarif_errors: Vec<String>,
    /// Its analyses, until processing adds them.
    pub analyses: Option<Vec<serde_json::Value>>,
}

/// How the next uploads are processed: `pending` status reads before the
/// outcome, and the errors that make it `failed` (none: `complete`).
#[derive(Clone, Debug, Default)]
pub struct Processing {
    pub pending: u32,
    pub errors: Option<Vec<String>>,
}

fn valid_ref(r: &str) -> bool {
    let tail = |p: &str| r.strip_prefix(p).is_some_and(|t| !t.is_empty());
    let pull = r.strip_prefix("refs/pull/").and_then(|t| t.split_once('/'));
    tail("refs/heads/")
        || tail("refs/tags/")
        || pull.is_some_and(|(n, kind)| {
            !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
                && matches!(kind, "merge" | "head")
        })
}

pub(super) fn route(st: &mut State, c: &Call) -> Option<Reply> {
    Some(match (c.method, c.p) {
        ("POST", ["code-scanning", "sarifs"]) => {
            // GitHub's answer where code scanning is off (a private
            // repository without GitHub Code Security): a 403 that is no
            // permission's (docs: "Advanced Security must be enabled").
            if st.scanning_off.contains(c.repo) {
                return Some(message(
                    403,
                    "GitHub Code Security or GitHub Advanced Security must be enabled for this \
                     repository to use code scanning.",
                ));
            }
            let body = c.body;
            if !is_sha(str_of(body, "commit_sha")) {
                return Some(invalid(
                    "commit_sha is not a valid commit SHA (40 hex digits)",
                ));
            }
            if !valid_ref(str_of(body, "ref")) {
                return Some(invalid(
                    "ref must be refs/heads/…, refs/tags/…, refs/pull/N/merge or refs/pull/N/head",
                ));
            }
            let Ok(gzip) =
                base64::engine::general_purpose::STANDARD.decode(str_of(body, "sarif").as_bytes())
            else {
                return Some(message(400, "sarif is not valid base64"));
            };
            if gzip.len() > MAX_GZIP {
                return Some(message(413, "SARIF file is too large"));
            }
            if !gzip.starts_with(&[0x1f, 0x8b]) {
                return Some(message(400, "sarif is not gzip compressed"));
            }
            let id = format!("{:08x}-0000-4000-8000-{:012x}", st.next_id(), st.log.len());
            let mut fields = body.clone();
            if let Some(o) = fields.as_object_mut() {
                o.remove("sarif");
            }
            let (analyses, sarif_errors) = match super::rest_analyses::analyses_of(&gzip, &fields) {
                Ok(a) => (Some(a), vec![]),
                Err(e) => (None, e),
            };
            st.sarifs.push(Upload {
                id: id.clone(),
                repo: c.repo.to_string(),
                fields,
                gzip,
                polls: 0,
                sarif_errors,
                analyses,
            });
            if st.processing.pending == 0 && st.processing.errors.is_none() {
                processed(st, &id);
            }
            let url = format!(
                "http://127.0.0.1:{}/api/repos/{}/code-scanning/sarifs/{id}",
                c.port, c.repo
            );
            Reply::json(202, json!({ "id": id, "url": url }))
        }
        ("GET", ["code-scanning", "sarifs", id]) => {
            let processing = st.processing.clone();
            let repo = c.repo;
            let Some(u) = st.sarifs.iter_mut().find(|u| u.id == *id && u.repo == repo) else {
                return Some(message(404, "Not Found"));
            };
            u.polls += 1;
            let errors = processing
                .errors
                .clone()
                .or_else(|| (!u.sarif_errors.is_empty()).then(|| u.sarif_errors.clone()));
            let analyses = format!(
                "http://127.0.0.1:{}/api/repos/{repo}/code-scanning/analyses?sarif_id={id}",
                c.port
            );
            if u.polls <= processing.pending {
                Reply::json(
                    200,
                    json!({ "processing_status": "pending", "analyses_url": null, "errors": null }),
                )
            } else if let Some(errors) = errors {
                Reply::json(
                    200,
                    json!({ "processing_status": "failed", "analyses_url": null, "errors": errors }),
                )
            } else {
                let id = id.to_string();
                processed(st, &id);
                Reply::json(
                    200,
                    json!({ "processing_status": "complete", "analyses_url": analyses, "errors": null }),
                )
            }
        }
        _ => return super::rest_analyses::route(st, c),
    })
}

/// Upload `id` processed: its analyses added (once).
fn processed(st: &mut State, id: &str) {
    let Some(u) = st.sarifs.iter_mut().find(|u| u.id == id) else {
        return;
    };
    let (repo, analyses) = (u.repo.clone(), u.analyses.take());
    if let Some(a) = analyses {
        super::rest_analyses::add(st, &repo, id, a);
    }
}

#[cfg(test)]
mod tests {
    use super::valid_ref;

    #[test]
    fn refs_code_scanning_takes() {
        for ok in [
            "refs/heads/main",
            "refs/tags/v1",
            "refs/pull/12/merge",
            "refs/pull/3/head",
        ] {
            assert!(valid_ref(ok), "{ok}");
        }
        for bad in [
            "main",
            "refs/heads/",
            "refs/pull/x/merge",
            "refs/pull/1/other",
            "refs/remotes/o/m",
        ] {
            assert!(!valid_ref(bad), "{bad}");
        }
    }
}
