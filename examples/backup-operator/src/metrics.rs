//! The operator's own metrics, served beside controller-runtime's on the
//! manager's `/metrics`.

use opkit::metrics::Metrics;
use prometheus_client::metrics::counter::Counter;

// ANCHOR: metrics
/// The counters the Backup reconciler keeps. Cheap to clone; clones
/// share the counters.
#[derive(Debug, Clone, Default)]
pub struct BackupMetrics {
    /// Jobs created: `backup_jobs_created_total`.
    pub jobs_created: Counter,
    /// Finished Jobs deleted beyond a history limit:
    /// `backup_jobs_deleted_total`.
    pub jobs_deleted: Counter,
}

impl BackupMetrics {
    /// New counters, registered in `metrics` (the manager's:
    /// `manager.metrics()`).
    pub fn register(metrics: &Metrics) -> Self {
        let this = Self::default();
        metrics.register(
            "backup_jobs_created",
            "Backup Jobs created",
            this.jobs_created.clone(),
        );
        metrics.register(
            "backup_jobs_deleted",
            "Finished backup Jobs deleted beyond a history limit",
            this.jobs_deleted.clone(),
        );
        this
    }
}
// ANCHOR_END: metrics
