//! [`Gate`]: the only place that decides whether this replica may start
//! reconciling a key now, and that knows which keys it is reconciling.
//!
//! A key may start only when this replica's own Lease was renewed recently
//! enough (`now < fresh_until`, the last successful renew's send time +
//! renew deadline), this replica owns the key in the gate's current view,
//! and either
//! - the gate is *open*: every live member acknowledged the current view
//!   (the protocol in the [module docs](super)); or
//! - the gate is *closed* (a view change is being acknowledged) and this
//!   replica also owns the key in every view that may still be open on
//!   another replica: the last view this gate was open on, and every view
//!   this replica has acknowledged since ([`Gate::acknowledged`]). Another
//!   replica can only be open on a view whose members all acknowledged it,
//!   this replica included, so a key this replica owns in all of those is
//!   owned by no one else in any of them: only keys that move wait for the
//!   handover. (Owning the key in the new view and the last open one is not
//!   enough: a view acknowledged in between may have given it to a replica
//!   that opened on it and is still reconciling it.)
//!
//! A started key holds a [`ShardPermit`] until its reconcile ends; the
//! membership loop acknowledges a new view only after every permit on a key
//! it no longer owns has been dropped.
//!
//! A key this replica owns in its current view but may not start yet is
//! *paused*: the gate counts the distinct paused keys until it opens
//! ([`Gate::paused`], the `opkit_shard_paused_keys` gauge), which are only
//! the keys that move.
//!
//! A permit *lapses* (see [`ShardPermit::revoked`]) as soon as its key could
//! no longer start: the renew deadline passed, the replica left the ring,
//! or the current view gives the key to another member. The gate being
//! closed alone (a view change still being acknowledged) does not lapse a
//! permit whose key stays here.

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use hashbrown::{HashMap, HashSet};
use parking_lot::Mutex;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::view::View;

#[derive(Debug, Default)]
struct State {
    view: Option<View>,
    open: bool,
    /// The view this gate was last open on (`None`: never, since joining
    /// or since it stopped).
    last_open: Option<View>,
    /// The views this replica acknowledged since it was last open (in
    /// the order acknowledged, each once): with `last_open`, every view
    /// that may be open on another replica.
    acked_since: Vec<View>,
    fresh_until: Option<Instant>,
    in_flight: HashMap<String, usize>,
    /// Keys owned in the current view but refused since the gate closed.
    paused: HashSet<String>,
}

impl State {
    /// Whether `identity` owns `key` in every view that may be open on
    /// another replica while this gate is closed.
    fn owns_in_every_open_view(&self, identity: &str, key: &str) -> bool {
        self.last_open
            .as_ref()
            .is_some_and(|last| last.owns(identity, key))
            && self.acked_since.iter().all(|v| v.owns(identity, key))
    }

    fn clear_paused(&mut self, gauge: &Gauge) {
        self.paused.clear();
        gauge.set(0);
    }
}

/// Why a permit lapsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lapse {
    /// This replica's Lease was not renewed by its renew deadline.
    RenewDeadline,
    /// This replica left the ring (shut down, or removed by the others).
    Left,
    /// The current member set gives the key to another replica.
    Moved,
}

impl Lapse {
    /// For logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::RenewDeadline => "renew deadline passed",
            Self::Left => "left the ring",
            Self::Moved => "key moved to another replica",
        }
    }
}

/// Shared between the membership loop and every permit.
#[derive(Debug)]
pub(crate) struct Gate {
    identity: Arc<str>,
    state: Mutex<State>,
    /// Signalled when a view is entered or left, for permits awaiting
    /// their lapse (the renew deadline they watch on the clock).
    changed: watch::Sender<()>,
    /// The number of paused keys, for `opkit_shard_paused_keys`.
    paused_gauge: Gauge,
}

impl Gate {
    pub(crate) fn new(identity: Arc<str>) -> Arc<Self> {
        Arc::new(Self {
            identity,
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(()),
            paused_gauge: Gauge::default(),
        })
    }

