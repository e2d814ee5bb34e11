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
    any_informer::AnyInformer,
    error::{CacheError, ListFailure, ListFailures},
    informer::ListWatch,
    shared_cache::SharedCache,
};

/// What an informer lists, enough to name what is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListTarget {
    api_version: String,
    path: String,
}

impl ListTarget {
    pub(crate) fn of<K>(lw: &ListWatch<K>) -> Self {
        Self {
            api_version: lw.api_version().to_owned(),
            path: lw.url_path().to_owned(),
        }
    }

    /// `<plural>.<group>` when the resource looks like a custom resource:
    /// a group with a dot that is not one of Kubernetes' own (`*.k8s.io`).
    fn crd_name(&self) -> Option<String> {
        let (group, _version) = self.api_version.split_once('/')?;
        if !group.contains('.') || group == "k8s.io" || group.ends_with(".k8s.io") {
            return None;
        }
        let plural = self.path.rsplit('/').next().filter(|p| !p.is_empty())?;
        Some(format!("{plural}.{group}"))
    }
}

/// One informer's pending state for an error or `/readyz`: its description,
/// then why it has not synced (not started, or the last list/watch error).
pub(super) fn pending_description(informer: &dyn AnyInformer) -> String {
    let mut s = informer.describe();
    if !informer.is_started() {
        s.push_str(": not started (call SharedCache::start)");
    } else if let Some(e) = informer.last_error() {
        s.push_str(": ");
        s.push_str(&e);
    } else {
        s.push_str(": waiting for the initial list");
    }
    s
}

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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_names_only_for_custom_groups() {
        let t = |api_version: &str, path: &str| ListTarget {
            api_version: api_version.into(),
            path: path.into(),
        };
        assert_eq!(
            t(
                "cache.example.com/v1",
                "/apis/cache.example.com/v1/namespaces/x/memcacheds"
            )
            .crd_name()
            .as_deref(),
            Some("memcacheds.cache.example.com")
        );
        assert_eq!(t("v1", "/api/v1/configmaps").crd_name(), None);
        assert_eq!(t("apps/v1", "/apis/apps/v1/deployments").crd_name(), None);
        assert_eq!(
            t(
                "networking.k8s.io/v1",
                "/apis/networking.k8s.io/v1/ingresses"
            )
            .crd_name(),
            None
        );
    }
}
