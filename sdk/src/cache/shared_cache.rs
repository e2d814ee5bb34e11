//! [`SharedCache`]: the informer factory that hands out exactly one
//! informer per watched scope, starts and stops them, and waits for them
//! to sync.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use kube::{Client, Resource};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{
    any_informer::{AnyInformer, pending_description},
    cacheable::{self, Cacheable},
    error::CacheError,
    informer::{
        InformerOptions, ListFilter, ListWatch, ReflectorConfig, SharedIndexInformer, Store,
        Transform, WatchErrorHandler, WriteObserver, strip_managed_fields,
    },
    read_your_writes::{InformerWrites, WriteTracker},
    scope::{InformerKey, Scope, is_namespaced},
};

/// The state every handle of one shared cache shares.
pub(super) struct CacheInner {
    /// What users write through: records writes when read-your-writes is on.
    pub(super) client: Client,
    /// What informers list and watch through.
    pub(super) raw_client: Client,
    pub(super) writes: Option<Arc<WriteTracker>>,
    pub(super) informers: Mutex<HashMap<InformerKey, Arc<dyn AnyInformer>>>,
    /// Each kind's cache-scope informer (a `SharedIndexInformer<K>`) once
    /// it has synced (it stays synced), by Rust type: a reconcile's reads
    /// and read-your-writes waits find it without building an
    /// [`InformerKey`] (a `Default` dynamic type makes the type one GVK).
    pub(super) synced_informers: RwLock<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    pub(super) started: AtomicBool,
    pub(super) cancel: CancellationToken,
    pub(super) namespace: Option<String>,
    pub(super) reflector: ReflectorConfig,
    pub(super) strip_managed_fields: bool,
    pub(super) transforms: KindTransforms,
    pub(super) default_resync: Option<Duration>,
    pub(super) watch_error_handler: Option<WatchErrorHandler>,
    /// Kinds whose cache-scope informer lists by a filter its owner hands
    /// in (a sharded replica's share): the filter's receiver, by Rust type.
    pub(super) filters: Mutex<HashMap<TypeId, watch::Receiver<Option<ListFilter>>>>,
}

/// Per-kind transforms ([`SharedCacheBuilder::transform`]): a
/// `Transform<K>` per Rust type, behind `Any`.
pub(super) type KindTransforms = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

impl Drop for CacheInner {
    fn drop(&mut self) {
        self.cancel.cancel();
        for inf in self.informers.get_mut().values() {
            inf.stop();
        }
    }
}

/// The shared cache / informer factory. Cloning gives another handle; the
/// informers stop when the last handle is dropped (or on [`stop`](Self::stop)).
#[derive(Clone)]
pub struct SharedCache {
    pub(super) inner: Arc<CacheInner>,
}

