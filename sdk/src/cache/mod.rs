//! The shared informer cache: client-go's informer machinery (Reflector,
//! DeltaFIFO, Indexer, shared processor) in async Rust, and the
//! [`SharedCache`] that hands out exactly one informer per watched scope.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{InformerEvent, Scope, SharedCache, handler_fn};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! // Every caller asking for the same (kind, namespace, selectors) gets the same informer.
//! let informer = cache.informer::<ConfigMap>()?;
//! informer.add_event_handler(handler_fn(|e: InformerEvent<ConfigMap>| match e {
//!     InformerEvent::Add { obj, is_in_initial_list } => println!("add {:?} {is_in_initial_list}", obj.metadata.name),
//!     InformerEvent::Update { new, is_resync, .. } => println!("update {:?} resync={is_resync}", new.metadata.name),
//!     InformerEvent::Delete { obj } => println!("delete {:?} tombstone={}", obj.object().metadata.name, obj.is_tombstone()),
//! }))?;
//! // A read-only handle, usable before the cache syncs (it fills as it does).
//! let config_maps = cache.store::<ConfigMap>()?;
//! let _prod = cache.informer_for(Scope::<ConfigMap>::all().namespace("prod").labels("app=shop"))?;
//! cache.start()?;
//! cache.wait_for_sync(Duration::from_secs(30)).await?; // names the kind that did not sync
//! let cm = config_maps.get(Some("default"), "kube-root-ca.crt");
//! let all = cache.list::<ConfigMap>(Some("default"))?;
//! # let _ = (cm, all);
//! # Ok(()) }
//! ```
//!
//! # Scope and reads
//!
//! A cache watches all namespaces, or one ([`SharedCacheBuilder::namespace`],
//! what [`Manager`](crate::manager::ManagerBuilder::namespace) sets).
//! [`informer`](SharedCache::informer), [`store`](SharedCache::store) and
//! the reads [`get`](SharedCache::get), [`list`](SharedCache::list) and
//! [`by_index`](SharedCache::by_index) use that default scope; asking a
//! namespaced cache for another namespace is an error that says so.
//! Informers of other scopes ([`informer_for`](SharedCache::informer_for))
//! are read through their own [`store`](SharedIndexInformer::store).
//!
//! Users read; only the informer writes. [`Store`] has no write methods.
//!
//! # The pieces
//!
//! [`SharedIndexInformer`] (the list and watch requests, reflector,
//! DeltaFIFO and store tied together, with event handlers and indexes; one
//! per scope, made and started by the [`SharedCache`]), [`Store`] (read-only), [`EventHandler`] and [`InformerEvent`]. The
//! reflector relists on 410, pages or streams the initial list, and backs
//! off with jitter ([`ReflectorConfig`], [`BackoffConfig`]).
//!
//! Memory: objects are stored once, as `Arc<K>`, shared by the store, the
//! queue and every notification; `metadata.managedFields` is stripped before
//! storing unless [`SharedCacheBuilder::keep_managed_fields`] is set (or
//! kept as raw bytes for one kind by [`WithManagedFields`]). Stripped, they
//! are never decoded: protobuf skips the field and JSON bytes have it cut
//! out before they are deserialized. JSON is decoded with every `Vec` at
//! its length ([`from_slice_exact`]), not with the room serde's pushes
//! leave (a Pod's one container status in room for four). A
//! per-kind transform ([`SharedCacheBuilder::transform`], client-go's
//! `SetTransform`) can slim objects further before they are stored, and a
//! [`Projection`] caches a type of the user's own made from each object
//! (`Projected<K, P>`: one informer per `(K, P)`, mapped once per event).
//!
//! Wire format: `ConfigMap` and `Secret` are listed and watched as
//! protobuf, as client-go does for built-in kinds (a third of the API
//! server's CPU of JSON for the same list, and less decoding here); every
//! other kind, custom resources included, as JSON. A server answering JSON
//! is read as JSON. [`ReflectorConfig::protobuf`] turns protobuf off.

