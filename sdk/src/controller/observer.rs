//! What a controller tells about its reconciles: the observer traits the
//! manager implements with its metrics. The controller names no metrics
//! registry; it is handed observers (see [`ControllerObservers`]).

use std::sync::Arc;

use crate::workqueue::metrics::MetricsProvider;

/// How one reconcile ended, as a [`ReconcileObserver`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ReconcileResult {
    /// `Ok(Action::done())`.
    Success,
    /// `Ok(Action::requeue_rate_limited())`.
    Requeue,
    /// `Ok(Action::requeue_after(..))`.
    RequeueAfter,
    /// A retryable `Err`.
    Error,
    /// A terminal `Err`.
    TerminalError,
    /// The reconcile panicked (retried like an error).
    Panic,
    /// The reconcile timeout cancelled it (retried like an error).
    Timeout,
}

/// Told about every reconcile of one controller (the manager's metrics).
pub(crate) trait ReconcileObserver: Send + Sync {
    /// A reconcile started: one more active worker.
    fn started(&self);
    /// A reconcile stopped running, whether it finished or was abandoned:
    /// one less active worker.
    fn stopped(&self);
    /// A reconcile ended with `result` after `elapsed` (not called for a
    /// reconcile abandoned at shutdown or when leadership was lost).
    fn finished(&self, result: ReconcileResult, elapsed: std::time::Duration);
}

/// Makes a controller's observers when it is prepared: the reconcile
/// observer of its workers and the metrics of its queue. The manager hands
/// every controller one (its Prometheus metrics); a controller without one
/// observes nothing.
///
/// A multicluster controller's instance in a member cluster is observed
/// with that `cluster` named (its series carry a `cluster` label); a
/// single-cluster controller's with none (its series are
/// controller-runtime's, unchanged).
pub(crate) trait ControllerObservers: Send + Sync {
    /// The reconcile observer of controller `name` (in member cluster
    /// `cluster`), which runs up to `workers` reconciles at once; its
    /// series exist from this call on.
    fn reconcile_observer(
        &self,
        name: &str,
        workers: usize,
        cluster: Option<&str>,
    ) -> Arc<dyn ReconcileObserver>;
    /// The metrics provider of the controller's queue (named after the
    /// controller; in member cluster `cluster`).
    fn queue_metrics(&self, cluster: Option<&str>) -> Arc<dyn MetricsProvider>;
    /// Drops what controller `name` reported in member cluster `cluster`
    /// (disengaged: its queue and workers are gone), so nothing of it
    /// lingers, such as the items its dropped queue left waiting.
    #[cfg(feature = "multicluster")]
    fn forget_cluster(&self, name: &str, cluster: &str);
}