    /// Why a permit on `key` is no longer good, or, while it still is, the
    /// instant it lapses at the latest (the renew deadline). Reads the
    /// clock now: never relies on a timer having fired.
    fn lapse(&self, key: &str) -> Result<Instant, Lapse> {
        let state = self.state.lock();
        let Some(view) = &state.view else {
            return Err(Lapse::Left);
        };
        if !view.owns(&self.identity, key) {
            return Err(Lapse::Moved);
        }
        match state.fresh_until {
            Some(until) if Instant::now() < until => Ok(until),
            _ => Err(Lapse::RenewDeadline),
        }
    }

    /// Completes when a permit on `key` lapses. Checks the gate on every
    /// poll before waiting, so that a task polling this first (a `biased`
    /// select) sees a passed deadline even before the timer driver ran —
    /// as after the process resumes from SIGSTOP.
    async fn lapsed(&self, key: &str) -> Lapse {
        let mut changes = self.changed.subscribe();
        loop {
            let until = match self.lapse(key) {
                Ok(until) => until,
                Err(lapse) => return lapse,
            };
            let mut wait = pin!(async {
                tokio::select! {
                    () = sleep_until(until) => {}
                    _ = changes.changed() => {}
                }
            });
            let lapsed = std::future::poll_fn(|cx| {
                if let Err(lapse) = self.lapse(key) {
                    return Poll::Ready(Some(lapse));
                }
                wait.as_mut().poll(cx).map(|()| None)
            })
            .await;
            if let Some(lapse) = lapsed {
                return lapse;
            }
        }
    }

    /// A permit to reconcile `key` now, or `None` if this replica may not
    /// (see the [module docs](self) for when it may).
    pub(crate) fn try_start(self: &Arc<Self>, key: &str) -> Option<ShardPermit> {
        let mut state = self.state.lock();
        let fresh = state.fresh_until.is_some_and(|t| Instant::now() < t);
        let owns = state
            .view
            .as_ref()
            .is_some_and(|v| v.owns(&self.identity, key));
        if !(fresh && owns) {
            return None;
        }
        if !state.open && !state.owns_in_every_open_view(&self.identity, key) {
            // Owned here, but it moves: wait until every member acknowledged.
            if state.paused.insert(key.to_owned()) {
                self.paused_gauge
                    .set(i64::try_from(state.paused.len()).unwrap_or(i64::MAX));
            }
            return None;
        }
        *state.in_flight.entry_ref(key).or_insert(0) += 1;
        Some(ShardPermit {
            gate: self.clone(),
            key: key.to_owned(),
        })
    }

    /// Whether this replica owns `key` in the gate's current view (open or
    /// not): what a cache or a label coordinator uses, not a permit.
    pub(crate) fn owns(&self, key: &str) -> bool {
        self.state
            .lock()
            .view
            .as_ref()
            .is_some_and(|v| v.owns(&self.identity, key))
    }

    /// Moves to `view`, closed: until [`open`](Self::set_open), only keys
    /// this replica owns in every view that may be open elsewhere start.
    /// Returns whether the view changed.
    pub(crate) fn enter(&self, view: &View) -> bool {
        let mut state = self.state.lock();
        if state.view.as_ref() == Some(view) {
            return false;
        }
        state.view = Some(view.clone());
        state.open = false;
        // A key paused on the old view may be startable (or not owned) now.
        state.clear_paused(&self.paused_gauge);
        drop(state);
        // Permits on keys the new view gives away lapse now.
        self.changed.send_replace(());
        true
    }

    /// Records that this replica is about to acknowledge `view` in its
    /// Lease. Called *before* the write: a write whose reply is lost may
    /// still have been applied, and from then on another replica may open
    /// on `view`.
    pub(crate) fn acknowledged(&self, view: &View) {
        let mut state = self.state.lock();
        if !state.acked_since.iter().any(|v| v.id() == view.id()) {
            state.acked_since.push(view.clone());
        }
    }

    /// Closes the gate and forgets the view (this replica is out): every
    /// permit lapses.
    pub(crate) fn leave(&self) {
        let mut state = self.state.lock();
        state.view = None;
        state.open = false;
        state.last_open = None;
        state.acked_since.clear();
        state.fresh_until = None;
        state.clear_paused(&self.paused_gauge);
        drop(state);
        self.changed.send_replace(());
    }

