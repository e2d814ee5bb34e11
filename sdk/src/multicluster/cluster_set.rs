//! [`ClusterSet`]: clusters added and removed by the program itself (tests
//! over several control planes, or a source of its own).

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Provider};
use crate::cluster_request::ClusterName;

/// What a [`ClusterSetHandle`] asks.
enum Change {
    Add {
        cluster: ClusterName,
        client: kube::Client,
        done: oneshot::Sender<Result<(), MultiClusterError>>,
    },
    Remove {
        cluster: ClusterName,
        done: oneshot::Sender<Result<bool, MultiClusterError>>,
    },
}

/// A provider of the clusters its [`ClusterSetHandle`] adds and removes:
/// what a test engages its control planes with (one
/// `opkit_envtest::ControlPlane` per member), and the simplest provider
/// to drive from a source of one's own.
///
/// ```no_run
/// use opkit::multicluster::{ClusterSet, Fleet};
///
/// # async fn doc(east: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let (clusters, handle) = ClusterSet::new();
/// let fleet = Fleet::new(clusters);
/// tokio::spawn(fleet.run(std::future::pending()));
/// handle.add("east", east).await?; // engaged: its watches are registered
/// handle.remove("east").await?; // disengaged: none of its reconciles runs any more
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClusterSet {
    changes: mpsc::UnboundedReceiver<Change>,
}

/// Adds clusters to and removes them from a [`ClusterSet`]'s fleet.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct ClusterSetHandle {
    changes: mpsc::UnboundedSender<Change>,
}

impl std::fmt::Debug for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Add { cluster, .. } => write!(f, "Add({cluster})"),
            Self::Remove { cluster, .. } => write!(f, "Remove({cluster})"),
        }
    }
}

impl ClusterSet {
    /// An empty set and its handle.
    pub fn new() -> (Self, ClusterSetHandle) {
        let (changes, receiver) = mpsc::unbounded_channel();
        (Self { changes: receiver }, ClusterSetHandle { changes })
    }
}

impl ClusterSetHandle {
    /// Engages `cluster` through `client` (again, over the new client, if
    /// it is engaged); returns once its watches are registered. Waits for
    /// the fleet to run.
    pub async fn add(
        &self,
        cluster: impl Into<ClusterName>,
        client: kube::Client,
    ) -> Result<(), MultiClusterError> {
        let (done, answer) = oneshot::channel();
        let change = Change::Add {
            cluster: cluster.into(),
            client,
            done,
        };
        self.changes
            .send(change)
            .map_err(|_| MultiClusterError::FleetStopped)?;
        answer.await.map_err(|_| MultiClusterError::FleetStopped)?
    }

    /// Disengages `cluster`; returns once none of its reconciles runs and
    /// its informers stopped (`Ok(false)`: it was not engaged).
    pub async fn remove(&self, cluster: impl Into<ClusterName>) -> Result<bool, MultiClusterError> {
        let (done, answer) = oneshot::channel();
        let change = Change::Remove {
            cluster: cluster.into(),
            done,
        };
        self.changes
            .send(change)
            .map_err(|_| MultiClusterError::FleetStopped)?;
        answer.await.map_err(|_| MultiClusterError::FleetStopped)?
    }
}

impl Provider for ClusterSet {
    async fn run(
        mut self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> Result<(), ProviderError> {
        loop {
            let change = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                change = self.changes.recv() => change,
            };
            match change {
                None => {
                    // every handle is gone: the set stays as it is
                    stop.cancelled().await;
                    return Ok(());
                }
                Some(Change::Add {
                    cluster,
                    client,
                    done,
                }) => {
                    let _ = done.send(clusters.engage(cluster, client).await);
                }
                Some(Change::Remove { cluster, done }) => {
                    let _ = done.send(clusters.disengage(&cluster).await);
                }
            }
        }
    }
}
