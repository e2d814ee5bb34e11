//! Where a reflector writes what it lists and watches: the
//! [`ReflectorStore`] trait, implemented by the [`DeltaFifo`].

use std::sync::Arc;

use kube::Resource;

use super::delta_fifo::DeltaFifo;
use crate::cache::undecodable::UndecodableObject;

/// Where the reflector writes what it sees. Implemented by [`DeltaFifo`].
pub trait ReflectorStore<K>: Send + Sync {
    /// A watch `ADDED` event.
    fn add(&self, obj: Arc<K>);
    /// A watch `MODIFIED` event.
    fn update(&self, obj: Arc<K>);
    /// A watch `DELETED` event.
    fn delete(&self, obj: Arc<K>);
    /// The result of a (re)list at `resource_version`.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str);
    /// The result of a (re)list at `resource_version` in which the objects
    /// of `undecodable` did not deserialize into `K`: they are present
    /// (never deleted), and kept as [`UndecodableObject`]s.
    ///
    /// The default forgets them: [`replace`](Self::replace) with `list`.
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        drop(undecodable);
        self.replace(list, resource_version)
    }
    /// A watch `ADDED` or `MODIFIED` event whose object does not deserialize
    /// into `K`: its current version is `record` (any decodable copy held is
    /// stale). The default does nothing; [`DeltaFifo`] keeps it.
    fn undecodable(&self, record: UndecodableObject) {
        drop(record);
    }
    /// A watch `DELETED` event whose object does not deserialize into `K`.
    /// The default does nothing; [`DeltaFifo`] deletes the key.
    fn undecodable_deleted(&self, record: UndecodableObject) {
        drop(record);
    }
}

impl<K: Resource + Send + Sync + 'static> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: Arc<K>) {
        if let Err(e) = DeltaFifo::add(self, obj) {
            tracing::warn!(error = %e, "dropping watched object");
        }
    }
    fn update(&self, obj: Arc<K>) {
        if let Err(e) = DeltaFifo::update(self, obj) {
            tracing::warn!(error = %e, "dropping watched object");
        }
    }
    fn delete(&self, obj: Arc<K>) {
        if let Err(e) = DeltaFifo::delete(self, obj) {
            tracing::warn!(error = %e, "dropping watched object");
        }
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) {
        DeltaFifo::replace(self, list, resource_version)
    }
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        DeltaFifo::replace_with_undecodable(self, list, undecodable, resource_version)
    }
    fn undecodable(&self, record: UndecodableObject) {
        DeltaFifo::undecodable(self, record)
    }
    fn undecodable_deleted(&self, record: UndecodableObject) {
        DeltaFifo::undecodable_deleted(self, record)
    }
}

impl<K, S: ReflectorStore<K> + ?Sized> ReflectorStore<K> for Arc<S> {
    fn add(&self, obj: Arc<K>) {
        (**self).add(obj)
    }
    fn update(&self, obj: Arc<K>) {
        (**self).update(obj)
    }
    fn delete(&self, obj: Arc<K>) {
        (**self).delete(obj)
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) {
        (**self).replace(list, resource_version)
    }
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        (**self).replace_with_undecodable(list, undecodable, resource_version)
    }
    fn undecodable(&self, record: UndecodableObject) {
        (**self).undecodable(record)
    }
    fn undecodable_deleted(&self, record: UndecodableObject) {
        (**self).undecodable_deleted(record)
    }
}
