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
pub mod permissions;

use crate::discover::Discovery;
use crate::plan::Plan;
use crate::report::{Coverage, Exposure, ExposureStatus, PermissionLevel, Report};
use crate::verdict::Verdict;

/// Permission keys that are no exposure themselves: `id-token` mints
/// OIDC tokens (what they reach is its own surface, e.g. the cache),
/// `models` is read only.
const NOT_EXPOSURES: [&str; 2] = ["id-token", "models"];

/// What the environment is: `env` looks up a variable (the process's, in
/// a run), `discovery` is what `runwarden discover` makes of it, `known`
/// the permissions [`permissions::read`] found (`None` outside Actions).
pub struct Environment<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub discovery: Discovery,
    pub known: Option<permissions::Known>,
}

impl Environment<'_> {
    /// The environment of this process: discovery and the permissions
    /// read through the API (bounded by the API client's timeouts).
    pub fn of_process(env: &dyn Fn(&str) -> Option<String>) -> Environment<'_> {
        Environment {
            env,
            discovery: crate::discover::discover(env),
            known: permissions::read(env),
        }
    }
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
    }
    if envi.discovery.runner_kind() != "github-hosted" {
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
            exposures.push((id.clone(), c.why.clone(), Some(c.entry.clone())));
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

/// Each finding's exposures: (exposure id, channel, verdict, detail).
fn tested_by(
    plan: &Plan,
    report: &Report,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String, Verdict, String)> {
    let mut out = vec![];
    for f in &report.findings {
        let Some(sp) = plan.surfaces.iter().find(|s| s.name == f.surface) else {
            continue;
        };
        let Some(ty) = crate::surface::by_name(sp.type_name) else {
            continue;
        };
        for e in ty.exposures(&sp.settings, &f.carrier) {
            for id in implied(&e, var).into_iter().chain([e.clone()]) {
                out.push((id, f.channel.clone(), f.verdict, f.detail.clone()));
            }
        }
    }
    out
}

/// What else an exposure tests on GitHub: a push to the job's own
/// repository tests `contents`, a registry of GitHub Packages tests
/// `packages`.
fn implied(e: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(url) = e.strip_prefix("git-remote:") {
        let server = var("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into());
        let repo = var("GITHUB_REPOSITORY")?;
        let own = format!("{}/{repo}", server.trim_end_matches('/'));
        let url = url.trim_end_matches('/');
        let url = url.strip_suffix(".git").unwrap_or(url);
        return url
            .eq_ignore_ascii_case(&own)
            .then(|| "permission:contents".into());
    }
    matches!(
        e,
        "registry:https://ghcr.io" | "registry:https://npm.pkg.github.com"
    )
    .then(|| "permission:packages".into())
}

/// Whether a github-api plant with the job's own token wrote through a
/// carrier that needs exactly the permission `id` (its channel FAILed or
/// was AUTHORIZED: run B read what the write made).
fn api_showed_write(report: &Report, plan: &Plan, id: &str) -> bool {
    report.findings.iter().any(|f| {
        let job_token = report.surfaces.iter().any(|s| {
            s.surface == f.surface
                // (Facts are escaped: a name in quotes.)
                && s.facts.get("write-token").map(|v| v.trim_matches('"')) == Some("GITHUB_TOKEN")
        });
        let Some(sp) = plan.surfaces.iter().find(|s| s.name == f.surface) else {
            return false;
        };
        let only = crate::surface::by_name(sp.type_name)
            .map(|ty| ty.exposures(&sp.settings, &f.carrier))
            .is_some_and(|e| e.len() == 1 && e[0] == id);
        job_token && only && matches!(f.verdict, Verdict::Fail | Verdict::Authorized)
    })
}

/// One exposure's status from the channels that cover it.
fn judge(
    plan: &Plan,
    tested: &[(String, String, Verdict, String)],
    id: String,
    what: String,
    entry: Option<String>,
    owner: Option<&str>,
) -> Exposure {
    let covering: Vec<&(String, String, Verdict, String)> =
        tested.iter().filter(|t| t.0 == id).collect();
    let ran: Vec<String> = covering
        .iter()
        .filter(|t| matches!(t.2, Verdict::Pass | Verdict::Fail | Verdict::Authorized))
        .map(|t| format!("{} ({})", t.1, t.2.as_str()))
        .collect();
    let mut e = Exposure {
        id: id.clone(),
        what,
        status: ExposureStatus::Tested,
        channels: ran,
        reason: None,
        stanza: None,
    };
    if !e.channels.is_empty() {
        e.channels.dedup();
        return e;
    }
    if let Some(reason) = plan.declared_exposures.get(&id) {
        e.status = ExposureStatus::Declared;
        e.reason = Some(reason.clone());
        return e;
    }
    e.status = ExposureStatus::NotTested;
    let fixed = catalog::stanza(&id, owner);
    e.reason = Some(match (covering.first(), catalog::untestable(&id)) {
        (_, Some(why)) => why.to_string(),
        (Some(t), None) => format!("{} was {}: {}", t.1, t.2.as_str(), t.3),
        (None, None) => match &fixed {
            Some((_, Some(note))) => format!("no channel of the config tests it; {note}"),
            _ => "no channel of the config tests it".into(),
        },
    });
    e.stanza = entry.or(fixed.map(|(s, _)| s));
    if catalog::untestable(&id).is_some() {
        e.stanza = None;
    }
    e
}
