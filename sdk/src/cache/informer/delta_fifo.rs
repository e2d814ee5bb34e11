//! The DeltaFIFO of the seed design: a queue of object keys, each queued once,
//! where every key carries the ordered list of changes (`Deltas`) seen for it
//! since it was last popped.
//!
//! ```no_run
//! // The queue is the informer's own; handlers see its order (each key's
//! // changes oldest first) and its tombstones: a deletion the watch missed,
//! // found by a relist, arrives with the last state the cache knew.
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{DeletedObject, InformerEvent, handler_fn};
//!
//! let on_delete = handler_fn(|event: InformerEvent<ConfigMap>| {
//!     if let InformerEvent::Delete { obj } = event {
//!         match obj {
//!             DeletedObject::Object(last) => println!("deleted: {:?}", last.metadata.name),
//!             DeletedObject::Tombstone(t) => println!(
//!                 "deleted while the watch was down: {} (last seen at {:?})",
//!                 t.key.as_str(),
//!                 t.last_known.metadata.resource_version
//!             ),
//!         }
//!     }
//! });
//! # let _ = on_delete;
//! ```
//!
//! Semantics (client-go's `DeltaFIFO` with `EmitDeltaTypeReplaced`):
//! - [`add`](DeltaFifo::add) / [`update`](DeltaFifo::update) /
//!   [`delete`](DeltaFifo::delete) append a delta to the key's list and queue
//!   the key if it was not queued; a delete of a key that is neither known
//!   (in the store) nor pending is dropped;
//! - two consecutive deletes are deduplicated, keeping the one with more
//!   information (a real object beats a [`DeletedFinalStateUnknown`]);
//! - [`replace`](DeltaFifo::replace) appends `Replaced` for each listed object,
//!   then `Deleted(DeletedFinalStateUnknown)` for each pending or known key
//!   missing from the list, carrying the last known state;
//! - [`resync`](DeltaFifo::resync) appends `Sync` only for known keys with no
//!   pending deltas;
//! - [`has_synced`](DeltaFifo::has_synced) is true once the keys queued by the
//!   first `replace` (or anything added before it) have all been popped;
//! - [`pop`](DeltaFifo::pop) hands the oldest key with its deltas to a
//!   processing callback, run while the queue is locked so that no `replace`
//!   or `resync` can observe the store half-updated.
//!
//! The transform hook (strip `managedFields`, ...) is applied before objects
//! enter the queue, by the [`Reflector`](super::reflector::Reflector).

use std::{collections::VecDeque, fmt, sync::Arc};

use hashbrown::{HashMap, HashSet};
use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};

use super::store::Indexer;
use crate::cache::{
    error::FifoClosed,
    key::{KeyError, ObjectKey},
    undecodable::UndecodableObject,
};

#[cfg(test)]
/// The kind of a [`Delta`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (watch `ADDED`).
    Added,
    /// The object was modified (watch `MODIFIED`).
    Updated,
    /// The object was deleted (watch `DELETED`, or missing from a relist).
    Deleted,
    /// The object was part of a (re)list.
    Replaced,
    /// A periodic resync re-delivers the stored object.
    Sync,
    /// The current version does not deserialize into `K`.
    Undecodable,
    /// The object was deleted while its version did not deserialize.
    UndecodableDeleted,
}

/// The last known state of an object whose deletion was not observed: it
/// disappeared between a watch ending and the relist (client-go's
/// `DeletedFinalStateUnknown` tombstone).
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key of the deleted object.
    pub key: ObjectKey,
    /// The last state the cache knew.
    pub last_known: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            last_known: Arc::clone(&self.last_known),
        }
    }
}

/// What a delete carries: the object as the watch delivered it, or a
/// tombstone with the last known state.
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// The final state delivered by the watch's `DELETED` event.
    Object(Arc<K>),
    /// The deletion was inferred from a relist; the final state is unknown.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Object(o) => Self::Object(Arc::clone(o)),
            Self::Tombstone(t) => Self::Tombstone(t.clone()),
        }
    }
}

