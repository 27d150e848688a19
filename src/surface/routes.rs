//! Run B's routes, declared by each surface type ([`Route`]), and the
//! proof a miss on each must carry ([`Look`]), which the kernel checks
//! ([`judge`]).
//!
//! A PASS says run B looked everywhere it could and the nonce is not
//! there. Looked everywhere means every route the type has to a carrier;
//! *not there* means each of those routes was current when it answered.
//! A type that declares its routes answers a miss only as
//! [`Recovered::Missed`] with one [`Look`] per route it read, each saying
//! how that route showed itself current ([`Proof`]); the adapter turns a
//! miss lacking the look of any declared route of its carrier into ERROR,
//! whatever the type's own code says. A type that declares no routes has
//! no miss that counts (the conformance suite requires routes of every
//! type).

use super::RecoverOutcome;
use super::carrier::CarrierSet;
use super::witness::Currency;

/// What kind of read a route is: the docs' table of what "current" means
/// per kind (docs/verdicts.md#current).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Every item, handed over whole or page by page.
    Listing,
    /// A registry's search or index root.
    Search,
    /// A read by an agreed name or key.
    ByName,
    /// A restore by a prefix both runs know (the newest entry under it).
    Prefix,
    /// A fetch by an id the plant reported.
    ById,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Listing => "listing",
            Kind::Search => "search",
            Kind::ByName => "read by name",
            Kind::Prefix => "restore by prefix",
            Kind::ById => "fetch by id",
        }
    }
}

/// One way run B reads some of a type's carriers.
pub struct Route<C: 'static> {
    /// Unique within the type; a [`Look`] names it.
    pub name: &'static str,
    pub kind: Kind,
    /// The carriers run B reads through it: a miss of each needs its look.
    pub carriers: &'static [C],
}

/// How a route showed itself current for a miss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Proof {
    /// Both of its witnesses, made before and after the plant, were seen
    /// through it ([`super::witness`]).
    Witnessed,
    /// It does not see run A's writes, and a wider current route showed
    /// both witnesses: the words say by what (added to the detail).
    Isolated(String),
    /// A listing that showed this plant's witnesses and is known complete
    /// ([`crate::route::complete`]).
    Listed,
    /// A read the protocol makes complete and current by itself, saying
    /// which: git's one ref advertisement and a fetch of what it
    /// advertised, a directory read whose entries do not change during
    /// it, a lookup by name on the local file system. No second pass, no
    /// witness: nothing stands between the reader and the state.
    Protocol(&'static str),
}

impl Proof {
    /// The proof a route's witnesses give, or why they give none.
    pub fn of(currency: &Currency) -> Result<Proof, String> {
        match currency {
            Currency::Current => Ok(Proof::Witnessed),
            Currency::Isolated(why) => Ok(Proof::Isolated(why.clone())),
            Currency::NotCurrent(why) => Err(why.clone()),
        }
    }
}

/// One route read for a miss, with its proof.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Look {
    pub route: &'static str,
    pub proof: Proof,
}

/// What recovery of one carrier came to, as a typed surface answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered {
    Found {
        detail: String,
    },
    /// Nothing found, with the look of every route read.
    Missed {
        detail: String,
        looks: Vec<Look>,
    },
    Denied {
        reason: String,
    },
    Error {
        reason: String,
    },
}

impl Recovered {
    /// `o`, with a miss read through `route` as `proof` shows it.
    pub fn via(o: RecoverOutcome, route: &'static str, proof: Proof) -> Recovered {
        match o {
            RecoverOutcome::NotFound { detail } => Recovered::Missed {
                detail,
                looks: vec![Look { route, proof }],
            },
            o => o.into(),
        }
    }

    /// A miss through one route, shown current by `currency`: ERROR when
    /// it is not.
    pub fn missed_through(route: &'static str, detail: String, currency: &Currency) -> Recovered {
        match Proof::of(currency) {
            Ok(proof) => Recovered::Missed {
                detail,
                looks: vec![Look { route, proof }],
            },
            Err(reason) => Recovered::Error { reason },
        }
    }
}

/// An answer as the older outcome says it: a miss with no look yet
/// ([`Recovered::via`] adds one), which [`judge`] never counts.
impl From<RecoverOutcome> for Recovered {
    fn from(o: RecoverOutcome) -> Recovered {
        match o {
            RecoverOutcome::Found { detail } => Recovered::Found { detail },
            RecoverOutcome::NotFound { detail } => Recovered::Missed {
                detail,
                looks: vec![],
            },
            RecoverOutcome::Denied { reason } => Recovered::Denied { reason },
            RecoverOutcome::Error { reason } => Recovered::Error { reason },
        }
    }
}