mod backoff;
mod decode;
mod delta_fifo;
mod error;
mod informer;
mod key;
mod list_watch;
mod managed_fields;
mod processor;
mod projection;
pub mod read_your_writes;
mod reflector;
mod sharded;
mod start;
mod store;
mod tasks;
pub mod undecodable;
mod wire;
mod write_recorder;

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
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use backoff::BackoffConfig;
pub use decode::from_slice_exact;
pub use delta_fifo::{DeletedFinalStateUnknown, DeletedObject};
pub use error::{ApiStatus, CacheError, IndexError, ReflectorError, UnobservedWrite};
use informer::InformerOptions;
pub use informer::SharedIndexInformer;
use list_watch::ListWatch;
pub use managed_fields::WithManagedFields;
pub use processor::{
    EventHandler, HandlerFn, HandlerRegistration, InformerEvent, MINIMUM_RESYNC_PERIOD, handler_fn,
};
pub(crate) use projection::drops_owner_references as projection_drops_owner_references;
pub use projection::{Projected, Projection};
use read_your_writes::{WriteTracker, wait_observed};
use reflector::strip_managed_fields;
pub use reflector::{ReflectorConfig, ReflectorStats, StreamingList, Transform, WatchErrorHandler};
pub(crate) use sharded::{ShardMode, ShardSelector, ShardShare, metadata_informer};
pub use start::START_LIST_ATTEMPTS;
pub use store::{NAMESPACE_INDEX, Store};
pub use undecodable::UndecodableObject;

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

impl InformerKey {
    fn of<K: Resource + 'static>(scope: &Scope<K>) -> Self {
        Self {
            type_id: TypeId::of::<K>(),
            api_version: K::api_version(&scope.dyntype).into_owned(),
            kind: K::kind(&scope.dyntype).into_owned(),
            namespace: scope.namespace.clone(),
            labels: scope.labels.clone(),
            fields: scope.fields.clone(),
        }
    }

    /// `apps/v1/Deployment (namespace prod)`, for errors.
    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{}/{} (namespace {ns})", self.api_version, self.kind),
            None => format!("{}/{}", self.api_version, self.kind),
        }
    }
}

trait AnyInformer: Send + Sync {
    fn as_any(&self) -> &(dyn Any + Send + Sync);
    fn start(&self) -> Result<(), CacheError>;
    fn stop(&self);
    fn wait_stopped(&self) -> futures::future::BoxFuture<'static, ()>;
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
    fn wait_stopped(&self) -> futures::future::BoxFuture<'static, ()> {
        let informer = self.clone();
        Box::pin(async move { informer.wait_stopped().await })
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
    /// What users write through: records writes when read-your-writes is on.
    client: Client,
    /// What informers list and watch through.
    raw_client: Client,
    writes: Option<Arc<WriteTracker>>,
    informers: Mutex<HashMap<InformerKey, Arc<dyn AnyInformer>>>,
    /// Each kind's cache-scope informer (a `SharedIndexInformer<K>`) once
    /// it has synced (it stays synced), by Rust type: a reconcile's reads
    /// and read-your-writes waits find it without building an
    /// [`InformerKey`] (a `Default` dynamic type makes the type one GVK).
    synced_informers: RwLock<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    started: AtomicBool,
    cancel: CancellationToken,
    namespace: Option<String>,
    reflector: ReflectorConfig,
    strip_managed_fields: bool,
    transforms: KindTransforms,
    default_resync: Option<Duration>,
    watch_error_handler: Option<WatchErrorHandler>,
    /// Kinds whose cache-scope informer lists only this replica's shard:
    /// the selector's receiver, by Rust type.
    sharded: Mutex<HashMap<TypeId, ShardShare>>,
}

/// Per-kind transforms ([`SharedCacheBuilder::transform`]): a
/// `Transform<K>` per Rust type, behind `Any`.
type KindTransforms = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

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
    read_your_writes: bool,
    namespace: Option<String>,
    reflector: ReflectorConfig,
    strip_managed_fields: bool,
    transforms: KindTransforms,
    default_resync: Option<Duration>,
    watch_error_handler: Option<WatchErrorHandler>,
}

impl fmt::Debug for SharedCacheBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedCacheBuilder")
            .field("namespace", &self.namespace)
            .field("reflector", &self.reflector)
            .field("strip_managed_fields", &self.strip_managed_fields)
            .field("transforms", &self.transforms.len())
            .field("default_resync", &self.default_resync)
            .field("read_your_writes", &self.read_your_writes)
            .field("watch_error_handler", &self.watch_error_handler.is_some())
            .finish()
    }
}

impl SharedCacheBuilder {
    /// Record the writes made through [`SharedCache::client`] so reads
    /// through a reconcile's [`Context`](crate::reconcile::Context) wait
    /// until the cache shows them (default: on; see
    /// [`read_your_writes`]). Off: the client is the one given, nothing is
    /// recorded, and no read waits.
    pub fn read_your_writes(mut self, enabled: bool) -> Self {
        self.read_your_writes = enabled;
        self
    }

