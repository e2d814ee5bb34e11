//! controller-runtime's per-controller reconcile metrics, fed by each
//! controller's reconcile observer.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::names::{self, counter_family};
use crate::controller::{ReconcileObserver, ReconcileResult};

/// The `controller` label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ControllerLabel {
    pub(crate) controller: String,
}

/// The `controller` and `result` labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub(crate) controller: String,
    pub(crate) result: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(names::RECONCILE_TIME_BUCKETS)
}

/// Every controller's reconcile metrics (one family per metric name).
#[derive(Debug, Clone)]
pub(crate) struct ControllerFamilies {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabel, Counter>,
    terminal_errors: Family<ControllerLabel, Counter>,
    panics: Family<ControllerLabel, Counter>,
    timeouts: Family<ControllerLabel, Counter>,
    time: HistogramFamily<ControllerLabel>,
    active: Family<ControllerLabel, Gauge>,
    max_concurrent: Family<ControllerLabel, Gauge>,
}

impl ControllerFamilies {
    /// The families, registered on `registry`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self {
            total: Family::default(),
            errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            timeouts: Family::default(),
            time: Family::new_with_constructor(reconcile_time_histogram),
            active: Family::default(),
            max_concurrent: Family::default(),
        };
        registry.register(
            counter_family(names::RECONCILE_TOTAL),
            "Total number of reconciliations per controller",
            families.total.clone(),
        );
        registry.register(
            counter_family(names::RECONCILE_ERRORS_TOTAL),
            "Total number of reconciliation errors per controller",
            families.errors.clone(),
        );
        registry.register(
            counter_family(names::TERMINAL_RECONCILE_ERRORS_TOTAL),
            "Total number of terminal reconciliation errors per controller",
            families.terminal_errors.clone(),
        );
        registry.register(
            counter_family(names::RECONCILE_PANICS_TOTAL),
            "Total number of reconciliation panics per controller",
            families.panics.clone(),
        );
        registry.register(
            counter_family(names::RECONCILE_TIMEOUTS_TOTAL),
            "Total number of reconciliation timeouts per controller",
            families.timeouts.clone(),
        );
        registry.register(
            names::RECONCILE_TIME_SECONDS,
            "Length of time per reconciliation per controller",
            families.time.clone(),
        );
        registry.register(
            names::ACTIVE_WORKERS,
            "Number of currently used workers per controller",
            families.active.clone(),
        );
        registry.register(
            names::MAX_CONCURRENT_RECONCILES,
            "Maximum number of concurrent reconciles per controller",
            families.max_concurrent.clone(),
        );
        families
    }

    /// The metrics of controller `name`, every series created at zero (as
    /// controller-runtime does, so dashboards show the controller before
    /// its first reconcile).
    pub(crate) fn controller(&self, name: &str, workers: usize) -> ControllerMetrics {
        let label = ControllerLabel {
            controller: name.to_owned(),
        };
        let result = |result| {
            self.total.get_or_create_owned(&ResultLabels {
                controller: name.to_owned(),
                result,
            })
        };
        let metrics = ControllerMetrics {
            success: result(ReconcileResult::Success.label()),
            requeue: result(ReconcileResult::Requeue.label()),
            requeue_after: result(ReconcileResult::RequeueAfter.label()),
            error: result(ReconcileResult::Error.label()),
            errors: self.errors.get_or_create_owned(&label),
            terminal_errors: self.terminal_errors.get_or_create_owned(&label),
            panics: self.panics.get_or_create_owned(&label),
            timeouts: self.timeouts.get_or_create_owned(&label),
            time: self.time.get_or_create_owned(&label),
            active: self.active.get_or_create_owned(&label),
        };
        self.max_concurrent
            .get_or_create(&label)
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
        metrics.active.set(0);
        metrics
    }
}

/// The reconcile metrics of one controller: its [`ReconcileObserver`].
#[derive(Debug, Clone)]
pub(crate) struct ControllerMetrics {
    success: Counter,
    requeue: Counter,
    requeue_after: Counter,
    error: Counter,
    errors: Counter,
    terminal_errors: Counter,
    panics: Counter,
    timeouts: Counter,
    time: Histogram,
    active: Gauge,
}

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
