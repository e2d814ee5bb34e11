//! The shared processor: fans the informer's notifications out to every
//! registered handler, each through its own listener.
//!
//! ```
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{InformerEvent, EventHandler, handler_fn};
//!
//! // A handler is a type implementing `EventHandler` (async methods, default no-ops) ...
//! struct Printer;
//! impl EventHandler<ConfigMap> for Printer {
//!     async fn on_add(&mut self, obj: Arc<ConfigMap>, is_in_initial_list: bool) {
//!         println!("add {:?} (initial list: {is_in_initial_list})", obj.metadata.name);
//!     }
//! }
//! // ... or a plain closure over `InformerEvent`.
//! let _h = handler_fn(|event: InformerEvent<ConfigMap>| match event {
//!     InformerEvent::Add { obj, .. } => println!("add {:?}", obj.metadata.name),
//!     InformerEvent::Update { new, is_resync, .. } => println!("update {:?} {is_resync}", new.metadata.name),
//!     InformerEvent::Delete { obj } => println!("delete {:?}", obj.object().metadata.name),
//! });
//! ```
//!
//! Each listener owns an unbounded (growable) buffer and a Tokio task that
//! drains it into the handler, so distributing never blocks: a slow handler
//! only grows its own buffer and delays nobody else — not the store, not the
//! other handlers. A handler that panics is logged and keeps receiving
//! events. Handlers registered after the informer started first receive a
//! synthetic `Add { is_in_initial_list: true }` for every stored object; a
//! registration's [`has_synced`](HandlerRegistration::has_synced) turns true
//! once the informer has synced and the handler has processed all its
//! initial-list adds. Each handler has its own resync period: a resync is an
//! `Update` with `old == new` and `is_resync: true`, delivered only to the
//! handlers whose period elapsed.
//!
//! A [`HandlerRegistration`] belongs to the informer that made it: another
//! informer's `remove_event_handler` given it is a no-op returning false
//! (client-go's `RemoveEventHandler`), and both keep their handlers. A
//! stopped informer refuses new handlers
//! ([`CacheError::InformerStopped`]) and its listener tasks end with it,
//! even one stuck in a handler call (the call is dropped at its next
//! `.await`).

use std::{
    future::Future,
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures::FutureExt;
use parking_lot::RwLock;
use tokio::{
    sync::{Notify, mpsc, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use super::{delta_fifo::DeletedObject, tasks::Tasks};
use crate::cache::{error::CacheError, undecodable::UndecodableObject};

/// Tells the informers (processors) of this process apart: a registration
/// carries the one of the informer that made it.
static NEXT_INFORMER_ID: AtomicU64 = AtomicU64::new(1);

/// The smallest per-handler resync period; shorter ones are raised to it
/// (client-go's `minimumResyncPeriod`).
pub const MINIMUM_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// A notification delivered to a handler.
#[derive(Debug)]
pub enum InformerEvent<K> {
    /// The object appeared in the cache. `is_in_initial_list` is true for the
    /// objects of the initial list (and the replay to a late handler).
    Add {
        /// The object.
        obj: Arc<K>,
        /// Part of the initial list (client-go's `isInInitialList`).
        is_in_initial_list: bool,
    },
    /// The object changed. A resync (or a relist that found it unchanged) is
    /// an `Update` with the same resourceVersion and `is_resync: true`.
    Update {
        /// The previous state in the cache.
        old: Arc<K>,
        /// The new state.
        new: Arc<K>,
        /// True when the resourceVersion did not change (periodic resync).
        is_resync: bool,
    },
    /// The object was deleted; a tombstone when the deletion was inferred
    /// from a relist.
    Delete {
        /// The final (or last known) state.
        obj: DeletedObject<K>,
    },
}

impl<K> Clone for InformerEvent<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add {
                obj,
                is_in_initial_list,
            } => Self::Add {
                obj: Arc::clone(obj),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Update {
                old,
                new,
                is_resync,
            } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
                is_resync: *is_resync,
            },
            Self::Delete { obj } => Self::Delete { obj: obj.clone() },
        }
    }
}

