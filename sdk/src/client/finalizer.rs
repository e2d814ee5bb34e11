//! Adding and removing one finalizer without clobbering others' writes.
//!
//! Each write is a merge patch of `metadata.finalizers` that carries the
//! `resourceVersion` it was computed from, so the apiserver rejects it with
//! 409 if anyone changed the object in between; the helper then re-reads the
//! object, recomputes the list, and tries again with a bounded backoff. A
//! finalizer written concurrently by another controller is never lost.
//!
//! [`finalizer`] does the whole dance in one call, as kube-runtime's
//! `finalizer` does: add the finalizer before the object's first apply, run
//! the cleanup when it is being deleted, and release it when the cleanup
//! is done.
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
//!         let Some(cm) = ctx.object().await? else { return Ok(Action::done()) };
//!         finalizer(&ctx.object_api(), "example.com/cleanup", cm, |event| async move {
//!             match event {
//!                 FinalizerEvent::Apply(_cm) => Ok(Action::done()),   // create or update what it needs
//!                 FinalizerEvent::Cleanup(_cm) => Ok(Action::done()), // delete what it made; then it goes
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
use super::retry::RetryPolicy;
use crate::reconcile::{Action, ReconcileError};

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
    let policy = RetryPolicy::default();
    let attempts = policy.attempts.max(1);

    let mut current = meta.clone();
    if current.resource_version.is_none() {
        match api.get_metadata_opt(&name).await {
            Ok(Some(fresh)) => current = fresh.metadata,
            Ok(None) => return Ok(None),
            Err(e) => return Err(ClientError::from_kube(e, &get_target)),
        }
    }
    let mut attempt = 0;
    loop {
        let mut finalizers = current.finalizers.clone().unwrap_or_default();
        let before = finalizers.len();
        finalizers.retain(|f| f != finalizer);
        if finalizers.len() == before {
            return Ok(Some(current));
        }
        let patch = json!({
            "metadata": {
                "resourceVersion": current.resource_version,
                "finalizers": finalizers,
            }
        });
        match api
            .patch_metadata(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                tracing::debug!(kind = %K::kind(&()), namespace = ?namespace, %name, %finalizer, ?finalizers, "finalizer removed by metadata");
                return Ok(Some(written.metadata));
            }
            Err(e) => {
                let error = ClientError::from_kube(e, &patch_target);
                if error.is_not_found() {
                    return Ok(None);
                }
                if !error.is_conflict() || attempt + 1 >= attempts {
                    return Err(error);
                }
                let wait = policy.backoff(attempt);
                tracing::debug!(kind = %K::kind(&()), namespace = ?namespace, %name, %finalizer, attempt, ?wait, "finalizer write conflicted; re-reading the metadata");
                tokio::time::sleep(wait).await;
                attempt += 1;
                match api.get_metadata_opt(&name).await {
                    Ok(Some(fresh)) => current = fresh.metadata,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(ClientError::from_kube(e, &get_target)),
                }
            }
        }
    }
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
    let policy = RetryPolicy::default();
    let attempts = policy.attempts.max(1);

    let mut current = Arc::clone(obj);
    if current.meta().resource_version.is_none() {
        match api.get_opt(&name).await {
            Ok(Some(fresh)) => current = Arc::new(fresh),
            Ok(None) => return Ok(None),
            Err(e) => return Err(ClientError::from_kube(e, &get_target)),
        }
    }
    let mut attempt = 0;
    loop {
        let mut finalizers = current.finalizers().to_vec();
        if !edit(&mut finalizers) {
            return Ok(Some(current));
        }
        let patch = json!({
            "metadata": {
                "resourceVersion": current.meta().resource_version,
                "finalizers": finalizers,
            }
        });
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                tracing::debug!(kind = %K::kind(&()), namespace = ?namespace, %name, %finalizer, ?finalizers, "finalizers updated");
                return Ok(Some(Arc::new(written)));
            }
            Err(e) => {
                let error = ClientError::from_kube(e, &patch_target);
                if error.is_not_found() {
                    return Ok(None);
                }
                if !error.is_conflict() || attempt + 1 >= attempts {
                    return Err(error);
                }
                let wait = policy.backoff(attempt);
                tracing::debug!(kind = %K::kind(&()), namespace = ?namespace, %name, %finalizer, attempt, ?wait, "finalizer write conflicted; re-reading");
                tokio::time::sleep(wait).await;
                attempt += 1;
                match api.get_opt(&name).await {
                    Ok(Some(fresh)) => current = Arc::new(fresh),
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(ClientError::from_kube(e, &get_target)),
                }
            }
        }
    }
}

/// What [`finalizer`] asks its body to do.
#[derive(Debug)]
pub enum FinalizerEvent<K> {
    /// The object is live and carries the finalizer: bring the world to its
    /// desired state.
    Apply(Arc<K>),
    /// The object is being deleted and still carries the finalizer: clean
    /// up what it made outside owner references. `Ok(Action::done())`
    /// releases it (the finalizer is removed and the apiserver deletes the
    /// object); any other `Ok` action keeps the finalizer and comes back as
    /// it says (cleanup not finished yet); an error keeps it and is retried.
    Cleanup(Arc<K>),
}

/// Adds, honours and removes `name` on `obj` in one call (kube-runtime's
/// `finalizer` shape), running `body` with [`FinalizerEvent::Apply`] for a
/// live object (after adding the finalizer if it was missing) or
/// [`FinalizerEvent::Cleanup`] for one being deleted (then removing the
/// finalizer when the cleanup returns `Ok(Action::done())`). An object being
/// deleted without the finalizer is left alone (`Ok(Action::done())`).
/// Writes go through `api` with the conflict handling of [`add_finalizer`].
pub async fn finalizer<K, F, Fut>(
    api: &Api<K>,
    name: &str,
    obj: Arc<K>,
    body: F,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, ReconcileError>>,
{
    let listed = obj.finalizers().iter().any(|f| f == name);
    if obj.meta().deletion_timestamp.is_some() {
        if !listed {
            return Ok(Action::done());
        }
        let action = body(FinalizerEvent::Cleanup(Arc::clone(&obj))).await?;
        if action != Action::done() {
            return Ok(action);
        }
        remove_finalizer(api, &obj, name).await?;
        return Ok(Action::done());
    }
    let obj = if listed {
        obj
    } else {
        add_finalizer(api, &obj, name).await?
    };
    body(FinalizerEvent::Apply(obj)).await
}
