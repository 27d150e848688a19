//! The kernel's rule for listing routes: a listing's silence counts only
//! when the listing is shown to be current.
//!
//! GitHub's REST listings are eventually consistent, and so are caches
//! behind a load balancer: a listing taken right after run A wrote can
//! lack what it wrote, and "none of N holds it" would then read as proof.
//! So every listing a carrier's verdict rests on must show a witness: an
//! object run A made through the same route that run B knows by its agreed
//! name (an artifact of another carrier, the agreed cache entry, the
//! agreed resource). Until it does, the listing is taken again, backing
//! off, within a bounded wait (the surface's `consistency-wait` key,
//! [`DEFAULT_WAIT`] by default: GitHub documents no bound); after that
//! the carriers whose only route it is are ERROR, never PASS.

use super::RecoverOutcome;
use crate::config::{ConfigError, Options};
use std::time::{Duration, Instant};

/// How long a listing that does not show its witness is retried by
/// default. GitHub documents no bound on its listings' lag; an artifact or
/// cache entry listed within seconds is what runs show, and 30 s covers
/// the slow tail while keeping a lagging probe's cost bounded.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The longest `consistency-wait` a config may ask for.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// The first pause between two listings; each next one doubles.
const FIRST_PAUSE: Duration = Duration::from_millis(250);

/// [`DEFAULT_WAIT`] in milliseconds, as settings keep it.
pub fn default_wait_ms() -> u64 {
    DEFAULT_WAIT.as_millis() as u64
}

/// The `consistency-wait` key of a listing surface: whole seconds (`0`:
/// one listing, no retry), at most 600.
pub fn wait_option(opts: &mut Options<'_>) -> Result<Duration, ConfigError> {
    let Some((text, pos)) = opts.string("consistency-wait")? else {
        return Ok(DEFAULT_WAIT);
    };
    let secs: u64 = text
        .trim_end_matches('s')
        .parse()
        .map_err(|_| opts.error(pos, "`consistency-wait` must be whole seconds (e.g. 30)"))?;
    let wait = Duration::from_secs(secs);
    if wait > MAX_WAIT {
        return Err(opts.error(pos, "`consistency-wait` may be at most 600 seconds"));
    }
    Ok(wait)
}

/// What retrying a listing came to.
pub struct Current<T> {
    /// The last listing's result.
    pub value: T,
    /// Whether that listing showed every witness.
    pub current: bool,
    /// How long it took from the first listing to the last.
    pub waited: Duration,
    /// How many listings were taken.
    pub tries: u32,
}

/// Takes a listing with `list` (its result, and whether it showed every
/// witness) until one shows them or `wait` has passed. An error ends it
/// at once: a listing that broke is no look, whatever the wait.
pub fn until_current<T, E>(
    wait: Duration,
    mut list: impl FnMut() -> Result<(T, bool), E>,
) -> Result<Current<T>, E> {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut tries = 0;
    loop {
        let (value, current) = list()?;
        tries += 1;
        let waited = start.elapsed();
        if current || waited + pause > wait || crate::signals::received().is_some() {
            return Ok(Current {
                value,
                current,
                waited,
                tries,
            });
        }
        std::thread::sleep(pause);
        pause *= 2;
    }
}

/// The outcome of a carrier whose only route is a listing that never
/// showed its witness: ERROR, with what it lacked.
pub fn not_current<T>(witness: &str, c: &Current<T>) -> RecoverOutcome {
    RecoverOutcome::Error {
        reason: format!(
            "the listing is not yet consistent: it does not show {witness}, which run A made through the same route ({} listings over {:.1} s): its silence proves nothing",
            c.tries,
            c.waited.as_secs_f64()
        ),
    }
}

/// Turns every NOT FOUND among `out` of the carriers `listed` picks (by
/// index) into [`not_current`]: the listing was their only route.
pub fn demote<T>(
    out: &mut [Option<RecoverOutcome>],
    listed: impl Fn(usize) -> bool,
    witness: &str,
    c: &Current<T>,
) {
    for (i, o) in out.iter_mut().enumerate() {
        if listed(i) && matches!(o, Some(RecoverOutcome::NotFound { .. })) {
            *o = Some(not_current(witness, c));
        }
    }
}

/// The rule for a registry's search (npm's search, a PyPI index's root),
/// asked once: its silence on the carrier whose name is the message counts
/// only when it lists every one of this plant's `readable` names (those
/// run B reads by name: the witnesses), and there is one. `unlisted`: how
/// many of them it does not list; `what`: "packages" or "projects"; `of`:
/// the search, for the message. `Some(why)` when it does not count.
pub fn search_witnessed(readable: usize, unlisted: usize, what: &str, of: &str) -> Option<String> {
    if readable == 0 {
        Some(format!(
            "no {what} of this plant that run B reads by name exists, so nothing shows {of} is current: it not listing the plant proves nothing"
        ))
    } else if unlisted > 0 {
        Some(format!(
            "the listing is not yet consistent: {of} does not list {unlisted} of the {readable} {what} of this plant that run B reads by name: it lags or is incomplete, so it not listing the plant proves nothing"
        ))
    } else {
        None
    }
}
