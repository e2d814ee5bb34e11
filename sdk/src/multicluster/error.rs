//! Typed errors of `opkit::multicluster`.

use crate::cluster_request::ClusterName;
use crate::controller::ControllerError;

/// What a [`Provider`](super::Provider) may fail with: any error (it stops
/// the fleet).
pub type ProviderError = Box<dyn std::error::Error + Send + Sync>;

impl From<ControllerError> for MultiClusterError {
    fn from(error: ControllerError) -> Self {
        Self::Controller(Box::new(error))
    }
}

/// Why a fleet could not engage a cluster, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum MultiClusterError {
    /// The fleet is not running (it stopped, or never ran): nothing was
    /// engaged or disengaged.
    #[error("the fleet is not running")]
    FleetStopped,
    /// A controller could not be engaged on a cluster (its watches could
    /// not be registered on the cluster's cache); the cluster is not
    /// engaged, and the other clusters are not affected.
    #[error("cannot engage cluster {cluster}: {source}")]
    Engage {
        /// The cluster.
        cluster: ClusterName,
        /// Why.
        #[source]
        source: Box<ControllerError>,
    },
    /// A controller cannot be added to a fleet (see
    /// [`ControllerError::NotMulticluster`]), or its hub-side watches
    /// cannot be registered (see [`ControllerError::NoHub`]).
    #[error(transparent)]
    Controller(Box<ControllerError>),
    /// Two controllers of one fleet have the same name.
    #[error("a controller named {name} was already added to the fleet")]
    DuplicateController {
        /// The name.
        name: String,
    },
    /// A cluster's credentials cannot be turned into a client.
    #[error("cluster {cluster}: {reason}")]
    Credentials {
        /// The cluster.
        cluster: ClusterName,
        /// What is wrong with its kubeconfig or connection settings.
        reason: String,
    },
    /// A [`ClusterProfileAccess`](super::ClusterProfileAccess) (the
    /// access provider file) cannot be read or parsed.
    #[error("{origin}: not an access provider configuration: {reason}")]
    AccessConfig {
        /// The file, or what the JSON came from.
        origin: String,
        /// What is wrong.
        reason: String,
    },
    /// Multicluster controllers (or a hub controller watching the
    /// members) were added to a manager, but no cluster provider
    /// ([`Manager::set_cluster_provider`](crate::manager::Manager::set_cluster_provider)).
    #[error(
        "multicluster controllers (or watches of member clusters) were added, but no cluster \
         provider: call Manager::set_cluster_provider"
    )]
    NoProvider,
    /// The provider failed; the fleet stopped.
    #[error("the cluster provider failed: {0}")]
    Provider(#[source] ProviderError),
}