/// Receives an informer's notifications. Every method has a no-op default;
/// implement the ones you need (as `async fn`). Calls are sequential per
/// handler, in event order.
pub trait EventHandler<K>: Send + 'static {
    /// An object was added.
    fn on_add(&mut self, obj: Arc<K>, is_in_initial_list: bool) -> impl Future<Output = ()> + Send {
        drop(obj);
        let _ = is_in_initial_list;
        async {}
    }

    /// An object was updated (`is_resync`: the resourceVersion did not change).
    fn on_update(
        &mut self,
        old: Arc<K>,
        new: Arc<K>,
        is_resync: bool,
    ) -> impl Future<Output = ()> + Send {
        drop((old, new));
        let _ = is_resync;
        async {}
    }

    /// An object was deleted.
    fn on_delete(&mut self, obj: DeletedObject<K>) -> impl Future<Output = ()> + Send {
        drop(obj);
        async {}
    }

    /// The current version of an object does not deserialize into `K`
    /// (once per version; also replayed to a late handler), or such an
    /// object was deleted ([`UndecodableObject::is_deleted`]). No
    /// `Add`/`Update`/`Delete` is delivered for it: there is no `K`. See
    /// [`undecodable`](crate::cache::undecodable).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use opkit::cache::{EventHandler, UndecodableObject};
    ///
    /// struct Alert;
    /// impl EventHandler<ConfigMap> for Alert {
    ///     async fn on_undecodable(&mut self, obj: Arc<UndecodableObject>) {
    ///         eprintln!("{obj}");
    ///     }
    /// }
    /// ```
    fn on_undecodable(&mut self, obj: Arc<UndecodableObject>) -> impl Future<Output = ()> + Send {
        drop(obj);
        async {}
    }
}

/// An [`EventHandler`] made of a closure over [`InformerEvent`]; see [`handler_fn`].
pub struct HandlerFn<F>(F);

/// Wraps a synchronous closure as an [`EventHandler`].
pub fn handler_fn<K, F>(f: F) -> HandlerFn<F>
where
    F: FnMut(InformerEvent<K>) + Send + 'static,
{
    HandlerFn(f)
}

impl<K, F> EventHandler<K> for HandlerFn<F>
where
    K: Send + Sync + 'static,
    F: FnMut(InformerEvent<K>) + Send + 'static,
{
    fn on_add(&mut self, obj: Arc<K>, is_in_initial_list: bool) -> impl Future<Output = ()> + Send {
        (self.0)(InformerEvent::Add {
            obj,
            is_in_initial_list,
        });
        async {}
    }

    fn on_update(
        &mut self,
        old: Arc<K>,
        new: Arc<K>,
        is_resync: bool,
    ) -> impl Future<Output = ()> + Send {
        (self.0)(InformerEvent::Update {
            old,
            new,
            is_resync,
        });
        async {}
    }

    fn on_delete(&mut self, obj: DeletedObject<K>) -> impl Future<Output = ()> + Send {
        (self.0)(InformerEvent::Delete { obj });
        async {}
    }
}

struct ListenerState {
    pending_initial: AtomicUsize,
    removed: AtomicBool,
    /// Signalled when `pending_initial` reaches zero or the handler is removed.
    drained: Notify,
    delivered: AtomicU64,
    queued: AtomicU64,
}

/// The handle of a registered handler: its sync state, and the key to
/// remove it ([`SharedIndexInformer::remove_event_handler`](super::SharedIndexInformer::remove_event_handler)),
/// which only the informer that made it accepts.
#[derive(Clone)]
pub struct HandlerRegistration {
    id: u64,
    /// The informer that made it.
    informer: u64,
    state: Arc<ListenerState>,
    upstream_synced: watch::Receiver<bool>,
}

impl std::fmt::Debug for HandlerRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("id", &self.id)
            .field("informer", &self.informer)
            .field("has_synced", &self.has_synced())
            .finish()
    }
}

