//! Coverage: what this environment exposes, and whether a channel of the
//! run tested each exposure (docs/coverage.md). A green run is read as
//! "these runs are isolated"; this is what keeps it from meaning more than
//! what was tested.
//!
//! Exposures come from three places: the job token's permissions with
//! write (or unknown) ([`permissions`]), the traces every step leaves
//! (`run-traces`) and the persistence of a self-hosted runner, and what
//! `runwarden discover` finds on the machine (directories, a Docker
//! socket, registries, the Actions cache). Each is `tested` when a channel
//! that ran (PASS, FAIL, AUTHORIZED) covers it, as its surface type says
//! ([`crate::surface::SurfaceType::exposures`]); `declared` when the
//! config's `declared:` names it untested with a reason; else
//! `not-tested`, a gap, with why and the stanza that would test it.

mod catalog;
mod judge;
pub mod permissions;

use crate::discover::Discovery;
use crate::plan::Plan;
use crate::report::{Coverage, Exposure, ExposureStatus, PermissionLevel, Report};
use judge::{api_showed_write, judge, tested_by};

/// Permission keys that are no exposure themselves: `id-token` mints
/// OIDC tokens (what they reach is its own surface, e.g. the cache),
/// `models` is read only.
const NOT_EXPOSURES: [&str; 2] = ["id-token", "models"];

/// What the environment is: `env` looks up a variable (the process's, in
/// a run), `discovery` is what `runwarden discover` makes of it, `known`
/// the permissions [`permissions::read`] found (`None` outside Actions).
pub struct Environment<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub discovery: &'a Discovery,
    pub known: Option<permissions::Known>,
}

/// The coverage of `report`, a probe or recover of `plan`, here.
pub fn assess(plan: &Plan, report: &Report, envi: &Environment<'_>, required: bool) -> Coverage {
    let var = |k: &str| (envi.env)(k).filter(|v| !v.is_empty());
    let in_actions = var("GITHUB_ACTIONS").as_deref() == Some("true");
    let tested = tested_by(plan, report, &var);
    let mut permissions = vec![];
    let mut exposures = vec![];
    if let Some(k) = &envi.known {
        for (key, level) in &k.levels {
            let id = format!("permission:{key}");
            // An answer of GitHub's showed the write: a plant with the
            // job's token went through.
            let shown = *level == "unknown" && api_showed_write(report, plan, &id);
            let (level, from) = if shown {
                ("write", "api")
            } else {
                (
                    *level,
                    if *level == "unknown" {
                        "unknown"
                    } else {
                        k.from
                    },
                )
            };
            permissions.push(PermissionLevel {
                key: key.to_string(),
                level: level.into(),
                from: from.into(),
            });
            if matches!(level, "write" | "unknown") && !NOT_EXPOSURES.contains(key) {
                let what = catalog::permission_what(key);
                let what = if level == "unknown" {
                    format!("{what} (the job's level is unknown)")
                } else {
                    what.to_string()
                };
                exposures.push((id, what, None));
            }
        }
    }
    if in_actions {
        exposures.push((
            "run-traces".into(),
            "the job's log and its annotations (no permission needed): any later run with actions: read or checks: read reads them for the log's retention (90 days by default)".into(),
            None,
        ));
        // Any JavaScript action of the job (actions/cache,
        // upload-artifact) holds the runtime token, whether this step
        // does or not.
        exposures.push((
            "actions-cache".into(),
            "the repository's Actions cache: a JavaScript action of any step (actions/cache) can save an entry a later run restores".into(),
            Some("  - name: actions-cache\n    type: actions-cache\n".into()),
        ));
        exposures.push((
            "actions-artifacts".into(),
            "the repository's workflow artifacts: a JavaScript action of any step (upload-artifact) can upload what a later run with actions: read downloads".into(),
            Some("  - name: artifacts\n    type: actions-artifacts\n".into()),
        ));
    }
    if envi.discovery.runner != crate::discover::Runner::GithubHosted {
        exposures.push((
            "runner-persistence".into(),
            "the runner's disk and daemons outlive the job (not a fresh GitHub-hosted VM)".into(),
            None,
        ));
    }
    for c in &envi.discovery.surfaces {
        if let Some(id) = &c.exposure
            && !exposures.iter().any(|(e, _, _)| e == id)
        {
            // (A registry's URL may carry a token in its path, and the
            // report is published: only the origin is said.)
            let (what, entry) = match id.strip_prefix("registry:") {
                Some(origin) => (
                    format!(
                        "a registry this machine is configured for ({origin}): names, tags and contents carry messages"
                    ),
                    catalog::without_paths(&c.entry),
                ),
                None => (c.why.clone(), c.entry.clone()),
            };
            exposures.push((id.clone(), what, Some(entry)));
        }
    }
    for (id, what) in forgotten_secrets(plan) {
        if !exposures.iter().any(|(e, _, _)| *e == id) {
            exposures.push((id, what, None));
        }
    }
    for (id, what, entry) in moved_defaults(&var) {
        if !exposures.iter().any(|(e, _, _)| *e == id) {
            exposures.push((id, what, Some(entry)));
        }
    }
    let owner = var("GITHUB_REPOSITORY_OWNER");
    let exposures: Vec<Exposure> = exposures
        .into_iter()
        .map(|(id, what, entry)| judge(plan, &tested, id, what, entry, owner.as_deref()))
        .collect();
    Coverage {
        runner: envi.discovery.runner_kind().into(),
        permissions,
        permissions_source: envi
            .known
            .as_ref()
            .map(|k| k.source.clone())
            .unwrap_or_default(),
        gaps: exposures
            .iter()
            .filter(|e| e.status == ExposureStatus::NotTested)
            .count() as u64,
        exposures,
        required,
    }
}

