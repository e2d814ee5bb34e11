//! [`Context`]: what a reconcile can read and write through.

use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cache::Cacheable;
use crate::cache::{CacheError, SharedCache, Store};
use crate::client::{ClientError, EventRecorder, ResourceScope};
use crate::request::Request;

/// Shared by every reconcile of one controller.
#[derive(Debug)]
pub(crate) struct ControllerShared {
    pub name: String,
    pub cache: SharedCache,
    pub recorder: EventRecorder,
    /// How long a read of a kind nobody watched waits for its new informer.
    pub read_sync_timeout: Duration,
    /// How long a read waits for the cache to show this process's writes;
    /// `None`: read-your-writes is off for this controller.
    pub read_your_writes: Option<Duration>,
    /// The field manager of [`Context::apply`] and [`Context::apply_status`].
    pub field_manager: String,
    /// The cluster of a multicluster controller's instance (whose cache,
    /// client and recorder these are); `None` for a single-cluster one.
    #[cfg(feature = "multicluster")]
    pub cluster: Option<crate::cluster_request::ClusterName>,
}

/// Handed to each [`reconcile`](super::Reconcile::reconcile) of a
/// reconciler whose kind is `K` ([`Reconcile::Object`](super::Reconcile::Object)):
/// the object itself ([`object`](Self::object)), cache-backed reads of any
/// kind (no API calls), the client for writes, an Event recorder, and the
/// controller's name.
///
/// Namespaces are passed one way everywhere: `Option<&str>`, `None` for a
/// cluster-scoped kind (or, for [`list`](Self::list) and [`api`](Self::api)
/// of a namespaced kind, every namespace the cache holds).
///
/// Reads see the cache's scope: every namespace, or the one the manager
/// (its cache) is limited to; asking for another namespace is an error that
/// says so. Every kind the controller watches (`for`, `owns`, `watches`,
/// `reads`) is synced before the first reconcile. A kind nobody declared
/// gets an informer on its first read, which waits (at most the
/// controller's cache-sync timeout) until that informer has synced, as
/// controller-runtime's cache does; declare it with `reads` to pay that
/// wait at start instead.
///
/// # Contract: reads see this process's writes
///
/// Once a write made through [`client`](Self::client) or [`api`](Self::api)
/// (create, replace, patch, server-side apply, delete, their status forms,
/// and every [`client`](crate::client) helper called on such an `Api`)
/// returns, a read of that object through this `Context`
/// ([`object`](Self::object), [`get`](Self::get), [`list`](Self::list),
/// [`by_index`](Self::by_index), [`store`](Self::store)) never returns the
/// state from before the write: it waits until the cache has caught up
/// (a deleted object is then absent, or replaced by a newer one of the same
/// name). The wait is woken by the informer, is skipped when nothing of
/// the kind is pending (one atomic load), ends when the reconcile is
/// dropped (timeout, shutdown), and is bounded by
/// [`read_your_writes_timeout`](crate::controller::Controller::read_your_writes_timeout)
/// (default 10 s): then the read fails with
/// [`CacheError::WriteNotObserved`] and the key is retried. Writes through
/// another client (one you built yourself) are not tracked. Turn it off
/// with [`Controller::read_your_writes`](crate::controller::Controller::read_your_writes)`(false)`,
/// or for the whole cache with [`SharedCacheBuilder::read_your_writes`](crate::cache::SharedCacheBuilder::read_your_writes).
/// How it works: [`read_your_writes`](crate::cache::read_your_writes).
///
/// ```
/// use k8s_openapi::api::apps::v1::Deployment;
/// use k8s_openapi::api::core::v1::Secret;
/// use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
///
/// struct Web;
///
/// impl Reconcile for Web {
///     type Object = Deployment;
///
///     async fn reconcile(&self, req: Request, ctx: &Context<Deployment>) -> Result<Action, ReconcileError> {
///         let Some(web) = ctx.object().await? else {
///             return Ok(Action::done()); // deleted
///         };
///         let namespace = req.namespace.as_deref();
///         let _tls = ctx.get::<Secret>(namespace, "web-tls").await?;
///         let _siblings = ctx.list::<Deployment>(namespace).await?;
///         let _deployments = ctx.object_api(); // writes go here
///         # let _ = web;
///         Ok(Action::done())
///     }
/// }
/// ```
pub struct Context<K> {
    shared: Arc<ControllerShared>,
    request: Request,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Context<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            request: self.request.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Context<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("controller", &self.shared.name)
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

impl<K> Context<K>
where
    K: Cacheable<DynamicType = ()>,
    K::Scope: 'static,
{
    pub(crate) fn new(shared: Arc<ControllerShared>, request: Request) -> Self {
        Self {
            shared,
            request,
            kind: PhantomData,
        }
    }

    /// The object this reconcile is for, from the cache (`None` once it is
    /// deleted). Its type is the reconciler's kind: nothing to name again.
    /// When its current version does not deserialize into `K`, the error is
    /// [`CacheError::Undecodable`] and carries its metadata, enough to
    /// remove a finalizer ([`crate::client::remove_finalizer_by_meta`]).
    /// Such a read also records a Warning Event `Undecodable` on the
    /// object (repeats fold into one Event's series).
    pub async fn object(&self) -> Result<Option<Arc<K>>, CacheError> {
        let read = self
            .get::<K>(self.request.namespace.as_deref(), &self.request.name)
            .await;
        if let Err(CacheError::Undecodable(undecodable)) = &read {
            use kube::core::PartialObjectMetaExt;
            let regarding = undecodable.metadata().clone().into_request_partial::<K>();
            self.shared.recorder.warning(
                &regarding,
                "Undecodable",
                "Reconcile",
                &format!(
                    "resourceVersion {} does not deserialize into the controller's type: {}",
                    undecodable.resource_version().unwrap_or("?"),
                    undecodable.error()
                ),
            );
        }
        read
    }

    /// An `Api` for the reconciler's own kind, in the namespace of the
    /// object being reconciled (every namespace for a cluster-scoped kind):
    /// where its finalizers, status and the object itself are written.
    pub fn object_api(&self) -> kube::Api<K>
    where
        K::Scope: ResourceScope,
    {
        self.api::<K>(self.request.namespace.as_deref())
    }
}

impl<K> Context<K> {
    /// The cached object `name` of kind `T` in `namespace` (`None` for
    /// cluster-scoped kinds). An object whose current version does not
    /// deserialize into `T` is [`CacheError::Undecodable`], never `None`:
    /// its metadata is in the error (see [`crate::cache::undecodable`]).
    pub async fn get<T>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<T>>, CacheError>
    where
        T: Cacheable,
        T::DynamicType: Default,
        T::Scope: 'static,
    {
        self.shared.cache.check_namespace(namespace)?;
        let store = self.synced_store::<T>().await?;
        self.wait_for_writes::<T>(namespace, Some(name)).await?;
        store.try_get(namespace, name)
    }

