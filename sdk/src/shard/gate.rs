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

use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::Mutex;
use tokio::time::Instant;

use super::view::View;

#[derive(Debug, Default)]
struct State {
    view: Option<View>,
    open: bool,
    fresh_until: Option<Instant>,
    in_flight: HashMap<String, usize>,
}

/// Shared between the membership loop and every permit.
#[derive(Debug)]
pub(crate) struct Gate {
    identity: Arc<str>,
    state: Mutex<State>,
}

impl Gate {
    pub(crate) fn new(identity: Arc<str>) -> Arc<Self> {
        Arc::new(Self {
            identity,
            state: Mutex::new(State::default()),
        })
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
        true
    }

    /// Closes the gate and forgets the view (this replica is out).
    pub(crate) fn leave(&self) {
        let mut state = self.state.lock();
        state.view = None;
        state.open = false;
        state.fresh_until = None;
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
}

impl Drop for ShardPermit {
    fn drop(&mut self) {
        self.gate.finish(&self.key);
    }
}
