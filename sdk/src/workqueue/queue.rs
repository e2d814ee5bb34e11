//! [`WorkQueue`]: the handle, its lock, and how getters wait.
//!
//! All state sits behind one lock ([`State`], a spin-then-park
//! `parking_lot::Mutex`). An add never waits for it: when it is taken, the
//! add goes to a small inbox that the next lock holder applies first, in
//! order, so every observation (`get`, `done`, `len`, ...) sees every add that
//! happened before it.
//!
//! A getter that finds nothing yields to its thread's other tasks once
//! (they are often the producers) and looks again before it goes idle. Idle
//! getters wait on a `tokio::sync::Notify`; an add wakes at most as many of
//! them as items became ready. The lock, the inbox and the `Notify` sit on
//! cache lines of their own (`crossbeam_utils::CachePadded`: a write by one
//! thread would otherwise evict the line the others read). Time-based work
//! (delayed items, parked items, the throttle) needs no background task:
//! exactly one idle getter, the one "on duty", sleeps until the earliest
//! deadline and is poked when an earlier one appears. Due timers are also promoted at the start of every
//! operation, so items become ready in the order of their deadlines whoever
//! observes them.

use std::fmt;
use std::hash::Hash;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio::time::Instant;

use super::error::QueueError;
use super::metrics::QueueMetrics;
use super::priority::Priority;
use super::rate_limiter::RateLimiter;
use super::state::{ItemHasher, KeyVerdict, LazyNow, Popped, State};
use super::throttle::{Throttle, Verdict};

/// A deduplicating, delaying, prioritised, rate-limited work queue.
///
/// Semantics are client-go's workqueue (see the [module docs](super) for the
/// full rules): an item is waiting at most once, is never held by two
/// workers at once, and an item added while it is being processed is handed
/// out again only after [`done`](Self::done).
///
/// `WorkQueue` is a cheap handle: clones share one queue.
///
/// ```
/// use opkit::workqueue::WorkQueue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::new();
/// queue.add("default/web");
/// queue.add("default/web"); // deduplicated
/// assert_eq!(queue.len(), 1);
///
/// let item = queue.get().await.expect("not shut down");
/// queue.add(item); // being processed: marked dirty, not handed out twice
/// assert_eq!(queue.len(), 0);
/// queue.done(&item); // ... and queued again now
/// assert_eq!(queue.len(), 1);
/// # }
/// ```
pub struct WorkQueue<T: Eq + Hash + Clone> {
    inner: Arc<Inner<T>>,
}

impl<T: Eq + Hash + Clone> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Eq + Hash + Clone> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Informational: adds still in the inbox are not counted.
        let st = self.inner.state.lock();
        f.debug_struct("WorkQueue")
            .field("name", &self.inner.name)
            .field("waiting", &st.len())
            .field("processing", &st.processing())
            .field("shutting_down", &st.shutting_down)
            .finish_non_exhaustive()
    }
}

/// The shared part of a queue.
pub(crate) struct Inner<T: Eq + Hash + Clone> {
    pub(crate) name: String,
    pub(crate) state: CachePadded<StateLock<T>>,
    /// Idle getters wait here.
    getters: CachePadded<Notify>,
    /// The getter on duty also waits here, to learn of an earlier deadline.
    timer: Notify,
    /// `shutdown_with_drain` waits here.
    drained: Notify,
    /// How many plain [`WorkQueue::shutdown`] calls were made: one made
    /// while a drain waits ends that wait (client-go's `ShutDown` after
    /// `ShutDownWithDrain`).
    plain_shutdowns: AtomicUsize,
    rate_limiter: Box<dyn RateLimiter<T>>,
    throttle: Option<Throttle<T>>,
    pub(crate) metrics: Option<QueueMetrics>,
    /// Adds that found the state locked: applied by the next lock holder.
    inbox: CachePadded<Mutex<Vec<(T, u32, Priority)>>>,
    /// The index's hasher: items are hashed before the lock is taken.
    hasher: ItemHasher,
    /// The inbox is not empty.
    inbox_pending: CachePadded<AtomicBool>,
    /// Mirror of `State::idle`, readable without the lock.
    idle_getters: CachePadded<AtomicUsize>,
}

