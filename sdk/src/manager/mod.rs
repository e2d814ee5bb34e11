//! The manager: one process's client, shared cache, controllers, leader
//! election, HTTP probes and metrics, and graceful shutdown.
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::Service;
//! use opkit::controller::Controller;
//! use opkit::manager::{LeaderElection, Manager, ManagerError};
//! use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};
//!
//! struct Web;
//!
//! impl Reconcile for Web {
//!     type Object = Deployment;
//!
//!     async fn reconcile(&self, _req: Request, ctx: &Context<Deployment>) -> Result<Action, ReconcileError> {
//!         let Some(_deployment) = ctx.object().await? else {
//!             return Ok(Action::done());
//!         };
//!         // ... create or update the Service it owns ...
//!         Ok(Action::done())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), ManagerError> {
//!     // KUBECONFIG / ~/.kube/config, or the in-cluster service account.
//!     let mut manager = Manager::builder()
//!         .leader_election(LeaderElection::new("web-operator-lock").release_on_cancel(true))
//!         .metrics_bind_address(":8080")
//!         .health_probe_bind_address(":8081")
//!         .build()
//!         .await?;
//!     manager.add(Controller::new(Web).owns::<Service>())?;
//!     // Reconciles (while leading) until SIGTERM or SIGINT, then stops
//!     // gracefully: Ok(()) means exit 0.
//!     manager.run().await
//! }
//! ```
//!
//! # Lifecycle
//!
//! [`run`](Manager::run) does, in order:
//!
//! 1. starts leader election, if configured;
//! 2. registers every controller's watches on the shared cache and starts
//!    it, **on every replica**: a standby's caches are warm and its queues
//!    full when it takes over;
//! 3. serves `/metrics`, `/healthz` and `/readyz` on the bound addresses;
//!    If a kind's list answers 404 (its CRD is not installed) or the API
//!    server cannot be reached, `run` fails after
//!    [`START_LIST_ATTEMPTS`] attempts (5 to 11 s) with an error naming
//!    what is missing ([`CacheError::CrdNotInstalled`](crate::cache::CacheError::CrdNotInstalled),
//!    [`CacheError::Unreachable`](crate::cache::CacheError::Unreachable));
//!    other failures (a 403 for missing RBAC) fail after the
//!    [cache sync timeout](ManagerBuilder::cache_sync_timeout);
//! 4. starts each controller's workers once its caches have synced **and**
//!    this replica leads (at once without leader election); runnables start
//!    once the cache has synced (and, unless
//!    [`needs_leader_election(false)`](Runnable::needs_leader_election),
//!    this replica leads);
//! 5. waits for SIGTERM / SIGINT ([`run_until`](Manager::run_until): a
//!    future), a failure, or the loss of leadership.
//!
//! # Shutdown
//!
//! On the first signal no new reconcile starts; running ones (and
//! runnables) get the [graceful shutdown timeout](ManagerBuilder::graceful_shutdown_timeout)
//! (30 s by default) to finish. Then the Lease is released (with
//! [`release_on_cancel`](LeaderElection::release_on_cancel)) so a standby
//! takes over at its next try, the cache and the HTTP servers stop, and
//! `run` returns `Ok(())`. A second signal exits the process at once with
//! status 1.
//!
//! A leader that cannot renew its Lease within the renew deadline stops
//! every reconcile at once (running ones are abandoned, not awaited):
//! the Lease may be taken by another replica only after the longer lease
//! duration. `run` then returns [`ManagerError::LeaderElectionLost`]; the
//! process should exit and be restarted, as with controller-runtime.
//!
//! # HTTP endpoints
//!
//! | path | answers |
//! |---|---|
//! | `/metrics` | [`crate::metrics`]: controller-runtime's names, OpenMetrics text; over HTTPS to authorized scrapers only with [`metrics_secure`](ManagerBuilder::metrics_secure) ([`SecureMetrics`]) |
//! | `/healthz` | 200 `ok` while the process serves (check `ping`, plus [`add_healthz_check`](Manager::add_healthz_check)) |
//! | `/readyz` | 200 once every informer has synced (check `informers`, plus [`add_readyz_check`](Manager::add_readyz_check)) and the [webhook server](ManagerBuilder::webhook_server), if any, serves (check `webhook`); 500 listing the informers that have not, with their last error |
//! | `/healthz/<check>`, `/readyz/<check>` | one check |
//!
//! `?verbose` lists every check (`[+]name ok` / `[-]name failed: why`).
//! Standbys are ready too: they serve metrics and keep warm caches.

mod builder;
mod error;
mod health;
mod metrics_auth;
mod run;
mod runnable;
mod secure_metrics;
mod server;
mod signals;

