//! Objects the API server serves that do not deserialize into the Rust type.
//!
//! A CRD's schema can allow what the Rust type refuses (cert-manager lets a
//! condition carry only `type` and `status`; k8s-openapi's `Condition`
//! requires `lastTransitionTime`). Such an object is not dropped and never
//! looks deleted. The informer keeps what does decode, its `metadata`, in an
//! [`UndecodableObject`] under the object's key, in place of any older
//! decodable copy (which would be stale):
//!
//! - reads of that key ([`SharedCache::get`](super::SharedCache::get),
//!   [`Context::get`](crate::reconcile::Context::get),
//!   [`Context::object`](crate::reconcile::Context::object)) fail with
//!   [`CacheError::Undecodable`](super::CacheError::Undecodable), which
//!   carries the record; [`Store::get`](super::Store::get) returns `None`
//!   and [`Store::undecodable`](super::Store::undecodable) the record;
//!   lists and index reads leave it out;
//! - event handlers get no `Add`/`Update`/`Delete` for it (there is no `K` to
//!   give them); [`EventHandler::on_undecodable`](super::EventHandler::on_undecodable)
//!   is called instead, once per object version, and a controller's
//!   handler for its primary kind enqueues the key, so the reconciler runs
//!   and sees the error. When the object decodes again, handlers get an
//!   `Add`; when it is deleted while undecodable, `on_undecodable` is called
//!   with [`is_deleted`](UndecodableObject::is_deleted) true and reads
//!   return `None` again;
//! - the metadata is enough to finish a deletion:
//!   [`remove_finalizer_by_meta`](crate::client::remove_finalizer_by_meta)
//!   removes a finalizer with a patch guarded by the resourceVersion;
//! - every object version is logged once (warning, with `kind`, `key`,
//!   `resource_version`, `error`), and counted in
//!   [`ReflectorStats::undecodable_objects`](super::ReflectorStats::undecodable_objects)
//!   and the `opkit_cache_undecodable_objects` gauge.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::CacheError;
//! use opkit::client::remove_finalizer_by_meta;
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//!
//! struct Cleanup;
//!
//! impl Reconcile for Cleanup {
//!     type Object = ConfigMap;
//!
//!     async fn reconcile(&self, _req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         match ctx.object().await {
//!             Ok(_) => Ok(Action::done()),
//!             Err(CacheError::Undecodable(bad)) => {
//!                 if bad.metadata().deletion_timestamp.is_some() {
//!                     remove_finalizer_by_meta(&ctx.object_api(), bad.metadata(), "example.com/cleanup").await?;
//!                 }
//!                 Ok(Action::done())
//!             }
//!             Err(e) => Err(e.into()),
//!         }
//!     }
//! }
//! ```

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::key::ObjectKey;

/// The record of an object whose current version does not deserialize into
/// the Rust type: its key, its metadata (without `managedFields`) and the
/// error. See the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub struct UndecodableObject {
    kind: String,
    key: ObjectKey,
    metadata: ObjectMeta,
    error: String,
    deleted: bool,
}

impl UndecodableObject {
    pub(crate) fn new(kind: String, key: ObjectKey, metadata: ObjectMeta, error: String) -> Self {
        Self {
            kind,
            key,
            metadata,
            error,
            deleted: false,
        }
    }

    /// A record of `namespace/name` at resourceVersion 1.
    #[cfg(test)]
    pub(crate) fn for_test(namespace: Option<&str>, name: &str) -> Self {
        Self::new(
            "v1/ConfigMap".into(),
            ObjectKey::new(namespace, name),
            ObjectMeta {
                name: Some(name.into()),
                namespace: namespace.map(str::to_owned),
                resource_version: Some("1".into()),
                ..ObjectMeta::default()
            },
            "invalid type".into(),
        )
    }

    pub(crate) fn into_deleted(mut self) -> Self {
        self.deleted = true;
        self
    }

    /// The `apiVersion/kind` of the informer that read it.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The cache key, `namespace/name` or `name`.
    pub(crate) fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The namespace (`None` for a cluster-scoped object).
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.key.namespace()
    }

    /// The name.
    pub(crate) fn name(&self) -> &str {
        self.key.name()
    }

    /// The resourceVersion of the version that did not decode.
    pub(crate) fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    /// The object's metadata: uid, resourceVersion, deletionTimestamp,
    /// finalizers, ownerReferences, labels, annotations, ...
    pub fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// Why it does not deserialize (the decoder's message).
    pub fn error(&self) -> &str {
        &self.error
    }

    /// True when this record reports the object's deletion (handlers only:
    /// the cache forgets the record then).
    pub fn is_deleted(&self) -> bool {
        self.deleted
    }
}

impl fmt::Display for UndecodableObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (resourceVersion {}) does not deserialize into the Rust type: {}; fix the \
             type (make the field optional) or the object — its metadata is still readable \
             from this error, so a finalizer can be removed",
            self.kind,
            self.key.as_str(),
            self.resource_version().unwrap_or("?"),
            self.error
        )
    }
}