/// The queue's one lock. Critical sections are a few dozen nanoseconds;
/// parking_lot's mutex already spins adaptively before parking, so no spin
/// of our own is added (measured: an extra spin cost CPU on 2 cores and made
/// the 4-producer/4-worker workload bimodal).
pub(crate) struct StateLock<T>(Mutex<State<T>>);

impl<T> StateLock<T> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.0.lock()
    }

    /// Takes the lock if it is free right now.
    fn try_lock(&self) -> Option<MutexGuard<'_, State<T>>> {
        self.0.try_lock()
    }
}

/// Whom to wake once the lock is released.
#[derive(Default)]
#[must_use]
struct Wake {
    getters: usize,
    duty: bool,
    drained: bool,
}

/// What one round of `get` decided.
enum Round<T> {
    Done(Option<(T, Priority)>),
    /// Look once more at once.
    Retry,
    /// Registered as idle; `Some` if on timer duty until then.
    Wait(Option<Instant>),
}

/// What a getter found.
enum Take<T> {
    Item(T, Priority),
    Closed,
    /// Nothing to hand out now; the next time-based event, if any.
    Wait(Option<Instant>),
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Inner<T> {
    pub(crate) fn new(
        name: String,
        rate_limiter: Box<dyn RateLimiter<T>>,
        throttle: Option<Throttle<T>>,
        metrics: Option<QueueMetrics>,
    ) -> Self {
        let state = State::new();
        let hasher = state.hasher();
        Self {
            name,
            hasher,
            state: CachePadded::new(StateLock(Mutex::new(state))),
            getters: CachePadded::new(Notify::new()),
            timer: Notify::new(),
            drained: Notify::new(),
            plain_shutdowns: AtomicUsize::new(0),
            rate_limiter,
            throttle,
            metrics,
            inbox: CachePadded::new(Mutex::new(Vec::new())),
            inbox_pending: CachePadded::new(AtomicBool::new(false)),
            idle_getters: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    /// Locks the state, first applying the adds waiting in the inbox.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<T>> {
        let mut st = self.state.lock();
        self.drain_inbox(&mut st);
        st
    }

    /// Like [`lock`](Self::lock), unless the state is locked right now.
    fn try_lock(&self) -> Option<MutexGuard<'_, State<T>>> {
        let mut st = self.state.try_lock()?;
        self.drain_inbox(&mut st);
        Some(st)
    }

    /// Applies the inbox's adds, in the order they were made.
    fn drain_inbox(&self, st: &mut State<T>) {
        if !self.inbox_pending.load(Ordering::Acquire) {
            return;
        }
        let mut batch = std::mem::take(&mut st.batch);
        {
            let mut inbox = self.inbox.lock();
            std::mem::swap(&mut *inbox, &mut batch);
            self.inbox_pending.store(false, Ordering::SeqCst);
        }
        let mut now = LazyNow::new();
        for (item, hash, priority) in batch.drain(..) {
            st.add_hashed(item, hash, priority, &mut now, self.metrics.as_ref());
        }
        st.batch = batch;
    }

    /// Records an add that found the state locked; wakes a getter if the
    /// inbox was empty and one is idle (later adds ride on that wake-up).
    fn push_to_inbox(&self, item: T, hash: u32, priority: Priority) {
        let first = {
            let mut inbox = self.inbox.lock();
            let first = inbox.is_empty();
            inbox.push((item, hash, priority));
            if first {
                self.inbox_pending.store(true, Ordering::SeqCst);
            }
            first
        };
        // Pairs with the getter's `idle_getters` increment then
        // `inbox_pending` load in `round`: one of the two sees the other.
        if first && self.idle_getters.load(Ordering::SeqCst) > 0 {
            self.getters.notify_one();
        }
    }

    /// The earliest instant some getter must wake at: the next timer, or the
    /// throttle's next token when ready items are held back by it.
    fn wake_deadline(st: &State<T>) -> Option<Instant> {
        let next = st.next_deadline();
        match st.throttle_at {
            Some(t) if st.throttled && st.queued() > 0 => Some(next.map_or(t, |n| n.min(t))),
            _ => next,
        }
    }

    /// Decides whom to wake after a change (called with the lock held).
    fn settle(&self, st: &mut State<T>) -> Wake {
        let mut wake = Wake::default();
        let ready = std::mem::take(&mut st.newly_ready);
        if ready > 0 && !(st.throttled && st.duty_held) {
            let available = st.idle.saturating_sub(st.wakes_in_flight);
            let n = ready.min(available);
            st.wakes_in_flight += n;
            wake.getters = n;
        }
        if (st.has_timers() || st.throttled)
            && let Some(deadline) = Self::wake_deadline(st)
        {
            if st.duty_held {
                if st.duty_deadline.is_none_or(|current| deadline < current) {
                    st.duty_deadline = Some(deadline);
                    wake.duty = true;
                }
            } else if st.idle > st.wakes_in_flight {
                // Nobody sleeps until the deadline: recruit an idle getter.
                st.wakes_in_flight += 1;
                wake.getters += 1;
            }
        }
        wake.drained = st.shutting_down && st.is_drained();
        wake
    }

    fn wake(&self, wake: Wake) {
        for _ in 0..wake.getters {
            self.getters.notify_one();
        }
        if wake.duty {
            self.timer.notify_one();
        }
        if wake.drained {
            self.drained.notify_waiters();
        }
    }

    /// Tries to hand out one item (called with the lock held).
    fn take(&self, st: &mut State<T>, now: &mut LazyNow) -> Take<T> {
        let metrics = self.metrics.as_ref();
        st.promote(now, metrics);
        let Some(throttle) = &self.throttle else {
            if let Some(Popped::Started(item, priority)) =
                st.pop(now, metrics, |_| KeyVerdict::Start)
            {
                return Take::Item(item, priority);
            }
            return self.idle_outcome(st);
        };
        let mut token = !throttle.has_global();
        while st.queued() > 0 {
            if !token {
                match throttle.check_global() {
                    Verdict::Allow => {
                        token = true;
                        st.throttled = false;
                    }
                    Verdict::NotBefore(at) => {
                        st.throttled = true;
                        st.throttle_at = Some(at);
                        return Take::Wait(Self::wake_deadline(st));
                    }
                }
            }
            let popped = st.pop(now, metrics, |item| match throttle.check_key(item) {
                Verdict::Allow => KeyVerdict::Start,
                Verdict::NotBefore(at) => KeyVerdict::Park(at),
            });
            if let Some(Popped::Started(item, priority)) = popped {
                return Take::Item(item, priority);
            }
        }
        self.idle_outcome(st)
    }

    /// One locked round of `get`: take an item, or register as idle (and
    /// possibly take the timer duty). Registration for wake-ups (`notified`)
    /// happens under the state lock, so no add after it can miss this getter;
    /// the common case finds an item and never touches the `Notify`. Kept out
    /// of the async fn so that the lock guard never lives across an await.
    fn round(&self, me: &mut Waiter<'_, T>, notified: Pin<&mut Notified<'_>>) -> Round<T> {
        let mut now = LazyNow::new();
        let mut st = self.lock();
        me.leave(&mut st);
        let result = match self.take(&mut st, &mut now) {
            Take::Item(item, priority) => Round::Done(Some((item, priority))),
            Take::Closed => Round::Done(None),
            Take::Wait(_) if self.went_idle(&mut st, me, notified) => {
                // An add raced into the inbox: apply it and look again.
                me.leave(&mut st);
                self.drain_inbox(&mut st);
                Round::Retry
            }
            Take::Wait(deadline) => Round::Wait(match deadline {
                Some(at) if !st.duty_held => {
                    st.duty_held = true;
                    st.duty_deadline = Some(at);
                    me.duty = true;
                    Some(at)
                }
                _ => None,
            }),
        };
        let wake = self.settle(&mut st);
        drop(st);
        self.wake(wake);
        result
    }

    /// Takes an item if one can be handed out now: `Some(Some(..))`, or
    /// `Some(None)` once shut down and drained; `None` if the caller must wait.
    fn take_now(&self) -> Option<Option<(T, Priority)>> {
        let mut now = LazyNow::new();
        let mut st = self.lock();
        let result = match self.take(&mut st, &mut now) {
            Take::Item(item, priority) => Some(Some((item, priority))),
            Take::Closed => Some(None),
            Take::Wait(_) => None,
        };
        let wake = self.settle(&mut st);
        drop(st);
        self.wake(wake);
        result
    }

    /// Registers the getter as idle; `true` if the inbox has adds it must
    /// see before it may sleep.
    fn went_idle(
        &self,
        st: &mut State<T>,
        me: &mut Waiter<'_, T>,
        notified: Pin<&mut Notified<'_>>,
    ) -> bool {
        notified.enable();
        st.idle += 1;
        me.idle = true;
        self.idle_getters.fetch_add(1, Ordering::SeqCst);
        self.inbox_pending.load(Ordering::SeqCst)
    }

    /// `None` if drained, else the error to report.
    fn drain_error(&self, timeout: Duration) -> Option<QueueError> {
        let st = self.lock();
        if st.is_drained() {
            return None;
        }
        Some(QueueError::DrainTimeout {
            queue: self.name.clone(),
            timeout,
            processing: st.processing(),
            waiting: st.len(),
        })
    }

    fn idle_outcome(&self, st: &State<T>) -> Take<T> {
        if st.shutting_down && st.len() == 0 {
            Take::Closed
        } else {
            Take::Wait(st.next_deadline())
        }
    }

    pub(crate) fn update_unfinished_work(&self) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        let now = Instant::now();
        let (mut total, mut longest) = (0.0_f64, 0.0_f64);
        self.lock().for_each_started(|at| {
            let age = now.saturating_duration_since(at).as_secs_f64();
            total += age;
            longest = longest.max(age);
        });
        metrics.unfinished_work.set(total);
        metrics.longest_running.set(longest);
    }
}