    /// The cached objects of kind `T` in `namespace` (`None`: every namespace the cache holds).
    pub async fn list<T>(&self, namespace: Option<&str>) -> Result<Vec<Arc<T>>, CacheError>
    where
        T: Cacheable,
        T::DynamicType: Default,
        T::Scope: 'static,
    {
        self.shared.cache.check_namespace(namespace)?;
        let store = self.synced_store::<T>().await?;
        self.wait_for_writes::<T>(namespace, None).await?;
        Ok(crate::cache::list_in(&store, namespace))
    }

    /// The cached objects of `T` whose `index` values include `value` (an
    /// index added with [`SharedCache::add_index`] when wiring).
    pub async fn by_index<T>(&self, index: &str, value: &str) -> Result<Vec<Arc<T>>, CacheError>
    where
        T: Cacheable,
        T::DynamicType: Default,
        T::Scope: 'static,
    {
        let store = self.synced_store::<T>().await?;
        self.wait_for_writes::<T>(None, None).await?;
        Ok(store.by_index(index, value)?)
    }

    /// A read-only handle to the cached objects of `T` (an informer is
    /// started and synced first if nobody watched the kind). It returns once
    /// the cache shows the writes of `T` made so far through the cache's
    /// client (by any controller sharing it); reads through the handle do
    /// not wait for later writes.
    pub async fn store<T>(&self) -> Result<Store<T>, CacheError>
    where
        T: Cacheable,
        T::DynamicType: Default,
        T::Scope: 'static,
    {
        let store = self.synced_store::<T>().await?;
        self.wait_for_writes::<T>(None, None).await?;
        Ok(store)
    }

    async fn synced_store<T>(&self) -> Result<Store<T>, CacheError>
    where
        T: Cacheable,
        T::DynamicType: Default,
        T::Scope: 'static,
    {
        self.shared
            .cache
            .synced_store::<T>(self.shared.read_sync_timeout)
            .await
    }

