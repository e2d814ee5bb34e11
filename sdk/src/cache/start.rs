//! The cache at start: telling a failure that waiting will not fix (the
//! resource is not served, the API server cannot be reached) from one that
//! may clear (RBAC being applied, a slow server), and what `/readyz` says
//! while informers have not synced.
//!
//! ```no_run
//! use opkit::cache::CacheError;
//! use opkit::manager::{Manager, ManagerError};
//!
//! # async fn doc(manager: Manager) {
//! match manager.run().await {
//!     Err(ManagerError::Start(CacheError::CrdNotInstalled { crd, .. })) => {
//!         eprintln!("install the CRD {crd} first");
//!     }
//!     Err(ManagerError::Start(CacheError::Unreachable { url, .. })) => {
//!         eprintln!("no API server at {url}");
//!     }
//!     other => println!("{other:?}"),
//! }
//! # }
//! ```

use std::sync::Arc;

use futures::future::try_join_all;
use tokio_util::sync::CancellationToken;

use super::{
    any_informer::{AnyInformer, pending_description},
    error::{CacheError, ListFailure, ListFailures},
    shared_cache::SharedCache,
};

/// The error for `failures`, if the informer has failed `max_attempts` times
/// in a row in a way that waiting will not fix.
fn blocked(
    informer: &dyn AnyInformer,
    failures: &ListFailures,
    max_attempts: u32,
    api_url: &str,
) -> Option<CacheError> {
    if failures.consecutive < max_attempts {
        return None;
    }
    let attempts = failures.consecutive;
    let target = informer.list_watch_target();
    match failures.last.as_ref()? {
        ListFailure::NotServed => Some(match target.crd_name() {
            Some(crd) => CacheError::CrdNotInstalled {
                crd,
                informer: informer.describe(),
                attempts,
            },
            None => CacheError::KindNotServed {
                informer: informer.describe(),
                path: target.path,
                attempts,
            },
        }),
        ListFailure::Unreachable(error) => Some(CacheError::Unreachable {
            url: api_url.to_owned(),
            error: error.clone(),
            attempts,
        }),
        ListFailure::Other => None,
    }
}

/// How many failed lists of a kind (404: not served, or the API server
/// unreachable) make [`Manager::run`](crate::manager::Manager::run) fail at start. With the reflector's
/// backoff (0.8 s doubling, jittered) the 4th failure comes 5 to 11 s in.
pub const START_LIST_ATTEMPTS: u32 = 4;

impl SharedCache {
    /// Waits until every informer (of those registered now) has synced, or
    /// fails as soon as one has failed to list `max_attempts` times in a row
    /// with a 404 (the resource is not served: a CRD not installed) or a
    /// connection error (`api_url` names the server in the error). Other
    /// failures (403, 5xx) are left to the caller's sync timeout. Returns
    /// `Ok` when `cancel` fires.
    pub(crate) async fn wait_for_start(
        &self,
        max_attempts: u32,
        api_url: &str,
        cancel: &CancellationToken,
    ) -> Result<(), CacheError> {
        let informers: Vec<Arc<dyn AnyInformer>> =
            self.inner.informers.lock().values().cloned().collect();
        let each = informers.iter().map(|informer| async move {
            let mut synced = informer.subscribe_synced();
            let mut failures = informer.subscribe_list_failures();
            loop {
                if *synced.borrow_and_update() {
                    return Ok(());
                }
                let now = failures.borrow_and_update().clone();
                if let Some(error) = blocked(&**informer, &now, max_attempts, api_url) {
                    return Err(error);
                }
                tokio::select! {
                    changed = synced.changed() => if changed.is_err() {
                        return Err(CacheError::Stopped(informer.describe()));
                    },
                    changed = failures.changed() => if changed.is_err() {
                        return Err(CacheError::Stopped(informer.describe()));
                    },
                }
            }
        });
        tokio::select! {
            done = try_join_all(each) => done.map(|_| ()),
            () = cancel.cancelled() => Ok(()),
            () = self.inner.cancel.cancelled() => Err(CacheError::Stopped("the cache".into())),
        }
    }

    /// `Ok` when every informer has synced; otherwise what `/readyz` says:
    /// how many have not, and for each its description and last error.
    pub(crate) fn readiness(&self) -> Result<(), String> {
        let informers: Vec<Arc<dyn AnyInformer>> =
            self.inner.informers.lock().values().cloned().collect();
        let pending: Vec<String> = informers
            .iter()
            .filter(|i| !*i.subscribe_synced().borrow())
            .map(|i| pending_description(&**i))
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} of {} informers have not synced: {}",
            pending.len(),
            informers.len(),
            pending.join("; ")
        ))
    }

    /// How the informers stand: what a member cluster's line on the hub's
    /// `/readyz` says.
    #[cfg(feature = "multicluster")]
    pub(crate) fn sync_state(&self) -> SyncState {
        let informers: Vec<Arc<dyn AnyInformer>> =
            self.inner.informers.lock().values().cloned().collect();
        let unreachable = informers.iter().find_map(|informer| {
            let failures = informer.subscribe_list_failures().borrow().clone();
            match failures.last {
                Some(ListFailure::Unreachable(_)) if failures.consecutive > 0 => Some(
                    informer
                        .last_error()
                        .unwrap_or_else(|| "the API server cannot be reached".to_owned()),
                ),
                _ => None,
            }
        });
        if let Some(error) = unreachable {
            return SyncState::Unreachable(error);
        }
        match self.readiness() {
            Ok(()) => SyncState::Synced,
            Err(pending) => SyncState::Syncing(pending),
        }
    }
}

/// How a cache's informers stand ([`SharedCache::sync_state`]).
#[cfg(feature = "multicluster")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SyncState {
    /// Every informer synced, and none fails to reach the API server.
    Synced,
    /// Some informers have not synced yet: which, and why (as `/readyz`
    /// says of the hub's).
    Syncing(String),
    /// An informer's last list or watch could not reach the API server:
    /// that error.
    Unreachable(String),
}
