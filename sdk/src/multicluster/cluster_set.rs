//! [`ClusterSet`]: clusters added and removed by the program itself (tests
//! over several control planes, or a source of its own).

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Command, Provider};
use crate::cluster_request::ClusterName;

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
    commands: mpsc::UnboundedReceiver<Command>,
}

/// Adds clusters to and removes them from a [`ClusterSet`]'s fleet.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct ClusterSetHandle {
    commands: mpsc::UnboundedSender<Command>,
}

impl ClusterSet {
    /// An empty set and its handle.
    pub fn new() -> (Self, ClusterSetHandle) {
        let (commands, receiver) = mpsc::unbounded_channel();
        (Self { commands: receiver }, ClusterSetHandle { commands })
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
        let (command, answer) = Command::engage(cluster.into(), client);
        self.send(command)?;
        answer.wait().await?
    }

    /// Disengages `cluster`; returns once none of its reconciles runs and
    /// its informers stopped (`Ok(false)`: it was not engaged).
    pub async fn remove(&self, cluster: impl Into<ClusterName>) -> Result<bool, MultiClusterError> {
        let (command, answer) = Command::disengage(cluster.into());
        self.send(command)?;
        answer.wait().await
    }

    /// Hands `command` to the set's provider, which forwards it to the fleet.
    fn send(&self, command: Command) -> Result<(), MultiClusterError> {
        self.commands
            .send(command)
            .map_err(|_| MultiClusterError::FleetStopped)
    }
}

impl Provider for ClusterSet {
    async fn run(
        mut self,
        clusters: ClusterSink,
        stop: CancellationToken,
    ) -> Result<(), ProviderError> {
        loop {
            let command = tokio::select! {
                () = stop.cancelled() => return Ok(()),
                command = self.commands.recv() => command,
            };
            let Some(command) = command else {
                // every handle is gone: the set stays as it is
                stop.cancelled().await;
                return Ok(());
            };
            // The fleet answers the handle; if it stopped, the dropped
            // command tells the handle so.
            if clusters.send(command).await.is_err() {
                return Ok(());
            }
        }
    }
}