    async fn wait_for_writes<T>(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), CacheError>
    where
        T: Cacheable,
        T::DynamicType: Default,
        T::Scope: 'static,
    {
        match self.shared.read_your_writes {
            Some(wait) => {
                self.shared
                    .cache
                    .wait_for_writes::<T>(namespace, name, wait)
                    .await
            }
            None => Ok(()),
        }
    }

    /// A client for writes (and reads the cache does not hold). With
    /// read-your-writes on (the default), its writes of watched kinds are
    /// recorded, and this controller's later reads wait until the cache
    /// shows them; with it off, the plain client.
    pub fn client(&self) -> kube::Client {
        match self.shared.read_your_writes {
            Some(_) => self.shared.cache.client().clone(),
            None => self.shared.cache.raw_client().clone(),
        }
    }

    /// An `Api` for objects of `T` over [`client`](Self::client), the
    /// natural way to write (`create`, `replace`, `patch`, `delete`, their
    /// `_status` forms, and the [`client`](crate::client) helpers):
    /// `Some(namespace)` for a namespaced kind, `None` for a cluster-scoped
    /// kind or every namespace of a namespaced one (a namespace given for a
    /// cluster-scoped kind is ignored).
    pub fn api<T>(&self, namespace: Option<&str>) -> kube::Api<T>
    where
        T: Resource<DynamicType = ()>,
        T::Scope: ResourceScope,
    {
        T::Scope::api(self.client(), namespace)
    }

    /// Records Kubernetes Events (events.k8s.io/v1) about objects, reported
    /// by this controller; repeats within a window fold into one Event's
    /// series. Publishing never blocks the reconcile.
    ///
    /// ```no_run
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # fn example(ctx: &opkit::reconcile::Context<ConfigMap>, cm: &ConfigMap) {
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

    /// The field manager this controller's server-side applies use: the
    /// controller's name unless set with
    /// [`Controller::field_manager`](crate::controller::Controller::field_manager).
    pub fn field_manager(&self) -> &str {
        &self.shared.field_manager
    }

    /// Server-side applies `obj` as this controller's
    /// [`field_manager`](Self::field_manager), forcing conflicts, through
    /// [`api`](Self::api) of `obj`'s namespace (so the write is read back by
    /// this controller's next reads): [`client::apply`](crate::client::apply)
    /// without naming the manager on every call.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::api::ObjectMeta;
    /// # async fn doc(ctx: &opkit::reconcile::Context<ConfigMap>) -> Result<(), opkit::client::ClientError> {
    /// let child = ConfigMap {
    ///     metadata: ObjectMeta {
    ///         name: Some("web-config".into()),
    ///         namespace: Some("shop".into()),
    ///         ..ObjectMeta::default()
    ///     },
    ///     data: Some([("colour".to_owned(), "blue".to_owned())].into()),
    ///     ..ConfigMap::default()
    /// };
    /// let stored = ctx.apply(&child).await?;
    /// # let _ = stored;
    /// # Ok(()) }
    /// ```
    pub async fn apply<T>(&self, obj: &T) -> Result<T, ClientError>
    where
        T: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
        T::Scope: ResourceScope,
    {
        let api = self.api::<T>(obj.meta().namespace.as_deref());
        crate::client::apply(&api, obj, self.field_manager()).await
    }

    /// Server-side applies the `status` of `obj` as this controller's
    /// [`field_manager`](Self::field_manager), forcing conflicts:
    /// [`client::apply_status`](crate::client::apply_status) through
    /// [`api`](Self::api).
    pub async fn apply_status<T>(&self, obj: &T) -> Result<T, ClientError>
    where
        T: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
        T::Scope: ResourceScope,
    {
        let api = self.api::<T>(obj.meta().namespace.as_deref());
        crate::client::apply_status(&api, obj, self.field_manager()).await
    }

    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// The cluster this reconcile is for, in a multicluster controller
    /// ([`crate::multicluster`]): every read, the client, and the recorder
    /// of this `Context` are that cluster's. `None` for a single-cluster
    /// controller.
    pub fn cluster(&self) -> Option<&crate::cluster_request::ClusterName> {
        self.shared.cluster.as_ref()
    }

    #[cfg(feature = "multicluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "multicluster")))]
    /// The request being reconciled with its cluster (multicluster-runtime's
    /// `mcreconcile.Request`); `None` for a single-cluster controller.
    pub fn cluster_request(&self) -> Option<crate::cluster_request::ClusterRequest> {
        self.cluster().map(|cluster| {
            crate::cluster_request::ClusterRequest::new(cluster.clone(), self.request.clone())
        })
    }
}
