//! Queue metrics through a small provider trait (crate-internal): the
//! workqueue's observer. It names no metrics registry; the Prometheus one
//! implements the trait from above (users pass their registry to
//! [`WorkQueueBuilder::metrics`](super::WorkQueueBuilder::metrics)).
//!
//! The shape follows client-go's `workqueue.MetricsProvider`: the queue asks the
//! provider once, at build time, for one metric of each kind and then only calls
//! `inc`/`dec`/`set`/`observe` on them. A provider implementation registers each
//! metric under the name given by the constants below (controller-runtime's
//! names, so existing dashboards work) with the label `name` set to the
//! queue's name.
//!
//! Metrics cost nothing when unused: a queue without a provider, with a no-op
//! one, or without a name (as in client-go) keeps no timestamps and makes no
//! calls on its hot path.

use std::fmt;

use tokio::time::Instant;

/// `workqueue_depth`: current number of items waiting in the queue (gauge).
pub const DEPTH: &str = "workqueue_depth";
/// `workqueue_adds_total`: total number of adds handled by the queue (counter).
pub const ADDS_TOTAL: &str = "workqueue_adds_total";
/// `workqueue_queue_duration_seconds`: how long an item waits before it is handed out (histogram).
pub const QUEUE_DURATION_SECONDS: &str = "workqueue_queue_duration_seconds";
/// `workqueue_work_duration_seconds`: how long processing an item takes (histogram).
pub const WORK_DURATION_SECONDS: &str = "workqueue_work_duration_seconds";
/// `workqueue_unfinished_work_seconds`: seconds of work in progress not yet observed by
/// `work_duration` (gauge); large values indicate stuck workers.
pub const UNFINISHED_WORK_SECONDS: &str = "workqueue_unfinished_work_seconds";
/// `workqueue_longest_running_processor_seconds`: how long the longest-running item has
/// been processed (gauge).
pub const LONGEST_RUNNING_PROCESSOR_SECONDS: &str = "workqueue_longest_running_processor_seconds";
/// `workqueue_retries_total`: total number of delayed and rate-limited adds (counter).
pub const RETRIES_TOTAL: &str = "workqueue_retries_total";

/// A gauge that goes up and down by one.
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge that is set to a value.
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A monotonically increasing counter.
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A histogram (or summary) of observed values, in seconds for durations.
pub trait HistogramMetric: Send + Sync {
    /// Records one observation.
    fn observe(&self, value: f64);
}

/// Creates the metrics of a named queue.
///
/// Each method is called once per queue, when the queue is built, with the
/// queue's name; the returned metric should carry that name as the
/// `name` label of the metric family named in its doc.
///
/// ```ignore
/// use std::sync::atomic::{AtomicI64, Ordering};
/// use std::sync::Arc;
/// use crate::workqueue::metrics::*;
/// use opkit::workqueue::WorkQueue;
///
/// /// Counts the depth only; everything else is discarded.
/// struct DepthOnly(Arc<AtomicI64>);
/// struct Depth(Arc<AtomicI64>);
/// struct Nothing;
/// impl GaugeMetric for Depth {
///     fn inc(&self) { self.0.fetch_add(1, Ordering::Relaxed); }
///     fn dec(&self) { self.0.fetch_sub(1, Ordering::Relaxed); }
/// }
/// impl CounterMetric for Nothing { fn inc(&self) {} }
/// impl HistogramMetric for Nothing { fn observe(&self, _: f64) {} }
/// impl SettableGaugeMetric for Nothing { fn set(&self, _: f64) {} }
/// impl MetricsProvider for DepthOnly {
///     fn new_depth_metric(&self, _name: &str) -> Box<dyn GaugeMetric> { Box::new(Depth(self.0.clone())) }
///     fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> { Box::new(Nothing) }
///     fn new_queue_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> { Box::new(Nothing) }
///     fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> { Box::new(Nothing) }
///     fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> { Box::new(Nothing) }
///     fn new_longest_running_processor_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> { Box::new(Nothing) }
///     fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> { Box::new(Nothing) }
/// }
///
/// let depth = Arc::new(AtomicI64::new(0));
/// let queue: WorkQueue<u32> = WorkQueue::builder()
///     .name("example")
///     .metrics_provider(Arc::new(DepthOnly(depth.clone())))
///     .build();
/// queue.add(1);
/// queue.add(2);
/// queue.add(1); // deduplicated
/// assert_eq!(depth.load(Ordering::Relaxed), 2);
/// ```
pub trait MetricsProvider: Send + Sync {
    /// [`DEPTH`].
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric>;
    /// [`ADDS_TOTAL`].
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric>;
    /// [`QUEUE_DURATION_SECONDS`].
    fn new_queue_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric>;
    /// [`WORK_DURATION_SECONDS`].
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric>;
    /// [`UNFINISHED_WORK_SECONDS`].
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric>;
    /// [`LONGEST_RUNNING_PROCESSOR_SECONDS`].
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric>;
    /// [`RETRIES_TOTAL`].
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric>;

