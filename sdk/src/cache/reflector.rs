//! The Reflector: keeps a [`ReflectorStore`] (the [`DeltaFifo`]) in step with
//! the API server by listing, then watching from the list's resourceVersion.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{DeltaFifo, Indexer, ListWatch, Reflector, ReflectorConfig};
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn doc(client: kube::Client) {
//! let fifo = Arc::new(DeltaFifo::<ConfigMap>::new(Some(Indexer::new())));
//! let reflector = Reflector::new(
//!     ListWatch::new(client, &()).namespace("default"),
//!     Arc::clone(&fifo),
//!     ReflectorConfig::default(),
//! );
//! let metrics = reflector.metrics();
//! let cancel = CancellationToken::new();
//! tokio::spawn(reflector.run(cancel.clone()));
//! // ... pop deltas from `fifo` ...
//! println!("{} LIST requests so far", metrics.stats().list_requests);
//! cancel.cancel();
//! # }
//! ```
//!
//! Behaviour (client-go's `Reflector`):
//! - **Streaming list** first when enabled (default) and the server supports
//!   it: a watch with `sendInitialEvents=true` collects the initial objects
//!   until the `k8s.io/initial-events-end` bookmark, replaces the store, and
//!   the same stream goes on as the watch. On any error it falls back to a
//!   LIST for this round; a server that rejects the parameters (or is older
//!   than 1.32) is remembered and not asked again.
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
//! - An object that fails to deserialize into `K` is **skipped** with an error
//!   log and a counter ([`ReflectorStats::skipped_objects`]); the stream goes
//!   on for the others.
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
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{
    backoff::{Backoff, BackoffConfig},
    delta_fifo::DeltaFifo,
    error::ReflectorError,
    list_watch::{ListOptions, ListWatch, SkippedObject, WatchLine, WatchOptions, WatchStream},
};

/// A function applied to every object before it is stored (e.g. to drop
/// fields the controller never reads, saving memory).
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// The default transform: drops `metadata.managedFields`, which is often the
/// largest part of an object and is almost never read by a controller.
pub fn strip_managed_fields<K: Resource>(obj: &mut K) {
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
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            page_size: 500,
            streaming_list: StreamingList::Auto,
            min_watch_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
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
    last_sync_resource_version: Mutex<Option<String>>,
    last_error: Mutex<Option<String>>,
}

impl fmt::Debug for ReflectorMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.stats().fmt(f)
    }
}

/// A snapshot of [`ReflectorMetrics`].
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
    /// Objects that did not deserialize into the Rust type and were skipped.
    pub skipped_objects: u64,
    /// The last resourceVersion synced to.
    pub last_sync_resource_version: Option<String>,
    /// The last list/watch error, if the last round failed.
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
            last_sync_resource_version: self.last_sync_resource_version.lock().clone(),
            last_error: self.last_error.lock().clone(),
        }
    }

    fn inc(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    /// The last list/watch error, if the last round failed.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
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
}

impl<K, S> Reflector<K, S>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
    S: ReflectorStore<K>,
{
    /// A reflector from `lw` into `store`, with the default transform
    /// ([`strip_managed_fields`]).
    pub fn new(lw: ListWatch<K>, store: S, config: ReflectorConfig) -> Self {
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
        }
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

    /// The live counters.
    pub fn metrics(&self) -> Arc<ReflectorMetrics> {
        Arc::clone(&self.metrics)
    }

    /// Lists and watches until `cancel` fires, backing off between rounds.
    pub async fn run(mut self, cancel: CancellationToken) {
        tracing::debug!(reflector = %self.name, "starting reflector");
        let run = async {
            loop {
                match self.list_and_watch().await {
                    Ok(()) => *self.metrics.last_error.lock() = None,
                    Err(e) => {
                        let hint = if matches!(&e, ReflectorError::Api(s) if s.is_forbidden()) {
                            " (missing RBAC permission to list/watch?)"
                        } else {
                            ""
                        };
                        tracing::warn!(reflector = %self.name, error = %e, "list/watch failed{hint}");
                        *self.metrics.last_error.lock() = Some(format!("{e}{hint}"));
                    }
                }
                let delay = self.backoff.next_delay();
                tokio::time::sleep(delay).await;
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => {}
            _ = run => {}
        }
        tracing::debug!(reflector = %self.name, "reflector stopped");
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

    fn report_skipped(&mut self, event_type: &str, obj: &SkippedObject) {
        ReflectorMetrics::inc(&self.metrics.skipped_objects);
        tracing::error!(
            reflector = %self.name,
            event = event_type,
            namespace = obj.namespace.as_deref().unwrap_or(""),
            name = obj.name.as_deref().unwrap_or(""),
            resource_version = obj.resource_version.as_deref().unwrap_or(""),
            error = %obj.error,
            "skipping object that does not deserialize into the Rust type"
        );
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
        self.watch_loop(stream).await
    }

    /// Paginated LIST, then `replace`.
    async fn list(&mut self) -> Result<(), ReflectorError> {
        ReflectorMetrics::inc(&self.metrics.relists);
        'restart: loop {
            let mut items: Vec<Arc<K>> = Vec::new();
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
                for s in &page.skipped {
                    self.report_skipped("LIST", s);
                }
                items.reserve(page.items.len());
                for obj in page.items {
                    items.push(self.prepare(obj));
                }
                match page.continue_token {
                    Some(c) => opts.continue_token = Some(c),
                    None => {
                        tracing::debug!(reflector = %self.name, objects = items.len(), resource_version = %page.resource_version, "listed");
                        self.store.replace(items, &page.resource_version);
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
                    tracing::debug!(reflector = %self.name, error = %e, "streaming list failed; backing off");
                    tokio::time::sleep(self.backoff.next_delay()).await;
                    continue;
                }
                Err(e) if e.is_expired() => {
                    self.rv_unavailable = true;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut items: Vec<Arc<K>> = Vec::new();
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
                        items.push(self.prepare(obj))
                    }
                    WatchLine::Deleted(obj) => {
                        let (ns, name) = (obj.meta().namespace.clone(), obj.meta().name.clone());
                        items.retain(|o| o.meta().namespace != ns || o.meta().name != name);
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
                        self.report_skipped(&event_type, &object);
                    }
                }
            };
            if expired {
                self.rv_unavailable = true;
                continue;
            }
            if !done {
                let elapsed = start.elapsed();
                tracing::debug!(reflector = %self.name, events, ?elapsed, "streaming list ended before its initial-events-end bookmark; retrying");
                if events == 0 && elapsed < Duration::from_secs(1) {
                    return Err(ReflectorError::StreamingListIncomplete);
                }
                tokio::time::sleep(self.backoff.next_delay()).await;
                continue;
            }
            let rv = rv.unwrap_or_default();
            tracing::debug!(reflector = %self.name, objects = items.len(), resource_version = %rv, "streamed initial list");
            self.store.replace(items, &rv);
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
                            tracing::debug!(reflector = %self.name, error = %e, "watch failed; backing off");
                            tokio::time::sleep(self.backoff.next_delay()).await;
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
                    tracing::debug!(reflector = %self.name, error = %e, "watch error; backing off and re-opening");
                    tokio::time::sleep(self.backoff.next_delay()).await;
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
                    self.report_skipped(&event_type, &object);
                    self.set_rv(object.resource_version.as_deref());
                }
            }
        }
        Ok(WatchEnd::Closed { events })
    }
}
