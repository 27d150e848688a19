//! Witnesses on both sides of a plant: the kernel's rule for when a miss
//! on a read route counts as closed.
//!
//! A store that drops things (a cache evicting its oldest entries) or
//! lags (a replica behind) answers run B's read of the plant with the same
//! silence as a store that keeps run A's writes from run B. So run A makes
//! two witnesses through the route run B reads, one before the plant and
//! one after, under names both runs derive from the probe id, the route
//! and the side ([`name`]), never the plant's agreed name or prefix (a
//! prefix restore returns the newest entry: a witness there would hide
//! the plant). Run B reads them through the same route ([`currency`]):
//! - both there: the route is current; its miss counts;
//! - the later one missing: the route lags;
//! - the earlier one missing while the later is there: the store dropped
//!   older entries (eviction drops the oldest first);
//! - neither there: the route does not see run A's writes at all. That is
//!   isolation (a cache scope, a branch) only when another route that does
//!   see them (the repository-wide listing, the writer's token) shows both
//!   witnesses at run B's time; else it cannot be told from an eviction.
//!
//! Whatever is not current turns the route's miss into ERROR
//! ([`super::routes::Recovered::missed_through`]); a nonce found is proof
//! whatever the witnesses say.

use super::RunCtx;

/// Which side of the plant a witness was made on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Before,
    After,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Before, Side::After];

    pub fn name(self) -> &'static str {
        match self {
            Side::Before => "before",
            Side::After => "after",
        }
    }
}

/// The agreed name of `route`'s witness on `side`: a
/// [`super::tagged_name`] of the probe (so ownership and cleanup by probe
/// id treat it as every plant), bound to `bound` as the plants of the
/// route are (a cache entry's version).
pub fn name(ctx: &RunCtx<'_>, route: &str, side: Side, bound: &str) -> String {
    super::tagged_name(
        ctx,
        &format!("witness-{route}-{}", side.name()),
        None,
        bound,
    )
}

/// Whether `candidate` is one of `route`'s witnesses of this probe.
pub fn is_witness(ctx: &RunCtx<'_>, route: &str, candidate: &str, bound: &str) -> bool {
    Side::BOTH
        .iter()
        .any(|s| crate::marker::same(name(ctx, route, *s, bound).as_bytes(), candidate.as_bytes()))
}

/// Which witnesses a route showed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub before: bool,
    pub after: bool,
}

impl Seen {
    /// Marks `side` as shown.
    pub fn saw(&mut self, side: Side) {
        match side {
            Side::Before => self.before = true,
            Side::After => self.after = true,
        }
    }
}

/// What the witnesses say of a route's miss.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Currency {
    /// Both seen through the route: its miss counts.
    Current,
    /// Neither seen through the route, both through a wider one that is
    /// current: run B's route does not see run A's writes, and that is
    /// why it missed (the words say by what).
    Isolated(String),
    /// Why the route's miss proves nothing.
    NotCurrent(String),
}

/// Why `through` is not current when it shows the earlier witness and
/// not the later: it lags.
pub fn lags(through: &str) -> String {
    format!(
        "{through} is not current: it shows the witness run A made before the plant but not the one made after it (it lags), so the plant's absence proves nothing"
    )
}

/// Why `through` is not current when it shows the later witness and not
/// the earlier: the store dropped older entries.
pub fn dropped(through: &str) -> String {
    format!(
        "{through} is not current: the witness run A made before the plant is gone while the one made after it is there (the store dropped older entries, as an eviction does), so the plant's absence proves nothing"
    )
}

/// What the witnesses run B read through `route` (`seen`) say of it.
/// `wider` is asked only when the route showed neither: another route
/// that sees run A's writes (its name, and what it showed or why it could
/// not be read), or `None` when run B has none.
pub fn currency(
    route: &str,
    seen: Seen,
    wider: impl FnOnce() -> Option<(String, Result<Seen, String>)>,
) -> Currency {
    match (seen.before, seen.after) {
        (true, true) => return Currency::Current,
        (true, false) => return Currency::NotCurrent(lags(route)),
        (false, true) => return Currency::NotCurrent(dropped(route)),
        (false, false) => {}
    }
    let neither =
        format!("{route} shows neither witness run A made through it (before and after the plant)");
    match wider() {
        None => Currency::NotCurrent(format!(
            "{neither}, and run B has no other route that sees run A's writes: an eviction, a lag and isolation cannot be told apart, so the plant's absence proves nothing"
        )),
        Some((w, Err(why))) => Currency::NotCurrent(format!(
            "{neither}, and {w}, which would show whether they exist, failed: {why}"
        )),
        Some((w, Ok(s))) => match (s.before, s.after) {
            (true, true) => Currency::Isolated(format!(
                "isolated: {w} shows both witnesses run A made beside the plant, which {route} does not"
            )),
            (true, false) => Currency::NotCurrent(format!("{neither}; {}", lags(&w))),
            (false, true) => Currency::NotCurrent(format!("{neither}; {}", dropped(&w))),
            (false, false) => Currency::NotCurrent(format!(
                "{neither}, nor does {w}: they are gone (evicted) or not there yet, so the plant's absence proves nothing"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(before: bool, after: bool) -> Seen {
        Seen { before, after }
    }

    #[test]
    fn only_both_witnesses_or_isolation_shown_elsewhere_let_a_miss_count() {
        let never = || -> Option<(String, Result<Seen, String>)> { panic!("asked") };
        assert_eq!(currency("r", seen(true, true), never), Currency::Current);
        assert!(
            matches!(currency("r", seen(true, false), never), Currency::NotCurrent(w) if w.contains("lags"))
        );
        assert!(
            matches!(currency("r", seen(false, true), never), Currency::NotCurrent(w) if w.contains("eviction"))
        );
        let wide = |s: Seen| move || Some(("the listing".to_string(), Ok(s)));
        assert!(matches!(
            currency("r", seen(false, false), wide(seen(true, true))),
            Currency::Isolated(_)
        ));
        for s in [seen(false, false), seen(true, false), seen(false, true)] {
            assert!(matches!(
                currency("r", seen(false, false), wide(s)),
                Currency::NotCurrent(_)
            ));
        }
        assert!(matches!(
            currency("r", seen(false, false), || None),
            Currency::NotCurrent(_)
        ));
    }
}
