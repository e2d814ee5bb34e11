//! Adding and removing one finalizer without clobbering others' writes.
//!
//! Each write is a merge patch of `metadata.finalizers` that carries the
//! `resourceVersion` it was computed from, so the apiserver rejects it with
//! 409 if anyone changed the object in between; the helper then re-reads the
//! object, recomputes the list, and tries again with a bounded backoff. A
//! finalizer written concurrently by another controller is never lost.
//!
//! [`finalizer`] does the whole dance in one call, with kube-runtime's
//! `finalizer` semantics: add the finalizer before the object's first
//! apply, run the cleanup when it is being deleted, and release it after
//! any successful cleanup (`Ok` of any [`Action`]); a failed cleanup keeps
//! it. Handed the reconcile's read itself (`ctx.object().await`), it also
//! lets go of an object being deleted whose body no longer decodes into
//! the Rust type ([`FinalizerEvent::CleanupUndecodable`]), which a `?` on
//! the read would retry forever.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::client::{FinalizerEvent, finalizer};
//! use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
//!
//! struct Settings;
//!
//! impl Reconcile for Settings {
//!     type Object = ConfigMap;
//!
//!     async fn reconcile(&self, _req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         // The read itself: a deleted object is done, and an undecodable
//!         // one being deleted still gets its cleanup.
//!         finalizer(&ctx.object_api(), "example.com/cleanup", ctx.object().await, |event| async move {
//!             match event {
//!                 FinalizerEvent::Apply(_cm) => Ok(Action::done()),   // create or update what it needs
//!                 FinalizerEvent::Cleanup(_cm) => Ok(Action::done()), // delete what it made; then it goes
//!                 // Only its metadata is known: clean up by name or labels.
//!                 FinalizerEvent::CleanupUndecodable(_bad) => Ok(Action::done()),
//!             }
//!         })
//!         .await
//!     }
//! }
//! ```

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::apply::name_of;
use super::error::{ClientError, Target};
use super::retry::{RetryPolicy, retry_on_conflict};
use crate::action::{Action, ReconcileError};
use crate::cache::{CacheError, UndecodableObject};

/// Adds `finalizer` to the object (no request if `obj` already lists it).
/// Returns the object as stored.
///
/// The write is a merge patch of `metadata.finalizers` carrying the
/// `resourceVersion` it was computed from, so a concurrent change makes it
/// fail with 409 instead of overwriting another writer's finalizer. `obj` is
/// the first guess of the current state (e.g. from the cache); on a
/// conflict the object is re-read and the list recomputed. Retries conflicts with
/// [`RetryPolicy::default`]. Fails with [`ClientError::NotFound`] if the object
/// is gone, and with [`ClientError::Invalid`] if it is being deleted (the
/// apiserver forbids new finalizers then).
pub async fn add_finalizer<K>(
    api: &Api<K>,
    obj: &Arc<K>,
    finalizer: &str,
) -> Result<Arc<K>, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let edited = edit_finalizers(api, obj, finalizer, |list| {
        if list.iter().any(|f| f == finalizer) {
            false
        } else {
            list.push(finalizer.to_owned());
            true
        }
    })
    .await?;
    match edited {
        Some(obj) => Ok(obj),
        None => Err(ClientError::NotFound {
            resource: K::plural(&()).into_owned(),
            name: name_of(&**obj)?,
            namespace: obj.namespace(),
        }),
    }
}

/// Removes `finalizer` from the object (no request if `obj` does not list
/// it). Returns the object as the apiserver returned it, or `None` if it no
/// longer exists. Removing the last finalizer of an object being deleted
/// returns its final state (no finalizers, `deletionTimestamp` set); the
/// apiserver deletes it right after.
///
/// Conflicts are retried as for [`add_finalizer`].
pub async fn remove_finalizer<K>(
    api: &Api<K>,
    obj: &Arc<K>,
    finalizer: &str,
) -> Result<Option<Arc<K>>, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    edit_finalizers(api, obj, finalizer, |list| {
        let before = list.len();
        list.retain(|f| f != finalizer);
        list.len() != before
    })
    .await
}

