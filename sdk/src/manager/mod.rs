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

mod assembled;
mod builder;
mod error;
mod health;
#[cfg(feature = "secure-metrics")]
mod metrics_auth;
mod observers;
mod run;
mod runnable;
mod scrape;
#[cfg(feature = "secure-metrics")]
mod secure_metrics;
#[cfg(not(feature = "secure-metrics"))]
#[path = "secure_metrics_off.rs"]
mod secure_metrics;
mod server;
mod signals;

#[cfg(test)]
mod observers_tests;
#[cfg(test)]
mod tests;

/// The leader election options (also at [`crate::leader::LeaderElection`]).
pub use crate::leader::LeaderElection;
pub use assembled::Manager;
pub use builder::{DEFAULT_CACHE_SYNC_TIMEOUT, DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT, ManagerBuilder};
pub use error::ManagerError;
pub use runnable::{BoxError, Runnable};
#[cfg(feature = "secure-metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "secure-metrics")))]
pub use secure_metrics::SecureMetrics;

pub use crate::cache::START_LIST_ATTEMPTS;
