//! The SharedIndexInformer: runs a [`Reflector`] into a [`DeltaFifo`], applies
//! the popped deltas to an [`Indexer`], and distributes add / update / delete
//! notifications to every registered [`EventHandler`].
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{InformerEvent, SharedCache, handler_fn};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! let informer = cache.informer::<ConfigMap>()?;
//! let reg = informer.add_event_handler(handler_fn(|e: InformerEvent<ConfigMap>| {
//!     if let InformerEvent::Update { old, new, is_resync: false } = e {
//!         println!("{:?}: {:?} -> {:?}", new.metadata.name,
//!                  old.metadata.resource_version, new.metadata.resource_version);
//!     }
//! }))?;
//! cache.start()?;
//! informer.wait_for_sync().await?;
//! reg.wait_synced().await;
//! let cached = informer.store().get(Some("default"), "my-config");
//! # let _ = cached;
//! cache.stop();
//! # Ok(()) }
//! ```
//!
//! Deltas are applied in order, oldest first (client-go's `HandleDeltas`):
//! `Added`/`Updated`/`Replaced`/`Sync` store the object and notify `Update`
//! (old and new) if the key was present, `Add` otherwise; `Deleted` removes it
//! and notifies `Delete`. An `Update` whose resourceVersion did not change
//! (a resync, or a relist that found the object unchanged) is flagged
//! `is_resync` and goes only to the handlers whose resync period is due.
//!
//! The transform hook runs before objects are stored; the default drops
//! `metadata.managedFields` (see
//! [`SharedCacheBuilder::keep_managed_fields`](crate::cache::SharedCacheBuilder::keep_managed_fields)).

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{
    delta_fifo::{DeletedFinalStateUnknown, DeletedObject, Delta, DeltaFifo, Popped},
    list_watch::ListWatch,
    processor::{EventHandler, HandlerRegistration, InformerEvent, Processor},
    reflector::Reflector,
    reflector_config::WatchErrorHandler,
    reflector_config::{ListFilter, ReflectorConfig, Transform, strip_managed_fields},
    reflector_metrics::{ReflectorMetrics, ReflectorStats},
    store::{Indexer, Store},
    tasks::Tasks,
    write_observer::WriteObserver,
};
use crate::cache::cacheable::Cacheable;
use crate::cache::{
    error::{CacheError, IndexError},
    key::ObjectKey,
    undecodable::UndecodableObject,
};

/// Informer settings.
pub(crate) struct InformerOptions<K> {
    /// Reflector settings (page size, streaming list, watch timeout, backoff).
    pub reflector: ReflectorConfig,
    /// Applied to every object before it is stored. Default: strip
    /// `metadata.managedFields`; `None` keeps objects as received.
    pub transform: Option<Transform<K>>,
    /// Resync period of handlers registered without one (`None`: no resync).
    pub default_resync: Option<Duration>,
    /// What to list by beyond the informer's own selectors, as its owner
    /// hands it (a sharded replica's share): the reflector waits for the
    /// first value and relists whenever it changes; `None`: list everything.
    pub filter: Option<watch::Receiver<Option<ListFilter>>>,
}

impl<K: Resource + 'static> Default for InformerOptions<K> {
    fn default() -> Self {
        Self {
            reflector: ReflectorConfig::default(),
            transform: Some(Arc::new(strip_managed_fields::<K>)),
            default_resync: None,
            filter: None,
        }
    }
}

impl<K> Clone for InformerOptions<K> {
    fn clone(&self) -> Self {
        Self {
            reflector: self.reflector.clone(),
            transform: self.transform.clone(),
            default_resync: self.default_resync,
            filter: self.filter.clone(),
        }
    }
}

struct Inner<K> {
    lw: ListWatch<K>,
    name: String,
    indexer: Indexer<K>,
    fifo: Arc<DeltaFifo<K>>,
    processor: Processor<K>,
    block_deltas: Mutex<()>,
    options: InformerOptions<K>,
    metrics: Arc<ReflectorMetrics>,
    started: AtomicBool,
    cancel: CancellationToken,
    /// Every task of this informer, counted until it ends.
    tasks: Tasks,
    /// Given to the reflector at start.
    watch_error_handler: Mutex<Option<WatchErrorHandler>>,
    /// Never sent on: a read waiting for this process's write learns from
    /// its closing that the informer is gone (the write tracker wakes it).
    alive: watch::Sender<()>,
    writes: Option<Arc<dyn WriteObserver>>,
}

/// One informer: a reflector, a DeltaFIFO and a store, with event handlers
/// and indexes (see the [cache docs](crate::cache)). Cloning gives another handle to the
/// same informer. Once started, it runs until [`stop`](Self::stop) (dropping
/// the handles does not stop it; informers of a [`SharedCache`](crate::cache::SharedCache)
/// stop with the cache).
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("name", &self.inner.name)
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .finish()
    }
}

