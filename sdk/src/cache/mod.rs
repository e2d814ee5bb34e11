//! The shared informer cache: client-go's informer machinery (Reflector,
//! DeltaFIFO, Indexer, shared processor) in async Rust, and the
//! [`SharedCache`] that hands out exactly one informer per watched scope.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{Event, Scope, SharedCache, handler_fn};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! // Every caller asking for the same (kind, namespace, selectors) gets the same informer.
//! let informer = cache.informer::<ConfigMap>()?;
//! informer.add_event_handler(handler_fn(|e: Event<ConfigMap>| match e {
//!     Event::Add { obj, is_in_initial_list } => println!("add {:?} {is_in_initial_list}", obj.metadata.name),
//!     Event::Update { new, is_resync, .. } => println!("update {:?} resync={is_resync}", new.metadata.name),
//!     Event::Delete { obj } => println!("delete {:?} tombstone={}", obj.object().metadata.name, obj.is_tombstone()),
//! }))?;
//! let _prod = cache.informer_for(Scope::<ConfigMap>::all().namespace("prod").labels("app=shop"))?;
//! cache.start()?;
//! cache.wait_for_sync(Duration::from_secs(30)).await?; // names the kind that did not sync
//! let cm = cache.get::<ConfigMap>(Some("default"), "kube-root-ca.crt")?;
//! let all = cache.list::<ConfigMap>(Some("default"))?;
//! # let _ = (cm, all);
//! # Ok(()) }
//! ```
//!
//! The pieces, each usable on its own:
//! - [`reflector`]: list (paginated or streaming) then watch, relist on 410,
//!   backoff; [`list_watch`]: the requests and the per-object decoding that
//!   skips objects which do not deserialize;
//! - [`delta_fifo`]: the DeltaFIFO of the seed design;
//! - [`store`]: the [`Indexer`] (`Arc<K>` by key, named indexes);
//! - [`processor`]: one listener (growable buffer + task) per handler;
//! - [`informer`]: the [`SharedIndexInformer`] tying them together.
//!
//! Memory: objects are stored once, as `Arc<K>`, shared by the store, the
//! queue and every notification; `metadata.managedFields` is stripped before
//! storing unless [`SharedCacheBuilder::keep_managed_fields`] is set.

pub mod backoff;
pub mod delta_fifo;
pub mod error;
pub mod informer;
pub mod key;
pub mod list_watch;
pub mod processor;
pub mod reflector;
mod start;
pub mod store;

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
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use backoff::BackoffConfig;
pub use delta_fifo::{
    DeletedFinalStateUnknown, DeletedObject, Delta, DeltaFifo, DeltaType, Deltas, Popped,
};
pub use error::{ApiStatus, CacheError, FifoClosed, IndexError, KeyError, ReflectorError};
pub use informer::{InformerOptions, SharedIndexInformer};
pub use key::ObjectKey;
pub use list_watch::{INITIAL_EVENTS_END_ANNOTATION, ListWatch};
pub use processor::{
    Event, EventHandler, HandlerFn, HandlerRegistration, MINIMUM_RESYNC_PERIOD, handler_fn,
};
pub use reflector::{
    Reflector, ReflectorConfig, ReflectorMetrics, ReflectorStats, ReflectorStore, StreamingList,
    Transform, strip_managed_fields,
};
pub use store::{IndexFn, Indexer, NAMESPACE_INDEX};

/// Which objects of a kind an informer watches: a namespace (or all), a label
/// selector, a field selector. The shared cache keeps one informer per
/// (GVK, Rust type, namespace, label selector, field selector).
pub struct Scope<K: Resource> {
    dyntype: K::DynamicType,
    namespace: Option<String>,
    labels: Option<String>,
    fields: Option<String>,
}

impl<K: Resource> fmt::Debug for Scope<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope")
            .field("namespace", &self.namespace)
            .field("labels", &self.labels)
            .field("fields", &self.fields)
            .finish()
    }
}

