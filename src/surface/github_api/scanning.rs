//! `code-scanning`: a SARIF upload whose category
//! (`runs[0].automationDetails.id`), rule id and result message carry the
//! nonce (../shared/reference/github-coverage-facts.md §2). Run A uploads
//! it (`POST …/code-scanning/sarifs`, gzip then base64, as
//! src/publish/sarif.rs uploads runwarden's own SARIF) and reads the
//! processing status until it is `complete` or `failed`, within the
//! consistency wait; run B lists the analyses and the alerts of the
//! plant's ref (the table's routes, [`super::carriers::routes`]); cleanup
//! deletes the analyses of this upload, where GitHub calls them
//! `deletable`.
//!
//! An entry is `{carrier, git_ref, commit, category, sarif_id, tag}`
//! ([`entry::Scanning`]):
//! `category` is the nonce name, `sarif_id` the upload's id GitHub gave
//! (null in the intent journalled before the request).

use super::answers::{Analysis, Upload, node};
use super::entry::{self, Entry, Needle, Planted};
use super::{Gh, GitHubApi, Settings, carriers};
use crate::escape;
use crate::fault::Fault;
use crate::github::{Api, ApiError};
use crate::nonce::Nonce;
use crate::surface::{CleanupOutcome, Job, Journal, PlantOutcome, RunCtx};
use ::http::Method;
use base64::Engine as _;
use serde_json::{Value, json};

/// The SARIF's tool: its own name, so the plant's analyses are a set of
/// their own (ref + tool + category), apart from runwarden's published
/// SARIF (`runwarden`) and every other tool's.
pub const TOOL: &str = "runwarden-probe";

/// GitHub's 404 message for a repository with no analysis (seen in
/// liatrio/liatrio-otel-collector#395): the listing is empty, not broken.
const NO_ANALYSIS: &str = "no analysis found";

/// What GitHub's 403 says where code scanning is off for the repository
/// ("GitHub Code Security or GitHub Advanced Security must be enabled for
/// this repository to use code scanning.", in GitHub's docs).
const SCANNING_OFF: &str = "must be enabled";

/// Rounds of "list, delete the deletable, list again" cleanup takes: a
/// set's analyses are deletable one at a time, newest first.
const ROUNDS: usize = 20;

/// Whether `r` is a ref code scanning takes: `^refs/(heads|tags|pull)/`
/// and something after it, printable ASCII without spaces.
pub fn valid_ref(r: &str) -> bool {
    let tail = ["refs/heads/", "refs/tags/", "refs/pull/"]
        .iter()
        .find_map(|p| r.strip_prefix(p));
    tail.is_some_and(|t| !t.is_empty())
        && r.len() <= 255
        && r.bytes().all(|b| b.is_ascii_graphic())
        && crate::surface::plain_ref(r)
}

/// The SARIF run A uploads: one run, one rule, one result.
fn sarif(ctx: &RunCtx<'_>, name: &str, hex: &str) -> Value {
    json!({
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [{
            "tool": { "driver": {
                "name": TOOL,
                "informationUri": "https://github.com/runwarden/runwarden",
                "rules": [{
                    "id": name,
                    "shortDescription": { "text": "runwarden probe" },
                }],
            }},
            "automationDetails": { "id": name },
            "results": [{
                "ruleId": name,
                "level": "note",
                "message": { "text": format!("runwarden probe {} {hex}", ctx.probe_id) },
                "locations": [{ "physicalLocation": {
                    "artifactLocation": { "uri": "runwarden-probe" },
                    "region": { "startLine": 1 },
                }}],
            }],
        }],
    })
}

/// The entry of a plant of `nonce` on `git_ref` and `commit`
/// (`sarif_id`: the upload's id, `None` for the intent).
pub fn entry(
    ctx: &RunCtx<'_>,
    nonce: &Nonce,
    git_ref: &str,
    commit: &str,
    sarif_id: Option<&str>,
) -> entry::Scanning {
    entry::Scanning {
        carrier: Gh::CodeScanning.name().to_string(),
        git_ref: git_ref.to_string(),
        commit: commit.to_string(),
        category: carriers::nonce_name(ctx, nonce),
        sarif_id: sarif_id.map(String::from),
        tag: carriers::entry_tag(ctx, Gh::CodeScanning, &nonce.hex()),
    }
}

