//! The poisoning drill's part of the cross-job commands
//! (docs/recipes/poisoning-drill.md): the probe id of `--drill`, the
//! receipt the planting run uploaded as an artifact, and both runs' trust
//! in a recover ([`crate::trust`], [`crate::drill`]).

use super::{CrossArgs, Failure, note};
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
    let bytes = crate::drill::receipt_from(&api, run, name)
        .map_err(|e| Failure::Other(format!("reading drill {name}'s receipt artifact: {e}")))?;
    let dir = tempfile::Builder::new()
        .prefix("runwarden-drill-")
        .tempdir()
        .map_err(|e| Failure::Other(format!("cannot make a private directory: {e}")))?;
    let path = dir
        .path()
        .join(format!("runwarden-receipt-{probe_id}.json"));
    std::fs::write(&path, bytes)
        .map_err(|e| Failure::Other(format!("cannot write the receipt: {e}")))?;
    let via = format!(
        "artifact {} of run {run} ({wf}), read through the API: an untrusted run's upload, trusted for nothing the witnesses do not confirm",
        crate::drill::artifact(name)
    );
    Ok((path, via, dir))
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
        (Some(_), None) => Some(Err(crate::fault::Fault::unsupported(
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

/// After a drill's cleanup that left nothing behind (what `permanent:
/// true` kept aside): the planting run's receipt artifact, checked to be
/// this probe's (its probe id, its MAC under the key), is deleted
/// (`actions: write`), so that no later recover reads a plant already
/// cleaned up, whose absence would read as closed. Said either way.
pub(super) fn retire(probe_id: &str, key: &marker::Key) {
    let Some((name, run)) = crate::drill::of_probe_id(probe_id) else {
        return;
    };
    let Some(api) = crate::trust::JobApi::from_env(&job_env) else {
        note(
            "the drill's receipt artifact stays (no API here to delete it with): a later recover may read this plant again",
        );
        return;
    };
    let art = crate::drill::artifact(name);
    let checked = (|| -> Result<u64, crate::fault::Fault> {
        let id = crate::drill::receipt_artifact(&api, run, name)?
            .ok_or_else(|| crate::fault::Fault::broken("it is gone already"))?;
        let bytes = crate::drill::receipt_from(&api, run, name)?;
        let dir = tempfile::tempdir().map_err(|e| crate::fault::Fault::broken(e.to_string()))?;
        let path = dir.path().join("receipt.json");
        std::fs::write(&path, bytes).map_err(|e| crate::fault::Fault::broken(e.to_string()))?;
        Receipt::read(&path, Some(probe_id), key)?;
        api.delete(
            &format!("/repos/{}/actions/artifacts/{id}", api.repo),
            "deleting the drill's receipt artifact",
        )
        .map_err(|e| crate::fault::Fault::broken(e.text()))?;
        Ok(id)
    })();
    match checked {
        Ok(id) => note(&format!(
            "deleted the drill's receipt artifact {art} ({id}) of run {run}: this plant is cleaned up, and no later recover reads it again"
        )),
        Err(e) => note(&format!(
            "the drill's receipt artifact {art} of run {run} stays ({e}): a later recover may read this plant again"
        )),
    }
}
