//! The shared cache's view of an informer of any kind.

use std::any::Any;

use tokio::sync::watch;

use super::cacheable::Cacheable;
use super::{
    error::{CacheError, ListFailures},
    informer::{ListWatch, SharedIndexInformer},
};

/// An informer of any kind, as the shared cache keeps it.
pub(super) trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &(dyn Any + Send + Sync);
    fn start(&self) -> Result<(), CacheError>;
    fn stop(&self);
    fn wait_stopped(&self) -> futures::future::BoxFuture<'static, ()>;
    fn subscribe_synced(&self) -> watch::Receiver<bool>;
    fn describe(&self) -> String;
    fn last_error(&self) -> Option<String>;
    fn is_started(&self) -> bool;
    fn list_watch_target(&self) -> ListTarget;
    fn subscribe_list_failures(&self) -> watch::Receiver<ListFailures>;
}

impl<K> AnyInformer for SharedIndexInformer<K>
where
    K: Cacheable,
{
    fn as_any(&self) -> &(dyn Any + Send + Sync) {
        self
    }
    fn start(&self) -> Result<(), CacheError> {
        SharedIndexInformer::start(self)
    }
    fn stop(&self) {
        SharedIndexInformer::stop(self)
    }
    fn wait_stopped(&self) -> futures::future::BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.wait_stopped().await })
    }
    fn subscribe_synced(&self) -> watch::Receiver<bool> {
        SharedIndexInformer::subscribe_synced(self)
    }
    fn describe(&self) -> String {
        SharedIndexInformer::describe(self).to_string()
    }
    fn last_error(&self) -> Option<String> {
        self.metrics().last_error()
    }
    fn is_started(&self) -> bool {
        SharedIndexInformer::is_started(self)
    }
    fn list_watch_target(&self) -> ListTarget {
        ListTarget::of(self.list_watch())
    }
    fn subscribe_list_failures(&self) -> watch::Receiver<ListFailures> {
        self.metrics().subscribe_list_failures()
    }
}

/// What an informer lists, enough to name what is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListTarget {
    pub(super) api_version: String,
    pub(super) path: String,
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
    pub(super) fn crd_name(&self) -> Option<String> {
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
