//! Run B: every route to a carrier with the read token (the listing, read
//! to its end, and the agreed name where the carrier has one). Closed only
//! when every route ran and missed; denied only when GitHub refused every
//! route.

use super::carriers::{Route, field_holding, routes};
use super::*;

impl Instance {
    pub(super) fn recover_carrier(&self, ctx: &RunCtx<'_>, w: &Wanted) -> RecoverOutcome {
        let api = match self.api(true) {
            Ok(a) => a,
            Err(reason) => return RecoverOutcome::Failed { reason },
        };
        // The nonce: a plant's needle holds it as `text` (a needle derived
        // without a receipt may be the bare nonce).
        let Some(needle) = w.needle["text"].as_str().or(w.needle.as_str()) else {
            return RecoverOutcome::Failed {
                reason: "the plant's needle is not a nonce".into(),
            };
        };
        let source = self.s.read_token_source.clone();
        let mut found: Option<String> = None;
        let mut looked: Vec<String> = vec![];
        let mut denied: Vec<RecoverOutcome> = vec![];
        let mut failed: Option<RecoverOutcome> = None;
        let routes = routes(&self.s, ctx, &w.carrier, &w.needle);
        if routes.is_empty() {
            return RecoverOutcome::Failed {
                reason: format!(
                    "run B has no place to look for {}: no issue or commit from the plant or this run",
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
                        Err(e @ ApiError::Denied { .. }) => denied.push(read_outcome(&e, &source)),
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
                            failed.get_or_insert(RecoverOutcome::Failed {
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
                        Err(e @ ApiError::Denied { .. }) => denied.push(read_outcome(&e, &source)),
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
            (None, None) if !denied.is_empty() => RecoverOutcome::Failed {
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
