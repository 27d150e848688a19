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
        let Some(needle) = w.needle.as_str() else {
            return RecoverOutcome::Failed {
                reason: "the plant's needle is not a nonce".into(),
            };
        };
        let source = self.s.read_token_source.clone();
        let mut found: Option<String> = None;
        let mut looked: Vec<String> = vec![];
        let mut denied: Vec<RecoverOutcome> = vec![];
        let mut failed: Option<RecoverOutcome> = None;
        for route in routes(&self.s, ctx, &w.carrier) {
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
                Route::Get { path } => {
                    let shown = escape::bytes(path.as_bytes());
                    let what = format!("asking for {shown}");
                    match api.call(Method::GET, &path, None, &what) {
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
