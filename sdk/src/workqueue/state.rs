//! The queue's state machine: synchronous, behind the queue's one lock.
//!
//! Every item known to the queue has one [`Slot`] in a slab (a `Vec` with a
//! free list), found through a hash table of slab indices. Ready lanes and
//! timers hold slab indices, not items: handing out an item needs no hash
//! lookup, and nothing but the slab owns an item. A slot's flags are
//! client-go's sets:
//!
//! * `DIRTY`: the item needs processing (client-go's *dirty* set);
//! * `PROCESSING`: a worker holds it (client-go's *processing* set);
//! * `QUEUED`: it sits in a ready lane (client-go's *queue*); implies `DIRTY`
//!   and not `PROCESSING`;
//! * `PARKED`: dirty, but held back by the per-key minimum interval until a
//!   timer fires; implies `DIRTY` and not `PROCESSING`.
//!
//! A slot may also carry a pending `add_after` (`delay_at`), independent of
//! the flags: when it fires the item goes through the add rule, so it dedups
//! against a dirty item exactly like a plain add. A slot is freed as soon as
//! it has no flag and no pending delay.
//!
//! Lane elements and timers carry the id the slot had when they were made;
//! an element whose id no longer matches (the item moved lanes, its delay was
//! superseded, or the slot was reused) is stale and skipped.
//!
//! Time is passed in ([`LazyNow`]), so the state is deterministic and reads
//! the clock only when timers or metrics need it.

use std::hash::{BuildHasher, Hash};

use hashbrown::{DefaultHashBuilder, HashTable};
use tokio::time::{Duration, Instant};

use super::delay::TimerHeap;
use super::metrics::QueueMetrics;
use super::priority::{Priority, ReadyLanes};

const DIRTY: u8 = 1;
const PROCESSING: u8 = 2;
const QUEUED: u8 = 4;
const PARKED: u8 = 8;

/// The longest delay `add_after` honours; longer ones are clamped to it.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Reads the clock at most once per operation, and only if asked.
#[derive(Debug, Default)]
pub(crate) struct LazyNow(Option<Instant>);

impl LazyNow {
    pub(crate) fn new() -> Self {
        Self(None)
    }

    #[cfg(test)]
    pub(crate) fn at(now: Instant) -> Self {
        Self(Some(now))
    }

    pub(crate) fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

#[derive(Debug)]
struct Slot<T> {
    item: T,
    /// The item's 32-bit hash (see [`Slab::hash`]).
    hash: u32,
    flags: u8,
    /// Priority of the pending (dirty) instance.
    priority: Priority,
    /// Priority the pending `add_after` adds with.
    delay_priority: Priority,
    /// Id of the current lane element (if `QUEUED`) or park timer (if `PARKED`).
    id: u32,
    /// Id of the current delay timer (if `delay_at` is set).
    delay_id: u32,
    /// When the pending `add_after` fires (the earliest requested).
    delay_at: Stamp,
    /// When the item last became dirty (metrics only).
    added_at: Stamp,
    /// When the item was handed out (metrics only).
    started_at: Stamp,
}

impl<T> Slot<T> {
    fn new(item: T, hash: u32) -> Self {
        Self {
            item,
            hash,
            flags: 0,
            priority: Priority::Normal,
            delay_priority: Priority::Normal,
            id: 0,
            delay_id: 0,
            delay_at: Stamp::NONE,
            added_at: Stamp::NONE,
            started_at: Stamp::NONE,
        }
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn is_vacant(&self) -> bool {
        self.flags == 0 && self.delay_at.is_none()
    }
}

/// A compact `Option<Instant>`: nanoseconds since the state's epoch, plus
/// one (0 is "none"). Keeps a slot at 64 bytes; an instant before the epoch
/// (only possible when one queue is shared by runtimes with different test
/// clocks) reads as the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp(u64);

impl Stamp {
    const NONE: Stamp = Stamp(0);

    fn at(epoch: Instant, at: Instant) -> Self {
        let nanos = at.saturating_duration_since(epoch).as_nanos();
        Stamp(
            u64::try_from(nanos)
                .unwrap_or(u64::MAX - 1)
                .saturating_add(1),
        )
    }

    fn is_some(self) -> bool {
        self.0 != 0
    }

    fn is_none(self) -> bool {
        self.0 == 0
    }

    fn get_at(self, epoch: Instant) -> Option<Instant> {
        self.0
            .checked_sub(1)
            .map(|nanos| epoch + Duration::from_nanos(nanos))
    }

