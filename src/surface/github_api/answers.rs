//! GitHub's REST answers as github-api reads them: a workflow run, a
//! job, a code-scanning analysis and upload, each a private shape of the
//! fields runwarden reads, and [`lenient`], how every such field is read.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

// Why every field here is read with `lenient`: these are GitHub's answers,
// and a field of another type than runwarden asks for is read as absent,
// each on its own, as 0.11.0 read them one key at a time (a run without a
// title is still a run, with an id).

/// A field as runwarden asks for it, or absent when the answer gives it
/// in another type.
pub fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

/// An answer (or an item of a listing) as `T`: nothing said, when it is
/// no object.
pub fn node<T: DeserializeOwned + Default>(v: &Value) -> T {
    T::deserialize(v).unwrap_or_default()
}

/// A workflow run of a listing (`…/actions/runs`).
#[derive(Deserialize, Default)]
pub struct Run {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub display_title: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub path: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub created_at: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub event: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
}

/// A job of a run (`…/runs/{id}/jobs`).
#[derive(Deserialize, Default)]
pub struct Job {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub conclusion: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub runner_name: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub check_run_url: Option<String>,
}

/// A code-scanning analysis (`…/code-scanning/analyses`).
#[derive(Deserialize, Default)]
pub struct Analysis {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<u64>,
    #[serde(rename = "ref", default, deserialize_with = "lenient")]
    pub git_ref: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub commit_sha: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub sarif_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub category: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub tool: Option<Tool>,
    #[serde(default, deserialize_with = "lenient")]
    pub deletable: Option<bool>,
}

/// The tool an analysis is of.
#[derive(Deserialize, Default)]
pub struct Tool {
    #[serde(default, deserialize_with = "lenient")]
    pub name: Option<String>,
}

/// A SARIF upload (`…/code-scanning/sarifs[/{id}]`): its id, and how far
/// code scanning has processed it.
#[derive(Deserialize, Default)]
pub struct Upload {
    #[serde(default, deserialize_with = "lenient")]
    pub id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub processing_status: Option<String>,
}
