//! The manager's observers: the controller's reconcile observer and its
//! queue's metrics, made from the manager's [`Metrics`]. The controller and
//! the workqueue define the observer traits and never name the metrics;
//! this file wires the two together, for every controller a
//! [`Manager`](super::Manager) runs and for one run on its own
//! ([`Controller::metrics`]).

use std::sync::Arc;
use std::time::Duration;

use crate::controller::{Controller, ControllerObservers, ReconcileObserver, ReconcileResult};
use crate::metrics::{ControllerMetrics, Metrics};
use crate::reconcile::Reconcile;
use crate::workqueue::metrics::MetricsProvider;

impl<R: Reconcile> Controller<R> {
    /// Reports the controller's reconciles (`controller_runtime_reconcile_*`)
    /// and its queue (`workqueue_*`) to `metrics`, with controller-runtime's
    /// names: what a [`Manager`](crate::manager::Manager) does for every
    /// controller added to it, for a controller run on its own.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
    /// # struct Settings;
    /// # impl Reconcile for Settings {
    /// #     type Object = ConfigMap;
    /// #     async fn reconcile(&self, _: Request, _: &Context<ConfigMap>) -> Result<Action, ReconcileError> { Ok(Action::done()) }
    /// # }
    /// # async fn run(cache: opkit::cache::SharedCache) -> Result<(), opkit::controller::ControllerError> {
    /// let metrics = opkit::metrics::Metrics::new();
    /// let controller = opkit::controller::Controller::new(Settings).metrics(&metrics);
    /// controller.run(&cache, std::future::pending()).await?;
    /// // serve `metrics.encode()` where Prometheus scrapes it
    /// # Ok(()) }
    /// ```
    pub fn metrics(self, metrics: &Metrics) -> Self {
        self.observed_by(Arc::new(metrics.clone()))
    }
}

impl ControllerObservers for Metrics {
    fn reconcile_observer(
        &self,
        name: &str,
        workers: usize,
        cluster: Option<&str>,
    ) -> Arc<dyn ReconcileObserver> {
        Arc::new(self.controller(name, workers, cluster))
    }

    fn queue_metrics(&self, cluster: Option<&str>) -> Arc<dyn MetricsProvider> {
        Arc::new(self.workqueue(cluster))
    }

    #[cfg(feature = "multicluster")]
    fn forget_cluster(&self, name: &str, cluster: &str) {
        Metrics::forget_cluster(self, name, cluster);
    }
}

/// controller-runtime's counting: every kind of failure counts once under
/// `result="error"` and in `controller_runtime_reconcile_errors_total`;
/// terminal errors, panics and timeouts also in their own counters.
impl ReconcileObserver for ControllerMetrics {
    fn started(&self) {
        self.active.inc();
    }

    fn stopped(&self) {
        self.active.dec();
    }

    fn finished(&self, result: ReconcileResult, elapsed: Duration) {
        let by_result = match result {
            ReconcileResult::Success => &self.success,
            ReconcileResult::Requeue => &self.requeue,
            ReconcileResult::RequeueAfter => &self.requeue_after,
            ReconcileResult::Error
            | ReconcileResult::TerminalError
            | ReconcileResult::Panic
            | ReconcileResult::Timeout => {
                self.errors.inc();
                &self.error
            }
        };
        by_result.inc();
        match result {
            ReconcileResult::TerminalError => {
                self.terminal_errors.inc();
            }
            ReconcileResult::Panic => {
                self.panics.inc();
            }
            ReconcileResult::Timeout => {
                self.timeouts.inc();
            }
            _ => {}
        }
        self.time.observe(elapsed.as_secs_f64());
    }
}
