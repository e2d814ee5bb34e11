//! A reflector's live counters ([`ReflectorMetrics`]) and their snapshot
//! ([`ReflectorStats`]).

use std::{
    fmt,
    sync::atomic::{AtomicU64, Ordering},
};

use parking_lot::Mutex;
use tokio::sync::watch;

use crate::cache::error::{ListFailures, ReflectorError};

/// Live counters of a reflector (shared; read with [`stats`](Self::stats)).
#[derive(Default)]
pub struct ReflectorMetrics {
    pub(super) list_requests: AtomicU64,
    pub(super) relists: AtomicU64,
    pub(super) list_restarts: AtomicU64,
    pub(super) watch_list_requests: AtomicU64,
    pub(super) watch_requests: AtomicU64,
    pub(super) events: AtomicU64,
    pub(super) bookmarks: AtomicU64,
    pub(super) skipped_objects: AtomicU64,
    pub(super) undecodable_objects: AtomicU64,
    pub(super) last_sync_resource_version: Mutex<Option<String>>,
    pub(super) last_error: Mutex<Option<String>>,
    pub(super) list_failures: watch::Sender<ListFailures>,
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
    /// (each kept as an [`UndecodableObject`](crate::cache::UndecodableObject); a relist counts them again).
    pub skipped_objects: u64,
    /// Objects in the cache now whose current version does not deserialize
    /// into the Rust type (a gauge).
    pub undecodable_objects: u64,
    /// The last resourceVersion synced to.
    pub last_sync_resource_version: Option<String>,
    /// The last list/watch error while the informer is failing; cleared
    /// once a list succeeds again (it recovered). Each failure, with when
    /// it happened, goes to the watch-error handler
    /// ([`SharedCacheBuilder::watch_error_handler`](crate::cache::SharedCacheBuilder::watch_error_handler)).
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

    pub(super) fn inc(a: &AtomicU64) {
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

    pub(super) fn record_failure(&self, error: &ReflectorError) {
        let class = error.list_failure();
        self.list_failures.send_modify(|f| {
            f.consecutive = f.consecutive.saturating_add(1);
            f.last = Some(class);
        });
    }

    pub(super) fn record_listed(&self) {
        // recovered: a list succeeded
        *self.last_error.lock() = None;
        self.list_failures
            .send_if_modified(|f| std::mem::take(f) != ListFailures::default());
    }
}