/// The answers `recover` gives, one per carrier of `carriers` (in order),
/// each miss read through its carrier's route as `route_of` says: for a
/// type whose every route is current by the protocol ([`Proof::Protocol`]).
pub fn through<C>(
    carriers: impl IntoIterator<Item = C>,
    route_of: impl Fn(C) -> (&'static str, Proof),
    recover: impl FnOnce() -> Vec<RecoverOutcome>,
) -> Vec<Recovered> {
    recover()
        .into_iter()
        .zip(carriers)
        .map(|(o, c)| {
            let (route, proof) = route_of(c);
            Recovered::via(o, route, proof)
        })
        .collect()
}

/// The answers of a registry (npm's, a PyPI index): `searched`, the
/// carrier whose name is the message, misses through its search, shown
/// current or not by `search`; every other carrier through its documents
/// read by name, whose currency `documents` tells (asked once, only for a
/// miss).
pub fn search_and_documents<C: PartialEq>(
    answers: Vec<RecoverOutcome>,
    carriers: impl IntoIterator<Item = C>,
    searched: C,
    search: (&'static str, Currency),
    documents: (&'static str, impl FnOnce() -> Currency),
) -> Vec<Recovered> {
    let (by_name, read) = documents;
    let mut read = Some(read);
    let mut currency: Option<Currency> = None;
    answers
        .into_iter()
        .zip(carriers)
        .map(|(o, c)| match o {
            RecoverOutcome::NotFound { detail } if c == searched => {
                Recovered::missed_through(search.0, detail, &search.1)
            }
            RecoverOutcome::NotFound { detail } => {
                let current = currency.get_or_insert_with(|| (read.take().expect("asked once"))());
                Recovered::missed_through(by_name, detail, current)
            }
            o => o.into(),
        })
        .collect()
}

/// The kernel's check of one carrier's answer against the type's declared
/// `routes`: a miss counts (NOT FOUND) only when every route of `carrier`
/// has its look; else ERROR, naming the route without one (and for a
/// type that declares none, always).
pub fn judge<C: CarrierSet>(routes: &[Route<C>], carrier: C, r: Recovered) -> RecoverOutcome {
    let (detail, looks) = match r {
        Recovered::Found { detail } => return RecoverOutcome::Found { detail },
        Recovered::Denied { reason } => return RecoverOutcome::Denied { reason },
        Recovered::Error { reason } => return RecoverOutcome::Error { reason },
        Recovered::Missed { detail, looks } => (detail, looks),
    };
    if routes.is_empty() {
        return RecoverOutcome::Error {
            reason: "this surface type declares no routes: nothing shows where run B looked, or that it was current".into(),
        };
    }
    let mine: Vec<&Route<C>> = routes
        .iter()
        .filter(|r| r.carriers.contains(&carrier))
        .collect();
    if mine.is_empty() {
        return RecoverOutcome::Error {
            reason: format!(
                "no declared route of this surface type reads {}: nothing shows where run B looked",
                carrier.name()
            ),
        };
    }
    let mut isolated = vec![];
    for route in mine {
        match looks.iter().find(|l| l.route == route.name) {
            None => {
                return RecoverOutcome::Error {
                    reason: format!(
                        "run B's {} route `{}` was not shown current for this miss, so it proves nothing",
                        route.kind.name(),
                        route.name
                    ),
                };
            }
            Some(Look {
                proof: Proof::Isolated(why),
                ..
            }) => isolated.push(why.clone()),
            Some(_) => {}
        }
    }
    let detail = std::iter::once(detail)
        .chain(isolated)
        .collect::<Vec<_>>()
        .join("; ");
    RecoverOutcome::NotFound { detail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::surface::carrier::carriers;

    carriers! {
        /// Two carriers for the tests.
        pub enum T {
            A = "a", Durable, "a";
            B = "b", Durable, "b";
        }
    }

    const ROUTES: &[Route<T>] = &[
        Route {
            name: "list",
            kind: Kind::Listing,
            carriers: &[T::A, T::B],
        },
        Route {
            name: "get",
            kind: Kind::ByName,
            carriers: &[T::B],
        },
    ];

    fn missed(looks: &[(&'static str, Proof)]) -> Recovered {
        Recovered::Missed {
            detail: "d".into(),
            looks: looks
                .iter()
                .map(|(route, proof)| Look {
                    route,
                    proof: proof.clone(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_miss_counts_only_with_a_look_at_every_route_of_its_carrier() {
        assert_eq!(T::parse("b"), Some(T::B));
        let listed = ("list", Proof::Listed);
        let got = ("get", Proof::Witnessed);
        assert!(
            matches!(judge(ROUTES, T::A, missed(std::slice::from_ref(&listed))), RecoverOutcome::NotFound { detail } if detail == "d")
        );
        assert!(
            matches!(judge(ROUTES, T::B, missed(std::slice::from_ref(&listed))), RecoverOutcome::Error { reason } if reason.contains("`get`"))
        );
        assert!(matches!(
            judge(ROUTES, T::B, missed(&[listed.clone(), got])),
            RecoverOutcome::NotFound { .. }
        ));
        let iso = ("get", Proof::Isolated("isolated: w".into()));
        assert!(
            matches!(judge(ROUTES, T::B, missed(&[listed, iso])), RecoverOutcome::NotFound { detail } if detail == "d; isolated: w")
        );
        // A miss without a look counts nowhere, not even for a type that
        // declares no routes.
        let legacy = Recovered::from(RecoverOutcome::NotFound { detail: "d".into() });
        assert!(matches!(
            judge(&[], T::A, legacy.clone()),
            RecoverOutcome::Error { .. }
        ));
        assert!(matches!(
            judge(ROUTES, T::A, legacy),
            RecoverOutcome::Error { .. }
        ));
        let hit = Recovered::Found { detail: "h".into() };
        assert!(matches!(
            judge(ROUTES, T::A, hit),
            RecoverOutcome::Found { .. }
        ));
    }

    #[test]
    fn a_route_not_current_is_an_error_never_a_miss() {
        let c = Currency::NotCurrent("lags".into());
        assert_eq!(
            Recovered::missed_through("get", "d".into(), &c),
            Recovered::Error {
                reason: "lags".into()
            }
        );
    }
}
