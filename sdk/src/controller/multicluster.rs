//! A multicluster controller's side of [`crate::multicluster`]: the one
//! builder's controller, prepared again on each engaged cluster's cache
//! (its watches, its indexes, a queue of its own), whose workers start once
//! its own watches synced in that cluster and stop at once when it is disengaged, as
//! the shard permit cancels a reconcile: their futures are dropped and no
//! reconcile of the cluster starts after.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::builder::Controller;
use super::error::ControllerError;
use crate::cache::SharedCache;
use crate::cluster_request::ClusterName;
use crate::reconcile::Reconcile;

/// Runs one engaged cluster's instance of a controller until the fleet
/// stops (graceful: running reconciles get the shutdown bound) or the
/// cluster is disengaged (running reconciles are cancelled at once).
pub(crate) type MemberRun = BoxFuture<'static, Result<(), ControllerError>>;

/// A controller a fleet runs in every engaged cluster, type-erased.
pub(crate) trait ClusterController: Send + Sync {
    /// The controller's name.
    fn name(&self) -> &str;

    /// Registers the controller's watches on `cache` (the cluster's, not
    /// started yet or started) and returns its run: it waits, as long as it
    /// takes, for its own watches to sync there (an unreachable member's
    /// informers back off on their own; a kind of another controller that
    /// never syncs there holds this one up in nothing), then reconciles
    /// until `stop` (graceful) or `disengaged` (at once). When the run
    /// ends, no reconcile of the cluster runs and its queue is shut down.
    /// Its metrics carry the cluster's `cluster` label.
    fn engage(
        &self,
        cluster: &ClusterName,
        cache: &SharedCache,
        stop: CancellationToken,
        disengaged: CancellationToken,
    ) -> Result<MemberRun, ControllerError>;

    /// Drops what the controller's instance in `cluster` reported (its
    /// metric series), once that instance's run ended (disengaged).
    fn forget(&self, cluster: &ClusterName);
}

impl<R: Reconcile> Controller<R> {
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// Makes this a multicluster controller: added to a
    /// [`Manager`](crate::manager::Manager) with a
    /// [cluster provider](crate::manager::Manager::set_cluster_provider)
    /// (or to a [`Fleet`](crate::multicluster::Fleet)), it reconciles its
    /// kind in every cluster the provider engages, each cluster with its
    /// own cache, queue and workers, and its reconciler's
    /// [`Context`](crate::reconcile::Context) names the cluster. The
    /// reconciler does not change. `#[controller(.., multicluster)]` calls
    /// it. See [`crate::multicluster`].
    pub fn multicluster(mut self) -> Self {
        self.multicluster = true;
        self
    }

    /// Whether [`multicluster`](Self::multicluster) was called.
    pub(crate) fn is_multicluster(&self) -> bool {
        self.multicluster
    }

    /// The controller as a fleet runs it, or why it cannot be one: what it
    /// holds once (a custom rate limiter's history, an external source,
    /// a shard) cannot be given to every cluster.
    pub(crate) fn into_cluster_controller(
        self,
    ) -> Result<Arc<dyn ClusterController>, ControllerError> {
        let refuse = |reason| ControllerError::NotMulticluster {
            controller: self.settings.name.clone(),
            reason,
        };
        if self.rate_limiter.is_some() {
            return Err(refuse(
                "a custom rate limiter holds one failure history; each cluster's queue has the \
                 default one",
            ));
        }
        if !self.sources.is_empty() {
            return Err(refuse(
                "an external source (watches_channel) feeds one queue, and each cluster has its own",
            ));
        }
        #[cfg(feature = "shard")]
        if self.settings.shard.is_some() {
            return Err(refuse(
                "sharding divides one cluster's keys; a fleet does not shard yet",
            ));
        }
        // Each instance reports under its cluster's label (see `engage`).
        let mut controller = self;
        controller.observer = None;
        Ok(Arc::new(Member { controller }))
    }
}

/// A multicluster controller: the builder, kept to prepare an instance per
/// cluster.
struct Member<R> {
    controller: Controller<R>,
}

impl<R: Reconcile> ClusterController for Member<R> {
    fn name(&self) -> &str {
        &self.controller.settings.name
    }

    fn engage(
        &self,
        cluster: &ClusterName,
        cache: &SharedCache,
        stop: CancellationToken,
        disengaged: CancellationToken,
    ) -> Result<MemberRun, ControllerError> {
        let mut settings = self.controller.settings.clone();
        settings.cluster = Some(cluster.clone());
        let observer = self.controller.reconcile_observer(Some(cluster.as_str()));
        let prepared = self
            .controller
            .prepare_on(cache, settings, None, observer)?;
        Ok(Box::pin(prepared.run_member(stop, disengaged)))
    }

    fn forget(&self, cluster: &ClusterName) {
        if let Some(observers) = &self.controller.observers {
            observers.forget_cluster(&self.controller.settings.name, cluster.as_str());
        }
    }
}
