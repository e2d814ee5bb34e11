//! Typed errors of `opkit::manager`.

use std::time::Duration;

use super::runnable::BoxError;
use crate::cache::CacheError;
use crate::config::ConfigError;
use crate::controller::ControllerError;
use crate::leader::LeaderError;

/// Why a [`Manager`](super::Manager) could not be built, or why it stopped
/// other than by a requested shutdown.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// No cluster connection could be loaded (kubeconfig / in-cluster).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The connection settings load but no client can be made from them
    /// (TLS or auth setup).
    #[error("cannot create a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// The leader-election options are invalid.
    #[error("invalid leader election options: {0}")]
    LeaderElection(#[source] LeaderError),
    /// Leader election was asked for, but no namespace was given for the
    /// Lease and the connection has none to default to.
    #[error(
        "leader election needs a namespace for its Lease: set LeaderElection::namespace \
         (in a cluster it defaults to the pod's namespace)"
    )]
    NoLeaseNamespace,
    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// The sharding options are invalid.
    #[error("invalid sharding options: {0}")]
    Sharding(#[source] crate::shard::ShardError),
    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// Both sharding and leader election were asked for: with sharding
    /// every replica reconciles its share, so there is no leader to elect.
    #[error("sharding and leader election exclude each other: choose one")]
    ShardingWithLeaderElection,
    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// A multicluster controller could not be added, or the fleet of
    /// clusters stopped with an error.
    #[error(transparent)]
    MultiCluster(crate::multicluster::MultiClusterError),
    /// An HTTP server address could not be bound.
    #[error(
        "cannot listen on {address} for the {server} server: {source}; \
         choose another address, or \"0\" to turn the server off"
    )]
    Bind {
        /// `"metrics"` or `"health probe"`.
        server: &'static str,
        /// The address as given.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An HTTP server stopped with an error while serving.
    #[error("the {server} server failed: {source}")]
    Serve {
        /// `"metrics"`, `"health probe"` or `"metrics and health probe"`.
        server: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    #[cfg(feature = "secure-metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "secure-metrics")))]
    /// The secure metrics server's certificate could not be made or read
    /// (see [`SecureMetrics`](super::SecureMetrics)).
    #[error("secure metrics (HTTPS /metrics): {source}")]
    MetricsCertificate {
        /// Why (the certificate files are read as the webhook server's are).
        #[source]
        source: crate::webhook::WebhookError,
    },
    #[cfg(feature = "webhook")]
    #[cfg_attr(docsrs, doc(cfg(feature = "webhook")))]
    /// The webhook server could not be set up (certificate, address) or
    /// failed.
    #[error(transparent)]
    Webhook(crate::webhook::WebhookError),
    /// Two controllers with the same name were added (their metrics and
    /// logs would be indistinguishable).
    #[error(
        "a controller named {name:?} was already added; give one of them another name with \
         Controller::name"
    )]
    DuplicateController {
        /// The name.
        name: String,
    },
    /// A controller failed (a watch could not be registered, or its caches
    /// did not sync in time).
    #[error(transparent)]
    Controller(#[from] ControllerError),
    /// The cache cannot start: a watched kind is not served (its CRD is not
    /// installed) or the API server cannot be reached; the error says what
    /// to do.
    #[error("cannot start: {0}")]
    Start(#[source] CacheError),
    /// The shared cache failed to start or to sync for the runnables.
    #[error("the shared cache failed: {0}")]
    Cache(#[source] CacheError),
    /// A runnable returned an error.
    #[error("runnable {name} failed: {source}")]
    Runnable {
        /// The runnable's name.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// A runnable, a controller's task or an HTTP server panicked.
    #[error("{name} panicked")]
    Panicked {
        /// The runnable's or controller's name, or `HTTP server`.
        name: String,
    },
    /// The signal handlers could not be installed.
    #[error("cannot listen for SIGTERM / SIGINT: {0}")]
    Signal(#[source] std::io::Error),
    /// This replica led and lost its Lease (it could not renew in time, or
    /// another replica holds it). Its controllers were stopped at once;
    /// exit so that the process restarts with clean state.
    #[error(
        "leader election lost: Lease {lease} could not be renewed; controllers were stopped, \
         exit so the process restarts"
    )]
    LeaderElectionLost {
        /// The Lease's namespace/name.
        lease: String,
    },
    /// At shutdown, some controllers or runnables did not finish within the
    /// graceful shutdown timeout; they were abandoned.
    #[error(
        "did not stop within the graceful shutdown timeout of {timeout:?}; still running: {}",
        running.join(", ")
    )]
    ShutdownTimeout {
        /// The timeout.
        timeout: Duration,
        /// What was still running (controllers and runnables by name).
        running: Vec<String>,
    },
}
