//! The poisoning drill's part of the cross-job commands
//! (docs/recipes/poisoning-drill.md): the probe id of `--drill`, the
//! receipt the planting run uploaded as an artifact, and both runs' trust
//! in a recover ([`crate::trust`], [`crate::drill`]).

use super::{CrossArgs, Failure, note};
use crate::fault::Fault;
use crate::marker;
use crate::receipt::Receipt;
use std::path::PathBuf;

/// A drill's probe id and planting run ([`crate::drill`]): this run's
/// (`plant`), or the newest completed run of `--planted-by`, found through
/// the API. `None` without `--drill`.
pub(super) fn drill_of(args: &CrossArgs) -> Result<Option<(String, String)>, Failure> {
    let Some(name) = &args.drill else {
        return Ok(None);
    };
    let env = job_env;
    let run = match &args.planted_by {
        None => env("GITHUB_RUN_ID").filter(|r| !r.is_empty()).ok_or_else(|| {
            Failure::Other(
                "`plant --drill` names its probe after this GitHub Actions run (GITHUB_RUN_ID is unset: it runs inside Actions); `recover` and `cleanup` take `--planted-by WORKFLOW` too".into(),
            )
        })?,
        Some(wf) => {
            let api = crate::trust::JobApi::from_env(&env).ok_or_else(|| {
                Failure::Other(
                    "--planted-by lists the planting workflow's runs through the API: GITHUB_REPOSITORY and GITHUB_TOKEN (or GH_TOKEN) are needed".into(),
                )
            })?;
            crate::drill::planting_run(&api, wf, name).map_err(|e| {
                Failure::Other(format!("finding the planting run of drill {name}: {e}"))
            })?
        }
    };
    let id = crate::drill::probe_id(name, &run).map_err(|f| Failure::Other(f.into_reason()))?;
    marker::check_probe_id(&id)?;
    Ok(Some((id, run)))
}

/// A drill's receipt: the planting run `run`'s artifact, read through the
/// API into a file of a private directory (kept alive by the caller until
/// the report is written), and how it came (`receipt-via`).
pub(super) fn receipt(
    args: &CrossArgs,
    run: &str,
    probe_id: &str,
) -> Result<(PathBuf, String, tempfile::TempDir), Failure> {
    let name = args.drill.as_deref().expect("a drill has a name");
    let wf = args.planted_by.as_deref().expect("asked with --planted-by");
    let api = crate::trust::JobApi::from_env(&job_env).ok_or_else(|| {
        Failure::Other("reading the receipt artifact needs GITHUB_REPOSITORY and a token".into())
    })?;
    let fetched = crate::drill::receipt_artifact(&api, run, name)
        .and_then(|id| id.ok_or_else(|| Fault::broken(format!("run {run} has none"))))
        .and_then(|id| fetch(&api, id, name, probe_id))
        .map_err(|e| Failure::Other(format!("reading drill {name}'s receipt artifact: {e}")))?;
    let via = format!(
        "artifact {} of run {run} ({wf}), read through the API: an untrusted run's upload, trusted for nothing the witnesses do not confirm",
        crate::drill::artifact(name)
    );
    Ok((fetched.0, via, fetched.1))
}

/// The receipt in drill `name`'s artifact `id`, written to a file of a
/// private directory named as this probe's receipt.
fn fetch(
    api: &crate::trust::JobApi,
    id: u64,
    name: &str,
    probe_id: &str,
) -> Result<(PathBuf, tempfile::TempDir), Fault> {
    let bytes = crate::drill::receipt_of(api, id, name)?;
    let dir = tempfile::Builder::new()
        .prefix("runwarden-drill-")
        .tempdir()
        .map_err(|e| Fault::broken(format!("cannot make a private directory: {e}")))?;
    let path = dir
        .path()
        .join(format!("runwarden-receipt-{probe_id}.json"));
    std::fs::write(&path, bytes)
        .map_err(|e| Fault::broken(format!("cannot write the receipt: {e}")))?;
    Ok((path, dir))
}

