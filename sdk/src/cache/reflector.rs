//! The Reflector: keeps a [`ReflectorStore`] (the [`DeltaFifo`]) in step with
//! the API server by listing, then watching from the list's resourceVersion.
//!
//! ```no_run
//! // The reflector runs inside an informer; its settings and counters are
//! // the informer's.
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{ReflectorConfig, SharedCache};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::builder(client)
//!     .namespace("default")
//!     .reflector_config(ReflectorConfig { page_size: 500, ..ReflectorConfig::default() })
//!     .build();
//! let informer = cache.informer::<ConfigMap>()?;
//! cache.start()?;
//! informer.wait_for_sync().await?;
//! let stats = informer.stats();
//! println!("{} lists, {} LIST requests so far", stats.relists, stats.list_requests);
//! cache.stop();
//! # Ok(()) }
//! ```
//!
//! Behaviour (client-go's `Reflector`):
//! - **Streaming list** first when enabled (default) and the server supports
//!   it: a watch with `sendInitialEvents=true` collects the initial objects
//!   until the `k8s.io/initial-events-end` bookmark, replaces the store, and
//!   the same stream goes on as the watch. On any error it falls back to a
//!   LIST for this round; a server that rejects the parameters (or is older
//!   than 1.32) is remembered and not asked again.
//! - **Protobuf** for the built-in kinds opkit decodes from it (see
//!   [`ReflectorConfig::protobuf`]), JSON for the rest.
//! - **LIST** otherwise: paginated (500 per page), a consistent read; an
//!   expired `continue` token restarts the list from the first page.
//! - **WATCH** from the list's resourceVersion with `allowWatchBookmarks`;
//!   bookmarks advance the resourceVersion; a server-side timeout randomized
//!   in [5, 10] min. A watch that ends (timeout, connection dropped, API
//!   server restart) is re-opened from the last resourceVersion *without* a
//!   relist; opening it is retried with backoff while the server is
//!   unreachable or answers 429/5xx.
//! - **410 Gone / Expired** (on open or as an `ERROR` event) ends the watch
//!   and triggers a full relist; the relist emits tombstones for objects
//!   deleted during the gap (see [`DeltaFifo::replace`]).
//! - **Backoff** between rounds: jittered exponential, 800 ms → 30 s, reset
//!   after 2 min of health ([`BackoffConfig`]).
//! - An object that fails to deserialize into `K` is kept as an
//!   [`UndecodableObject`] (its metadata; see [`undecodable`](super::undecodable)),
//!   never dropped as if deleted, and counted
//!   ([`ReflectorStats::skipped_objects`]); the stream goes on for the others.
//! - The transform hook runs on every object before it enters the store.

use std::{
    fmt,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kube::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    backoff::{Backoff, BackoffConfig},
    decode::{SkippedObject, WatchLine},
    delta_fifo::DeltaFifo,
    error::{ListFailures, ReflectorError},
    key::ObjectKey,
    list_watch::ListWatch,
    sharded::{ShardMode, ShardSelector, ShardShare},
    undecodable::UndecodableObject,
    wire::{ListOptions, WatchOptions, WatchStream},
};

/// A function applied to every object before it is stored (e.g. to drop
/// fields the controller never reads, saving memory).
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Called with every failed list or watch attempt of an informer (client-go's
/// `WatchErrorHandler`), for logging and metrics: the informer's
/// description ([`SharedIndexInformer::describe`](super::SharedIndexInformer::describe))
/// and the error. It runs on the reflector's task, before the retry's
/// backoff: keep it quick and non-blocking. The reflector logs the failure
/// either way, and retries whatever the handler does; a panic in it is
/// logged and ignored. A `410 Gone` that only calls for a relist, and a
/// streaming list that falls back to LIST in the same round, are not
/// failures (the LIST's outcome is reported).
pub type WatchErrorHandler = Arc<dyn Fn(&str, &ReflectorError) + Send + Sync>;

/// The default transform: drops `metadata.managedFields`, which is often the
/// largest part of an object and is almost never read by a controller.
pub(crate) fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Where the reflector writes what it sees. Implemented by [`DeltaFifo`].
pub trait ReflectorStore<K>: Send + Sync {
    /// A watch `ADDED` event.
    fn add(&self, obj: Arc<K>);
    /// A watch `MODIFIED` event.
    fn update(&self, obj: Arc<K>);
    /// A watch `DELETED` event.
    fn delete(&self, obj: Arc<K>);
    /// The result of a (re)list at `resource_version`.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str);
    /// The result of a (re)list at `resource_version` in which the objects
    /// of `undecodable` did not deserialize into `K`: they are present
    /// (never deleted), and kept as [`UndecodableObject`]s.
    ///
    /// The default forgets them: [`replace`](Self::replace) with `list`.
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        drop(undecodable);
        self.replace(list, resource_version)
    }
    /// A watch `ADDED` or `MODIFIED` event whose object does not deserialize
    /// into `K`: its current version is `record` (any decodable copy held is
    /// stale). The default does nothing; [`DeltaFifo`] keeps it.
    fn undecodable(&self, record: UndecodableObject) {
        drop(record);
    }
    /// A watch `DELETED` event whose object does not deserialize into `K`.
    /// The default does nothing; [`DeltaFifo`] deletes the key.
    fn undecodable_deleted(&self, record: UndecodableObject) {
        drop(record);
    }
}

impl<K: Resource + Send + Sync + 'static> ReflectorStore<K> for DeltaFifo<K> {
    fn add(&self, obj: Arc<K>) {
        if let Err(e) = DeltaFifo::add(self, obj) {
            tracing::warn!(error = %e, "dropping watched object");
        }
    }
    fn update(&self, obj: Arc<K>) {
        if let Err(e) = DeltaFifo::update(self, obj) {
            tracing::warn!(error = %e, "dropping watched object");
        }
    }
    fn delete(&self, obj: Arc<K>) {
        if let Err(e) = DeltaFifo::delete(self, obj) {
            tracing::warn!(error = %e, "dropping watched object");
        }
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) {
        DeltaFifo::replace(self, list, resource_version)
    }
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        DeltaFifo::replace_with_undecodable(self, list, undecodable, resource_version)
    }
    fn undecodable(&self, record: UndecodableObject) {
        DeltaFifo::undecodable(self, record)
    }
    fn undecodable_deleted(&self, record: UndecodableObject) {
        DeltaFifo::undecodable_deleted(self, record)
    }
}

impl<K, S: ReflectorStore<K> + ?Sized> ReflectorStore<K> for Arc<S> {
    fn add(&self, obj: Arc<K>) {
        (**self).add(obj)
    }
    fn update(&self, obj: Arc<K>) {
        (**self).update(obj)
    }
    fn delete(&self, obj: Arc<K>) {
        (**self).delete(obj)
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) {
        (**self).replace(list, resource_version)
    }
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        (**self).replace_with_undecodable(list, undecodable, resource_version)
    }
    fn undecodable(&self, record: UndecodableObject) {
        (**self).undecodable(record)
    }
    fn undecodable_deleted(&self, record: UndecodableObject) {
        (**self).undecodable_deleted(record)
    }
}

