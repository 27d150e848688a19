//! Run B's routes: one whole listing of the repository's artifacts, the
//! query for an agreed name, the download of each candidate's zip
//! (searched as it arrives), what the routes of one carrier came to, and
//! what a carrier every route missed is.

use super::{ActionsArtifacts, Artifact, Item, outcome_of, planted_carrier};
use crate::escape;
use crate::github::{Api, ApiError};
use crate::http::Request;
use crate::scan::Needles;
use crate::surface::routes;
use crate::surface::{Notice, NoticeKind, RecoverOutcome, RunCtx};
use ::http::Method;

/// What the routes of one carrier came to.
#[derive(Default)]
pub(super) struct Look {
    pub(super) found: Option<String>,
    /// Artifacts named as the carrier's agreed name, by id.
    pub(super) candidates: Vec<u64>,
    /// A route that broke: no full look.
    pub(super) failed: Option<RecoverOutcome>,
    /// A route GitHub refused.
    pub(super) denied: Option<RecoverOutcome>,
    /// Routes that ran to their end.
    pub(super) ran: usize,
}

impl Look {
    /// One route's end: ran, refused by GitHub, or broken.
    pub(super) fn route(&mut self, r: Result<(), ApiError>) {
        match r {
            Ok(()) => self.ran += 1,
            Err(e) if e.is_permission_refusal() => {
                self.denied.get_or_insert(outcome_of(&e));
            }
            Err(e) => {
                self.failed.get_or_insert(outcome_of(&e));
            }
        }
    }
}

/// What one whole listing of the repository's artifacts showed.
#[derive(Default)]
pub(super) struct Listed {
    /// Artifacts listed.
    pub(super) n: usize,
    /// Per wanted carrier: where artifact-name's nonce was found.
    pub(super) found: Vec<Option<String>>,
    /// Per wanted carrier: artifacts named as its agreed name, by id.
    pub(super) candidates: Vec<Vec<u64>>,
    pub(super) notices: Vec<Notice>,
}

/// An item without id or name is no full look.
fn malformed(what: &str) -> ApiError {
    ApiError::Failed(format!(
        "{what}: an artifact of the listing lacks its id or name"
    ))
}

/// Run B's routes ([`crate::surface::routes`]): the repository's listing
/// for artifact-name (its only route: the name is the message), and the
/// query for the agreed name with the download of what it shows for the
/// rest.
pub(super) const ROUTES: &[routes::Route<Artifact>] = &[
    routes::Route {
        name: "listing",
        kind: routes::Kind::Listing,
        carriers: &[Artifact::Name],
    },
    routes::Route {
        name: "download",
        kind: routes::Kind::ByName,
        carriers: &[Artifact::Content, Artifact::FilePath],
    },
];

/// A carrier's route, and what shows a miss there current: a miss is
/// NOT FOUND only from a listing that showed this plant's witnesses (the
/// agreed-name artifacts), or, by name, once the query showed the agreed
/// artifact and its download was read ([`ActionsArtifacts::missed`]).
pub(super) fn route_of(c: Artifact) -> (&'static str, routes::Proof) {
    match c {
        Artifact::Name => ("listing", routes::Proof::Listed),
        _ => ("download", routes::Proof::Listed),
    }
}

impl ActionsArtifacts {
    /// One whole listing (the only route to a nonce in a name), and
    /// whether it shows every agreed-name artifact of this plant that
    /// `agreed` names (its witnesses) or found every nonce it could.
    /// `kinds` are the wanted carriers, `hex` their nonces.
    pub(super) fn list_once(
        &self,
        api: &Api<'_>,
        ctx: &RunCtx<'_>,
        kinds: &[Artifact],
        hex: &[String],
        agreed: &[Option<String>],
    ) -> Result<(Listed, bool), ApiError> {
        let what = format!("listing the artifacts of {}", self.repo());
        let prefix = format!("runwarden-{}-", ctx.probe_id);
        let mut l = Listed {
            found: vec![None; kinds.len()],
            candidates: vec![vec![]; kinds.len()],
            ..Listed::default()
        };
        let mut bad = false;
        l.n = api.list(
            &format!("{}/actions/artifacts", self.repo_path()),
            Some("artifacts"),
            &what,
            &mut |a| {
                let Some(Item { id, name }) = Item::of(a) else {
                    bad = true;
                    return;
                };
                let name = name.as_str();
                for (j, kind) in kinds.iter().enumerate() {
                    if *kind == Artifact::Name && l.found[j].is_none() && name.contains(&hex[j]) {
                        l.found[j] = Some(format!(
                            "listed artifact {} (id {id}) has the nonce in its name",
                            escape::bytes(name.as_bytes())
                        ));
                    }
                    if agreed[j].as_deref() == Some(name) && !l.candidates[j].contains(&id) {
                        l.candidates[j].push(id);
                    }
                }
                if name.starts_with(&prefix) && planted_carrier(ctx, name).is_none() {
                    l.notices.push(Notice {
                        kind: NoticeKind::ForgedMarker,
                        entry: escape::bytes(name.as_bytes()),
                        detail:
                            "an artifact name in this probe's form that no plant with this key made"
                                .into(),
                        beacon: None,
                    });
                }
            },
        )?;
        if bad {
            return Err(malformed(&what));
        }
        let witnessed = agreed.iter().any(Option::is_some)
            && agreed
                .iter()
                .zip(&l.candidates)
                .all(|(a, c)| a.is_none() || !c.is_empty());
        let all_found = kinds
            .iter()
            .zip(&l.found)
            .all(|(k, f)| *k != Artifact::Name || f.is_some());
        Ok((l, witnessed || all_found))
    }

