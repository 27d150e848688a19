//! The poisoning drill's agreements: a plant by an untrusted run
//! recovered by a trusted one, with nothing but a name agreed beforehand.
//!
//! The probe id is `drill-<name>-<planting run's id>`: the planting run
//! knows its own id; the recovering run finds it by listing the planting
//! workflow's runs ([`planting_run`]), never by trusting what the
//! planting run says. The receipt travels as an artifact of the planting
//! run (`runwarden-receipt-<name>`), read through the API
//! ([`receipt_from`]): itself an untrusted-to-trusted channel, opened on
//! purpose and declared in the report (`receipt-via`). Nothing in it is
//! trusted beyond what the recovering run's witnesses confirm: its probe
//! id must be this drill's, its MAC must verify under a configured key,
//! and each surface's recovery reads its witnesses as always.

use crate::fault::Fault;
use crate::trust::JobApi;

/// The most a receipt artifact's zip may weigh, and its receipt.
const MAX_ZIP: usize = 16 << 20;

/// A drill's name: 1 to 40 of `a-z`, `0-9` and `-`.
pub fn check_name(name: &str) -> Result<(), Fault> {
    let ok = (1..=40).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    ok.then_some(())
        .ok_or_else(|| Fault::invalid("a drill's name is 1 to 40 of a-z, 0-9 and -"))
}

/// The probe id of drill `name` planted by run `run_id`.
pub fn probe_id(name: &str, run_id: &str) -> Result<String, Fault> {
    check_name(name)?;
    if run_id.is_empty() || run_id.len() > 20 || !run_id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Fault::invalid("the planting run's id is not a run id"));
    }
    Ok(format!("drill-{name}-{run_id}"))
}

/// The artifact the planting run uploads its receipt as.
pub fn artifact(name: &str) -> String {
    format!("runwarden-receipt-{name}")
}

/// The planting run: the newest completed run of `workflow` (a file of
/// the repository's `.github/workflows/`), as the API lists them, on an
/// event that runs the default branch's copy of the workflow
/// ([`crate::trust::STRANGERS`]: `pull_request_target`, `issue_comment`,
/// …), whose receipt artifact is still there (a drill's cleanup deletes
/// it: a plant already cleaned up is never recovered again, where its
/// absence would read as closed). A fork's pull request that edits the
/// workflow to run on `pull_request` runs its own copy, which could
/// upload any receipt: its runs are passed over.
pub fn planting_run(api: &JobApi, workflow: &str, name: &str) -> Result<String, Fault> {
    let file = workflow
        .strip_prefix(".github/workflows/")
        .unwrap_or(workflow);
    let plain = !file.is_empty()
        && file
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && (file.ends_with(".yml") || file.ends_with(".yaml"));
    if !plain {
        return Err(Fault::invalid(format!(
            "{} is not a workflow file name (ci.yml)",
            crate::escape::bytes(workflow.as_bytes())
        )));
    }
    let v = api
        .get(
            &format!(
                "/repos/{}/actions/workflows/{file}/runs?status=completed&per_page=100",
                api.repo
            ),
            "listing the planting workflow's runs",
        )
        .map_err(|e| Fault::broken(e.text()))?;
    let path = format!(".github/workflows/{file}");
    let candidates = v["workflow_runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            r["path"] == path.as_str()
                && r["conclusion"] != "skipped"
                && r["event"]
                    .as_str()
                    .is_some_and(|e| crate::trust::STRANGERS.contains(&e))
        })
        .filter_map(|r| r["id"].as_u64())
        // (Each is one more request: the newest twenty.)
        .take(20);
    for id in candidates {
        if receipt_artifact(api, &id.to_string(), name)?.is_some() {
            return Ok(id.to_string());
        }
    }
    Err(Fault::broken(format!(
        "no completed run of {file} on an event that runs the default branch's copy of it (pull_request_target, issue_comment, …) still has its receipt artifact {}: nothing to recover (each drill's cleanup deletes its receipt; plant again)",
        artifact(name)
    )))
}

/// The id of run `run_id`'s receipt artifact of drill `name`, if it has
/// one that has not expired.
pub fn receipt_artifact(api: &JobApi, run_id: &str, name: &str) -> Result<Option<u64>, Fault> {
    let art = artifact(name);
    let v = api
        .get(
            &format!(
                "/repos/{}/actions/runs/{run_id}/artifacts?name={art}",
                api.repo
            ),
            "listing the planting run's artifacts",
        )
        .map_err(|e| Fault::broken(e.text()))?;
    Ok(v["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["name"] == art.as_str() && a["expired"] != true)
        .and_then(|a| a["id"].as_u64()))
}

/// The receipt in drill `name`'s artifact `id` (its planting run's,
/// [`receipt_artifact`]): the artifact's one file, a `.json` (an artifact
/// holding anything else is not the receipt's), read through the API (the
/// download is a signed URL, fetched without the token).
pub fn receipt_of(api: &JobApi, id: u64, name: &str) -> Result<Vec<u8>, Fault> {
    let art = artifact(name);
    let url = api
        .redirect(
            &format!("/repos/{}/actions/artifacts/{id}/zip", api.repo),
            "downloading the receipt artifact",
        )
        .map_err(|e| Fault::broken(e.text()))?;
    let zip = api.fetch_signed(&url)?;
    if zip.len() > MAX_ZIP {
        return Err(Fault::broken("the receipt artifact is larger than 16 MiB"));
    }
    let files = crate::archive::unzip(&zip, MAX_ZIP, &|_| true)?;
    match files.as_slice() {
        [(n, data)] if n.ends_with(".json") => Ok(data.clone()),
        _ => Err(Fault::invalid(format!(
            "artifact {art} holds other than one .json file: not a receipt's"
        ))),
    }
}

/// A drill's name and planting run, from its probe id
/// (`drill-<name>-<run id>`), when it is one.
pub fn of_probe_id(probe_id: &str) -> Option<(&str, &str)> {
    let (name, run) = probe_id.strip_prefix("drill-")?.rsplit_once('-')?;
    (check_name(name).is_ok() && probe_id_ok(run)).then_some((name, run))
}

fn probe_id_ok(run: &str) -> bool {
    !run.is_empty() && run.len() <= 20 && run.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drill_is_named_plainly_and_bound_to_a_run() {
        assert_eq!(probe_id("cache", "42").unwrap(), "drill-cache-42");
        assert_eq!(of_probe_id("drill-my-cache-42"), Some(("my-cache", "42")));
        assert_eq!(of_probe_id("gh-42-1"), None);
        for bad in ["", "Cache", "a b", "../x", &"x".repeat(41)] {
            assert!(probe_id(bad, "42").is_err(), "{bad}");
        }
        for bad in ["", "4a", "-1", "123456789012345678901"] {
            assert!(probe_id("x", bad).is_err(), "{bad}");
        }
    }
}
