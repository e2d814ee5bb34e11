//! [`Quota`]: how many items per period a throttle lets through.
//!
//! ```
//! use std::time::Duration;
//! use opkit::workqueue::Quota;
//!
//! let steady = Quota::per_second(50).burst(10); // 50/s, bursts of 10
//! let slow = Quota::per_period(Duration::from_secs(30)); // one every 30 s
//! # let _ = (steady, slow);
//! ```

use std::num::NonZeroU32;
use std::time::Duration;

/// A throttle's rate: one item per replenish interval, with bursts of up
/// to [`burst`](Self::burst) items (default 1). Built on `governor`'s
/// generic cell rate algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    inner: governor::Quota,
}

impl Quota {
    /// `n` items per second (at least one: zero counts as one).
    pub fn per_second(n: u32) -> Self {
        Self::from(governor::Quota::per_second(non_zero(n)))
    }

    /// `n` items per minute (at least one: zero counts as one).
    #[cfg(test)]
    pub(crate) fn per_minute(n: u32) -> Self {
        Self::from(governor::Quota::per_minute(non_zero(n)))
    }

    /// One item per `period` (a zero period counts as one nanosecond).
    pub fn per_period(period: Duration) -> Self {
        let period = period.max(Duration::from_nanos(1));
        let inner = governor::Quota::with_period(period)
            .unwrap_or_else(|| governor::Quota::per_second(NonZeroU32::MAX));
        Self::from(inner)
    }

    /// Bursts of up to `size` items (at least one: zero counts as one).
    pub fn burst(self, size: u32) -> Self {
        Self::from(self.inner.allow_burst(non_zero(size)))
    }

    /// The largest burst.
    #[cfg(test)]
    pub(crate) fn burst_size(&self) -> u32 {
        self.inner.burst_size().get()
    }

    /// The time one item's worth of quota takes to replenish.
    #[cfg(test)]
    pub(crate) fn replenish_interval(&self) -> Duration {
        self.inner.replenish_interval()
    }

    pub(crate) fn governor(self) -> governor::Quota {
        self.inner
    }
}

impl From<governor::Quota> for Quota {
    fn from(inner: governor::Quota) -> Self {
        Self { inner }
    }
}

fn non_zero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_bursts() {
        let q = Quota::per_second(10).burst(3);
        assert_eq!(q.burst_size(), 3);
        assert_eq!(q.replenish_interval(), Duration::from_millis(100));
        assert_eq!(Quota::per_second(0), Quota::per_second(1));
        assert_eq!(Quota::per_second(5).burst(0).burst_size(), 1);
        assert_eq!(
            Quota::per_minute(2).replenish_interval(),
            Duration::from_secs(30)
        );
        assert_eq!(
            Quota::per_period(Duration::from_secs(30)).replenish_interval(),
            Duration::from_secs(30)
        );
    }
}