    fn take(&mut self, epoch: Instant) -> Option<Instant> {
        let at = self.get_at(epoch);
        *self = Stamp::NONE;
        at
    }
}

/// What an add did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// The item became ready: a getter may take it.
    Queued,
    /// The item is being processed; it will be queued again on `done`.
    MarkedDirty,
    /// The item was already waiting (possibly with a lower priority, now raised).
    Duplicate,
    /// The queue is shutting down (or holds 2^32 items).
    Ignored,
}

/// What the per-key check decided for a popped item.
pub(crate) enum KeyVerdict {
    /// Hand it out.
    Start,
    /// Hold it back until then.
    Park(Instant),
}

/// What popping the ready lanes produced.
pub(crate) enum Popped<T> {
    /// The item was handed out (now `PROCESSING`).
    Started(T, Priority),
    /// The item was parked by the per-key check.
    Parked,
}

/// The slab of slots and the hash index over it.
///
/// Cache behaviour decides the speed of a big queue, so:
/// * index entries carry a 32-bit hash and the slot's generation: growing the
///   index and skipping other items never touch the slab;
/// * freeing a slot bumps its generation instead of erasing its index entry
///   (a second cold probe per item); dead entries are reused by the next
///   insert that probes past them, and swept when the index would grow;
/// * `done` finds the item through a small cache of recently handed-out
///   slots, so finishing an item usually touches no cold memory.
struct Slab<T> {
    entries: Vec<SlabEntry<T>>,
    free: Vec<u32>,
    index: HashTable<IndexEntry>,
    /// Index entries whose slot was freed (their generation is stale).
    dead: usize,
    /// Slots in use.
    in_use: usize,
    /// Recently handed-out slots, by hash (direct-mapped).
    handed: [IndexEntry; HANDED],
    hasher: ItemHasher,
}

/// Hashes items for the index. Cloned into the queue handle so that callers
/// hash outside the lock (the hash is the part of an add that reads the item).
#[derive(Clone, Default)]
pub(crate) struct ItemHasher(DefaultHashBuilder);

impl ItemHasher {
    /// The 32-bit hash the index uses.
    pub(crate) fn hash<T: Hash>(&self, item: &T) -> u32 {
        let h = self.0.hash_one(item);
        // Fold the high half in: the index only sees the 32 bits we keep.
        (h ^ (h >> 32)) as u32
    }
}

/// Size of the hand-out cache (a power of two, well above any worker count).
const HANDED: usize = 64;

/// Slots kept allocated when the queue empties (more are given back).
const SHRINK_ABOVE: usize = 4096;

struct SlabEntry<T> {
    generation: u32,
    slot: Option<Slot<T>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexEntry {
    idx: u32,
    hash: u32,
    generation: u32,
}

impl IndexEntry {
    const NONE: IndexEntry = IndexEntry {
        idx: u32::MAX,
        hash: 0,
        generation: 0,
    };
}

/// Puts a new slot for `item` into the slab; returns its index and generation.
fn allocate<T>(
    entries: &mut Vec<SlabEntry<T>>,
    free: &mut Vec<u32>,
    item: T,
    hash: u32,
) -> Option<(u32, u32)> {
    let idx = match free.pop() {
        Some(idx) => idx,
        None => {
            let idx = u32::try_from(entries.len())
                .ok()
                .filter(|&i| i != u32::MAX)?;
            entries.push(SlabEntry {
                generation: 0,
                slot: None,
            });
            idx
        }
    };
    let entry = entries.get_mut(idx as usize)?;
    entry.slot = Some(Slot::new(item, hash));
    Some((idx, entry.generation))
}

/// The 64-bit hash the index is keyed by, rebuilt from the stored 32 bits
/// (hashbrown takes positions from the low bits and tags from the top ones).
fn wide(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

/// The slot an index entry points to, if the entry is not dead.
fn live<'a, T>(entries: &'a [SlabEntry<T>], e: &IndexEntry) -> Option<&'a Slot<T>> {
    let entry = entries.get(e.idx as usize)?;
    if entry.generation == e.generation {
        entry.slot.as_ref()
    } else {
        None
    }
}

impl<T: Eq + Hash> Slab<T> {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            dead: 0,
            in_use: 0,
            handed: [IndexEntry::NONE; HANDED],
            hasher: ItemHasher::default(),
        }
    }

    #[cfg(test)]
    fn hash(&self, item: &T) -> u32 {
        self.hasher.hash(item)
    }

    fn get_mut(&mut self, idx: u32) -> Option<&mut Slot<T>> {
        self.entries.get_mut(idx as usize)?.slot.as_mut()
    }

    /// The slot of `item`, creating a blank one if needed. `None` only when
    /// 2^32 items are already known.
    fn slot_for(&mut self, item: T, hash: u32) -> Option<(u32, &mut Slot<T>)> {
        // One pass over the probe sequence finds the live entry, or else the
        // first dead entry with this hash (often this item's own old one).
        let Self { entries, index, .. } = self;
        let mut dead = None;
        let mut found = None;
        for e in index.iter_hash_mut(wide(hash)) {
            if e.hash != hash {
                continue;
            }
            match live(entries, e) {
                Some(slot) if slot.item == item => {
                    found = Some(e.idx);
                    break;
                }
                Some(_) => {}
                None if dead.is_none() => dead = Some(e),
                None => {}
            }
        }
        let idx = match (found, dead) {
            (Some(idx), _) => idx,
            (None, Some(dead)) => {
                let (idx, generation) = allocate(entries, &mut self.free, item, hash)?;
                *dead = IndexEntry {
                    idx,
                    hash,
                    generation,
                };
                self.dead = self.dead.saturating_sub(1);
                self.in_use += 1;
                idx
            }
            (None, None) => {
                let (idx, generation) = allocate(&mut self.entries, &mut self.free, item, hash)?;
                self.in_use += 1;
                // Sweep dead entries rather than grow once a quarter of the
                // index is dead: the index stays proportional to the live
                // items (cache-resident), and each sweep is paid for by the
                // frees that made its dead entries (amortised O(1)).
                if self.index.len() >= self.index.capacity() && self.dead > self.index.len() / 4 {
                    self.sweep();
                }
                self.index.insert_unique(
                    wide(hash),
                    IndexEntry {
                        idx,
                        hash,
                        generation,
                    },
                    |e| wide(e.hash),
                );
                idx
            }
        };
        let slot = self.get_mut(idx)?;
        Some((idx, slot))
    }

    /// Drops every dead index entry.
    fn sweep(&mut self) {
        let entries = &self.entries;
        self.index.retain(|e| live(entries, e).is_some());
        self.dead = 0;
    }

    /// Remembers that slot `idx` (with `hash`) was handed out, for `done`.
    fn handed_out(&mut self, idx: u32, hash: u32) {
        let generation = self.entries.get(idx as usize).map_or(0, |e| e.generation);
        if let Some(place) = self.handed.get_mut(hash as usize % HANDED) {
            *place = IndexEntry {
                idx,
                hash,
                generation,
            };
        }
    }

    /// The slot index of `item` (hashing to `hash`), if it has a slot.
    fn find(&self, item: &T, hash: u32) -> Option<u32> {
        let entries = &self.entries;
        let matches =
            |e: &IndexEntry| e.hash == hash && live(entries, e).is_some_and(|s| s.item == *item);
        if let Some(cached) = self.handed.get(hash as usize % HANDED)
            && matches(cached)
        {
            return Some(cached.idx);
        }
        self.index.find(wide(hash), |e| matches(e)).map(|e| e.idx)
    }

    /// Frees slot `idx` if it holds nothing any more. Its index entry stays,
    /// dead, until reused or swept.
    fn release_if_vacant(&mut self, idx: u32) {
        let Some(entry) = self.entries.get_mut(idx as usize) else {
            return;
        };
        if !entry.slot.as_ref().is_some_and(Slot::is_vacant) {
            return;
        }
        entry.slot = None;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(idx);
        self.dead += 1;
        self.in_use -= 1;
    }

    /// Whether no slot is in use.
    fn is_empty(&self) -> bool {
        self.in_use == 0
    }

    /// Gives the memory of a burst back once the queue is empty again.
    fn shrink_if_large(&mut self) {
        if self.in_use == 0 && self.entries.len() > SHRINK_ABOVE {
            *self = Self {
                hasher: self.hasher.clone(),
                ..Self::new()
            };
        }
    }

    fn occupied(&self) -> impl Iterator<Item = (u32, &Slot<T>)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| Some((u32::try_from(i).ok()?, e.slot.as_ref()?)))
    }

    fn is_live_timer(&self, idx: u32, id: u32) -> bool {
        self.entries
            .get(idx as usize)
            .and_then(|e| e.slot.as_ref())
            .is_some_and(|s| {
                (s.delay_at.is_some() && s.delay_id == id) || (s.has(PARKED) && s.id == id)
            })
    }

    fn is_live_element(&self, idx: u32, id: u32) -> bool {
        self.entries
            .get(idx as usize)
            .and_then(|e| e.slot.as_ref())
            .is_some_and(|s| s.has(QUEUED) && s.id == id)
    }
}