/// The entry of this instance's plant (its configured ref and commit).
pub fn planned_entry(
    s: &Settings,
    ctx: &RunCtx<'_>,
    nonce: &Nonce,
) -> Result<entry::Scanning, Fault> {
    let git_ref = s
        .git_ref
        .as_deref()
        .ok_or_else(|| Fault::unsupported("no ref"))?;
    let commit = s
        .commit
        .as_deref()
        .ok_or_else(|| Fault::unsupported("no commit"))?;
    Ok(entry(ctx, nonce, git_ref, commit, None))
}

/// Whether an upload id is one GitHub's form allows (letters, digits,
/// `-`): it goes into a path and a query.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The entry this probe's plant journals for what code-scanning entry `e`
/// names: rebuilt from its nonce (in the category), its ref and commit
/// (the plant's, in their forms) and its upload id (in GitHub's form), tag
/// and all (the caller compares the two); `Invalid` when it names no such
/// plant.
pub fn wanted(ctx: &RunCtx<'_>, e: &entry::Scanning) -> Result<Entry, Fault> {
    let not = Fault::invalid;
    let nonce = carriers::nonce_in_name(ctx, Some(&e.category))
        .ok_or_else(|| not("holds no nonce in runwarden's form"))?;
    if !valid_ref(&e.git_ref) {
        return Err(not("names no ref code scanning takes"));
    }
    if !(e.commit.len() == 40 && e.commit.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(not("names no commit"));
    }
    let id = match e.sarif_id.as_deref() {
        None => None,
        Some(id) if valid_id(id) => Some(id),
        Some(_) => return Err(not("its upload id is not in GitHub's form")),
    };
    Ok(Entry::Scanning(entry(
        ctx, &nonce, &e.git_ref, &e.commit, id,
    )))
}

/// Whether `category` (as GitHub lists it) is the plant's `name`
/// (codeql-action adds a trailing `/` to a category; how GitHub derives
/// the listed one from `automationDetails.id` is unconfirmed, so either).
fn is_category(category: Option<&str>, name: &str) -> bool {
    category.is_some_and(|c| c == name || c.strip_suffix('/') == Some(name))
}

/// `…/code-scanning/analyses?ref=…[&sarif_id=…]` of `git_ref`.
pub fn analyses_path(rp: &str, git_ref: &str, sarif_id: Option<&str>) -> String {
    let mut p = format!(
        "{rp}/code-scanning/analyses?ref={}",
        crate::wire::percent_encode(git_ref).replace('/', "%2F")
    );
    if let Some(id) = sarif_id {
        p.push_str(&format!("&sarif_id={id}"));
    }
    p
}

