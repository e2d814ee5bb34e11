//! [`Gate`]: the only place that decides whether this replica may start
//! reconciling a key now, and that knows which keys it is reconciling.
//!
//! A key may start only when all of these hold (the protocol in the
//! [module docs](super)):
//! - the gate is *open*: every live member acknowledged the gate's view;
//! - this replica owns the key in that view;
//! - this replica's own Lease was renewed recently enough (`now <
//!   fresh_until`, the last successful renew's send time + renew deadline).
//!
//! A started key holds a [`ShardPermit`] until its reconcile ends; the
//! membership loop acknowledges a new view only after every permit on a key
//! it no longer owns has been dropped.
//!
//! A permit *lapses* (see [`ShardPermit::revoked`]) as soon as its key could
//! no longer start: the renew deadline passed, the replica left the ring,
//! or the current view gives the key to another member. The gate being
//! closed alone (a view change still being acknowledged) does not lapse a
//! permit whose key stays here.

use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use hashbrown::HashMap;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::view::View;

#[derive(Debug, Default)]
struct State {
    view: Option<View>,
    open: bool,
    fresh_until: Option<Instant>,
    in_flight: HashMap<String, usize>,
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
}

impl Gate {
    pub(crate) fn new(identity: Arc<str>) -> Arc<Self> {
        Arc::new(Self {
            identity,
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(()),
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

    /// A permit to reconcile `key` now, or `None` if this replica may not.
    pub(crate) fn try_start(self: &Arc<Self>, key: &str) -> Option<ShardPermit> {
        let mut state = self.state.lock();
        let fresh = state.fresh_until.is_some_and(|t| Instant::now() < t);
        let owns = state
            .view
            .as_ref()
            .is_some_and(|v| v.owns(&self.identity, key));
        if !(state.open && fresh && owns) {
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

    /// Moves to `view`, closed: no key starts until [`open`](Self::open).
    /// Returns whether the view changed.
    pub(crate) fn enter(&self, view: &View) -> bool {
        let mut state = self.state.lock();
        if state.view.as_ref() == Some(view) {
            return false;
        }
        state.view = Some(view.clone());
        state.open = false;
        drop(state);
        // Permits on keys the new view gives away lapse now.
        self.changed.send_replace(());
        true
    }

    /// Closes the gate and forgets the view (this replica is out): every
    /// permit lapses.
    pub(crate) fn leave(&self) {
        let mut state = self.state.lock();
        state.view = None;
        state.open = false;
        state.fresh_until = None;
        drop(state);
        self.changed.send_replace(());
    }

    /// Opens or closes the gate on its current view.
    pub(crate) fn set_open(&self, open: bool) {
        self.state.lock().open = open;
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