    /// Stops granting permits on any key (a graceful shutdown), keeping
    /// the view: held permits stay good until they lapse as usual.
    pub(crate) fn stop(&self) {
        let mut state = self.state.lock();
        state.open = false;
        state.last_open = None;
        state.acked_since.clear();
    }

    /// Opens or closes the gate on its current view. Opening makes the
    /// current view the last open one; returns how many paused keys it
    /// releases.
    pub(crate) fn set_open(&self, open: bool) -> usize {
        let mut state = self.state.lock();
        state.open = open;
        if !open {
            return 0;
        }
        state.last_open = state.view.clone();
        state.acked_since.clear();
        let released = state.paused.len();
        state.clear_paused(&self.paused_gauge);
        released
    }

    /// The latest instant a key may start, from the last successful renew.
    pub(crate) fn set_fresh_until(&self, until: Instant) {
        self.state.lock().fresh_until = Some(until);
    }

    /// Whether no key is in flight that `view` does not give this replica:
    /// when true, this replica may acknowledge `view`.
    pub(crate) fn drained_for(&self, view: Option<&View>) -> bool {
        let state = self.state.lock();
        state.in_flight.keys().all(|key| match view {
            Some(view) => view.owns(&self.identity, key),
            None => false,
        })
    }

    /// Whether a key this replica owns would be allowed to start now.
    pub(crate) fn is_active(&self) -> bool {
        let state = self.state.lock();
        state.open && state.view.is_some() && state.fresh_until.is_some_and(|t| Instant::now() < t)
    }

    /// The members of the current view (empty when out of the ring).
    pub(crate) fn members(&self) -> Vec<String> {
        self.state
            .lock()
            .view
            .as_ref()
            .map(|v| v.ring().members().to_vec())
            .unwrap_or_default()
    }

    /// Keys reconciling now.
    pub(crate) fn in_flight(&self) -> usize {
        self.state.lock().in_flight.len()
    }

    /// Keys this replica owns in its current view that were refused since
    /// the gate closed because they move (none while it is open). The
    /// metric reads the gauge; the tests read this.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn paused(&self) -> usize {
        self.state.lock().paused.len()
    }

    /// The gauge kept at [`paused`](Self::paused), to register.
    pub(crate) fn paused_gauge(&self) -> Gauge {
        self.paused_gauge.clone()
    }

    fn finish(&self, key: &str) {
        let mut state = self.state.lock();
        if let Some(count) = state.in_flight.get_mut(key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.in_flight.remove(key);
            }
        }
    }
}

/// Proof that this replica may reconcile one key; hold it for the whole
/// reconcile and drop it when done. While any permit on a key is held, this
/// replica does not acknowledge a view that gives the key to another
/// replica, so the other replica does not start it.
///
/// A permit can *lapse* while held (this replica's Lease was not renewed
/// by its renew deadline, the replica left the ring, or the key moved):
/// race the reconcile against [`revoked`](Self::revoked) and drop it when
/// that completes, as a sharded [`Controller`](crate::controller::Controller)
/// does.
#[derive(Debug)]
#[must_use = "the key counts as reconciling only while the permit is held"]
pub struct ShardPermit {
    gate: Arc<Gate>,
    key: String,
}

impl ShardPermit {
    /// The key this permit is for.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Completes when this permit lapses: this replica's Lease was not
    /// renewed by its renew deadline, the replica left the ring, or the
    /// current member set gives the key to another replica. From then on
    /// another replica may soon start the key: drop the work (poll this
    /// first, in a `biased` `tokio::select!`, so that a replica resumed
    /// from a freeze checks it before the work runs again), then the permit.
    ///
    /// ```no_run
    /// # async fn example(shard: opkit::shard::ShardHandle) {
    /// if let Some(permit) = shard.try_start("default/my-memcached") {
    ///     tokio::select! {
    ///         biased;
    ///         () = permit.revoked() => { /* abandoned: not ours any more */ }
    ///         () = async { /* ... reconcile ... */ } => {}
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn revoked(&self) {
        self.gate.lapsed(&self.key).await;
    }

    /// [`revoked`](Self::revoked), with why.
    pub(crate) async fn lapsed(&self) -> Lapse {
        self.gate.lapsed(&self.key).await
    }
}

impl Drop for ShardPermit {
    fn drop(&mut self) {
        self.gate.finish(&self.key);
    }
}
