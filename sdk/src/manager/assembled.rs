//! [`Manager`]: what a built manager holds, and what is added to it before
//! it runs (controllers, runnables, health checks). It is built in
//! `builder.rs` and run in `run.rs`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::ManagerError;
use super::health::{self, Checks};
use super::runnable::{BoxError, Runnable};
use super::server::{Bound, Serves};
use crate::cache::SharedCache;
use crate::controller::{Controller, ControllerError, StartGate};
use crate::leader::LeaderElector;
use crate::metrics::Metrics;
use crate::reconcile::Reconcile;
#[cfg(feature = "webhook")]
use crate::webhook::BoundWebhookServer;

/// Runs a prepared controller: its workers, once the gate opens, until the
/// token is cancelled.
pub(super) type RunController = Box<
    dyn FnOnce(
            CancellationToken,
            Option<StartGate>,
        ) -> BoxFuture<'static, Result<(), ControllerError>>
        + Send,
>;

/// Registers a controller's watches on the cache.
pub(super) type PrepareController =
    Box<dyn FnOnce(&SharedCache) -> Result<RunController, ControllerError> + Send>;

/// A controller added to the manager, type-erased.
pub(super) struct ControllerEntry {
    pub(super) name: String,
    pub(super) prepare: PrepareController,
}

/// Runs controllers and runnables over one client and one shared cache,
/// with leader election, probes, metrics and graceful shutdown. See the
/// [module docs](crate::manager).
pub struct Manager {
    pub(super) client: kube::Client,
    pub(super) api_url: String,
    pub(super) cache: SharedCache,
    pub(super) metrics: Metrics,
    pub(super) elector: Option<(LeaderElector, String)>,
    #[cfg(feature = "shard")]
    pub(super) shard: Option<crate::shard::ShardHandle>,
    pub(super) servers: Vec<Bound>,
    #[cfg(feature = "webhook")]
    pub(super) webhook: Option<BoundWebhookServer>,
    pub(super) healthz: Checks,
    pub(super) readyz: Checks,
    pub(super) controllers: Vec<ControllerEntry>,
    pub(super) runnables: Vec<Runnable>,
    pub(super) graceful_shutdown_timeout: Duration,
    pub(super) cache_sync_timeout: Duration,
    pub(super) leading: Arc<watch::Sender<bool>>,
    /// The multicluster controllers and the provider of their clusters.
    #[cfg(feature = "multicluster")]
    pub(super) fleet: crate::multicluster::Fleet,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("namespace", &self.cache.namespace())
            .field("lease", &self.elector.as_ref().map(|(_, lease)| lease))
            .field(
                "controllers",
                &self.controllers.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .field("runnables", &self.runnables)
            .field("metrics_address", &self.metrics_address())
            .field("health_probe_address", &self.health_probe_address())
            .field("graceful_shutdown_timeout", &self.graceful_shutdown_timeout)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// The client (for writes, and reads the cache does not hold).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The shared cache every controller reads from.
    pub fn cache(&self) -> &SharedCache {
        &self.cache
    }

    /// The metrics served on `/metrics`; register an operator's own here.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The address `/metrics` is served on, once bound by
    /// [`build`](crate::manager::ManagerBuilder::build) (`None` when off). With port 0 this
    /// tells the port chosen.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.address(Serves::Metrics)
    }

    /// The address `/healthz` and `/readyz` are served on (`None` when off).
    pub fn health_probe_address(&self) -> Option<SocketAddr> {
        self.address(Serves::Probes)
    }

    fn address(&self, serves: Serves) -> Option<SocketAddr> {
        self.servers
            .iter()
            .find(|b| b.serves == serves || b.serves == Serves::Both)
            .and_then(Bound::local_addr)
    }

    #[cfg(feature = "webhook")]
    #[cfg_attr(docsrs, doc(cfg(feature = "webhook")))]
    /// The address the [webhook server](crate::manager::ManagerBuilder::webhook_server) is
    /// bound to (`None` without one).
    pub fn webhook_address(&self) -> Option<SocketAddr> {
        self.webhook
            .as_ref()
            .and_then(BoundWebhookServer::local_addr)
    }

    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// This replica's place in its ring when the manager shards
    /// ([`sharding`](crate::manager::ManagerBuilder::sharding)): a receiver
    /// of its [`ShardStatus`](crate::shard::ShardStatus) (whether it may
    /// start reconciles, the members it sees, how often the member set
    /// changed), current now and after every change, also once
    /// [`run`](Self::run) took the manager. Read-only: the manager owns the
    /// membership. `None` without sharding.
    ///
    /// ```no_run
    /// # async fn doc(manager: opkit::manager::Manager) {
    /// if let Some(mut status) = manager.shard_status() {
    ///     tokio::spawn(async move {
    ///         while status.changed().await.is_ok() {
    ///             let now = status.borrow().clone();
    ///             tracing::info!(active = now.active, members = ?now.members, "ring changed");
    ///         }
    ///     });
    /// }
    /// # }
    /// ```
    pub fn shard_status(&self) -> Option<watch::Receiver<crate::shard::ShardStatus>> {
        self.shard
            .as_ref()
            .map(crate::shard::ShardHandle::subscribe)
    }

    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// This replica's identity in its ring (its member Lease's holder),
    /// `None` without sharding.
    pub fn shard_identity(&self) -> Option<&str> {
        self.shard.as_ref().map(crate::shard::ShardHandle::identity)
    }

