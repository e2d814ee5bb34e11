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
//!   [`UndecodableObject`] (its metadata; see [`undecodable`](crate::cache::undecodable)),
//!   never dropped as if deleted, and counted
//!   ([`ReflectorStats::skipped_objects`]); the stream goes on for the others.
//! - The transform hook runs on every object before it enters the store.

use std::{fmt, sync::Arc, time::Duration};

use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    backoff::Backoff,
    list_watch::ListWatch,
    reflector_config::{
        ListFilter, ReflectorConfig, StreamingList, Transform, WatchErrorHandler,
        strip_managed_fields,
    },
    reflector_metrics::ReflectorMetrics,
    reflector_store::ReflectorStore,
    wire::{ListOptions, WatchOptions, WatchStream},
};
use crate::cache::cacheable::Cacheable;
use crate::cache::{
    decode::{SkippedObject, WatchLine},
    error::ReflectorError,
    key::ObjectKey,
    undecodable::UndecodableObject,
};

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
    /// What to list by beyond the list-watch's own selectors (see
    /// [`with_filter`](Self::with_filter)).
    filter: Option<watch::Receiver<Option<ListFilter>>>,
}

impl<K, S> Reflector<K, S>
where
    K: Cacheable,
    S: ReflectorStore<K>,
{
    /// A reflector from `lw` into `store`, with the default transform
    /// (strip `metadata.managedFields`).
    pub fn new(lw: ListWatch<K>, store: S, config: ReflectorConfig) -> Self {
        let decodable = lw.is_protobuf();
        let excluded = config.json_kinds.iter().any(|k| lw.is_kind(k));
        let lw = if config.protobuf && !excluded {
            lw
        } else {
            lw.json_only()
        };
        let name = lw.describe();
        let reason = match (decodable, config.protobuf, excluded) {
            (false, ..) => {
                "no protobuf codec for this type (a custom resource, dynamic or metadata-only type, or the protobuf feature is off)"
            }
            (true, false, _) => "protobuf turned off (ReflectorConfig::protobuf)",
            (true, true, true) => "kind listed in ReflectorConfig::json_kinds",
            (true, true, false) => "built-in kind",
        };
        tracing::debug!(
            reflector = %name,
            format = if lw.is_protobuf() { "protobuf" } else { "json" },
            reason,
            "wire format chosen"
        );
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
            filter: None,
        }
    }

    /// Lists and watches by the filter `filter` holds, beyond the
    /// list-watch's own selectors: nothing is listed until it holds one,
    /// and a change relists (the replace drops the objects that left it).
    pub(crate) fn with_filter(
        mut self,
        filter: Option<watch::Receiver<Option<ListFilter>>>,
    ) -> Self {
        self.filter = filter;
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
            let filter = self.apply_filter().await;
            let stream = self.initial_list().await?;
            let Some((mut filters, applied)) = filter else {
                return self.watch_loop(stream).await;
            };
            // A new filter: relist at once with it (the replace drops the
            // objects that left it, adds the gained ones).
            let changed = async move {
                if filters
                    .wait_for(|f| f.as_ref() != Some(&applied))
                    .await
                    .is_err()
                {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                r = self.watch_loop(stream) => return r,
                () = changed => {
                    tracing::info!(reflector = %self.name, "the list filter changed; relisting");
                }
            }
        }
    }

    /// With a filter from the informer's owner: waits for its first value
    /// and sets it on the requests. The filter's receiver and the value
    /// applied, or `None` when there is no filter.
    async fn apply_filter(&mut self) -> Option<(watch::Receiver<Option<ListFilter>>, ListFilter)> {
        let mut filters = self.filter.clone()?;
        if filters.borrow().is_none() {
            tracing::debug!(reflector = %self.name, "waiting for this informer's list filter before listing");
        }
        let applied = match filters.wait_for(Option::is_some).await {
            Ok(filter) => filter.clone(),
            Err(_) => None,
        };
        // None: the owner is gone (shutdown); nothing more to list
        let Some(applied) = applied else {
            return std::future::pending().await;
        };
        self.lw.set_shard_selector(applied.shard_selector.clone());
        self.lw.set_shard_labels(applied.labels.as_deref());
        Some((filters, applied))
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
mod tests;