    /// The agreed name asked for (`?name=`): the artifacts by that name.
    pub(super) fn by_name(&self, api: &Api<'_>, name: &str) -> Result<(Vec<u64>, bool), ApiError> {
        let path = format!(
            "{}/actions/artifacts?name={}",
            self.repo_path(),
            crate::wire::percent_encode(name)
        );
        let asking = format!(
            "asking {} for the artifact named {}",
            self.repo(),
            escape::bytes(name.as_bytes())
        );
        let (mut ids, mut bad) = (vec![], false);
        api.list(
            &path,
            Some("artifacts"),
            &asking,
            &mut |a| match Item::of(a) {
                Some(Item { id, name: n }) => {
                    if n == name && !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                None => bad = true,
            },
        )?;
        if bad {
            return Err(malformed(&asking));
        }
        let shown = !ids.is_empty();
        Ok((ids, shown))
    }

    /// Downloads each candidate of `look` (artifacts named `name`) until
    /// one's zip holds `needle` (in `place`: a file, a file's path).
    pub(super) fn search_zips(
        &self,
        api: &Api<'_>,
        look: &mut Look,
        name: &str,
        needle: &str,
        place: &str,
    ) {
        for id in look.candidates.clone() {
            match self.zip_holds(api, id, needle) {
                Ok(true) => {
                    look.found = Some(format!(
                        "artifact {} (id {id}), downloaded through the REST API, holds the nonce \
                         in {place}",
                        escape::bytes(name.as_bytes()),
                    ));
                    break;
                }
                Ok(false) => {}
                Err(e) => look.route(Err(e)),
            }
        }
    }

    /// A carrier every route ran for and missed: NOT FOUND when the
    /// listing showed its witnesses (and, for an agreed name, the query
    /// named the artifact); else the listing is not yet consistent.
    pub(super) fn missed(
        &self,
        carrier: Artifact,
        listed: Option<&crate::surface::listing::Current<Listed>>,
        witnesses: &[String],
        candidates: usize,
        by_name: Option<(u32, std::time::Duration)>,
    ) -> RecoverOutcome {
        let repo = self.repo();
        let Some(c) = listed else {
            return RecoverOutcome::Error {
                reason: "the listing did not run".into(),
            };
        };
        let n = c.value.n;
        if carrier == Artifact::Name {
            if witnesses.is_empty() {
                return RecoverOutcome::Error {
                    reason: "no artifact of this plant that run B knows by name was uploaded (artifact-content, artifact-file-path), so nothing shows the listing is current".into(),
                };
            }
            if !c.current {
                return crate::surface::listing::not_current(
                    &format!("the artifact {}", witnesses.join(", ")),
                    c,
                );
            }
            return RecoverOutcome::NotFound {
                detail: format!(
                    "listed all {n} artifacts of {repo} through the REST API, this plant's own among them; no name carries it"
                ),
            };
        }
        if candidates == 0 {
            let (tries, waited) = by_name.unwrap_or_default();
            return RecoverOutcome::Error {
                reason: format!(
                    "the listing is not yet consistent: neither it nor the query for the agreed name shows the artifact run A uploaded ({tries} queries over {:.1} s): its silence proves nothing",
                    waited.as_secs_f64()
                ),
            };
        }
        RecoverOutcome::NotFound {
            detail: format!(
                "listed all {n} artifacts of {repo} and asked for the agreed name; \
                 {candidates} artifact(s) by that name, none holding it"
            ),
        }
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
