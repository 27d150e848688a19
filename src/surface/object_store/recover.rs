//! Run B on an object store: its routes, each miss with the look of its
//! route. The object listing and the upload listing are read to the end
//! of their continuation (complete by the server's cursor) and must show
//! the two witnesses run A made through them; the reads by key (`GET`,
//! `HEAD`, `GET ?tagging`) must find the two witness objects by the same
//! read.

use super::s3::{Call, Said, parse};
use super::surface::{ListError, said};
use super::{META, OBJECTS, Obj, ObjectStore, UPLOADS, VERSIONS, WITNESS, innocuous, plant_name};
use crate::nonce::Nonce;
use crate::surface::routes::{Kind, Recovered, Route};
use crate::surface::witness::{self, Currency, Seen, Side};
use crate::surface::{RunCtx, Want};
use http::Method;

pub(super) const ROUTES: &[Route<Obj>] = &[
    Route {
        name: "list-objects",
        kind: Kind::Listing,
        carriers: &[Obj::ObjectKey],
    },
    Route {
        name: "get-object",
        kind: Kind::ByName,
        carriers: &[Obj::ObjectContent],
    },
    Route {
        name: "head-object",
        kind: Kind::ByName,
        carriers: &[Obj::ObjectMetadata],
    },
    Route {
        name: "get-tagging",
        kind: Kind::ByName,
        carriers: &[Obj::ObjectTag],
    },
    Route {
        name: "list-uploads",
        kind: Kind::Listing,
        carriers: &[Obj::MultipartUpload],
    },
    Route {
        name: "list-versions",
        kind: Kind::Listing,
        carriers: &[Obj::ObjectVersion],
    },
];

/// What one whole listing showed: which wanted needles a key carries (by
/// index), which witnesses it named, and how many keys.
struct Listed {
    hits: Vec<Option<String>>,
    seen: Seen,
    count: usize,
}

