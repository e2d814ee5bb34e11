//! controller-runtime's per-controller reconcile metrics. The controller
//! names no metrics: the manager feeds these from the controller's
//! reconcile observer (see `manager/observers.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::names::{self, counter_family};

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
            success: result("success"),
            requeue: result("requeue"),
            requeue_after: result("requeue_after"),
            error: result("error"),
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

/// The reconcile metrics of one controller: the `result` label's four
/// series of `controller_runtime_reconcile_total` (every kind of failure
/// counts as `error`), the error counters, the time histogram and the
/// active workers.
#[derive(Debug, Clone)]
pub(crate) struct ControllerMetrics {
    pub(crate) success: Counter,
    pub(crate) requeue: Counter,
    pub(crate) requeue_after: Counter,
    pub(crate) error: Counter,
    pub(crate) errors: Counter,
    pub(crate) terminal_errors: Counter,
    pub(crate) panics: Counter,
    pub(crate) timeouts: Counter,
    pub(crate) time: Histogram,
    pub(crate) active: Gauge,
}