impl<K: Resource> Scope<K>
where
    K::DynamicType: Default,
{
    /// All objects of `K` in all namespaces.
    pub fn all() -> Self {
        Self::with_dyntype(Default::default())
    }
}

impl<K: Resource> Scope<K> {
    /// All objects of a dynamic kind (`DynamicObject` with its `ApiResource`).
    pub fn with_dyntype(dyntype: K::DynamicType) -> Self {
        Self {
            dyntype,
            namespace: None,
            labels: None,
            fields: None,
        }
    }

    /// Only this namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Only objects matching this label selector.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.labels = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Only objects matching this field selector.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.fields = Some(selector.into()).filter(|s: &String| !s.is_empty());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct InformerKey {
    type_id: TypeId,
    api_version: String,
    kind: String,
    namespace: Option<String>,
    labels: Option<String>,
    fields: Option<String>,
}

trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &(dyn Any + Send + Sync);
    fn start(&self) -> Result<(), CacheError>;
    fn stop(&self);
    fn subscribe_synced(&self) -> watch::Receiver<bool>;
    fn describe(&self) -> String;
    fn last_error(&self) -> Option<String>;
    fn is_started(&self) -> bool;
    fn list_watch_target(&self) -> start::ListTarget;
    fn subscribe_list_failures(&self) -> watch::Receiver<error::ListFailures>;
}

impl<K> AnyInformer for SharedIndexInformer<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    fn as_any(&self) -> &(dyn Any + Send + Sync) {
        self
    }
    fn start(&self) -> Result<(), CacheError> {
        SharedIndexInformer::start(self)
    }
    fn stop(&self) {
        SharedIndexInformer::stop(self)
    }
    fn subscribe_synced(&self) -> watch::Receiver<bool> {
        SharedIndexInformer::subscribe_synced(self)
    }
    fn describe(&self) -> String {
        SharedIndexInformer::describe(self).to_string()
    }
    fn last_error(&self) -> Option<String> {
        self.metrics().last_error()
    }
    fn is_started(&self) -> bool {
        SharedIndexInformer::is_started(self)
    }
    fn list_watch_target(&self) -> start::ListTarget {
        start::ListTarget::of(self.list_watch())
    }
    fn subscribe_list_failures(&self) -> watch::Receiver<error::ListFailures> {
        self.metrics().subscribe_list_failures()
    }
}

struct CacheInner {
    client: Client,
    informers: Mutex<HashMap<InformerKey, Arc<dyn AnyInformer>>>,
    started: AtomicBool,
    cancel: CancellationToken,
    reflector: ReflectorConfig,
    strip_managed_fields: bool,
    default_resync: Option<Duration>,
}

impl Drop for CacheInner {
    fn drop(&mut self) {
        self.cancel.cancel();
        for inf in self.informers.get_mut().values() {
            inf.stop();
        }
    }
}

/// Builds a [`SharedCache`] with non-default settings.
pub struct SharedCacheBuilder {
    client: Client,
    reflector: ReflectorConfig,
    strip_managed_fields: bool,
    default_resync: Option<Duration>,
}

impl fmt::Debug for SharedCacheBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCacheBuilder")
            .field("reflector", &self.reflector)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("default_resync", &self.default_resync)
            .finish()
    }
}

impl SharedCacheBuilder {
    /// Reflector settings of every informer (page size, streaming list, ...).
    pub fn reflector_config(mut self, config: ReflectorConfig) -> Self {
        self.reflector = config;
        self
    }

    /// Keep `metadata.managedFields` (stripped by default to save memory).
    pub fn keep_managed_fields(mut self) -> Self {
        self.strip_managed_fields = false;
        self
    }