    /// Whether this replica's controllers may reconcile: `true` while it
    /// leads (or, without leader election, while [`run`](Self::run) runs).
    /// Becomes `false` when leadership ends or the manager stops.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Adds a controller. Its metrics are registered at once (at zero);
    /// it runs from [`run`](Self::run) on. With a manager
    /// [`namespace`](crate::manager::ManagerBuilder::namespace), it watches and reads only
    /// that namespace (the cache's scope). At shutdown its running
    /// reconciles get the manager's
    /// [`graceful_shutdown_timeout`](crate::manager::ManagerBuilder::graceful_shutdown_timeout)
    /// (in place of the controller's own shutdown timeout).
    ///
    /// Fails if a controller of the same [name](Controller::name) was added.
    ///
    /// A [multicluster](Controller::multicluster) controller (feature
    /// `multicluster`) runs in every cluster of the manager's
    /// [cluster provider](Self::set_cluster_provider) instead, while this
    /// replica leads; its metric series are made for each cluster when it
    /// is engaged (labelled `cluster`), and removed when it is disengaged.
    pub fn add<R: Reconcile>(&mut self, controller: Controller<R>) -> Result<(), ManagerError> {
        let name = controller.controller_name().to_owned();
        if self.controllers.iter().any(|c| c.name == name) {
            return Err(ManagerError::DuplicateController { name });
        }
        #[cfg(feature = "multicluster")]
        if self.fleet.has_controller(&name) {
            return Err(ManagerError::DuplicateController { name });
        }
        #[cfg(feature = "multicluster")]
        if controller.is_multicluster() {
            // Its series are made per member cluster, labelled with it.
            let controller = controller
                .shutdown_bounded_by_runner()
                .metrics(&self.metrics);
            return self
                .fleet
                .add(controller)
                .map_err(ManagerError::MultiCluster);
        }
        #[cfg(feature = "multicluster")]
        if controller.watches_the_hub() {
            return Err(ControllerError::HubWatchesNeedMulticluster { controller: name }.into());
        }
        // Its member-side watches join the fleet once its queue exists.
        #[cfg(feature = "multicluster")]
        let controller = if controller.watches_the_members() {
            controller.feeding(self.fleet.feed_member_watches())
        } else {
            controller
        };
        // The manager's graceful shutdown timeout bounds the controller's
        // drain (and reports what it abandons): the controller has no bound
        // of its own.
        #[cfg(feature = "shard")]
        let controller = match &self.shard {
            Some(shard) => controller.sharded(shard.clone()),
            None => controller,
        };
        let controller = controller
            .shutdown_bounded_by_runner()
            .metrics(&self.metrics)
            .create_metric_series();
        let prepare: PrepareController = Box::new(move |cache: &SharedCache| {
            let prepared = controller.prepare(cache)?;
            let run: RunController =
                Box::new(move |token, gate| Box::pin(prepared.run(token, gate)));
            Ok(run)
        });
        self.controllers.push(ControllerEntry { name, prepare });
        Ok(())
    }

    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// The provider of the clusters the [multicluster](Controller::multicluster)
    /// controllers run in (see [`crate::multicluster`]); it runs, and the
    /// clusters it engages are reconciled, while this replica leads (from
    /// when the hub's cache synced). Replaces one set before.
    pub fn set_cluster_provider(&mut self, provider: impl crate::multicluster::Provider) {
        self.fleet.set_provider(provider);
    }

    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// The clusters engaged now (sorted by name), current and after every
    /// change, also once [`run`](Self::run) took the manager.
    pub fn engaged_clusters(&self) -> watch::Receiver<Vec<crate::multicluster::ClusterName>> {
        self.fleet.engaged()
    }

    /// Adds a task to run beside the controllers (see [`Runnable`]).
    pub fn add_runnable(&mut self, runnable: Runnable) {
        self.runnables.push(runnable);
    }

    /// Adds (or replaces) a liveness check, served on `/healthz` and
    /// `/healthz/<name>`. A failing check makes `/healthz` answer 500.
    ///
    /// ```no_run
    /// # async fn example(mut manager: opkit::manager::Manager) {
    /// manager.add_healthz_check("event-loop", || async { Ok(()) });
    /// # }
    /// ```
    pub fn add_healthz_check<F, Fut>(&mut self, name: impl Into<String>, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.healthz.add(name.into(), health::check(check));
    }

    /// Adds (or replaces) a readiness check, served on `/readyz` and
    /// `/readyz/<name>`, beside the built-in `informers` check.
    ///
    /// ```no_run
    /// # async fn example(mut manager: opkit::manager::Manager) {
    /// let client = manager.client().clone();
    /// manager.add_readyz_check("apiserver", move || {
    ///     let client = client.clone();
    ///     async move {
    ///         client.apiserver_version().await?;
    ///         Ok(())
    ///     }
    /// });
    /// # }
    /// ```
    pub fn add_readyz_check<F, Fut>(&mut self, name: impl Into<String>, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        self.readyz.add(name.into(), health::check(check));
    }
}
