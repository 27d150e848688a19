//! Run B: the search for `package-name` (its only route), the agreed
//! packages' documents and tarballs for the rest, and the check that the
//! search lists what B can read by name.

use super::plant::package_for;
use super::{Npm, NpmRegistry};
use crate::escape;
use crate::nonce::Nonce;
use crate::surface::{Notice, RecoverOutcome, RunCtx, Want};

impl NpmRegistry {
    pub(super) fn recover_carriers(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Npm, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let searched: Vec<&Want<Npm, Nonce>> = wanted
            .iter()
            .filter(|w| w.carrier == Npm::PackageName)
            .collect();
        let (by_search, listed) = if searched.is_empty() {
            (vec![], Default::default())
        } else {
            self.search(ctx, &searched, notice)
        };
        let mut by_search = by_search.into_iter();
        // The agreed packages B could read by name: the search must list
        // them too, or its silence on package-name proves nothing.
        let mut readable: Vec<String> = vec![];
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        for (i, w) in wanted.iter().enumerate() {
            let (carrier, nonce) = (w.carrier, w.needle);
            if carrier == Npm::PackageName {
                // Its only route: the search (the package's name is the
                // message, so B cannot ask for its document).
                out[i] = by_search.next();
                continue;
            }
            let (name, version) = package_for(ctx, carrier, &nonce);
            let shown = escape::bytes(name.as_bytes());
            out[i] = Some(match self.packument(&name) {
                Err(o) => o,
                Ok(None) => RecoverOutcome::NotFound {
                    detail: format!("no package {shown}"),
                },
                Ok(Some(doc)) => {
                    readable.push(name.clone());
                    self.read_carrier(carrier, &doc, &shown, &version, &nonce.hex())
                }
            });
        }
        // A search that lags (or filters) does not list what exists: its
        // silence on package-name counts only when it lists every package
        // of this plant that B reads by name (its witnesses), and there is
        // one.
        let unlisted = readable.iter().filter(|n| !listed.contains(*n)).count();
        let why = crate::surface::listing::search_witnessed(
            readable.len(),
            unlisted,
            "packages",
            "the search",
        );
        if let Some(reason) = why {
            for (o, w) in out.iter_mut().zip(wanted) {
                if w.carrier == Npm::PackageName
                    && matches!(o, Some(RecoverOutcome::NotFound { .. }))
                {
                    *o = Some(RecoverOutcome::Error {
                        reason: reason.clone(),
                    });
                }
            }
        }
        crate::surface::all_outcomes(out)
    }
}
