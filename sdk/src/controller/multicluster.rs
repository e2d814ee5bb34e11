//! A multicluster controller's side of [`crate::multicluster`]: the one
//! builder's controller, prepared again on each engaged cluster's cache
//! (its watches, its indexes, a queue of its own), whose workers start once
//! its own watches synced in that cluster and stop at once when it is disengaged, as
//! the shard permit cancels a reconcile: their futures are dropped and no
//! reconcile of the cluster starts after; and the builder's watches that
//! cross the fleet (see [`super::fleet_watch`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::builder::Controller;
use super::error::ControllerError;
use super::fleet_watch::{EventFilters, MemberQueues, MemberWatchFeed, WatchRegistrations};
use super::watch::WatchTarget;
use crate::cache::{Cacheable, SharedCache};
use crate::cluster_request::{ClusterName, ClusterRequest};
use crate::reconcile::{Reconcile, Request};

/// Runs one engaged cluster's instance of a controller until the fleet
/// stops (graceful: running reconciles get the shutdown bound) or the
/// cluster is disengaged (running reconciles are cancelled at once).
pub(crate) type MemberRun = BoxFuture<'static, Result<(), ControllerError>>;

/// A controller a fleet runs in every engaged cluster, type-erased.
pub(crate) trait ClusterController: Send + Sync {
    /// The controller's name.
    fn name(&self) -> &str;

    /// Registers the controller's hub-side watches on `hub` (none to
    /// register: nothing), routing each request to the queue of the
    /// engaged cluster it names; they stay until the result is dropped.
    /// Fails if it has some and there is no hub.
    fn watch_hub(&self, hub: Option<&SharedCache>) -> Result<WatchRegistrations, ControllerError>;

    /// Registers the controller's watches on `cache` (the cluster's, not
    /// started yet or started) and returns its run; with a `hub`, the
    /// hub's objects its hub-side watches map to this cluster are queued
    /// once the hub's informers synced. The run: it waits, as long as it
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
        hub: Option<&SharedCache>,
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

    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// Also watch objects of kind `H` on the hub (the cluster the
    /// [`Manager`](crate::manager::Manager) runs against), and reconcile
    /// in each member cluster the requests `map` names there: a hub-side
    /// `Placement` mapped to the objects it places in members. For a
    /// [multicluster](Self::multicluster) controller only (the manager
    /// refuses it on another).
    ///
    /// A request naming a cluster that is not engaged (here: on another
    /// replica of a sharded fleet, or not yet) is dropped; when a cluster
    /// is engaged, every hub object is mapped again and the requests naming
    /// it are queued there, so none is lost. An update maps the old object
    /// too, so a member dropped from a placement is reconciled once more.
    /// The hub's informer of `H` is shared with the hub's other
    /// controllers; `map` runs on its event path, so it should only read.
    /// The controller's event filters apply.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use opkit::controller::Controller;
    /// use opkit::multicluster::ClusterRequest;
    /// use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
    ///
    /// // In every member: the copies a hub ConfigMap lists in its `clusters` key.
    /// struct Copy;
    /// impl Reconcile for Copy {
    ///     type Object = ConfigMap;
    ///     async fn reconcile(&self, _: Request, _: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
    ///         Ok(Action::done())
    ///     }
    /// }
    /// let members = Controller::new(Copy).multicluster().watches_hub(|hub: &ConfigMap| {
    ///     let clusters = hub.data.as_ref().and_then(|d| d.get("clusters")).cloned().unwrap_or_default();
    ///     let name = hub.metadata.name.clone().unwrap_or_default();
    ///     clusters
    ///         .split(',')
    ///         .map(|cluster| ClusterRequest::new(cluster.trim(), Request::namespaced("copies", &name)))
    ///         .collect()
    /// });
    /// # let _ = members;
    /// ```
    pub fn watches_hub<H>(
        mut self,
        map: impl Fn(&H) -> Vec<ClusterRequest> + Send + Sync + 'static,
    ) -> Self
    where
        H: Cacheable<DynamicType = ()>,
        H::Scope: 'static,
    {
        self.fleet_watches.add_hub(map);
        self
    }

    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// Also watch objects of kind `K` in every engaged member cluster, and
    /// reconcile the (hub) requests `map` returns for each changed one,
    /// given the member's name: a member's copy mapped back to the hub
    /// object it was made from. For a hub controller (one that is not
    /// [multicluster](Self::multicluster)) added to a
    /// [`Manager`](crate::manager::Manager) with a
    /// [cluster provider](crate::manager::Manager::set_cluster_provider).
    ///
    /// Each member's informer of `K` is shared with the multicluster
    /// controllers engaged there, starts when the member is engaged (its
    /// initial list maps every object once) and stops when it is
    /// disengaged; then every object it held is mapped once more, as if
    /// deleted, so the hub objects they map to are reconciled and can see
    /// the member gone ([`Manager::engaged_clusters`](crate::manager::Manager::engaged_clusters)).
    /// The hub controller does not wait for members to sync:
    /// one out of reach holds up nothing. `map` runs on the member's event
    /// path, so it should only read. The controller's event filters apply.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Secret;
    /// use opkit::controller::Controller;
    /// use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
    ///
    /// // On the hub: a Secret reconciled again when a member's copy of it changes.
    /// struct Report;
    /// impl Reconcile for Report {
    ///     type Object = Secret;
    ///     async fn reconcile(&self, _: Request, _: &Context<Secret>) -> Result<Action, ReconcileError> {
    ///         Ok(Action::done())
    ///     }
    /// }
    /// let hub = Controller::new(Report).watches_members(|_cluster, copy: &Secret| {
    ///     Request::for_object(copy).into_iter().collect()
    /// });
    /// # let _ = hub;
    /// ```
    pub fn watches_members<K>(
        mut self,
        map: impl Fn(&ClusterName, &K) -> Vec<Request> + Send + Sync + 'static,
    ) -> Self
    where
        K: Cacheable<DynamicType = ()>,
        K::Scope: 'static,
    {
        self.fleet_watches.add_members(map);
        self
    }

