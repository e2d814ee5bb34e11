//! The queue's state machine: synchronous, behind the queue's one lock.
//!
//! Why one long file (about 840 lines of code, then its unit tests): the
//! entry slab, the index, the slot numbers in the ready lanes and the timer
//! ids are one invariant that every operation updates together under the
//! lock, and it reads best in one place. The lanes and the timer heap
//! themselves live in `priority.rs` and `delay.rs`.
//!
//! Every item the queue knows has one [`Entry`] in `slots`, a `Vec` whose
//! freed places are reused through a free list; `index`, a hash table of
//! `(hash, slot)` pairs, finds an item's slot. An entry's [`Phase`] is where
//! the item is in client-go's sets:
//!
//! | phase | client-go | |
//! |---|---|---|
//! | `Queued` | *dirty*, in the *queue* | waits in its priority's ready lane |
//! | `Parked` | *dirty* | held back by the per-key minimum interval until a timer fires |
//! | `Processing` | *processing* | a worker holds it |
//! | `ProcessingDirty` | *processing* and *dirty* | queued again on `done` |
//! | `Idle` | none | kept only for a pending `add_after` |
//!
//! An entry may also carry a pending `add_after` (`delay_at`), independent of
//! the phase: when it fires the item goes through the add rule, so it dedups
//! against a dirty item exactly like a plain add. An entry is removed as soon
//! as it is `Idle` with no pending delay.
//!
//! The ready lanes ([`ReadyLanes`]) and the timer heap ([`TimerHeap`]) hold
//! slot numbers. An element also carries an id, taken from one counter,
//! that the entry records when the element is made. An element whose entry
//! no longer records its id (the item moved to a higher lane, was handed
//! out, its delay was superseded, or its slot was freed or reused) is stale:
//! it is skipped when it surfaces (lazy deletion, so every operation is
//! O(1)), and dropped in bulk once stale elements outnumber live ones.
//!
//! Three choices keep a big queue (1M waiting items) fast. Leaving them out
//! was measured with 1M distinct items (BENCHMARKS.md, "Workqueue"): without
//! all three they took 2.2–2.9× as long to go through, without the last two
//! 1.7×, without the last one twice the CPU time.
//! * entries sit in a slab rather than in the hash table itself, so a FIFO
//!   burst reads them in the order they were written, and handing out an
//!   item needs no hash lookup;
//! * freeing a slot leaves its index entry behind, dead, for the next insert
//!   of that hash to reuse or a sweep to drop: the index is cold memory, and
//!   a removal would be a second lookup per item;
//! * `done` finds the item through a small cache of the slots handed out
//!   last, so finishing an item usually touches no cold memory.
//!
//! Time is passed in ([`LazyNow`]), so the state is deterministic and reads
//! the clock only when timers or metrics need it.

use std::hash::{BuildHasher, Hash};

use hashbrown::DefaultHashBuilder;
use hashbrown::HashTable;
use tokio::time::{Duration, Instant};

use super::delay::TimerHeap;
use super::metrics::QueueMetrics;
use super::priority::{Priority, ReadyLanes};

/// The longest delay `add_after` honours; longer ones are clamped to it.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);

/// Slots kept when the queue empties (the memory of a larger burst is given back).
const SHRINK_ABOVE: usize = 4096;

/// Reads the clock at most once per operation, and only if asked.
#[derive(Debug, Default)]
pub(crate) struct LazyNow(Option<Instant>);

impl LazyNow {
    /// A clock not read yet.
    pub(crate) fn new() -> Self {
        Self(None)
    }

    /// A clock that reads `now` (tests).
    #[cfg(test)]
    pub(crate) fn at(now: Instant) -> Self {
        Self(Some(now))
    }

    /// The current instant, read once.
    pub(crate) fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
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

/// The 64-bit hash the index is keyed by, rebuilt from the stored 32 bits
/// (hashbrown takes positions from the low bits and tags from the top ones).
fn wide(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

/// Where an item is in the queue (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not dirty, not processing: kept only for a pending `add_after`.
    Idle,
    /// Dirty, waiting in a ready lane.
    Queued,
    /// Dirty, held back by the per-key interval until its park timer fires.
    Parked,
    /// Handed out to a worker.
    Processing,
    /// Handed out, and added again meanwhile: queued again on `done`.
    ProcessingDirty,
}

impl Phase {
    /// Whether the item needs processing (client-go's *dirty* set).
    fn is_dirty(self) -> bool {
        matches!(self, Phase::Queued | Phase::Parked | Phase::ProcessingDirty)
    }