/// Removes `finalizer` from the object described by `meta`, with metadata
/// alone: for an object whose body does not deserialize into `K` (see
/// [`crate::cache::undecodable`]), `meta` being
/// [`UndecodableObject::metadata`](crate::cache::UndecodableObject::metadata).
/// No request if `meta` does not list it. Returns the metadata as written,
/// or `None` once the object is gone (removing the last finalizer of an
/// object being deleted lets the apiserver delete it).
///
/// The write is the same merge patch of `metadata.finalizers` guarded by
/// `meta`'s resourceVersion as [`remove_finalizer`]'s, sent and answered as
/// metadata only (`PartialObjectMetadata`), so the body is never decoded;
/// a conflict re-reads the metadata and retries with [`RetryPolicy::default`].
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use opkit::cache::CacheError;
/// use opkit::client::remove_finalizer_by_meta;
///
/// # async fn doc(api: kube::Api<ConfigMap>, err: CacheError) -> Result<(), opkit::client::ClientError> {
/// if let CacheError::Undecodable(bad) = err {
///     remove_finalizer_by_meta(&api, bad.metadata(), "example.com/cleanup").await?;
/// }
/// # Ok(()) }
/// ```
pub async fn remove_finalizer_by_meta<K>(
    api: &Api<K>,
    meta: &ObjectMeta,
    finalizer: &str,
) -> Result<Option<ObjectMeta>, ClientError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let name = meta.name.clone().ok_or_else(|| ClientError::MissingName {
        kind: K::kind(&()).into_owned(),
    })?;
    let namespace = meta.namespace.clone();
    let get_target = Target::of::<K>("get", namespace.clone(), &name);
    let patch_target = Target::of::<K>("patch", namespace.clone(), &name);
    let (name, get_target, patch_target) = (name.as_str(), &get_target, &patch_target);
    let written = write_finalizers(
        meta.clone(),
        |list: &mut Vec<String>| {
            let before = list.len();
            list.retain(|f| f != finalizer);
            list.len() != before
        },
        || async move {
            match api.get_metadata_opt(name).await {
                Ok(found) => Ok(found.map(|m| m.metadata)),
                Err(e) => Err(ClientError::from_kube(e, get_target)),
            }
        },
        |patch| async move {
            api.patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|written| written.metadata)
                .map_err(|e| ClientError::from_kube(e, patch_target))
        },
    )
    .await?;
    tracing::debug!(kind = %K::kind(&()), namespace = ?namespace, %name, %finalizer, gone = written.is_none(), "finalizer removed by metadata");
    Ok(written)
}

/// Applies `edit` to the finalizers of the freshest copy known, and writes
/// the result guarded by that copy's resourceVersion. `None`: the object is gone.
async fn edit_finalizers<K, E>(
    api: &Api<K>,
    obj: &Arc<K>,
    finalizer: &str,
    edit: E,
) -> Result<Option<Arc<K>>, ClientError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    E: Fn(&mut Vec<String>) -> bool,
{
    let name = name_of(&**obj)?;
    let namespace = obj.namespace();
    let get_target = Target::of::<K>("get", namespace.clone(), &name);
    let patch_target = Target::of::<K>("patch", namespace.clone(), &name);
    let (name, get_target, patch_target) = (name.as_str(), &get_target, &patch_target);
    let written = write_finalizers(
        Arc::clone(obj),
        edit,
        || async move {
            match api.get_opt(name).await {
                Ok(found) => Ok(found.map(Arc::new)),
                Err(e) => Err(ClientError::from_kube(e, get_target)),
            }
        },
        |patch| async move {
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(Arc::new)
                .map_err(|e| ClientError::from_kube(e, patch_target))
        },
    )
    .await?;
    tracing::debug!(kind = %K::kind(&()), namespace = ?namespace, %name, %finalizer, gone = written.is_none(), "finalizers updated");
    Ok(written)
}

/// What a finalizer write reads and writes: a whole object or its metadata.
trait WithMeta {
    fn object_meta(&self) -> &ObjectMeta;
}

impl<K: Resource> WithMeta for Arc<K> {
    fn object_meta(&self) -> &ObjectMeta {
        self.meta()
    }
}

impl WithMeta for ObjectMeta {
    fn object_meta(&self) -> &ObjectMeta {
        self
    }
}