    /// `true` if every metric this provider makes discards its input; the
    /// queue then skips metrics entirely (no timestamps, no calls).
    fn is_noop(&self) -> bool {
        false
    }
}

/// A provider whose metrics discard everything. Queues built with it (or
/// without any provider) do no metrics work at all.
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NoopMetricsProvider;

#[cfg(test)]
struct Noop;

#[cfg(test)]
impl GaugeMetric for Noop {
    fn inc(&self) {}
    fn dec(&self) {}
}
#[cfg(test)]
impl SettableGaugeMetric for Noop {
    fn set(&self, _: f64) {}
}
#[cfg(test)]
impl CounterMetric for Noop {
    fn inc(&self) {}
}
#[cfg(test)]
impl HistogramMetric for Noop {
    fn observe(&self, _: f64) {}
}

#[cfg(test)]
impl MetricsProvider for NoopMetricsProvider {
    fn new_depth_metric(&self, _: &str) -> Box<dyn GaugeMetric> {
        Box::new(Noop)
    }
    fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Noop)
    }
    fn new_queue_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Noop)
    }
    fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Noop)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(Noop)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(Noop)
    }
    fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Noop)
    }
    fn is_noop(&self) -> bool {
        true
    }
}

/// The metrics of one queue, made once from the provider.
pub(crate) struct QueueMetrics {
    pub(crate) depth: Box<dyn GaugeMetric>,
    pub(crate) adds: Box<dyn CounterMetric>,
    pub(crate) queue_duration: Box<dyn HistogramMetric>,
    pub(crate) work_duration: Box<dyn HistogramMetric>,
    pub(crate) unfinished_work: Box<dyn SettableGaugeMetric>,
    pub(crate) longest_running: Box<dyn SettableGaugeMetric>,
    pub(crate) retries: Box<dyn CounterMetric>,
}

impl fmt::Debug for QueueMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueMetrics").finish_non_exhaustive()
    }
}

impl QueueMetrics {
    /// `None` (no metrics work at all) for an unnamed queue or a no-op provider.
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Option<Self> {
        if name.is_empty() || provider.is_noop() {
            return None;
        }
        Some(Self {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            queue_duration: provider.new_queue_duration_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished_work: provider.new_unfinished_work_seconds_metric(name),
            longest_running: provider.new_longest_running_processor_seconds_metric(name),
            retries: provider.new_retries_metric(name),
        })
    }

    /// An item became dirty (waiting to be processed).
    pub(crate) fn added(&self) {
        self.adds.inc();
        self.depth.inc();
    }

    /// An item was handed to a worker.
    pub(crate) fn handed_out(&self, added_at: Option<Instant>, now: Instant) {
        self.depth.dec();
        if let Some(at) = added_at {
            self.queue_duration
                .observe(now.saturating_duration_since(at).as_secs_f64());
        }
    }

    /// A worker finished an item.
    pub(crate) fn finished(&self, started_at: Option<Instant>, now: Instant) {
        if let Some(at) = started_at {
            self.work_duration
                .observe(now.saturating_duration_since(at).as_secs_f64());
        }
    }
}

