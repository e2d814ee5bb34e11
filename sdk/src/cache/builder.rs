//! [`SharedCacheBuilder`]: a shared cache with non-default settings.

use std::{
    any::TypeId,
    collections::HashMap,
    fmt,
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use kube::Client;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use super::{
    error::ReflectorError,
    informer::{ReflectorConfig, Transform, WatchErrorHandler},
    read_your_writes::{self, WriteTracker},
    shared_cache::{CacheInner, KindTransforms, SharedCache},
};

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
    /// cache it as `Projected<K, WithManagedFields<K>>` ([`WithManagedFields`](crate::cache::WithManagedFields)).
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
    /// ([`SharedIndexInformer::describe`](crate::cache::SharedIndexInformer::describe)).
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
                read_your_writes::recording_client(self.client.clone(), Arc::clone(tracker))
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
                filters: Mutex::default(),
            }),
        }
    }
}