impl GitHubApi {
    /// Run A: the intent, the upload, the entry with the upload's id, then
    /// the processing status until code scanning says.
    pub(super) fn plant_scanning(
        &self,
        ctx: &RunCtx<'_>,
        job: &Job<Gh>,
        journal: &mut Journal<'_, Entry>,
    ) -> PlantOutcome<Needle> {
        let intent = match planned_entry(&self.settings, ctx, &job.nonce) {
            Ok(e) => e,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return PlantOutcome::Error { reason: f.into() },
        };
        let name = carriers::nonce_name(ctx, &job.nonce);
        let text = sarif(ctx, &name, &job.nonce.hex()).to_string();
        let gzip = crate::archive::gzip_stored(text.as_bytes());
        let (git_ref, commit) = (intent.git_ref.clone(), intent.commit.clone());
        let intent = Entry::Scanning(intent);
        let body = json!({
            "commit_sha": commit,
            "ref": git_ref,
            "sarif": base64::engine::general_purpose::STANDARD.encode(&gzip),
            "tool_name": TOOL,
        });
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        let path = format!("{rp}/code-scanning/sarifs");
        journal.record(&intent);
        let what = format!("uploading code-scanning's SARIF to {}", self.repo());
        let id = match api.call(Method::POST, &path, Some(&body), &what) {
            Ok(a) => match node::<Upload>(&a.json).id.filter(|i| valid_id(i)) {
                Some(id) => id,
                None => {
                    return PlantOutcome::Error {
                        reason: format!("{what}: GitHub's answer holds no usable id"),
                    };
                }
            },
            // GitHub's 403 where code scanning is off (GitHub Code
            // Security, for a private repository), which no token changes:
            // the carrier cannot exist, not closed.
            Err(e @ ApiError::Denied { .. }) if e.text().contains(SCANNING_OFF) => {
                journal.retract(&intent);
                return PlantOutcome::Unsupported {
                    reason: format!(
                        "GitHub took no SARIF for a reason that is not the token's permission ({}): \
                         code scanning is off for {}",
                        e.text(),
                        self.repo()
                    ),
                };
            }
            Err(e @ ApiError::Denied { .. }) => {
                journal.retract(&intent);
                return self.refused(&e);
            }
            Err(e) => return PlantOutcome::Error { reason: e.text() },
        };
        journal.record(&Entry::Scanning(entry(
            ctx,
            &job.nonce,
            &git_ref,
            &commit,
            Some(&id),
        )));
        let processed = match self.processed(&api, &format!("{path}/{id}")) {
            Ok(p) => p,
            Err(reason) => return PlantOutcome::Error { reason },
        };
        PlantOutcome::Planted {
            needle: Needle::Planted(Planted {
                git_ref: Some(git_ref.clone()),
                commit: Some(commit.clone()),
                ..Planted::of(&job.nonce)
            }),
            persistence: None,
            detail: format!(
                "a SARIF uploaded to {} (upload {id}, category {name}, tool {TOOL}) for {} at \
                 {commit}, written with {}; {processed}",
                self.repo(),
                escape::bytes(git_ref.as_bytes()),
                escape::bytes(self.settings.token_source.as_bytes()),
            ),
        }
    }

    /// The processing status, read until it is `complete` or `failed` or
    /// the consistency wait is over: what to say of it, or (`Err`) why the
    /// plant failed (code scanning could not process it).
    fn processed(&self, api: &Api<'_>, status: &str) -> Result<String, String> {
        let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
        let what = "reading the upload's processing status";
        let c = crate::surface::listing::until_current(wait, || {
            let a = api.call(Method::GET, status, None, what)?;
            let status = node::<Upload>(&a.json).processing_status;
            let done = matches!(status.as_deref(), Some("complete" | "failed"));
            Ok::<_, ApiError>((a.json, done))
        });
        let c = match c {
            Ok(c) => c,
            // The SARIF landed; what it came to is for run B to see.
            Err(e) => {
                return Ok(format!(
                    "its processing status did not answer: {}",
                    e.text()
                ));
            }
        };
        match node::<Upload>(&c.value).processing_status.as_deref() {
            Some("complete") => Ok("code scanning processed it".into()),
            Some("failed") => {
                let errors: Vec<String> = crate::wire::string_array(&c.value["errors"])
                    .iter()
                    .map(|e| escape::bytes(e.as_bytes()))
                    .collect();
                Err(format!(
                    "code scanning could not process the plant's SARIF: {}",
                    if errors.is_empty() {
                        "it gave no reason".into()
                    } else {
                        errors.join("; ")
                    }
                ))
            }
            _ => Ok(format!(
                "code scanning was still processing it after {:.1} s",
                c.waited.as_secs_f64()
            )),
        }
    }

    /// Cleanup by probe id: the uploads whose analyses (on any ref, of the
    /// probe's tool) have the category of `nonce`, as full entries (their
    /// ref, commit and upload id as GitHub lists them; [`owned`] checks
    /// each).
    pub(super) fn find_scanning(
        &self,
        ctx: &RunCtx<'_>,
        nonce: &Nonce,
    ) -> Result<Vec<Entry>, Fault> {
        let api = self.api(false)?;
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        let name = carriers::nonce_name(ctx, nonce);
        let mut found: Vec<Entry> = vec![];
        api.list(
            &format!("{rp}/code-scanning/analyses?tool_name={TOOL}"),
            None,
            "listing the probe's analyses",
            &mut |a| {
                let a: Analysis = node(a);
                let (Some(r), Some(c), Some(id)) = (&a.git_ref, &a.commit_sha, &a.sarif_id) else {
                    return;
                };
                let e = Entry::Scanning(entry(ctx, nonce, r, c, Some(id)));
                if is_category(a.category.as_deref(), &name) && !found.contains(&e) {
                    found.push(e);
                }
            },
        )
        .or_else(|e| match e {
            // No analysis at all in the repository: none of the probe's.
            ApiError::NotFound(m) if m.contains(NO_ANALYSIS) => Ok(0),
            e => Err(Fault::broken(e.text())),
        })?;
        Ok(found)
    }

