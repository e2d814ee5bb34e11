//! Prometheus metrics with controller-runtime's names, so existing
//! dashboards and alerts work unchanged.
//!
//! ```
//! use opkit::metrics::Metrics;
//! use prometheus_client::metrics::counter::Counter;
//!
//! let metrics = Metrics::new();
//!
//! // An operator's own metrics go into the same registry (and so onto the
//! // manager's `/metrics`).
//! let backups: Counter = Counter::default();
//! metrics.register("memcached_backups", "Backups taken", backups.clone());
//! backups.inc();
//!
//! let text = metrics.encode()?;
//! assert!(text.contains("memcached_backups_total 1"));
//! assert!(text.ends_with("# EOF\n"));
//! # Ok::<(), opkit::metrics::MetricsError>(())
//! ```
//!
//! A [`Manager`](crate::manager::Manager) makes one `Metrics`, instruments
//! every controller it runs with it, and serves it on `/metrics`
//! ([`Manager::metrics`](crate::manager::Manager::metrics) returns it, to
//! register more). The text is the OpenMetrics format
//! ([`CONTENT_TYPE`]), which Prometheus scrapes natively.
//!
//! # What is exported
//!
//! | series | type | labels |
//! |---|---|---|
//! | `controller_runtime_reconcile_total` | counter | `controller`, `result` = `success` \| `error` \| `requeue` \| `requeue_after` |
//! | `controller_runtime_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_terminal_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_reconcile_panics_total` | counter | `controller` |
//! | `controller_runtime_reconcile_timeouts_total` | counter | `controller` |
//! | `controller_runtime_reconcile_time_seconds` | histogram ([`names::RECONCILE_TIME_BUCKETS`]) | `controller` |
//! | `controller_runtime_active_workers` | gauge | `controller` |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | `controller` |
//! | `workqueue_depth` | gauge | `name`, `controller` |
//! | `workqueue_adds_total` | counter | `name`, `controller` |
//! | `workqueue_queue_duration_seconds` | histogram ([`names::WORKQUEUE_DURATION_BUCKETS`]) | `name`, `controller` |
//! | `workqueue_work_duration_seconds` | histogram | `name`, `controller` |
//! | `workqueue_unfinished_work_seconds` | gauge | `name`, `controller` |
//! | `workqueue_longest_running_processor_seconds` | gauge | `name`, `controller` |
//! | `workqueue_retries_total` | counter | `name`, `controller` |
//! | `leader_election_master_status` | gauge (1 leading, 0 not) | `name` (the Lease) |
//! | `opkit_cache_undecodable_objects` | gauge (process-wide) | `kind` (`apiVersion/kind`) |
//! | `process_cpu_seconds_total` | counter | |
//! | `process_resident_memory_bytes`, `process_virtual_memory_bytes` | gauge | |
//! | `process_open_fds`, `process_max_fds` | gauge | |
//! | `process_start_time_seconds` | gauge | |
//! | `rest_client_requests_total` | counter | `code`, `method`, `host` |
//! | `rest_client_request_duration_seconds` | histogram ([`names::REST_CLIENT_REQUEST_DURATION_BUCKETS`]) | `verb`, `host` |
//!
//! The `process_*` series are read from `/proc/self` at each scrape (Linux;
//! elsewhere they are absent). The `rest_client_*` series count the requests
//! of the client a [`Manager`](crate::manager::Manager) builds from a
//! kubeconfig or a `kube::Config` (a client handed to
//! `ManagerBuilder::client` is used as is, without them); the duration runs
//! until the response headers arrive (for a watch: until it is open).
//!
//! The workqueue's `name` (and `controller`) label is the controller's name.
//! A controller's series exist at zero from the moment it is added to a
//! manager, as in controller-runtime. An error counts once under
//! `result="error"` and in `controller_runtime_reconcile_errors_total`,
//! whether it was retryable, terminal, a panic or a timeout; the last three
//! also count in their own counters.

pub(crate) mod cache;
mod controller;
mod error;
mod leader;
pub mod names;
mod process;
mod rest_client;
mod workqueue;

use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::registry::{Metric, Registry};

pub use error::MetricsError;
pub(crate) use workqueue::WorkqueueMetrics;

use crate::controller::ReconcileObserver;
use controller::ControllerFamilies;
use leader::LeaderFamily;
use process::ProcessCollector;
use rest_client::{RestClientFamilies, RestClientLayer};

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

    /// The workqueue metrics provider (what
    /// [`WorkQueueBuilder::metrics`](crate::workqueue::WorkQueueBuilder::metrics) uses).
    pub(crate) fn workqueue_provider(&self) -> WorkqueueMetrics {
        self.inner.workqueue.clone()
    }

    /// The reconcile observer of controller `name`, its series created at
    /// zero.
    pub(crate) fn controller_observer(
        &self,
        name: &str,
        workers: usize,
    ) -> Arc<dyn ReconcileObserver> {
        Arc::new(self.inner.controllers.controller(name, workers))
    }

    /// Sets `leader_election_master_status{name=lease}`.
    pub(crate) fn set_leader(&self, lease: &str, leading: bool) {
        self.inner.leader.set(lease, leading);
    }
}

#[cfg(test)]
mod tests;
