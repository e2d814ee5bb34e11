//! Jittered exponential backoff with reset, as client-go's reflector uses:
//! 800 ms doubling to a 30 s cap, each delay stretched by a random factor in
//! `[1, 2)`, and back to 800 ms once two minutes pass between two failures.
//!
//! ```
//! use std::time::Duration;
//! use opkit::cache::BackoffConfig;
//!
//! let cfg = BackoffConfig::default();
//! assert_eq!(cfg.initial, Duration::from_millis(800));
//! assert_eq!(cfg.max, Duration::from_secs(30));
//! assert_eq!(cfg.reset_after, Duration::from_secs(120));
//! ```

use std::time::Duration;

use tokio::time::Instant;

/// Parameters of the reflector's backoff.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay (800 ms).
    pub initial: Duration,
    /// Largest base delay (30 s); jitter may stretch it up to twice that.
    pub max: Duration,
    /// Growth factor per failure (2.0).
    pub factor: f64,
    /// Each delay is `d + rand[0,1) * jitter * d` (jitter 1.0).
    pub jitter: f64,
    /// After this long without a delay being asked for, start again from
    /// `initial` (2 min).
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// The backoff state.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    cfg: BackoffConfig,
    current: Duration,
    last: Option<Instant>,
    attempt: u32,
}

impl Backoff {
    pub(crate) fn new(cfg: BackoffConfig) -> Self {
        Self {
            cfg,
            current: cfg.initial,
            last: None,
            attempt: 0,
        }
    }

    /// How many delays were asked for since the last reset: the retry
    /// number of the delay [`next_delay`](Self::next_delay) last returned.
    pub(crate) fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The next delay (client-go's `DelayWithReset` + `Step`).
    pub(crate) fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if let Some(last) = self.last
            && now.duration_since(last) >= self.cfg.reset_after
        {
            self.current = self.cfg.initial;
            self.attempt = 0;
        }
        self.last = Some(now);
        self.attempt = self.attempt.saturating_add(1);
        let base = self.current;
        let grown = base.mul_f64(self.cfg.factor.max(1.0));
        self.current = grown.min(self.cfg.max);
        if self.cfg.jitter > 0.0 {
            base + base.mul_f64(fastrand::f64() * self.cfg.jitter)
        } else {
            base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn grows_caps_and_resets() {
        let mut b = Backoff::new(BackoffConfig::default());
        let mut bases = vec![];
        for _ in 0..8 {
            let d = b.next_delay();
            bases.push(d);
        }
        // each delay is within [base, 2*base)
        let expected = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0];
        for (d, e) in bases.iter().zip(expected) {
            let e = Duration::from_secs_f64(e);
            assert!(*d >= e && *d < e * 2, "{d:?} not in [{e:?}, {:?})", e * 2);
        }
        assert_eq!(b.attempt(), 8);
        // two minutes of health resets to 800ms
        tokio::time::advance(Duration::from_secs(121)).await;
        let d = b.next_delay();
        assert!(d >= Duration::from_millis(800) && d < Duration::from_millis(1600));
        assert_eq!(b.attempt(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn no_jitter_is_exact() {
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        });
        assert_eq!(b.next_delay(), Duration::from_millis(800));
        assert_eq!(b.next_delay(), Duration::from_millis(1600));
    }
}
