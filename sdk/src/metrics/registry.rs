//! [`Metrics`]: the registry, with controller-runtime's families
//! registered, and what hands them to the pieces that report into them.

use std::hash::Hash;
use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::registry::{Metric, Registry};

use super::cache;
use super::controller::{ControllerFamilies, ControllerMetrics};
use super::error::MetricsError;
use super::leader::LeaderFamily;
use super::process::ProcessCollector;
use super::rest_client::{RestClientFamilies, RestClientLayer};
use super::workqueue::WorkqueueMetrics;
use crate::workqueue::WorkQueueBuilder;

/// The `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A Prometheus registry holding controller-runtime's metric families, and
/// any an operator adds. Cheap to clone; clones share the registry.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: RwLock<Registry>,
    controllers: ControllerFamilies,
    workqueue: WorkqueueMetrics,
    leader: LeaderFamily,
    rest_client: RestClientFamilies,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with controller-runtime's controller, workqueue,
    /// leader-election and REST client families (empty until something
    /// reports), and the `process_*` collector.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let controllers = ControllerFamilies::register(&mut registry);
        let workqueue = WorkqueueMetrics::register(&mut registry);
        let leader = LeaderFamily::register(&mut registry);
        let rest_client = RestClientFamilies::register(&mut registry);
        cache::register(&mut registry);
        registry.register_collector(Box::new(ProcessCollector));
        Self {
            inner: Arc::new(Inner {
                registry: RwLock::new(registry),
                controllers,
                workqueue,
                leader,
                rest_client,
            }),
        }
    }

    /// The tower layer recording `rest_client_*` for a client of the API
    /// server at `host` (`host:port`).
    pub(crate) fn rest_client_layer(&self, host: String) -> RestClientLayer {
        RestClientLayer::new(self.inner.rest_client.clone(), host)
    }

    /// Adds an operator's own metric. `name` follows Prometheus's rules; a
    /// counter's name is given without `_total` (the encoder appends it).
    ///
    /// ```
    /// use opkit::metrics::Metrics;
    /// use prometheus_client::metrics::gauge::Gauge;
    ///
    /// let metrics = Metrics::new();
    /// let pools: Gauge = Gauge::default();
    /// metrics.register("memcached_pools", "Memcached pools managed", pools.clone());
    /// pools.set(3);
    /// assert!(metrics.encode().unwrap().contains("memcached_pools 3"));
    /// ```
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        self.inner.registry.write().register(name, help, metric);
    }

    /// Adds a collector, asked for its metrics on every scrape.
    pub fn register_collector(&self, collector: Box<dyn Collector>) {
        self.inner.registry.write().register_collector(collector);
    }

    /// Every metric in the OpenMetrics text format ([`CONTENT_TYPE`]),
    /// ending with `# EOF`.
    pub fn encode(&self) -> Result<String, MetricsError> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.inner.registry.read())
            .map_err(|_| MetricsError::Encode)?;
        Ok(text)
    }

    /// The workqueue metrics, for every queue built with them (labelled
    /// with `cluster`, a member cluster's, if given).
    pub(crate) fn workqueue(&self, cluster: Option<&str>) -> WorkqueueMetrics {
        match cluster {
            None => self.inner.workqueue.clone(),
            Some(cluster) => self.inner.workqueue.in_cluster(cluster),
        }
    }

    /// The reconcile metrics of controller `name` running `workers`
    /// workers (in member cluster `cluster`, if given), its series created
    /// at zero.
    pub(crate) fn controller(
        &self,
        name: &str,
        workers: usize,
        cluster: Option<&str>,
    ) -> ControllerMetrics {
        self.inner.controllers.controller(name, workers, cluster)
    }

    /// Removes every series of controller `name` in member cluster
    /// `cluster`: its reconcile metrics and its queue's.
    #[cfg(feature = "multicluster")]
    pub(crate) fn forget_cluster(&self, name: &str, cluster: &str) {
        self.inner.controllers.forget(name, cluster);
        self.inner.workqueue.forget(name, cluster);
    }

    /// Sets `leader_election_master_status{name=lease}`.
    pub(crate) fn set_leader(&self, lease: &str, leading: bool) {
        self.inner.leader.set(lease, leading);
    }
}

// The workqueue's metrics are handed to it from here: the workqueue sits
// below the metrics and names no registry (its observer is the
// crate-internal `MetricsProvider` trait, implemented in `workqueue.rs`).
impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueueBuilder<T> {
    /// Reports the queue's metrics (controller-runtime's `workqueue_*`
    /// names, the queue's name as the `name` label) to `metrics`, e.g. a
    /// [`Manager`](crate::manager::Manager)'s (controllers added to a
    /// manager get this already). The queue must be named.
    ///
    /// ```
    /// use opkit::metrics::Metrics;
    /// use opkit::workqueue::WorkQueue;
    ///
    /// let metrics = Metrics::new();
    /// let queue: WorkQueue<String> = WorkQueue::builder()
    ///     .name("backups")
    ///     .metrics(&metrics)
    ///     .build();
    /// queue.add("nightly".to_owned());
    /// let text = metrics.encode().unwrap();
    /// assert!(text.contains(r#"workqueue_depth{name="backups",controller="backups"} 1"#));
    /// ```
    pub fn metrics(self, metrics: &Metrics) -> Self {
        self.metrics_provider(Arc::new(metrics.workqueue(None)))
    }
}
