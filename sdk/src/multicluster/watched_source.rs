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

/// What a provider did with each change of its source: it stops only when
/// the fleet stopped; another error is logged, once per cluster until the
/// error changes or a change of the cluster is carried out (a source
/// object whose status is updated every few seconds, with credentials
/// that keep failing the same way, is not logged at every update).
#[derive(Default)]
pub(super) struct Outcomes {
    /// The last error logged per cluster.
    reported: std::collections::HashMap<ClusterName, String>,
}

impl Outcomes {
    /// Whether the provider stops after carrying out a change of
    /// `cluster` (`what`: what could not be carried out).
    pub(super) fn fleet_stopped(
        &mut self,
        outcome: Result<(), MultiClusterError>,
        cluster: &ClusterName,
        what: &str,
    ) -> bool {
        match outcome {
            Err(MultiClusterError::FleetStopped) => true,
            Err(error) => {
                if self.first_report(cluster, error.to_string()) {
                    tracing::error!(%cluster, %error, "{what}");
                } else {
                    tracing::debug!(%cluster, %error, "{what} (as before)");
                }
                false
            }
            Ok(()) => {
                self.reported.remove(cluster);
                false
            }
        }
    }

    /// Whether `error` is new for `cluster` (remembered if so).
    fn first_report(&mut self, cluster: &ClusterName, error: String) -> bool {
        if self.reported.get(cluster) == Some(&error) {
            return false;
        }
        self.reported.insert(cluster.clone(), error);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_reported_once_until_it_changes_or_the_cluster_recovers() {
        let mut outcomes = Outcomes::default();
        let (m1, m2) = (ClusterName::new("m1"), ClusterName::new("m2"));
        assert!(outcomes.first_report(&m1, "no access provider".into()));
        assert!(!outcomes.first_report(&m1, "no access provider".into()));
        assert!(outcomes.first_report(&m2, "no access provider".into()));
        assert!(outcomes.first_report(&m1, "plugin failed".into()));
        assert!(!outcomes.fleet_stopped(Ok(()), &m1, "applied"));
        assert!(outcomes.first_report(&m1, "plugin failed".into()));
        assert!(outcomes.fleet_stopped(Err(MultiClusterError::FleetStopped), &m2, "applied"));
    }
}
