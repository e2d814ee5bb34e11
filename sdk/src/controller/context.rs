//! [`Context`]: what a reconcile can read and write through.

use std::sync::Arc;

use kube::Resource;
use serde::de::DeserializeOwned;

use crate::cache::{CacheError, SharedCache};
use crate::client::EventRecorder;
use crate::reconcile::Request;

/// Shared by every reconcile of one controller.
#[derive(Debug)]
pub(crate) struct ControllerShared {
    pub name: String,
    pub cache: SharedCache,
    pub recorder: EventRecorder,
}

/// Handed to each [`reconcile`](crate::reconcile::Reconcile::reconcile):
/// cache-backed reads (no API calls), the client for writes, an Event
/// recorder, and the controller's name.
#[derive(Debug, Clone)]
pub struct Context {
    shared: Arc<ControllerShared>,
    request: Request,
}

impl Context {
    pub(crate) fn new(shared: Arc<ControllerShared>, request: Request) -> Self {
        Self { shared, request }
    }

    /// The object this reconcile is for, from the cache (`None` once deleted).
    pub fn get<K>(&self) -> Result<Option<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.get_named(self.request.namespace.as_deref(), &self.request.name)
    }

    /// Any cached object of a watched kind.
    pub fn get_named<K>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.shared.cache.get::<K>(namespace, name)
    }

    /// Cached objects of a watched kind in `namespace` (`None`: all).
    pub fn list<K>(&self, namespace: Option<&str>) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.shared.cache.list::<K>(namespace)
    }

    /// Cached objects of a watched kind whose `index` includes `value`.
    pub fn by_index<K>(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.shared.cache.by_index::<K>(index, value)
    }

    /// A client for writes (and reads the cache does not hold).
    pub fn client(&self) -> kube::Client {
        self.shared.cache.client().clone()
    }

    /// The shared cache.
    pub fn cache(&self) -> &SharedCache {
        &self.shared.cache
    }

    /// Records Kubernetes Events (events.k8s.io/v1) about objects, reported
    /// by this controller; repeats within a window fold into one Event's
    /// series. Publishing never blocks the reconcile.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn example(ctx: &opkit::controller::Context, cm: &ConfigMap) {
    /// ctx.recorder().normal(cm, "Synced", "Reconcile", "settings applied");
    /// # }
    /// ```
    pub fn recorder(&self) -> &EventRecorder {
        &self.shared.recorder
    }

    /// The request being reconciled.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.shared.name
    }
}
