//! The queue-wide throttle and the per-key minimum interval, built on `governor`.
//!
//! Both are checked when an item is *handed to a worker*, never when it is
//! added, so they hold for every item whatever path it entered by (`add`,
//! `add_after`, `add_rate_limited`): a `requeue_after` loop cannot bypass them.
//!
//! governor measures time with its own clock; [`TokioClock`] makes it follow
//! `tokio::time`, so that paused-clock tests are deterministic.

use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::HashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{NotUntil, Quota};
use tokio::time::Instant;

/// A governor clock that reads `tokio::time::Instant`, so it pauses and
/// advances with tokio's test clock. Instants are nanoseconds since `base`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TokioClock {
    base: Instant,
}

impl TokioClock {
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
        }
    }

    /// Converts one of this clock's readings back to a tokio instant.
    pub(crate) fn to_instant(self, at: Nanos) -> Instant {
        self.base + Duration::from(at)
    }
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.base.elapsed())
    }
}

/// Fewest keyed checks between two prunes of the keyed state.
const MIN_PRUNE_PERIOD: usize = 4096;

type Direct = governor::RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;
type Keyed<T> = governor::RateLimiter<T, HashMapStateStore<T>, TokioClock, NoOpMiddleware<Nanos>>;

/// What the throttle says about handing out an item now.
pub(crate) enum Verdict {
    /// Go ahead.
    Allow,
    /// Not before this instant.
    NotBefore(Instant),
}

/// The global limit and the per-key minimum interval of one queue.
pub(crate) struct Throttle<T: Eq + Hash + Clone> {
    clock: TokioClock,
    global: Option<Direct>,
    per_key: Option<Keyed<T>>,
    /// Checks since the keyed state was last pruned (amortises `retain_recent`).
    keyed_checks: AtomicUsize,
    /// Checks to wait for before the next prune: the keys left by the last one.
    prune_after: AtomicUsize,
}

impl<T: Eq + Hash + Clone> Throttle<T> {
    /// `None` when neither limit is configured.
    pub(crate) fn new(global: Option<Quota>, per_key_interval: Option<Duration>) -> Option<Self> {
        let per_key = per_key_interval.and_then(Quota::with_period);
        if global.is_none() && per_key.is_none() {
            return None;
        }
        let clock = TokioClock::new();
        Some(Self {
            clock,
            global: global.map(|q| governor::RateLimiter::direct_with_clock(q, clock)),
            per_key: per_key.map(|q| governor::RateLimiter::hashmap_with_clock(q, clock)),
            keyed_checks: AtomicUsize::new(0),
            prune_after: AtomicUsize::new(MIN_PRUNE_PERIOD),
        })
    }

    pub(crate) fn has_global(&self) -> bool {
        self.global.is_some()
    }

    /// Takes one token of the global limit, if configured.
    pub(crate) fn check_global(&self) -> Verdict {
        match &self.global {
            None => Verdict::Allow,
            Some(limiter) => self.verdict(limiter.check()),
        }
    }

    /// Takes one token of `item`'s minimum interval, if configured.
    pub(crate) fn check_key(&self, item: &T) -> Verdict {
        let Some(limiter) = &self.per_key else {
            return Verdict::Allow;
        };
        let verdict = self.verdict(limiter.check_key(item));
        // Forget keys whose interval has passed once in a while. A prune
        // costs O(keys) and waits for as many checks as keys it left behind,
        // so the cost per check stays O(1).
        let checks = self.keyed_checks.fetch_add(1, Ordering::Relaxed) + 1;
        if checks >= self.prune_after.load(Ordering::Relaxed) {
            self.keyed_checks.store(0, Ordering::Relaxed);
            limiter.retain_recent();
            self.prune_after
                .store(limiter.len().max(MIN_PRUNE_PERIOD), Ordering::Relaxed);
        }
        verdict
    }

    fn verdict(&self, result: Result<(), NotUntil<Nanos>>) -> Verdict {
        match result {
            Ok(()) => Verdict::Allow,
            Err(not_until) => {
                Verdict::NotBefore(self.clock.to_instant(not_until.earliest_possible()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn governor_follows_the_paused_clock() {
        let t = Throttle::<&str>::new(
            Some(crate::workqueue::Quota::per_second(10).burst(2).governor()),
            None,
        )
        .unwrap();
        let start = Instant::now();
        assert!(matches!(t.check_global(), Verdict::Allow));
        assert!(matches!(t.check_global(), Verdict::Allow));
        let Verdict::NotBefore(at) = t.check_global() else {
            panic!("burst exceeded")
        };
        assert_eq!(at, start + Duration::from_millis(100));
        tokio::time::sleep_until(at).await;
        assert!(matches!(t.check_global(), Verdict::Allow));
        assert!(matches!(t.check_global(), Verdict::NotBefore(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn per_key_interval() {
        let t = Throttle::new(None, Some(Duration::from_secs(1))).unwrap();
        let start = Instant::now();
        assert!(matches!(t.check_key(&"a"), Verdict::Allow));
        assert!(matches!(t.check_key(&"b"), Verdict::Allow));
        let Verdict::NotBefore(at) = t.check_key(&"a") else {
            panic!("interval not enforced")
        };
        assert_eq!(at, start + Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(matches!(t.check_key(&"a"), Verdict::Allow));
    }

    #[tokio::test(start_paused = true)]
    async fn keyed_state_is_pruned() {
        let t = Throttle::new(None, Some(Duration::from_millis(1))).unwrap();
        for i in 0..5000u32 {
            assert!(matches!(t.check_key(&i), Verdict::Allow));
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        for i in 0..15_000u32 {
            assert!(matches!(t.check_key(&(i + 10_000)), Verdict::Allow));
        }
        let keys = t.per_key.as_ref().unwrap().len();
        assert!(keys < 20_000, "stale keys kept: {keys}");
    }

    #[test]
    fn quota_edge_cases() {
        assert!(Throttle::<u8>::new(None, None).is_none());
        assert!(Throttle::<u8>::new(None, Some(Duration::ZERO)).is_none());
    }
}