/// A getter's bookkeeping while it waits; undone on wake-up or cancellation.
struct Waiter<'a, T: Eq + Hash + Clone + Send + Sync + 'static> {
    inner: &'a Inner<T>,
    idle: bool,
    duty: bool,
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Waiter<'_, T> {
    fn leave(&mut self, st: &mut State<T>) {
        if self.idle {
            self.idle = false;
            st.idle -= 1;
            self.inner.idle_getters.fetch_sub(1, Ordering::SeqCst);
            st.wakes_in_flight = st.wakes_in_flight.saturating_sub(1);
        }
        if self.duty {
            self.duty = false;
            st.duty_held = false;
            st.duty_deadline = None;
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Drop for Waiter<'_, T> {
    fn drop(&mut self) {
        if self.idle || self.duty {
            // The `get` future was dropped while waiting: hand duty to another getter.
            let mut st = self.inner.lock();
            self.leave(&mut st);
            let wake = self.inner.settle(&mut st);
            drop(st);
            self.inner.wake(wake);
        }
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    pub(crate) fn from_inner(inner: Arc<Inner<T>>) -> Self {
        Self { inner }
    }

    /// The queue's name (used for metrics and logs).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Marks `item` as needing processing (at normal priority).
    ///
    /// A no-op if the item is already waiting; if it is being processed it is
    /// marked dirty and handed out again after [`done`](Self::done). Ignored
    /// once the queue is shutting down.
    pub fn add(&self, item: T) {
        self.add_with_priority(item, Priority::Normal);
    }

    /// Like [`add`](Self::add) with a priority. If the item is already
    /// waiting, the higher of the two priorities is kept.
    pub(crate) fn add_with_priority(&self, item: T, priority: Priority) {
        let inner = &*self.inner;
        // Never wait for the lock: if it is taken, the holder (or the next
        // one) applies the add from the inbox, in order.
        let hash = inner.hasher.hash(&item);
        let Some(mut st) = inner.try_lock() else {
            inner.push_to_inbox(item, hash, priority);
            return;
        };
        st.add_hashed(
            item,
            hash,
            priority,
            &mut LazyNow::new(),
            inner.metrics.as_ref(),
        );
        let wake = inner.settle(&mut st);
        drop(st);
        inner.wake(wake);
    }

    /// Adds `item` once `delay` has passed (at normal priority).
    ///
    /// A zero delay is a plain [`add`](Self::add). If the item already has a
    /// pending delayed add, the earlier time is kept. When the time comes the
    /// item goes through `add`, so it dedups against a waiting copy. Delays
    /// are clamped to one year.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, Priority::Normal);
    }

    /// Like [`add_after`](Self::add_after) with the priority the item is
    /// added with when its time comes.
    pub(crate) fn add_after_with_priority(&self, item: T, delay: Duration, priority: Priority) {
        let inner = &*self.inner;
        let hash = inner.hasher.hash(&item);
        let mut now = LazyNow::new();
        let mut st = inner.lock();
        if st.shutting_down {
            return;
        }
        if let Some(m) = &inner.metrics {
            m.retries.inc();
        }
        st.add_after_hashed(
            item,
            hash,
            delay,
            priority,
            &mut now,
            inner.metrics.as_ref(),
        );
        let wake = inner.settle(&mut st);
        drop(st);
        inner.wake(wake);
    }

    /// Adds `item` after the delay the rate limiter decides
    /// ([`RateLimiter::when`], which counts one more failure of the item).
    pub fn add_rate_limited(&self, item: T) {
        self.add_rate_limited_with_priority(item, Priority::Normal);
    }

    /// Like [`add_rate_limited`](Self::add_rate_limited) with a priority.
    pub(crate) fn add_rate_limited_with_priority(&self, item: T, priority: Priority) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.inner.rate_limiter.when(&item);
        self.add_after_with_priority(item, delay, priority);
    }

    /// Like [`add_rate_limited`](Self::add_rate_limited), returning the delay
    /// chosen and the item's failure count including this one (for logs);
    /// `None` when the queue is shutting down (nothing is added).
    pub(crate) fn add_rate_limited_reporting(
        &self,
        item: T,
        priority: Priority,
    ) -> Option<(Duration, u32)> {
        if self.is_shutting_down() {
            return None;
        }
        let delay = self.inner.rate_limiter.when(&item);
        let attempt = self.inner.rate_limiter.num_requeues(&item);
        self.add_after_with_priority(item, delay, priority);
        Some((delay, attempt))
    }

    /// Clears `item`'s failure history in the rate limiter (call it when the
    /// item was processed successfully). Does not remove the item from the queue.
    pub fn forget(&self, item: &T) {
        self.inner.rate_limiter.forget(item);
    }

    /// How many times `item` was re-added with
    /// [`add_rate_limited`](Self::add_rate_limited) since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.inner.rate_limiter.num_requeues(item)
    }