/// The one read-modify-write of `metadata.finalizers`: `edit` the list of
/// the freshest copy (`known` when it has a resourceVersion, else `read`),
/// `write` it as a merge patch guarded by that copy's resourceVersion, and
/// on a 409 read again and retry ([`retry_on_conflict`] with the default
/// policy). `Ok(None)`: the object is gone; `edit` returning false: nothing
/// to write, the copy is returned as it is.
async fn write_finalizers<T, E, R, RFut, W, WFut>(
    known: T,
    edit: E,
    read: R,
    write: W,
) -> Result<Option<T>, ClientError>
where
    T: WithMeta,
    E: Fn(&mut Vec<String>) -> bool,
    R: Fn() -> RFut,
    RFut: Future<Output = Result<Option<T>, ClientError>>,
    W: Fn(serde_json::Value) -> WFut,
    WFut: Future<Output = Result<T, ClientError>>,
{
    let known = std::sync::Mutex::new(Some(known));
    let (known, edit, read, write) = (&known, &edit, &read, &write);
    retry_on_conflict(&RetryPolicy::default(), || async move {
        // The copy passed in serves the first attempt only; a retry re-reads.
        let given = known
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
            .filter(|copy| copy.object_meta().resource_version.is_some());
        let current = match given {
            Some(copy) => copy,
            None => match read().await? {
                Some(fresh) => fresh,
                None => return Ok(None),
            },
        };
        let meta = current.object_meta();
        let mut finalizers = meta.finalizers.clone().unwrap_or_default();
        if !edit(&mut finalizers) {
            return Ok(Some(current));
        }
        let patch = json!({
            "metadata": {
                "resourceVersion": meta.resource_version,
                "finalizers": finalizers,
            }
        });
        match write(patch).await {
            Ok(written) => Ok(Some(written)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await
}

/// What [`finalizer`] asks its body to do.
#[derive(Debug)]
pub enum FinalizerEvent<K> {
    /// The object is live and carries the finalizer: bring the world to its
    /// desired state.
    Apply(Arc<K>),
    /// The object is being deleted and still carries the finalizer: clean
    /// up what it made outside owner references. Any `Ok` releases it (the
    /// finalizer is removed and, once no other finalizer holds it, the
    /// apiserver deletes the object), whatever the [`Action`]; an `Err`
    /// keeps it, and the error is handled as any reconcile error (a
    /// retryable one comes back with backoff, `retry_after(d)` after `d`).
    /// A cleanup that is not finished yet (waiting on something outside)
    /// says so with an error, e.g.
    /// [`ReconcileError::retryable(..).retry_after(d)`](ReconcileError::retry_after),
    /// not with `Ok(Action::requeue_after(d))`, which would release it.
    Cleanup(Arc<K>),
    /// The object is being deleted and still carries the finalizer, but
    /// its body does not deserialize into `K` (a field the Rust type cannot
    /// read: another version's schema, a third party's new enum value):
    /// clean up from what is known, its
    /// [`metadata`](UndecodableObject::metadata) (name, labels,
    /// annotations, uid) and the [decoding error](UndecodableObject::error).
    /// `Ok` releases the finalizer by metadata
    /// ([`remove_finalizer_by_meta`]); `Err` keeps it, as for `Cleanup`.
    /// Only [`finalizer`] handed the read (`ctx.object().await`), not the
    /// object, can see this.
    CleanupUndecodable(Arc<UndecodableObject>),
}

/// What [`finalizer`] works on: the object (`Arc<K>`), or the reconcile's
/// read of it (`ctx.object().await`: `Result<Option<Arc<K>>, CacheError>`),
/// which also covers an object that is gone (nothing to do) or whose body
/// does not decode ([`FinalizerEvent::CleanupUndecodable`] while it is
/// being deleted, the read's error otherwise).
pub trait FinalizerInput<K>: sealed::IntoRead<K> {}

impl<K> FinalizerInput<K> for Arc<K> {}
impl<K> FinalizerInput<K> for Result<Option<Arc<K>>, CacheError> {}

mod sealed {
    use std::sync::Arc;

    use crate::cache::CacheError;

    /// The read a [`FinalizerInput`](super::FinalizerInput) stands for.
    pub trait IntoRead<K> {
        fn into_read(self) -> Result<Option<Arc<K>>, CacheError>;
    }

    impl<K> IntoRead<K> for Arc<K> {
        fn into_read(self) -> Result<Option<Arc<K>>, CacheError> {
            Ok(Some(self))
        }
    }

    impl<K> IntoRead<K> for Result<Option<Arc<K>>, CacheError> {
        fn into_read(self) -> Result<Option<Arc<K>>, CacheError> {
            self
        }
    }
}

/// Adds, honours and removes `name` on `obj` in one call, as
/// kube-runtime's `finalizer` does, running `body` with
/// [`FinalizerEvent::Apply`] for a live object (after adding the finalizer
/// if it was missing) or [`FinalizerEvent::Cleanup`] for one being deleted.
///
/// - Apply: returns what `body` returns.
/// - Cleanup, `Ok(action)` (any action, `requeue_after` included): the
///   finalizer is removed, then `action` is returned (a requeue finds the
///   object gone, or still held by other finalizers but no longer by this
///   one, which this helper leaves alone).
/// - Cleanup, `Err(e)`: the finalizer stays and `e` is returned (retried
///   as the error says; a terminal error leaves the object waiting for its
///   next change).
/// - An object being deleted without the finalizer is left alone
///   (`Ok(Action::done())`; `body` is not called).
/// - Handed the read (`ctx.object().await`): an object that is gone is
///   `Ok(Action::done())`; one whose body does not decode runs
///   [`FinalizerEvent::CleanupUndecodable`] while it is being deleted with
///   the finalizer (then releases it by metadata), and is otherwise the
///   read's error (retried; the read recorded a Warning Event on it).
///
/// Writes go through `api` with the conflict handling of [`add_finalizer`];
/// a write that fails is returned as the error: a failed add runs no apply,
/// a failed removal leaves the finalizer for the retry (the cleanup then
/// runs again, so it must be idempotent, as kube-runtime's must).
/// Unlike kube-runtime, which returns `await_change` after adding the
/// finalizer and applies on the next event, the apply runs in the same call,
/// on the object as the add wrote it.
pub async fn finalizer<K, F, Fut>(
    api: &Api<K>,
    name: &str,
    obj: impl FinalizerInput<K>,
    body: F,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, ReconcileError>>,
{
    let obj = match obj.into_read() {
        Ok(Some(obj)) => obj,
        Ok(None) => return Ok(Action::done()),
        Err(CacheError::Undecodable(bad)) => return undecodable(api, name, bad, body).await,
        Err(error) => return Err(error.into()),
    };
    let listed = obj.finalizers().iter().any(|f| f == name);
    if obj.meta().deletion_timestamp.is_some() {
        if !listed {
            return Ok(Action::done());
        }
        // An error keeps the finalizer; any success releases it.
        let action = body(FinalizerEvent::Cleanup(Arc::clone(&obj))).await?;
        remove_finalizer(api, &obj, name).await?;
        return Ok(action);
    }
    let obj = if listed {
        obj
    } else {
        add_finalizer(api, &obj, name).await?
    };
    body(FinalizerEvent::Apply(obj)).await
}

/// [`finalizer`] for an object whose body does not decode: its cleanup
/// and release on metadata while it is being deleted with the finalizer,
/// the read's error otherwise.
async fn undecodable<K, F, Fut>(
    api: &Api<K>,
    name: &str,
    bad: Arc<UndecodableObject>,
    body: F,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, ReconcileError>>,
{
    let meta = bad.metadata();
    let listed = meta.finalizers.iter().flatten().any(|f| f == name);
    if meta.deletion_timestamp.is_none() || !listed {
        return Err(CacheError::Undecodable(bad).into());
    }
    tracing::info!(kind = %K::kind(&()), namespace = ?meta.namespace, name = ?meta.name, finalizer = %name, error = %bad.error(), "cleaning up an undecodable object on its metadata");
    let action = body(FinalizerEvent::CleanupUndecodable(Arc::clone(&bad))).await?;
    remove_finalizer_by_meta(api, bad.metadata(), name).await?;
    Ok(action)
}
