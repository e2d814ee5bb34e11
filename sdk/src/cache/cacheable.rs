//! [`Cacheable`]: the types the shared cache holds, and what each keeps of
//! the objects the API server sends. Every `kube::Resource` that
//! serializes and deserializes is cached whole; a
//! [`Projected<K, P>`](crate::cache::Projected) is made from whole `K`s and
//! says what it keeps through its type, so the cache learns it from the
//! type it is asked for, with no registry.
//!
//! ```
//! use k8s_openapi::api::core::v1::{ConfigMap, Pod};
//! use opkit::cache::{Cacheable, Projected, Projection};
//!
//! struct Phase(Option<String>);
//! impl Projection<Pod> for Phase {
//!     fn project(pod: Pod) -> Self {
//!         Phase(pod.status.and_then(|s| s.phase))
//!     }
//! }
//! assert!(ConfigMap::projection().is_none());
//! let phase = <Projected<Pod, Phase> as Cacheable>::projection().expect("a projection");
//! assert!(phase.name().ends_with("Phase"));
//! ```

use kube::Resource;
use serde::{Serialize, de::DeserializeOwned};

use super::decode::protobuf::{self, Codec, Decode, ProtobufError};

/// A type the shared cache can hold: what informers, stores, controllers
/// and `Context` reads are generic over.
///
/// Implemented for every [`Resource`] that is `Serialize` and
/// `DeserializeOwned` (every k8s-openapi kind, `DynamicObject`,
/// `PartialObjectMeta<K>`, kube's `CustomResource` types and kopium's),
/// cached whole, and for [`Projected<K, P>`](crate::cache::Projected),
/// made from whole `K`s. A type that does not serialize can implement it
/// with `type Whole = Self`.
pub trait Cacheable: Resource + DeserializeOwned + Send + Sync + 'static {
    /// The objects the API server sends for this type: `Self` for a whole
    /// kind, `K` for `Projected<K, P>`.
    type Whole: Resource + DeserializeOwned + Send + Sync + 'static;

    /// This type made from one whole object, as it is decoded.
    fn from_whole(whole: Self::Whole) -> Self;

    /// What a projection keeps of the whole objects; `None` for a type
    /// cached whole.
    fn projection() -> Option<ProjectionInfo> {
        None
    }
}

impl<T> Cacheable for T
where
    T: Resource + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    type Whole = T;

    fn from_whole(whole: T) -> T {
        whole
    }
}

/// What a [`Projection`](crate::cache::Projection) keeps, as its cache
/// sees it: its name (for logs and errors) and whether it keeps
/// `metadata.ownerReferences` and wants `metadata.managedFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectionInfo {
    pub(crate) name: &'static str,
    pub(crate) owner_references: bool,
    pub(crate) managed_fields: bool,
}

impl ProjectionInfo {
    /// The projection type's name (`std::any::type_name` of `P`).
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// The protobuf codec of `T`: its own for a whole kind that has one; for
/// a projection, its whole kind's, projecting each object as it decodes.
pub(crate) fn protobuf_codec<T: Cacheable>() -> Option<Codec<T>> {
    if T::projection().is_none() {
        return protobuf::codec::<T>();
    }
    protobuf::codec::<T::Whole>().map(|_| Codec::new(decode_whole::<T>))
}

/// Decodes an object message of `T`'s whole kind and makes a `T` of it.
fn decode_whole<T: Cacheable>(raw: &[u8], options: Decode) -> Result<T, ProtobufError> {
    let codec = protobuf::codec::<T::Whole>()
        .ok_or_else(|| ProtobufError::new("no protobuf codec for the projected kind"))?;
    codec.object_with(raw, options).map(T::from_whole)
}

/// Benchmark support (hidden from the docs): decodes a protobuf LIST
/// body of `T` (enveloped, as the API server sends it) as an informer
/// does, with `T`'s codec resolved once and `metadata.managedFields` left
/// out; `None` when `T` has no protobuf codec or the body does not decode.
/// What `sdk/benches/decode.rs` measures.
#[doc(hidden)]
#[cfg(feature = "protobuf")]
pub fn decode_protobuf_list<T: Cacheable>(body: &[u8]) -> Option<Vec<T>> {
    let codec = protobuf_codec::<T>()?.without_managed_fields();
    protobuf::decode_list(&codec, body)
        .ok()
        .map(|page| page.items)
}

/// Whether `T` is a projection that wants `metadata.managedFields`
/// decoded.
pub(crate) fn keeps_managed_fields<T: Cacheable>() -> bool {
    T::projection().is_some_and(|p| p.managed_fields)
}

/// The projection's name when `T` is a projection that drops
/// `metadata.ownerReferences`.
pub(crate) fn drops_owner_references<T: Cacheable>() -> Option<&'static str> {
    T::projection()
        .filter(|p| !p.owner_references)
        .map(|p| p.name)
}
