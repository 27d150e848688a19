//! Run B: every route a later run has, as `actions/download-artifact`
//! with `run-id` and `github-token` takes it. The listing of every
//! artifact of the repository (the only route to a nonce in a name), the
//! query for each agreed name, and the download of every candidate's zip,
//! searched as it arrives. A carrier is closed only when every route ran
//! and missed.

use super::*;
use crate::scan::Needles;
use crate::surface::NoticeKind;

/// What the routes of one carrier came to.
#[derive(Default)]
struct Look {
    found: Option<String>,
    /// Artifacts named as the carrier's agreed name: (id, name).
    candidates: Vec<u64>,
    failed: Option<RecoverOutcome>,
}

impl Instance {
    pub(super) fn recover_all(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let api = match self.api() {
            Ok(a) => a,
            Err(why) => {
                let reason = format!("run B has no route ({why})");
                return vec![RecoverOutcome::Failed { reason }; wanted.len()];
            }
        };
        let repo = self.repo();
        let rp = self.repo_path();
        let prefix = format!("runwarden-{}-", ctx.probe_id);
        let mut looks: Vec<Look> = wanted.iter().map(|_| Look::default()).collect();
        // The agreed name of each content carrier (none for artifact-name,
        // whose name only run A knows).
        let agreed: Vec<Option<String>> = wanted
            .iter()
            .map(|w| {
                let n = crate::surface::wanted_nonce(w).ok()?;
                (w.carrier != "artifact-name").then(|| artifact_name(ctx, &w.carrier, &n))
            })
            .collect();
        // Route 1: the listing.
        let what = format!("listing the artifacts of {repo}");
        let mut malformed = false;
        let listing = api.list(
            &format!("{rp}/actions/artifacts"),
            Some("artifacts"),
            &what,
            &mut |a| {
                let (Some(id), Some(name)) = (a["id"].as_u64(), a["name"].as_str()) else {
                    malformed = true;
                    return;
                };
                for (j, w) in wanted.iter().enumerate() {
                    let needle = w.needle.as_str().unwrap_or("\u{0}");
                    if w.carrier == "artifact-name"
                        && looks[j].found.is_none()
                        && name.contains(needle)
                    {
                        looks[j].found = Some(format!(
                            "listed artifact {} (id {id}) has the nonce in its name",
                            escape::bytes(name.as_bytes())
                        ));
                    }
                    if agreed[j].as_deref() == Some(name) && !looks[j].candidates.contains(&id) {
                        looks[j].candidates.push(id);
                    }
                }
                if name.starts_with(&prefix) && planted_carrier(ctx, name).is_none() {
                    notice(Notice {
                        kind: NoticeKind::ForgedMarker,
                        entry: escape::bytes(name.as_bytes()),
                        detail:
                            "an artifact name in this probe's form that no plant with this key made"
                                .into(),
                        beacon: None,
                    });
                }
            },
        );
        // An item without id or name is no full look.
        let listing = match listing {
            Ok(_) if malformed => Err(ApiError::Failed(format!(
                "{what}: an artifact of the listing lacks its id or name"
            ))),
            l => l,
        };
        for (j, w) in wanted.iter().enumerate() {
            if let Err(e) = &listing {
                looks[j].failed = Some(outcome_of(e));
            }
            // Route 2: the agreed name, asked for.
            let Some(name) = &agreed[j] else { continue };
            let path = format!(
                "{rp}/actions/artifacts?name={}",
                crate::http::percent_encode(name)
            );
            let by_name = api.list(
                &path,
                Some("artifacts"),
                &format!(
                    "asking {repo} for the artifact named {}",
                    escape::bytes(name.as_bytes())
                ),
                &mut |a| {
                    if let Some(id) = a["id"].as_u64()
                        && a["name"].as_str() == Some(name)
                        && !looks[j].candidates.contains(&id)
                    {
                        looks[j].candidates.push(id);
                    }
                },
            );
            if let Err(e) = by_name
                && looks[j].failed.is_none()
            {
                looks[j].failed = Some(outcome_of(&e));
            }
            // Then every candidate's zip.
            let needle = w.needle.as_str().unwrap_or("\u{0}").to_string();
            for id in looks[j].candidates.clone() {
                match self.zip_holds(&api, id, &needle) {
                    Ok(true) => {
                        looks[j].found = Some(format!(
                            "artifact {} (id {id}), downloaded through the REST API, holds the nonce \
                             in {}",
                            escape::bytes(name.as_bytes()),
                            if w.carrier == "artifact-file-path" {
                                "a file's path"
                            } else {
                                "a file"
                            }
                        ));
                        break;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        looks[j].failed.get_or_insert(outcome_of(&e));
                    }
                }
            }
        }
        looks
            .into_iter()
            .zip(wanted)
            .map(|(look, w)| match (look.found, look.failed) {
                (Some(detail), _) => RecoverOutcome::Found { detail },
                (None, Some(f)) => f,
                (None, None) => {
                    let n = listing.as_ref().copied().unwrap_or(0);
                    RecoverOutcome::NotFound {
                        detail: if w.carrier == "artifact-name" {
                            format!(
                                "listed all {n} artifacts of {repo} through the REST API; no name carries it"
                            )
                        } else {
                            format!(
                                "listed all {n} artifacts of {repo} and asked for the agreed name; \
                                 {} artifact(s) by that name, none holding it",
                                look.candidates.len()
                            )
                        },
                    }
                }
            })
            .collect()
    }

    /// Downloads an artifact's zip as a later run does (the REST API
    /// redirects to a signed URL, fetched without the token) and says
    /// whether it holds `needle`, searched as it arrives.
    fn zip_holds(&self, api: &Api<'_>, id: u64, needle: &str) -> Result<bool, ApiError> {
        let what = format!("downloading artifact {id}");
        let location = api.redirect(
            &format!("{}/actions/artifacts/{id}/zip", self.repo_path()),
            &what,
        )?;
        let mut needles = Needles::new(vec![needle.to_string()]);
        let status = api
            .client
            .search(&Request::new(Method::GET, &location), &mut needles)
            .map_err(|f| ApiError::Failed(format!("{what}: {f}")))?;
        if status != 200 {
            return Err(ApiError::Failed(format!(
                "{what}: the signed URL answered HTTP {status}"
            )));
        }
        Ok(needles.found(0))
    }
}