    /// Whether a worker holds the item (client-go's *processing* set).
    fn is_processing(self) -> bool {
        matches!(self, Phase::Processing | Phase::ProcessingDirty)
    }
}

/// What the queue knows about one item.
#[derive(Debug)]
struct Entry<T> {
    item: T,
    /// The item's [`ItemHasher`] hash.
    hash: u32,
    phase: Phase,
    /// Priority of the pending (dirty) instance.
    priority: Priority,
    /// Priority the pending `add_after` adds with.
    delay_priority: Priority,
    /// Id of the current lane element (if `Queued`) or park timer (if `Parked`).
    id: u32,
    /// Id of the current delay timer (if `delay_at` is set).
    delay_id: u32,
    /// When the pending `add_after` fires (the earliest requested).
    delay_at: Option<Instant>,
    /// When the item last became dirty (metrics only).
    added_at: Option<Instant>,
    /// When the item was handed out (metrics only).
    started_at: Option<Instant>,
}

impl<T> Entry<T> {
    fn new(item: T, hash: u32) -> Self {
        Self {
            item,
            hash,
            phase: Phase::Idle,
            priority: Priority::Normal,
            delay_priority: Priority::Normal,
            id: 0,
            delay_id: 0,
            delay_at: None,
            added_at: None,
            started_at: None,
        }
    }

    /// Whether nothing keeps the entry: it is removed.
    fn is_vacant(&self) -> bool {
        self.phase == Phase::Idle && self.delay_at.is_none()
    }

    /// Whether the timer with `id` is this entry's delay or park timer.
    fn has_timer(&self, id: u32) -> bool {
        (self.delay_at.is_some() && self.delay_id == id)
            || (self.phase == Phase::Parked && self.id == id)
    }

    /// Puts the item (in slot `slot`) in its priority's lane under a fresh id.
    fn enqueue(&mut self, slot: u32, ids: &mut Ids, ready: &mut ReadyLanes) {
        self.phase = Phase::Queued;
        self.id = ids.next();
        ready.push(self.priority, slot, self.id);
    }