/// A recording provider for tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

    /// Everything the queue reported, shared with the test.
    #[derive(Default, Debug)]
    pub(crate) struct Recorded {
        pub(crate) names: Mutex<Vec<String>>,
        pub(crate) depth: AtomicI64,
        pub(crate) adds: AtomicU64,
        pub(crate) retries: AtomicU64,
        pub(crate) queue_durations: Mutex<Vec<f64>>,
        pub(crate) work_durations: Mutex<Vec<f64>>,
        pub(crate) unfinished: Mutex<f64>,
        pub(crate) longest: Mutex<f64>,
    }

    impl Recorded {
        pub(crate) fn depth(&self) -> i64 {
            self.depth.load(Ordering::SeqCst)
        }
        pub(crate) fn adds(&self) -> u64 {
            self.adds.load(Ordering::SeqCst)
        }
        pub(crate) fn retries(&self) -> u64 {
            self.retries.load(Ordering::SeqCst)
        }
    }

    #[derive(Clone, Default)]
    pub(crate) struct RecordingProvider(pub(crate) Arc<Recorded>);

    struct Metric(Arc<Recorded>, &'static str);

    impl GaugeMetric for Metric {
        fn inc(&self) {
            self.0.depth.fetch_add(1, Ordering::SeqCst);
        }
        fn dec(&self) {
            self.0.depth.fetch_sub(1, Ordering::SeqCst);
        }
    }
    impl CounterMetric for Metric {
        fn inc(&self) {
            match self.1 {
                ADDS_TOTAL => self.0.adds.fetch_add(1, Ordering::SeqCst),
                _ => self.0.retries.fetch_add(1, Ordering::SeqCst),
            };
        }
    }
    impl HistogramMetric for Metric {
        fn observe(&self, value: f64) {
            match self.1 {
                QUEUE_DURATION_SECONDS => self.0.queue_durations.lock().push(value),
                _ => self.0.work_durations.lock().push(value),
            }
        }
    }
    impl SettableGaugeMetric for Metric {
        fn set(&self, value: f64) {
            match self.1 {
                UNFINISHED_WORK_SECONDS => *self.0.unfinished.lock() = value,
                _ => *self.0.longest.lock() = value,
            }
        }
    }

    impl RecordingProvider {
        fn make(&self, name: &str, metric: &'static str) -> Box<Metric> {
            self.0.names.lock().push(format!("{metric}{{name={name}}}"));
            Box::new(Metric(self.0.clone(), metric))
        }
    }

    impl MetricsProvider for RecordingProvider {
        fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
            self.make(name, DEPTH)
        }
        fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
            self.make(name, ADDS_TOTAL)
        }
        fn new_queue_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
            self.make(name, QUEUE_DURATION_SECONDS)
        }
        fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
            self.make(name, WORK_DURATION_SECONDS)
        }
        fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
            self.make(name, UNFINISHED_WORK_SECONDS)
        }
        fn new_longest_running_processor_seconds_metric(
            &self,
            name: &str,
        ) -> Box<dyn SettableGaugeMetric> {
            self.make(name, LONGEST_RUNNING_PROCESSOR_SECONDS)
        }
        fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
            self.make(name, RETRIES_TOTAL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::RecordingProvider;
    use super::*;

    #[test]
    fn unnamed_or_noop_means_no_metrics() {
        assert!(QueueMetrics::new(&NoopMetricsProvider, "q").is_none());
        assert!(QueueMetrics::new(&RecordingProvider::default(), "").is_none());
        assert!(QueueMetrics::new(&RecordingProvider::default(), "q").is_some());
    }

    #[test]
    fn controller_runtime_names() {
        let provider = RecordingProvider::default();
        let _m = QueueMetrics::new(&provider, "pods");
        let names = provider.0.names.lock().clone();
        assert_eq!(
            names,
            [
                "workqueue_depth{name=pods}",
                "workqueue_adds_total{name=pods}",
                "workqueue_queue_duration_seconds{name=pods}",
                "workqueue_work_duration_seconds{name=pods}",
                "workqueue_unfinished_work_seconds{name=pods}",
                "workqueue_longest_running_processor_seconds{name=pods}",
                "workqueue_retries_total{name=pods}",
            ]
        );
    }
}
