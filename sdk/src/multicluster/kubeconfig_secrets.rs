//! [`KubeconfigSecrets`]: clusters from kubeconfig Secrets in a hub
//! namespace, joining, changing credentials and leaving as their Secrets do.

use k8s_openapi::api::core::v1::Secret;
use tokio_util::sync::CancellationToken;

use super::credentials;
use super::engagements::Engagements;
use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Provider};
use super::watched_source::{Outcomes, WatchedSource};
use crate::cache::Scope;
use crate::cluster_request::ClusterName;

/// The label a kubeconfig Secret carries (`"true"`), as multicluster-runtime's
/// kubeconfig provider's default.
pub const KUBECONFIG_SECRET_LABEL: &str = "sigs.k8s.io/multicluster-runtime-kubeconfig";

/// The key of a kubeconfig Secret's data holding the kubeconfig, as
/// multicluster-runtime's kubeconfig provider's default.
pub const KUBECONFIG_SECRET_KEY: &str = "kubeconfig";

/// A provider of the clusters whose kubeconfigs are Secrets in one
/// namespace of the hub (the cluster the operator runs in), labelled
/// [`KUBECONFIG_SECRET_LABEL`]`=true`, the kubeconfig under
/// [`KUBECONFIG_SECRET_KEY`] (multicluster-runtime's kubeconfig provider,
/// with its defaults). A cluster is named after its Secret: it is engaged
/// when the Secret appears and disengaged when the Secret goes (or its
/// kubeconfig no longer loads). When the kubeconfig changes, its new
/// credentials are swapped in under the cluster's caches if it still
/// reaches the same server (URL, CA and TLS settings unchanged: a rotated
/// token or client certificate), as
/// [`ClusterSink::update_credentials`](super::ClusterSink::update_credentials)
/// does; otherwise the cluster is engaged again over the new client.
///
/// The hub identity needs `get`, `list` and `watch` on Secrets in that
/// namespace; each kubeconfig needs what the controllers do in its cluster.
///
/// ```no_run
/// use opkit::multicluster::KubeconfigSecrets;
///
/// # fn doc(hub: kube::Client) {
/// // `kubectl create secret generic east -n fleet --from-file=kubeconfig=east.yaml`
/// // `kubectl label secret east -n fleet sigs.k8s.io/multicluster-runtime-kubeconfig=true`
/// let clusters = KubeconfigSecrets::new(hub, "fleet");
/// # let _ = clusters;
/// # }
/// ```
#[derive(Clone)]
pub struct KubeconfigSecrets {
    hub: kube::Client,
    namespace: String,
    label: String,
    key: String,
}

impl std::fmt::Debug for KubeconfigSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeconfigSecrets")
            .field("namespace", &self.namespace)
            .field("label", &self.label)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl KubeconfigSecrets {
    /// The clusters of the kubeconfig Secrets in `namespace`, watched
    /// through `hub`.
    pub fn new(hub: kube::Client, namespace: impl Into<String>) -> Self {
        Self {
            hub,
            namespace: namespace.into(),
            label: KUBECONFIG_SECRET_LABEL.to_owned(),
            key: KUBECONFIG_SECRET_KEY.to_owned(),
        }
    }

    /// The label key marking kubeconfig Secrets (value `"true"`; default
    /// [`KUBECONFIG_SECRET_LABEL`]).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// The data key holding the kubeconfig (default [`KUBECONFIG_SECRET_KEY`]).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }
}

impl Provider for KubeconfigSecrets {
    async fn run(
        self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> Result<(), ProviderError> {
        let scope = Scope::<Secret>::all()
            .namespace(self.namespace.clone())
            .labels(format!("{}=true", self.label));
        let named = |s: &Secret| s.metadata.name.clone().map(ClusterName::from);
        let mut secrets = WatchedSource::watch(self.hub.clone(), scope, named)?;
        let mut engaged = Engagements::default();
        let mut outcomes = Outcomes::default();
        while let Some((cluster, secret)) = secrets.next(&stop).await {
            // A Secret without the key is one whose kubeconfig does not load.
            let kubeconfig = secret.map(|s| {
                s.data
                    .as_ref()
                    .and_then(|d| d.get(&self.key))
                    .map(|b| b.0.clone())
                    .unwrap_or_default()
            });
            let outcome = self
                .apply(&clusters, &mut engaged, cluster.clone(), kubeconfig)
                .await;
            if outcomes.fleet_stopped(outcome, &cluster, "kubeconfig Secret not applied") {
                break;
            }
        }
        secrets.stop().await;
        Ok(())
    }
}

impl KubeconfigSecrets {
    /// Engages, swaps the credentials of, or disengages `cluster` for its
    /// Secret's `kubeconfig` (`None`: the Secret is gone); unchanged bytes
    /// do nothing (see [`Engagements::apply`]).
    async fn apply(
        &self,
        clusters: &ClusterSink,
        engaged: &mut Engagements,
        cluster: ClusterName,
        kubeconfig: Option<Vec<u8>>,
    ) -> Result<(), MultiClusterError> {
        let Some(kubeconfig) = kubeconfig else {
            return engaged.remove(clusters, &cluster).await;
        };
        if engaged.unchanged(&cluster, &kubeconfig) {
            return Ok(());
        }
        let origin = format!("Secret {}/{cluster}", self.namespace);
        match self.config_of(&cluster, &kubeconfig, &origin).await {
            Ok(config) => {
                engaged
                    .apply(clusters, cluster, kubeconfig, config, &origin)
                    .await
            }
            Err(error) => engaged.refuse(clusters, &cluster, error).await,
        }
    }

    /// The connection settings of `kubeconfig`.
    async fn config_of(
        &self,
        cluster: &ClusterName,
        kubeconfig: &[u8],
        origin: &str,
    ) -> Result<kube::Config, MultiClusterError> {
        let invalid = |reason: String| credentials::credentials(cluster, origin, reason);
        if kubeconfig.is_empty() {
            return Err(invalid(format!("no data under the key {:?}", self.key)));
        }
        let text = std::str::from_utf8(kubeconfig)
            .map_err(|e| invalid(format!("the kubeconfig is not UTF-8: {e}")))?;
        let parsed = kube::config::Kubeconfig::from_yaml(text)
            .map_err(|e| invalid(format!("not a kubeconfig: {e}")))?;
        credentials::config_of(cluster, parsed, None, origin).await
    }
}