impl<K> DeletedObject<K> {
    /// The final object, or the last known state for a tombstone.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Object(o) => o,
            Self::Tombstone(t) => &t.last_known,
        }
    }

    /// True for a [`DeletedFinalStateUnknown`] tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

/// One change to an object.
#[derive(Debug)]
pub enum Delta<K> {
    /// Created.
    Added(Arc<K>),
    /// Modified.
    Updated(Arc<K>),
    /// Deleted.
    Deleted(DeletedObject<K>),
    /// Listed by a (re)list.
    Replaced(Arc<K>),
    /// Re-delivered by a resync.
    Sync(Arc<K>),
    /// Added, modified or listed in a shape that does not deserialize into
    /// `K`: what of it decodes.
    Undecodable(Arc<UndecodableObject>),
    /// Deleted (or missing from a relist) while its version did not
    /// deserialize into `K`.
    UndecodableDeleted(Arc<UndecodableObject>),
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(Arc::clone(o)),
            Self::Updated(o) => Self::Updated(Arc::clone(o)),
            Self::Deleted(d) => Self::Deleted(d.clone()),
            Self::Replaced(o) => Self::Replaced(Arc::clone(o)),
            Self::Sync(o) => Self::Sync(Arc::clone(o)),
            Self::Undecodable(u) => Self::Undecodable(Arc::clone(u)),
            Self::UndecodableDeleted(u) => Self::UndecodableDeleted(Arc::clone(u)),
        }
    }
}

impl<K> Delta<K> {
    /// The kind of change.
    #[cfg(test)]
    pub fn kind(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Deleted(_) => DeltaType::Deleted,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
            Self::Undecodable(_) => DeltaType::Undecodable,
            Self::UndecodableDeleted(_) => DeltaType::UndecodableDeleted,
        }
    }

    /// The object carried (for a tombstone: the last known state); `None`
    /// for an undecodable version.
    #[cfg(test)]
    pub fn object(&self) -> Option<&Arc<K>> {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => Some(o),
            Self::Deleted(d) => Some(d.object()),
            Self::Undecodable(_) | Self::UndecodableDeleted(_) => None,
        }
    }
}

/// The deltas of one key, oldest first. Never empty while queued.
pub type Deltas<K> = Vec<Delta<K>>;

/// What [`DeltaFifo::pop`] hands to its processing callback.
#[derive(Debug)]
pub struct Popped<K> {
    /// The key.
    pub key: ObjectKey,
    /// Its deltas, oldest first.
    pub deltas: Deltas<K>,
    /// True while the queue has not yet synced: these deltas belong to the
    /// initial list (client-go's `isInInitialList`).
    pub is_in_initial_list: bool,
}

/// Above this many slots, a drained queue gives its tables back.
const SHRINK_ABOVE: usize = 1024;

struct State<K> {
    items: HashMap<ObjectKey, Deltas<K>>,
    queue: VecDeque<ObjectKey>,
    populated: bool,
    initial_population_count: usize,
    closed: bool,
}

impl<K> State<K> {
    /// Once the queue is empty again, gives back the memory of the burst
    /// that filled it (the initial list of every object, a relist): a
    /// table sized for 50k keys would otherwise stay for the life of the
    /// informer.
    fn shrink_if_drained(&mut self) {
        if self.queue.is_empty()
            && self.items.is_empty()
            && (self.items.capacity() > SHRINK_ABOVE || self.queue.capacity() > SHRINK_ABOVE)
        {
            self.items = HashMap::new();
            self.queue = VecDeque::new();
        }
    }
}

/// The DeltaFIFO: see the [module documentation](self).
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    known: Option<Indexer<K>>,
    notify: Notify,
    synced: watch::Sender<bool>,
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("DeltaFifo")
            .field("queued", &st.queue.len())
            .field("populated", &st.populated)
            .field("initial_population_count", &st.initial_population_count)
            .field("closed", &st.closed)
            .finish()
    }
}

