//! The workqueue metrics: a [`MetricsProvider`] backed by prometheus-client
//! families with controller-runtime's names, labels and buckets.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::controller::ClusterLabel;
use super::names::{self, counter_family};
use crate::workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};

/// The `name` label (the queue's, which is its controller's name) and, as
/// controller-runtime also writes it, `controller` with the same value;
/// `cluster` for a multicluster controller's queue in a member cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct QueueLabels {
    name: String,
    controller: String,
    #[prometheus(flatten)]
    cluster: ClusterLabel,
}

type HistogramFamily = Family<QueueLabels, Histogram, fn() -> Histogram>;
type SecondsGauge = Gauge<f64, AtomicU64>;

fn duration_histogram() -> Histogram {
    Histogram::new(names::WORKQUEUE_DURATION_BUCKETS)
}

/// Workqueue metrics for every queue built with it (see
/// [`WorkQueueBuilder::metrics`](crate::workqueue::WorkQueueBuilder::metrics)),
/// labelled with one member cluster if made by [`in_cluster`](Self::in_cluster).
#[derive(Debug, Clone)]
pub(crate) struct WorkqueueMetrics {
    cluster: ClusterLabel,
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished_work: Family<QueueLabels, SecondsGauge>,
    longest_running: Family<QueueLabels, SecondsGauge>,
    retries: Family<QueueLabels, Counter>,
}

impl WorkqueueMetrics {
    /// The families, registered on `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            cluster: ClusterLabel::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
        };
        registry.register(
            names::WORKQUEUE_DEPTH,
            "Current depth of workqueue",
            metrics.depth.clone(),
        );
        registry.register(
            counter_family(names::WORKQUEUE_ADDS_TOTAL),
            "Total number of adds handled by workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            names::WORKQUEUE_QUEUE_DURATION_SECONDS,
            "How long in seconds an item stays in workqueue before being requested",
            metrics.queue_duration.clone(),
        );
        registry.register(
            names::WORKQUEUE_WORK_DURATION_SECONDS,
            "How long in seconds processing an item from workqueue takes",
            metrics.work_duration.clone(),
        );
        registry.register(
            names::WORKQUEUE_UNFINISHED_WORK_SECONDS,
            "How many seconds of work has been done that is in progress and hasn't been \
             observed by work_duration. Large values indicate stuck threads. One can deduce \
             the number of stuck threads by observing the rate at which this increases.",
            metrics.unfinished_work.clone(),
        );
        registry.register(
            names::WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS,
            "How many seconds has the longest running processor for workqueue been running",
            metrics.longest_running.clone(),
        );
        registry.register(
            counter_family(names::WORKQUEUE_RETRIES_TOTAL),
            "Total number of retries handled by workqueue",
            metrics.retries.clone(),
        );
        metrics
    }

    /// The same families, for the queues of member cluster `cluster`
    /// (their series carry its `cluster` label).
    pub(crate) fn in_cluster(&self, cluster: &str) -> Self {
        Self {
            cluster: ClusterLabel::of(Some(cluster)),
            ..self.clone()
        }
    }

    /// The labels of queue `name`'s series.
    fn labels(&self, name: &str) -> QueueLabels {
        QueueLabels {
            name: name.to_owned(),
            controller: name.to_owned(),
            cluster: self.cluster.clone(),
        }
    }

    /// Removes the series of queue `name` in member cluster `cluster` (a
    /// disengaged cluster's): the items its dropped queue left waiting no
    /// longer count in `workqueue_depth`.
    #[cfg(feature = "multicluster")]
    pub(crate) fn forget(&self, name: &str, cluster: &str) {
        let labels = self.in_cluster(cluster).labels(name);
        self.depth.remove(&labels);
        self.adds.remove(&labels);
        self.queue_duration.remove(&labels);
        self.work_duration.remove(&labels);
        self.unfinished_work.remove(&labels);
        self.longest_running.remove(&labels);
        self.retries.remove(&labels);
    }
}

struct DepthGauge(Gauge);

impl GaugeMetric for DepthGauge {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}

struct Seconds(SecondsGauge);

impl SettableGaugeMetric for Seconds {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}

struct Count(Counter);

impl CounterMetric for Count {
    fn inc(&self) {
        self.0.inc();
    }
}

struct Durations(Histogram);

impl HistogramMetric for Durations {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

impl MetricsProvider for WorkqueueMetrics {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        let gauge = self.depth.get_or_create_owned(&self.labels(name));
        Box::new(DepthGauge(gauge))
    }

    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(Count(self.adds.get_or_create_owned(&self.labels(name))))
    }

    fn new_queue_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        let histogram = self.queue_duration.get_or_create_owned(&self.labels(name));
        Box::new(Durations(histogram))
    }

    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        let histogram = self.work_duration.get_or_create_owned(&self.labels(name));
        Box::new(Durations(histogram))
    }

    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        let gauge = self.unfinished_work.get_or_create_owned(&self.labels(name));
        Box::new(Seconds(gauge))
    }

    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        let gauge = self.longest_running.get_or_create_owned(&self.labels(name));
        Box::new(Seconds(gauge))
    }

    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(Count(self.retries.get_or_create_owned(&self.labels(name))))
    }
}
