//! What a rendezvous remembers: which nonces arrived, through which
//! carriers, when. Bounded: at most `max` nonces, each at most
//! [`MAX_ARRIVALS`] arrivals (one per carrier), none older than `max_age`;
//! the oldest nonce goes first when a new one comes to a full store.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// One per carrier: a nonce is planted through one carrier only.
pub const MAX_ARRIVALS: usize = super::CARRIERS.len();

/// One arrival of a nonce.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    pub carrier: &'static str,
    /// RFC 3339, seconds.
    pub at: String,
}

pub struct Store {
    by_nonce: HashMap<[u8; 16], Vec<Arrival>>,
    /// Nonces in the order they first arrived, with when (and when, in
    /// Unix milliseconds).
    order: VecDeque<([u8; 16], Instant, i64)>,
    max: usize,
    max_age: Duration,
    /// When the newest nonce dropped for space had first arrived (Unix
    /// ms): a reader whose nonce may have come after it cannot trust a
    /// miss (someone may have flooded the store).
    pub evicted_ms: Option<i64>,
    /// When a delivery was last turned away unread (all workers busy, Unix
    /// ms): the same for a miss after it.
    pub dropped_ms: Option<i64>,
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Store {
    pub fn new(max: usize, max_age: Duration) -> Store {
        Store {
            by_nonce: HashMap::new(),
            order: VecDeque::new(),
            max: max.max(1),
            max_age,
            evicted_ms: None,
            dropped_ms: None,
        }
    }

    /// Forgets what is older than `max_age`.
    fn expire(&mut self, now: Instant) {
        while let Some((n, t, _)) = self.order.front() {
            if now.duration_since(*t) <= self.max_age {
                break;
            }
            self.by_nonce.remove(n);
            self.order.pop_front();
        }
    }

    pub fn record(&mut self, nonce: [u8; 16], carrier: &'static str) {
        let now = Instant::now();
        self.expire(now);
        if !self.by_nonce.contains_key(&nonce) {
            if self.order.len() >= self.max
                && let Some((old, _, first_ms)) = self.order.pop_front()
            {
                self.by_nonce.remove(&old);
                self.evicted_ms = Some(first_ms);
            }
            self.order.push_back((nonce, now, now_ms()));
        }
        let arrivals = self.by_nonce.entry(nonce).or_default();
        if arrivals.len() < MAX_ARRIVALS && !arrivals.iter().any(|a| a.carrier == carrier) {
            arrivals.push(Arrival {
                carrier,
                at: crate::timefmt::now_rfc3339(),
            });
        }
    }

    pub fn seen(&mut self, nonce: &[u8; 16]) -> Vec<Arrival> {
        self.expire(Instant::now());
        self.by_nonce.get(nonce).cloned().unwrap_or_default()
    }

    /// A delivery turned away unread.
    pub fn dropped(&mut self) {
        self.dropped_ms = Some(now_ms());
    }

    /// How many nonces it holds.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_stays_bounded_in_count_and_age() {
        let mut s = Store::new(3, Duration::from_secs(3600));
        for i in 0..10u8 {
            s.record([i; 16], "tcp-raw");
            s.record([i; 16], "tcp-raw");
        }
        assert_eq!(s.len(), 3);
        assert!(s.evicted_ms.is_some());
        assert!(s.seen(&[0; 16]).is_empty());
        assert_eq!(s.seen(&[9; 16]).len(), 1);
        let mut s = Store::new(10, Duration::ZERO);
        s.record([1; 16], "dns-direct");
        std::thread::sleep(Duration::from_millis(5));
        assert!(s.seen(&[1; 16]).is_empty());
        assert!(s.is_empty());
    }
}
