//! A file of a repository at a commit, through the contents API (`GET
//! /repos/{repo}/contents/{path}?ref={sha}`, base64, files up to 1 MB):
//! what a job reads of the commit GitHub ran it at, whatever an earlier
//! step of the job did to the work tree (the workflow file for coverage's
//! permissions, the config as committed).

use super::{Api, ApiError};
use crate::http::LazyClient;
use ::http::Method;
use base64::Engine as _;

/// The text of `path` in `repo` at `sha`: `Ok(None)` when GitHub answers
/// 404 (no such file there, or one the token may not see: GitHub answers
/// both alike); `Err` why it could not be read.
pub fn file_at(
    base: &str,
    repo: &str,
    path: &str,
    sha: &str,
    source: &str,
    token: &str,
) -> Result<Option<String>, ApiError> {
    let client = LazyClient::new(vec![token.to_string()]);
    let api = Api {
        client: client.get().map_err(|e| ApiError::Failed(e.to_string()))?,
        base,
        token,
        source,
    };
    let what = format!("reading {path} at {sha}");
    let a = match api.call(
        Method::GET,
        &format!("/repos/{repo}/contents/{path}?ref={sha}"),
        None,
        &what,
    ) {
        Ok(a) => a,
        Err(ApiError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (Some(content), Some("base64")) = (a.json["content"].as_str(), a.json["encoding"].as_str())
    else {
        return Err(ApiError::Failed(format!(
            "{what}: the answer holds no base64 content (a file over 1 MB?)"
        )));
    };
    let clean: String = content.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(clean)
        .map_err(|_| ApiError::Failed(format!("{what}: its content is not base64")))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ApiError::Failed(format!("{what}: it is not UTF-8")))
}