    /// Watch only `namespace` by default (cluster-scoped kinds are still
    /// watched cluster-wide): [`informer`](SharedCache::informer),
    /// [`store`](SharedCache::store) and the reads use this scope.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into()).filter(|s: &String| !s.is_empty());
        self
    }

    /// Reflector settings of every informer (page size, streaming list, ...).
    pub fn reflector_config(mut self, config: ReflectorConfig) -> Self {
        self.reflector = config;
        self
    }

    /// Keep `metadata.managedFields`, decoded, in every object (stripped by
    /// default to save memory). Decoded into k8s-openapi's types they are
    /// large (about 3 KB per ConfigMap written by one manager, 19 KB per
    /// Pod written by two); to keep them for one kind as raw bytes instead,
    /// cache it as `Projected<K, WithManagedFields<K>>` ([`WithManagedFields`]).
    pub fn keep_managed_fields(mut self) -> Self {
        self.strip_managed_fields = false;
        self
    }

    /// Slims every object of kind `K` before it is stored, to save memory
    /// (client-go's `SetTransform`), e.g. drops annotations or data the
    /// controllers never read. It runs once per object as it arrives (list
    /// and watch), after `managedFields` are stripped; reads hand out the
    /// stored `Arc<K>`, never a copy. Every informer of `K` in this cache
    /// uses it, so read-side code must not expect what it removes. A second
    /// call for the same `K` replaces the first.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::Pod;
    /// use opkit::cache::SharedCache;
    ///
    /// # fn doc(client: kube::Client) {
    /// let cache = SharedCache::builder(client)
    ///     .transform::<Pod>(|pod| {
    ///         // keep only the annotations this operator reads
    ///         if let Some(a) = pod.metadata.annotations.as_mut() {
    ///             a.retain(|k, _| k.starts_with("example.com/"));
    ///         }
    ///         if let Some(spec) = pod.spec.as_mut() {
    ///             spec.volumes = None;
    ///         }
    ///     })
    ///     .build();
    /// # let _ = cache;
    /// # }
    /// ```
    pub fn transform<K>(mut self, transform: impl Fn(&mut K) + Send + Sync + 'static) -> Self
    where
        K: 'static,
    {
        let transform: Transform<K> = Arc::new(transform);
        self.transforms
            .insert(TypeId::of::<K>(), Arc::new(transform));
        self
    }

    /// Resync period of handlers registered without one (default: none).
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = Some(period);
        self
    }

    /// Calls `handler` with every failed list or watch attempt of every
    /// informer of the cache (client-go's `SetWatchErrorHandler`; see
    /// [`WatchErrorHandler`]); the first argument names the informer
    /// ([`SharedIndexInformer::describe`]).
    ///
    /// ```no_run
    /// use opkit::cache::{ReflectorError, SharedCache};
    ///
    /// # fn doc(client: kube::Client) {
    /// let cache = SharedCache::builder(client)
    ///     .watch_error_handler(|informer: &str, error: &ReflectorError| {
    ///         let code = match error {
    ///             ReflectorError::Api(status) => status.code,
    ///             _ => 0,
    ///         };
    ///         tracing::warn!(informer, code, %error, "list/watch failed");
    ///     })
    ///     .build();
    /// # let _ = cache;
    /// # }
    /// ```
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&str, &ReflectorError) + Send + Sync + 'static,
    ) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// The cache.
    pub fn build(self) -> SharedCache {
        // The recording client needs a Tokio runtime (its request buffer is
        // a task); without one, read-your-writes stays off rather than panic.
        let has_runtime = tokio::runtime::Handle::try_current().is_ok();
        if self.read_your_writes && !has_runtime {
            tracing::warn!(
                "SharedCache built outside a Tokio runtime: read-your-writes is off for it; \
                 build the cache inside the runtime"
            );
        }
        let writes = (self.read_your_writes && has_runtime).then(|| Arc::new(WriteTracker::new()));
        let client = match &writes {
            Some(tracker) => {
                write_recorder::recording_client(self.client.clone(), Arc::clone(tracker))
            }
            None => self.client.clone(),
        };
        SharedCache {
            inner: Arc::new(CacheInner {
                client,
                raw_client: self.client,
                writes,
                informers: Mutex::new(HashMap::new()),
                synced_informers: RwLock::new(HashMap::new()),
                started: AtomicBool::new(false),
                cancel: CancellationToken::new(),
                namespace: self.namespace,
                reflector: self.reflector,
                strip_managed_fields: self.strip_managed_fields,
                transforms: self.transforms,
                default_resync: self.default_resync,
                watch_error_handler: self.watch_error_handler,
                sharded: Mutex::default(),
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
            .field("namespace", &self.inner.namespace)
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .field(
                "informers",
                &informers.values().map(|i| i.describe()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// True when objects of `K` live in namespaces.
pub(crate) fn is_namespaced<K: Resource>() -> bool
where
    K::Scope: 'static,
{
    TypeId::of::<K::Scope>() != TypeId::of::<k8s_openapi::ClusterResourceScope>()
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
            read_your_writes: true,
            namespace: None,
            reflector: ReflectorConfig::default(),
            strip_managed_fields: true,
            transforms: HashMap::new(),
            default_resync: None,
            watch_error_handler: None,
        }
    }

    /// The client to write through: with read-your-writes on (the
    /// default), it records every write of a kind this cache watches, so
    /// reads through a reconcile's [`Context`](crate::reconcile::Context)
    /// wait until the cache shows it (see [`read_your_writes`]).
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
    fn default_scope<K>(&self) -> Scope<K>
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
    /// or the cache's [`namespace`](SharedCacheBuilder::namespace)), created
    /// on first use (and started if the cache is).
    pub fn informer<K>(&self) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
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
        K: Resource + DeserializeOwned + Send + Sync + 'static,
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
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        Ok(self.informer::<K>()?.add_index(name, index)?)
    }

    /// The informer for `scope`: the same one for every caller asking for
    /// the same (GVK, Rust type, namespace, label selector, field selector).
    pub fn informer_for<K>(&self, scope: Scope<K>) -> Result<SharedIndexInformer<K>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
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
        let hook = match &self.inner.writes {
            Some(tracker) if reads_scope => {
                let api_version = K::api_version(&scope.dyntype).into_owned();
                let plural = K::plural(&scope.dyntype).into_owned();
                Some(informer::WriteHook {
                    tracker: Arc::clone(tracker),
                    api_version,
                    plural,
                })
            }
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
        if self.inner.strip_managed_fields && !projection::keeps_managed_fields::<K>() {
            lw = lw.without_managed_fields();
        }
        let shard = if reads_scope {
            self.inner.sharded.lock().get(&TypeId::of::<K>()).cloned()
        } else {
            None
        };
        let options = InformerOptions {
            reflector: self.inner.reflector.clone(),
            transform: self.transform_of::<K>(),
            default_resync: self.inner.default_resync,
            shard,
        };
        let informer =
            SharedIndexInformer::with_cancel(lw, options, self.inner.cancel.child_token(), hook);
        if let Some(handler) = &self.inner.watch_error_handler {
            informer.set_watch_error_handler_arc(Arc::clone(handler))?;
        }
        if let Some(hook) = informer.write_hook() {
            let store = informer.store();
            hook.tracker.watch_kind(
                &hook.api_version,
                &hook.plural,
                namespace.as_deref(),
                Arc::new(
                    move |key: &read_your_writes::WriteKey, written: &read_your_writes::Written| {
                        written
                            .observed_in(store.get(key.namespace.as_deref(), &key.name).as_deref())
                    },
                ),
            );
        }
        if self.inner.started.load(Ordering::Acquire) {
            informer.start()?;
        }
        informers.insert(key, Arc::new(informer.clone()));
        Ok(informer)
    }

    /// Makes the cache-scope informer of `K` list and watch only the
    /// replica's share `selector` holds (a sharded controller's primary
    /// and owned kinds): by its KEP-5866 shard selector where the server
    /// filters by it (relisting when it changes), else by its shard label
    /// if the kind is labelled, else everything.
    /// Must come before that informer is created; later, it is logged and
    /// the informer keeps every object.
    pub(crate) fn shard_kind<K>(&self, selector: watch::Receiver<Option<ShardSelector>>)
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
                "this kind is already cached unsharded (read before the sharded controller \
                 started); its cache is not divided"
            );
            return;
        }
        let (mode, _) = watch::channel(None);
        self.inner
            .sharded
            .lock()
            .insert(TypeId::of::<K>(), ShardShare { selector, mode });
    }

    /// How the cache-scope informer of a kind given to
    /// [`shard_kind`](Self::shard_kind) divides it: `None` inside until its
    /// reflector has probed the server; `None` for a kind not sharded.
    pub(crate) fn shard_mode<K: 'static>(&self) -> Option<watch::Receiver<Option<ShardMode>>> {
        self.inner
            .sharded
            .lock()
            .get(&TypeId::of::<K>())
            .map(|share| share.mode.subscribe())
    }

    /// What informers of `K` apply before storing: the `managedFields`
    /// strip (unless kept), then the kind's own transform, if any.
    fn transform_of<K>(&self) -> Option<Transform<K>>
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

    async fn wait_for(
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

    /// The store of `K` in the cache's scope once its informer has synced:
    /// the informer is created (and started) on first use, as
    /// controller-runtime's cache does for a kind read before anyone
    /// watched it. Waits at most `timeout`; the error names the kind and
    /// its last list/watch error (RBAC, a missing CRD).
    pub(crate) async fn synced_store<K>(&self, timeout: Duration) -> Result<Store<K>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
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
    fn synced_informer<K: 'static>(&self) -> Option<SharedIndexInformer<K>> {
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
        K: Resource + DeserializeOwned + Send + Sync + 'static,
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
        wait_observed(tracker, informer.observed(), pending, wait).await
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
        K: Resource + DeserializeOwned + Send + Sync + 'static,
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
    /// the cache's scope. A kind without an informer is an error (see
    /// [`store`](Self::store) to create one); an object whose current
    /// version does not deserialize into `K` is [`CacheError::Undecodable`].
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Result<Option<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        self.find::<K>(namespace)?.try_get(namespace, name)
    }

    /// The cached objects of `K` in `namespace` (`None`: every object in the
    /// cache's scope).
    pub fn list<K>(&self, namespace: Option<&str>) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        let store = self.find::<K>(namespace)?;
        Ok(match namespace {
            Some(ns) => store.list_namespace(ns),
            None => store.list(),
        })
    }

    /// The cached objects of `K` (in the cache's scope) whose `index` values
    /// include `value`.
    pub fn by_index<K>(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, CacheError>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Default,
        K::Scope: 'static,
    {
        Ok(self.find::<K>(None)?.by_index(index, value)?)
    }
}

