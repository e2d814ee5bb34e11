//! Controllers: watches that enqueue keys, and workers that reconcile them.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
//! use opkit::cache::SharedCache;
//! use opkit::controller::Controller;
//! use opkit::predicate::{GenerationChanged, LabelSelector};
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//! use opkit::workqueue::Quota;
//!
//! struct Web;
//!
//! impl Reconcile for Web {
//!     type Object = Deployment;
//!
//!     async fn reconcile(&self, req: Request, ctx: &Context<Deployment>) -> Result<Action, ReconcileError> {
//!         let Some(_deployment) = ctx.object().await? else {
//!             return Ok(Action::done());
//!         };
//!         let _service = ctx.get::<Service>(req.namespace.as_deref(), &req.name).await?;
//!         // ... create or update the Service it owns ...
//!         Ok(Action::done())
//!     }
//! }
//!
//! # async fn example(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! let controller = Controller::with_predicate(Web, GenerationChanged) // spec changes only
//!     .owns::<Service>() // every change of an owned Service wakes its controller-owner
//!     // Deployments name their settings ConfigMap in an annotation; index them by it ...
//!     .index::<Deployment>("settings", |d| {
//!         d.metadata.annotations.iter().flatten()
//!             .filter(|(k, _)| *k == "example.com/settings")
//!             .map(|(_, v)| v.clone())
//!             .collect()
//!     })
//!     // ... and a ConfigMap change wakes every Deployment of its namespace indexed by its name.
//!     .watches_by_index::<ConfigMap>("settings")
//!     .watches::<Secret>(|secret, deployments| {
//!         // a Secret change wakes the Deployment of the same name, if there is one
//!         let name = secret.metadata.name.as_deref().unwrap_or_default();
//!         deployments
//!             .get(secret.metadata.namespace.as_deref(), name)
//!             .and_then(|d| Request::for_object(&*d))
//!             .into_iter()
//!             .collect()
//!     })
//!     .with_event_filter(LabelSelector::new([("team", "web")].into_iter().collect()))
//!     .max_concurrent_reconciles(4)
//!     .throttle(Quota::per_second(50).burst(10)); // requeue_after loops included
//! controller.run(&cache, tokio::signal::ctrl_c().map(|_| ())).await?; // starts the cache
//! # Ok(()) }
//! # use futures::FutureExt;
//! ```
//!
//! Each watch has its own predicates (`with_predicate`, `owns_with`,
//! `watches_with`); [`Controller::with_event_filter`] filters every watch.
//! A mapper gets the primary kind's [`Store`](crate::cache::Store), typed: it reads what it
//! needs without a fallible lookup of the kind.
//! `owns` caches whole objects, so the reconciler can read them;
//! [`Controller::owns_metadata`] caches only their metadata when memory
//! matters more.
//!
//! Per key, at most one reconcile runs at a time; up to
//! `max_concurrent_reconciles` keys run at once. Workers start only after
//! every cache the controller watches or reads has synced; the result of each
//! reconcile decides what happens to the key (see [`crate::reconcile`]).

mod builder;
mod error;
#[cfg(feature = "multicluster")]
mod fleet_watch;
#[cfg(feature = "multicluster")]
mod multicluster;
mod observer;
mod run;
mod settings;
#[cfg(feature = "shard")]
mod sharded;
mod stats;
mod watch;
mod worker;
mod workers;

pub use builder::Controller;
pub use error::ControllerError;
#[cfg(feature = "multicluster")]
pub(crate) use fleet_watch::{MemberRegistrations, MemberWatchFeed};
#[cfg(feature = "multicluster")]
pub(crate) use multicluster::ClusterController;
pub(crate) use observer::{ControllerObservers, ReconcileObserver, ReconcileResult};
#[cfg(feature = "multicluster")]
pub(crate) use run::until_shutdown;
pub use stats::{ReconcileCounts, ReconcileStats};
pub(crate) use workers::StartGate;

#[cfg(test)]
#[cfg(feature = "shard")]
mod sharded_tests;
#[cfg(test)]
mod tests;
