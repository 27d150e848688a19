//! Run B: the root listing for `project-name` (its only route), the
//! agreed projects' pages and metadata for the rest, and the check that
//! the root lists what B reads by name.

use super::plant::upload_for;
use super::{Pypi, PypiIndex};
use crate::nonce::Nonce;
use crate::surface::{Notice, RecoverOutcome, RunCtx, Want};

impl PypiIndex {
    pub(super) fn recover_carriers(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Pypi, Nonce>],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let named: Vec<String> = wanted
            .iter()
            .filter(|w| w.carrier == Pypi::ProjectName)
            .map(|w| w.needle.hex())
            .collect();
        // The root is project-name's route, and what shows that a 404 of
        // an agreed page is the index's: read once, when first needed.
        let mut root = (!named.is_empty()).then(|| self.scan_root(ctx, &named, notice));
        let mut named_seen = 0;
        let mut out = vec![];
        let mut readable: Vec<String> = vec![];
        for w in wanted {
            let (carrier, nonce) = (w.carrier, w.needle);
            // This carrier's place among `named` (and the root's hits).
            let named_at = named_seen;
            named_seen += usize::from(carrier == Pypi::ProjectName);
            if carrier == Pypi::ProjectName {
                // Its only route: the root's listing (the project's name is
                // the message, so B cannot ask for its page).
                out.push(match root.as_ref() {
                    Some(Err(e)) => e.clone(),
                    Some(Ok(r)) => match r.hits.get(named_at).cloned().flatten() {
                        Some(detail) => RecoverOutcome::Found { detail },
                        None if r.projects == 0 => RecoverOutcome::Error {
                            reason: format!(
                                "the simple index {} (HTTP 200) lists no project: \
                                 not a simple index (a login or error page?)",
                                self.shown()
                            ),
                        },
                        None => RecoverOutcome::NotFound {
                            detail: format!(
                                "the simple index lists {} projects; none carries it",
                                r.projects
                            ),
                        },
                    },
                    None => RecoverOutcome::Error {
                        reason: "the simple index was not read".into(),
                    },
                });
                continue;
            }
            let needle = nonce.hex();
            let u = upload_for(ctx, carrier, &nonce);
            let read = match carrier {
                Pypi::Version | Pypi::FileName => self.read_page(&u.project, &needle),
                _ => self.read_description(&u.project, &needle),
            };
            let o = match read {
                Ok(o) => {
                    readable.push(u.project.clone());
                    o
                }
                Err(what) => {
                    let r = root.get_or_insert_with(|| self.scan_root(ctx, &named, notice));
                    self.absent(r, what)
                }
            };
            out.push(o);
        }
        // A root that lags does not list what exists: when it lists none
        // of the projects B reads by name, a miss there is no look at all.
        // Its silence on project-name counts only when it lists every
        // project of this plant that B reads by name (its witnesses), and
        // there is one.
        if let Some(Ok(r)) = &root {
            let unlisted = readable.iter().filter(|n| !r.ours.contains(*n)).count();
            let why = crate::surface::listing::search_witnessed(
                readable.len(),
                unlisted,
                "projects",
                "the simple index",
            );
            if let Some(reason) = why {
                for (o, w) in out.iter_mut().zip(wanted) {
                    if w.carrier == Pypi::ProjectName
                        && matches!(o, RecoverOutcome::NotFound { .. })
                    {
                        *o = RecoverOutcome::Error {
                            reason: reason.clone(),
                        };
                    }
                }
            }
        }
        out
    }
}