fn same_resource_version<K: Resource>(a: &K, b: &K) -> bool {
    match (&a.meta().resource_version, &b.meta().resource_version) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Cacheable,
{
    /// A new (not yet started) informer over `lw`.
    #[cfg(test)]
    pub(crate) fn new(lw: ListWatch<K>, options: InformerOptions<K>) -> Self {
        Self::with_cancel(lw, options, CancellationToken::new(), None)
    }

    /// A new informer stopped when `cancel` fires, reporting the writes it
    /// shows to `writes` (used by the shared cache).
    pub(crate) fn with_cancel(
        lw: ListWatch<K>,
        options: InformerOptions<K>,
        cancel: CancellationToken,
        writes: Option<Arc<dyn WriteObserver>>,
    ) -> Self {
        let indexer = Indexer::new();
        let fifo = Arc::new(DeltaFifo::new(Some(indexer.clone())));
        let name = lw.describe();
        let tasks = Tasks::new();
        let processor = Processor::new(
            fifo.subscribe_synced(),
            name.clone(),
            tasks.clone(),
            cancel.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                lw,
                name,
                indexer,
                fifo,
                processor,
                block_deltas: Mutex::new(()),
                options,
                metrics: Arc::new(ReflectorMetrics::default()),
                started: AtomicBool::new(false),
                cancel,
                tasks,
                watch_error_handler: Mutex::new(None),
                alive: watch::channel(()).0,
                writes,
            }),
        }
    }

    /// Registers `handler` with the default resync period. After start, the
    /// handler first gets an `Add { is_in_initial_list: true }` for every
    /// object already in the cache. A stopped informer refuses it
    /// ([`CacheError::InformerStopped`]).
    pub fn add_event_handler<H: EventHandler<K>>(
        &self,
        handler: H,
    ) -> Result<HandlerRegistration, CacheError> {
        self.add_event_handler_with_resync(handler, self.inner.options.default_resync)
    }

    /// Registers `handler` with its own resync period (`None`: never).
    pub fn add_event_handler_with_resync<H: EventHandler<K>>(
        &self,
        handler: H,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration, CacheError> {
        let _block = self.inner.block_deltas.lock();
        let existing = self.inner.indexer.list();
        let undecodable = self
            .inner
            .indexer
            .undecodable_entries()
            .into_iter()
            .map(|(_, record)| record)
            .collect();
        self.inner
            .processor
            .add_listener(handler, resync, existing, undecodable)
    }

    /// Removes a handler; it receives nothing more. False, and nothing
    /// changes, if it was registered with another informer (that informer
    /// keeps it) or is already removed.
    pub fn remove_event_handler(&self, registration: &HandlerRegistration) -> bool {
        self.inner.processor.remove_listener(registration)
    }

    /// The number of registered handlers.
    pub fn handler_count(&self) -> usize {
        self.inner.processor.len()
    }

    /// A read-only handle to the informer's store.
    pub fn store(&self) -> Store<K> {
        Store::new(self.inner.indexer.clone())
    }

    /// Adds the index `name`: `index` gives an object's values (empty: not
    /// indexed). It is built over the objects already stored and kept up to
    /// date; read it with [`Store::by_index`]. A second index of the same
    /// name is an error.
    pub fn add_index(
        &self,
        name: impl Into<String>,
        index: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), IndexError> {
        self.inner.indexer.add_indexer(name, index)
    }

    /// True once the initial list has been applied to the store and
    /// distributed.
    pub fn has_synced(&self) -> bool {
        self.inner.fifo.has_synced()
    }

    /// A receiver that turns `true` once synced.
    pub(crate) fn subscribe_synced(&self) -> watch::Receiver<bool> {
        self.inner.fifo.subscribe_synced()
    }

    /// Waits until synced; an error if the informer stopped first. Bound
    /// it with `tokio::time::timeout` (an informer that cannot list, e.g.
    /// for lack of RBAC, retries for ever; [`SharedCache::wait_for_sync`](crate::cache::SharedCache::wait_for_sync)
    /// takes a timeout and names the cause).
    pub async fn wait_for_sync(&self) -> Result<(), CacheError> {
        let mut rx = self.inner.fifo.subscribe_synced();
        let synced = tokio::select! {
            r = rx.wait_for(|s| *s) => r.is_ok(),
            _ = self.inner.cancel.cancelled() => self.has_synced(),
        };
        if synced {
            Ok(())
        } else {
            Err(CacheError::Stopped(self.inner.name.clone()))
        }
    }

    /// A channel never sent on, closed when this informer is gone: what a
    /// read waiting for the informer to show a change wakes on.
    pub(crate) fn subscribe_alive(&self) -> watch::Receiver<()> {
        self.inner.alive.subscribe()
    }

    /// The reflector's counters (LIST/WATCH requests, skipped objects, ...).
    pub(crate) fn metrics(&self) -> &Arc<ReflectorMetrics> {
        &self.inner.metrics
    }

    /// A snapshot of the reflector's counters.
    pub fn stats(&self) -> ReflectorStats {
        self.inner.metrics.stats()
    }

    /// What this informer watches, e.g. `v1/ConfigMap (all namespaces)`.
    pub fn describe(&self) -> &str {
        &self.inner.name
    }

    /// The list/watch target.
    pub(crate) fn list_watch(&self) -> &ListWatch<K> {
        &self.inner.lw
    }

    /// Calls `handler` with every failed list or watch attempt of this
    /// informer (client-go's `SetWatchErrorHandler`; what
    /// [`SharedCacheBuilder::watch_error_handler`](crate::cache::SharedCacheBuilder::watch_error_handler)
    /// sets on every informer of a cache). Refused once started.
    pub(crate) fn set_watch_error_handler_arc(
        &self,
        handler: WatchErrorHandler,
    ) -> Result<(), CacheError> {
        // `start` reads the handler under this lock after marking itself
        // started: a handler set here is either refused or given to it.
        let mut slot = self.inner.watch_error_handler.lock();
        if self.is_started() {
            return Err(CacheError::InformerStarted(self.inner.name.clone()));
        }
        *slot = Some(handler);
        Ok(())
    }

    /// True once started.
    pub(crate) fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::Acquire)
    }

    /// True once stopped.
    #[cfg(test)]
    pub(crate) fn is_stopped(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Starts the reflector, the delta processing and the resync timer on the
    /// current Tokio runtime. Idempotent.
    pub(crate) fn start(&self) -> Result<(), CacheError> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| CacheError::NoRuntime("SharedIndexInformer::start"))?;
        if self.inner.started.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let inner = &self.inner;
        let reflector = Reflector::new(
            inner.lw.clone(),
            Arc::clone(&inner.fifo),
            inner.options.reflector.clone(),
        )
        .with_transform(inner.options.transform.clone())
        .with_metrics(Arc::clone(&inner.metrics))
        .with_watch_error_handler(inner.watch_error_handler.lock().clone())
        .with_filter(inner.options.filter.clone());
        inner.tasks.spawn(&rt, reflector.run(inner.cancel.clone()));
        inner.tasks.spawn(&rt, process_loop(Arc::clone(inner)));
        inner.tasks.spawn(&rt, resync_loop(Arc::clone(inner)));
        tracing::debug!(informer = %inner.name, "informer started");
        Ok(())
    }

    /// The number of this informer's tasks still running: the reflector,
    /// the delta processing and the resync timer once started, and one
    /// listener per registered handler. Zero once
    /// [`wait_stopped`](Self::wait_stopped) returns.
    pub fn live_tasks(&self) -> usize {
        self.inner.tasks.live()
    }

    /// Waits until the informer is stopped ([`stop`](Self::stop), or its
    /// shared cache stopped) and every task it spawned has ended (see
    /// [`live_tasks`](Self::live_tasks)).
    pub async fn wait_stopped(&self) {
        self.inner.cancel.cancelled().await;
        self.inner.tasks.wait_idle().await;
    }

    /// Stops the informer: the watch is closed, handlers get nothing more
    /// (a handler call in progress is dropped at its next `.await`), new
    /// handlers are refused, and every task ends
    /// ([`wait_stopped`](Self::wait_stopped)).
    pub fn stop(&self) {
        self.inner.cancel.cancel();
        self.inner.fifo.close();
        self.inner.processor.stop();
    }
}

