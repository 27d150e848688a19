//! Run B: the listing first (for the name carriers, and for a remembered
//! miss before B's own lookup would be remembered too), then the agreed
//! paths; and the check that the listing names what B reads by name.

use super::*;

impl Instance {
    pub(super) fn recover_carriers(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Wanted],
        notice: &mut dyn FnMut(Notice),
    ) -> Vec<RecoverOutcome> {
        let mut out: Vec<Option<RecoverOutcome>> = vec![None; wanted.len()];
        // The agreed resource of the property carrier (its name holds no
        // nonce), whether the listing names it, and whether it is there.
        let prop_name = wanted
            .iter()
            .find(|w| w.carrier == "property")
            .and_then(|w| crate::surface::wanted_nonce(w).ok())
            .map(|n| plant_name(ctx, "property", &n));
        let mut listing_names_prop = false;
        let mut listing_ran = false;
        let mut prop_exists = false;
        // What the listing said of a negative-lookup it did not name, said
        // again after the lookup's own verdict.
        let mut listing_said: Vec<Option<String>> = vec![None; wanted.len()];
        // The listing comes first, for negative-lookup too: run B's own
        // lookup of the path would be remembered as well, and then listed.
        let listed: Vec<usize> = (0..wanted.len())
            .filter(|i| {
                matches!(
                    wanted[*i].carrier.as_str(),
                    "cache-key" | "collection-name" | "negative-lookup"
                )
            })
            .collect();
        if !listed.is_empty() {
            let mut hits: Vec<Option<String>> = vec![None; wanted.len()];
            let needles: Vec<(usize, String)> = listed
                .iter()
                .filter_map(|i| Some((*i, wanted[*i].needle.as_str()?.to_string())))
                .collect();
            let prefix = format!("runwarden-{}-", ctx.probe_id);
            let mut names = 0usize;
            // The agreed property resource is looked for too: a listing
            // that does not name a resource B can read by name is not
            // complete (below).
            let mut raw = Needles::new(
                needles
                    .iter()
                    .map(|(_, n)| n.clone())
                    .chain(prop_name.clone())
                    .collect(),
            );
            let listing = self.list(
                &mut |href| {
                    names += 1;
                    let seg = last_segment(href);
                    for (i, n) in &needles {
                        if hits[*i].is_none() && seg.contains(n.as_str()) {
                            hits[*i] = Some(format!(
                                "the listing names {}",
                                escape::bytes(href.as_bytes())
                            ));
                        }
                    }
                    if seg.starts_with(&prefix)
                        && crate::surface::tagged_carrier(ctx, CARRIERS, seg, "").is_none()
                    {
                        notice(Notice {
                            kind: NoticeKind::ForgedMarker,
                            entry: escape::bytes(href.as_bytes()),
                            detail: "a name in this probe's form that no plant with this key made"
                                .into(),
                            beacon: None,
                        });
                    }
                },
                // The raw body too: an index has no hrefs, and a name too
                // long to parse still counts.
                &mut |chunk| raw.feed(chunk),
            );
            let in_raw = |i: usize| {
                let j = needles.iter().position(|(k, _)| *k == i)?;
                raw.found(j).then(|| "the listing holds it".to_string())
            };
            listing_ran = listing.is_ok();
            listing_names_prop = listing_ran && prop_name.is_some() && raw.found(needles.len());
            for i in listed {
                let negative = wanted[i].carrier == "negative-lookup";
                let missed = |what: &str| {
                    if self.s.index_url.is_some() {
                        format!("{what} does not hold it")
                    } else {
                        format!("{what}: none of {names} names holds it")
                    }
                };
                out[i] = match (&listing, hits[i].take().or_else(|| in_raw(i))) {
                    (Ok(_), Some(detail)) if negative => Some(RecoverOutcome::Found {
                        detail: format!("{detail}: the cache keeps the miss, and lists it"),
                    }),
                    (Ok(_), Some(detail)) => Some(RecoverOutcome::Found { detail }),
                    (Err(ListError::Failed(m)), _) => {
                        Some(RecoverOutcome::Failed { reason: m.clone() })
                    }
                    // negative-lookup has a second route: the lookup, below.
                    (Ok(what), None) if negative => {
                        listing_said[i] = Some(missed(what));
                        None
                    }
                    (Err(ListError::Denied(m)), _) if negative => {
                        listing_said[i] = Some(m.clone());
                        None
                    }
                    (Err(ListError::Unavailable(_)), _) if negative => None,
                    (Ok(what), None) => Some(RecoverOutcome::NotFound {
                        detail: missed(what),
                    }),
                    (Err(ListError::Denied(m)), _) => {
                        Some(RecoverOutcome::Denied { reason: m.clone() })
                    }
                    // The listing is these carriers' only route.
                    (Err(ListError::Unavailable(m)), _) => {
                        Some(RecoverOutcome::Failed { reason: m.clone() })
                    }
                };
            }
        }
        for (i, w) in wanted.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            let nonce = match crate::surface::wanted_nonce(w) {
                Ok(n) => n,
                Err(o) => {
                    out[i] = Some(o);
                    continue;
                }
            };
            let name = plant_name(ctx, &w.carrier, &nonce);
            let shown_name = escape::bytes(name.as_bytes());
            let url = self.url_of(&name);
            out[i] = Some(match w.carrier.as_str() {
                "negative-lookup" => match self.call("GET", &url, &[], vec![]) {
                    Err(reason) => RecoverOutcome::Failed { reason },
                    Ok(r) if r.status == 401 || r.status == 403 => RecoverOutcome::Denied {
                        reason: format!("the cache refused the lookup (HTTP {})", r.status),
                    },
                    Ok(r) if r.status == 404 || r.status == 410 => match cache_hit(&r.headers) {
                        Some(h) => RecoverOutcome::Found {
                            detail: format!(
                                "GET {shown_name} was answered from the cache's memory of the miss ({h})"
                            ),
                        },
                        None => RecoverOutcome::NotFound {
                            detail: format!(
                                "{}GET {shown_name} missed with no sign of a remembered miss (no X-Cache or X-Cache-Status HIT, no Age above 0)",
                                listing_said[i]
                                    .as_deref()
                                    .map(|l| format!("{l}; "))
                                    .unwrap_or_default()
                            ),
                        },
                    },
                    Ok(r) => RecoverOutcome::Failed {
                        reason: format!(
                            "GET {shown_name} answered HTTP {}: someone created it",
                            r.status
                        ),
                    },
                },
                _ => {
                    let xml = format!(
                        "<?xml version=\"1.0\"?><D:propfind xmlns:D=\"DAV:\" xmlns:R=\"{PROP_NS}\"><D:prop><R:note/></D:prop></D:propfind>"
                    );
                    match self.call(
                        "PROPFIND",
                        &url,
                        &[("depth", "0"), ("content-type", "application/xml")],
                        xml.into_bytes(),
                    ) {
                        Err(reason) => RecoverOutcome::Failed { reason },
                        Ok(r) if r.status == 401 || r.status == 403 => RecoverOutcome::Denied {
                            reason: format!("the cache refused the PROPFIND (HTTP {})", r.status),
                        },
                        Ok(r) if r.status == 404 => RecoverOutcome::NotFound {
                            detail: format!("the agreed resource {shown_name} does not exist"),
                        },
                        Ok(r) if r.status == 207 => {
                            prop_exists = true;
                            if memchr::memmem::find(&r.body, nonce.hex().as_bytes()).is_some() {
                                RecoverOutcome::Found {
                                    detail: format!(
                                        "PROPFIND of {shown_name} returns the property"
                                    ),
                                }
                            } else {
                                // The property's own status in the 207:
                                // missing (404) or empty is a miss, a
                                // refusal is the cache's access control,
                                // anything else is no answer.
                                match propstat_status(&r.body) {
                                    Some(401 | 403) => RecoverOutcome::Denied {
                                        reason: format!(
                                            "the cache refused to show the property of {shown_name}"
                                        ),
                                    },
                                    Some(200..=299 | 404) => RecoverOutcome::NotFound {
                                        detail: format!(
                                            "PROPFIND of {shown_name} returns no such property"
                                        ),
                                    },
                                    Some(code) => RecoverOutcome::Failed {
                                        reason: format!(
                                            "PROPFIND of {shown_name}: HTTP {code} for the property"
                                        ),
                                    },
                                    None => RecoverOutcome::Failed {
                                        reason: format!(
                                            "PROPFIND of {shown_name}: a 207 with no status"
                                        ),
                                    },
                                }
                            }
                        }
                        Ok(r) => RecoverOutcome::Failed {
                            reason: format!("PROPFIND of {shown_name}: HTTP {}", r.status),
                        },
                    }
                }
            });
        }
        // A listing that does not name the property resource B reads by
        // name (so it is there) lags or leaves things out: its silence on
        // the carriers whose only route it is proves nothing.
        if prop_exists && listing_ran && !listing_names_prop {
            for (o, w) in out.iter_mut().zip(wanted) {
                if matches!(
                    w.carrier.as_str(),
                    "cache-key" | "collection-name" | "negative-lookup"
                ) && matches!(o, Some(RecoverOutcome::NotFound { .. }))
                {
                    *o = Some(RecoverOutcome::Failed {
                        reason: "the listing does not name the agreed property resource, which run B reads by name: it is incomplete, so it not naming the plant proves nothing".into(),
                    });
                }
            }
        }
        crate::surface::all_outcomes(out)
    }
}