    /// Whether [`watches_hub`](Self::watches_hub) was called.
    pub(crate) fn watches_the_hub(&self) -> bool {
        !self.fleet_watches.hub.is_empty()
    }

    /// Whether [`watches_members`](Self::watches_members) was called.
    pub(crate) fn watches_the_members(&self) -> bool {
        !self.fleet_watches.members.is_empty()
    }

    /// Hands the controller the fleet's `feed`, which its member-side
    /// watches join once its queue exists (what a manager does).
    pub(crate) fn feeding(mut self, feed: MemberWatchFeed) -> Self {
        self.fleet_watches.feed = Some(feed);
        self
    }

    /// Hands the member-side watches, bound to `queue` (the prepared
    /// one), to the fleet; fails for a controller that has some and runs
    /// without a fleet.
    pub(super) fn feed_member_watches(
        &self,
        queue: &crate::workqueue::WorkQueue<Request>,
    ) -> Result<(), ControllerError> {
        let target = WatchTarget {
            queue: queue.clone(),
            event_filters: self.event_filters(),
        };
        self.fleet_watches.feed(&self.settings.name, &target)
    }

    /// The controller-wide event filters, shared.
    fn event_filters(&self) -> EventFilters {
        Arc::from(self.event_filters.clone())
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
        if self.watches_the_members() {
            return Err(refuse(
                "watches_members maps member objects to a hub controller's queue; a multicluster \
                 controller's own watches already run in every member",
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
        Ok(Arc::new(Member {
            controller,
            queues: MemberQueues::default(),
        }))
    }
}

/// A multicluster controller: the builder, kept to prepare an instance per
/// cluster, and its instances' queues, by cluster.
struct Member<R> {
    controller: Controller<R>,
    queues: MemberQueues,
}

impl<R: Reconcile> ClusterController for Member<R> {
    fn name(&self) -> &str {
        &self.controller.settings.name
    }

    fn watch_hub(&self, hub: Option<&SharedCache>) -> Result<WatchRegistrations, ControllerError> {
        let controller = &self.controller;
        controller.fleet_watches.register_hub(
            &controller.settings.name,
            &controller.event_filters(),
            hub,
            &self.queues,
        )
    }

    fn engage(
        &self,
        cluster: &ClusterName,
        cache: &SharedCache,
        hub: Option<&SharedCache>,
        stop: CancellationToken,
        disengaged: CancellationToken,
    ) -> Result<MemberRun, ControllerError> {
        let mut settings = self.controller.settings.clone();
        settings.cluster = Some(cluster.clone());
        let observer = self.controller.reconcile_observer(Some(cluster.as_str()));
        let prepared = self
            .controller
            .prepare_on(cache, settings, None, observer)?;
        let route = self.queues.route(cluster.clone(), prepared.queue.clone());
        let replays = match hub {
            Some(hub) => self.controller.fleet_watches.replay_hub(
                &self.controller.event_filters(),
                hub,
                cluster,
                &prepared.queue,
            ),
            None => Vec::new(),
        };
        Ok(Box::pin(async move {
            // the hub's requests for this cluster reach its queue while it runs
            let _route = route;
            let run = prepared.run_member(stop, disengaged);
            tokio::pin!(run);
            tokio::select! {
                result = &mut run => return result,
                _ = futures::future::join_all(replays) => {}
            }
            run.await
        }))
    }

    fn forget(&self, cluster: &ClusterName) {
        if let Some(observers) = &self.controller.observers {
            observers.forget_cluster(&self.controller.settings.name, cluster.as_str());
        }
    }
}