/// Ids for lane elements and timers (wrapping; a collision after 2^32 ids
/// could at worst reorder one item, never break dedup or exclusivity).
#[derive(Debug, Default)]
struct Ids(u32);

impl Ids {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_add(1);
        self.0
    }
}

/// All mutable state of one queue.
pub(crate) struct State<T> {
    slab: Slab<T>,
    ready: ReadyLanes,
    timers: TimerHeap<u32>,
    ids: Ids,
    /// Valid elements in the ready lanes.
    queued: usize,
    parked: usize,
    processing: usize,
    /// Live timers (pending delays plus parks); the heap may hold stale extras.
    live_timers: usize,
    /// Items that became ready since the queue layer last looked.
    pub(crate) newly_ready: usize,
    pub(crate) shutting_down: bool,

    // Coordination of waiting getters (maintained by the queue layer).
    /// Getters waiting for an item.
    pub(crate) idle: usize,
    /// Wake-ups sent to idle getters that have not yet run.
    pub(crate) wakes_in_flight: usize,
    /// Whether one idle getter sleeps until the next timer / throttle deadline.
    pub(crate) duty_held: bool,
    /// The deadline that getter sleeps until.
    pub(crate) duty_deadline: Option<Instant>,
    /// The global throttle refused the last attempt.
    pub(crate) throttled: bool,
    /// When the global throttle allows the next hand-out (valid if `throttled`).
    pub(crate) throttle_at: Option<Instant>,
    /// A spare buffer for draining the queue's inbox (keeps its capacity).
    pub(crate) batch: Vec<(T, u32, Priority)>,
    /// Origin of the slots' compact timestamps.
    epoch: Instant,
}

