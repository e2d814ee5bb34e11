//! [`KubeconfigSecrets`]: clusters from kubeconfig Secrets in a hub
//! namespace, joining, changing credentials and leaving as their Secrets do.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Secret;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::credentials::{self, Endpoint};
use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Provider};
use crate::cache::{InformerEvent, Scope, SharedCache, handler_fn};
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

/// What a Secret event means for its cluster: its kubeconfig now, or gone.
type Change = (ClusterName, Option<Vec<u8>>);

/// An engaged cluster's kubeconfig and the endpoint it reaches.
struct Engaged {
    kubeconfig: Vec<u8>,
    endpoint: Endpoint,
}

impl Provider for KubeconfigSecrets {
    async fn run(
        self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> Result<(), ProviderError> {
        let cache = SharedCache::builder(self.hub.clone())
            .read_your_writes(false)
            .build();
        let scope = Scope::<Secret>::all()
            .namespace(self.namespace.clone())
            .labels(format!("{}=true", self.label));
        let informer = cache.informer_for(scope)?;
        let (changes, mut pending) = mpsc::unbounded_channel::<Change>();
        let key = self.key.clone();
        informer.add_event_handler(handler_fn(move |event: InformerEvent<Secret>| {
            let change = match &event {
                InformerEvent::Add { obj, .. } | InformerEvent::Update { new: obj, .. } => {
                    obj.metadata.name.clone().map(|name| {
                        let kubeconfig = obj
                            .data
                            .as_ref()
                            .and_then(|d| d.get(&key))
                            .map(|b| b.0.clone());
                        (
                            ClusterName::from(name),
                            Some(kubeconfig.unwrap_or_default()),
                        )
                    })
                }
                InformerEvent::Delete { obj } => obj
                    .object()
                    .metadata
                    .name
                    .clone()
                    .map(|name| (ClusterName::from(name), None)),
            };
            if let Some(change) = change {
                let _ = changes.send(change);
            }
        }))?;
        cache.start()?;
        let mut engaged: HashMap<ClusterName, Engaged> = HashMap::new();
        let result = loop {
            let change = tokio::select! {
                () = stop.cancelled() => break Ok(()),
                change = pending.recv() => change,
            };
            let Some((cluster, kubeconfig)) = change else {
                break Ok(());
            };
            match self
                .apply(&clusters, &mut engaged, cluster, kubeconfig)
                .await
            {
                Err(MultiClusterError::FleetStopped) => break Ok(()),
                Err(error) => tracing::error!(%error, "kubeconfig Secret not applied"),
                Ok(()) => {}
            }
        };
        cache.stop_and_wait().await;
        result
    }
}

impl KubeconfigSecrets {
    /// Engages, swaps the credentials of, or disengages `cluster` for its
    /// Secret's `kubeconfig` (`None`: the Secret is gone); unchanged bytes
    /// do nothing. New credentials to the same server (URL and trust)
    /// keep the cluster's caches; to another server, it is engaged again.
    async fn apply(
        &self,
        clusters: &ClusterSink,
        engaged: &mut HashMap<ClusterName, Engaged>,
        cluster: ClusterName,
        kubeconfig: Option<Vec<u8>>,
    ) -> Result<(), MultiClusterError> {
        let Some(kubeconfig) = kubeconfig else {
            if engaged.remove(&cluster).is_some() {
                clusters.disengage(&cluster).await?;
            }
            return Ok(());
        };
        if engaged.get(&cluster).map(|e| &e.kubeconfig) == Some(&kubeconfig) {
            return Ok(());
        }
        let (endpoint, client) = match self.client_of(&cluster, &kubeconfig).await {
            Ok(made) => made,
            Err(error) => {
                // Credentials that no longer load: the old ones are not trusted either.
                if engaged.remove(&cluster).is_some() {
                    clusters.disengage(&cluster).await?;
                }
                return Err(error);
            }
        };
        let same_server = engaged
            .get(&cluster)
            .is_some_and(|e| e.endpoint == endpoint);
        if !same_server
            || !clusters
                .update_credentials(&cluster, client.clone())
                .await?
        {
            clusters.engage(cluster.clone(), client).await?;
        }
        engaged.insert(
            cluster,
            Engaged {
                kubeconfig,
                endpoint,
            },
        );
        Ok(())
    }

    /// The endpoint and client of `kubeconfig`.
    async fn client_of(
        &self,
        cluster: &ClusterName,
        kubeconfig: &[u8],
    ) -> Result<(Endpoint, kube::Client), MultiClusterError> {
        let origin = format!("Secret {}/{cluster}", self.namespace);
        let invalid = |reason: String| credentials::credentials(cluster, &origin, reason);
        if kubeconfig.is_empty() {
            return Err(invalid(format!("no data under the key {:?}", self.key)));
        }
        let text = std::str::from_utf8(kubeconfig)
            .map_err(|e| invalid(format!("the kubeconfig is not UTF-8: {e}")))?;
        let parsed = kube::config::Kubeconfig::from_yaml(text)
            .map_err(|e| invalid(format!("not a kubeconfig: {e}")))?;
        let config = credentials::config_of(cluster, parsed, None, &origin).await?;
        let endpoint = Endpoint::of(&config);
        Ok((endpoint, credentials::client_of(cluster, config, &origin)?))
    }
}