#[cfg(test)]
mod tests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The leader election options (also at [`crate::leader::LeaderElection`]).
pub use crate::leader::LeaderElection;
pub use builder::{DEFAULT_CACHE_SYNC_TIMEOUT, DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT, ManagerBuilder};
pub use error::ManagerError;
pub use runnable::{BoxError, Runnable};
pub use secure_metrics::SecureMetrics;

use crate::cache::SharedCache;
use crate::controller::{Controller, ControllerError, StartGate};
use crate::leader::LeaderElector;
use crate::metrics::Metrics;
use crate::reconcile::Reconcile;
use crate::webhook::BoundWebhookServer;
use health::Checks;
use server::{Bound, Serves};

pub use crate::cache::START_LIST_ATTEMPTS;

/// Runs a prepared controller: its workers, once the gate opens, until the
/// token is cancelled.
type RunController = Box<
    dyn FnOnce(
            CancellationToken,
            Option<StartGate>,
        ) -> BoxFuture<'static, Result<(), ControllerError>>
        + Send,
>;

/// Registers a controller's watches on the cache.
type PrepareController =
    Box<dyn FnOnce(&SharedCache) -> Result<RunController, ControllerError> + Send>;

/// A controller added to the manager, type-erased.
struct ControllerEntry {
    name: String,
    prepare: PrepareController,
}

/// Runs controllers and runnables over one client and one shared cache,
/// with leader election, probes, metrics and graceful shutdown. See the
/// [module docs](self).
pub struct Manager {
    client: kube::Client,
    api_url: String,
    cache: SharedCache,
    metrics: Metrics,
    elector: Option<(LeaderElector, String)>,
    shard: Option<crate::shard::ShardHandle>,
    servers: Vec<Bound>,
    webhook: Option<BoundWebhookServer>,
    healthz: Checks,
    readyz: Checks,
    controllers: Vec<ControllerEntry>,
    runnables: Vec<Runnable>,
    graceful_shutdown_timeout: Duration,
    cache_sync_timeout: Duration,
    leading: Arc<watch::Sender<bool>>,
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
    /// Options, starting from the defaults (see [`ManagerBuilder`]).
    pub fn builder() -> ManagerBuilder {
        ManagerBuilder::default()
    }

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
    /// [`build`](ManagerBuilder::build) (`None` when off). With port 0 this
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

    /// The address the [webhook server](ManagerBuilder::webhook_server) is
    /// bound to (`None` without one).
    pub fn webhook_address(&self) -> Option<SocketAddr> {
        self.webhook
            .as_ref()
            .and_then(BoundWebhookServer::local_addr)
    }

    /// Whether this replica's controllers may reconcile: `true` while it
    /// leads (or, without leader election, while [`run`](Self::run) runs).
    /// Becomes `false` when leadership ends or the manager stops.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Adds a controller. Its metrics are registered at once (at zero);
    /// it runs from [`run`](Self::run) on. With a manager
    /// [`namespace`](ManagerBuilder::namespace), it watches and reads only
    /// that namespace (the cache's scope). At shutdown its running
    /// reconciles get the manager's
    /// [`graceful_shutdown_timeout`](ManagerBuilder::graceful_shutdown_timeout)
    /// (in place of the controller's own shutdown timeout).
    ///
    /// Fails if a controller of the same [name](Controller::name) was added.
    pub fn add<R: Reconcile>(&mut self, controller: Controller<R>) -> Result<(), ManagerError> {
        let name = controller.controller_name().to_owned();
        if self.controllers.iter().any(|c| c.name == name) {
            return Err(ManagerError::DuplicateController { name });
        }
        // The manager's graceful shutdown timeout bounds the controller's
        // drain (and reports what it abandons): the controller has no bound
        // of its own.
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

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully (see the
    /// [module docs](self)); a second signal exits the process at once with
    /// status 1. `Ok(())` after a clean shutdown.
    pub async fn run(self) -> Result<(), ManagerError> {
        let mut signals = signals::Signals::install().map_err(ManagerError::Signal)?;
        self.run_until(async move {
            let signal = signals.recv().await;
            tracing::info!(
                signal,
                "shutting down gracefully; a second signal exits at once"
            );
            tokio::spawn(async move {
                let signal = signals.recv().await;
                tracing::error!(signal, "second signal: exiting at once");
                std::process::exit(1);
            });
        })
        .await
    }

    /// Runs until `shutdown` completes, then shuts down gracefully (no
    /// signal handling: for tests, or a process that handles signals
    /// itself).
    ///
    /// ```no_run
    /// # async fn example(manager: opkit::manager::Manager) -> Result<(), opkit::manager::ManagerError> {
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let stop = CancellationToken::new();
    /// let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    /// // ...
    /// stop.cancel();
    /// running.await.expect("manager task")?;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ManagerError> {
        run::run(self, shutdown).await
    }
}
