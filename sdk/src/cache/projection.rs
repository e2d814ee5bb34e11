//! Typed projections ([`Projection`], [`Projected`]): a user type made
//! from each object of a kind, cached in place of the object. The design
//! (what is kept, when the mapping runs, one informer per `(K, P)`) is in
//! [`Projection`]'s docs.
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{Projected, Projection};
//!
//! struct Colour(Option<String>);
//! impl Projection<ConfigMap> for Colour {
//!     fn project(cm: ConfigMap) -> Self {
//!         Colour(cm.data.and_then(|mut d| d.remove("colour")))
//!     }
//! }
//! let p = Projected::<ConfigMap, Colour>::project(ConfigMap::default());
//! assert!(p.0.is_none());
//! ```

use std::{borrow::Cow, fmt, marker::PhantomData, ops::Deref};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer, de::DeserializeOwned};

use super::cacheable::{Cacheable, ProjectionInfo};

/// A type cached in place of the whole objects of kind `K` ("cache what
/// you read"): the cache keeps the metadata essentials beside it
/// ([`Projected`]).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use opkit::cache::{Projected, Projection, SharedCache};
///
/// /// What this operator reads of a Pod: its phase and readiness.
/// struct PodView {
///     phase: Option<String>,
///     ready: bool,
/// }
///
/// impl Projection<Pod> for PodView {
///     fn project(pod: Pod) -> Self {
///         let status = pod.status.unwrap_or_default();
///         let ready = status.conditions.iter().flatten()
///             .any(|c| c.type_ == "Ready" && c.status == "True");
///         PodView { phase: status.phase, ready }
///     }
/// }
///
/// # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let cache = SharedCache::new(client);
/// let pods = cache.store::<Projected<Pod, PodView>>()?;
/// cache.start()?;
/// # cache.wait_for_sync(std::time::Duration::from_secs(30)).await?;
/// for pod in pods.list() {
///     // `Arc<Projected<Pod, PodView>>`: the metadata essentials, and the view by `Deref`
///     println!("{:?}: ready={} phase={:?}", pod.metadata().name, pod.ready, pod.phase);
/// }
/// # Ok(()) }
/// ```
///
/// # What is kept, and when the mapping runs
///
/// [`Projected<K, P>`] is what the cache stores: `P`, and beside it the
/// metadata that keys, owner mapping and read-your-writes need — name,
/// namespace, uid, resourceVersion, generation, deletionTimestamp, and
/// (unless the projection says otherwise, [`LABELS`](Self::LABELS),
/// [`OWNER_REFERENCES`](Self::OWNER_REFERENCES)) labels and ownerReferences.
/// Annotations, finalizers, managedFields and everything else of `K` are
/// dropped unless `P` keeps them.
///
/// [`project`](Self::project) runs once per object as it is decoded (each
/// LIST item, each watch event), on the informer's task: a read
/// ([`Store::get`](crate::cache::Store::get), a reconcile's `Context`) hands out
/// the stored `Arc<Projected<K, P>>`, never a copy, and never maps again.
/// Event handlers, mappers and predicates see the projection too.
///
/// # One informer per (K, P)
///
/// The shared cache keys informers by Rust type: a projected watch of Pods
/// (`Projected<Pod, PodView>`) and a whole-object watch of Pods (`Pod`) are
/// two informers with two watches, and two projections of Pods are two more.
/// Every controller asking for the same projection shares one informer. A
/// kind is cheapest watched one way: project it everywhere, or nowhere.
///
/// The primary kind of a controller may be a projection too
/// (`type Object = Projected<K, P>`): the reconciler reads the projection
/// and writes through the client with the whole type.
///
/// Projections of built-in kinds are read as protobuf with the `protobuf`
/// feature, like the whole kinds (see the [cache docs](crate::cache)).
pub trait Projection<K>: Sized + Send + Sync + 'static {
    /// Keep `metadata.labels` beside the projection (default: yes). Without
    /// them, label predicates and event filters see no labels.
    const LABELS: bool = true;

    /// Keep `metadata.ownerReferences` beside the projection (default:
    /// yes). [`Controller::owns_projected`](crate::controller::Controller::owns_projected)
    /// maps an owned object to its owner through them, and refuses a
    /// projection without them.
    const OWNER_REFERENCES: bool = true;

    /// Hand [`project`](Self::project) the object's `metadata.managedFields`
    /// (default: no). The cache strips them as it decodes unless
    /// [`SharedCacheBuilder::keep_managed_fields`](crate::cache::SharedCacheBuilder::keep_managed_fields)
    /// is set; a projection that keeps them in a compact form of its own
    /// ([`WithManagedFields`](crate::cache::WithManagedFields)) sets this so
    /// they reach it whatever the cache does for whole objects.
    const MANAGED_FIELDS: bool = false;

    /// The projection of one object. Runs once per object as it arrives
    /// (list and watch), never on a read.
    fn project(obj: K) -> Self;
}

/// What the cache stores for an object of kind `K` projected to `P`: the
/// metadata essentials ([`metadata`](Self::metadata), also
/// [`Resource::meta`]) and `P` (by `Deref`). Keys, owner mapping and
/// predicates read the metadata; the kind is `K`'s.
pub struct Projected<K, P> {
    metadata: ObjectMeta,
    value: P,
    kind: PhantomData<fn() -> K>,
}

impl<K: Resource, P: Projection<K>> Projected<K, P> {
    /// Projects `obj`: what the cache does with each object as it arrives.
    /// Useful to test mappers and predicates on projections.
    pub fn project(obj: K) -> Self {
        let m = obj.meta();
        let metadata = ObjectMeta {
            name: m.name.clone(),
            namespace: m.namespace.clone(),
            uid: m.uid.clone(),
            resource_version: m.resource_version.clone(),
            generation: m.generation,
            deletion_timestamp: m.deletion_timestamp.clone(),
            labels: if P::LABELS { m.labels.clone() } else { None },
            owner_references: if P::OWNER_REFERENCES {
                m.owner_references.clone()
            } else {
                None
            },
            ..ObjectMeta::default()
        };
        Self {
            metadata,
            value: P::project(obj),
            kind: PhantomData,
        }
    }
}

impl<K, P> Projected<K, P> {
    /// The metadata kept beside the projection (see [`Projection`]).
    pub fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl<K, P> Deref for Projected<K, P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.value
    }
}

impl<K, P: Clone> Clone for Projected<K, P> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            value: self.value.clone(),
            kind: PhantomData,
        }
    }
}

impl<K, P: fmt::Debug> fmt::Debug for Projected<K, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Projected")
            .field("metadata", &self.metadata)
            .field("value", &self.value)
            .finish()
    }
}

impl<K, P> Resource for Projected<K, P>
where
    K: Resource + 'static,
    K::DynamicType: 'static,
    P: Projection<K>,
{
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de, K, P> Deserialize<'de> for Projected<K, P>
where
    K: Resource + DeserializeOwned,
    P: Projection<K>,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(d).map(Self::project)
    }
}

/// A projection is cached as itself, made from the whole objects of `K`
/// the API server sends; what it keeps is a property of its type.
impl<K, P> Cacheable for Projected<K, P>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: 'static,
    P: Projection<K>,
{
    type Whole = K;

    fn from_whole(whole: K) -> Self {
        Self::project(whole)
    }

    fn projection() -> Option<ProjectionInfo> {
        Some(ProjectionInfo {
            name: std::any::type_name::<P>(),
            owner_references: P::OWNER_REFERENCES,
            managed_fields: P::MANAGED_FIELDS,
        })
    }
}

#[cfg(test)]
mod tests;
