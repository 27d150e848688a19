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
    /// Artifacts named as the carrier's agreed name, by id.
    candidates: Vec<u64>,
    /// A route that broke: no full look.
    failed: Option<RecoverOutcome>,
    /// A route GitHub refused.
    denied: Option<RecoverOutcome>,
    /// Routes that ran to their end.
    ran: usize,
}

impl Look {
    /// One route's end: ran, refused by GitHub, or broken.
    fn route(&mut self, r: Result<(), ApiError>) {
        match r {
            Ok(()) => self.ran += 1,
            Err(e @ ApiError::Denied { .. }) => {
                self.denied.get_or_insert(outcome_of(&e));
            }
            Err(e) => {
                self.failed.get_or_insert(outcome_of(&e));
            }
        }
    }
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
        // Each carrier's nonce: a needle that is none is that carrier's
        // error before any route runs (never a needle that matches
        // anything).
        let nonces: Vec<Result<crate::nonce::Nonce, RecoverOutcome>> =
            wanted.iter().map(crate::surface::wanted_nonce).collect();
        let hex: Vec<Option<String>> = nonces
            .iter()
            .map(|n| n.as_ref().ok().map(|n| n.hex()))
            .collect();
        // The agreed name of each content carrier (none for artifact-name,
        // whose name only run A knows).
        let agreed: Vec<Option<String>> = wanted
            .iter()
            .zip(&nonces)
            .map(|(w, n)| {
                let n = n.as_ref().ok()?;
                (w.carrier != "artifact-name").then(|| artifact_name(ctx, &w.carrier, n))
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
                    if w.carrier == "artifact-name"
                        && looks[j].found.is_none()
                        && hex[j].as_deref().is_some_and(|h| name.contains(h))
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
        let malformed_error = |what: &str| {
            ApiError::Failed(format!(
                "{what}: an artifact of the listing lacks its id or name"
            ))
        };
        let listing = match listing {
            Ok(_) if malformed => Err(malformed_error(&what)),
            l => l,
        };
        for (j, w) in wanted.iter().enumerate() {
            let Some(needle) = hex[j].clone() else {
                continue;
            };
            looks[j].route(listing.as_ref().map(|_| ()).map_err(Clone::clone));
            // Route 2: the agreed name, asked for.
            let Some(name) = &agreed[j] else { continue };
            let path = format!(
                "{rp}/actions/artifacts?name={}",
                crate::http::percent_encode(name)
            );
            let asking = format!(
                "asking {repo} for the artifact named {}",
                escape::bytes(name.as_bytes())
            );
            let mut bad = false;
            let by_name = api.list(&path, Some("artifacts"), &asking, &mut |a| match (
                a["id"].as_u64(),
                a["name"].as_str(),
            ) {
                (Some(id), Some(n)) => {
                    if n == name && !looks[j].candidates.contains(&id) {
                        looks[j].candidates.push(id);
                    }
                }
                _ => bad = true,
            });
            let by_name = match by_name {
                Ok(_) if bad => Err(malformed_error(&asking)),
                l => l.map(|_| ()),
            };
            looks[j].route(by_name);
            // Then every candidate's zip.
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
                    Err(e) => looks[j].route(Err(e)),
                }
            }
        }
        looks
            .into_iter()
            .zip(wanted)
            .zip(nonces)
            .map(|((look, w), nonce)| match (look.found, nonce) {
                (Some(detail), _) => RecoverOutcome::Found { detail },
                (None, Err(o)) => o,
                (None, Ok(_)) => match (look.failed, look.denied) {
                    (Some(f), _) => f,
                    // Denied only when GitHub refused every route.
                    (None, Some(d)) if look.ran == 0 => d,
                    (None, Some(_)) => RecoverOutcome::Failed {
                        reason: "GitHub refused one route and answered another: no full look"
                            .into(),
                    },
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
                },
            })
            .collect()
    }

    /// Downloads an artifact's zip as a later run does (the REST API
    /// redirects to a signed URL, fetched without the token) and says
    /// whether it holds `needle`, searched as it arrives. The body must be
    /// a zip (it starts `PK`): anything else (a sign-in page, a proxy's
    /// answer) is not the artifact, and says nothing of it.
    fn zip_holds(&self, api: &Api<'_>, id: u64, needle: &str) -> Result<bool, ApiError> {
        let what = format!("downloading artifact {id}");
        let location = api.redirect(
            &format!("{}/actions/artifacts/{id}/zip", self.repo_path()),
            &what,
        )?;
        let mut needles = Needles::new(vec![needle.to_string()]);
        let mut head: Vec<u8> = Vec::with_capacity(2);
        let (status, _) = api
            .client
            .stream(&Request::new(Method::GET, &location), &mut |chunk| {
                if head.len() < 2 {
                    head.extend(chunk.iter().take(2 - head.len()));
                }
                needles.feed(chunk);
                Ok(())
            })
            .map_err(|f| ApiError::Failed(format!("{what}: {f}")))?;
        if status != 200 {
            return Err(ApiError::Failed(format!(
                "{what}: the signed URL answered HTTP {status}"
            )));
        }
        if head != b"PK" {
            return Err(ApiError::Failed(format!(
                "{what}: the signed URL's answer is not a zip, so not the artifact"
            )));
        }
        Ok(needles.found(0))
    }
}
