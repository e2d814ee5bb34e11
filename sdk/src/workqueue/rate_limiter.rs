//! Per-item rate limiters: how long an item waits before it is retried.
//!
//! [`WorkQueue::add_rate_limited`](super::WorkQueue::add_rate_limited) asks the
//! queue's [`RateLimiter`] for a delay ([`RateLimiter::when`], which also counts
//! a failure) and adds the item after it; [`WorkQueue::forget`](super::WorkQueue::forget)
//! clears the item's history once it succeeded.
//!
//! These limiters pace *retries of one item*. The queue-wide limit on how many
//! items per second workers receive is the throttle
//! ([`WorkQueueBuilder::throttle`](super::WorkQueueBuilder::throttle)), which
//! applies to every item whatever path it entered by.

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;

/// Decides how long an item waits before it is retried.
///
/// Implementations keep per-item history; they are shared between the queue
/// and any clone of it, so they take `&self` and synchronise internally.
pub trait RateLimiter<T>: Send + Sync {
    /// Records one more failure of `item` and returns how long to wait before
    /// retrying it.
    fn when(&self, item: &T) -> Duration;
    /// Clears `item`'s history (it succeeded, or is no longer tracked).
    fn forget(&self, item: &T);
    /// How many times `item` has been retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// Failure counts per item, shared by the counting limiters.
struct Failures<T>(Mutex<HashMap<T, u32>>);

impl<T: Eq + Hash + Clone> Failures<T> {
    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }

    /// Returns the count before this failure and records one more.
    fn bump(&self, item: &T) -> u32 {
        let mut map = self.0.lock();
        if let Some(n) = map.get_mut(item) {
            let before = *n;
            *n = n.saturating_add(1);
            before
        } else {
            map.insert(item.clone(), 1);
            0
        }
    }

    fn get(&self, item: &T) -> u32 {
        self.0.lock().get(item).copied().unwrap_or(0)
    }

    fn forget(&self, item: &T) {
        self.0.lock().remove(item);
    }
}

/// `base * 2^failures`, capped at `max`: the standard per-item backoff.
///
/// The default is 5 ms up to 1000 s, as in client-go and controller-runtime.
/// The computation cannot overflow: once the doubling passes `max` (or
/// anything representable) the delay is `max`.
///
/// ```
/// use std::time::Duration;
/// use opkit::workqueue::{ExponentialFailureRateLimiter, RateLimiter};
///
/// let limiter = ExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(20));
/// assert_eq!(limiter.num_requeues(&"a"), 3);
/// for _ in 0..100 { limiter.when(&"a"); }
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
/// limiter.forget(&"a");
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// ```
pub struct ExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Failures<T>,
}

impl<T: Eq + Hash + Clone> ExponentialFailureRateLimiter<T> {
    /// A limiter starting at `base` and doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Failures::new(),
        }
    }
}

impl<T: Eq + Hash + Clone> Default for ExponentialFailureRateLimiter<T> {
    /// 5 ms doubling up to 1000 s.
    fn default() -> Self {
        Self::new(Duration::from_millis(5), Duration::from_secs(1000))
    }
}

/// `base * 2^exp`, saturating at `max`.
pub(crate) fn exponential(base: Duration, exp: u32, max: Duration) -> Duration {
    let factor = match 1u128.checked_shl(exp) {
        Some(f) => f,
        None if base.is_zero() => return Duration::ZERO,
        None => return max,
    };
    match base.as_nanos().checked_mul(factor) {
        Some(nanos) if nanos < max.as_nanos() => {
            let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
            // `nanos % 1e9` always fits in a u32.
            let sub = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
            Duration::new(secs, sub)
        }
        _ => max,
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for ExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = self.failures.bump(item);
        exponential(self.base, exp, self.max)
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.get(item)
    }
}

/// `fast` for the first `max_fast_attempts` retries of an item, `slow` after.
///
/// ```
/// use std::time::Duration;
/// use opkit::workqueue::{FastSlowRateLimiter, RateLimiter};
///
/// let limiter = FastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 2);
/// assert_eq!(limiter.when(&1), Duration::from_millis(5));
/// assert_eq!(limiter.when(&1), Duration::from_millis(5));
/// assert_eq!(limiter.when(&1), Duration::from_secs(10));
/// ```
pub struct FastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    failures: Failures<T>,
}

impl<T: Eq + Hash + Clone> FastSlowRateLimiter<T> {
    /// `fast` for the first `max_fast_attempts` retries, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            failures: Failures::new(),
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for FastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let attempt = self.failures.bump(item).saturating_add(1);
        if attempt <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.get(item)
    }
}

/// The longest delay of several limiters (each one records the failure).
///
/// ```
/// use std::time::Duration;
/// use opkit::workqueue::{ExponentialFailureRateLimiter, FastSlowRateLimiter, MaxOfRateLimiter, RateLimiter};
///
/// let limiter = MaxOfRateLimiter::new()
///     .with(ExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(60)))
///     .with(FastSlowRateLimiter::new(Duration::from_millis(3), Duration::from_secs(1), 1));
/// assert_eq!(limiter.when(&"x"), Duration::from_millis(3));
/// assert_eq!(limiter.when(&"x"), Duration::from_secs(1));
/// assert_eq!(limiter.num_requeues(&"x"), 2);
/// ```
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// An empty combination (its delay is zero until a limiter is added).
    pub fn new() -> Self {
        Self {
            limiters: Vec::new(),
        }
    }

    /// Adds one limiter to the combination.
    pub fn with(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiters.push(Box::new(limiter));
        self
    }
}

