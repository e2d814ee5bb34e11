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

/// What the fleet is asked to do, with where its answer goes.
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
    UpdateCredentials {
        cluster: ClusterName,
        client: kube::Client,
        done: oneshot::Sender<bool>,
    },
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Engage { cluster, .. } => write!(f, "Engage({cluster})"),
            Self::Disengage { cluster, .. } => write!(f, "Disengage({cluster})"),
            Self::UpdateCredentials { cluster, .. } => write!(f, "UpdateCredentials({cluster})"),
        }
    }
}

/// The answer to a [`Command`], once the fleet has carried it out.
pub(super) struct Answer<T>(oneshot::Receiver<T>);

impl<T> Answer<T> {
    /// The answer; [`MultiClusterError::FleetStopped`] if the fleet dropped
    /// the command (it stopped, or never ran).
    pub(super) async fn wait(self) -> Result<T, MultiClusterError> {
        self.0.await.map_err(|_| MultiClusterError::FleetStopped)
    }
}

impl Command {
    /// Engage `cluster` through `client`.
    pub(super) fn engage(
        cluster: ClusterName,
        client: kube::Client,
    ) -> (Self, Answer<Result<(), MultiClusterError>>) {
        let (done, answer) = oneshot::channel();
        let command = Self::Engage {
            cluster,
            client,
            done,
        };
        (command, Answer(answer))
    }

    /// Disengage `cluster`.
    pub(super) fn disengage(cluster: ClusterName) -> (Self, Answer<bool>) {
        let (done, answer) = oneshot::channel();
        (Self::Disengage { cluster, done }, Answer(answer))
    }
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
        let (command, answer) = Command::engage(cluster.into(), client);
        self.send(command).await?;
        answer.wait().await?
    }

    /// Disengages `cluster`: its running reconciles are cancelled, its
    /// queued keys dropped, its informers and tasks stopped. Returns once
    /// that is done (the acknowledgement: no reconcile of the cluster runs
    /// after it), `Ok(false)` if it was not engaged.
    pub async fn disengage(&self, cluster: &ClusterName) -> Result<bool, MultiClusterError> {
        let (command, answer) = Command::disengage(cluster.clone());
        self.send(command).await?;
        answer.wait().await
    }

    /// Swaps the credentials of the engaged `cluster` for `client`'s,
    /// keeping its caches: `client` must reach the same API server, trusted
    /// the same way, as the one `cluster` was engaged with (new credentials
    /// to another server need [`engage`](Self::engage), which builds the
    /// caches again). Every later request of the cluster's informers,
    /// reconcilers and Event recorders goes through `client`; a watch
    /// already open runs on until it ends and is opened again with it. No
    /// object is listed again and nothing is reconciled for the swap.
    /// `Ok(false)` if `cluster` is not engaged (nothing changed).
    ///
    /// ```
    /// use opkit::multicluster::{ClusterName, ClusterSink, MultiClusterError};
    ///
    /// /// The token of `cluster` was renewed: same server, same CA.
    /// async fn token_renewed(
    ///     clusters: &ClusterSink,
    ///     cluster: ClusterName,
    ///     renewed: kube::Client,
    /// ) -> Result<(), MultiClusterError> {
    ///     if !clusters.update_credentials(&cluster, renewed.clone()).await? {
    ///         clusters.engage(cluster, renewed).await?; // it was not engaged
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub async fn update_credentials(
        &self,
        cluster: &ClusterName,
        client: kube::Client,
    ) -> Result<bool, MultiClusterError> {
        let (done, answer) = oneshot::channel();
        let command = Command::UpdateCredentials {
            cluster: cluster.clone(),
            client,
            done,
        };
        self.send(command).await?;
        Answer(answer).wait().await
    }

    /// Hands `command` to the fleet (its answer comes through the command).
    pub(super) async fn send(&self, command: Command) -> Result<(), MultiClusterError> {
        self.commands
            .send(command)
            .await
            .map_err(|_| MultiClusterError::FleetStopped)
    }
}