    /// Resync period of handlers registered without one (default: none).
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = Some(period);
        self
    }

    /// The cache.
    pub fn build(self) -> SharedCache {
        SharedCache {
            inner: Arc::new(CacheInner {
                client: self.client,
                informers: Mutex::new(HashMap::new()),
                started: AtomicBool::new(false),
                cancel: CancellationToken::new(),
                reflector: self.reflector,
                strip_managed_fields: self.strip_managed_fields,
                default_resync: self.default_resync,
            }),
        }
    }
}

/// The shared cache / informer factory. Cloning gives another handle; the
/// informers stop when the last handle is dropped (or on [`stop`](Self::stop)).
#[derive(Clone)]
pub struct SharedCache {
    inner: Arc<CacheInner>,
}

impl fmt::Debug for SharedCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let informers = self.inner.informers.lock();
        f.debug_struct("SharedCache")
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .field(
                "informers",
                &informers.values().map(|i| i.describe()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl SharedCache {
    /// A cache with default settings.
    pub fn new(client: Client) -> Self {
        Self::builder(client).build()
    }

    /// A builder for non-default settings.
    pub fn builder(client: Client) -> SharedCacheBuilder {
        SharedCacheBuilder {
            client,
            reflector: ReflectorConfig::default(),
            strip_managed_fields: true,
            default_resync: None,
        }
    }

    /// The client informers list and watch through.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The informer for all objects of `K` in all namespaces, created on
    /// first use (and started if the cache is).
    pub fn informer<K>(&self) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        self.informer_for(Scope::<K>::all())
    }

    /// The informer for `scope`: the same one for every caller asking for
    /// the same (GVK, Rust type, namespace, label selector, field selector).
    pub fn informer_for<K>(&self, scope: Scope<K>) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
    {
        let key = InformerKey {
            type_id: TypeId::of::<K>(),
            api_version: K::api_version(&scope.dyntype).into_owned(),
            kind: K::kind(&scope.dyntype).into_owned(),
            namespace: scope.namespace.clone(),
            labels: scope.labels.clone(),
            fields: scope.fields.clone(),
        };
        let mut informers = self.inner.informers.lock();
        if let Some(existing) = informers.get(&key) {
            return existing
                .as_any()
                .downcast_ref::<SharedIndexInformer<K>>()
                .cloned()
                .ok_or_else(|| CacheError::NoInformer(key.kind.clone()));
        }
        let mut lw = ListWatch::<K>::new(self.inner.client.clone(), &scope.dyntype);
        if let Some(ns) = scope.namespace {
            lw = lw.namespace(ns);
        }
        if let Some(l) = scope.labels {
            lw = lw.labels(l);
        }
        if let Some(f) = scope.fields {
            lw = lw.fields(f);
        }
        let options = InformerOptions {
            reflector: self.inner.reflector.clone(),
            transform: self
                .inner
                .strip_managed_fields
                .then(|| Arc::new(strip_managed_fields::<K>) as Transform<K>),
            default_resync: self.inner.default_resync,
        };
        let informer =
            SharedIndexInformer::with_cancel(lw, options, self.inner.cancel.child_token());
        if self.inner.started.load(Ordering::Acquire) {
            informer.start()?;
        }
        informers.insert(key, Arc::new(informer.clone()));
        Ok(informer)
    }

    /// Starts every informer; informers created later start immediately.
    pub fn start(&self) -> Result<(), CacheError> {
        let informers = self.inner.informers.lock();
        self.inner.started.store(true, Ordering::Release);
        for inf in informers.values() {
            inf.start()?;
        }
        Ok(())
    }

    /// Stops every informer.
    pub fn stop(&self) {
        self.inner.cancel.cancel();
        for inf in self.inner.informers.lock().values() {
            inf.stop();
        }
    }

    /// The number of informers (one per distinct scope).
    pub fn informer_count(&self) -> usize {
        self.inner.informers.lock().len()
    }

    /// Waits until every informer has synced. On timeout the error names
    /// each informer that did not, with its last list/watch error (a
    /// `403 Forbidden` there means missing RBAC).
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), CacheError> {
        let informers: Vec<Arc<dyn AnyInformer>> =
            self.inner.informers.lock().values().cloned().collect();
        let wait_all = async {
            for inf in &informers {
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
                Err(_) => Err(self.sync_timeout(&informers, timeout)),
            },
            _ = stopped => Err(CacheError::Stopped("the cache".into())),
        }
    }

    fn sync_timeout(&self, informers: &[Arc<dyn AnyInformer>], timeout: Duration) -> CacheError {
        let kinds = informers
            .iter()
            .filter(|i| !*i.subscribe_synced().borrow())
            .map(|i| start::pending_description(&**i))
            .collect();
        CacheError::SyncTimeout { timeout, kinds }
    }

    fn find<K>(&self, namespace: Option<&str>) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let dt = K::DynamicType::default();
        let mut key = InformerKey {
            type_id: TypeId::of::<K>(),
            api_version: K::api_version(&dt).into_owned(),
            kind: K::kind(&dt).into_owned(),
            namespace: None,
            labels: None,
            fields: None,
        };
        let informers = self.inner.informers.lock();
        let found = informers.get(&key).or_else(|| {
            key.namespace = namespace.map(str::to_string);
            namespace.and_then(|_| informers.get(&key))
        });
        found
            .and_then(|i| i.as_any().downcast_ref::<SharedIndexInformer<K>>().cloned())
            .ok_or_else(|| CacheError::NoInformer(format!("{}/{}", key.api_version, key.kind)))
    }

    /// The cached object `name` in `namespace` (`None`: cluster-scoped),
    /// from the all-namespaces informer of `K` (or the one for `namespace`).
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Result<Option<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        Ok(self
            .find::<K>(namespace)?
            .indexer()
            .get_by_name(namespace, name))
    }

    /// The cached objects of `K` in `namespace` (`None`: all).
    pub fn list<K>(&self, namespace: Option<&str>) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        let inf = self.find::<K>(namespace)?;
        Ok(match namespace {
            Some(ns) => inf.indexer().list_namespace(ns),
            None => inf.indexer().list(),
        })
    }

    /// The cached objects of `K` whose `index` values include `value`.
    pub fn by_index<K>(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
    {
        Ok(self.find::<K>(None)?.indexer().by_index(index, value)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};

    #[tokio::test]
    async fn one_informer_per_scope() {
        let cache = SharedCache::new(list_watch::tests::test_client());
        let a = cache.informer::<ConfigMap>().unwrap();
        let b = cache.informer::<ConfigMap>().unwrap();
        assert!(Arc::ptr_eq(&a.inner_ptr(), &b.inner_ptr()));
        let _ns = cache
            .informer_for(Scope::<ConfigMap>::all().namespace("x"))
            .unwrap();
        let _ns2 = cache
            .informer_for(Scope::<ConfigMap>::all().namespace("x"))
            .unwrap();
        let _sel = cache
            .informer_for(Scope::<ConfigMap>::all().namespace("x").labels("a=b"))
            .unwrap();
        let _meta = cache.informer::<PartialObjectMeta<ConfigMap>>().unwrap();
        let _pods = cache.informer::<Pod>().unwrap();
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let _dyn = cache
            .informer_for(Scope::<DynamicObject>::with_dyntype(ar))
            .unwrap();
        assert_eq!(cache.informer_count(), 6);
        assert!(cache.get::<ConfigMap>(Some("x"), "y").unwrap().is_none());
        assert!(matches!(
            cache.list::<k8s_openapi::api::core::v1::Secret>(None),
            Err(CacheError::NoInformer(_))
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_for_sync_names_the_kind() {
        let cache = SharedCache::new(list_watch::tests::test_client());
        cache.informer::<ConfigMap>().unwrap();
        let err = cache
            .wait_for_sync(Duration::from_millis(10))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("v1/ConfigMap"), "{msg}");
        assert!(msg.contains("not started"), "{msg}");
        assert!(msg.contains("RBAC"), "{msg}");
    }
}
