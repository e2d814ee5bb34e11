//! [`Claims`]: which of the clusters a provider offers this replica may
//! engage: all of them, or (feature `shard`) the ones its ring share
//! gives it, each under a [`ShardPermit`](crate::shard::ShardPermit) held
//! for as long as the cluster is engaged here.

#[cfg(feature = "shard")]
use std::sync::Arc;

use crate::cluster_request::ClusterName;

/// What a ring dividing a fleet's clusters publishes as the kind it
/// divides (`Cluster.multicluster.opkit.dev`): not a served kind, a name
/// for the ring's kinds annotation.
#[cfg(feature = "shard")]
const CLUSTERS_KIND: &str = "Cluster";
#[cfg(feature = "shard")]
const CLUSTERS_GROUP: &str = "multicluster.opkit.dev";

/// Who may engage which cluster.
#[derive(Debug)]
pub(super) enum Claims {
    /// Every cluster offered is engaged (one replica, or one that leads).
    All,
    /// Only the clusters this replica owns in its ring; see
    /// [`Fleet::shard_clusters`](super::Fleet::shard_clusters).
    #[cfg(feature = "shard")]
    Sharded {
        shard: crate::shard::ShardHandle,
        /// The ring's status, followed between [`Claims::changed`] calls.
        status: tokio::sync::watch::Receiver<crate::shard::ShardStatus>,
    },
}

/// The right to keep one cluster engaged here: nothing without sharding,
/// else the cluster's permit, released when the last clone is dropped
/// (after the cluster was disengaged).
#[derive(Debug, Clone, Default)]
pub(super) struct Claim {
    #[cfg(feature = "shard")]
    permit: Option<Arc<crate::shard::ShardPermit>>,
}

impl Claims {
    /// The clusters `shard`'s share gives this replica.
    #[cfg(feature = "shard")]
    pub(super) fn sharded(shard: crate::shard::ShardHandle) -> Self {
        let status = shard.subscribe();
        Self::Sharded { shard, status }
    }

    /// Says, once the fleet runs, that its ring divides clusters: published
    /// in the member Lease like a sharded controller's kind, so that another
    /// operator sharing the ring name is told apart. (A sharded manager
    /// with no multicluster controller runs no fleet, and publishes nothing.)
    pub(super) fn announce(&self) {
        #[cfg(feature = "shard")]
        if let Self::Sharded { shard, .. } = self {
            shard.register_kind(CLUSTERS_GROUP, CLUSTERS_KIND);
        }
    }

    /// A claim on `cluster` now, or `None` when another replica owns it or
    /// this one may not start it yet (its ring is acknowledging a change).
    #[cfg_attr(not(feature = "shard"), allow(unused_variables))]
    pub(super) fn claim(&self, cluster: &ClusterName) -> Option<Claim> {
        match self {
            Self::All => Some(Claim::default()),
            #[cfg(feature = "shard")]
            Self::Sharded { shard, .. } => {
                shard
                    .try_start_cluster(cluster.as_str())
                    .map(|permit| Claim {
                        permit: Some(Arc::new(permit)),
                    })
            }
        }
    }

    /// Whether every offered cluster is engaged (no sharding).
    pub(super) fn all(&self) -> bool {
        matches!(self, Self::All)
    }

    /// Completes when the ring's status changes (a cluster refused before
    /// may be claimed now); never without sharding, or once the ring ended.
    pub(super) async fn changed(&mut self) {
        match self {
            Self::All => std::future::pending().await,
            #[cfg(feature = "shard")]
            Self::Sharded { status, .. } => {
                if status.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

impl Claim {
    /// Completes when this claim lapses: the cluster moved to another
    /// replica, or this replica's ring membership can no longer vouch for
    /// it (renew deadline passed, left the ring). Never without sharding.
    pub(super) async fn lapsed(&self) {
        #[cfg(feature = "shard")]
        if let Some(permit) = &self.permit {
            permit.revoked().await;
            return;
        }
        std::future::pending::<()>().await;
    }

    /// Whether this claim can lapse (it holds a permit).
    pub(super) fn can_lapse(&self) -> bool {
        #[cfg(feature = "shard")]
        if self.permit.is_some() {
            return true;
        }
        false
    }
}
