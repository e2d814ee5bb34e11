//! The record of this process's writes that the cache has not shown yet:
//! what a write recorded, and how an informer's applied change resolves it.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

/// How long a read waits for the cache to show a write of this process, by
/// default.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// The most writes kept waiting to be observed; past that the oldest is
/// forgotten.
pub const MAX_RECORDS: usize = 16_384;

/// How many deletions the informers remember, for a write whose answer
/// arrives after someone else's deletion of the object was applied.
pub const RECENT_DELETES: usize = 1024;

/// What identifies an object across the write path (a URL) and the read
/// path (a Rust type): `v1` or `apps/v1`, the plural resource name, the
/// namespace and the name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct WriteKey {
    pub api_version: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// A write the apiserver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    /// The object exists at this resourceVersion (and uid, if known).
    Object {
        resource_version: String,
        uid: Option<String>,
        /// Being deleted with no finalizer left: it may be gone any moment,
        /// so its absence counts as caught up.
        vanishing: bool,
    },
    /// The object with this uid (if known) was deleted.
    Deleted { uid: Option<String> },
}

#[derive(Debug, Clone)]
struct Record {
    written: Written,
    seq: u64,
}

/// The kinds (and namespace, for a namespaced cache) whose writes are
/// recorded: those the cache has a default-scope informer for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WatchedKind {
    api_version: String,
    plural: String,
}

/// True when the informer's store already shows a write (the informer
/// applied it before the write's answer was recorded).
pub(crate) type ShownCheck = Arc<dyn Fn(&WriteKey, &Written) -> bool + Send + Sync>;

/// A kind whose writes are recorded: the informer's namespace (`None`:
/// all) and a look into its store.
#[derive(Clone)]
struct Watched {
    namespace: Option<String>,
    shown: ShownCheck,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The writes of this process not yet seen by the cache.
#[derive(Debug)]
pub(crate) struct WriteTracker {
    records: Mutex<HashMap<WriteKey, Record>>,
    pending: AtomicUsize,
    seq: AtomicU64,
    watched: RwLock<HashMap<WatchedKind, Watched>>,
    max_records: usize,
    /// The last deletions the informers applied, with their resourceVersion.
    recent_deletes: Mutex<std::collections::VecDeque<(WriteKey, String)>>,
    /// Bumped each time a record leaves (observed, replaced, forgotten):
    /// what a read waiting for a write wakes on.
    resolved: watch::Sender<u64>,
}

/// Compares resourceVersions: as integers when both parse, else equal only.
pub(crate) fn at_least(seen: &str, written: &str) -> bool {
    match (seen.parse::<u64>(), written.parse::<u64>()) {
        (Ok(seen), Ok(written)) => seen >= written,
        _ => seen == written,
    }
}

impl Written {
    /// True when `current` (the cache's copy, or `None` when absent) is at
    /// least as new as this write.
    pub(crate) fn observed_in(&self, current: Option<&ObjectMeta>) -> bool {
        match (self, current) {
            // A write that released an object's last finalizer is answered
            // with the object as it was last stored (the apiserver deletes
            // it in the same update), so the cached copy from before the
            // write carries the same resourceVersion: while that copy still
            // lists finalizers, only its absence (or a newer object of the
            // name) shows the write.
            (
                Written::Object {
                    vanishing: true,
                    uid,
                    ..
                },
                Some(meta),
            ) if meta.finalizers.as_ref().is_some_and(|f| !f.is_empty()) => {
                uid.is_some() && meta.uid.is_some() && meta.uid != *uid
            }
            (
                Written::Object {
                    resource_version, ..
                },
                Some(meta),
            ) => meta
                .resource_version
                .as_deref()
                .is_some_and(|rv| at_least(rv, resource_version)),
            (Written::Object { vanishing, .. }, None) => *vanishing,
            (Written::Deleted { .. }, None) => true,
            (Written::Deleted { uid: Some(uid) }, Some(meta)) => {
                meta.uid.as_deref().is_some_and(|u| u != uid)
            }
            (Written::Deleted { uid: None }, Some(_)) => false,
        }
    }
}

impl WriteTracker {
    pub(crate) fn new() -> Self {
        Self::with_capacity(MAX_RECORDS)
    }