/// Both runs' trust in a recover, read before run B does anything (a
/// rate limit its reads spend cannot then decide it): run B's from this
/// job, its branch's protection from the API; run A's from the API's
/// record of the drill's planting run, which this job found itself. Any
/// other recover has only the receipt's claim (a run id it names is the
/// planting job's word too), said to be one.
pub(super) fn trusts(
    receipt: Option<&Receipt>,
    planting: Option<&str>,
) -> (crate::trust::Trust, crate::trust::Trust) {
    use crate::trust::{Class, Trust};
    let b = crate::trust::this_job(&job_env, true);
    let api = crate::trust::JobApi::from_env(&job_env);
    let verified = match (planting, &api) {
        (Some(id), Some(api)) => Some(crate::trust::of_run(api, id)),
        (Some(_), None) => Some(Err(Fault::unsupported(
            "no GITHUB_REPOSITORY or token to ask with",
        ))),
        (None, _) => None,
    };
    let a = match (verified, receipt.and_then(|r| r.trust.clone())) {
        (Some(Ok(t)), _) => t,
        (why, Some(claimed)) => Trust {
            source: format!(
                "claimed by the plant's receipt{}",
                match why {
                    Some(Err(e)) => format!("; the API's record of the planting run could not be read ({e})"),
                    _ => "; unconfirmed: only the drill (--drill, --planted-by) looks at the planting run itself".into(),
                }
            ),
            ..claimed
        },
        (why, None) => Trust {
            class: Class::Unclassified,
            event: None,
            git_ref: None,
            fork: None,
            actor_type: None,
            why: match why {
                Some(Err(e)) => format!("the API's record of the planting run could not be read ({e})"),
                _ => "no plant receipt says which run planted".into(),
            },
            source: "nothing".into(),
        },
    };
    (a, b)
}

/// [`super::config_env`] as text: the environment the trust of a run and the
/// poisoning drill read (the action's `github-token` standing in for an
/// unset GITHUB_TOKEN).
pub(super) fn job_env(name: &str) -> Option<String> {
    super::config_env(name).and_then(|v| v.into_string().ok())
}

/// A drill's cleanup, before anything is removed: the planting run's
/// receipt artifact for `probe_id` (a `drill-NAME-RUN` one), checked to
/// be its own (its one file, a receipt of this probe id signed under the
/// key), is deleted through the API (`actions: write`), and its receipt
/// handed to cleanup in a private file. So no later recover reads a plant
/// cleaned up (whose absence would read as closed); if the artifact cannot
/// be deleted, nothing is removed. `None`: not a drill's probe id, or its
/// artifact is gone already (cleanup then works by probe id).
pub(super) fn take_receipt(
    probe_id: &str,
    key: &marker::Key,
) -> Result<Option<(PathBuf, tempfile::TempDir)>, Failure> {
    let Some((name, run)) = crate::drill::of_probe_id(probe_id) else {
        return Ok(None);
    };
    let fail = |e: String| {
        Failure::Other(format!(
            "drill {name}'s cleanup removes nothing while the planting run's receipt artifact stays (a later recover would read this plant again): {e}"
        ))
    };
    if !key.is_configured() {
        return Err(fail(format!("${} is unset", marker::KEY_ENV)));
    }
    let api = crate::trust::JobApi::from_env(&job_env)
        .ok_or_else(|| fail("GITHUB_REPOSITORY and a token are needed".into()))?;
    let Some(id) =
        crate::drill::receipt_artifact(&api, run, name).map_err(|e| fail(e.into_reason()))?
    else {
        note(&format!(
            "drill {name}'s receipt artifact of run {run} is gone already: cleaning up by probe id"
        ));
        return Ok(None);
    };
    let (path, dir) = fetch(&api, id, name, probe_id).map_err(|e| fail(e.into_reason()))?;
    let r = Receipt::read(&path, Some(probe_id), key).map_err(|e| fail(e.into_reason()))?;
    if r.mac.is_none() {
        return Err(fail("the receipt is not signed".into()));
    }
    api.delete(
        &format!("/repos/{}/actions/artifacts/{id}", api.repo),
        "deleting the drill's receipt artifact",
    )
    .map_err(|e| fail(e.text()))?;
    note(&format!(
        "deleted drill {name}'s receipt artifact ({id}) of run {run}: no later recover reads this plant again"
    ));
    Ok(Some((path, dir)))
}
