//! Errors of [`crate::controller`].

use std::time::Duration;

/// Why a controller could not run.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A watch could not be registered on the shared cache.
    #[error("controller {controller}: cannot watch {kind}: {source}")]
    Watch {
        /// The controller.
        controller: String,
        /// The kind.
        kind: String,
        /// The cache's error.
        #[source]
        source: crate::cache::CacheError,
    },
    /// The controller's name cannot be an Event's reporting controller
    /// (it must be a DNS-1123-style qualified name, e.g. `memcached`).
    #[error("controller {controller}: cannot record Events under this name: {source}")]
    EventRecorder {
        /// The controller.
        controller: String,
        /// Why the name was refused.
        #[source]
        source: crate::client::EventError,
    },
    /// A watched kind cannot be listed and waiting will not fix it (a CRD
    /// that is not installed, an unreachable API server).
    #[error("controller {controller}: {source}")]
    Start {
        /// The controller.
        controller: String,
        /// What is missing.
        #[source]
        source: crate::cache::CacheError,
    },
    /// A cache the controller reads did not sync in time.
    #[error(
        "controller {controller}: the cache of {kind} did not sync within {timeout:?}; \
         the usual cause is missing RBAC: the controller's identity needs list and watch on {kind}"
    )]
    CacheSync {
        /// The controller.
        controller: String,
        /// The kind that did not sync.
        kind: String,
        /// How long we waited.
        timeout: Duration,
    },
    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// The controller cannot run in every cluster of a fleet as built.
    #[error("controller {controller} cannot be a multicluster controller: {reason}")]
    NotMulticluster {
        /// The controller.
        controller: String,
        /// What it uses that a fleet cannot give each cluster.
        reason: &'static str,
    },
    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// A controller with hub-side watches
    /// ([`watches_hub`](crate::controller::Controller::watches_hub)) that
    /// is not a multicluster controller.
    #[error(
        "controller {controller} maps hub objects to member clusters (watches_hub) but is not a \
         multicluster controller: call .multicluster(), or map hub objects to hub objects with watches"
    )]
    HubWatchesNeedMulticluster {
        /// The controller.
        controller: String,
    },
    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// A multicluster controller with hub-side watches run by a
    /// [`Fleet`](crate::multicluster::Fleet) that has no hub cache.
    #[error(
        "controller {controller} watches the hub (watches_hub) but its fleet has no hub: run it \
         under a Manager, or give the Fleet the hub's cache with Fleet::hub"
    )]
    NoHub {
        /// The controller.
        controller: String,
    },
    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// A controller with member-side watches
    /// ([`watches_members`](crate::controller::Controller::watches_members))
    /// run without a fleet.
    #[error(
        "controller {controller} watches member clusters (watches_members) but runs without a \
         fleet: add it to a Manager given a cluster provider (Manager::set_cluster_provider)"
    )]
    NoFleet {
        /// The controller.
        controller: String,
    },
}