    pub(crate) fn with_capacity(max_records: usize) -> Self {
        Self {
            records: Mutex::new(HashMap::new()),
            pending: AtomicUsize::new(0),
            seq: AtomicU64::new(0),
            watched: RwLock::new(HashMap::new()),
            max_records: max_records.max(1),
            recent_deletes: Mutex::new(std::collections::VecDeque::new()),
            resolved: watch::channel(0).0,
        }
    }

    /// Wakes the reads waiting for a write: some record left.
    fn bump_resolved(&self) {
        self.resolved.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The sequence number a waiting read wakes on, its current value seen.
    pub(super) fn subscribe_resolved(&self) -> watch::Receiver<u64> {
        self.resolved.subscribe()
    }

    /// Records writes of `api_version`/`plural` from now on (in `namespace`
    /// only, for a namespaced informer); `shown` looks into the informer's
    /// store.
    pub(crate) fn watch_kind(
        &self,
        api_version: &str,
        plural: &str,
        namespace: Option<&str>,
        shown: ShownCheck,
    ) {
        self.watched.write().insert(
            WatchedKind {
                api_version: api_version.to_owned(),
                plural: plural.to_owned(),
            },
            Watched {
                namespace: namespace.map(str::to_owned),
                shown,
            },
        );
    }

    /// True when writes of this kind are recorded (checked before a
    /// response body is looked at).
    pub(crate) fn is_watched(&self, api_version: &str, plural: &str) -> bool {
        let watched = self.watched.read();
        watched
            .keys()
            .any(|w| w.api_version == api_version && w.plural == plural)
    }

    /// The store check of the informer that shows `key`, if one does.
    fn in_scope(&self, key: &WriteKey) -> Option<ShownCheck> {
        let watched = self.watched.read();
        let w = watched.get(&WatchedKind {
            api_version: key.api_version.clone(),
            plural: key.plural.clone(),
        })?;
        match (&w.namespace, key.namespace.as_deref()) {
            (Some(ns), Some(k)) if ns != k => None,
            _ => Some(Arc::clone(&w.shown)),
        }
    }

    /// Records a write the apiserver answered. A record of the same object
    /// with a newer resourceVersion is kept (answers to concurrent writes
    /// may arrive out of order).
    ///
    /// The record is inserted first and the informer's store looked at
    /// after: if the informer applied the write before (its answer raced the
    /// watch event), the record goes at once; if after, the informer drops
    /// it. Either way no record outlives the informer catching up.
    pub(crate) fn record(&self, key: WriteKey, written: Written) {
        let Some(shown) = self.in_scope(&key) else {
            return;
        };
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        if self.insert(key.clone(), written.clone(), seq)
            && (shown(&key, &written) || self.deleted_after(&key, &written))
        {
            self.forget(&key, seq);
        }
    }

    /// Called by an informer for every deletion it applies (whether or not
    /// a write is pending): remembered so that a write answered before the
    /// deletion but recorded after it counts as observed.
    pub(crate) fn note_deleted(&self, key: WriteKey, resource_version: Option<&str>) {
        let Some(rv) = resource_version else {
            return;
        };
        let mut recent = self.recent_deletes.lock();
        if recent.len() >= RECENT_DELETES {
            recent.pop_front();
        }
        recent.push_back((key, rv.to_owned()));
    }

    /// True when the informer applied a deletion of `key` newer than
    /// `written`.
    fn deleted_after(&self, key: &WriteKey, written: &Written) -> bool {
        let Written::Object {
            resource_version, ..
        } = written
        else {
            return false;
        };
        self.recent_deletes
            .lock()
            .iter()
            .rev()
            .any(|(k, rv)| k == key && rv != resource_version && at_least(rv, resource_version))
    }

    /// Inserts a record; false when a newer one of the object was kept.
    fn insert(&self, key: WriteKey, written: Written, seq: u64) -> bool {
        let mut records = self.records.lock();
        if let Some(existing) = records.get(&key)
            && let (
                Written::Object {
                    resource_version: old,
                    ..
                },
                Written::Object {
                    resource_version: new,
                    ..
                },
            ) = (&existing.written, &written)
            && old != new
            && at_least(old, new)
        {
            return false;
        }
        let mut evicted = false;
        if !records.contains_key(&key) && records.len() >= self.max_records {
            let oldest = records
                .iter()
                .min_by_key(|(_, r)| r.seq)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                tracing::warn!(
                    max = self.max_records,
                    kind = %oldest.plural,
                    namespace = ?oldest.namespace,
                    name = %oldest.name,
                    "too many writes not yet seen by the cache; forgetting the oldest"
                );
                records.remove(&oldest);
                evicted = true;
            }
        }
        tracing::trace!(kind = %key.plural, namespace = ?key.namespace, name = %key.name, ?written, "recorded a write");
        let replaced = records.insert(key, Record { written, seq }).is_some();
        self.pending.store(records.len(), Ordering::Release);
        drop(records);
        if replaced || evicted {
            self.bump_resolved();
        }
        true
    }

