//! The shared cache's view of an informer of any kind.

use std::any::Any;

use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::{
    error::{CacheError, ListFailures},
    informer::SharedIndexInformer,
    start::ListTarget,
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
    K: Resource + DeserializeOwned + Send + Sync + 'static,
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
