//! Run B's look at a carrier: every route with the read token (the
//! listing, read to its end, and the agreed name where the carrier has
//! one), denied only when GitHub refused every route; and whether the
//! writer's token lists the plant, which shows a miss is no listing's
//! lag.

use super::entry::Needle;
use super::{Gh, GitHubApi, read_outcome};
use crate::escape;
use crate::fault::Fault;
use crate::github::ApiError;
use crate::surface::{RecoverOutcome, RunCtx, Want};
use ::http::Method;

use super::carriers::{Route, field_holding, routes};

/// One carrier run B looks for, with what its plant said.
pub(super) type Wanted = Want<Gh, Needle>;

impl GitHubApi {
    /// Where the writer's token lists the plant (its listing routes, the
    /// write token): `None` when it lists it nowhere; `Unsupported` when
    /// there is no writer's token here, `Broken` when its listing failed.
    pub(super) fn writer_lists(
        &self,
        ctx: &RunCtx<'_>,
        carrier: Gh,
        w: &Wanted,
    ) -> Result<Option<String>, Fault> {
        if self.settings.token.is_none() {
            return Err(Fault::unsupported(format!(
                "no writer's token ({} is unset) to tell a listing's lag from a plant hidden from run B",
                escape::bytes(self.settings.token_source.as_bytes())
            )));
        }
        let api = self.api(false)?;
        let needle = w.needle.nonce().hex();
        let needle = needle.as_str();
        let routes = routes(&self.settings, ctx, carrier, &w.needle);
        for route in routes {
            let Route::List { path, items } = route else {
                continue;
            };
            let shown = escape::bytes(path.as_bytes());
            let mut seen = false;
            api.list(
                &path,
                items,
                &format!("listing {shown} with the writer's token"),
                &mut |o| {
                    seen |= field_holding(o, needle).is_some();
                },
            )
            .map_err(|e| Fault::broken(e.text()))?;
            if seen {
                return Ok(Some(shown));
            }
        }
        Ok(None)
    }

    pub(super) fn look(&self, ctx: &RunCtx<'_>, carrier: Gh, w: &Wanted) -> RecoverOutcome {
        let api = match self.api(true) {
            Ok(a) => a,
            Err(f) => return RecoverOutcome::Error { reason: f.into() },
        };
        // The nonce: a plant's needle holds it as `text` (a needle derived
        // without a receipt is the bare nonce).
        let needle = w.needle.nonce().hex();
        let needle = needle.as_str();
        let source = self.settings.read_token_source.clone();
        let mut found: Option<String> = None;
        let mut looked: Vec<String> = vec![];
        let mut denied: Vec<RecoverOutcome> = vec![];
        let mut failed: Option<RecoverOutcome> = None;
        let routes = routes(&self.settings, ctx, carrier, &w.needle);
        if routes.is_empty() {
            return RecoverOutcome::Error {
                reason: format!(
                    "run B has no place to look for {}: no issue, commit or ref from the plant or this run",
                    w.carrier
                ),
            };
        }
        for route in routes {
            match route {
                Route::List { path, items } => {
                    let shown = escape::bytes(path.as_bytes());
                    let what = format!("listing {shown}");
                    let r = api.list(&path, items, &what, &mut |o| {
                        if found.is_none()
                            && let Some(f) = field_holding(o, needle)
                        {
                            found = Some(format!(
                                "listed at {shown}: an object has the nonce in its field {f}"
                            ));
                        }
                    });
                    match r {
                        Ok(n) => looked.push(format!("listed all {n} at {shown}")),
                        Err(e) if e.is_permission_refusal() => {
                            denied.push(read_outcome(&e, &source))
                        }
                        Err(e) => {
                            failed.get_or_insert(read_outcome(&e, &source));
                        }
                    }
                }
                Route::Get { path, name } => {
                    let shown = escape::bytes(path.as_bytes());
                    let what = format!("asking for {shown}");
                    match api.call(Method::GET, &path, None, &what) {
                        // The answer must be the object asked for.
                        Ok(a)
                            if !a.json["name"]
                                .as_str()
                                .is_some_and(|n| n.eq_ignore_ascii_case(&name)) =>
                        {
                            failed.get_or_insert(RecoverOutcome::Error {
                                reason: format!(
                                    "{what}: the answer (HTTP {}) is not the object named so",
                                    a.status
                                ),
                            });
                        }
                        Ok(a) => {
                            if found.is_none()
                                && let Some(f) = field_holding(&a.json, needle)
                            {
                                found = Some(format!(
                                    "asked for the agreed name {shown}: its field {f} holds the nonce"
                                ));
                            }
                            looked.push(format!("asked for {shown}"));
                        }
                        Err(ApiError::NotFound(_)) => {
                            looked.push(format!("asked for {shown}: not there"))
                        }
                        Err(e) if e.is_permission_refusal() => {
                            denied.push(read_outcome(&e, &source))
                        }
                        Err(e) => {
                            failed.get_or_insert(read_outcome(&e, &source));
                        }
                    }
                }
            }
        }
        match (found, failed) {
            (Some(detail), _) => RecoverOutcome::Found { detail },
            (None, Some(f)) => f,
            (None, None) if !denied.is_empty() && looked.is_empty() => denied.swap_remove(0),
            (None, None) if !denied.is_empty() => RecoverOutcome::Error {
                reason: format!(
                    "GitHub refused one route and answered another ({}): no full look",
                    looked.join("; ")
                ),
            },
            (None, None) => RecoverOutcome::NotFound {
                detail: format!(
                    "{} with {}; none holds it",
                    looked.join("; "),
                    escape::bytes(source.as_bytes())
                ),
            },
        }
    }
}
