//! [`ClusterProfiles`]: clusters from the Cluster Inventory API's
//! `ClusterProfile`s on a hub, joining once healthy, changing credentials
//! and leaving as their profiles do.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::cluster_profile::{CLUSTER_MANAGER_LABEL, CONTROL_PLANE_HEALTHY, ClusterProfile};
use super::cluster_profile_access::{ClusterProfileAccess, identity_of, profile_cluster_name};
use super::credentials;
use super::engagements::Engagements;
use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Provider};
use super::watched_source::{Outcomes, WatchedSource};
use crate::cache::Scope;
use crate::cluster_request::ClusterName;

/// What errors of a profile's credentials name as their source.
const ORIGIN: &str = "ClusterProfile";

/// Whether a profile's cluster may be engaged.
type ReadyWhen = Arc<dyn Fn(&ClusterProfile) -> bool + Send + Sync>;

/// A provider of the clusters that a cluster manager (Open Cluster
/// Management, Fleet, Karmada, ...) publishes as `ClusterProfile`s on the
/// hub (the Cluster Inventory API, KEP-4322; multicluster-runtime's
/// `cluster-inventory-api` provider). Each profile's cluster is named
/// `namespace/name` and reached as [`ClusterProfileAccess`] says: its
/// server and CA from the profile's `status.accessProviders`, its
/// credentials from the operator's exec plugin for that access provider.
///
/// - A profile is engaged once it is ready: by default, once its
///   `ControlPlaneHealthy` condition is `True` ([`ready_when`](Self::ready_when)
///   changes that). One that turns unhealthy later stays engaged (its
///   informers back off on their own while it cannot be reached).
/// - When what reaches it changes (its server, CA, access provider or the
///   plugin's per-cluster arguments), the new credentials are swapped in
///   under its caches if the server and trust are the same, and it is
///   engaged again otherwise.
/// - A profile that is deleted, or no longer names an access provider the
///   operator has, is disengaged (the latter with an error logged).
///
/// The hub identity needs `get`, `list` and `watch` on
/// `clusterprofiles.multicluster.x-k8s.io`; the plugin's credentials need
/// what the controllers do in each member.
///
/// ```no_run
/// use opkit::multicluster::{ClusterProfileAccess, ClusterProfiles, MultiClusterError};
///
/// # fn doc(hub: kube::Client) -> Result<(), MultiClusterError> {
/// // the same file a Go consumer reads with --clusterprofile-provider-file
/// let access = ClusterProfileAccess::from_file("/etc/fleet/clusterprofile-provider-file.json")?;
/// let clusters = ClusterProfiles::new(hub, access)
///     .namespace("fleet-system")
///     .cluster_manager("open-cluster-management");
/// # let _ = clusters;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ClusterProfiles {
    hub: kube::Client,
    access: ClusterProfileAccess,
    namespace: Option<String>,
    cluster_manager: Option<String>,
    ready_when: ReadyWhen,
}

impl std::fmt::Debug for ClusterProfiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterProfiles")
            .field("access", &self.access)
            .field("namespace", &self.namespace)
            .field("cluster_manager", &self.cluster_manager)
            .finish_non_exhaustive()
    }
}

impl ClusterProfiles {
    /// The clusters of the `ClusterProfile`s in every namespace of `hub`,
    /// reached through `access`.
    pub fn new(hub: kube::Client, access: ClusterProfileAccess) -> Self {
        Self {
            hub,
            access,
            namespace: None,
            cluster_manager: None,
            ready_when: Arc::new(control_plane_healthy),
        }
    }

    /// Only the profiles in `namespace` (one cluster set, by the API's
    /// convention).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only the profiles of the cluster manager `name` (labelled
    /// [`CLUSTER_MANAGER_LABEL`]`=name`).
    pub fn cluster_manager(mut self, name: impl Into<String>) -> Self {
        self.cluster_manager = Some(name.into());
        self
    }

    /// When a profile's cluster may be engaged (default: its
    /// [`CONTROL_PLANE_HEALTHY`] condition is `True`). Asked at each change
    /// of a profile not engaged yet.
    pub fn ready_when(
        mut self,
        ready: impl Fn(&ClusterProfile) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.ready_when = Arc::new(ready);
        self
    }
}

/// The default readiness: `ControlPlaneHealthy` is `True`.
fn control_plane_healthy(profile: &ClusterProfile) -> bool {
    profile
        .status
        .as_ref()
        .is_some_and(|s| crate::conditions::is_true(&s.conditions, CONTROL_PLANE_HEALTHY))
}

impl Provider for ClusterProfiles {
    async fn run(
        self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> Result<(), ProviderError> {
        let mut scope = Scope::<ClusterProfile>::all();
        if let Some(namespace) = &self.namespace {
            scope = scope.namespace(namespace.clone());
        }
        if let Some(manager) = &self.cluster_manager {
            scope = scope.labels(format!("{CLUSTER_MANAGER_LABEL}={manager}"));
        }
        let named = |p: &ClusterProfile| Some(profile_cluster_name(p));
        let mut profiles = WatchedSource::watch(self.hub.clone(), scope, named)?;
        let mut engaged = Engagements::default();
        let mut outcomes = Outcomes::default();
        while let Some((cluster, profile)) = profiles.next(&stop).await {
            let outcome = self.apply(&clusters, &mut engaged, &cluster, profile).await;
            if outcomes.fleet_stopped(outcome, &cluster, "ClusterProfile not applied") {
                break;
            }
        }
        profiles.stop().await;
        Ok(())
    }
}

impl ClusterProfiles {
    /// Engages, swaps the credentials of, or disengages `cluster` for its
    /// `profile` (`None`: deleted). A profile not engaged and not ready
    /// waits for its next change.
    async fn apply(
        &self,
        clusters: &ClusterSink,
        engaged: &mut Engagements,
        cluster: &ClusterName,
        profile: Option<Arc<ClusterProfile>>,
    ) -> Result<(), MultiClusterError> {
        let Some(profile) = profile else {
            return engaged.remove(clusters, cluster).await;
        };
        let kubeconfig = match self.access.kubeconfig_for(&profile) {
            Ok(kubeconfig) => kubeconfig,
            Err(error) => return engaged.refuse(clusters, cluster, error).await,
        };
        let source = identity_of(&kubeconfig)
            .map_err(|e| credentials::credentials(cluster, ORIGIN, e.to_string()))?;
        if engaged.unchanged(cluster, &source) {
            return Ok(());
        }
        if !engaged.is_engaged(cluster) && !(self.ready_when)(&profile) {
            tracing::debug!(%cluster, "ClusterProfile not ready yet");
            return Ok(());
        }
        let config = match credentials::config_of(cluster, kubeconfig, None, ORIGIN).await {
            Ok(config) => config,
            Err(error) => return engaged.refuse(clusters, cluster, error).await,
        };
        engaged
            .apply(clusters, cluster.clone(), source, config, ORIGIN)
            .await
    }
}
