//! A read waiting until the cache shows this process's writes.

use std::{sync::Arc, time::Duration};

use kube::Resource;
use tokio::sync::watch;

use super::tracker::{WriteKey, WriteTracker, Written};
use crate::cache::error::{CacheError, UnobservedWrite};
use crate::cache::informer::Store;

/// The informer side a read waits on: its store, and a channel the
/// informer never sends on, closed when it is gone.
pub(crate) struct Observed<K> {
    pub store: Store<K>,
    pub alive: watch::Receiver<()>,
    pub informer: String,
}

/// Whether `store` shows `written` of `key`. An object whose current
/// version does not decode is held as its metadata: that is what the cache
/// shows of it (never "absent", which would count a write that removes the
/// last finalizer as caught up while the cache still holds the object).
pub(crate) fn shown_in<K>(written: &Written, store: &Store<K>, key: &WriteKey) -> bool
where
    K: Resource + Send + Sync + 'static,
{
    match store.try_get(key.namespace.as_deref(), &key.name) {
        Ok(current) => written.observed_in(current.as_deref().map(Resource::meta)),
        Err(CacheError::Undecodable(bad)) => written.observed_in(Some(bad.metadata())),
        Err(_) => false,
    }
}

/// Waits until the cache shows every write in `pending` (see the module
/// docs), at most until `deadline`; each write caught up is forgotten, and
/// so is the one that timed out.
pub(crate) async fn wait_observed<K>(
    tracker: &Arc<WriteTracker>,
    mut observed: Observed<K>,
    pending: Vec<(WriteKey, Written, u64)>,
    wait: Duration,
) -> Result<(), CacheError>
where
    K: Resource + Send + Sync + 'static,
{
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribed before the first check: every record leaving from here on
    // wakes us.
    let mut resolved = tracker.subscribe_resolved();
    for (key, written, seq) in pending {
        loop {
            if shown_in(&written, &observed.store, &key) {
                tracker.forget(&key, seq);
                break;
            }
            // The informer may have dropped it (a deletion after our write).
            if tracker.pending(&key).is_none_or(|(_, s)| s != seq) {
                break;
            }
            tokio::select! {
                // The tracker lives while we hold it: this only wakes.
                _ = resolved.changed() => {}
                // Never sent on: it ends only when the informer is gone.
                _ = observed.alive.changed() => {
                    return Err(CacheError::Stopped(observed.informer.clone()));
                }
                () = tokio::time::sleep_until(deadline) => {
                    tracker.forget(&key, seq);
                    tracing::warn!(
                        informer = %observed.informer,
                        namespace = ?key.namespace,
                        name = %key.name,
                        ?written,
                        "the cache did not show this process's write in time"
                    );
                    return Err(CacheError::WriteNotObserved(Box::new(UnobservedWrite {
                        informer: observed.informer.clone(),
                        object: match &key.namespace {
                            Some(ns) => format!("{ns}/{}", key.name),
                            None => key.name.clone(),
                        },
                        written: match written {
                            Written::Object { resource_version, .. } => {
                                format!("resourceVersion {resource_version}")
                            }
                            Written::Deleted { .. } => "its deletion".to_owned(),
                        },
                        waited: wait,
                    })));
                }
            }
        }
    }
    Ok(())
}
