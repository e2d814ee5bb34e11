//! [`WatchedSource`]: the objects on the hub that a provider learns its
//! clusters from (kubeconfig Secrets, `ClusterProfile`s), watched through
//! one informer and handed over one change at a time, and what a change's
//! outcome means for the provider's loop.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error::{MultiClusterError, ProviderError};
use crate::cache::{Cacheable, InformerEvent, Scope, SharedCache, handler_fn};
use crate::cluster_request::ClusterName;

/// One object's change: its cluster, and the object now (`None`: deleted).
type Change<K> = (ClusterName, Option<Arc<K>>);

/// A scope of objects on the hub, each naming one cluster, watched until
/// [`stop`](Self::stop).
pub(super) struct WatchedSource<K> {
    cache: SharedCache,
    pending: mpsc::UnboundedReceiver<Change<K>>,
}

impl<K: Cacheable> WatchedSource<K> {
    /// Starts watching `scope` through `hub`; `cluster_of` names the
    /// cluster of an object (`None`: not one, ignored).
    pub(super) fn watch(
        hub: kube::Client,
        scope: Scope<K>,
        cluster_of: fn(&K) -> Option<ClusterName>,
    ) -> Result<Self, ProviderError> {
        let cache = SharedCache::builder(hub).read_your_writes(false).build();
        let informer = cache.informer_for(scope)?;
        let (changes, pending) = mpsc::unbounded_channel::<Change<K>>();
        informer.add_event_handler(handler_fn(move |event: InformerEvent<K>| {
            let change = match event {
                InformerEvent::Add { obj, .. } | InformerEvent::Update { new: obj, .. } => {
                    cluster_of(&obj).map(|cluster| (cluster, Some(obj)))
                }
                InformerEvent::Delete { obj } => cluster_of(obj.object()).map(|c| (c, None)),
            };
            if let Some(change) = change {
                let _ = changes.send(change);
            }
        }))?;
        cache.start()?;
        Ok(Self { cache, pending })
    }

    /// The next change, in the order the hub made them; `None` once `stop`
    /// is cancelled.
    pub(super) async fn next(&mut self, stop: &CancellationToken) -> Option<Change<K>> {
        tokio::select! {
            () = stop.cancelled() => None,
            change = self.pending.recv() => change,
        }
    }

    /// Stops the watch and waits for its tasks.
    pub(super) async fn stop(self) {
        self.cache.stop_and_wait().await;
    }
}

/// Whether a provider stops after carrying out a change of `cluster`
/// (`what`: what could not be carried out): only when the fleet stopped;
/// another error is logged, and the next change is taken.
pub(super) fn fleet_stopped(
    outcome: Result<(), MultiClusterError>,
    cluster: &ClusterName,
    what: &str,
) -> bool {
    match outcome {
        Err(MultiClusterError::FleetStopped) => true,
        Err(error) => {
            tracing::error!(%cluster, %error, "{what}");
            false
        }
        Ok(()) => false,
    }
}