impl<T> Default for MaxOfRateLimiter<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .max()
            .unwrap_or(Duration::ZERO)
    }
    fn forget(&self, item: &T) {
        for l in &self.limiters {
            l.forget(item);
        }
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Caps the delay of another limiter at `max`.
///
/// ```
/// use std::time::Duration;
/// use opkit::workqueue::{ExponentialFailureRateLimiter, MaxWaitRateLimiter, RateLimiter};
///
/// let limiter = MaxWaitRateLimiter::new(ExponentialFailureRateLimiter::default(), Duration::from_secs(30));
/// for _ in 0..40 { limiter.when(&7); }
/// assert_eq!(limiter.when(&7), Duration::from_secs(30));
/// ```
pub struct MaxWaitRateLimiter<R> {
    inner: R,
    max: Duration,
}

impl<R> MaxWaitRateLimiter<R> {
    /// Wraps `inner`, never waiting longer than `max`.
    pub fn new(inner: R, max: Duration) -> Self {
        Self { inner, max }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for MaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.inner.when(item).min(self.max)
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item)
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.inner.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn exponential_doubles_and_caps() {
        let l = ExponentialFailureRateLimiter::new(5 * MS, Duration::from_secs(1000));
        let got: Vec<_> = (0..5).map(|_| l.when(&"a")).collect();
        assert_eq!(got, [5 * MS, 10 * MS, 20 * MS, 40 * MS, 80 * MS]);
        assert_eq!(l.num_requeues(&"a"), 5);
        assert_eq!(l.num_requeues(&"b"), 0);
        for _ in 0..1000 {
            l.when(&"a");
        }
        assert_eq!(l.when(&"a"), Duration::from_secs(1000));
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        assert_eq!(l.when(&"a"), 5 * MS);
    }

    #[test]
    fn exponential_is_overflow_safe() {
        let max = Duration::MAX;
        assert_eq!(exponential(Duration::from_secs(1), 200, max), max);
        assert_eq!(exponential(Duration::from_secs(1), 127, max), max);
        assert_eq!(exponential(Duration::MAX, 1, max), max);
        assert_eq!(
            exponential(Duration::from_nanos(1), 0, max),
            Duration::from_nanos(1)
        );
        assert_eq!(
            exponential(Duration::from_nanos(1), 40, max),
            Duration::from_nanos(1 << 40)
        );
        assert_eq!(exponential(Duration::ZERO, 500, max), Duration::ZERO);
        assert_eq!(exponential(MS, 3, Duration::ZERO), Duration::ZERO);
        // a counter saturated at u32::MAX still yields the cap
        assert_eq!(exponential(MS, u32::MAX, 5 * MS), 5 * MS);
    }

    #[test]
    fn exponential_items_are_independent() {
        let l = ExponentialFailureRateLimiter::default();
        assert_eq!(l.when(&1), 5 * MS);
        assert_eq!(l.when(&1), 10 * MS);
        assert_eq!(l.when(&2), 5 * MS);
    }

    #[test]
    fn fast_slow() {
        let l = FastSlowRateLimiter::new(5 * MS, 10 * MS, 3);
        let got: Vec<_> = (0..5).map(|_| l.when(&"a")).collect();
        assert_eq!(got, [5 * MS, 5 * MS, 5 * MS, 10 * MS, 10 * MS]);
        assert_eq!(l.num_requeues(&"a"), 5);
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        assert_eq!(l.when(&"a"), 5 * MS);
    }

    #[test]
    fn max_of_takes_the_longest_and_forgets_all() {
        let l = MaxOfRateLimiter::new()
            .with(ExponentialFailureRateLimiter::new(
                MS,
                Duration::from_secs(1),
            ))
            .with(FastSlowRateLimiter::new(
                5 * MS,
                3 * Duration::from_secs(1),
                3,
            ));
        let got: Vec<_> = (0..5).map(|_| l.when(&"a")).collect();
        assert_eq!(
            got,
            [
                5 * MS,
                5 * MS,
                5 * MS,
                Duration::from_secs(3),
                Duration::from_secs(3)
            ]
        );
        assert_eq!(l.num_requeues(&"a"), 5);
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        assert_eq!(l.when(&"a"), 5 * MS);
        assert_eq!(MaxOfRateLimiter::<u8>::new().when(&1), Duration::ZERO);
    }

    #[test]
    fn max_wait_caps() {
        let l = MaxWaitRateLimiter::new(
            ExponentialFailureRateLimiter::new(MS, Duration::from_secs(1000)),
            50 * MS,
        );
        let got: Vec<_> = (0..8).map(|_| l.when(&"a")).collect();
        assert_eq!(
            got,
            [
                MS,
                2 * MS,
                4 * MS,
                8 * MS,
                16 * MS,
                32 * MS,
                50 * MS,
                50 * MS
            ]
        );
        assert_eq!(l.num_requeues(&"a"), 8);
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
    }

    #[test]
    fn trait_objects_and_arcs_work() {
        let shared: Arc<dyn RateLimiter<u8>> = Arc::new(ExponentialFailureRateLimiter::default());
        let boxed: Box<dyn RateLimiter<u8>> = Box::new(shared.clone());
        assert_eq!(boxed.when(&1), 5 * MS);
        assert_eq!(shared.num_requeues(&1), 1);
        boxed.forget(&1);
        assert_eq!(shared.num_requeues(&1), 0);
    }
}
