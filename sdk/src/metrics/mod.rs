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
//! A [multicluster](crate::controller::Controller::multicluster)
//! controller's reconcile and workqueue series (feature `multicluster`)
//! carry one more label, `cluster`, the member cluster they count in (each
//! member has its own queue and workers); they are made when the cluster
//! is engaged and removed when it is disengaged. A single-cluster
//! controller's series have no `cluster` label.
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
mod registry;
mod rest_client;
mod workqueue;

pub(crate) use controller::ControllerMetrics;
pub use error::MetricsError;
pub use registry::{CONTENT_TYPE, Metrics};

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