    /// Waits for an item and hands it to the caller, who must call
    /// [`done`](Self::done) with it when finished.
    ///
    /// Returns `None` once the queue is shut down and has nothing left to
    /// hand out. Ready items of higher priority come first, FIFO within a
    /// priority; the throttle, if configured, paces the hand-outs.
    ///
    /// Cancel-safe: dropping the future never loses an item.
    pub async fn get(&self) -> Option<T> {
        self.get_with_priority().await.map(|(item, _)| item)
    }

    /// Like [`get`](Self::get), also returning the priority the item was
    /// queued with (so that a requeue can keep it).
    pub(crate) async fn get_with_priority(&self) -> Option<(T, Priority)> {
        let inner = &*self.inner;
        // The common case: an item is ready; nothing to register or undo.
        if let Some(result) = inner.take_now() {
            return result;
        }
        // Nothing ready: let the other tasks of this thread (typically the
        // event handlers that add) run once before sleeping; the first round
        // below looks again. Sleeping costs a lock round more and a wake-up;
        // with four producers and four workers on two threads, getters that
        // slept at once were woken for one item at a time (one wake-up per
        // ~6 items).
        tokio::task::yield_now().await;
        let mut me = Waiter {
            inner,
            idle: false,
            duty: false,
        };
        loop {
            let notified = inner.getters.notified();
            let mut notified = pin!(notified);
            let duty = match inner.round(&mut me, notified.as_mut()) {
                Round::Done(result) => return result,
                Round::Retry => continue,
                Round::Wait(duty) => duty,
            };
            match duty {
                Some(at) => {
                    let poked = inner.timer.notified();
                    tokio::select! {
                        biased;
                        () = notified.as_mut() => {}
                        () = poked => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.as_mut().await,
            }
        }
    }

    /// Hands out an item if one is ready right now (and the throttle allows),
    /// without waiting. The caller must call [`done`](Self::done) with it.
    pub fn try_get(&self) -> Option<T> {
        self.inner.take_now().flatten().map(|(item, _)| item)
    }

    /// Marks `item` as finished. If it was added again while it was being
    /// processed, it is queued again now. A no-op for an item that is not
    /// being processed.
    pub fn done(&self, item: &T) {
        let inner = &*self.inner;
        let hash = inner.hasher.hash(item);
        let mut now = LazyNow::new();
        let mut st = inner.lock();
        let outcome = st.done_hashed(item, hash, &mut now, inner.metrics.as_ref());
        let wake = inner.settle(&mut st);
        drop(st);
        inner.wake(wake);
        if outcome.is_none() {
            tracing::debug!(queue = %inner.name, "done called for an item that is not being processed");
        }
    }

    /// Number of items waiting to be handed out. Items being processed and
    /// delayed items whose time has not come are not counted. For
    /// information only: never gate `add` or `get` on it.
    pub fn len(&self) -> usize {
        let inner = &*self.inner;
        let mut now = LazyNow::new();
        let mut st = inner.lock();
        st.promote(&mut now, inner.metrics.as_ref());
        let len = st.len();
        let wake = inner.settle(&mut st);
        drop(st);
        inner.wake(wake);
        len
    }

    /// `true` if no item is waiting to be handed out (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shuts the queue down: later adds are ignored, pending delayed adds are
    /// discarded, and getters receive the items still waiting, then `None`.
    ///
    /// A [`shutdown_with_drain`](Self::shutdown_with_drain) waiting at the
    /// time stops waiting and returns [`QueueError::DrainAbandoned`] (as
    /// client-go's `ShutDown` ends a pending `ShutDownWithDrain`): this is
    /// how to force a stop without the drain.
    pub fn shutdown(&self) {
        self.shut_down();
        self.inner.plain_shutdowns.fetch_add(1, Ordering::SeqCst);
        self.inner.drained.notify_waiters();
    }

    fn shut_down(&self) {
        let inner = &*self.inner;
        let mut st = inner.lock();
        let first = !st.shutting_down;
        st.shut_down();
        let wake = inner.settle(&mut st);
        drop(st);
        inner.wake(wake);
        inner.getters.notify_waiters();
        if first {
            tracing::debug!(queue = %inner.name, "workqueue shutting down");
        }
    }

    /// Shuts the queue down like [`shutdown`](Self::shutdown) and waits until
    /// it is drained: every item still waiting has been handed out and every
    /// item handed out is [`done`](Self::done). Gives up after `timeout`
    /// ([`QueueError::DrainTimeout`]), or when [`shutdown`](Self::shutdown) is
    /// called meanwhile ([`QueueError::DrainAbandoned`]).
    ///
    /// Workers must keep calling [`get`](Self::get) and `done` meanwhile.
    pub async fn shutdown_with_drain(&self, timeout: Duration) -> Result<(), QueueError> {
        let inner = &*self.inner;
        let plain_shutdowns = inner.plain_shutdowns.load(Ordering::SeqCst);
        self.shut_down();
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + super::state::MAX_DELAY);
        loop {
            let drained = inner.drained.notified();
            let mut drained = pin!(drained);
            drained.as_mut().enable();
            let Some(not_drained) = inner.drain_error(timeout) else {
                return Ok(());
            };
            if inner.plain_shutdowns.load(Ordering::SeqCst) != plain_shutdowns {
                let err = match not_drained {
                    QueueError::DrainTimeout {
                        queue,
                        processing,
                        waiting,
                        ..
                    } => QueueError::DrainAbandoned {
                        queue,
                        processing,
                        waiting,
                    },
                    other => other,
                };
                tracing::debug!(queue = %inner.name, error = %err, "workqueue drain abandoned");
                return Err(err);
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return match inner.drain_error(timeout) {
                    None => Ok(()),
                    Some(err) => {
                        tracing::warn!(queue = %inner.name, error = %err, "workqueue drain timed out");
                        Err(err)
                    }
                };
            }
        }
    }

    /// `true` once [`shutdown`](Self::shutdown) was called.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.inner.lock().shutting_down
    }

    /// Sets the `workqueue_unfinished_work_seconds` and
    /// `workqueue_longest_running_processor_seconds` gauges now.
    ///
    /// The queue does this every 500 ms by itself when it was built inside a
    /// tokio runtime; call it before a scrape for exact values.
    #[cfg(test)]
    pub(crate) fn update_unfinished_work_metrics(&self) {
        self.inner.update_unfinished_work();
    }

    /// Holds the state lock without applying the inbox (tests of the inbox).
    #[cfg(test)]
    pub(crate) fn hold_lock(&self) -> MutexGuard<'_, State<T>> {
        self.inner.state.0.lock()
    }

    #[cfg(test)]
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&State<T>) -> R) -> R {
        f(&self.inner.lock())
    }
}