impl HandlerRegistration {
    /// The registration's id (unique within its informer; registrations of
    /// two informers may share one, and are still told apart).
    #[cfg(test)]
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// True once the informer has synced and this handler has processed
    /// every initial-list add it was given.
    pub fn has_synced(&self) -> bool {
        *self.upstream_synced.borrow() && self.state.pending_initial.load(Ordering::Acquire) == 0
    }

    /// Waits until [`has_synced`](Self::has_synced).
    pub async fn wait_synced(&self) {
        let mut rx = self.upstream_synced.clone();
        if rx.wait_for(|s| *s).await.is_err() {
            return;
        }
        // The handler drains its initial adds on its own task, which
        // signals `drained`; interest is registered before the check so a
        // signal between the check and the wait is not lost.
        loop {
            let notified = self.state.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state.pending_initial.load(Ordering::Acquire) == 0
                || self.state.removed.load(Ordering::Acquire)
            {
                return;
            }
            notified.await;
        }
    }

    /// Notifications queued to this handler but not yet handled.
    pub fn backlog(&self) -> u64 {
        self.state
            .queued
            .load(Ordering::Acquire)
            .saturating_sub(self.state.delivered.load(Ordering::Acquire))
    }

    /// True once removed from its informer.
    pub fn is_removed(&self) -> bool {
        self.state.removed.load(Ordering::Acquire)
    }
}

/// What a listener delivers: an [`InformerEvent`], or an undecodable object.
enum Notice<K> {
    Event(InformerEvent<K>),
    Undecodable(Arc<UndecodableObject>),
}

struct Listener<K> {
    id: u64,
    tx: mpsc::UnboundedSender<Notice<K>>,
    resync_period: Option<Duration>,
    next_resync: Instant,
    syncing: bool,
    state: Arc<ListenerState>,
}

impl<K> Listener<K> {
    fn send(&self, event: InformerEvent<K>) {
        if let InformerEvent::Add {
            is_in_initial_list: true,
            ..
        } = &event
        {
            self.state.pending_initial.fetch_add(1, Ordering::AcqRel);
        }
        self.send_notice(Notice::Event(event));
    }

    fn send_notice(&self, notice: Notice<K>) {
        self.state.queued.fetch_add(1, Ordering::AcqRel);
        if self.tx.send(notice).is_err() {
            // the listener task is gone (runtime shut down): nothing to deliver to
            tracing::debug!(listener = self.id, "listener closed, dropping notification");
        }
    }
}

/// Fans notifications out to the listeners of one informer.
pub(crate) struct Processor<K> {
    listeners: RwLock<Vec<Listener<K>>>,
    next_id: AtomicU64,
    resync_changed: Notify,
    upstream_synced: watch::Receiver<bool>,
    name: String,
    tasks: Tasks,
    /// The informer's stop signal.
    cancel: CancellationToken,
    /// This processor's identity among the informers of the process.
    informer_id: u64,
}

