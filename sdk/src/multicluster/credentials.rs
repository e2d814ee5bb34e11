//! A member cluster's connection settings from a kubeconfig, and the
//! client made of them: what every kubeconfig-based provider shares.

use std::sync::Arc;

use parking_lot::RwLock;

use super::error::MultiClusterError;
use crate::cluster_request::ClusterName;

/// The settings of `cluster` from the context `context` (the current one
/// if `None`) of `kubeconfig`; `origin` (a file, a Secret) prefixes the
/// error's reason.
pub(super) async fn config_of(
    cluster: &ClusterName,
    kubeconfig: kube::config::Kubeconfig,
    context: Option<String>,
    origin: &str,
) -> Result<kube::Config, MultiClusterError> {
    let options = kube::config::KubeConfigOptions {
        context,
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| {
            credentials(
                cluster,
                origin,
                format!("the kubeconfig does not load: {e}"),
            )
        })
}

/// The client of `cluster` over `config`.
pub(super) fn client_of(
    cluster: &ClusterName,
    config: kube::Config,
    origin: &str,
) -> Result<kube::Client, MultiClusterError> {
    kube::Client::try_from(config)
        .map_err(|e| credentials(cluster, origin, format!("cannot make a client: {e}")))
}

/// [`MultiClusterError::Credentials`] for `cluster`, its reason prefixed
/// with `origin` (if any).
pub(super) fn credentials(
    cluster: &ClusterName,
    origin: &str,
    reason: String,
) -> MultiClusterError {
    let reason = if origin.is_empty() {
        reason
    } else {
        format!("{origin}: {reason}")
    };
    MultiClusterError::Credentials {
        cluster: cluster.clone(),
        reason,
    }
}

/// Where a cluster's API server is and how it is trusted: a kubeconfig
/// that changes but keeps these rotates credentials to the same server
/// (its cache stays valid); one that changes them is another server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Endpoint {
    url: String,
    root_cert: Option<Vec<Vec<u8>>>,
    tls_server_name: Option<String>,
    accept_invalid_certs: bool,
}

impl Endpoint {
    /// The endpoint `config` reaches.
    pub(super) fn of(config: &kube::Config) -> Self {
        Self {
            url: config.cluster_url.to_string(),
            root_cert: config.root_cert.clone(),
            tls_server_name: config.tls_server_name.clone(),
            accept_invalid_certs: config.accept_invalid_certs,
        }
    }
}

/// The client a member's cache, informers and reconcilers share, and the
/// handle that swaps the credentials under it: each request goes through
/// the client current when it is sent, so after a swap every new list,
/// watch and write of the member uses the new credentials (a watch already
/// open runs on until it ends and is opened again), and nothing cached is
/// lost.
pub(super) fn swappable(client: kube::Client) -> (kube::Client, CredentialSwap) {
    let namespace = client.default_namespace().to_owned();
    let current = Arc::new(RwLock::new(client));
    let through = Arc::clone(&current);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = through.read().clone();
        async move { client.send(request).await }
    });
    (
        kube::Client::new(service, namespace),
        CredentialSwap(current),
    )
}

/// Swaps the client under a [`swappable`] one.
#[derive(Clone)]
pub(super) struct CredentialSwap(Arc<RwLock<kube::Client>>);

impl CredentialSwap {
    /// From now on, requests go through `client`.
    pub(super) fn swap(&self, client: kube::Client) {
        *self.0.write() = client;
    }
}
