//! controller-runtime's per-controller reconcile metrics. The controller
//! names no metrics: the manager feeds these from the controller's
//! reconcile observer (see `manager/observers.rs`).

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::names::{self, counter_family};

/// The `cluster` label of a multicluster controller's series (the member
/// cluster it reconciled in); absent, not empty, on a single-cluster
/// controller's, so those series are controller-runtime's exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct ClusterLabel(pub(crate) Option<String>);

impl ClusterLabel {
    pub(crate) fn of(cluster: Option<&str>) -> Self {
        Self(cluster.map(str::to_owned))
    }
}

impl EncodeLabelSet for ClusterLabel {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        match &self.0 {
            Some(cluster) => [("cluster", cluster.as_str())].encode(encoder),
            None => Ok(()),
        }
    }
}

/// The `controller` label (and `cluster`, for a multicluster controller).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ControllerLabel {
    pub(crate) controller: String,
    #[prometheus(flatten)]
    pub(crate) cluster: ClusterLabel,
}

/// The `controller` and `result` labels (and `cluster`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub(crate) controller: String,
    pub(crate) result: &'static str,
    #[prometheus(flatten)]
    pub(crate) cluster: ClusterLabel,
}

/// The `result` label's values of `controller_runtime_reconcile_total`.
#[cfg(feature = "multicluster")]
const RESULTS: [&str; 4] = ["success", "requeue", "requeue_after", "error"];

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

    /// The metrics of controller `name` (in member cluster `cluster`, for
    /// a multicluster controller), every series created at zero (as
    /// controller-runtime does, so dashboards show the controller before
    /// its first reconcile).
    pub(crate) fn controller(
        &self,
        name: &str,
        workers: usize,
        cluster: Option<&str>,
    ) -> ControllerMetrics {
        let label = ControllerLabel {
            controller: name.to_owned(),
            cluster: ClusterLabel::of(cluster),
        };
        let result = |result| {
            self.total.get_or_create_owned(&ResultLabels {
                controller: name.to_owned(),
                result,
                cluster: ClusterLabel::of(cluster),
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

    /// Removes the series of controller `name` in member cluster `cluster`
    /// (a disengaged cluster's), so none of them is left behind.
    #[cfg(feature = "multicluster")]
    pub(crate) fn forget(&self, name: &str, cluster: &str) {
        let label = ControllerLabel {
            controller: name.to_owned(),
            cluster: ClusterLabel::of(Some(cluster)),
        };
        for result in RESULTS {
            self.total.remove(&ResultLabels {
                controller: name.to_owned(),
                result,
                cluster: label.cluster.clone(),
            });
        }
        for family in [
            &self.errors,
            &self.terminal_errors,
            &self.panics,
            &self.timeouts,
        ] {
            family.remove(&label);
        }
        self.time.remove(&label);
        self.active.remove(&label);
        self.max_concurrent.remove(&label);
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
