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
pub(crate) trait ControllerObservers: Send + Sync {
    /// The reconcile observer of controller `name`, which runs up to
    /// `workers` reconciles at once; its series exist from this call on.
    fn reconcile_observer(&self, name: &str, workers: usize) -> Arc<dyn ReconcileObserver>;
    /// The metrics provider of the controller's queue (named after the
    /// controller).
    fn queue_metrics(&self) -> Arc<dyn MetricsProvider>;
}