impl<K: Resource + Send + Sync + 'static> Inner<K> {
    fn handle_deltas(&self, popped: Popped<K>) {
        let _block = self.block_deltas.lock();
        let Popped {
            key,
            deltas,
            is_in_initial_list,
        } = popped;
        for delta in deltas {
            let relisted = matches!(delta, Delta::Replaced(_));
            match delta {
                Delta::Added(obj)
                | Delta::Updated(obj)
                | Delta::Replaced(obj)
                | Delta::Sync(obj) => {
                    let old = self.indexer.insert(key.clone(), Arc::clone(&obj));
                    self.observe_write(&key, Some(&*obj), None, relisted);
                    match old {
                        Some(old) => {
                            let is_resync = same_resource_version(&*old, &*obj);
                            self.processor.distribute(
                                InformerEvent::Update {
                                    old,
                                    new: obj,
                                    is_resync,
                                },
                                is_resync,
                            );
                        }
                        None => self.processor.distribute(
                            InformerEvent::Add {
                                obj,
                                is_in_initial_list,
                            },
                            false,
                        ),
                    }
                }
                Delta::Deleted(obj) => {
                    self.indexer.remove(key.as_str());
                    if let Some(writes) = &self.writes {
                        writes.deleted(&key, obj.object().meta().resource_version.as_deref());
                    }
                    self.observe_write(&key, None, Some(obj.object()), obj.is_tombstone());
                    self.processor
                        .distribute(InformerEvent::Delete { obj }, false);
                }
                Delta::Undecodable(record) => self.apply_undecodable(&key, record),
                Delta::UndecodableDeleted(record) => {
                    // a decodable copy, if any, gets the usual tombstone
                    let had_record = self.indexer.undecodable(key.as_str()).is_some();
                    if let Some(old) = self.indexer.remove(key.as_str()) {
                        self.observe_write(&key, None, Some(&*old), true);
                        let tomb = DeletedFinalStateUnknown {
                            key: key.clone(),
                            last_known: old,
                        };
                        self.processor.distribute(
                            InformerEvent::Delete {
                                obj: DeletedObject::Tombstone(tomb),
                            },
                            false,
                        );
                    } else if had_record {
                        tracing::info!(
                            informer = %self.name,
                            key = %key.as_str(),
                            resource_version = record.resource_version().unwrap_or(""),
                            "undecodable object deleted"
                        );
                        self.processor.distribute_undecodable(record);
                    }
                    self.count_undecodable();
                }
            }
        }
        // a decodable version or a delete may have dropped a record; none
        // can have been dropped when none was counted (every record added
        // is counted at once), so the common case costs no store lock
        if self.metrics.undecodable_objects() > 0
            && self.metrics.undecodable_objects() != self.indexer.undecodable_len()
        {
            self.count_undecodable();
        }
    }

    fn count_undecodable(&self) {
        let kind = format!("{}/{}", self.lw.api_version(), self.lw.kind());
        self.metrics
            .set_undecodable_objects(&kind, self.indexer.undecodable_len());
    }

    /// The current version of `key` does not decode: the record replaces
    /// whatever the store held. Logged and told to handlers once per
    /// resourceVersion (a relist of the same version is silent).
    fn apply_undecodable(&self, key: &ObjectKey, record: Arc<UndecodableObject>) {
        let (old, old_record) = self
            .indexer
            .set_undecodable(key.clone(), Arc::clone(&record));
        // a write of this process is shown by the version's metadata alone
        if let Some(writes) = &self.writes
            && writes.any_pending()
        {
            writes.applied(key, Some(record.metadata()), None, false);
        }
        self.count_undecodable();
        let same_version = old_record.is_some_and(|r| {
            r.resource_version().is_some() && r.resource_version() == record.resource_version()
        });
        if same_version && old.is_none() {
            return;
        }
        tracing::warn!(
            informer = %self.name,
            key = %key.as_str(),
            resource_version = record.resource_version().unwrap_or(""),
            error = %record.error(),
            replaced_cached_copy = old.is_some(),
            "object does not deserialize into the Rust type; the cache keeps its metadata and \
             reads of it fail with CacheError::Undecodable until a version decodes"
        );
        self.processor.distribute_undecodable(record);
    }

    /// Drops the record of a write of this process once the store shows it
    /// (nothing when no write is pending: one atomic load).
    fn observe_write(
        &self,
        key: &ObjectKey,
        current: Option<&K>,
        deleted: Option<&K>,
        relisted: bool,
    ) {
        if let Some(writes) = &self.writes
            && writes.any_pending()
        {
            writes.applied(
                key,
                current.map(Resource::meta),
                deleted.map(Resource::meta),
                relisted,
            );
        }
    }
}

