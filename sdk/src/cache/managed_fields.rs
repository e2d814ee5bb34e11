//! [`WithManagedFields`]: an object cached with its `metadata.managedFields`
//! kept as raw JSON bytes and decoded only when read.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
//! use opkit::cache::{Projected, WithManagedFields};
//!
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! cm.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
//!     manager: Some("kubectl".into()),
//!     operation: Some("Update".into()),
//!     ..Default::default()
//! }]);
//! // What the cache stores for `Projected<ConfigMap, WithManagedFields<ConfigMap>>`.
//! let cached = Projected::<ConfigMap, WithManagedFields<ConfigMap>>::project(cm);
//! assert_eq!(cached.metadata.name.as_deref(), Some("settings")); // the object, by `Deref`
//! assert!(cached.metadata.managed_fields.is_none()); // not in the object...
//! let entries = cached.managed_fields().unwrap(); // ...but decoded on demand
//! assert_eq!(entries[0].manager.as_deref(), Some("kubectl"));
//! ```

use std::fmt;
use std::ops::Deref;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::Resource;

use super::projection::Projection;

/// An object of kind `K` with its `metadata.managedFields` held as the raw
/// JSON bytes of the entries, as Go's `metav1.FieldsV1{Raw}` holds them,
/// instead of k8s-openapi's decoded `serde_json::Value` trees. Cache it as
/// the projection `Projected<K, WithManagedFields<K>>`
/// ([`Projection`]): reads give the object by `Deref` (without
/// `managedFields`) and [`managed_fields`](Self::managed_fields) decodes
/// the entries when asked.
///
/// The cache strips `managedFields` by default
/// ([`SharedCacheBuilder::keep_managed_fields`](crate::cache::SharedCacheBuilder::keep_managed_fields)
/// keeps them decoded in every object). This projection keeps them for
/// its kind only, and small: measured on the objects of opkit's
/// benchmarks (BENCHMARKS.md, "managedFields: decoded or raw"), a
/// ConfigMap written by one manager holds 3.3 KB more heap with its
/// entries decoded and 0.2 KB more as raw bytes; a Pod written by two
/// managers 19 KB more decoded, 2 KB raw.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use opkit::cache::{Projected, SharedCache, WithManagedFields};
///
/// # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let cache = SharedCache::new(client);
/// let pods = cache.store::<Projected<Pod, WithManagedFields<Pod>>>()?;
/// cache.start()?;
/// # cache.wait_for_sync(std::time::Duration::from_secs(30)).await?;
/// for pod in pods.list() {
///     let managers: Vec<_> = pod.managed_fields()?.into_iter().filter_map(|e| e.manager).collect();
///     println!("{:?} ({:?}) is written by {managers:?}", pod.metadata.name, pod.spec.as_ref().map(|s| &s.node_name));
/// }
/// # Ok(()) }
/// ```
pub struct WithManagedFields<K> {
    object: K,
    managed_fields: Box<[u8]>,
}

impl<K> WithManagedFields<K> {
    /// The object's `metadata.managedFields`, decoded from the bytes kept
    /// (empty when it had none). Decodes on every call: keep the result
    /// if you read it more than once.
    pub fn managed_fields(&self) -> Result<Vec<ManagedFieldsEntry>, serde_json::Error> {
        if self.managed_fields.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_slice(&self.managed_fields)
    }
}

impl<K: Resource + Send + Sync + 'static> Projection<K> for WithManagedFields<K> {
    const MANAGED_FIELDS: bool = true;

    fn project(mut object: K) -> Self {
        let managed_fields = match object.meta_mut().managed_fields.take() {
            Some(entries) if !entries.is_empty() => match serde_json::to_vec(&entries) {
                Ok(bytes) => bytes.into_boxed_slice(),
                Err(error) => {
                    // Not reachable for k8s-openapi's types (they always
                    // encode); said rather than hidden if it ever is.
                    tracing::warn!(%error, name = ?object.meta().name, "managedFields do not encode; kept none");
                    Box::default()
                }
            },
            _ => Box::default(),
        };
        Self {
            object,
            managed_fields,
        }
    }
}

impl<K> Deref for WithManagedFields<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.object
    }
}

impl<K: Clone> Clone for WithManagedFields<K> {
    fn clone(&self) -> Self {
        Self {
            object: self.object.clone(),
            managed_fields: self.managed_fields.clone(),
        }
    }
}

impl<K: fmt::Debug> fmt::Debug for WithManagedFields<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithManagedFields")
            .field("object", &self.object)
            .field("managed_fields_bytes", &self.managed_fields.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1;

    use super::*;

    fn entry(manager: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            api_version: Some("v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    #[test]
    fn entries_come_back_as_they_were_and_leave_the_object() {
        let entries = vec![
            entry("bench", serde_json::json!({"f:spec": {"f:nodeName": {}}})),
            entry("kwok", serde_json::json!({"f:status": {"f:phase": {}}})),
        ];
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.managed_fields = Some(entries.clone());
        let kept = WithManagedFields::project(pod);
        assert!(kept.metadata.managed_fields.is_none());
        assert_eq!(kept.metadata.name.as_deref(), Some("p"));
        assert_eq!(kept.managed_fields().unwrap(), entries);
        assert_eq!(kept.clone().managed_fields().unwrap(), entries);
    }

    #[test]
    fn an_object_without_entries_keeps_no_bytes() {
        for entries in [None, Some(Vec::new())] {
            let mut pod = Pod::default();
            pod.metadata.managed_fields = entries;
            let kept = WithManagedFields::project(pod);
            assert!(kept.managed_fields.is_empty());
            assert_eq!(kept.managed_fields().unwrap(), Vec::new());
        }
    }
}