    /// The add rule, for the item in slot `slot`.
    fn mark_dirty(
        &mut self,
        slot: u32,
        priority: Priority,
        ids: &mut Ids,
        ready: &mut ReadyLanes,
        now: &mut LazyNow,
        metrics: Option<&QueueMetrics>,
    ) -> Added {
        if self.phase.is_dirty() {
            // Already waiting (or dirty while processing): dedup, keeping the
            // higher priority. A queued item moves to its new lane; the old
            // element becomes stale.
            if priority > self.priority {
                self.priority = priority;
                if self.phase == Phase::Queued {
                    self.enqueue(slot, ids, ready);
                }
            }
            return Added::Duplicate;
        }
        self.priority = priority;
        if let Some(m) = metrics {
            m.added();
            self.added_at = Some(now.get());
        }
        if self.phase == Phase::Processing {
            self.phase = Phase::ProcessingDirty;
            return Added::MarkedDirty;
        }
        self.enqueue(slot, ids, ready);
        Added::Queued
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
    /// The item was handed out (now processing).
    Started(T, Priority),
    /// The item was parked by the per-key check.
    Parked,
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

/// The entry in slot `slot`, if it is in use.
fn entry<T>(slots: &[Option<Entry<T>>], slot: u32) -> Option<&Entry<T>> {
    slots.get(slot as usize)?.as_ref()
}

/// The entry in slot `slot`, if it is in use.
fn entry_mut<T>(slots: &mut [Option<Entry<T>>], slot: u32) -> Option<&mut Entry<T>> {
    slots.get_mut(slot as usize)?.as_mut()
}

/// One index entry: an item's hash and its slot.
#[derive(Debug, Clone, Copy)]
struct Indexed {
    hash: u32,
    slot: u32,
}

impl Indexed {
    /// Points nowhere (an empty place of the hand-out cache).
    const NONE: Indexed = Indexed {
        hash: 0,
        slot: u32::MAX,
    };
}

/// Size of the hand-out cache (well above any worker count).
const HANDED: usize = 64;

/// Whether index entry `i` points to a slot in use by an item of its hash.
/// Exact, because no two index entries share a hash and a slot: an insert
/// that takes a slot reuses the dead entry of its hash pointing there, if
/// there is one, rather than adding another (see [`State::slot_for`]).
fn is_live<T>(slots: &[Option<Entry<T>>], i: &Indexed) -> bool {
    entry(slots, i.slot).is_some_and(|e| e.hash == i.hash)
}

/// Whether index entry `i` points to `item` (hashing to `hash`).
fn points_to<T: Eq>(slots: &[Option<Entry<T>>], i: &Indexed, item: &T, hash: u32) -> bool {
    i.hash == hash && entry(slots, i.slot).is_some_and(|e| e.hash == hash && e.item == *item)
}

/// All mutable state of one queue.
pub(crate) struct State<T> {
    /// The entries; `None` marks a free slot (listed in `free`).
    slots: Vec<Option<Entry<T>>>,
    free: Vec<u32>,
    /// Finds the slot of an item. A freed slot's entry stays, dead, until
    /// an insert reuses it or a sweep drops it: freeing then needs no
    /// lookup (the index is cold memory in a big queue).
    index: HashTable<Indexed>,
    /// Index entries whose slot was freed (see [`is_live`]).
    dead: usize,
    /// The slots of recently handed-out items, by hash (direct-mapped), so
    /// that `done` usually finds its item without the index.
    handed: [Indexed; HANDED],
    hasher: ItemHasher,
    ready: ReadyLanes,
    timers: TimerHeap<u32>,
    ids: Ids,
    /// Entries in each phase (`queued` is the number of live lane elements).
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
}

impl<T: Eq + Hash + Clone> State<T> {
    /// An empty state.
    pub(crate) fn new() -> Self {
        Self {
            slots: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            dead: 0,
            handed: [Indexed::NONE; HANDED],
            hasher: ItemHasher::default(),
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
        }
    }

    /// Items waiting to be handed out (ready or parked; delayed ones excluded).
    pub(crate) fn len(&self) -> usize {
        self.queued + self.parked
    }

    /// Items in the ready lanes.
    pub(crate) fn queued(&self) -> usize {
        self.queued
    }

    /// Items handed out and not yet done.
    pub(crate) fn processing(&self) -> usize {
        self.processing
    }

    /// Whether the queue knows no item at all (none waiting, processing or delayed).
    #[cfg(test)]
    pub(crate) fn is_idle(&self) -> bool {
        self.free.len() == self.slots.len()
    }

    /// Nothing handed out and nothing left to hand out.
    pub(crate) fn is_drained(&self) -> bool {
        self.processing == 0 && self.queued == 0 && self.parked == 0
    }

    /// Whether the timer heap holds anything (possibly only stale timers).
    pub(crate) fn has_timers(&self) -> bool {
        !self.timers.is_empty()
    }

    /// The earliest timer's deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// The hasher of this state's index.
    pub(crate) fn hasher(&self) -> ItemHasher {
        self.hasher.clone()
    }

    /// The slot of `item` (hashing to `hash`), if the queue knows it.
    fn find(&self, item: &T, hash: u32) -> Option<u32> {
        let slots = &self.slots;
        if let Some(cached) = self.handed.get(hash as usize % HANDED)
            && points_to(slots, cached, item, hash)
        {
            return Some(cached.slot);
        }
        let found = self
            .index
            .find(wide(hash), |i| points_to(slots, i, item, hash));
        found.map(|i| i.slot)
    }

    /// The slot of `item`, with a new `Idle` entry if the queue did not know
    /// it. `None` only when 2^32 slots are in use.
    fn slot_for(&mut self, item: T, hash: u32) -> Option<u32> {
        let Self {
            slots,
            free,
            index,
            dead,
            ..
        } = self;
        // The slot a new entry would take.
        let slot = match free.last() {
            Some(&slot) => slot,
            None => u32::try_from(slots.len()).ok()?,
        };
        // One pass over the candidates finds the item, or else a dead entry
        // of its hash to reuse: the one pointing at `slot` if any (it must
        // not stay behind: it would read as live again), else the first
        // (often the item's own old one).
        let mut reusable: Option<&mut Indexed> = None;
        for i in index.iter_hash_mut(wide(hash)) {
            if points_to(slots, i, &item, hash) {
                return Some(i.slot);
            }
            if i.hash == hash
                && !is_live(slots, i)
                && reusable
                    .as_ref()
                    .is_none_or(|r| r.slot != slot && i.slot == slot)
            {
                reusable = Some(i);
            }
        }
        if free.pop().is_none() {
            slots.push(None);
        }
        *slots.get_mut(slot as usize)? = Some(Entry::new(item, hash));
        if let Some(i) = reusable {
            i.slot = slot;
            *dead = dead.saturating_sub(1);
            return Some(slot);
        }
        // Sweep rather than grow once a quarter of the index is dead: the
        // index stays proportional to the live items, and each sweep is paid
        // for by the frees that made its dead entries.
        if index.len() >= index.capacity() && *dead > index.len() / 4 {
            index.retain(|i| is_live(slots, i));
            *dead = 0;
        }
        index.insert_unique(wide(hash), Indexed { hash, slot }, |i| wide(i.hash));
        Some(slot)
    }

    /// Frees slot `slot` if its entry holds nothing any more (its index
    /// entry stays, dead).
    fn release_if_vacant(&mut self, slot: u32) {
        let Some(place) = self.slots.get_mut(slot as usize) else {
            return;
        };
        if !place.as_ref().is_some_and(Entry::is_vacant) {
            return;
        }
        *place = None;
        self.free.push(slot);
        self.dead += 1;
        if self.free.len() == self.slots.len() && self.slots.len() > SHRINK_ABOVE {
            // The end of a burst: give its memory back. Every index entry,
            // lane element and timer is dead or stale by now.
            self.slots = Vec::new();
            self.free = Vec::new();
            self.index = HashTable::new();
            self.dead = 0;
            self.ready = ReadyLanes::new();
            self.timers = TimerHeap::new();
        }
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
        let hash = self.hasher.hash(&item);
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
        let Some(slot) = self.slot_for(item, hash) else {
            tracing::error!("workqueue holds 2^32 items; add dropped");
            return Added::Ignored;
        };
        let Some(entry) = entry_mut(&mut self.slots, slot) else {
            return Added::Ignored;
        };
        let outcome =
            entry.mark_dirty(slot, priority, &mut self.ids, &mut self.ready, now, metrics);
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
        let hash = self.hasher.hash(&item);
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
        let Some(slot) = self.slot_for(item, hash) else {
            tracing::error!("workqueue holds 2^32 items; add_after dropped");
            return false;
        };
        let Some(entry) = entry_mut(&mut self.slots, slot) else {
            return false;
        };
        if let Some(current) = entry.delay_at {
            entry.delay_priority = entry.delay_priority.max(priority);
            if at >= current {
                return false;
            }
            // Earlier time wins; the old timer becomes stale.
        } else {
            entry.delay_priority = priority;
            self.live_timers += 1;
        }
        entry.delay_at = Some(at);
        entry.delay_id = self.ids.next();
        let earliest = self.timers.next_deadline().is_none_or(|next| at < next);
        self.timers.push(at, entry.delay_id, slot);
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
            let (slot, id) = (timer.item, timer.id);
            let Some(entry) = entry_mut(&mut self.slots, slot).filter(|e| e.has_timer(id)) else {
                continue; // stale
            };
            self.live_timers -= 1;
            if entry.delay_at.is_some() && entry.delay_id == id {
                entry.delay_at = None;
                let priority = entry.delay_priority;
                let outcome =
                    entry.mark_dirty(slot, priority, &mut self.ids, &mut self.ready, now, metrics);
                self.count(outcome);
            } else {
                entry.enqueue(slot, &mut self.ids, &mut self.ready);
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
        let slots = &self.slots;
        self.timers
            .retain(|t| entry(slots, t.item).is_some_and(|e| e.has_timer(t.id)));
    }

    /// Drops stale lane elements once they outnumber live ones.
    fn compact_lanes(&mut self) {
        if self.ready.raw_len() <= 2 * self.queued + 1024 {
            return;
        }
        let slots = &self.slots;
        self.ready.retain(|slot, id| {
            entry(slots, slot).is_some_and(|e| e.phase == Phase::Queued && e.id == id)
        });
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
            let (slot, id, priority) = self.ready.pop()?;
            let Some(entry) =
                entry_mut(&mut self.slots, slot).filter(|e| e.phase == Phase::Queued && e.id == id)
            else {
                continue; // stale element left behind by a priority upgrade
            };
            self.queued -= 1;
            return Some(match check(&entry.item) {
                KeyVerdict::Start => {
                    entry.phase = Phase::Processing;
                    if let Some(m) = metrics {
                        let at = now.get();
                        m.handed_out(entry.added_at.take(), at);
                        entry.started_at = Some(at);
                    }
                    self.processing += 1;
                    if let Some(cached) = self.handed.get_mut(entry.hash as usize % HANDED) {
                        *cached = Indexed {
                            hash: entry.hash,
                            slot,
                        };
                    }
                    Popped::Started(entry.item.clone(), priority)
                }
                KeyVerdict::Park(at) => {
                    entry.phase = Phase::Parked;
                    entry.id = self.ids.next();
                    self.timers.push(at, entry.id, slot);
                    self.parked += 1;
                    self.live_timers += 1;
                    self.compact_timers();
                    Popped::Parked
                }
            });
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
        let hash = self.hasher.hash(item);
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
        let slot = self.find(item, hash)?;
        let entry = entry_mut(&mut self.slots, slot)?;
        if !entry.phase.is_processing() {
            return None;
        }
        let dirty = entry.phase == Phase::ProcessingDirty;
        if let Some(m) = metrics {
            m.finished(entry.started_at.take(), now.get());
        }
        if dirty {
            entry.enqueue(slot, &mut self.ids, &mut self.ready);
            self.queued += 1;
            self.newly_ready += 1;
        } else {
            entry.phase = Phase::Idle;
        }
        self.processing -= 1;
        if dirty {
            self.compact_lanes();
        } else {
            self.release_if_vacant(slot);
        }
        Some(dirty)
    }

    /// Stops accepting adds and discards pending `add_after`s. Items already
    /// waiting (ready or parked) stay, so getters can drain them.
    pub(crate) fn shut_down(&mut self) {
        self.shutting_down = true;
        for slot in 0..self.slots.len() {
            let Ok(slot) = u32::try_from(slot) else {
                break;
            };
            if let Some(entry) = entry_mut(&mut self.slots, slot) {
                entry.delay_at = None;
            }
            self.release_if_vacant(slot);
        }
        let slots = &self.slots;
        self.timers
            .retain(|t| entry(slots, t.item).is_some_and(|e| e.has_timer(t.id)));
        self.live_timers = self.parked;
    }

    /// Calls `f` with the start time of every item being processed.
    pub(crate) fn for_each_started(&self, mut f: impl FnMut(Instant)) {
        if self.processing == 0 {
            return;
        }
        for entry in self.slots.iter().flatten() {
            if let Some(at) = entry.started_at.filter(|_| entry.phase.is_processing()) {
                f(at);
            }
        }
    }

    /// Checks the internal invariants (tests only).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let (mut queued, mut parked, mut processing, mut delays, mut used) = (0, 0, 0, 0, 0);
        for (slot, entry) in self.slots.iter().enumerate() {
            let Some(entry) = entry else { continue };
            used += 1;
            assert!(!entry.is_vacant(), "vacant entry kept");
            assert_eq!(entry.hash, self.hasher.hash(&entry.item), "hash");
            assert_eq!(
                self.find(&entry.item, entry.hash),
                u32::try_from(slot).ok(),
                "index out of sync"
            );
            match entry.phase {
                Phase::Queued => queued += 1,
                Phase::Parked => parked += 1,
                Phase::Processing | Phase::ProcessingDirty => processing += 1,
                Phase::Idle => {}
            }
            if entry.delay_at.is_some() {
                delays += 1;
            }
        }
        let live = self
            .index
            .iter()
            .filter(|i| is_live(&self.slots, i))
            .count();
        assert_eq!(used, live, "index size");
        assert_eq!(self.index.len(), live + self.dead, "dead count");
        assert_eq!(used + self.free.len(), self.slots.len(), "free list");
        assert_eq!(queued, self.queued, "queued count");
        assert_eq!(parked, self.parked, "parked count");
        assert_eq!(processing, self.processing, "processing count");
        assert_eq!(delays + parked, self.live_timers, "live timer count");
        assert!(self.timers.len() >= self.live_timers);
        assert!(self.ready.raw_len() >= self.queued);
    }
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
        assert!(s.slots.len() >= 10_000, "a delayed item keeps the slots");
        s.promote(&mut LazyNow::at(t + Duration::from_secs(1)), None);
        let Some(Popped::Started(5, _)) = s.pop(&mut now, None, |_| KeyVerdict::Start) else {
            panic!("delayed item lost");
        };
        s.done(&5, &mut now, None);
        assert!(s.is_idle());
        assert!(s.slots.is_empty(), "slots not given back");
        assert_eq!(s.index.capacity(), 0, "index not given back");
        assert_eq!(s.dead, 0);
        assert_eq!(s.ready.raw_len(), 0, "lanes not given back");
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

    #[test]
    fn items_with_equal_hashes_stay_apart() {
        // Lane elements and timers name entries by hash and id: two items
        // sharing a hash must still be told apart.
        let t = Instant::now();
        let mut s: State<u32> = State::new();
        let mut now = LazyNow::at(t);
        let hash = s.hasher.hash(&1);
        s.add_hashed(1, hash, Priority::Low, &mut now, None);
        s.add_hashed(2, hash, Priority::Normal, &mut now, None);
        s.add_hashed(1, hash, Priority::High, &mut now, None);
        s.add_after_hashed(3, hash, 5 * MS, Priority::Normal, &mut now, None);
        assert_eq!(s.len(), 2);
        let mut order = Vec::new();
        while let Some(Popped::Started(item, _)) = s.pop(&mut now, None, |_| KeyVerdict::Start) {
            order.push(item);
        }
        assert_eq!(order, [1, 2]);
        assert_eq!(s.done_hashed(&2, hash, &mut now, None), Some(false));
        s.promote(&mut LazyNow::at(t + 5 * MS), None);
        let Some(Popped::Started(3, _)) = s.pop(&mut now, None, |_| KeyVerdict::Start) else {
            panic!("delayed item lost");
        };
        assert_eq!(s.done_hashed(&1, hash, &mut now, None), Some(false));
        assert_eq!(s.done_hashed(&3, hash, &mut now, None), Some(false));
        assert!(s.is_idle());
        assert_eq!((s.len(), s.processing()), (0, 0));
    }

    #[test]
    fn dead_index_entries_are_reused_exactly() {
        // Items sharing a hash, freed and added again in changing orders:
        // a dead index entry is reused, never left to read as live again.
        let t = Instant::now();
        let mut s: State<u32> = State::new();
        let mut now = LazyNow::at(t);
        let hash = 7;
        for round in 0..60u32 {
            for i in 0..4 {
                s.add_hashed(i + round % 3, hash, Priority::Normal, &mut now, None);
            }
            let mut started = Vec::new();
            while let Some(Popped::Started(item, _)) = s.pop(&mut now, None, |_| KeyVerdict::Start)
            {
                started.push(item);
            }
            if round % 2 == 1 {
                started.reverse();
            }
            for item in started {
                assert_eq!(s.done_hashed(&item, hash, &mut now, None), Some(false));
            }
            assert!(s.is_idle());
            let live = s.index.iter().filter(|i| is_live(&s.slots, i)).count();
            assert_eq!((live, s.dead), (0, s.index.len()), "round {round}");
        }
        assert!(s.index.len() <= 6, "index grew to {}", s.index.len());
    }
}