/// The configured surfaces whose named credential is missing here, which
/// ran no carrier (each SKIPPED, saying why): gaps, or a forgotten secret
/// makes a green run that tested none of it. (id, what): the surface's
/// own exposure id, else `surface:<name>`.
fn forgotten_secrets(plan: &Plan) -> Vec<(String, String)> {
    let mut out = vec![];
    for sp in &plan.surfaces {
        let Some(ty) = crate::surface::by_name(sp.type_name) else {
            continue;
        };
        let Some(why) = ty.secret_missing(&sp.settings) else {
            continue;
        };
        let id = ty
            .exposures(&sp.settings, "")
            .into_iter()
            .find(|e| !e.starts_with("permission:"))
            .unwrap_or_else(|| format!("surface:{}", sp.name));
        out.push((
            id,
            format!(
                "the configured surface {} ({}), none of whose carriers ran: {why}",
                sp.name, sp.type_name
            ),
        ));
    }
    out
}

/// Directories the environment moved away from (`TMPDIR`, `GOMODCACHE`),
/// where they exist: an earlier step can set either (`GITHUB_ENV`), and
/// the directory other jobs share stays where it was. Discovery proposes
/// the moved one; coverage counts both.
fn moved_defaults(var: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String, String)> {
    let mut out = vec![];
    let home = var("HOME");
    let defaults = [
        (
            "TMPDIR",
            Some("/tmp".to_string()),
            "tmp",
            "the system temp directory",
        ),
        (
            "GOMODCACHE",
            home.map(|h| format!("{}/go/pkg/mod", h.trim_end_matches('/'))),
            "go-module-cache-default",
            "Go's module cache",
        ),
    ];
    for (key, default, name, what) in defaults {
        let (Some(moved), Some(default)) = (var(key), default) else {
            continue;
        };
        if moved.trim_end_matches('/') == default || !std::path::Path::new(&default).is_dir() {
            continue;
        }
        let quoted = serde_json::to_string(&default).expect("string serializes");
        out.push((
            format!("path:{default}"),
            format!(
                "{what} at its default place, which {key} does not name: other jobs still share it"
            ),
            format!("  - name: {name}\n    type: filesystem\n    path: {quoted}\n"),
        ));
    }
    out
}
