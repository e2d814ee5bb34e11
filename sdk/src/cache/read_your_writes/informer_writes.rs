//! What one informer of the cache's scope tells the write tracker: the
//! changes it applied to its store, keyed as the write path keys them.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use kube::Resource;

use super::tracker::{WriteKey, WriteTracker, Written};
use super::wait::shown_in;
use crate::cache::{
    informer::{Store, WriteObserver},
    key::ObjectKey,
};

/// The [`WriteObserver`] of one informer: its kind's API version and
/// resource, and the cache's tracker.
pub(crate) struct InformerWrites {
    tracker: Arc<WriteTracker>,
    api_version: String,
    plural: String,
}

impl InformerWrites {
    /// The observer of an informer of `api_version` / `plural`.
    pub(crate) fn new(tracker: Arc<WriteTracker>, api_version: String, plural: String) -> Self {
        Self {
            tracker,
            api_version,
            plural,
        }
    }

    /// Records writes of this informer's kind from now on (in `namespace`
    /// only, for a namespaced informer), shown once `store` holds them.
    pub(crate) fn watch_store<K>(&self, store: Store<K>, namespace: Option<&str>)
    where
        K: Resource + Send + Sync + 'static,
    {
        self.tracker.watch_kind(
            &self.api_version,
            &self.plural,
            namespace,
            Arc::new(move |key: &WriteKey, written: &Written| shown_in(written, &store, key)),
        );
    }

    fn key(&self, key: &ObjectKey) -> WriteKey {
        let (namespace, name) = match key.as_str().split_once('/') {
            Some((ns, name)) => (Some(ns.to_owned()), name.to_owned()),
            None => (None, key.as_str().to_owned()),
        };
        WriteKey {
            api_version: self.api_version.clone(),
            plural: self.plural.clone(),
            namespace,
            name,
        }
    }
}

impl WriteObserver for InformerWrites {
    fn any_pending(&self) -> bool {
        self.tracker.any_pending()
    }

    fn deleted(&self, key: &ObjectKey, resource_version: Option<&str>) {
        self.tracker.note_deleted(self.key(key), resource_version);
    }

    fn applied(
        &self,
        key: &ObjectKey,
        current: Option<&ObjectMeta>,
        deleted: Option<&ObjectMeta>,
        relisted: bool,
    ) {
        self.tracker
            .observe(&self.key(key), current, deleted, relisted);
    }
}