impl fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let informers = self.inner.informers.lock();
        f.debug_struct("SharedCache")
            .field("namespace", &self.inner.namespace)
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .field(
                "informers",
                &informers.values().map(|i| i.describe()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl SharedCache {
    /// The client to write through: with read-your-writes on (the
    /// default), it records every write of a kind this cache watches, so
    /// reads through a reconcile's [`Context`](crate::reconcile::Context)
    /// wait until the cache shows it (see [`read_your_writes`](crate::cache::read_your_writes)).
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The client as given, recording nothing (informers watch through it).
    pub(crate) fn raw_client(&self) -> &Client {
        &self.inner.raw_client
    }

    /// The number of writes through [`client`](Self::client) the cache has
    /// not shown yet (0 when read-your-writes is off).
    pub fn pending_writes(&self) -> usize {
        self.inner.writes.as_ref().map_or(0, |w| w.len())
    }

    /// The namespace this cache is scoped to (`None`: all namespaces).
    pub fn namespace(&self) -> Option<&str> {
        self.inner.namespace.as_deref()
    }

    /// The cache's default scope for `K`: its namespace (if any) for
    /// namespaced kinds, everything for cluster-scoped ones.
    pub(super) fn default_scope<K>(&self) -> Scope<K>
    where
        K: Resource,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let scope = Scope::<K>::all();
        match &self.inner.namespace {
            Some(ns) if is_namespaced::<K>() => scope.namespace(ns.clone()),
            _ => scope,
        }
    }

    /// The informer for objects of `K` in the cache's scope (all namespaces,
    /// or the cache's [`namespace`](crate::cache::SharedCacheBuilder::namespace)), created
    /// on first use (and started if the cache is).
    pub fn informer<K>(&self) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        self.informer_for(self.default_scope::<K>())
    }

    /// A read-only handle to the objects of `K` in the cache's scope; the
    /// informer behind it is created on first use (and started if the cache
    /// is). Take handles when wiring a controller: a reconciler holding a
    /// `Store<Deployment>` cannot read a kind nobody watches.
    pub fn store<K>(&self) -> Result<Store<K>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        Ok(self.informer::<K>()?.store())
    }

    /// Adds the index `name` to the informer of `K` in the cache's scope
    /// (see [`SharedIndexInformer::add_index`]); read it with
    /// [`by_index`](Self::by_index).
    pub fn add_index<K>(
        &self,
        name: impl Into<String>,
        index: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        Ok(self.informer::<K>()?.add_index(name, index)?)
    }

    /// The informer for `scope`: the same one for every caller asking for
    /// the same (GVK, Rust type, namespace, label selector, field selector).
    pub fn informer_for<K>(&self, scope: Scope<K>) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Cacheable,
    {
        let key = InformerKey::of(&scope);
        let mut informers = self.inner.informers.lock();
        if let Some(existing) = informers.get(&key) {
            return existing
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
                .cloned()
                .ok_or_else(|| CacheError::NoInformer(key.describe()));
        }
        let mut lw = ListWatch::<K>::new(self.inner.raw_client.clone(), &scope.dyntype);
        // Only an informer of the cache's own scope (what Context reads)
        // reports the writes it shows.
        let namespace = scope.namespace.clone();
        let reads_scope = scope.labels.is_none()
            && scope.fields.is_none()
            && (scope.namespace.is_none() || scope.namespace == self.inner.namespace);
        let writes = match &self.inner.writes {
            Some(tracker) if reads_scope => Some(Arc::new(InformerWrites::new(
                Arc::clone(tracker),
                K::api_version(&scope.dyntype).into_owned(),
                K::plural(&scope.dyntype).into_owned(),
            ))),
            _ => None,
        };
        if let Some(ns) = scope.namespace {
            lw = lw.namespace(ns);
        }
        if let Some(l) = scope.labels {
            lw = lw.labels(l);
        }
        if let Some(f) = scope.fields {
            lw = lw.fields(f);
        }
        if self.inner.strip_managed_fields && !cacheable::keeps_managed_fields::<K>() {
            lw = lw.without_managed_fields();
        }
        let filter = if reads_scope {
            self.inner.filters.lock().get(&TypeId::of::<K>()).cloned()
        } else {
            None
        };
        let options = InformerOptions {
            reflector: self.inner.reflector.clone(),
            transform: self.transform_of::<K>(),
            default_resync: self.inner.default_resync,
            filter,
        };
        let observer = writes
            .clone()
            .map(|writes| writes as Arc<dyn WriteObserver>);
        let informer = SharedIndexInformer::with_cancel(
            lw,
            options,
            self.inner.cancel.child_token(),
            observer,
        );
        if let Some(handler) = &self.inner.watch_error_handler {
            informer.set_watch_error_handler_arc(Arc::clone(handler))?;
        }
        if let Some(writes) = &writes {
            writes.watch_store(informer.store(), namespace.as_deref());
        }
        if self.inner.started.load(Ordering::Acquire) {
            informer.start()?;
        }
        informers.insert(key, Arc::new(informer.clone()));
        Ok(informer)
    }

    /// Makes the cache-scope informer of `K` list and watch by the filter
    /// `filter` holds, beyond its own scope (a sharded controller's share
    /// of its primary and owned kinds, which the shard module decides):
    /// it lists nothing until the filter holds one, and relists when it
    /// changes. Must come before that informer is created; later, it is
    /// logged, the informer keeps every object, and this returns false.
    #[cfg(feature = "shard")]
    pub(crate) fn filter_kind<K>(&self, filter: watch::Receiver<Option<ListFilter>>) -> bool
    where
        K: Resource + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let key = InformerKey::of(&self.default_scope::<K>());
        // the informers lock first, as informer_for takes them
        let informers = self.inner.informers.lock();
        if informers.contains_key(&key) {
            tracing::warn!(
                informer = %key.describe(),
                "this kind is already cached undivided (read before the sharded controller \
                 started); its cache is not divided"
            );
            return false;
        }
        self.inner.filters.lock().insert(TypeId::of::<K>(), filter);
        true
    }

    /// What informers of `K` apply before storing: the `managedFields`
    /// strip (unless kept), then the kind's own transform, if any.
    pub(super) fn transform_of<K>(&self) -> Option<Transform<K>>
    where
        K: Resource + 'static,
    {
        let own = self
            .inner
            .transforms
            .get(&TypeId::of::<K>())
            .and_then(|t| t.downcast_ref::<Transform<K>>())
            .cloned();
        match (self.inner.strip_managed_fields, own) {
            (true, Some(own)) => Some(Arc::new(move |obj: &mut K| {
                strip_managed_fields(obj);
                own(obj);
            })),
            (true, None) => Some(Arc::new(strip_managed_fields::<K>)),
            (false, own) => own,
        }
    }

    /// Starts every informer; informers created later start immediately.
    /// Idempotent.
    pub fn start(&self) -> Result<(), CacheError> {
        let informers = self.inner.informers.lock();
        self.inner.started.store(true, Ordering::Release);
        for inf in informers.values() {
            inf.start()?;
        }
        Ok(())
    }

    /// True once [`start`](Self::start) was called.
    pub(crate) fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// Stops every informer.
    pub fn stop(&self) {
        self.inner.cancel.cancel();
        for inf in self.inner.informers.lock().values() {
            inf.stop();
        }
    }

    /// Stops every informer and waits until each one's tasks have ended
    /// (see [`SharedIndexInformer::wait_stopped`]).
    pub(crate) async fn stop_and_wait(&self) {
        self.stop();
        let informers: Vec<Arc<dyn AnyInformer>> =
            self.inner.informers.lock().values().cloned().collect();
        futures::future::join_all(informers.iter().map(|inf| inf.wait_stopped())).await;
    }

    /// The number of informers (one per distinct scope).
    #[cfg(test)]
    pub(crate) fn informer_count(&self) -> usize {
        self.inner.informers.lock().len()
    }

    /// Waits until every informer has synced. On timeout the error names
    /// each informer that did not, with its last list/watch error (a
    /// `403 Forbidden` there means missing RBAC).
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), CacheError> {
        let informers: Vec<Arc<dyn AnyInformer>> =
            self.inner.informers.lock().values().cloned().collect();
        self.wait_for(&informers, timeout).await
    }

    pub(super) async fn wait_for(
        &self,
        informers: &[Arc<dyn AnyInformer>],
        timeout: Duration,
    ) -> Result<(), CacheError> {
        let wait_all = async {
            for inf in informers {
                let mut rx = inf.subscribe_synced();
                if rx.wait_for(|s| *s).await.is_err() {
                    return Err(CacheError::Stopped(inf.describe()));
                }
            }
            Ok(())
        };
        let stopped = self.inner.cancel.cancelled();
        tokio::select! {
            r = tokio::time::timeout(timeout, wait_all) => match r {
                Ok(r) => r,
                Err(_) => Err(sync_timeout(informers, timeout)),
            },
            _ = stopped => Err(CacheError::Stopped("the cache".into())),
        }
    }
}

fn sync_timeout(informers: &[Arc<dyn AnyInformer>], timeout: Duration) -> CacheError {
    let kinds = informers
        .iter()
        .filter(|i| !*i.subscribe_synced().borrow())
        .map(|i| pending_description(&**i))
        .collect();
    CacheError::SyncTimeout { timeout, kinds }
}