/// Deduplicates the last two deltas when both are deletes, keeping the one
/// with more information (client-go's `isDeletionDup`).
fn dedup_tail<K>(deltas: &mut Deltas<K>) {
    let n = deltas.len();
    if n < 2 {
        return;
    }
    if let (Delta::Deleted(_), Delta::Deleted(b)) = (&deltas[n - 1], &deltas[n - 2]) {
        if b.is_tombstone() {
            // keep the newer (a); drop b
            deltas.remove(n - 2);
        } else {
            // keep b (a real object), drop the newer
            deltas.pop();
        }
    }
}

impl<K: Resource + Send + Sync + 'static> DeltaFifo<K> {
    /// A new queue. `known` is the store the popped deltas are applied to
    /// (the informer's [`Indexer`]); it is consulted by `delete`, `replace`
    /// and `resync`, as client-go's `knownObjects`.
    pub fn new(known: Option<Indexer<K>>) -> Self {
        Self {
            state: Mutex::new(State {
                items: HashMap::new(),
                queue: VecDeque::new(),
                populated: false,
                initial_population_count: 0,
                closed: false,
            }),
            known,
            notify: Notify::new(),
            synced: watch::Sender::new(false),
        }
    }

    fn queue_locked(&self, st: &mut State<K>, key: ObjectKey, delta: Delta<K>) {
        match st.items.get_mut(&key) {
            Some(deltas) => {
                deltas.push(delta);
                dedup_tail(deltas);
            }
            None => {
                st.queue.push_back(key.clone());
                st.items.insert(key, vec![delta]);
                self.notify.notify_one();
            }
        }
    }

    fn check_synced_locked(&self, st: &State<K>) {
        if st.populated && st.initial_population_count == 0 && !*self.synced.borrow() {
            self.synced.send_replace(true);
        }
    }

    fn mark_populated_locked(&self, st: &mut State<K>) {
        st.populated = true;
        self.check_synced_locked(st);
    }

    /// Queues an `Added` delta for `obj`.
    pub fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = ObjectKey::of(&*obj)?;
        let mut st = self.state.lock();
        self.mark_populated_locked(&mut st);
        self.queue_locked(&mut st, key, Delta::Added(obj));
        Ok(())
    }

    /// Queues an `Updated` delta for `obj`.
    pub fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = ObjectKey::of(&*obj)?;
        let mut st = self.state.lock();
        self.mark_populated_locked(&mut st);
        self.queue_locked(&mut st, key, Delta::Updated(obj));
        Ok(())
    }

    /// Queues a `Deleted` delta for `obj`, unless its key is neither known
    /// nor pending (nothing to delete).
    pub fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = ObjectKey::of(&*obj)?;
        let mut st = self.state.lock();
        self.mark_populated_locked(&mut st);
        let known = self.known.as_ref().is_some_and(|k| k.knows(key.as_str()));
        if !known && !st.items.contains_key(&key) {
            return Ok(());
        }
        self.queue_locked(&mut st, key, Delta::Deleted(DeletedObject::Object(obj)));
        Ok(())
    }

    /// Queues an `Undecodable` delta: the current version of `record`'s key
    /// does not deserialize into `K` (added, modified or listed so).
    pub(crate) fn undecodable(&self, record: UndecodableObject) {
        let mut st = self.state.lock();
        self.mark_populated_locked(&mut st);
        let key = record.key().clone();
        self.queue_locked(&mut st, key, Delta::Undecodable(Arc::new(record)));
    }

    /// Queues the deletion of `record`'s key, whose final state does not
    /// deserialize into `K`: an `UndecodableDeleted` delta, unless the key
    /// is neither known nor pending (nothing to delete).
    pub(crate) fn undecodable_deleted(&self, record: UndecodableObject) {
        let mut st = self.state.lock();
        self.mark_populated_locked(&mut st);
        let key = record.key().clone();
        let known = self.known.as_ref().is_some_and(|k| k.knows(key.as_str()));
        if !known && !st.items.contains_key(&key) {
            return;
        }
        let delta = Delta::UndecodableDeleted(Arc::new(record.into_deleted()));
        self.queue_locked(&mut st, key, delta);
    }

    /// The deletion of a key missing from a relist: a tombstone with the
    /// last decodable state, or `UndecodableDeleted` when the last state
    /// known did not decode.
    fn gone_delta(key: &ObjectKey, last: &Delta<K>) -> Delta<K> {
        let last_known = match last {
            Delta::Added(o) | Delta::Updated(o) | Delta::Replaced(o) | Delta::Sync(o) => o,
            Delta::Deleted(d) => d.object(),
            Delta::Undecodable(rec) | Delta::UndecodableDeleted(rec) => {
                return Delta::UndecodableDeleted(Arc::new(
                    UndecodableObject::clone(rec).into_deleted(),
                ));
            }
        };
        Delta::Deleted(DeletedObject::Tombstone(DeletedFinalStateUnknown {
            key: key.clone(),
            last_known: Arc::clone(last_known),
        }))
    }

    /// Replaces the whole state with `list` (a relist at `resource_version`):
    /// `Replaced` for every listed object, then a tombstone delete for every
    /// pending or known key absent from the list. Objects without a name are
    /// skipped.
    pub fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) {
        self.replace_with_undecodable(list, Vec::new(), resource_version)
    }

    /// [`replace`](Self::replace), where the listed objects in
    /// `undecodable` did not deserialize into `K`: each is queued as
    /// `Undecodable` (present, so not deleted).
    pub(crate) fn replace_with_undecodable(
        &self,
        list: Vec<Arc<K>>,
        undecodable: Vec<UndecodableObject>,
        resource_version: &str,
    ) {
        let mut st = self.state.lock();
        let mut keys: HashSet<ObjectKey> = HashSet::with_capacity(list.len() + undecodable.len());
        for record in undecodable {
            let key = record.key().clone();
            keys.insert(key.clone());
            self.queue_locked(&mut st, key, Delta::Undecodable(Arc::new(record)));
        }
        for obj in list {
            let Ok(key) = ObjectKey::of(&*obj) else {
                tracing::warn!("skipping listed object without a name");
                continue;
            };
            keys.insert(key.clone());
            self.queue_locked(&mut st, key, Delta::Replaced(obj));
        }

        let mut queued_deletions = 0usize;
        // pending keys missing from the list
        let missing_pending: Vec<(ObjectKey, Delta<K>)> = st
            .items
            .iter()
            .filter(|(k, _)| !keys.contains(*k))
            .filter_map(|(k, d)| d.last().map(|d| (k.clone(), Self::gone_delta(k, d))))
            .collect();
        for (key, delta) in missing_pending {
            queued_deletions += 1;
            self.queue_locked(&mut st, key, delta);
        }
        // known keys missing from the list (and not pending)
        if let Some(known) = &self.known {
            for (key, last_known) in known.entries() {
                if keys.contains(&key) || st.items.get(&key).is_some_and(|d| !d.is_empty()) {
                    continue;
                }
                queued_deletions += 1;
                let tomb = DeletedFinalStateUnknown {
                    key: key.clone(),
                    last_known,
                };
                self.queue_locked(&mut st, key, Delta::Deleted(DeletedObject::Tombstone(tomb)));
            }
            for (key, record) in known.undecodable_entries() {
                if keys.contains(&key) || st.items.get(&key).is_some_and(|d| !d.is_empty()) {
                    continue;
                }
                queued_deletions += 1;
                let delta = Delta::UndecodableDeleted(Arc::new(
                    UndecodableObject::clone(&record).into_deleted(),
                ));
                self.queue_locked(&mut st, key, delta);
            }
        }

        if !st.populated {
            st.populated = true;
            st.initial_population_count = keys.len() + queued_deletions;
            self.check_synced_locked(&st);
        }
        tracing::trace!(
            resource_version,
            listed = keys.len(),
            deletions = queued_deletions,
            "DeltaFIFO replace"
        );
    }

    /// Queues a `Sync` delta for every known object whose key has no pending
    /// deltas.
    pub fn resync(&self) {
        let Some(known) = &self.known else { return };
        let mut st = self.state.lock();
        for (key, obj) in known.entries() {
            if st.items.get(&key).is_some_and(|d| !d.is_empty()) {
                continue;
            }
            self.queue_locked(&mut st, key, Delta::Sync(obj));
        }
    }

    /// Pops the oldest key, waiting until one is queued, and runs `process`
    /// on it while the queue is locked (so `replace`/`resync` see the store
    /// either before or after the deltas are applied, never in between).
    ///
    /// `process` must not block. Fails once the queue is closed and empty.
    pub async fn pop<R>(&self, process: impl FnOnce(Popped<K>) -> R) -> Result<R, FifoClosed> {
        loop {
            {
                let mut st = self.state.lock();
                if let Some(popped) = self.pop_locked(&mut st) {
                    let out = process(popped);
                    self.check_synced_locked(&st);
                    return Ok(out);
                }
                if st.closed {
                    return Err(FifoClosed);
                }
            }
            self.notify.notified().await;
        }
    }

    /// Pops up to `max` keys without waiting, calling `process` on each under
    /// the lock. Returns how many were popped.
    pub fn pop_ready(&self, max: usize, mut process: impl FnMut(Popped<K>)) -> usize {
        let mut st = self.state.lock();
        let mut n = 0;
        while n < max {
            let Some(popped) = self.pop_locked(&mut st) else {
                break;
            };
            process(popped);
            n += 1;
        }
        self.check_synced_locked(&st);
        n
    }

    fn pop_locked(&self, st: &mut State<K>) -> Option<Popped<K>> {
        while let Some(key) = st.queue.pop_front() {
            let is_in_initial_list = !(st.populated && st.initial_population_count == 0);
            if st.initial_population_count > 0 {
                st.initial_population_count -= 1;
            }
            if let Some(deltas) = st.items.remove(&key) {
                st.shrink_if_drained();
                return Some(Popped {
                    key,
                    deltas,
                    is_in_initial_list,
                });
            }
        }
        None
    }

    /// Closes the queue: `pop` fails once it is empty.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    /// True once the first `replace` batch (or anything added before it)
    /// has been popped.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// A receiver that turns `true` when [`has_synced`](Self::has_synced) does.
    pub fn subscribe_synced(&self) -> watch::Receiver<bool> {
        self.synced.subscribe()
    }

    #[cfg(test)]
    /// The number of queued keys.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    #[cfg(test)]
    /// True when no key is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(test)]
    /// A copy of the pending deltas of `key`.
    pub fn get(&self, key: &str) -> Option<Deltas<K>> {
        self.state.lock().items.get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::time::Duration;

    fn cm(name: &str, rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn rv<K: Resource>(o: &Arc<K>) -> String {
        o.meta().resource_version.clone().unwrap_or_default()
    }

    async fn pop_all(f: &DeltaFifo<ConfigMap>) -> Vec<(String, Vec<(DeltaType, String)>, bool)> {
        let mut out = vec![];
        while !f.is_empty() {
            let p = f
                .pop(|p| {
                    (
                        p.key.to_string(),
                        p.deltas
                            .iter()
                            .map(|d| {
                                let rv = match (d.object(), d) {
                                    (Some(o), _) => rv(o),
                                    (
                                        None,
                                        Delta::Undecodable(u) | Delta::UndecodableDeleted(u),
                                    ) => u.resource_version().unwrap_or_default().to_owned(),
                                    (None, _) => String::new(),
                                };
                                (d.kind(), rv)
                            })
                            .collect::<Vec<_>>(),
                        p.is_in_initial_list,
                    )
                })
                .await
                .unwrap();
            out.push(p);
        }
        out
    }

    #[tokio::test]
    async fn keys_queued_once_in_fifo_order() {
        let f = DeltaFifo::new(None);
        f.add(cm("a", "1")).unwrap();
        f.add(cm("b", "2")).unwrap();
        f.update(cm("a", "3")).unwrap();
        assert_eq!(f.len(), 2);
        let got = pop_all(&f).await;
        assert_eq!(got[0].0, "ns/a");
        assert_eq!(
            got[0].1,
            vec![
                (DeltaType::Added, "1".into()),
                (DeltaType::Updated, "3".into())
            ]
        );
        assert_eq!(got[1].0, "ns/b");
    }

    #[tokio::test]
    async fn consecutive_deletes_keep_the_more_informative() {
        let known = Indexer::new();
        known.add(cm("a", "1")).unwrap();
        let f = DeltaFifo::new(Some(known.clone()));
        // a real delete, then a tombstone from a relist missing "a": keep the real one
        f.delete(cm("a", "2")).unwrap();
        f.replace(vec![], "5");
        let d = f.get("ns/a").unwrap();
        assert_eq!(d.len(), 1);
        assert!(matches!(&d[0], Delta::Deleted(DeletedObject::Object(o)) if rv(o) == "2"));

        // a tombstone first, then a real delete: the real one replaces it
        let f = DeltaFifo::new(Some(known));
        f.replace(vec![], "5");
        assert!(
            f.get("ns/a").unwrap()[0]
                .object()
                .unwrap()
                .meta()
                .resource_version
                .as_deref()
                == Some("1")
        );
        f.delete(cm("a", "3")).unwrap();
        let d = f.get("ns/a").unwrap();
        assert_eq!(d.len(), 1);
        assert!(matches!(&d[0], Delta::Deleted(DeletedObject::Object(o)) if rv(o) == "3"));
    }

    #[tokio::test]
    async fn delete_of_unknown_key_is_dropped() {
        let f = DeltaFifo::new(Some(Indexer::new()));
        f.delete(cm("ghost", "1")).unwrap();
        assert!(f.is_empty());
        // but a pending key gets its delete
        f.add(cm("a", "1")).unwrap();
        f.delete(cm("a", "2")).unwrap();
        assert_eq!(f.get("ns/a").unwrap().len(), 2);
    }

    fn bad(name: &str, rv: &str) -> UndecodableObject {
        UndecodableObject::new(
            "v1/ConfigMap".into(),
            ObjectKey::new(Some("ns"), name),
            kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            "invalid type".into(),
        )
    }

    #[tokio::test]
    async fn an_undecodable_version_is_queued_never_as_a_delete() {
        let known = Indexer::new();
        known.add(cm("stored", "1")).unwrap();
        let f = DeltaFifo::new(Some(known.clone()));
        // a stored object whose new version does not decode: its record,
        // not a delete
        f.undecodable(bad("stored", "2"));
        // never seen before: queued too (the object exists)
        f.undecodable(bad("fresh", "3"));
        // deleted while undecodable: only when known or pending
        f.undecodable_deleted(bad("fresh", "4"));
        f.undecodable_deleted(bad("never-seen", "5"));
        assert!(f.get("ns/never-seen").is_none());
        let popped = pop_all(&f).await;
        assert_eq!(
            popped,
            [
                (
                    "ns/stored".to_owned(),
                    vec![(DeltaType::Undecodable, "2".to_owned())],
                    false
                ),
                (
                    "ns/fresh".to_owned(),
                    vec![
                        (DeltaType::Undecodable, "3".to_owned()),
                        (DeltaType::UndecodableDeleted, "4".to_owned())
                    ],
                    false
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_relist_keeps_undecodable_items_and_deletes_missing_records() {
        let known = Indexer::new();
        known.add(cm("a", "1")).unwrap();
        known.add(cm("b", "1")).unwrap();
        known.set_undecodable(
            ObjectKey::new(Some("ns"), "gone"),
            Arc::new(bad("gone", "2")),
        );
        known.set_undecodable(
            ObjectKey::new(Some("ns"), "kept"),
            Arc::new(bad("kept", "2")),
        );
        let f = DeltaFifo::new(Some(known));
        f.replace_with_undecodable(
            vec![cm("b", "1")],
            vec![bad("a", "7"), bad("kept", "2")],
            "9",
        );
        let mut popped = pop_all(&f).await;
        popped.sort_by(|a, b| a.0.cmp(&b.0));
        let one = |k: &str, t: DeltaType, rv: &str| (k.to_owned(), vec![(t, rv.to_owned())], true);
        assert_eq!(
            popped,
            [
                // `a` listed but undecodable: its record, no tombstone
                one("ns/a", DeltaType::Undecodable, "7"),
                one("ns/b", DeltaType::Replaced, "1"),
                // a record missing from the list: deleted, as a record
                one("ns/gone", DeltaType::UndecodableDeleted, "2"),
                one("ns/kept", DeltaType::Undecodable, "2"),
            ]
        );
    }

    #[tokio::test]
    async fn replace_emits_replaced_and_tombstones() {
        let known = Indexer::new();
        known.add(cm("gone", "1")).unwrap();
        known.add(cm("kept", "1")).unwrap();
        let f = DeltaFifo::new(Some(known));
        f.add(cm("pending", "2")).unwrap(); // pending, not in the list
        f.replace(vec![cm("kept", "3"), cm("new", "3")], "3");
        let got = pop_all(&f).await;
        let by_key: HashMap<_, _> = got
            .iter()
            .map(|(k, d, _)| (k.as_str(), d.clone()))
            .collect();
        assert_eq!(by_key["ns/kept"], vec![(DeltaType::Replaced, "3".into())]);
        assert_eq!(by_key["ns/new"], vec![(DeltaType::Replaced, "3".into())]);
        assert_eq!(
            by_key["ns/pending"],
            vec![
                (DeltaType::Added, "2".into()),
                (DeltaType::Deleted, "2".into())
            ]
        );
        assert_eq!(by_key["ns/gone"], vec![(DeltaType::Deleted, "1".into())]);
    }

    #[tokio::test]
    async fn tombstone_carries_key_and_last_known() {
        let known = Indexer::new();
        known.add(cm("gone", "7")).unwrap();
        let f = DeltaFifo::new(Some(known));
        f.replace(vec![], "9");
        let d = f.pop(|p| p.deltas).await.unwrap();
        match &d[0] {
            Delta::Deleted(DeletedObject::Tombstone(t)) => {
                assert_eq!(t.key.as_str(), "ns/gone");
                assert_eq!(rv(&t.last_known), "7");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn resync_only_for_keys_without_pending_deltas() {
        let known = Indexer::new();
        known.add(cm("a", "1")).unwrap();
        known.add(cm("b", "1")).unwrap();
        let f = DeltaFifo::new(Some(known));
        f.update(cm("a", "2")).unwrap();
        f.resync();
        let got = pop_all(&f).await;
        let by_key: HashMap<_, _> = got
            .iter()
            .map(|(k, d, _)| (k.as_str(), d.clone()))
            .collect();
        assert_eq!(by_key["ns/a"], vec![(DeltaType::Updated, "2".into())]);
        assert_eq!(by_key["ns/b"], vec![(DeltaType::Sync, "1".into())]);
    }

    #[tokio::test]
    async fn has_synced_after_first_batch_popped() {
        let f = DeltaFifo::new(Some(Indexer::new()));
        assert!(!f.has_synced());
        f.replace(vec![cm("a", "1"), cm("b", "1")], "1");
        assert!(!f.has_synced());
        f.add(cm("c", "2")).unwrap(); // after the batch: not part of the initial list
        let first = f.pop(|p| p.is_in_initial_list).await.unwrap();
        assert!(first);
        assert!(!f.has_synced());
        let second = f.pop(|p| p.is_in_initial_list).await.unwrap();
        assert!(second);
        assert!(f.has_synced());
        let third = f.pop(|p| p.is_in_initial_list).await.unwrap();
        assert!(!third);
        // a second replace does not reset sync
        f.replace(vec![cm("a", "3")], "3");
        assert!(f.has_synced());
    }

    #[tokio::test]
    async fn empty_replace_syncs_immediately() {
        let f: DeltaFifo<ConfigMap> = DeltaFifo::new(Some(Indexer::new()));
        let mut rx = f.subscribe_synced();
        f.replace(vec![], "1");
        assert!(f.has_synced());
        assert!(*rx.borrow_and_update());
    }

    #[tokio::test(start_paused = true)]
    async fn pop_waits_and_close_ends_it() {
        let f = Arc::new(DeltaFifo::<ConfigMap>::new(None));
        let f2 = Arc::clone(&f);
        let waiter = tokio::spawn(async move { f2.pop(|p| p.key.to_string()).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        f.add(cm("a", "1")).unwrap();
        assert_eq!(waiter.await.unwrap().unwrap(), "ns/a");

        let f3 = Arc::clone(&f);
        let waiter = tokio::spawn(async move { f3.pop(|_| ()).await });
        tokio::time::sleep(Duration::from_millis(10)).await;
        f.close();
        assert_eq!(waiter.await.unwrap(), Err(FifoClosed));
    }

    #[tokio::test]
    async fn pop_ready_batches() {
        let f = DeltaFifo::new(None);
        for i in 0..5 {
            f.add(cm(&format!("o{i}"), "1")).unwrap();
        }
        let mut keys = vec![];
        assert_eq!(f.pop_ready(3, |p| keys.push(p.key.to_string())), 3);
        assert_eq!(keys, ["ns/o0", "ns/o1", "ns/o2"]);
        assert_eq!(f.pop_ready(10, |_| ()), 2);
    }

    #[test]
    fn a_drained_queue_gives_back_the_memory_of_a_burst() {
        let f = DeltaFifo::new(None);
        for i in 0..5000 {
            f.add(cm(&format!("o{i}"), "1")).unwrap();
        }
        assert!(f.state.lock().items.capacity() >= 5000);
        assert_eq!(f.pop_ready(4999, |_| ()), 4999);
        assert!(
            f.state.lock().items.capacity() >= 5000,
            "not shrunk while a key is still queued"
        );
        assert_eq!(
            f.pop_ready(10, |p| assert_eq!(p.key.to_string(), "ns/o4999")),
            1
        );
        let st = f.state.lock();
        assert!(
            st.items.capacity() <= SHRINK_ABOVE,
            "{}",
            st.items.capacity()
        );
        assert!(
            st.queue.capacity() <= SHRINK_ABOVE,
            "{}",
            st.queue.capacity()
        );
        drop(st);
        f.add(cm("again", "2")).unwrap();
        assert_eq!(
            f.pop_ready(10, |p| assert_eq!(p.key.to_string(), "ns/again")),
            1
        );
    }

    #[test]
    fn dedup_only_touches_two_trailing_deletes() {
        let obj = cm("a", "1");
        let tomb = || {
            Delta::Deleted(DeletedObject::Tombstone(DeletedFinalStateUnknown {
                key: "ns/a".into(),
                last_known: cm("a", "0"),
            }))
        };
        let mut d = vec![Delta::Added(Arc::clone(&obj)), tomb()];
        dedup_tail(&mut d);
        assert_eq!(d.len(), 2);
        let mut d = vec![tomb(), tomb()];
        dedup_tail(&mut d);
        assert_eq!(d.len(), 1);
    }
}
