//! [`WorkQueueBuilder`]: configuration with sensible defaults.

use std::hash::Hash;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::metrics::{MetricsProvider, QueueMetrics};
use super::queue::{Inner, WorkQueue};
use super::quota::Quota;
use super::rate_limiter::{ExponentialFailureRateLimiter, RateLimiter};
use super::throttle::Throttle;

/// How often the unfinished-work gauges are refreshed by default (as client-go).
const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// Configures a [`WorkQueue`].
///
/// | setting | default |
/// |---|---|
/// | [`name`](Self::name) | empty: no metrics |
/// | [`rate_limiter`](Self::rate_limiter) | [`ExponentialFailureRateLimiter`], 5 ms doubling to 1000 s |
/// | [`throttle`](Self::throttle) | none |
/// | [`per_key_min_interval`](Self::per_key_min_interval) | none |
/// | [`metrics`](Self::metrics) | none (no cost) |
///
/// ```
/// use std::time::Duration;
/// use opkit::metrics::Metrics;
/// use opkit::workqueue::{FastSlowRateLimiter, Quota, WorkQueue};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue: WorkQueue<String> = WorkQueue::builder()
///     .name("memcached")
///     .rate_limiter(FastSlowRateLimiter::new(Duration::from_millis(10), Duration::from_secs(30), 5))
///     .throttle(Quota::per_second(10).burst(100)) // at most 10 items/s to the workers, bursts of 100
///     .per_key_min_interval(Duration::from_secs(1)) // one object at most once a second
///     .metrics(&Metrics::new())
///     .build();
/// assert_eq!(queue.name(), "memcached");
/// # }
/// ```
pub struct WorkQueueBuilder<T> {
    name: String,
    rate_limiter: Option<Box<dyn RateLimiter<T>>>,
    throttle: Option<governor::Quota>,
    per_key_min_interval: Option<Duration>,
    metrics: Option<Arc<dyn MetricsProvider>>,
    unfinished_work_update_period: Duration,
}

// The queue's constructors live here, beside the builder they use, so that
// the queue's file does not name its builder.
impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// A queue with the defaults: no name (so no metrics), exponential
    /// per-item backoff from 5 ms to 1000 s, no throttle.
    pub fn new() -> Self {
        WorkQueueBuilder::new().build()
    }

    /// Starts configuring a queue.
    pub fn builder() -> WorkQueueBuilder<T> {
        WorkQueueBuilder::new()
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Default for WorkQueueBuilder<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueueBuilder<T> {
    /// The defaults (see the table above).
    pub(crate) fn new() -> Self {
        Self {
            name: String::new(),
            rate_limiter: None,
            throttle: None,
            per_key_min_interval: None,
            metrics: None,
            unfinished_work_update_period: UNFINISHED_WORK_UPDATE_PERIOD,
        }
    }

    /// Names the queue: the `name` label of its metrics and the `queue` field
    /// of its logs. An unnamed queue reports no metrics (as in client-go).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The per-item rate limiter behind
    /// [`add_rate_limited`](WorkQueue::add_rate_limited).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Limits how many items the queue hands to workers, e.g.
    /// `Quota::per_second(10).burst(100)`. The limit applies to every item,
    /// whatever path it entered by: `add`, `add_after` or `add_rate_limited`.
    pub fn throttle(mut self, quota: Quota) -> Self {
        self.throttle = Some(quota.governor());
        self
    }

    /// Hands out one item at most once per `interval`: a hot-loop guard. An
    /// item that comes up sooner waits (still deduplicated) until its
    /// interval has passed, without holding up other items. Zero disables it.
    pub fn per_key_min_interval(mut self, interval: Duration) -> Self {
        self.per_key_min_interval = Some(interval).filter(|d| !d.is_zero());
        self
    }

    /// Reports metrics through `provider` (the queue must be named).
    pub(crate) fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.metrics = Some(provider);
        self
    }

    /// How often the unfinished-work gauges are refreshed (default 500 ms;
    /// zero: never).
    pub fn unfinished_work_update_period(mut self, period: Duration) -> Self {
        self.unfinished_work_update_period = period;
        self
    }

    /// Builds the queue. Call it inside a tokio runtime if the queue has
    /// metrics, so that the unfinished-work gauges are refreshed.
    pub fn build(self) -> WorkQueue<T> {
        let metrics = self
            .metrics
            .as_deref()
            .and_then(|provider| QueueMetrics::new(provider, &self.name));
        let has_metrics = metrics.is_some();
        let rate_limiter = self
            .rate_limiter
            .unwrap_or_else(|| Box::new(ExponentialFailureRateLimiter::default()));
        let throttle = Throttle::new(self.throttle, self.per_key_min_interval);
        let inner = Arc::new(Inner::new(self.name, rate_limiter, throttle, metrics));
        if has_metrics && !self.unfinished_work_update_period.is_zero() {
            spawn_unfinished_work_updater(
                Arc::downgrade(&inner),
                self.unfinished_work_update_period,
            );
        }
        WorkQueue::from_inner(inner)
    }
}

/// Refreshes the unfinished-work gauges until the queue is dropped or shut down.
fn spawn_unfinished_work_updater<T: Eq + Hash + Clone + Send + Sync + 'static>(
    queue: Weak<Inner<T>>,
    period: Duration,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::debug!(
            "workqueue built outside a tokio runtime: unfinished-work gauges are updated only \
             by update_unfinished_work_metrics"
        );
        return;
    };
    runtime.spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let Some(inner) = queue.upgrade() else {
                break;
            };
            if inner.state.lock().shutting_down {
                break;
            }
            inner.update_unfinished_work();
        }
    });
}