/// Whether to use a streaming list (`sendInitialEvents`) for the initial
/// state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamingList {
    /// Use it when the server supports it, else paginated LIST (default).
    #[default]
    Auto,
    /// Always paginated LIST.
    Off,
}

/// Reflector settings.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// Objects per LIST page (500).
    pub page_size: u32,
    /// Streaming list or LIST ([`StreamingList::Auto`]).
    pub streaming_list: StreamingList,
    /// Minimum server-side watch timeout; the actual one is random in
    /// `[min, 2*min]` (5 min).
    pub min_watch_timeout: Duration,
    /// Backoff between failed rounds.
    pub backoff: BackoffConfig,
    /// Ask for protobuf for the built-in kinds opkit decodes from it
    /// (`ConfigMap`, `Secret`), as client-go does for built-in kinds (true).
    /// The request accepts JSON as well and the response's content type
    /// decides; other kinds and custom resources always use JSON. False:
    /// JSON for everything.
    pub protobuf: bool,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            page_size: 500,
            streaming_list: StreamingList::Auto,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
            protobuf: true,
        }
    }
}

/// Live counters of a reflector (shared; read with [`stats`](Self::stats)).
#[derive(Default)]
pub struct ReflectorMetrics {
    list_requests: AtomicU64,
    relists: AtomicU64,
    list_restarts: AtomicU64,
    watch_list_requests: AtomicU64,
    watch_requests: AtomicU64,
    events: AtomicU64,
    bookmarks: AtomicU64,
    skipped_objects: AtomicU64,
    undecodable_objects: AtomicU64,
    last_sync_resource_version: Mutex<Option<String>>,
    last_error: Mutex<Option<String>>,
    list_failures: watch::Sender<ListFailures>,
}

impl fmt::Debug for ReflectorMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.stats().fmt(f)
    }
}

/// A snapshot of an informer's reflector counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    /// LIST requests sent (one per page).
    pub list_requests: u64,
    /// Full lists started (paginated LIST or streaming list), the first included.
    pub relists: u64,
    /// Paginated lists restarted because a continue token expired.
    pub list_restarts: u64,
    /// Streaming-list requests (`watch` with `sendInitialEvents=true`).
    pub watch_list_requests: u64,
    /// Plain WATCH requests.
    pub watch_requests: u64,
    /// Watch events received (bookmarks included).
    pub events: u64,
    /// Bookmarks received.
    pub bookmarks: u64,
    /// Object versions seen that did not deserialize into the Rust type
    /// (each kept as an [`UndecodableObject`]; a relist counts them again).
    pub skipped_objects: u64,
    /// Objects in the cache now whose current version does not deserialize
    /// into the Rust type (a gauge).
    pub undecodable_objects: u64,
    /// The last resourceVersion synced to.
    pub last_sync_resource_version: Option<String>,
    /// The last list/watch error while the informer is failing; cleared
    /// once a list succeeds again (it recovered). Each failure, with when
    /// it happened, goes to the watch-error handler
    /// ([`SharedCacheBuilder::watch_error_handler`](super::SharedCacheBuilder::watch_error_handler)).
    pub last_error: Option<String>,
}