impl ObjectStore {
    /// Run B: each wanted carrier through its route.
    pub(super) fn recover_all(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Obj, Nonce>],
    ) -> Vec<Recovered> {
        let mut out: Vec<Option<Recovered>> = vec![None; wanted.len()];
        let picked = |c: Obj| -> Vec<usize> {
            (0..wanted.len())
                .filter(|i| wanted[*i].carrier == c)
                .collect()
        };
        let keyed = picked(Obj::ObjectKey);
        if !keyed.is_empty() {
            self.through_listing(ctx, wanted, &keyed, &mut out, Lister::Objects);
        }
        let versions = picked(Obj::ObjectVersion);
        if !versions.is_empty() {
            self.through_listing(ctx, wanted, &versions, &mut out, Lister::Versions);
        }
        let uploads = picked(Obj::MultipartUpload);
        if !uploads.is_empty() {
            self.through_listing(ctx, wanted, &uploads, &mut out, Lister::Uploads);
        }
        for (c, route, how) in [
            (Obj::ObjectContent, "get-object", Method::GET),
            (Obj::ObjectMetadata, "head-object", Method::HEAD),
            (Obj::ObjectTag, "get-tagging", Method::GET),
        ] {
            let mut currency: Option<Currency> = None;
            for i in picked(c) {
                let w = &wanted[i];
                let key = self.key(&plant_name(ctx, c, &w.needle));
                let r = match self.read(c, &key, &how, &w.needle.hex()) {
                    Read::Found(d) => Recovered::Found { detail: d },
                    Read::Denied(r) => {
                        self.refused_read(ctx, c, route, &how, &key, &w.needle.hex(), r)
                    }
                    Read::Error(r) => Recovered::Error { reason: r },
                    Read::Missed(detail) => {
                        let cur = currency
                            .get_or_insert_with(|| self.by_key_currency(ctx, c, route, &how));
                        Recovered::missed_through(route, detail, cur)
                    }
                };
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|o| {
                o.unwrap_or(Recovered::Error {
                    reason: "not a carrier of this surface".into(),
                })
            })
            .collect()
    }

    /// The object listing (or, `uploads`, the upload listing) for the
    /// wanted carriers at `idx`: taken again within the consistency wait
    /// until it shows both witnesses.
    fn through_listing(
        &self,
        ctx: &RunCtx<'_>,
        wanted: &[Want<Obj, Nonce>],
        idx: &[usize],
        out: &mut [Option<Recovered>],
        lister: Lister,
    ) {
        let (route, what, witnesses, unit) = match lister {
            Lister::Uploads => ("list-uploads", "the upload listing", UPLOADS, "upload"),
            Lister::Versions => ("list-versions", "the version listing", VERSIONS, "version"),
            Lister::Objects => ("list-objects", "the object listing", OBJECTS, "key"),
        };
        let names: Vec<String> = Side::BOTH
            .iter()
            .map(|s| self.key(&witness::name(ctx, witnesses, *s, "")))
            .collect();
        let needles: Vec<(usize, String)> =
            idx.iter().map(|i| (*i, wanted[*i].needle.hex())).collect();
        // A refusal after an earlier listing answered (the wait's next
        // try) is no refusal: the identity was let in.
        let mut answered = false;
        let once = || -> Result<(Listed, bool), ListError> {
            let (mut l, count) = self.list_once(lister, &names, &needles, wanted.len());
            l.count = match count {
                Err(ListError::Denied(m)) if answered => {
                    return Err(ListError::Failed(format!(
                        "{m}, after an earlier listing answered: no whole listing"
                    )));
                }
                c => c?,
            };
            answered = true;
            let current = l.seen.before && l.seen.after;
            Ok((l, current))
        };
        let wait = std::time::Duration::from_millis(self.settings.consistency_wait_ms);
        let listed = crate::surface::listing::until_current(wait, once);
        // A refused object listing leaves its sibling, ListObjectVersions
        // (refused.rs).
        let versions = match &listed {
            Err(ListError::Denied(r)) if lister == Lister::Objects => {
                Some(self.refused_listing(&needles, wanted.len(), r))
            }
            _ => None,
        };
        for &i in idx {
            out[i] = Some(match &listed {
                Err(ListError::Denied(r)) => match &versions {
                    None => Recovered::Denied { reason: r.clone() },
                    Some(Err(o)) => o.clone(),
                    Some(Ok(hits)) => match &hits[i] {
                        Some(key) => Recovered::Found {
                            detail: format!(
                                "{r}, but ListObjectVersions names {key}, which carries the nonce"
                            ),
                        },
                        None => Recovered::Error {
                            reason: format!(
                                "{r}, but ListObjectVersions answers: a route of its own, not shown current, so the refusal proves nothing"
                            ),
                        },
                    },
                },
                Err(ListError::Failed(r) | ListError::Absent(r)) => {
                    Recovered::Error { reason: r.clone() }
                }
                Ok(c) => match &c.value.hits[i] {
                    Some(key) => Recovered::Found {
                        detail: format!("{what} names {key}, which carries the nonce"),
                    },
                    None => {
                        // No wider route: a listing that misses objects a
                        // read by key finds lags (S3's listings are
                        // eventually consistent on many stores); it is
                        // never isolation.
                        let seen = c.value.seen;
                        let by_key = || self.seen_by(ctx, &Method::HEAD, false);
                        let cur = match (seen.before || seen.after, lister) {
                            (false, Lister::Objects)
                                if by_key().is_ok_and(|s| s.before && s.after) =>
                            {
                                Currency::NotCurrent(format!(
                                    "{what} is not yet consistent: it shows neither witness run A made through it, while a read by key finds both (it lags), so the plant's absence proves nothing"
                                ))
                            }
                            _ => witness::currency(what, seen, || None),
                        };
                        Recovered::missed_through(
                            route,
                            format!(
                                "{what} holds {} under the prefix (read to its end); none carries the nonce",
                                plural(c.value.count, unit)
                            ),
                            &cur,
                        )
                    }
                },
            });
        }
    }

    /// One whole listing through `lister`: which of `needles` (index,
    /// hex) a key carries, which of the witnesses `names` it names, and
    /// how many it holds (or why it could not be read).
    fn list_once(
        &self,
        lister: Lister,
        names: &[String],
        needles: &[(usize, String)],
        len: usize,
    ) -> (Listed, Result<usize, ListError>) {
        let mut l = Listed {
            hits: vec![None; len],
            seen: Seen::default(),
            count: 0,
        };
        let mut look = |key: &str| {
            for (s, n) in Side::BOTH.iter().zip(names) {
                if key == n {
                    l.seen.saw(*s);
                }
            }
            for (i, hex) in needles {
                if l.hits[*i].is_none() && key.contains(hex.as_str()) {
                    l.hits[*i] = Some(crate::escape::bytes(key.as_bytes()));
                }
            }
        };
        let count = match lister {
            Lister::Uploads => self.list_uploads(&mut |k, _| look(k)),
            Lister::Versions => self.list_versions(&self.settings.prefix, &mut |k, _| look(k)),
            Lister::Objects => self.list_keys(&mut look),
        };
        (l, count)
    }

    /// Reads the agreed key of `c` the way its route does.
    fn read(&self, c: Obj, key: &str, how: &Method, hex: &str) -> Read {
        let Some(s3) = &self.s3 else {
            return Read::Error("no credentials".into());
        };
        let mut call = Call::new(how.clone(), Some(key));
        if c == Obj::ObjectTag {
            call = call.query("tagging", "");
        }
        let a = match s3.send(&call) {
            Ok(a) => a,
            Err(f) => return Read::Error(f.into()),
        };
        let shown = crate::escape::bytes(key.as_bytes());
        let op = match c {
            Obj::ObjectMetadata => "HeadObject",
            Obj::ObjectTag => "GetObjectTagging",
            _ => "GetObject",
        };
        match a.said() {
            Said::Done => {
                let found = match c {
                    Obj::ObjectMetadata => a.headers.iter().any(|(n, v)| {
                        n.as_str().starts_with("x-amz-meta-")
                            && v.to_str().is_ok_and(|v| v.contains(hex))
                    }),
                    _ => memchr::memmem::find(&a.body, hex.as_bytes()).is_some(),
                };
                if found {
                    Read::Found(format!("{op} of {shown} holds the nonce"))
                } else {
                    Read::Missed(format!(
                        "{op} of {shown} read it; it does not hold the nonce"
                    ))
                }
            }
            Said::Missing => Read::Missed(format!("{op} of {shown}: no such key")),
            Said::Denied => Read::Denied(said(&Said::Denied, op)),
            // A HEAD's 403 has no body to say why: the same key read with
            // GET tells a refusal from a credential the store refused.
            Said::Failed(_) if *how == Method::HEAD && a.status == 403 => {
                match s3
                    .send(&Call::new(Method::GET, Some(key)))
                    .map(|g| g.said())
                {
                    Ok(Said::Denied) => Read::Denied(format!(
                        "{} (told by a GetObject of the same key: a HEAD's refusal has no body)",
                        said(&Said::Denied, op)
                    )),
                    Ok(other) => Read::Error(said(&other, op)),
                    Err(f) => Read::Error(f.into()),
                }
            }
            other => Read::Error(said(&other, op)),
        }
    }

    /// What the witness objects, read by key through `route` (`how`),
    /// say of it.
    fn by_key_currency(&self, ctx: &RunCtx<'_>, c: Obj, route: &str, how: &Method) -> Currency {
        let what = format!("the {route} read");
        match self.seen_by(ctx, how, c == Obj::ObjectTag) {
            Ok(seen) => witness::currency(&what, seen, || None),
            Err(why) => Currency::NotCurrent(format!("{what} of the witnesses failed: {why}")),
        }
    }

    /// Which witness objects a read by key (`how`; of their tags with
    /// `tagging`) finds as run A made them.
    fn seen_by(&self, ctx: &RunCtx<'_>, how: &Method, tagging: bool) -> Result<Seen, String> {
        let mut seen = Seen::default();
        for side in Side::BOTH {
            match self.read_witness(ctx, side, how, tagging)? {
                Wit::Made => seen.saw(side),
                Wit::Missing => {}
                Wit::Denied => return Err(said(&Said::Denied, "a read of a witness")),
            }
        }
        Ok(seen)
    }

    /// One witness object read by key as run B reads the plants: found as
    /// run A made it (its content; its metadata or tag for the routes that
    /// read those), not there, or refused. Anything else, or a witness
    /// that holds something else (a server answering 200 to everything),
    /// is an error: the route shows nothing current.
    pub(super) fn read_witness(
        &self,
        ctx: &RunCtx<'_>,
        side: Side,
        how: &Method,
        tagging: bool,
    ) -> Result<Wit, String> {
        let s3 = self.s3.as_ref().ok_or("no credentials")?;
        let key = self.key(&witness::name(ctx, OBJECTS, side, ""));
        let mut call = Call::new(how.clone(), Some(&key));
        if tagging {
            call = call.query("tagging", "");
        }
        let a = s3.send(&call).map_err(String::from)?;
        match a.said() {
            Said::Done => {}
            Said::Missing => return Ok(Wit::Missing),
            Said::Denied => return Ok(Wit::Denied),
            other => return Err(said(&other, "a read of a witness")),
        }
        let made = if tagging {
            parse(&a.body, &["Tag"]).is_ok_and(|d| {
                d.items.iter().any(|(_, t)| {
                    t.get("Key").map(String::as_str) == Some(META)
                        && t.get("Value").map(String::as_str) == Some(WITNESS)
                })
            })
        } else if *how == Method::HEAD {
            a.header(&format!("x-amz-meta-{META}")) == Some(WITNESS)
        } else {
            a.body == innocuous(ctx.probe_id)
        };
        if made {
            Ok(Wit::Made)
        } else {
            Err(format!(
                "a witness read back ({} of {}) is not what run A made: the answer is not the store's",
                if tagging {
                    "its tags"
                } else if *how == Method::HEAD {
                    "its metadata"
                } else {
                    "its content"
                },
                crate::escape::bytes(key.as_bytes())
            ))
        }
    }
}

/// A witness object as a read by key found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Wit {
    Made,
    Missing,
    Denied,
}

/// Which listing a listed carrier is read through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lister {
    Objects,
    Uploads,
    Versions,
}

/// What a read by key came to.
enum Read {
    Found(String),
    Missed(String),
    Denied(String),
    Error(String),
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
