//! Which channels tested an exposure, and what that makes it: `tested`
//! (a channel that covers it ran), `declared`, or `not-tested` with why
//! and the stanza that would test it.

use super::catalog;
use crate::plan::Plan;
use crate::report::{Exposure, ExposureStatus, Report, TestedBy};
use crate::verdict::Verdict;

/// Exposures only an open channel tests: a PASS of `runner-persistence`
/// means no earlier job's beacon was found, not that none could be (no
/// earlier job may have planted one). (So does `permission:contents`
/// through a git remote: a refused push says nothing of the job's token,
/// as the checkout's credential may be another's.)
const OPEN_ONLY: [&str; 1] = ["runner-persistence"];

/// At most this much of a reason or a stanza is kept: a declared reason
/// is config text of any length, and the check run's summary has a
/// budget.
const MAX_TEXT: usize = 500;

/// One finding's claim on an exposure.
pub(super) struct Claim {
    id: String,
    channel: String,
    verdict: Verdict,
    detail: String,
    /// Only FAIL or AUTHORIZED tests it ([`OPEN_ONLY`]).
    open_only: bool,
}

/// Each finding's exposures, as its surface type says, and what they
/// imply on GitHub.
pub(super) fn tested_by(
    plan: &Plan,
    report: &Report,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<Claim> {
    let mut out = vec![];
    for f in &report.findings {
        let Some(sp) = plan.surfaces.iter().find(|s| s.name == f.surface) else {
            continue;
        };
        let Some(ty) = crate::surface::by_name(sp.type_name) else {
            continue;
        };
        for e in ty.exposures(&sp.settings, &f.carrier) {
            let mut claim = |id: String, open_only: bool| {
                out.push(Claim {
                    id,
                    channel: f.channel.clone(),
                    verdict: f.verdict,
                    detail: f.detail.clone(),
                    open_only,
                })
            };
            if own_repository(&e, var) {
                claim("permission:contents".into(), true);
            }
            let open_only = OPEN_ONLY.contains(&e.as_str());
            claim(e, open_only);
        }
    }
    out
}

/// Whether a git remote is the job's own repository on its server.
fn own_repository(e: &str, var: &dyn Fn(&str) -> Option<String>) -> bool {
    let Some(url) = e.strip_prefix("git-remote:") else {
        return false;
    };
    let server = var("GITHUB_SERVER_URL").unwrap_or_else(|| "https://github.com".into());
    let Some(repo) = var("GITHUB_REPOSITORY") else {
        return false;
    };
    let own = format!("{}/{repo}", server.trim_end_matches('/'));
    let url = url.trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url);
    url.eq_ignore_ascii_case(&own)
}

/// Whether a github-api plant with the job's own token wrote through a
/// carrier that needs exactly the permission `id` (its channel FAILed or
/// was AUTHORIZED: run B read what the write made).
pub(super) fn api_showed_write(report: &Report, plan: &Plan, id: &str) -> bool {
    report.findings.iter().any(|f| {
        let Some(sp) = plan.surfaces.iter().find(|s| s.name == f.surface) else {
            return false;
        };
        // (`exposures` claims a permission only for the job's own token
        // on the job's own repository.)
        let only = sp.type_name == "github-api"
            && crate::surface::by_name(sp.type_name)
                .map(|ty| ty.exposures(&sp.settings, &f.carrier))
                .is_some_and(|e| e.len() == 1 && e[0] == id);
        only && matches!(f.verdict, Verdict::Fail | Verdict::Authorized)
    })
}

/// Text kept to [`MAX_TEXT`] characters, with `…` where it was cut.
fn clip(s: &str) -> String {
    crate::escape::clip(s, MAX_TEXT)
}

/// One exposure's status from the claims on it.
pub(super) fn judge(
    plan: &Plan,
    claims: &[Claim],
    id: String,
    what: String,
    entry: Option<String>,
    owner: Option<&str>,
) -> Exposure {
    let covering: Vec<&Claim> = claims.iter().filter(|c| c.id == id).collect();
    let mut ran: Vec<TestedBy> = vec![];
    for c in &covering {
        let counts = match c.verdict {
            Verdict::Fail | Verdict::Authorized => true,
            Verdict::Pass => !c.open_only,
            Verdict::Error | Verdict::Skipped => false,
        };
        // (One finding may claim an exposure twice: once itself, once
        // by what it implies.)
        if counts && !ran.iter().any(|t| t.channel == c.channel) {
            ran.push(TestedBy {
                channel: c.channel.clone(),
                verdict: c.verdict,
            });
        }
    }
    let mut e = Exposure {
        id: id.clone(),
        what: crate::redact::text(&what),
        status: ExposureStatus::Tested,
        channels: ran,
        reason: None,
        stanza: None,
    };
    if !e.channels.is_empty() {
        return e;
    }
    if let Some(reason) = plan.declared_exposures.get(&id) {
        e.status = ExposureStatus::Declared;
        e.reason = Some(clip(reason));
        return e;
    }
    e.status = ExposureStatus::NotTested;
    let fixed = catalog::stanza(&id, owner);
    let reason = match (covering.first(), catalog::untestable(&id)) {
        (_, Some(why)) => why.to_string(),
        (Some(c), None) if c.verdict == Verdict::Pass => format!(
            "{} was pass, which cannot show it closed: {}",
            c.channel,
            catalog::open_only_why(&id)
        ),
        (Some(c), None) => format!("{} was {}: {}", c.channel, c.verdict.as_str(), c.detail),
        (None, None) => match &fixed {
            Some((_, Some(note))) => format!("no channel of the config tests it; {note}"),
            _ => "no channel of the config tests it".into(),
        },
    };
    e.reason = Some(clip(&crate::redact::text(&reason)));
    if catalog::untestable(&id).is_none() {
        e.stanza = entry
            .or(fixed.map(|(s, _)| s))
            .map(|s| clip(&crate::redact::text(&s)));
    }
    e
}
