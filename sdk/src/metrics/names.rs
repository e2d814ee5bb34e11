//! The names of the metrics opkit exports: controller-runtime's, so its
//! dashboards and alerts work unchanged.
//!
//! Counters are registered without their `_total` suffix (OpenMetrics adds
//! it to the sample name): the scraped series are named as below.

/// `controller_runtime_reconcile_total{controller,result}`: reconciles by
/// result (`success`, `error`, `requeue`, `requeue_after`).
pub const RECONCILE_TOTAL: &str = "controller_runtime_reconcile_total";
/// `controller_runtime_reconcile_errors_total{controller}`: reconciles that
/// returned an error (terminal ones, panics and timeouts included).
pub const RECONCILE_ERRORS_TOTAL: &str = "controller_runtime_reconcile_errors_total";
/// `controller_runtime_terminal_reconcile_errors_total{controller}`:
/// reconciles that returned a terminal error (not requeued).
pub const TERMINAL_RECONCILE_ERRORS_TOTAL: &str =
    "controller_runtime_terminal_reconcile_errors_total";
/// `controller_runtime_reconcile_panics_total{controller}`: reconciles that
/// panicked (recovered, retried).
pub const RECONCILE_PANICS_TOTAL: &str = "controller_runtime_reconcile_panics_total";
/// `controller_runtime_reconcile_timeouts_total{controller}`: reconciles
/// cancelled by the controller's reconcile timeout.
pub const RECONCILE_TIMEOUTS_TOTAL: &str = "controller_runtime_reconcile_timeouts_total";
/// `controller_runtime_reconcile_time_seconds{controller}`: how long each
/// reconcile took (histogram with [`RECONCILE_TIME_BUCKETS`]).
pub const RECONCILE_TIME_SECONDS: &str = "controller_runtime_reconcile_time_seconds";
/// `controller_runtime_active_workers{controller}`: reconciles running now.
pub const ACTIVE_WORKERS: &str = "controller_runtime_active_workers";
/// `controller_runtime_max_concurrent_reconciles{controller}`: the
/// controller's worker count.
pub const MAX_CONCURRENT_RECONCILES: &str = "controller_runtime_max_concurrent_reconciles";
/// `leader_election_master_status{name}`: 1 while this replica holds the
/// Lease `name`, 0 otherwise.
pub const LEADER_ELECTION_MASTER_STATUS: &str = "leader_election_master_status";

/// `opkit_cache_undecodable_objects{kind}`: objects the informers hold
/// whose current version does not deserialize into the Rust type (kept as
/// metadata; see [`crate::cache::undecodable`]). `kind` is `apiVersion/kind`.
pub const CACHE_UNDECODABLE_OBJECTS: &str = "opkit_cache_undecodable_objects";

/// `process_cpu_seconds_total`: user and system CPU time of the process.
pub const PROCESS_CPU_SECONDS_TOTAL: &str = "process_cpu_seconds_total";
/// `process_resident_memory_bytes`: resident set size.
pub const PROCESS_RESIDENT_MEMORY_BYTES: &str = "process_resident_memory_bytes";
/// `process_virtual_memory_bytes`: virtual memory size.
pub const PROCESS_VIRTUAL_MEMORY_BYTES: &str = "process_virtual_memory_bytes";
/// `process_open_fds`: open file descriptors.
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
/// `process_max_fds`: the soft limit on open file descriptors.
pub const PROCESS_MAX_FDS: &str = "process_max_fds";
/// `process_start_time_seconds`: when the process started (Unix time).
pub const PROCESS_START_TIME_SECONDS: &str = "process_start_time_seconds";
/// `rest_client_requests_total{code,method,host}`: requests of the
/// manager's client to the API server, by status code (`<error>` when no
/// response came), HTTP method and host.
pub const REST_CLIENT_REQUESTS_TOTAL: &str = "rest_client_requests_total";
/// `rest_client_request_duration_seconds{verb,host}`: how long until the
/// response headers arrived (histogram with
/// [`REST_CLIENT_REQUEST_DURATION_BUCKETS`]).
pub const REST_CLIENT_REQUEST_DURATION_SECONDS: &str = "rest_client_request_duration_seconds";

/// The buckets of [`REST_CLIENT_REQUEST_DURATION_SECONDS`], in seconds (client-go's).
pub const REST_CLIENT_REQUEST_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

pub use crate::workqueue::metrics::{
    ADDS_TOTAL as WORKQUEUE_ADDS_TOTAL, DEPTH as WORKQUEUE_DEPTH,
    LONGEST_RUNNING_PROCESSOR_SECONDS as WORKQUEUE_LONGEST_RUNNING_PROCESSOR_SECONDS,
    QUEUE_DURATION_SECONDS as WORKQUEUE_QUEUE_DURATION_SECONDS,
    RETRIES_TOTAL as WORKQUEUE_RETRIES_TOTAL,
    UNFINISHED_WORK_SECONDS as WORKQUEUE_UNFINISHED_WORK_SECONDS,
    WORK_DURATION_SECONDS as WORKQUEUE_WORK_DURATION_SECONDS,
};

/// The buckets of [`RECONCILE_TIME_SECONDS`], in seconds (controller-runtime's).
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The buckets of the workqueue duration histograms, in seconds
/// (controller-runtime's: 12 powers of ten from 1 ns to 1000 s).
pub const WORKQUEUE_DURATION_BUCKETS: [f64; 12] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
];

/// The registered name of a counter: without `_total`, which the
/// OpenMetrics encoder appends to the sample.
pub(crate) fn counter_family(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}
