//! The settings of a controller's run, set on the builder and read by
//! its workers.

use std::time::Duration;

/// How long running reconciles get to finish at shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShutdownBound {
    /// The controller's own bound (it runs on its own).
    Own(Duration),
    /// No bound of its own: the controller drains until its runner stops
    /// it, as the manager does at its graceful shutdown timeout.
    Runner,
}

/// The settings of a controller's run, set on the builder and read by its
/// workers.
#[derive(Debug, Clone)]
pub(super) struct RunSettings {
    pub(super) name: String,
    pub(super) max_concurrent_reconciles: usize,
    pub(super) reconcile_timeout: Option<Duration>,
    pub(super) cache_sync_timeout: Duration,
    pub(super) shutdown: ShutdownBound,
    pub(super) read_your_writes: Option<Duration>,
    /// The field manager of [`Context::apply`](crate::reconcile::Context::apply);
    /// `None`: the controller's name.
    pub(super) field_manager: Option<String>,
    #[cfg(feature = "shard")]
    pub(super) shard: Option<crate::shard::ShardHandle>,
    /// The cluster a multicluster controller's instance reconciles in
    /// (`None`: a single-cluster controller).
    #[cfg(feature = "multicluster")]
    pub(super) cluster: Option<crate::cluster_request::ClusterName>,
}
