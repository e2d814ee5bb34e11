//! Read-your-own-writes, on by default: after a reconciler writes through
//! opkit, its reads of that object through the reconcile
//! [`Context`](crate::reconcile::Context) never return the state from
//! before the write. The classic bug it removes: create a child, read the
//! cache before the watch delivered it, create it again (409
//! AlreadyExists, or a duplicate with `generateName`).
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{ObjectMeta, PostParams};
//! use opkit::reconcile::{Action, Context, ReconcileError, Reconcile, Request};
//!
//! struct Children;
//!
//! impl Reconcile for Children {
//!     type Object = ConfigMap;
//!
//!     async fn reconcile(&self, req: Request, ctx: &Context<ConfigMap>) -> Result<Action, ReconcileError> {
//!         let ns = req.namespace.clone().unwrap_or_default();
//!         let name = format!("{}-child", req.name);
//!         // Waits (bounded) until the cache shows this process's last write
//!         // of the child: a child created a moment ago is never "absent".
//!         if ctx.get::<ConfigMap>(Some(&ns), &name).await?.is_none() {
//!             let child = ConfigMap {
//!                 metadata: ObjectMeta { name: Some(name), ..ObjectMeta::default() },
//!                 data: Some(BTreeMap::from([("owner".into(), req.name.clone())])),
//!                 ..ConfigMap::default()
//!             };
//!             // Writes through ctx.api / ctx.client (and the opkit::client
//!             // helpers on such an Api) are recorded.
//!             ctx.api::<ConfigMap>(Some(&ns)).create(&PostParams::default(), &child).await?;
//!         }
//!         Ok(Action::done())
//!     }
//! }
//!
//! // Opting out (e.g. to measure the cost):
//! # fn wire(cache: opkit::cache::SharedCache) {
//! let controller = opkit::controller::Controller::new(Children)
//!     .read_your_writes(false);
//! # let _ = (controller, cache);
//! # }
//! ```
//!
//! # How it works
//!
//! The cache's [`client`](super::SharedCache::client) (what
//! [`Context::client`](crate::reconcile::Context::client) and
//! [`Context::api`](crate::reconcile::Context::api) hand out) carries a layer that
//! looks at the answer of every successful create, update, patch, apply
//! and delete (status included) of a kind the cache watches, and records,
//! per object (API group/version, resource, namespace, name), the
//! `resourceVersion` and `uid` the apiserver answered, or that the object
//! is gone. The informer drops a record once it applies a change at least
//! that new. A read of a recorded object (or a list of its kind) waits
//! until the informer's copy is at least as new (no polling); reads of
//! objects nobody wrote wait for nothing (one atomic load when no write is
//! pending).
//!
//! The wake-up is a sequence number in the tracker, bumped each time a
//! record leaves it (the informer applied a change that shows it, a newer
//! write of the object replaced it, or a read gave up on it); a waiting
//! read re-checks its record on each bump. The informer does no work for
//! this when no write is pending (one atomic load per applied change), and
//! wakes no one for changes that resolve no record.
//!
//! *At least as new*: resourceVersions are compared as integers when both
//! parse as `u64` (they are etcd revisions on every apiserver backed by
//! etcd, which increase across one resource); otherwise (an apiserver with
//! opaque versions) only the very version written, or a relist of the
//! object, counts as caught up. A delete is caught up once the object is
//! absent from the cache, or the cached object of that name has another
//! uid (a newer one).
//!
//! The wait is bounded ([`DEFAULT_WAIT`], or
//! [`Controller::read_your_writes_timeout`](crate::controller::Controller::read_your_writes_timeout))
//! and ends when the read is dropped (a reconcile timeout, shutdown). On timeout
//! the read fails with [`CacheError::WriteNotObserved`]
//! (controller-runtime's cached reads have no such wait) rather than returning a state older than the
//! reconciler's own write, and the record is forgotten, so the retry reads
//! what the cache has. At most [`MAX_RECORDS`] writes are pending; past
//! that the oldest is forgotten (its reads may then be stale).
//!
//! # Scope and limits
//!
//! - Only writes through the cache's client are recorded: a client built
//!   elsewhere is not seen. Only kinds the cache watches in its own scope
//!   are recorded (writes of other kinds, e.g. Events, cost nothing beyond
//!   one lookup).
//! - Reads through [`Context`](crate::reconcile::Context) wait;
//!   [`Store`] handles and [`SharedCache::get`](super::SharedCache::get)
//!   / [`list`](super::SharedCache::list) read without waiting
//!   ([`Context::store`](crate::reconcile::Context::store) waits once, when
//!   it hands the handle out).
//! - Dry runs, collection deletes and subresources other than `status` are
//!   not recorded.
//! - If someone else deletes the object in the instant between the
//!   apiserver's answer to this process's write and the recording of it,
//!   the informer has removed the object already: it remembers the last
//!   [`RECENT_DELETES`] deletions it applied, and a write that such a
//!   deletion is newer than counts as observed at once (the object is gone,
//!   which is the truth), instead of stalling reads for the bound.
//! - Turn it off per controller with
//!   [`Controller::read_your_writes`](crate::controller::Controller::read_your_writes)
//!   or for the whole cache with
//!   [`SharedCacheBuilder::read_your_writes`](super::SharedCacheBuilder::read_your_writes)
//!   (then no client layer at all).

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use kube::Resource;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use super::error::{CacheError, UnobservedWrite};
use super::store::Store;

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
    pub(crate) fn observed_in<K: Resource>(&self, current: Option<&K>) -> bool {
        match (self, current) {
            (
                Written::Object {
                    resource_version, ..
                },
                Some(obj),
            ) => obj
                .meta()
                .resource_version
                .as_deref()
                .is_some_and(|rv| at_least(rv, resource_version)),
            (Written::Object { vanishing, .. }, None) => *vanishing,
            (Written::Deleted { .. }, None) => true,
            (Written::Deleted { uid: Some(uid) }, Some(obj)) => {
                obj.meta().uid.as_deref().is_some_and(|u| u != uid)
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
    fn subscribe_resolved(&self) -> watch::Receiver<u64> {
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
    pub(crate) fn observe<K: Resource>(
        &self,
        key: &WriteKey,
        current: Option<&K>,
        deleted: Option<&K>,
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
                    .meta()
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

/// The informer side a read waits on: its store, and a channel the
/// informer never sends on, closed when it is gone.
pub(crate) struct Observed<K> {
    pub store: Store<K>,
    pub alive: watch::Receiver<()>,
    pub informer: String,
}

/// Waits until the cache shows every write in `pending` (see the module
/// docs), at most until `deadline`; each write caught up is forgotten, and
/// so is the one that timed out.
pub(crate) async fn wait_observed<K>(
    tracker: &Arc<WriteTracker>,
    mut observed: Observed<K>,
    pending: Vec<(WriteKey, Written, u64)>,
    wait: Duration,
) -> Result<(), CacheError>
where
    K: Resource + Send + Sync + 'static,
{
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribed before the first check: every record leaving from here on
    // wakes us.
    let mut resolved = tracker.subscribe_resolved();
    for (key, written, seq) in pending {
        loop {
            let current = observed.store.get(key.namespace.as_deref(), &key.name);
            if written.observed_in(current.as_deref()) {
                tracker.forget(&key, seq);
                break;
            }
            // The informer may have dropped it (a deletion after our write).
            if tracker.pending(&key).is_none_or(|(_, s)| s != seq) {
                break;
            }
            tokio::select! {
                // The tracker lives while we hold it: this only wakes.
                _ = resolved.changed() => {}
                // Never sent on: it ends only when the informer is gone.
                _ = observed.alive.changed() => {
                    return Err(CacheError::Stopped(observed.informer.clone()));
                }
                () = tokio::time::sleep_until(deadline) => {
                    tracker.forget(&key, seq);
                    tracing::warn!(
                        informer = %observed.informer,
                        namespace = ?key.namespace,
                        name = %key.name,
                        ?written,
                        "the cache did not show this process's write in time"
                    );
                    return Err(CacheError::WriteNotObserved(Box::new(UnobservedWrite {
                        informer: observed.informer.clone(),
                        object: match &key.namespace {
                            Some(ns) => format!("{ns}/{}", key.name),
                            None => key.name.clone(),
                        },
                        written: match written {
                            Written::Object { resource_version, .. } => {
                                format!("resourceVersion {resource_version}")
                            }
                            Written::Deleted { .. } => "its deletion".to_owned(),
                        },
                        waited: wait,
                    })));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::key::ObjectKey;
    use crate::cache::store::Indexer;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(name: &str, rv: &str, uid: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                uid: Some(uid.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn key(name: &str) -> WriteKey {
        WriteKey {
            api_version: "v1".into(),
            plural: "configmaps".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn object(rv: &str) -> Written {
        Written::Object {
            resource_version: rv.into(),
            uid: Some("u1".into()),
            vanishing: false,
        }
    }

    fn never_shown() -> ShownCheck {
        Arc::new(|_: &WriteKey, _: &Written| false)
    }

    fn tracker() -> Arc<WriteTracker> {
        let t = WriteTracker::new();
        t.watch_kind("v1", "configmaps", None, never_shown());
        Arc::new(t)
    }

    struct Fixture {
        indexer: Indexer<ConfigMap>,
        alive: watch::Sender<()>,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                indexer: Indexer::new(),
                alive: watch::channel(()).0,
            }
        }
        fn observed(&self) -> Observed<ConfigMap> {
            Observed {
                store: Store::new(self.indexer.clone()),
                alive: self.alive.subscribe(),
                informer: "v1/ConfigMap".into(),
            }
        }
        /// What the informer does: store, drop caught-up records (which
        /// wakes the readers waiting for them).
        fn apply(&self, tracker: &WriteTracker, obj: Arc<ConfigMap>) {
            let name = obj.metadata.name.clone().unwrap();
            self.indexer
                .insert(ObjectKey::new(Some("ns"), &name), Arc::clone(&obj));
            tracker.observe(&key(&name), Some(&*obj), None, false);
        }
        fn delete(&self, tracker: &WriteTracker, obj: Arc<ConfigMap>) {
            let name = obj.metadata.name.clone().unwrap();
            self.indexer.remove(&format!("ns/{name}"));
            tracker.observe::<ConfigMap>(&key(&name), None, Some(&obj), false);
        }
    }

    fn deadline(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn versions_compare_as_integers_and_opaque_ones_only_equal() {
        assert!(at_least("10", "9"));
        assert!(at_least("10", "10"));
        assert!(!at_least("9", "10"));
        assert!(at_least("abc", "abc"));
        assert!(!at_least("abd", "abc"));
        assert!(!at_least("10", "abc"));
    }

    #[test]
    fn deletions_are_observed_when_absent_or_replaced_by_another_uid() {
        let deleted = Written::Deleted {
            uid: Some("u1".into()),
        };
        assert!(deleted.observed_in::<ConfigMap>(None));
        assert!(!deleted.observed_in(Some(&*cm("a", "5", "u1"))));
        assert!(deleted.observed_in(Some(&*cm("a", "9", "u2"))));
        assert!(!object("7").observed_in::<ConfigMap>(None));
        assert!(!object("7").observed_in(Some(&*cm("a", "6", "u1"))));
        assert!(object("7").observed_in(Some(&*cm("a", "8", "u1"))));
    }

    #[test]
    fn records_only_watched_kinds_and_keeps_the_newest_version() {
        let t = tracker();
        let mut other = key("a");
        other.plural = "secrets".into();
        t.record(other.clone(), object("5"));
        assert!(!t.any_pending());
        t.record(key("a"), object("7"));
        t.record(key("a"), object("5")); // an older answer arriving late
        assert_eq!(t.pending(&key("a")).unwrap().0, object("7"));
        t.record(key("a"), object("9"));
        assert_eq!(t.pending(&key("a")).unwrap().0, object("9"));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_namespaced_cache_records_only_its_namespace() {
        let t = WriteTracker::new();
        t.watch_kind("v1", "configmaps", Some("ns"), never_shown());
        let mut elsewhere = key("a");
        elsewhere.namespace = Some("other".into());
        t.record(elsewhere, object("5"));
        assert!(!t.any_pending());
        t.record(key("a"), object("5"));
        assert!(t.any_pending());
    }

    #[test]
    fn records_are_bounded_and_the_oldest_goes_first() {
        let t = WriteTracker::with_capacity(2);
        t.watch_kind("v1", "configmaps", None, never_shown());
        t.record(key("a"), object("1"));
        t.record(key("b"), object("2"));
        t.record(key("c"), object("3"));
        assert_eq!(t.len(), 2);
        assert!(t.pending(&key("a")).is_none());
        assert!(t.pending(&key("c")).is_some());
    }

    #[test]
    fn the_informer_drops_records_once_caught_up() {
        let t = tracker();
        let f = Fixture::new();
        t.record(key("a"), object("7"));
        f.apply(&t, cm("a", "6", "u1"));
        assert!(t.any_pending());
        f.apply(&t, cm("a", "8", "u1"));
        assert!(!t.any_pending());
        // Deleted by someone else after our write: absent is the truth.
        t.record(key("b"), object("10"));
        f.delete(&t, cm("b", "11", "u1"));
        assert!(!t.any_pending());
    }

    /// `t` records ConfigMap writes and checks them against `f`'s store.
    fn watch_configmaps_in(t: &WriteTracker, f: &Fixture) {
        let store = Store::new(f.indexer.clone());
        t.watch_kind(
            "v1",
            "configmaps",
            None,
            Arc::new(move |k: &WriteKey, w: &Written| {
                w.observed_in(store.get(k.namespace.as_deref(), &k.name).as_deref())
            }),
        );
    }

    #[test]
    fn a_write_the_informer_applied_before_it_was_recorded_is_not_kept() {
        let f = Fixture::new();
        let t = WriteTracker::new();
        watch_configmaps_in(&t, &f);
        // The watch event won the race against the write's answer.
        f.apply(&t, cm("a", "7", "u1"));
        t.record(key("a"), object("7"));
        assert!(!t.any_pending());
        t.record(key("a"), object("8"));
        assert!(t.any_pending());
    }

    /// Issue 22: someone else deletes the object right after our write,
    /// and the informer applies that deletion before our write's answer is
    /// recorded: the write counts as observed (the object is gone), no read
    /// stalls for the bound.
    #[tokio::test(start_paused = true)]
    async fn a_deletion_applied_before_the_write_was_recorded_counts_as_observed() {
        let f = Arc::new(Fixture::new());
        let t = Arc::new(WriteTracker::new());
        watch_configmaps_in(&t, &f);
        f.apply(&t, cm("a", "6", "u1"));
        // The deletion (rv 8) is applied first ...
        f.delete(&t, cm("a", "8", "u1"));
        t.note_deleted(key("a"), Some("8"));
        // ... then our write's answer (rv 7) is recorded.
        t.record(key("a"), object("7"));
        assert!(!t.any_pending(), "observed: the object is gone");
        let pending = t.pending_of_kind("v1", "configmaps", Some("ns"));
        let started = tokio::time::Instant::now();
        wait_observed(&t, f.observed(), pending, deadline(10))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::ZERO, "no stall");
        // A deletion older than the write does not count.
        t.note_deleted(key("b"), Some("3"));
        t.record(key("b"), object("5"));
        assert!(t.any_pending());
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_waits_for_the_informer_and_wakes_on_its_change() {
        let t = tracker();
        let f = Arc::new(Fixture::new());
        f.apply(&t, cm("a", "5", "u1"));
        t.record(key("a"), object("7"));
        let pending = t.pending_of_kind("v1", "configmaps", Some("ns"));
        let started = tokio::time::Instant::now();
        let wait = tokio::spawn({
            let (t, observed) = (Arc::clone(&t), f.observed());
            async move { wait_observed(&t, observed, pending, deadline(10)).await }
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(
            !wait.is_finished(),
            "returned before the informer showed rv 7"
        );
        f.apply(&t, cm("a", "6", "u1"));
        tokio::task::yield_now().await;
        assert!(!wait.is_finished(), "rv 6 is older than the write");
        f.apply(&t, cm("a", "7", "u1"));
        wait.await.unwrap().unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        assert!(!t.any_pending());
    }

    #[test]
    fn only_a_record_leaving_bumps_the_wake_up_sequence() {
        let t = tracker();
        let f = Fixture::new();
        let woken = t.subscribe_resolved();
        // Nothing pending: the informer's changes wake no one.
        f.apply(&t, cm("a", "5", "u1"));
        assert!(!woken.has_changed().unwrap());
        t.record(key("a"), object("7"));
        // A change of another object, or an older version, resolves nothing.
        f.apply(&t, cm("b", "8", "u2"));
        f.apply(&t, cm("a", "6", "u1"));
        assert!(!woken.has_changed().unwrap());
        f.apply(&t, cm("a", "7", "u1"));
        assert!(woken.has_changed().unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_whose_record_was_evicted_returns_at_once() {
        let t = Arc::new(WriteTracker::with_capacity(1));
        t.watch_kind("v1", "configmaps", None, never_shown());
        let f = Fixture::new();
        t.record(key("a"), object("7"));
        let pending = t.pending_of_kind("v1", "configmaps", None);
        let started = tokio::time::Instant::now();
        let wait = tokio::spawn({
            let (t, observed) = (Arc::clone(&t), f.observed());
            async move { wait_observed(&t, observed, pending, deadline(10)).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!wait.is_finished());
        // Another write pushes the first out: its read stops waiting (the
        // module docs: it may then be stale), instead of timing out.
        t.record(key("b"), object("8"));
        wait.await.unwrap().unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_waiting_on_a_stopped_informer_says_so() {
        let t = tracker();
        let f = Fixture::new();
        t.record(key("a"), object("7"));
        let pending = t.pending_of_kind("v1", "configmaps", None);
        let observed = f.observed();
        drop(f);
        let err = wait_observed(&t, observed, pending, deadline(10))
            .await
            .unwrap_err();
        assert!(matches!(err, CacheError::Stopped(_)), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_after_a_delete_waits_until_the_object_is_gone() {
        let t = tracker();
        let f = Arc::new(Fixture::new());
        f.apply(&t, cm("a", "5", "u1"));
        t.record(
            key("a"),
            Written::Deleted {
                uid: Some("u1".into()),
            },
        );
        let pending = t.pending_of_kind("v1", "configmaps", None);
        let wait = tokio::spawn({
            let (t, observed) = (Arc::clone(&t), f.observed());
            async move { wait_observed(&t, observed, pending, deadline(10)).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!wait.is_finished());
        f.delete(&t, cm("a", "6", "u1"));
        wait.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_informer_never_shows_times_out_with_a_clear_error() {
        let t = tracker();
        let f = Fixture::new();
        t.record(key("a"), object("7"));
        let pending = t.pending_of_kind("v1", "configmaps", None);
        let started = tokio::time::Instant::now();
        let err = wait_observed(&t, f.observed(), pending, deadline(5))
            .await
            .unwrap_err();
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        let text = err.to_string();
        assert!(
            text.contains("ns/a") && text.contains("resourceVersion 7"),
            "{text}"
        );
        // Forgotten: the retry reads what the cache has.
        assert!(!t.any_pending());
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_read_ends_the_wait() {
        let t = tracker();
        let f = Fixture::new();
        t.record(key("a"), object("7"));
        let pending = t.pending_of_kind("v1", "configmaps", None);
        let read = wait_observed(&t, f.observed(), pending, deadline(60));
        let timed_out = tokio::time::timeout(Duration::from_secs(1), read).await;
        assert!(timed_out.is_err());
        assert_eq!(
            f.alive.receiver_count(),
            0,
            "the dropped read let go of the informer"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_pending_returns_at_once() {
        let t = tracker();
        let f = Fixture::new();
        let started = tokio::time::Instant::now();
        wait_observed(&t, f.observed(), Vec::new(), deadline(5))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