const POP_BATCH: usize = 256;

async fn process_loop<K>(inner: Arc<Inner<K>>)
where
    K: Resource + Send + Sync + 'static,
{
    loop {
        let n = inner.fifo.pop_ready(POP_BATCH, |p| inner.handle_deltas(p));
        if n == POP_BATCH {
            tokio::task::yield_now().await;
            continue;
        }
        let popped = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            r = inner.fifo.pop(|p| inner.handle_deltas(p)) => r,
        };
        if popped.is_err() {
            break;
        }
    }
    tracing::trace!(informer = %inner.name, "delta processing stopped");
}

async fn resync_loop<K>(inner: Arc<Inner<K>>)
where
    K: Resource + Send + Sync + 'static,
{
    loop {
        let next = inner.processor.next_resync_at();
        tokio::select! {
            _ = inner.cancel.cancelled() => break,
            _ = inner.processor.resync_changed() => continue,
            _ = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                if inner.processor.should_resync(tokio::time::Instant::now()) {
                    tracing::trace!(informer = %inner.name, "resync");
                    inner.fifo.resync();
                }
            }
        }
    }
}

#[cfg(test)]
impl<K> SharedIndexInformer<K> {
    pub(crate) fn inner_ptr(&self) -> Arc<impl Sized> {
        Arc::clone(&self.inner)
    }
}
