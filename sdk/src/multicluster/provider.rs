//! [`Provider`]: what discovers a fleet's clusters, and the
//! [`ClusterSink`] it tells when one joins, changes or leaves.

use std::future::Future;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::error::{MultiClusterError, ProviderError};
use crate::cluster_request::ClusterName;

/// Discovers the clusters of a fleet and tells the fleet (through the
/// [`ClusterSink`] it is handed) when one appears, changes credentials, or
/// goes: multicluster-runtime's `Provider` with its `Aware`. opkit ships
/// [`StaticClusters`](super::StaticClusters),
/// [`KubeconfigSecrets`](super::KubeconfigSecrets) and
/// [`ClusterSet`](super::ClusterSet); write your own for any other
/// source (a Cluster API `Cluster`'s kubeconfig Secret, a
/// `ClusterProfile` of the Cluster Inventory API):
///
/// ```
/// use opkit::multicluster::{ClusterName, ClusterSink, Provider, ProviderError};
/// use tokio_util::sync::CancellationToken;
///
/// /// One cluster, from the environment's kubeconfig.
/// struct FromEnv;
///
/// impl Provider for FromEnv {
///     async fn run(self, clusters: ClusterSink, stop: CancellationToken) -> Result<(), ProviderError> {
///         let client = kube::Client::try_default().await?;
///         clusters.engage(ClusterName::new("default"), client).await?;
///         stop.cancelled().await; // watch for changes here
///         Ok(())
///     }
/// }
/// ```
///
/// `run` runs until `stop` is cancelled (the fleet stops); an `Err` stops
/// the fleet. A provider whose source fails for a while (a watch that
/// breaks) should retry, not return.
pub trait Provider: Send + 'static {
    /// Discovers clusters until `stop`, engaging and disengaging them
    /// through `clusters`.
    fn run(
        self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send;
}

/// What the fleet is asked to do.
pub(super) enum Command {
    Engage {
        cluster: ClusterName,
        client: kube::Client,
        done: oneshot::Sender<Result<(), MultiClusterError>>,
    },
    Disengage {
        cluster: ClusterName,
        done: oneshot::Sender<bool>,
    },
}

/// Where a [`Provider`] tells its fleet about clusters. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ClusterSink {
    pub(super) commands: mpsc::Sender<Command>,
}

impl ClusterSink {
    /// Engages `cluster` through `client`: its caches start for every
    /// controller of the fleet, and its objects are reconciled once they
    /// synced. Returns once its watches are registered (not synced: a
    /// member that cannot be reached backs off on its own). A cluster
    /// already engaged under this name is disengaged first (new
    /// credentials: its cache is built again over the new client).
    pub async fn engage(
        &self,
        cluster: impl Into<ClusterName>,
        client: kube::Client,
    ) -> Result<(), MultiClusterError> {
        let (done, answer) = oneshot::channel();
        let command = Command::Engage {
            cluster: cluster.into(),
            client,
            done,
        };
        self.commands
            .send(command)
            .await
            .map_err(|_| MultiClusterError::FleetStopped)?;
        answer.await.map_err(|_| MultiClusterError::FleetStopped)?
    }

    /// Disengages `cluster`: its running reconciles are cancelled, its
    /// queued keys dropped, its informers and tasks stopped. Returns once
    /// that is done (the acknowledgement: no reconcile of the cluster runs
    /// after it), `Ok(false)` if it was not engaged.
    pub async fn disengage(&self, cluster: &ClusterName) -> Result<bool, MultiClusterError> {
        let (done, answer) = oneshot::channel();
        let command = Command::Disengage {
            cluster: cluster.clone(),
            done,
        };
        self.commands
            .send(command)
            .await
            .map_err(|_| MultiClusterError::FleetStopped)?;
        answer.await.map_err(|_| MultiClusterError::FleetStopped)
    }
}
