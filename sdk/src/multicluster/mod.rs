//! Multicluster controllers (feature `multicluster`): one operator
//! reconciling across a fleet of clusters that join and leave at run time,
//! as Go's multicluster-runtime does for controller-runtime.
//!
//! A [`Provider`] discovers the clusters and tells the fleet, through a
//! [`ClusterSink`], when one appears (engage: a name and a `kube::Client`),
//! changes credentials (engage again) or goes (disengage). Every
//! multicluster controller runs in every engaged cluster:
//!
//! - **engaged**: the cluster gets its own [`SharedCache`](crate::cache::SharedCache),
//!   with informers for every controller's watches, and each controller
//!   its own queue and workers there; a controller's objects are
//!   reconciled once its own watches synced in that cluster (a kind of
//!   another controller that never syncs there, its CRD missing, holds it
//!   up in nothing). A member that cannot be reached backs off on its own
//!   (its informers retry with jittered backoff; a warning is logged each
//!   cache-sync timeout) and never holds up another cluster.
//! - **disengaged**: its running reconciles are cancelled at once (their
//!   futures dropped, as a lapsed shard permit does), its queued keys are
//!   dropped with its queues, its watches removed and its informers
//!   stopped, its metric series removed, and [`ClusterSink::disengage`]
//!   returns only then: no reconcile of the cluster runs after its removal
//!   is acknowledged.
//! - **new credentials to the same server**
//!   ([`ClusterSink::update_credentials`]; what [`KubeconfigSecrets`] does
//!   when a Secret's kubeconfig changes but its server URL, CA and TLS
//!   settings do not): swapped in under the cluster's caches, which are
//!   kept; nothing is listed or reconciled again.
//! - **engaged again** under the same name (new credentials to another
//!   server): the old engagement is disengaged, and the cluster engaged
//!   afresh over the new client.
//!
//! A multicluster controller's metrics carry a `cluster` label (see
//! [`crate::metrics`]); a [`Manager`](crate::manager::Manager)'s
//! `/readyz?verbose` shows each engaged cluster's state on its
//! `clusters` line (`engaged`, `syncing` with what has not synced, or
//! `unreachable` with the last error), which never fails the hub's
//! readiness.
//!
//! The reconciler does not change: it implements [`Reconcile`](crate::reconcile::Reconcile)
//! as for one cluster, and its [`Context`](crate::reconcile::Context) is
//! the cluster's (reads from that cluster's cache, its client, an Event
//! recorder writing there, read-your-own-writes) and names it
//! ([`Context::cluster`](crate::reconcile::Context::cluster),
//! [`Context::cluster_request`](crate::reconcile::Context::cluster_request)).
//! The controller differs by one builder call, [`Controller::multicluster`](crate::controller::Controller::multicluster)
//! (`#[controller(for = Kind, multicluster)]` with the derive).
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::controller::Controller;
//! use opkit::manager::{Manager, ManagerError};
//! use opkit::multicluster::KubeconfigSecrets;
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//!
//! struct Audit;
//!
//! impl Reconcile for Audit {
//!     type Object = ConfigMap;
//!
//!     async fn reconcile(&self, req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         let cluster = ctx.cluster().map(|c| c.as_str()).unwrap_or("local");
//!         if let Some(cm) = ctx.object().await? { // from that cluster's cache
//!             tracing::info!(cluster, %req, keys = cm.data.as_ref().map_or(0, |d| d.len()), "audited");
//!         }
//!         Ok(Action::done())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), ManagerError> {
//!     let mut manager = Manager::builder().build().await?;
//!     // members: kubeconfig Secrets in the hub's `fleet` namespace
//!     let hub = manager.client().clone();
//!     manager.set_cluster_provider(KubeconfigSecrets::new(hub, "fleet"));
//!     manager.add(Controller::new(Audit).multicluster())?;
//!     manager.run().await
//! }
//! ```
//!
//! Providers: [`StaticClusters`] (configs, kubeconfig files and
//! contexts), [`KubeconfigSecrets`] (Secrets in a hub namespace),
//! [`ClusterProfiles`] (the Cluster Inventory API's [`ClusterProfile`]s,
//! reached through the exec plugins of a [`ClusterProfileAccess`]), and
//! [`ClusterSet`] (added and removed by the program: tests over several
//! control planes). Any other source implements [`Provider`].
//!
//! A [`Manager`](crate::manager::Manager) runs the fleet while it leads;
//! [`Fleet`] runs one on its own. With feature `shard`, a manager built
//! with [`sharding`](crate::manager::ManagerBuilder::sharding) (or a
//! fleet given a ring with `Fleet::shard_clusters`) divides the clusters
//! over its replicas instead: each cluster is engaged on the one replica
//! that owns it, under a permit, and moves with the ring's membership
//! without ever being engaged on two replicas at once.
//!
//! Watches may cross the fleet: a multicluster controller's
//! [`watches_hub`](crate::controller::Controller::watches_hub) maps the
//! hub's objects to [`ClusterRequest`]s, each queued in the member it names
//! (replayed when a member is engaged), and a hub controller's
//! [`watches_members`](crate::controller::Controller::watches_members)
//! maps objects in every engaged member back to its own requests.
//!
//! Not yet: one queue and worker pool shared by every cluster (each
//! cluster has its own, of `max_concurrent_reconciles` workers).

mod claims;
mod cluster_profile;
mod cluster_profile_access;
mod cluster_profiles;
mod cluster_set;
mod credentials;
mod engagements;
mod error;
mod fleet;
mod kubeconfig_secrets;
mod provider;
mod static_clusters;
mod watched_source;

pub use crate::cluster_request::{ClusterName, ClusterRequest};
pub use cluster_profile::{
    AccessCluster, AccessExtension, AccessProvider, CLUSTER_MANAGER_LABEL, CONTROL_PLANE_HEALTHY,
    ClusterManager, ClusterProfile, ClusterProfileSpec, ClusterProfileStatus, ClusterProperty,
    ClusterVersion,
};
pub use cluster_profile_access::{
    ADDITIONAL_ARGS_EXTENSION, ADDITIONAL_ENVS_EXTENSION, AccessPlugin, ClusterProfileAccess,
    ProfileArgsPolicy, ProfileEnvsPolicy,
};
pub use cluster_profiles::ClusterProfiles;
pub use cluster_set::{ClusterSet, ClusterSetHandle};
pub use error::{MultiClusterError, ProviderError};
pub use fleet::Fleet;
pub use kubeconfig_secrets::{KUBECONFIG_SECRET_KEY, KUBECONFIG_SECRET_LABEL, KubeconfigSecrets};
pub use provider::{ClusterSink, Provider};
pub use static_clusters::StaticClusters;

#[cfg(test)]
mod tests;
