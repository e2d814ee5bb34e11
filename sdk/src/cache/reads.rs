//! Reads of the shared cache: every one waits, bounded, until the cache
//! shows this process's own writes of what it reads (see
//! [`read_your_writes`](super::read_your_writes)); a reconcile's
//! [`Context`](crate::reconcile::Context) reads through the same calls.

use std::{any::TypeId, sync::Arc, time::Duration};

use kube::Resource;

use super::cacheable::Cacheable;
use super::{
    any_informer::AnyInformer,
    error::CacheError,
    informer::{SharedIndexInformer, Store},
    read_your_writes::{DEFAULT_WAIT, Observed, wait_observed},
    scope::InformerKey,
    shared_cache::SharedCache,
};

impl SharedCache {
    /// The store of `K` in the cache's scope once its informer has synced:
    /// the informer is created (and started) on first use, as
    /// controller-runtime's cache does for a kind read before anyone
    /// watched it. Waits at most `timeout`; the error names the kind and
    /// its last list/watch error (RBAC, a missing CRD).
    pub(crate) async fn synced_store<K>(&self, timeout: Duration) -> Result<Store<K>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        if let Some(informer) = self.synced_informer::<K>() {
            return Ok(informer.store());
        }
        let scope = self.default_scope::<K>();
        let key = InformerKey::of(&scope);
        let existing = self.inner.informers.lock().get(&key).cloned();
        let informer = match existing {
            Some(informer) => informer,
            None => {
                let typed = self.informer_for(scope)?;
                tracing::info!(
                    informer = typed.describe(),
                    "started an informer on first read; declare the kind on the controller \
                     (reads, owns or watches) to have it synced before reconciles start"
                );
                if !self.is_started() {
                    typed.start()?;
                }
                Arc::new(typed) as Arc<dyn AnyInformer>
            }
        };
        if !*informer.subscribe_synced().borrow() {
            self.wait_for(std::slice::from_ref(&informer), timeout)
                .await?;
        }
        let typed = informer
            .as_any()
            .downcast_ref::<SharedIndexInformer<K>>()
            .cloned()
            .ok_or_else(|| CacheError::NoInformer(key.describe()))?;
        let store = typed.store();
        self.inner
            .synced_informers
            .write()
            .insert(TypeId::of::<K>(), Arc::new(typed));
        Ok(store)
    }

    /// The cache-scope informer of `K` if a read has found it synced.
    pub(super) fn synced_informer<K: 'static>(&self) -> Option<SharedIndexInformer<K>> {
        self.inner
            .synced_informers
            .read()
            .get(&TypeId::of::<K>())
            .and_then(|i| i.downcast_ref::<SharedIndexInformer<K>>())
            .cloned()
    }

    /// Waits (at most `wait`) until the informer of `K` in the cache's
    /// scope shows every write of this process through
    /// [`client`](Self::client) of the object `name` in `namespace`, or with
    /// `name` `None` of every object of `K` in `namespace` (`None`: all).
    /// Returns at once when no such write is pending.
    pub(crate) async fn wait_for_writes<K>(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
        wait: Duration,
    ) -> Result<(), CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let Some(tracker) = &self.inner.writes else {
            return Ok(());
        };
        if !tracker.any_pending() {
            return Ok(());
        }
        let dyntype = K::DynamicType::default();
        let api_version = K::api_version(&dyntype);
        let plural = K::plural(&dyntype);
        let mut pending = tracker.pending_of_kind(&api_version, &plural, namespace);
        if let Some(name) = name {
            pending.retain(|(key, _, _)| key.name == name);
        }
        if pending.is_empty() {
            return Ok(());
        }
        let informer = match self.synced_informer::<K>() {
            Some(informer) => informer,
            None => self.informer::<K>()?,
        };
        let observed = Observed {
            store: informer.store(),
            alive: informer.subscribe_alive(),
            informer: informer.describe().to_owned(),
        };
        wait_observed(tracker, observed, pending, wait).await
    }

    /// Checks that `namespace` is within the cache's scope.
    pub(crate) fn check_namespace(&self, namespace: Option<&str>) -> Result<(), CacheError> {
        match (&self.inner.namespace, namespace) {
            (Some(cached), Some(asked)) if cached != asked => Err(CacheError::NamespaceNotCached {
                namespace: asked.to_owned(),
                cached: cached.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// The store of `K` in the cache's scope, if an informer exists.
    fn find<K>(&self, namespace: Option<&str>) -> Result<Store<K>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let scope = self.default_scope::<K>();
        if scope.namespace.is_some() {
            self.check_namespace(namespace)?;
        }
        let key = InformerKey::of(&scope);
        let informers = self.inner.informers.lock();
        informers
            .get(&key)
            .and_then(|i| i.as_any().downcast_ref::<SharedIndexInformer<K>>())
            .map(SharedIndexInformer::store)
            .ok_or_else(|| CacheError::NoInformer(key.describe()))
    }

    /// The cached object `name` in `namespace` (`None`: cluster-scoped), in
    /// the cache's scope, once the cache shows every write of it this
    /// process made through [`client`](Self::client) (at most
    /// [`DEFAULT_WAIT`](super::read_your_writes::DEFAULT_WAIT); see
    /// [`read_your_writes`](super::read_your_writes)): the one read path,
    /// as a reconcile's [`Context::get`](crate::reconcile::Context::get)
    /// reads. A kind without an informer is an error (see
    /// [`store`](Self::store) to create one; `Context` creates it); an
    /// object whose current version does not deserialize into `K` is
    /// [`CacheError::Undecodable`].
    pub async fn get<K>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let store = self.find::<K>(namespace)?;
        self.wait_for_writes::<K>(namespace, Some(name), DEFAULT_WAIT)
            .await?;
        store.try_get(namespace, name)
    }

    /// The cached objects of `K` in `namespace` (`None`: every object in the
    /// cache's scope), once the cache shows this process's writes of them
    /// (as [`get`](Self::get)).
    pub async fn list<K>(&self, namespace: Option<&str>) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let store = self.find::<K>(namespace)?;
        self.wait_for_writes::<K>(namespace, None, DEFAULT_WAIT)
            .await?;
        Ok(list_in(&store, namespace))
    }

    /// The cached objects of `K` (in the cache's scope) whose `index` values
    /// include `value`, once the cache shows this process's writes of `K`
    /// (as [`get`](Self::get)).
    pub async fn by_index<K>(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Cacheable,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let store = self.find::<K>(None)?;
        self.wait_for_writes::<K>(None, None, DEFAULT_WAIT).await?;
        Ok(store.by_index(index, value)?)
    }
}

/// The objects of `store` in `namespace` (`None`: all of them).
pub(crate) fn list_in<K: Resource + Send + Sync + 'static>(
    store: &Store<K>,
    namespace: Option<&str>,
) -> Vec<Arc<K>> {
    match namespace {
        Some(ns) => store.list_namespace(ns),
        None => store.list(),
    }
}