impl<K: Send + Sync + 'static> Processor<K> {
    /// A processor whose listener tasks are counted in `tasks` and which
    /// stops with `cancel`.
    pub(crate) fn new(
        upstream_synced: watch::Receiver<bool>,
        name: String,
        tasks: Tasks,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            listeners: RwLock::new(Vec::new()),
            next_id: AtomicU64::new(1),
            resync_changed: Notify::new(),
            upstream_synced,
            name,
            tasks,
            cancel,
            informer_id: NEXT_INFORMER_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Registers `handler`, replaying `existing` as initial-list adds first.
    /// Refused once the informer is stopped.
    pub(crate) fn add_listener<H: EventHandler<K>>(
        &self,
        handler: H,
        resync_period: Option<Duration>,
        existing: Vec<Arc<K>>,
        undecodable: Vec<Arc<UndecodableObject>>,
    ) -> Result<HandlerRegistration, CacheError> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| CacheError::NoRuntime("adding an event handler"))?;
        // Checked under the lock `stop` clears the listeners under: a
        // listener pushed here is either refused or cleared by `stop`.
        let mut listeners = self.listeners.write();
        if self.cancel.is_cancelled() {
            tracing::debug!(informer = %self.name, "refusing an event handler: the informer is stopped");
            return Err(CacheError::InformerStopped(self.name.clone()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ListenerState {
            pending_initial: AtomicUsize::new(0),
            removed: AtomicBool::new(false),
            drained: Notify::new(),
            delivered: AtomicU64::new(0),
            queued: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let resync_period = resync_period
            .filter(|p| !p.is_zero())
            .map(|p| p.max(MINIMUM_RESYNC_PERIOD));
        let listener = Listener {
            id,
            tx,
            resync_period,
            next_resync: Instant::now() + resync_period.unwrap_or_default(),
            syncing: false,
            state: Arc::clone(&state),
        };
        for obj in existing {
            listener.send(InformerEvent::Add {
                obj,
                is_in_initial_list: true,
            });
        }
        for obj in undecodable {
            listener.send_notice(Notice::Undecodable(obj));
        }
        self.tasks.spawn(
            &rt,
            run_listener(
                handler,
                rx,
                Arc::clone(&state),
                self.name.clone(),
                id,
                self.cancel.clone(),
            ),
        );
        listeners.push(listener);
        drop(listeners);
        if resync_period.is_some() {
            self.resync_changed.notify_one();
        }
        Ok(HandlerRegistration {
            id,
            informer: self.informer_id,
            state,
            upstream_synced: self.upstream_synced.clone(),
        })
    }

    /// Removes the listener of `reg`; its pending notifications are dropped.
    /// False (and nothing touched) when `reg` was made by another informer
    /// or is already removed.
    pub(crate) fn remove_listener(&self, reg: &HandlerRegistration) -> bool {
        if reg.informer != self.informer_id {
            tracing::debug!(informer = %self.name, listener = reg.id, "not removing a handler registered with another informer");
            return false;
        }
        let mut listeners = self.listeners.write();
        let Some(at) = listeners.iter().position(|l| l.id == reg.id) else {
            return false;
        };
        // dropping the listener drops its sender: the task ends once it sees that
        listeners.remove(at);
        drop(listeners);
        reg.state.removed.store(true, Ordering::Release);
        reg.state.drained.notify_waiters();
        self.resync_changed.notify_one();
        true
    }

    /// Delivers `event` to every listener, or (for `is_sync`) only to the
    /// listeners whose resync is due.
    pub(crate) fn distribute(&self, event: InformerEvent<K>, is_sync: bool) {
        let listeners = self.listeners.read();
        for l in listeners.iter() {
            if !is_sync || l.syncing {
                l.send(event.clone());
            }
        }
    }

    /// Tells every handler that an object's version does not decode (or
    /// that such an object was deleted).
    pub(crate) fn distribute_undecodable(&self, obj: Arc<UndecodableObject>) {
        for l in self.listeners.read().iter() {
            l.send_notice(Notice::Undecodable(Arc::clone(&obj)));
        }
    }

    /// Marks the listeners whose resync period elapsed as syncing; true if any.
    pub(crate) fn should_resync(&self, now: Instant) -> bool {
        let mut any = false;
        let mut listeners = self.listeners.write();
        for l in listeners.iter_mut() {
            l.syncing = false;
            if let Some(p) = l.resync_period
                && now >= l.next_resync
            {
                l.syncing = true;
                l.next_resync = now + p;
                any = true;
            }
        }
        any
    }

    /// When the next resync is due, if any handler wants resyncs.
    pub(crate) fn next_resync_at(&self) -> Option<Instant> {
        self.listeners
            .read()
            .iter()
            .filter(|l| l.resync_period.is_some())
            .map(|l| l.next_resync)
            .min()
    }

    /// Resolves when a registration changes the resync schedule.
    pub(crate) async fn resync_changed(&self) {
        self.resync_changed.notified().await
    }

    /// Drops every listener. Their tasks end on the informer's stop signal
    /// (cancelled before this is called), a handler call in progress included.
    pub(crate) fn stop(&self) {
        let mut listeners = self.listeners.write();
        for l in listeners.iter() {
            l.state.removed.store(true, Ordering::Release);
            l.state.drained.notify_waiters();
        }
        listeners.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.listeners.read().len()
    }
}

/// A listener's task: delivers until the listener is removed (its sender
/// dropped) or the informer stops (`stop`: the delivery in progress is dropped).
async fn run_listener<K, H>(
    handler: H,
    rx: mpsc::UnboundedReceiver<Notice<K>>,
    state: Arc<ListenerState>,
    informer: String,
    id: u64,
    stop: CancellationToken,
) where
    K: Send + Sync + 'static,
    H: EventHandler<K>,
{
    tokio::select! {
        biased;
        _ = stop.cancelled() => {
            tracing::trace!(informer = %informer, listener = id, "listener stopped with its informer");
        }
        _ = deliver(handler, rx, &state, &informer, id) => {
            tracing::trace!(informer = %informer, listener = id, "listener stopped");
        }
    }
}

async fn deliver<K, H>(
    mut handler: H,
    mut rx: mpsc::UnboundedReceiver<Notice<K>>,
    state: &ListenerState,
    informer: &str,
    id: u64,
) where
    K: Send + Sync + 'static,
    H: EventHandler<K>,
{
    while let Some(notice) = rx.recv().await {
        if state.removed.load(Ordering::Acquire) {
            break;
        }
        let event = match notice {
            Notice::Event(event) => event,
            Notice::Undecodable(obj) => {
                let outcome = AssertUnwindSafe(async { handler.on_undecodable(obj).await })
                    .catch_unwind()
                    .await;
                if outcome.is_err() {
                    tracing::error!(informer = %informer, listener = id, "event handler panicked; continuing with the next event");
                }
                state.delivered.fetch_add(1, Ordering::AcqRel);
                continue;
            }
        };
        let initial = matches!(
            event,
            InformerEvent::Add {
                is_in_initial_list: true,
                ..
            }
        );
        // the call is inside the async block so a panic in a synchronous
        // handler body is caught too
        let outcome = AssertUnwindSafe(async {
            match event {
                InformerEvent::Add {
                    obj,
                    is_in_initial_list,
                } => handler.on_add(obj, is_in_initial_list).await,
                InformerEvent::Update {
                    old,
                    new,
                    is_resync,
                } => handler.on_update(old, new, is_resync).await,
                InformerEvent::Delete { obj } => handler.on_delete(obj).await,
            }
        })
        .catch_unwind()
        .await;
        if outcome.is_err() {
            tracing::error!(informer = %informer, listener = id, "event handler panicked; continuing with the next event");
        }
        if initial && state.pending_initial.fetch_sub(1, Ordering::AcqRel) == 1 {
            state.drained.notify_waiters();
        }
        state.delivered.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::sync::Mutex;

    fn cm(name: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some("1".into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn recorder() -> (Arc<Mutex<Vec<String>>>, impl EventHandler<ConfigMap>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l2 = Arc::clone(&log);
        let h = handler_fn(move |e: InformerEvent<ConfigMap>| {
            let s = match e {
                InformerEvent::Add {
                    obj,
                    is_in_initial_list,
                } => format!(
                    "add {} {is_in_initial_list}",
                    obj.metadata.name.clone().unwrap_or_default()
                ),
                InformerEvent::Update { new, is_resync, .. } => {
                    format!(
                        "update {} {is_resync}",
                        new.metadata.name.clone().unwrap_or_default()
                    )
                }
                InformerEvent::Delete { obj } => format!(
                    "delete {}",
                    obj.object().metadata.name.clone().unwrap_or_default()
                ),
            };
            l2.lock().unwrap().push(s);
        });
        (log, h)
    }

    async fn until(mut f: impl FnMut() -> bool) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while !f() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("condition not reached");
    }

    #[tokio::test]
    async fn late_listener_gets_existing_objects_and_syncs() {
        let (tx, rx) = watch::channel(true);
        let p = Processor::new(rx, "test".into(), Tasks::new(), CancellationToken::new());
        let (log, h) = recorder();
        let reg = p
            .add_listener(h, None, vec![cm("a"), cm("b")], vec![])
            .unwrap();
        until(|| log.lock().unwrap().len() == 2).await;
        assert_eq!(*log.lock().unwrap(), ["add a true", "add b true"]);
        reg.wait_synced().await;
        assert!(reg.has_synced());
        drop(tx);
    }

    #[tokio::test]
    async fn has_synced_waits_for_upstream() {
        let (tx, rx) = watch::channel(false);
        let p = Processor::new(rx, "test".into(), Tasks::new(), CancellationToken::new());
        let (_log, h) = recorder();
        let reg = p.add_listener(h, None, vec![], vec![]).unwrap();
        assert!(!reg.has_synced());
        tx.send_replace(true);
        assert!(reg.has_synced());
    }

    #[tokio::test]
    async fn slow_handler_does_not_delay_others() {
        let (_tx, rx) = watch::channel(true);
        let p = Processor::new(rx, "test".into(), Tasks::new(), CancellationToken::new());
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        struct Blocked(Arc<tokio::sync::Semaphore>);
        impl EventHandler<ConfigMap> for Blocked {
            async fn on_add(&mut self, _obj: Arc<ConfigMap>, _initial: bool) {
                let _permit = self.0.acquire().await;
            }
        }
        let slow = p
            .add_listener(Blocked(Arc::clone(&gate)), None, vec![], vec![])
            .unwrap();
        let (log, h) = recorder();
        p.add_listener(h, None, vec![], vec![]).unwrap();
        for i in 0..100 {
            p.distribute(
                InformerEvent::Add {
                    obj: cm(&format!("o{i}")),
                    is_in_initial_list: false,
                },
                false,
            );
        }
        until(|| log.lock().unwrap().len() == 100).await;
        assert!(slow.backlog() >= 99);
        gate.add_permits(1000);
        until(|| slow.backlog() == 0).await;
    }

    #[tokio::test]
    async fn sync_events_only_to_due_listeners() {
        let (_tx, rx) = watch::channel(true);
        let p = Processor::new(rx, "test".into(), Tasks::new(), CancellationToken::new());
        let (log_fast, fast) = recorder();
        let (log_none, none) = recorder();
        p.add_listener(fast, Some(Duration::from_millis(1)), vec![], vec![])
            .unwrap();
        p.add_listener(none, None, vec![], vec![]).unwrap();
        assert!(p.next_resync_at().is_some());
        let later = Instant::now() + Duration::from_secs(2);
        assert!(p.should_resync(later));
        let o = cm("a");
        p.distribute(
            InformerEvent::Update {
                old: Arc::clone(&o),
                new: o,
                is_resync: true,
            },
            true,
        );
        until(|| log_fast.lock().unwrap().len() == 1).await;
        assert_eq!(*log_fast.lock().unwrap(), ["update a true"]);
        tokio::task::yield_now().await;
        assert!(log_none.lock().unwrap().is_empty());
        // right after, nobody is due
        assert!(!p.should_resync(later));
    }

    #[tokio::test]
    async fn removed_listener_gets_nothing_more_and_panics_are_contained() {
        let (_tx, rx) = watch::channel(true);
        let p = Processor::new(rx, "test".into(), Tasks::new(), CancellationToken::new());
        let count = Arc::new(AtomicUsize::new(0));
        let c2 = Arc::clone(&count);
        let reg = p
            .add_listener(
                handler_fn(move |_e: InformerEvent<ConfigMap>| {
                    if c2.fetch_add(1, Ordering::SeqCst) == 0 {
                        panic!("first event panics");
                    }
                }),
                None,
                vec![],
                vec![],
            )
            .unwrap();
        for n in ["a", "b"] {
            p.distribute(
                InformerEvent::Add {
                    obj: cm(n),
                    is_in_initial_list: false,
                },
                false,
            );
        }
        until(|| count.load(Ordering::SeqCst) == 2).await;
        assert!(p.remove_listener(&reg));
        assert!(reg.is_removed());
        assert_eq!(p.len(), 0);
        p.distribute(
            InformerEvent::Add {
                obj: cm("c"),
                is_in_initial_list: false,
            },
            false,
        );
        tokio::task::yield_now().await;
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_registration_is_removed_only_by_its_own_informer() {
        let (_tx, rx) = watch::channel(true);
        let a = Processor::new(
            rx.clone(),
            "a".into(),
            Tasks::new(),
            CancellationToken::new(),
        );
        let b = Processor::new(rx, "b".into(), Tasks::new(), CancellationToken::new());
        let (log_a, ha) = recorder();
        let (log_b, hb) = recorder();
        let reg_a = a.add_listener(ha, None, vec![], vec![]).unwrap();
        let reg_b = b.add_listener(hb, None, vec![], vec![]).unwrap();
        // same per-informer number, different informers
        assert_eq!(reg_a.id(), reg_b.id());

        // A's handle given to B, then B's to A: no-ops
        assert!(!b.remove_listener(&reg_a));
        assert!(!a.remove_listener(&reg_b));
        assert!(!reg_a.is_removed() && !reg_b.is_removed());
        assert_eq!((a.len(), b.len()), (1, 1));
        for (p, n) in [(&a, "to-a"), (&b, "to-b")] {
            p.distribute(
                InformerEvent::Add {
                    obj: cm(n),
                    is_in_initial_list: false,
                },
                false,
            );
        }
        until(|| log_a.lock().unwrap().len() == 1 && log_b.lock().unwrap().len() == 1).await;
        assert_eq!(*log_a.lock().unwrap(), ["add to-a false"]);
        assert_eq!(*log_b.lock().unwrap(), ["add to-b false"]);

        // each informer removes its own
        assert!(a.remove_listener(&reg_a));
        assert!(reg_a.is_removed() && !reg_b.is_removed());
        assert!(!a.remove_listener(&reg_a), "a second removal is a no-op");
        assert!(b.remove_listener(&reg_b));
        assert_eq!((a.len(), b.len()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_processor_refuses_handlers_and_leaves_no_task() {
        let (_tx, rx) = watch::channel(true);
        let cancel = CancellationToken::new();
        let tasks = Tasks::new();
        let p = Processor::new(rx, "test".into(), tasks.clone(), cancel.clone());
        // a handler stuck in its first call: stopping must not wait for it
        struct Stuck;
        impl EventHandler<ConfigMap> for Stuck {
            async fn on_add(&mut self, _obj: Arc<ConfigMap>, _initial: bool) {
                std::future::pending::<()>().await;
            }
        }
        let stuck = p.add_listener(Stuck, None, vec![cm("a")], vec![]).unwrap();
        let (_log, idle) = recorder();
        p.add_listener(idle, Some(Duration::from_secs(1)), vec![], vec![])
            .unwrap();
        assert_eq!(tasks.live(), 2);
        tokio::task::yield_now().await;
        assert_eq!(stuck.backlog(), 1);

        cancel.cancel();
        p.stop();
        let (_log, late) = recorder();
        assert!(matches!(
            p.add_listener(late, None, vec![cm("a")], vec![]),
            Err(CacheError::InformerStopped(name)) if name == "test"
        ));
        assert_eq!(p.len(), 0);
        // the clock is paused: this times out at once if a task lingers
        tokio::time::timeout(Duration::from_secs(60), tasks.wait_idle())
            .await
            .expect("every listener task ends when the informer stops");
        assert_eq!(tasks.live(), 0);
        assert!(stuck.is_removed());
    }

    #[test]
    fn add_listener_outside_runtime_is_an_error() {
        let (_tx, rx) = watch::channel(true);
        let p: Processor<ConfigMap> =
            Processor::new(rx, "test".into(), Tasks::new(), CancellationToken::new());
        let (_log, h) = recorder();
        assert!(matches!(
            p.add_listener(h, None, vec![], vec![]),
            Err(CacheError::NoRuntime(_))
        ));
    }
}