impl<T: Eq + Hash + Clone> State<T> {
    pub(crate) fn new() -> Self {
        Self {
            slab: Slab::new(),
            ready: ReadyLanes::new(),
            timers: TimerHeap::new(),
            ids: Ids::default(),
            queued: 0,
            parked: 0,
            processing: 0,
            live_timers: 0,
            newly_ready: 0,
            shutting_down: false,
            idle: 0,
            wakes_in_flight: 0,
            duty_held: false,
            duty_deadline: None,
            throttled: false,
            throttle_at: None,
            batch: Vec::new(),
            epoch: Instant::now(),
        }
    }

    /// Items waiting to be handed out (ready or parked; delayed ones excluded).
    pub(crate) fn len(&self) -> usize {
        self.queued + self.parked
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    pub(crate) fn processing(&self) -> usize {
        self.processing
    }

    /// Whether the queue knows no item at all (none waiting, processing or delayed).
    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.slab.is_empty()
    }

    /// Nothing handed out and nothing left to hand out.
    pub(crate) fn is_drained(&self) -> bool {
        self.processing == 0 && self.queued == 0 && self.parked == 0
    }

    pub(crate) fn has_timers(&self) -> bool {
        !self.timers.is_empty()
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// The hasher of this state's index.
    pub(crate) fn hasher(&self) -> ItemHasher {
        self.slab.hasher.clone()
    }

    /// Marks `item` as needing processing.
    #[cfg(test)]
    pub(crate) fn add(
        &mut self,
        item: T,
        priority: Priority,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> Added {
        let hash = self.slab.hash(&item);
        self.add_hashed(item, hash, priority, now, metrics)
    }

    /// Marks `item` (whose [`ItemHasher`] hash is `hash`) as needing processing.
    pub(crate) fn add_hashed(
        &mut self,
        item: T,
        hash: u32,
        priority: Priority,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> Added {
        if self.shutting_down {
            return Added::Ignored;
        }
        self.promote(now, metrics);
        let Some((idx, slot)) = self.slab.slot_for(item, hash) else {
            tracing::error!("workqueue holds 2^32 items; add dropped");
            return Added::Ignored;
        };
        let outcome = mark_dirty(
            slot,
            idx,
            priority,
            self.epoch,
            &mut self.ids,
            &mut self.ready,
            now,
            metrics,
        );
        self.count(outcome);
        outcome
    }

    fn count(&mut self, outcome: Added) {
        if outcome == Added::Queued {
            self.queued += 1;
            self.newly_ready += 1;
        }
    }

    /// Schedules `item` to be added at `now + delay` (earliest request wins).
    /// Returns `true` if this became the earliest timer.
    #[cfg(test)]
    pub(crate) fn add_after(
        &mut self,
        item: T,
        delay: Duration,
        priority: Priority,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> bool {
        let hash = self.slab.hash(&item);
        self.add_after_hashed(item, hash, delay, priority, now, metrics)
    }

    /// Schedules `item` (hashing to `hash`) to be added at `now + delay`
    /// (earliest request wins). Returns `true` if this became the earliest timer.
    pub(crate) fn add_after_hashed(
        &mut self,
        item: T,
        hash: u32,
        delay: Duration,
        priority: Priority,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> bool {
        if self.shutting_down {
            return false;
        }
        if delay.is_zero() {
            self.add_hashed(item, hash, priority, now, metrics);
            return false;
        }
        let at = now.get() + delay.min(MAX_DELAY);
        self.promote(now, metrics);
        let epoch = self.epoch;
        let Some((idx, slot)) = self.slab.slot_for(item, hash) else {
            tracing::error!("workqueue holds 2^32 items; add_after dropped");
            return false;
        };
        let at_stamp = Stamp::at(epoch, at);
        if slot.delay_at.is_some() {
            slot.delay_priority = slot.delay_priority.max(priority);
            if at_stamp >= slot.delay_at {
                return false;
            }
            // Earlier time wins; the old timer becomes stale.
        } else {
            slot.delay_priority = priority;
            self.live_timers += 1;
        }
        let id = self.ids.next();
        slot.delay_at = at_stamp;
        slot.delay_id = id;
        let earliest = self.timers.next_deadline().is_none_or(|next| at < next);
        self.timers.push(at, id, idx);
        self.compact_timers();
        earliest
    }

    /// Moves every due timer forward: a due delay goes through the add rule,
    /// a due park returns the item to its lane.
    #[inline]
    pub(crate) fn promote(&mut self, now: &mut LazyNow, metrics: Option<&QueueMetrics>) {
        if !self.timers.is_empty() {
            self.promote_due(now, metrics);
        }
    }

    fn promote_due(&mut self, now: &mut LazyNow, metrics: Option<&QueueMetrics>) {
        let now_at = now.get();
        while let Some(timer) = self.timers.pop_due(now_at) {
            let idx = timer.item;
            let Some(slot) = self.slab.get_mut(idx) else {
                continue;
            };
            if slot.delay_at.is_some() && slot.delay_id == timer.id {
                slot.delay_at = Stamp::NONE;
                self.live_timers -= 1;
                let priority = slot.delay_priority;
                let outcome = mark_dirty(
                    slot,
                    idx,
                    priority,
                    self.epoch,
                    &mut self.ids,
                    &mut self.ready,
                    now,
                    metrics,
                );
                self.count(outcome);
            } else if slot.has(PARKED) && slot.id == timer.id {
                let id = self.ids.next();
                slot.flags = (slot.flags & !PARKED) | QUEUED;
                slot.id = id;
                self.ready.push(slot.priority, idx, id);
                self.live_timers -= 1;
                self.parked -= 1;
                self.queued += 1;
                self.newly_ready += 1;
            }
        }
    }

    /// Drops stale timers once they outnumber live ones (bounded memory when
    /// earlier `add_after`s keep superseding later ones).
    fn compact_timers(&mut self) {
        if self.timers.len() <= 2 * self.live_timers + 1024 {
            return;
        }
        let slab = &self.slab;
        self.timers.retain(|t| slab.is_live_timer(t.item, t.id));
    }

    /// Drops stale lane elements once they outnumber live ones.
    fn compact_lanes(&mut self) {
        if self.ready.raw_len() <= 2 * self.queued + 1024 {
            return;
        }
        let slab = &self.slab;
        self.ready.retain(|idx, id| slab.is_live_element(idx, id));
    }

    /// Pops the next ready item (highest priority, oldest first). `check`
    /// decides whether it is handed out or parked by the per-key interval.
    pub(crate) fn pop(
        &mut self,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
        check: impl FnOnce(&T) -> KeyVerdict,
    ) -> Option<Popped<T>> {
        if self.queued == 0 {
            return None;
        }
        loop {
            let (idx, id, priority) = self.ready.pop()?;
            let Some(slot) = self.slab.get_mut(idx) else {
                continue;
            };
            if !slot.has(QUEUED) || slot.id != id {
                continue; // stale element left behind by a priority upgrade
            }
            self.queued -= 1;
            match check(&slot.item) {
                KeyVerdict::Start => {
                    slot.flags = (slot.flags & !(DIRTY | QUEUED)) | PROCESSING;
                    if let Some(m) = metrics {
                        let at = now.get();
                        m.handed_out(slot.added_at.take(self.epoch), at);
                        slot.started_at = Stamp::at(self.epoch, at);
                    }
                    self.processing += 1;
                    let (item, hash) = (slot.item.clone(), slot.hash);
                    self.slab.handed_out(idx, hash);
                    return Some(Popped::Started(item, priority));
                }
                KeyVerdict::Park(at) => {
                    let park_id = self.ids.next();
                    slot.flags = (slot.flags & !QUEUED) | PARKED;
                    slot.id = park_id;
                    self.timers.push(at, park_id, idx);
                    self.parked += 1;
                    self.live_timers += 1;
                    self.compact_timers();
                    return Some(Popped::Parked);
                }
            }
        }
    }

    /// A worker finished `item`. Returns `true` if it was dirty and went back
    /// to its lane, `None` if it was not being processed.
    #[cfg(test)]
    pub(crate) fn done(
        &mut self,
        item: &T,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> Option<bool> {
        let hash = self.slab.hash(item);
        self.done_hashed(item, hash, now, metrics)
    }

    /// A worker finished `item` (hashing to `hash`). Returns `true` if it was
    /// dirty and went back to its lane, `None` if it was not being processed.
    pub(crate) fn done_hashed(
        &mut self,
        item: &T,
        hash: u32,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> Option<bool> {
        self.promote(now, metrics);
        let idx = self.slab.find(item, hash)?;
        let slot = self.slab.get_mut(idx)?;
        if !slot.has(PROCESSING) {
            return None;
        }
        slot.flags &= !PROCESSING;
        self.processing -= 1;
        if let Some(m) = metrics {
            m.finished(slot.started_at.take(self.epoch), now.get());
        }
        if slot.has(DIRTY) {
            let id = self.ids.next();
            slot.flags |= QUEUED;
            slot.id = id;
            self.ready.push(slot.priority, idx, id);
            self.queued += 1;
            self.newly_ready += 1;
            self.compact_lanes();
            Some(true)
        } else {
            self.slab.release_if_vacant(idx);
            if self.slab.is_empty() {
                self.reset_if_large();
            }
            Some(false)
        }
    }

    /// After a burst, once nothing is left: frees the slab, and drops the
    /// lane elements and timers (all stale by then).
    fn reset_if_large(&mut self) {
        if self.slab.entries.len() > SHRINK_ABOVE {
            self.slab.shrink_if_large();
            self.ready = ReadyLanes::new();
            self.timers = TimerHeap::new();
        }
    }

    /// Stops accepting adds and discards pending `add_after`s. Items already
    /// waiting (ready or parked) stay, so getters can drain them.
    pub(crate) fn shut_down(&mut self) {
        self.shutting_down = true;
        let delayed: Vec<u32> = self
            .slab
            .occupied()
            .filter(|(_, s)| s.delay_at.is_some())
            .map(|(i, _)| i)
            .collect();
        for idx in delayed {
            if let Some(slot) = self.slab.get_mut(idx) {
                slot.delay_at = Stamp::NONE;
            }
            self.slab.release_if_vacant(idx);
        }
        let slab = &self.slab;
        self.timers.retain(|t| slab.is_live_timer(t.item, t.id));
        self.live_timers = self.parked;
    }

    /// Calls `f` with the start time of every item being processed.
    pub(crate) fn for_each_started(&self, mut f: impl FnMut(Instant)) {
        if self.processing == 0 {
            return;
        }
        for (_, slot) in self.slab.occupied() {
            if let Some(at) = slot
                .started_at
                .get_at(self.epoch)
                .filter(|_| slot.has(PROCESSING))
            {
                f(at);
            }
        }
    }

    /// Checks the internal invariants (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let (mut queued, mut parked, mut processing, mut delays, mut slots) = (0, 0, 0, 0, 0);
        for (idx, slot) in self.slab.occupied() {
            slots += 1;
            assert!(!slot.is_vacant(), "vacant slot kept");
            let hash = self.slab.hash(&slot.item);
            assert_eq!(
                self.slab.find(&slot.item, hash),
                Some(idx),
                "index out of sync"
            );
            if slot.has(QUEUED) {
                assert!(slot.has(DIRTY) && !slot.has(PROCESSING) && !slot.has(PARKED));
                queued += 1;
            }
            if slot.has(PARKED) {
                assert!(slot.has(DIRTY) && !slot.has(PROCESSING) && !slot.has(QUEUED));
                parked += 1;
            }
            if slot.has(PROCESSING) {
                processing += 1;
            }
            if slot.has(DIRTY) {
                assert!(slot.has(PROCESSING) || slot.has(QUEUED) || slot.has(PARKED));
            }
            if slot.delay_at.is_some() {
                delays += 1;
            }
        }
        let entries = &self.slab.entries;
        let live_entries = self
            .slab
            .index
            .iter()
            .filter(|e| live(entries, e).is_some())
            .count();
        assert_eq!(slots, live_entries, "index size");
        assert_eq!(
            self.slab.index.len(),
            live_entries + self.slab.dead,
            "dead count"
        );
        assert_eq!(
            slots + self.slab.free.len(),
            self.slab.entries.len(),
            "free list"
        );
        assert_eq!(queued, self.queued, "queued count");
        assert_eq!(parked, self.parked, "parked count");
        assert_eq!(processing, self.processing, "processing count");
        assert_eq!(delays + parked, self.live_timers, "live timer count");
        assert!(self.timers.len() >= self.live_timers);
        assert!(self.ready.raw_len() >= self.queued);
    }
}

/// The add rule, for the slot `idx` of the item being added.
#[allow(clippy::too_many_arguments)]
fn mark_dirty<T>(
    slot: &mut Slot<T>,
    idx: u32,
    priority: Priority,
    epoch: Instant,
    ids: &mut Ids,
    ready: &mut ReadyLanes,
    now: &mut LazyNow,
    metrics: Option<&QueueMetrics>,
) -> Added {
    if slot.has(DIRTY) {
        // Already waiting (or dirty while processing): dedup, keeping the
        // higher priority. A queued item moves to its new lane; the old
        // element becomes stale.
        if priority > slot.priority {
            slot.priority = priority;
            if slot.has(QUEUED) {
                slot.id = ids.next();
                ready.push(priority, idx, slot.id);
            }
        }
        return Added::Duplicate;
    }
    slot.flags |= DIRTY;
    slot.priority = priority;
    if let Some(m) = metrics {
        m.added();
        slot.added_at = Stamp::at(epoch, now.get());
    }
    if slot.has(PROCESSING) {
        return Added::MarkedDirty;
    }
    slot.flags |= QUEUED;
    slot.id = ids.next();
    ready.push(priority, idx, slot.id);
    Added::Queued
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn state() -> State<&'static str> {
        State::new()
    }

    fn add(s: &mut State<&'static str>, item: &'static str, now: Instant) -> Added {
        s.add(item, Priority::Normal, &mut LazyNow::at(now), None)
    }

    fn pop(s: &mut State<&'static str>, now: Instant) -> Option<&'static str> {
        match s.pop(&mut LazyNow::at(now), None, |_| KeyVerdict::Start)? {
            Popped::Started(item, _) => Some(item),
            Popped::Parked => None,
        }
    }

    fn done(s: &mut State<&'static str>, item: &'static str, now: Instant) -> Option<bool> {
        s.done(&item, &mut LazyNow::at(now), None)
    }

    #[test]
    fn dedup_dirty_processing() {
        let t = Instant::now();
        let mut s = state();
        assert_eq!(add(&mut s, "a", t), Added::Queued);
        assert_eq!(add(&mut s, "a", t), Added::Duplicate);
        assert_eq!(s.len(), 1);
        assert_eq!(pop(&mut s, t), Some("a"));
        assert_eq!(s.len(), 0);
        assert_eq!(add(&mut s, "a", t), Added::MarkedDirty);
        assert_eq!(add(&mut s, "a", t), Added::Duplicate);
        assert_eq!(s.len(), 0, "dirty while processing is not handed out");
        assert_eq!(pop(&mut s, t), None);
        s.check_invariants();
        assert_eq!(done(&mut s, "a", t), Some(true));
        assert_eq!(s.len(), 1);
        assert_eq!(pop(&mut s, t), Some("a"));
        assert_eq!(done(&mut s, "a", t), Some(false));
        assert_eq!(done(&mut s, "a", t), None, "done twice is a no-op");
        assert!(s.is_idle());
        s.check_invariants();
    }

    #[test]
    fn fifo_and_priorities() {
        let t = Instant::now();
        let mut s = state();
        let mut now = LazyNow::at(t);
        s.add("l1", Priority::Low, &mut now, None);
        s.add("n1", Priority::Normal, &mut now, None);
        s.add("l2", Priority::Low, &mut now, None);
        s.add("n2", Priority::Normal, &mut now, None);
        // an upgrade moves l2 to the normal lane, a downgrade is ignored
        s.add("l2", Priority::Normal, &mut now, None);
        s.add("n1", Priority::Low, &mut now, None);
        s.check_invariants();
        let order: Vec<_> = std::iter::from_fn(|| pop(&mut s, t)).collect();
        assert_eq!(order, ["n1", "n2", "l2", "l1"]);
        assert_eq!(s.len(), 0);
        s.check_invariants();
    }

    #[test]
    fn add_after_earliest_wins_and_dedups() {
        let t = Instant::now();
        let mut s = state();
        let mut now = LazyNow::at(t);
        assert!(s.add_after("a", 50 * MS, Priority::Normal, &mut now, None));
        assert!(s.add_after("a", 10 * MS, Priority::Normal, &mut now, None));
        assert!(!s.add_after("a", 30 * MS, Priority::Normal, &mut now, None));
        assert_eq!(s.len(), 0);
        assert_eq!(s.next_deadline(), Some(t + 10 * MS));
        assert_eq!(pop(&mut s, t + 9 * MS), None);
        s.promote(&mut LazyNow::at(t + 10 * MS), None);
        assert_eq!(s.len(), 1);
        assert_eq!(pop(&mut s, t + 10 * MS), Some("a"));
        done(&mut s, "a", t + 11 * MS);
        // the superseded timers are stale: nothing fires again
        s.promote(&mut LazyNow::at(t + 100 * MS), None);
        assert_eq!(s.len(), 0);
        assert!(s.is_idle());
        s.check_invariants();
    }

    #[test]
    fn delayed_item_dedups_against_a_dirty_one() {
        let t = Instant::now();
        let mut s = state();
        let mut now = LazyNow::at(t);
        s.add_after("a", 10 * MS, Priority::Normal, &mut now, None);
        add(&mut s, "a", t);
        assert_eq!(s.len(), 1);
        s.promote(&mut LazyNow::at(t + 10 * MS), None);
        assert_eq!(s.len(), 1, "the delayed add merged with the waiting one");
        assert_eq!(pop(&mut s, t + 10 * MS), Some("a"));
        assert_eq!(pop(&mut s, t + 10 * MS), None);
        s.check_invariants();
    }

    #[test]
    fn delayed_item_fires_while_processing_requeues_after_done() {
        let t = Instant::now();
        let mut s = state();
        add(&mut s, "a", t);
        assert_eq!(pop(&mut s, t), Some("a"));
        s.add_after("a", 5 * MS, Priority::Normal, &mut LazyNow::at(t), None);
        s.promote(&mut LazyNow::at(t + 5 * MS), None);
        assert_eq!(s.len(), 0);
        assert_eq!(done(&mut s, "a", t + 6 * MS), Some(true));
        assert_eq!(pop(&mut s, t + 6 * MS), Some("a"));
        s.check_invariants();
    }

    #[test]
    fn zero_delay_is_a_plain_add() {
        let t = Instant::now();
        let mut s = state();
        assert!(!s.add_after(
            "a",
            Duration::ZERO,
            Priority::Normal,
            &mut LazyNow::at(t),
            None
        ));
        assert_eq!(s.len(), 1);
        assert!(!s.has_timers());
    }

    #[test]
    fn huge_delay_is_clamped() {
        let t = Instant::now();
        let mut s = state();
        s.add_after(
            "a",
            Duration::MAX,
            Priority::Normal,
            &mut LazyNow::at(t),
            None,
        );
        assert_eq!(s.next_deadline(), Some(t + MAX_DELAY));
    }

    #[test]
    fn park_and_unpark() {
        let t = Instant::now();
        let mut s = state();
        add(&mut s, "a", t);
        add(&mut s, "b", t);
        let popped = s.pop(&mut LazyNow::at(t), None, |_| KeyVerdict::Park(t + 7 * MS));
        assert!(matches!(popped, Some(Popped::Parked)));
        assert_eq!(s.len(), 2, "a parked item still counts as waiting");
        assert_eq!(add(&mut s, "a", t), Added::Duplicate, "parked items dedup");
        s.check_invariants();
        assert_eq!(pop(&mut s, t), Some("b"));
        assert_eq!(pop(&mut s, t), None);
        s.promote(&mut LazyNow::at(t + 7 * MS), None);
        assert_eq!(pop(&mut s, t + 7 * MS), Some("a"));
        s.check_invariants();
    }

    #[test]
    fn shutdown_discards_delays_keeps_waiting_items() {
        let t = Instant::now();
        let mut s = state();
        let mut now = LazyNow::at(t);
        add(&mut s, "a", t);
        s.add_after("b", 10 * MS, Priority::Normal, &mut now, None);
        s.add_after("a", 10 * MS, Priority::Normal, &mut now, None);
        s.shut_down();
        s.check_invariants();
        assert!(!s.has_timers());
        assert_eq!(add(&mut s, "c", t), Added::Ignored);
        assert_eq!(pop(&mut s, t), Some("a"));
        done(&mut s, "a", t);
        assert!(s.is_idle());
    }

    #[test]
    fn stale_timers_are_compacted() {
        let t = Instant::now();
        let mut s = state();
        let mut now = LazyNow::at(t);
        for i in 0..10_000u32 {
            s.add_after(
                "a",
                Duration::from_secs(100_000 - u64::from(i)),
                Priority::Normal,
                &mut now,
                None,
            );
        }
        assert!(s.timers.len() < 2_100, "heap grew to {}", s.timers.len());
        s.check_invariants();
    }

    #[test]
    fn memory_of_a_burst_is_given_back() {
        let t = Instant::now();
        let mut s: State<u32> = State::new();
        let mut now = LazyNow::at(t);
        for i in 0..10_000 {
            s.add(i, Priority::Normal, &mut now, None);
        }
        s.add_after(5, Duration::from_secs(1), Priority::Normal, &mut now, None);
        while let Some(Popped::Started(item, _)) = s.pop(&mut now, None, |_| KeyVerdict::Start) {
            s.done(&item, &mut now, None);
        }
        assert!(
            s.slab.entries.len() >= 10_000,
            "a delayed item keeps the slab"
        );
        s.promote(&mut LazyNow::at(t + Duration::from_secs(1)), None);
        let Some(Popped::Started(5, _)) = s.pop(&mut now, None, |_| KeyVerdict::Start) else {
            panic!("delayed item lost");
        };
        s.done(&5, &mut now, None);
        assert!(s.is_idle());
        assert!(s.slab.entries.is_empty(), "slab not given back");
        s.check_invariants();
        // and the queue works as before
        s.add(1, Priority::Normal, &mut now, None);
        assert!(matches!(
            s.pop(&mut now, None, |_| KeyVerdict::Start),
            Some(Popped::Started(1, _))
        ));
        s.check_invariants();
    }

    #[test]
    fn stale_lane_elements_are_compacted() {
        let t = Instant::now();
        let mut s: State<u32> = State::new();
        let mut now = LazyNow::at(t);
        for round in 0..3 {
            for i in 0..1000 {
                s.add(i, Priority::Low, &mut now, None);
                s.add(i, Priority::Normal, &mut now, None);
                s.add(i, Priority::High, &mut now, None);
            }
            for _ in 0..1000 {
                let Some(Popped::Started(item, p)) = s.pop(&mut now, None, |_| KeyVerdict::Start)
                else {
                    panic!("round {round}: missing item");
                };
                assert_eq!(p, Priority::High);
                s.done(&item, &mut now, None);
            }
            assert!(s.pop(&mut now, None, |_| KeyVerdict::Start).is_none());
            s.check_invariants();
        }
    }
}