    /// Cleanup: the analyses of the plant's upload (its category, and its
    /// upload id when the entry has one), deleted newest first where
    /// GitHub says `deletable`, with `confirm_delete` (the set, its ref,
    /// tool and category, is the plant's own: the alert history it ends is
    /// the probe's); what stays is listed.
    pub(super) fn clean_scanning(&self, e: &entry::Scanning) -> CleanupOutcome {
        let api = match self.api(false) {
            Ok(a) => a,
            Err(f) => return CleanupOutcome::Left { reason: f.into() },
        };
        let rp = format!(
            "/repos/{}",
            self.settings.repository.as_deref().unwrap_or("")
        );
        let (name, git_ref) = (e.category.as_str(), e.git_ref.as_str());
        let id = e.sarif_id.as_deref();
        let list = analyses_path(&rp, git_ref, id);
        let mut removed = false;
        for _ in 0..ROUNDS {
            // Each with its id as GitHub wrote it, whatever its type.
            let mut ours: Vec<(Analysis, String)> = vec![];
            let r = api.list(&list, None, "listing the plant's analyses", &mut |v| {
                let a: Analysis = node(v);
                let upload = id.is_none_or(|id| a.sarif_id.as_deref() == Some(id));
                let tool = a.tool.as_ref().and_then(|t| t.name.as_deref());
                if upload && is_category(a.category.as_deref(), name) && tool == Some(TOOL) {
                    ours.push((a, v["id"].to_string()));
                }
            });
            match r {
                // GitHub's answer where the repository has no analysis
                // left (`no analysis found`): none of the plant's either.
                Ok(_) => {}
                Err(ApiError::NotFound(m)) if m.contains(NO_ANALYSIS) => {}
                Err(err) => return CleanupOutcome::Left { reason: err.text() },
            }
            if ours.is_empty() {
                return match (removed, id) {
                    (true, _) => CleanupOutcome::Removed,
                    (false, Some(id)) => self.unlisted(&api, &rp, id),
                    (false, None) => CleanupOutcome::Gone,
                };
            }
            let deletable: Vec<u64> = ours
                .iter()
                .filter(|(a, _)| a.deletable == Some(true))
                .filter_map(|(a, _)| a.id)
                .collect();
            if deletable.is_empty() {
                let ids: Vec<&str> = ours.iter().map(|(_, id)| id.as_str()).collect();
                return CleanupOutcome::Left {
                    reason: format!(
                        "GitHub calls none of the plant's analyses deletable ({}): a newer \
                         analysis of the same ref, tool and category is in the way",
                        escape::bytes(ids.join(", ").as_bytes())
                    ),
                };
            }
            for a in deletable {
                let path = format!("{rp}/code-scanning/analyses/{a}?confirm_delete=true");
                match api.call(Method::DELETE, &path, None, "deleting the plant's analysis") {
                    Ok(_) => removed = true,
                    Err(ApiError::NotFound(_)) => {}
                    Err(err) => return CleanupOutcome::Left { reason: err.text() },
                }
            }
        }
        CleanupOutcome::Left {
            reason: format!(
                "the plant's analyses were still listed after {ROUNDS} rounds of deletes"
            ),
        }
    }

    /// No analysis of upload `id` is listed: gone, unless code scanning is
    /// still processing it (then it may yet appear).
    fn unlisted(&self, api: &Api<'_>, rp: &str, id: &str) -> CleanupOutcome {
        let path = format!("{rp}/code-scanning/sarifs/{id}");
        match api.call(Method::GET, &path, None, "reading the upload's status") {
            Ok(a) if node::<Upload>(&a.json).processing_status.as_deref() == Some("pending") => {
                CleanupOutcome::Left {
                    reason: format!(
                        "code scanning is still processing upload {id}: its analysis may yet appear"
                    ),
                }
            }
            Ok(_) | Err(ApiError::NotFound(_)) => CleanupOutcome::Gone,
            Err(err) => CleanupOutcome::Left { reason: err.text() },
        }
    }
}