    /// True when some write is waiting to be observed (one atomic load).
    pub(crate) fn any_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// The number of writes waiting to be observed.
    pub(crate) fn len(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// The pending write of `key`, with its sequence number.
    pub(crate) fn pending(&self, key: &WriteKey) -> Option<(Written, u64)> {
        if !self.any_pending() {
            return None;
        }
        self.records
            .lock()
            .get(key)
            .map(|r| (r.written.clone(), r.seq))
    }

    /// The pending writes of a kind, in `namespace` (`None`: all).
    pub(crate) fn pending_of_kind(
        &self,
        api_version: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> Vec<(WriteKey, Written, u64)> {
        if !self.any_pending() {
            return Vec::new();
        }
        self.records
            .lock()
            .iter()
            .filter(|(k, _)| {
                k.api_version == api_version
                    && k.plural == plural
                    && namespace.is_none_or(|ns| k.namespace.as_deref() == Some(ns))
            })
            .map(|(k, r)| (k.clone(), r.written.clone(), r.seq))
            .collect()
    }

    /// Forgets the record of `key` if it is still the one numbered `seq`.
    pub(crate) fn forget(&self, key: &WriteKey, seq: u64) {
        let mut records = self.records.lock();
        if records.get(key).is_some_and(|r| r.seq == seq) {
            records.remove(key);
            self.pending.store(records.len(), Ordering::Release);
            drop(records);
            self.bump_resolved();
        }
    }

    /// Called by the informer after it applied a change of `key`: drops
    /// the record once `current` (the store's copy now) shows it, or a
    /// deletion at least as new arrived.
    pub(crate) fn observe(
        &self,
        key: &WriteKey,
        current: Option<&ObjectMeta>,
        deleted: Option<&ObjectMeta>,
        relisted: bool,
    ) {
        if !self.any_pending() {
            return;
        }
        let mut records = self.records.lock();
        let Some(record) = records.get(key) else {
            return;
        };
        let opaque = matches!(&record.written, Written::Object { resource_version, .. }
            if resource_version.parse::<u64>().is_err());
        let caught_up = record.written.observed_in(current)
            || (relisted && opaque)
            || match (&record.written, deleted) {
                // Deleted after our write (by anyone): absent is the truth.
                (
                    Written::Object {
                        resource_version, ..
                    },
                    Some(gone),
                ) => gone
                    .resource_version
                    .as_deref()
                    .is_some_and(|rv| rv != resource_version && at_least(rv, resource_version)),
                _ => false,
            };
        if caught_up {
            records.remove(key);
            self.pending.store(records.len(), Ordering::Release);
            drop(records);
            self.bump_resolved();
        }
    }
}