fn sync_timeout(informers: &[Arc<dyn AnyInformer>], timeout: Duration) -> CacheError {
    let kinds = informers
        .iter()
        .filter(|i| !*i.subscribe_synced().borrow())
        .map(|i| start::pending_description(&**i))
        .collect();
    CacheError::SyncTimeout { timeout, kinds }
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
        // a projection is an informer of its own (keyed by (K, P))
        struct Phase;
        impl Projection<Pod> for Phase {
            fn project(_: Pod) -> Self {
                Phase
            }
        }
        let projected = cache.informer::<Projected<Pod, Phase>>().unwrap();
        let _projected2 = cache.informer::<Projected<Pod, Phase>>().unwrap();
        assert_eq!(cache.informer_count(), 7);
        // its logs tell it from a whole-object informer of the kind
        assert!(
            projected
                .describe()
                .starts_with("v1/Pod (all namespaces, projected as ")
                && projected.describe().ends_with("Phase)"),
            "{}",
            projected.describe()
        );
        assert!(cache.get::<ConfigMap>(Some("x"), "y").unwrap().is_none());
        assert!(matches!(
            cache.list::<k8s_openapi::api::core::v1::Secret>(None),
            Err(CacheError::NoInformer(_))
        ));
    }

    #[tokio::test]
    async fn kind_transforms_run_after_the_managed_fields_strip() {
        fn cm() -> ConfigMap {
            ConfigMap {
                metadata: kube::api::ObjectMeta {
                    annotations: Some([("big".to_string(), "x".repeat(100))].into()),
                    managed_fields: Some(vec![Default::default()]),
                    ..Default::default()
                },
                ..Default::default()
            }
        }
        let drop_annotations = |c: &mut ConfigMap| c.metadata.annotations = None;
        let cache = SharedCache::builder(list_watch::tests::test_client())
            .transform::<ConfigMap>(drop_annotations)
            .build();
        let mut obj = cm();
        cache.transform_of::<ConfigMap>().expect("a transform")(&mut obj);
        assert_eq!(obj.metadata.annotations, None);
        assert_eq!(obj.metadata.managed_fields, None);
        // other kinds: the strip only
        let mut pod = Pod::default();
        pod.metadata.managed_fields = Some(vec![Default::default()]);
        pod.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        cache.transform_of::<Pod>().expect("the strip")(&mut pod);
        assert_eq!(pod.metadata.managed_fields, None);
        assert!(pod.metadata.annotations.is_some());
        // managedFields kept: the kind's transform alone
        let cache = SharedCache::builder(list_watch::tests::test_client())
            .keep_managed_fields()
            .transform::<ConfigMap>(drop_annotations)
            .build();
        let mut obj = cm();
        cache.transform_of::<ConfigMap>().expect("a transform")(&mut obj);
        assert_eq!(obj.metadata.annotations, None);
        assert!(obj.metadata.managed_fields.is_some());
        assert!(cache.transform_of::<Pod>().is_none());
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