impl ReflectorMetrics {
    /// A snapshot of the counters.
    pub fn stats(&self) -> ReflectorStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReflectorStats {
            list_requests: g(&self.list_requests),
            relists: g(&self.relists),
            list_restarts: g(&self.list_restarts),
            watch_list_requests: g(&self.watch_list_requests),
            watch_requests: g(&self.watch_requests),
            events: g(&self.events),
            bookmarks: g(&self.bookmarks),
            skipped_objects: g(&self.skipped_objects),
            undecodable_objects: g(&self.undecodable_objects),
            last_sync_resource_version: self.last_sync_resource_version.lock().clone(),
            last_error: self.last_error.lock().clone(),
        }
    }

    /// Sets the gauge of undecodable objects held by the informer of `kind`
    /// (`apiVersion/kind`), and the process-wide
    /// `opkit_cache_undecodable_objects{kind}` with it.
    pub(crate) fn set_undecodable_objects(&self, kind: &str, n: usize) {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        let old = self.undecodable_objects.swap(n, Ordering::Relaxed);
        let delta = i64::try_from(n)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(old).unwrap_or(i64::MAX));
        crate::metrics::cache::add_undecodable(kind, delta);
    }

    /// The undecodable objects the informer holds now.
    pub(crate) fn undecodable_objects(&self) -> usize {
        usize::try_from(self.undecodable_objects.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
    }

    fn inc(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    /// The last list/watch error while failing; `None` once a list
    /// succeeded again.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// The failed rounds since the last successful list, as they happen.
    pub(crate) fn subscribe_list_failures(&self) -> watch::Receiver<ListFailures> {
        self.list_failures.subscribe()
    }

    fn record_failure(&self, error: &ReflectorError) {
        let class = error.list_failure();
        self.list_failures.send_modify(|f| {
            f.consecutive = f.consecutive.saturating_add(1);
            f.last = Some(class);
        });
    }

    fn record_listed(&self) {
        // recovered: a list succeeded
        *self.last_error.lock() = None;
        self.list_failures
            .send_if_modified(|f| std::mem::take(f) != ListFailures::default());
    }
}

/// How a watch ended.
enum WatchEnd {
    /// The server closed it (timeout) or the connection dropped.
    Closed { events: u64 },
}

/// See the [module documentation](self).
pub struct Reflector<K, S> {
    lw: ListWatch<K>,
    store: S,
    config: ReflectorConfig,
    transform: Option<Transform<K>>,
    metrics: Arc<ReflectorMetrics>,
    name: String,
    last_sync_rv: Option<String>,
    rv_unavailable: bool,
    streaming_supported: Option<bool>,
    backoff: Backoff,
    on_error: Option<WatchErrorHandler>,
    shard: Option<ShardedList>,
}

/// A sharded cache's side of a reflector: the replica's share (`None`
/// until it is first active in its ring) and how the server lets it be
/// divided.
struct ShardedList {
    selector: watch::Receiver<Option<ShardSelector>>,
    /// How the server lets the kind be divided, `None` until probed;
    /// published to the labeller, which follows it.
    mode: watch::Sender<Option<ShardMode>>,
}

impl<K, S> Reflector<K, S>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
    S: ReflectorStore<K>,
{
    /// A reflector from `lw` into `store`, with the default transform
    /// (strip `metadata.managedFields`).
    pub fn new(lw: ListWatch<K>, store: S, config: ReflectorConfig) -> Self {
        let lw = if config.protobuf { lw } else { lw.json_only() };
        let name = lw.describe();
        let backoff = Backoff::new(config.backoff);
        Self {
            lw,
            store,
            config,
            transform: Some(Arc::new(strip_managed_fields::<K>)),
            metrics: Arc::new(ReflectorMetrics::default()),
            name,
            last_sync_rv: None,
            rv_unavailable: false,
            streaming_supported: None,
            backoff,
            on_error: None,
            shard: None,
        }
    }

    /// Lists and watches only the replica's share `selector` holds: by
    /// its KEP-5866 shard selector, relisting whenever it changes, once the
    /// server is found to filter by it; else by its shard label, if any;
    /// else everything. The mode is logged once.
    pub(crate) fn with_shard(mut self, share: Option<ShardShare>) -> Self {
        self.shard = share.map(|share| ShardedList {
            selector: share.selector,
            mode: share.mode,
        });
        self
    }

    /// Replaces the transform (`None`: store objects exactly as received).
    pub fn with_transform(mut self, transform: Option<Transform<K>>) -> Self {
        self.transform = transform;
        self
    }

    /// Uses shared counters (e.g. the informer's).
    pub fn with_metrics(mut self, metrics: Arc<ReflectorMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Calls `handler` with every failed list/watch attempt.
    pub fn with_watch_error_handler(mut self, handler: Option<WatchErrorHandler>) -> Self {
        self.on_error = handler;
        self
    }

    /// Tells the watch-error handler, if any, of a failed attempt.
    fn report(&self, error: &ReflectorError) {
        if let Some(handler) = &self.on_error
            && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(&self.name, error)))
                .is_err()
        {
            tracing::error!(reflector = %self.name, %error, "the watch-error handler panicked; ignoring it");
        }
    }

    /// The shared counters.
    #[cfg(test)]
    pub fn metrics(&self) -> Arc<ReflectorMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Lists and watches until `cancel` fires, backing off between rounds.
    pub async fn run(mut self, cancel: CancellationToken) {
        tracing::debug!(reflector = %self.name, "starting reflector");
        let run = async {
            loop {
                let result = self.list_and_watch().await;
                let delay = self.backoff.next_delay();
                match result {
                    Ok(()) => *self.metrics.last_error.lock() = None,
                    Err(e) => {
                        let hint = if matches!(&e, ReflectorError::Api(s) if s.is_forbidden()) {
                            " (missing RBAC permission to list/watch?)"
                        } else {
                            ""
                        };
                        tracing::warn!(
                            reflector = %self.name,
                            error = %e,
                            attempt = self.backoff.attempt(),
                            retry_in = ?delay,
                            "list/watch failed{hint}; retrying"
                        );
                        *self.metrics.last_error.lock() = Some(format!("{e}{hint}"));
                        self.metrics.record_failure(&e);
                        self.report(&e);
                    }
                }
                tokio::time::sleep(delay).await;
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = run => {}
        }
        tracing::debug!(reflector = %self.name, "reflector stopped");
    }

    /// Sleeps the next backoff delay after a retriable failure, logging it
    /// with the attempt and the delay: at debug for the first two attempts
    /// (a blip: an API server restart), at warn from the third.
    async fn back_off(&mut self, what: &str, error: &(dyn fmt::Display + Sync)) {
        let delay = self.backoff.next_delay();
        let attempt = self.backoff.attempt();
        if attempt >= 3 {
            tracing::warn!(reflector = %self.name, %error, attempt, retry_in = ?delay, "{what}; retrying");
        } else {
            tracing::debug!(reflector = %self.name, %error, attempt, retry_in = ?delay, "{what}; retrying");
        }
        tokio::time::sleep(delay).await;
    }

    fn prepare(&self, mut obj: K) -> Arc<K> {
        if let Some(t) = &self.transform {
            t(&mut obj);
        }
        Arc::new(obj)
    }

    fn set_rv(&mut self, rv: Option<&str>) {
        if let Some(rv) = rv.filter(|rv| !rv.is_empty())
            && self.last_sync_rv.as_deref() != Some(rv)
        {
            self.last_sync_rv = Some(rv.to_string());
            *self.metrics.last_sync_resource_version.lock() = Some(rv.to_string());
        }
    }

    fn watch_timeout(&self) -> u32 {
        let min = self.config.min_watch_timeout.as_secs_f64();
        (min + fastrand::f64() * min) as u32
    }

    /// The record of an object that does not deserialize into `K`, counted;
    /// `None` (logged) without a name: nothing can be keyed by it.
    fn undecodable_record(&self, obj: SkippedObject) -> Option<UndecodableObject> {
        ReflectorMetrics::inc(&self.metrics.skipped_objects);
        let Some(key) = obj.key() else {
            tracing::warn!(
                reflector = %self.name,
                error = %obj.error,
                "skipping an object without a name that does not deserialize into the Rust type"
            );
            return None;
        };
        let mut metadata = *obj.metadata;
        if metadata.resource_version.is_none() {
            metadata.resource_version = obj.resource_version;
        }
        let kind = format!("{}/{}", self.lw.api_version(), self.lw.kind());
        Some(UndecodableObject::new(kind, key, metadata, obj.error))
    }

    /// A watch event whose object does not deserialize into `K`: kept as an
    /// undecodable record (its key's current version), or the key deleted
    /// for a `DELETED` event.
    fn handle_undecodable_event(&self, event_type: &str, obj: SkippedObject) {
        let Some(record) = self.undecodable_record(obj) else {
            return;
        };
        if event_type == "DELETED" {
            self.store.undecodable_deleted(record);
        } else {
            self.store.undecodable(record);
        }
    }

    async fn streaming_supported(&mut self) -> bool {
        if self.config.streaming_list == StreamingList::Off {
            return false;
        }
        if let Some(s) = self.streaming_supported {
            return s;
        }
        // WatchList (streaming list) is served by default since Kubernetes 1.32.
        let supported = match self.lw_client().apiserver_version().await {
            Ok(info) => {
                let minor: u32 = info
                    .minor
                    .trim_end_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .unwrap_or(0);
                info.major == "1" && minor >= 32
            }
            Err(_) => return false, // unknown this round; ask again next round
        };
        self.streaming_supported = Some(supported);
        supported
    }

    fn lw_client(&self) -> kube::Client {
        self.lw.client()
    }

    async fn list_and_watch(&mut self) -> Result<(), ReflectorError> {
        loop {
            let shard = self.apply_shard().await?;
            let stream = self.initial_list().await?;
            let Some((mut selector, mode, applied)) = shard else {
                return self.watch_loop(stream).await;
            };
            // A new share: relist at once with the new selector (the
            // replace drops the objects that left it, adds the gained ones).
            // A shard label never changes: objects move by relabelling.
            let changed = async move {
                let moved = |s: &Option<ShardSelector>| {
                    s.as_ref().and_then(|s| mode.applied(s)) != applied.as_deref()
                };
                if selector.wait_for(moved).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                r = self.watch_loop(stream) => return r,
                () = changed => {
                    tracing::info!(reflector = %self.name, "this replica's shard changed; relisting its share");
                }
            }
        }
    }

    /// For a sharded cache: waits for the replica's first share, finds out
    /// once how the server lets it be divided (logged), and sets it on the
    /// requests. The share's receiver, the mode and the selector applied,
    /// or `None` when everything is listed.
    async fn apply_shard(
        &mut self,
    ) -> Result<
        Option<(
            watch::Receiver<Option<ShardSelector>>,
            ShardMode,
            Option<String>,
        )>,
        ReflectorError,
    > {
        let Some(shard) = &self.shard else {
            return Ok(None);
        };
        let known = *shard.mode.borrow();
        if known == Some(ShardMode::Undivided) {
            return Ok(None);
        }
        let mut rx = shard.selector.clone();
        if rx.borrow().is_none() {
            tracing::debug!(reflector = %self.name, "waiting until this replica is active in its shard ring before listing its share");
        }
        let selector = match rx.wait_for(Option::is_some).await {
            Ok(selector) => selector.clone(),
            Err(_) => None,
        };
        // None: the ring ended (shutdown); nothing more to list
        let Some(selector) = selector else {
            return std::future::pending().await;
        };
        let mode = match known {
            Some(mode) => mode,
            None => {
                self.lw.set_shard_selector(Some(selector.server.clone()));
                let filters = self.lw.server_shards().await?;
                // label mode needs `patch` on the kind; unknown: try it
                let denied = if !filters && selector.labels.is_some() {
                    let (group, resource) = self.lw.group_and_resource();
                    super::sharded::may_patch(
                        self.lw.client(),
                        group,
                        resource,
                        self.lw.namespace_scope(),
                    )
                    .await
                        == Some(false)
                } else {
                    false
                };
                let mode = ShardMode::of(filters, selector.labels.is_some() && !denied);
                self.log_shard_mode(mode, &selector, denied);
                if let Some(shard) = &self.shard {
                    shard.mode.send_replace(Some(mode));
                }
                mode
            }
        };
        match mode {
            ShardMode::ServerSide => {
                self.lw.set_shard_selector(Some(selector.server.clone()));
                self.lw.set_shard_labels(None);
            }
            ShardMode::Labels => {
                self.lw.set_shard_selector(None);
                self.lw.set_shard_labels(selector.labels.as_deref());
            }
            ShardMode::Undivided => {
                self.lw.set_shard_selector(None);
                self.lw.set_shard_labels(None);
                return Ok(None);
            }
        }
        let applied = mode.applied(&selector).map(str::to_owned);
        Ok(Some((rx, mode, applied)))
    }

    /// The one line that says how this kind's cache is divided.
    fn log_shard_mode(&self, mode: ShardMode, selector: &ShardSelector, denied: bool) {
        match mode {
            ShardMode::ServerSide => tracing::info!(
                reflector = %self.name,
                mode = mode.as_str(),
                "sharded cache: the API server lists and watches only this replica's share \
                 (KEP-5866 shardSelector on object.metadata.namespace)"
            ),
            ShardMode::Labels => tracing::info!(
                reflector = %self.name,
                mode = mode.as_str(),
                selector = selector.labels.as_deref().unwrap_or_default(),
                "sharded cache: the API server ignores shardSelector (feature gate \
                 ShardedListAndWatch off, or Kubernetes before 1.36); this replica lists and \
                 watches the objects labelled with its shard (label mode)"
            ),
            ShardMode::Undivided if denied => tracing::warn!(
                reflector = %self.name,
                mode = mode.as_str(),
                "sharded cache: the API server ignores shardSelector (feature gate \
                 ShardedListAndWatch off, or Kubernetes before 1.36) and this replica may not \
                 patch this kind to label it with its shard (label mode needs `patch`, see \
                 Rules::sharding); this replica caches every object and reconciles only its share"
            ),
            ShardMode::Undivided => tracing::warn!(
                reflector = %self.name,
                mode = mode.as_str(),
                "sharded cache: the API server ignores shardSelector (feature gate \
                 ShardedListAndWatch off, or Kubernetes before 1.36) and this kind is not \
                 labelled; this replica caches every object and reconciles only its share"
            ),
        }
    }

    /// The initial list: streamed where the server can, else paginated.
    /// The open watch of a streamed list.
    async fn initial_list(&mut self) -> Result<Option<WatchStream<K>>, ReflectorError> {
        let mut stream = None;
        if self.streaming_supported().await {
            match self.watch_list().await {
                Ok(w) => stream = Some(w),
                Err(e) => {
                    if let ReflectorError::Api(s) = &e
                        && (s.code == 400 || s.code == 422)
                    {
                        tracing::info!(reflector = %self.name, error = %e, "server rejects streaming lists; using LIST from now on");
                        self.streaming_supported = Some(false);
                    } else {
                        tracing::debug!(reflector = %self.name, error = %e, "streaming list failed; falling back to LIST");
                    }
                }
            }
        }
        if stream.is_none() {
            self.list().await?;
        }
        Ok(stream)
    }

    /// Paginated LIST, then `replace`.
    async fn list(&mut self) -> Result<(), ReflectorError> {
        ReflectorMetrics::inc(&self.metrics.relists);
        'restart: loop {
            let mut items: Vec<Arc<K>> = Vec::new();
            let mut undecodable: Vec<UndecodableObject> = Vec::new();
            let mut opts = ListOptions {
                limit: Some(self.config.page_size).filter(|l| *l > 0),
                ..Default::default()
            };
            loop {
                ReflectorMetrics::inc(&self.metrics.list_requests);
                let page = match self.lw.list_page(&opts).await {
                    Ok(p) => p,
                    Err(e) if e.is_expired() && opts.continue_token.is_some() => {
                        tracing::info!(reflector = %self.name, "continue token expired; restarting the list");
                        ReflectorMetrics::inc(&self.metrics.list_restarts);
                        continue 'restart;
                    }
                    Err(e) => return Err(e),
                };
                for s in page.skipped {
                    undecodable.extend(self.undecodable_record(s));
                }
                items.reserve(page.items.len());
                for obj in page.items {
                    items.push(self.prepare(obj));
                }
                match page.continue_token {
                    Some(c) => opts.continue_token = Some(c),
                    None => {
                        tracing::debug!(reflector = %self.name, objects = items.len(), resource_version = %page.resource_version, "listed");
                        self.store.replace_with_undecodable(
                            items,
                            undecodable,
                            &page.resource_version,
                        );
                        self.metrics.record_listed();
                        self.rv_unavailable = false;
                        self.set_rv(Some(&page.resource_version));
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Streaming list: returns the open watch after the initial-events-end bookmark.
    async fn watch_list(&mut self) -> Result<WatchStream<K>, ReflectorError> {
        ReflectorMetrics::inc(&self.metrics.relists);
        loop {
            let opts = WatchOptions {
                resource_version: if self.rv_unavailable {
                    None
                } else {
                    self.last_sync_rv.clone()
                },
                timeout_secs: self.watch_timeout(),
                send_initial_events: true,
            };
            ReflectorMetrics::inc(&self.metrics.watch_list_requests);
            let start = Instant::now();
            let mut w = match self.lw.watch(&opts).await {
                Ok(w) => w,
                Err(e) if e.is_retriable() => {
                    self.report(&e);
                    self.back_off("streaming list failed", &e).await;
                    continue;
                }
                Err(e) if e.is_expired() => {
                    self.rv_unavailable = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut items: Vec<Arc<K>> = Vec::new();
            let mut undecodable: Vec<UndecodableObject> = Vec::new();
            let mut rv: Option<String> = None;
            let mut events = 0u64;
            let mut expired = false;
            let done = loop {
                let Some(line) = w.next().await else {
                    break false;
                };
                events += 1;
                ReflectorMetrics::inc(&self.metrics.events);
                match line? {
                    WatchLine::Added(obj) | WatchLine::Modified(obj) => {
                        if let Ok(key) = ObjectKey::of(&obj) {
                            undecodable.retain(|u| *u.key() != key);
                        }
                        items.push(self.prepare(obj))
                    }
                    WatchLine::Deleted(obj) => {
                        let (ns, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
                        items.retain(|o| o.meta().namespace != ns || o.meta().name != name);
                        if let Ok(key) = ObjectKey::of(&obj) {
                            undecodable.retain(|u| *u.key() != key);
                        }
                    }
                    WatchLine::Bookmark {
                        resource_version,
                        initial_events_end,
                    } => {
                        ReflectorMetrics::inc(&self.metrics.bookmarks);
                        if resource_version.is_some() {
                            rv = resource_version;
                        }
                        if initial_events_end {
                            break true;
                        }
                    }
                    WatchLine::Error(status) => {
                        if status.is_expired() {
                            expired = true;
                            break false;
                        }
                        return Err(ReflectorError::Api(status));
                    }
                    WatchLine::Skipped { event_type, object } => {
                        // an initial event (or a later change of one) that
                        // does not decode: its record replaces any copy
                        if let Some(record) = self.undecodable_record(object) {
                            let key = record.key().clone();
                            items.retain(|o| !ObjectKey::of(&**o).is_ok_and(|k| k == key));
                            undecodable.retain(|u| *u.key() != key);
                            if event_type != "DELETED" {
                                undecodable.push(record);
                            }
                        }
                    }
                }
            };
            if expired {
                self.rv_unavailable = true;
                continue;
            }
            if !done {
                let elapsed = start.elapsed();
                if events == 0 && elapsed < Duration::from_secs(1) {
                    return Err(ReflectorError::StreamingListIncomplete);
                }
                let why = format!("ended after {events} events and {elapsed:?}");
                self.back_off(
                    "streaming list ended before its initial-events-end bookmark",
                    &why,
                )
                .await;
                continue;
            }
            let rv = rv.unwrap_or_default();
            tracing::debug!(reflector = %self.name, objects = items.len(), resource_version = %rv, "streamed initial list");
            self.store.replace_with_undecodable(items, undecodable, &rv);
            self.metrics.record_listed();
            self.rv_unavailable = false;
            self.set_rv(Some(&rv));
            return Ok(w);
        }
    }

    /// Watches (re-opening without relist) until an error calls for a relist.
    async fn watch_loop(
        &mut self,
        mut stream: Option<WatchStream<K>>,
    ) -> Result<(), ReflectorError> {
        loop {
            let start = Instant::now();
            // a stream continued from a streaming list has already delivered
            // events: its end is never a "very short watch"
            let continued = stream.is_some();
            let w = match stream.take() {
                Some(w) => w,
                None => {
                    let opts = WatchOptions {
                        resource_version: self.last_sync_rv.clone(),
                        timeout_secs: self.watch_timeout(),
                        send_initial_events: false,
                    };
                    ReflectorMetrics::inc(&self.metrics.watch_requests);
                    match self.lw.watch(&opts).await {
                        Ok(w) => w,
                        Err(e) if e.is_retriable() => {
                            self.report(&e);
                            self.back_off("opening the watch failed", &e).await;
                            continue;
                        }
                        Err(e) if e.is_expired() => {
                            tracing::info!(reflector = %self.name, "watch resourceVersion expired; relisting");
                            return Ok(());
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            match self.handle_watch(w).await {
                Ok(WatchEnd::Closed { events }) => {
                    let elapsed = start.elapsed();
                    if !continued && events == 0 && elapsed < Duration::from_secs(1) {
                        return Err(ReflectorError::VeryShortWatch(elapsed));
                    }
                    tracing::trace!(reflector = %self.name, events, "watch closed; re-opening from the last resourceVersion");
                }
                Err(e) if e.is_expired() => {
                    tracing::info!(reflector = %self.name, "watch resourceVersion expired (410); relisting");
                    return Ok(());
                }
                Err(e) if e.is_retriable() => {
                    self.report(&e);
                    self.back_off("the watch failed", &e).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn handle_watch(&mut self, mut w: WatchStream<K>) -> Result<WatchEnd, ReflectorError> {
        let mut events = 0u64;
        while let Some(line) = w.next().await {
            events += 1;
            ReflectorMetrics::inc(&self.metrics.events);
            match line? {
                WatchLine::Added(obj) => {
                    let rv = obj.meta().resource_version.clone();
                    self.store.add(self.prepare(obj));
                    self.set_rv(rv.as_deref());
                }
                WatchLine::Modified(obj) => {
                    let rv = obj.meta().resource_version.clone();
                    self.store.update(self.prepare(obj));
                    self.set_rv(rv.as_deref());
                }
                WatchLine::Deleted(obj) => {
                    let rv = obj.meta().resource_version.clone();
                    self.store.delete(self.prepare(obj));
                    self.set_rv(rv.as_deref());
                }
                WatchLine::Bookmark {
                    resource_version, ..
                } => {
                    ReflectorMetrics::inc(&self.metrics.bookmarks);
                    self.set_rv(resource_version.as_deref());
                }
                WatchLine::Error(status) => return Err(ReflectorError::Api(status)),
                WatchLine::Skipped { event_type, object } => {
                    let rv = object.resource_version.clone();
                    self.handle_undecodable_event(&event_type, object);
                    self.set_rv(rv.as_deref());
                }
            }
        }
        Ok(WatchEnd::Closed { events })
    }
}

#[cfg(test)]
mod tests {
    //! The reflector's protocol against a scripted server, for what a real
    //! API server cannot be made to do on demand (an expired continue token
    //! mid-list, a server without streaming lists).
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;
    use std::sync::Mutex as StdMutex;

    #[derive(Default)]
    struct Recorder {
        calls: StdMutex<Vec<String>>,
    }

    impl ReflectorStore<ConfigMap> for Recorder {
        fn add(&self, obj: Arc<ConfigMap>) {
            self.push(format!("add {}", name(&obj)));
        }
        fn update(&self, obj: Arc<ConfigMap>) {
            self.push(format!("update {}", name(&obj)));
        }
        fn delete(&self, obj: Arc<ConfigMap>) {
            self.push(format!("delete {}", name(&obj)));
        }
        fn replace(&self, list: Vec<Arc<ConfigMap>>, rv: &str) {
            let names: Vec<_> = list.iter().map(|o| name(o)).collect();
            self.push(format!("replace {} @{rv}", names.join(",")));
        }
        fn replace_with_undecodable(
            &self,
            list: Vec<Arc<ConfigMap>>,
            undecodable: Vec<UndecodableObject>,
            rv: &str,
        ) {
            let names: Vec<_> = list.iter().map(|o| name(o)).collect();
            let mut line = format!("replace {} @{rv}", names.join(","));
            if !undecodable.is_empty() {
                let keys: Vec<_> = undecodable.iter().map(|u| u.key().to_string()).collect();
                line.push_str(&format!("; undecodable {}", keys.join(",")));
            }
            self.push(line);
        }
        fn undecodable(&self, record: UndecodableObject) {
            assert!(record.metadata().resource_version.is_some());
            self.push(format!("undecodable {}", record.key()));
        }
        fn undecodable_deleted(&self, record: UndecodableObject) {
            self.push(format!("undecodable-deleted {}", record.key()));
        }
    }

    impl Recorder {
        fn push(&self, s: String) {
            self.calls.lock().unwrap().push(s);
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
    }

    fn name(o: &ConfigMap) -> String {
        o.metadata.name.clone().unwrap_or_default()
    }

    fn obj(name: &str, rv: &str) -> serde_json::Value {
        serde_json::json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
            "managedFields": [{"manager": "x", "operation": "Update"}]}})
    }

    fn list(items: &[serde_json::Value], rv: &str, cont: Option<&str>) -> (u16, String) {
        let body = serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": rv, "continue": cont.unwrap_or("")}, "items": items});
        (200, body.to_string())
    }

    fn events(lines: &[serde_json::Value]) -> (u16, String) {
        (
            200,
            lines
                .iter()
                .map(|l| l.to_string() + "\n")
                .collect::<String>(),
        )
    }

    fn status(code: u16, reason: &str) -> (u16, String) {
        (
            code,
            serde_json::json!({"kind": "Status", "code": code, "reason": reason, "message": reason})
                .to_string(),
        )
    }

    type Script = Arc<dyn Fn(usize, &str) -> (u16, String) + Send + Sync>;

    /// A client whose n-th request (with its path and query) is answered by `script`.
    fn scripted(script: Script) -> (kube::Client, Arc<StdMutex<Vec<String>>>) {
        let seen = Arc::new(StdMutex::new(Vec::<String>::new()));
        let s2 = Arc::clone(&seen);
        let svc = tower::service_fn(move |req: http::Request<Body>| {
            let pq = req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default();
            let n = {
                let mut seen = s2.lock().unwrap();
                seen.push(pq.clone());
                seen.len() - 1
            };
            let (code, body) = script(n, &pq);
            async move {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(code)
                        .body(Body::from(body.into_bytes()))
                        .unwrap(),
                )
            }
        });
        (kube::Client::new(svc, "default"), seen)
    }

    fn version() -> (u16, String) {
        (200, r#"{"major":"1","minor":"36","gitVersion":"v1.36.3","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#.into())
    }

    async fn run_until(
        client: kube::Client,
        store: Arc<Recorder>,
        config: ReflectorConfig,
        done: impl Fn(&[String]) -> bool,
    ) -> Arc<ReflectorMetrics> {
        let r = Reflector::new(
            ListWatch::<ConfigMap>::new(client, &()).namespace("ns"),
            Arc::clone(&store),
            config,
        );
        let metrics = r.metrics();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(r.run(cancel.clone()));
        tokio::time::timeout(Duration::from_secs(600), async {
            while !done(&store.calls()) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("condition not reached; calls: {:?}", store.calls()));
        cancel.cancel();
        task.await.unwrap();
        metrics
    }

    fn list_config() -> ReflectorConfig {
        ReflectorConfig {
            page_size: 2,
            streaming_list: StreamingList::Off,
            ..Default::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn paginated_list_restarts_on_expired_continue_then_watches() {
        let script: Script = Arc::new(|n, pq| {
            assert!(pq.starts_with("/api/v1/namespaces/ns/configmaps?"), "{pq}");
            match n {
                0 => list(&[obj("a", "5"), obj("b", "5")], "10", Some("t1")),
                1 => status(410, "Expired"), // the continue token expired
                2 => list(&[obj("a", "5"), obj("b", "5")], "12", Some("t2")),
                3 => list(&[obj("c", "11")], "12", None),
                4 => {
                    assert!(
                        pq.contains("watch=true") && pq.contains("resourceVersion=12"),
                        "{pq}"
                    );
                    assert!(pq.contains("allowWatchBookmarks=true"), "{pq}");
                    events(&[
                        serde_json::json!({"type": "ADDED", "object": obj("d", "13")}),
                        serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}}),
                    ])
                }
                _ => {
                    // re-opened from the bookmark's resourceVersion, no relist
                    assert!(
                        pq.contains("watch=true") && pq.contains("resourceVersion=20"),
                        "{pq}"
                    );
                    events(&[serde_json::json!({"type": "MODIFIED", "object": obj("d", "21")})])
                }
            }
        });
        let (client, seen) = scripted(script);
        let store = Arc::new(Recorder::default());
        let metrics = run_until(client, Arc::clone(&store), list_config(), |c| {
            c.iter().any(|s| s == "update d")
        })
        .await;
        let calls = store.calls();
        assert_eq!(calls[0], "replace a,b,c @12");
        assert_eq!(calls[1], "add d");
        let stats = metrics.stats();
        assert_eq!(stats.list_restarts, 1);
        assert_eq!(stats.relists, 1);
        assert_eq!(stats.bookmarks, 1);
        let seen = seen.lock().unwrap();
        assert!(seen[1].contains("continue=t1"), "{seen:?}");
        assert!(!seen[2].contains("continue="), "{seen:?}");
        let timeout: u32 = seen[4]
            .split("timeoutSeconds=")
            .nth(1)
            .and_then(|s| s.split('&').next())
            .and_then(|s| s.parse().ok())
            .unwrap();
        assert!((300..=600).contains(&timeout), "watch timeout {timeout}");
    }

    #[tokio::test(start_paused = true)]
    async fn expired_watch_relists_and_bad_objects_are_skipped() {
        let script: Script = Arc::new(|n, pq| match n {
            0 => list(&[obj("a", "5")], "10", None),
            1 => events(&[
                // an object that does not deserialize: skipped, the stream goes on
                serde_json::json!({"type": "ADDED", "object": {"metadata": {"name": "bad", "resourceVersion": "11"}, "data": 7}}),
                serde_json::json!({"type": "ADDED", "object": obj("b", "12")}),
                serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
            ]),
            2 => {
                assert!(!pq.contains("watch="), "relist expected: {pq}");
                list(&[obj("b", "12")], "30", None)
            }
            _ => events(&[]),
        });
        let (client, _seen) = scripted(script);
        let store = Arc::new(Recorder::default());
        let metrics = run_until(client, Arc::clone(&store), list_config(), |c| c.len() >= 4).await;
        assert_eq!(
            store.calls(),
            ["replace a @10", "undecodable bad", "add b", "replace b @30"]
        );
        let stats = metrics.stats();
        assert_eq!(stats.skipped_objects, 1);
        assert_eq!(stats.relists, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn streaming_list_then_fallback_when_rejected() {
        // a server that streams: initial events until the bookmark, then the same stream goes on
        let script: Script = Arc::new(|n, pq| match n {
            0 => version(),
            1 => {
                assert!(pq.contains("sendInitialEvents=true"), "{pq}");
                assert!(pq.contains("resourceVersionMatch=NotOlderThan"), "{pq}");
                events(&[
                    serde_json::json!({"type": "ADDED", "object": obj("a", "3")}),
                    serde_json::json!({"type": "ADDED", "object": obj("b", "4")}),
                    serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9",
                        "annotations": {"k8s.io/initial-events-end": "true"}}}}),
                    serde_json::json!({"type": "DELETED", "object": obj("a", "10")}),
                ])
            }
            _ => events(&[]),
        });
        let (client, _seen) = scripted(script);
        let store = Arc::new(Recorder::default());
        let metrics = run_until(
            client,
            Arc::clone(&store),
            ReflectorConfig::default(),
            |c| c.len() >= 2,
        )
        .await;
        assert_eq!(store.calls()[..2], ["replace a,b @9", "delete a"]);
        assert_eq!(metrics.stats().watch_list_requests, 1);
        assert_eq!(metrics.stats().list_requests, 0);

        // a server that rejects sendInitialEvents: LIST, and never ask again
        let script: Script = Arc::new(|n, pq| match n {
            0 => version(),
            1 => status(422, "Invalid"),
            2 => list(&[obj("a", "3")], "9", None),
            3 => {
                assert!(!pq.contains("sendInitialEvents"), "{pq}");
                events(&[serde_json::json!({"type": "ADDED", "object": obj("z", "11")})])
            }
            _ => {
                assert!(!pq.contains("sendInitialEvents"), "{pq}");
                events(&[])
            }
        });
        let (client, seen) = scripted(script);
        let store = Arc::new(Recorder::default());
        let metrics = run_until(
            client,
            Arc::clone(&store),
            ReflectorConfig::default(),
            |c| c.len() >= 2,
        )
        .await;
        assert_eq!(store.calls()[..2], ["replace a @9", "add z"]);
        assert_eq!(metrics.stats().list_requests, 1);
        assert!(
            seen.lock()
                .unwrap()
                .iter()
                .filter(|p| p.contains("sendInitialEvents"))
                .count()
                == 1
        );
    }

    #[tokio::test(start_paused = true)]
    async fn transform_strips_managed_fields_by_default() {
        let script: Script = Arc::new(|n, _| match n {
            0 => list(&[obj("a", "5")], "10", None),
            _ => events(&[]),
        });
        struct Keep(StdMutex<Vec<Arc<ConfigMap>>>);
        impl ReflectorStore<ConfigMap> for Keep {
            fn add(&self, _: Arc<ConfigMap>) {}
            fn update(&self, _: Arc<ConfigMap>) {}
            fn delete(&self, _: Arc<ConfigMap>) {}
            fn replace(&self, list: Vec<Arc<ConfigMap>>, _: &str) {
                self.0.lock().unwrap().extend(list);
            }
        }
        for strip in [true, false] {
            let (client, _) = scripted(Arc::clone(&script));
            let keep = Arc::new(Keep(StdMutex::new(vec![])));
            let mut r = Reflector::new(
                ListWatch::<ConfigMap>::new(client, &()),
                Arc::clone(&keep),
                list_config(),
            );
            if !strip {
                r = r.with_transform(None);
            }
            let cancel = CancellationToken::new();
            let task = tokio::spawn(r.run(cancel.clone()));
            tokio::time::timeout(Duration::from_secs(600), async {
                while keep.0.lock().unwrap().is_empty() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("the transform test's object never reached the store");
            cancel.cancel();
            task.await.unwrap();
            let got = keep.0.lock().unwrap()[0].metadata.managed_fields.is_some();
            assert_eq!(got, !strip);
        }
    }

    /// A ConfigMap whose `data` is not a map: valid JSON, not a `ConfigMap`.
    fn undecodable(name: &str, rv: &str) -> serde_json::Value {
        serde_json::json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "data": 7})
    }

    #[tokio::test(start_paused = true)]
    async fn undecodable_watch_events_keep_the_key_and_a_deleted_one_goes() {
        let script: Script = Arc::new(|n, _| match n {
            0 => list(&[obj("a", "5"), obj("b", "5")], "10", None),
            1 => events(&[
                serde_json::json!({"type": "MODIFIED", "object": undecodable("a", "11")}),
                serde_json::json!({"type": "DELETED", "object": undecodable("b", "12")}),
                serde_json::json!({"type": "ADDED", "object": undecodable("c", "13")}),
                serde_json::json!({"type": "MODIFIED", "object": obj("a", "14")}),
            ]),
            _ => events(&[]),
        });
        let (client, seen) = scripted(script);
        let store = Arc::new(Recorder::default());
        let metrics = run_until(client, Arc::clone(&store), list_config(), |c| {
            c.iter().any(|s| s == "update a")
        })
        .await;
        assert_eq!(
            store.calls()[..5],
            [
                "replace a,b @10",
                "undecodable ns/a",
                "undecodable-deleted ns/b",
                "undecodable ns/c",
                "update a"
            ]
        );
        let stats = metrics.stats();
        assert_eq!(stats.skipped_objects, 3);
        assert_eq!(stats.last_sync_resource_version.as_deref(), Some("14"));
        // the watch re-opens from the last event, undecodable ones included
        assert!(
            seen.lock().unwrap()[2].contains("resourceVersion=14"),
            "{:?}",
            seen.lock().unwrap()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn undecodable_initial_event_is_kept_beside_the_streamed_list() {
        let script: Script = Arc::new(|n, _| match n {
            0 => version(),
            1 => events(&[
                serde_json::json!({"type": "ADDED", "object": obj("a", "3")}),
                serde_json::json!({"type": "ADDED", "object": obj("b", "4")}),
                serde_json::json!({"type": "MODIFIED", "object": undecodable("a", "5")}),
                serde_json::json!({"type": "ADDED", "object": undecodable("c", "6")}),
                serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9",
                    "annotations": {"k8s.io/initial-events-end": "true"}}}}),
            ]),
            _ => events(&[]),
        });
        let (client, _) = scripted(script);
        let store = Arc::new(Recorder::default());
        let metrics = run_until(
            client,
            Arc::clone(&store),
            ReflectorConfig::default(),
            |c| !c.is_empty(),
        )
        .await;
        assert_eq!(store.calls()[0], "replace b @9; undecodable ns/a,ns/c");
        assert_eq!(metrics.stats().skipped_objects, 2);
    }

    /// The whole path, reflector → DeltaFIFO → informer store → handlers,
    /// for each way an undecodable object can arrive.
    #[tokio::test(start_paused = true)]
    async fn informer_keeps_undecodable_objects_as_metadata_and_never_reports_them_deleted() {
        use crate::cache::{
            CacheError, DeletedObject, EventHandler, InformerOptions, SharedIndexInformer,
        };
        let script: Script = Arc::new(|n, pq| match n {
            0 => list(
                &[obj("a", "5"), obj("b", "5"), obj("c", "5"), obj("d", "5")],
                "10",
                None,
            ),
            1 => events(&[
                serde_json::json!({"type": "MODIFIED", "object": undecodable("a", "11")}),
                serde_json::json!({"type": "DELETED", "object": undecodable("b", "12")}),
                serde_json::json!({"type": "ADDED", "object": undecodable("new", "13")}),
                serde_json::json!({"type": "MODIFIED", "object": obj("d", "14")}),
                serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
            ]),
            2 => {
                assert!(!pq.contains("watch="), "relist expected: {pq}");
                // `a` decodes again, `c` no longer does
                list(
                    &[obj("a", "20"), undecodable("c", "18"), obj("d", "14")],
                    "21",
                    None,
                )
            }
            _ => events(&[]),
        });
        let (client, _) = scripted(script);
        let informer = SharedIndexInformer::new(
            ListWatch::<ConfigMap>::new(client, &()).namespace("ns"),
            InformerOptions {
                reflector: list_config(),
                ..Default::default()
            },
        );
        let log = Arc::new(StdMutex::new(Vec::<String>::new()));
        struct Log(Arc<StdMutex<Vec<String>>>);
        impl EventHandler<ConfigMap> for Log {
            async fn on_add(&mut self, obj: Arc<ConfigMap>, _: bool) {
                self.0.lock().unwrap().push(format!("add {}", name(&obj)));
            }
            async fn on_update(&mut self, _: Arc<ConfigMap>, new: Arc<ConfigMap>, _: bool) {
                self.0
                    .lock()
                    .unwrap()
                    .push(format!("update {}", name(&new)));
            }
            async fn on_delete(&mut self, obj: DeletedObject<ConfigMap>) {
                let tomb = if obj.is_tombstone() {
                    " (tombstone)"
                } else {
                    ""
                };
                let line = format!("delete {}{tomb}", name(obj.object()));
                self.0.lock().unwrap().push(line);
            }
            async fn on_undecodable(&mut self, obj: Arc<UndecodableObject>) {
                let gone = if obj.is_deleted() { " deleted" } else { "" };
                let line = format!(
                    "undecodable {}@{}{gone}",
                    obj.name(),
                    obj.resource_version().unwrap_or_default()
                );
                self.0.lock().unwrap().push(line);
            }
        }
        informer.add_event_handler(Log(Arc::clone(&log))).unwrap();
        informer.start().unwrap();
        tokio::time::timeout(Duration::from_secs(600), async {
            while !log
                .lock()
                .unwrap()
                .iter()
                .any(|l| l == "undecodable new@13 deleted")
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no deletion of new; events: {:?}", log.lock().unwrap()));
        let events: Vec<String> = log.lock().unwrap().clone();
        assert_eq!(
            events,
            [
                "add a",
                "add b",
                "add c",
                "add d",
                // never a delete for `a`: its metadata replaces the stale copy
                "undecodable a@11",
                // deleted while undecodable: the stale copy's tombstone
                "delete b (tombstone)",
                "undecodable new@13",
                "update d",
                // the relist: `c` no longer decodes, `a` does again; `d`
                // unchanged; `new` is gone
                "undecodable c@18",
                "add a",
                "undecodable new@13 deleted",
            ]
        );
        let store = informer.store();
        let mut keys: Vec<String> = store.list().iter().map(|o| name(o)).collect();
        keys.sort();
        assert_eq!(keys, ["a", "d"]);
        assert!(store.get(Some("ns"), "c").is_none());
        let c = store
            .undecodable(Some("ns"), "c")
            .expect("c kept as metadata");
        assert_eq!(c.resource_version(), Some("18"));
        assert_eq!(c.kind(), "v1/ConfigMap");
        assert!(matches!(
            store.try_get(Some("ns"), "c"),
            Err(CacheError::Undecodable(u)) if u.name() == "c"
        ));
        assert!(store.try_get(Some("ns"), "new").unwrap().is_none());
        assert!(store.try_get(Some("ns"), "a").unwrap().is_some());
        assert_eq!(store.undecodable_len(), 1);
        assert_eq!(informer.stats().skipped_objects, 4);
        assert_eq!(informer.stats().undecodable_objects, 1);
        informer.stop();
    }

    #[tokio::test(start_paused = true)]
    async fn watch_error_handler_sees_each_failed_attempt_and_recovery_clears_last_error() {
        let script: Script = Arc::new(|n, _pq| match n {
            0 => status(403, "Forbidden"),
            1 => status(500, "InternalError"),
            2 => list(&[obj("a", "5")], "10", None),
            3 => status(503, "ServiceUnavailable"), // opening the watch: retried without relist
            4 => events(&[serde_json::json!({"type": "ADDED", "object": obj("b", "11")})]),
            // re-opening after the stream ends: retried with backoff (a
            // watch answered at once would spin the paused clock's runtime)
            _ => status(503, "ServiceUnavailable"),
        });
        let (client, _seen) = scripted(script);
        let seen = Arc::new(StdMutex::new(Vec::<(String, u16)>::new()));
        let seen2 = Arc::clone(&seen);
        let store = Arc::new(Recorder::default());
        let r = Reflector::new(
            ListWatch::<ConfigMap>::new(client, &()).namespace("ns"),
            Arc::clone(&store),
            list_config(),
        )
        .with_watch_error_handler(Some(Arc::new(
            move |informer: &str, e: &ReflectorError| {
                let code = match e {
                    ReflectorError::Api(s) => s.code,
                    _ => 0,
                };
                let first = {
                    let mut seen = seen2.lock().unwrap();
                    seen.push((informer.to_owned(), code));
                    seen.len() == 1
                };
                assert!(!first, "a panicking handler does not stop the reflector");
            },
        )));
        let metrics = r.metrics();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(r.run(cancel.clone()));
        let mut last_errors = Vec::new();
        tokio::time::timeout(Duration::from_secs(600), async {
            while !store.calls().contains(&"add b".to_string()) {
                last_errors.push(metrics.last_error().is_some());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("recovered and watching");
        cancel.cancel();
        task.await.unwrap();
        let informer = "v1/ConfigMap (namespace ns)".to_string();
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen[..3],
            [
                (informer.clone(), 403),
                (informer.clone(), 500),
                (informer.clone(), 503)
            ]
        );
        assert!(
            seen[3..]
                .iter()
                .all(|(i, code)| *i == informer && *code == 503)
        );
        assert!(last_errors.contains(&true), "set while failing");
        assert_eq!(metrics.last_error(), None, "cleared once a list succeeded");
        assert_eq!(metrics.stats().last_error, None);
    }
}

#[cfg(test)]
mod retry_log_tests {
    //! Issue 11: the reflector's retry logs carry the attempt and the delay.
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;

    #[tokio::test(start_paused = true)]
    async fn failed_rounds_log_attempt_and_delay() {
        let (logs, _guard) = crate::test_log::capture();
        let answered = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&answered);
        let svc = tower::service_fn(move |_req: http::Request<Body>| {
            count.fetch_add(1, Ordering::SeqCst);
            async {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(503)
                        .body(Body::from(b"overloaded".to_vec()))
                        .unwrap(),
                )
            }
        });
        let client = kube::Client::new(svc, "default");
        let fifo = Arc::new(DeltaFifo::<ConfigMap>::new(None));
        let config = ReflectorConfig {
            streaming_list: StreamingList::Off,
            backoff: BackoffConfig {
                jitter: 0.0,
                ..Default::default()
            },
            ..Default::default()
        };
        let r = Reflector::new(ListWatch::new(client, &()), fifo, config);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(r.run(cancel.clone()));
        tokio::time::timeout(Duration::from_secs(600), async {
            while answered.load(Ordering::SeqCst) < 4 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("four list attempts");
        cancel.cancel();
        task.await.unwrap();
        let failed = logs.with_message("list/watch failed; retrying");
        let seen: Vec<_> = failed
            .iter()
            .take(3)
            .map(|e| (e.field("attempt"), e.field("retry_in")))
            .collect();
        assert_eq!(
            seen,
            [
                (Some("1"), Some("800ms")),
                (Some("2"), Some("1.6s")),
                (Some("3"), Some("3.2s"))
            ]
        );
        assert_eq!(failed[0].level, tracing::Level::WARN);
        assert!(
            failed[0]
                .field("error")
                .is_some_and(|e| e.contains("503") && e.contains("overloaded")),
            "{failed:?}"
        );
    }
}
