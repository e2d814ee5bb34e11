//! [`LeaderHandle`]: what the rest of the process sees of an election.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::LeaderError;
use super::state::LeaderState;

/// State shared by the election task and every [`LeaderHandle`].
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: watch::Sender<LeaderState>,
    /// The current term's scope; `Some` from just before the state becomes
    /// `Leading` until just after the token is cancelled.
    pub(crate) scope: Mutex<Option<CancellationToken>>,
    /// The holder identity last observed on the Lease (`None` if free).
    pub(crate) observed_leader: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new() -> Self {
        Self {
            state: watch::Sender::new(LeaderState::Standby),
            scope: Mutex::new(None),
            observed_leader: Mutex::new(None),
        }
    }
}

/// Cancels the election when the last [`LeaderHandle`] is dropped.
#[derive(Debug)]
struct DropGuard {
    shutdown: CancellationToken,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A running election, returned by [`LeaderElection::spawn`](super::LeaderElection::spawn).
///
/// Cheap to clone; every clone sees the same election. When the last clone
/// is dropped, the election is shut down as by [`shutdown`](Self::shutdown).
#[derive(Debug, Clone)]
pub struct LeaderHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) identity: Arc<str>,
    pub(crate) lease_name: Arc<str>,
    _guard: Arc<DropGuard>,
}

impl LeaderHandle {
    pub(crate) fn new(
        shared: Arc<Shared>,
        shutdown: CancellationToken,
        identity: Arc<str>,
        lease_name: Arc<str>,
    ) -> Self {
        let _guard = Arc::new(DropGuard {
            shutdown: shutdown.clone(),
        });
        Self {
            shared,
            shutdown,
            identity,
            lease_name,
            _guard,
        }
    }

    /// Whether this replica leads right now: the value for
    /// `leader_election_master_status{name}`.
    #[cfg(test)]
    pub(crate) fn is_leader(&self) -> bool {
        self.state().is_leading()
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        *self.shared.state.borrow()
    }

    /// A `watch` receiver of the state, for metrics and for components that
    /// react to changes. Every transition is published; a slow receiver sees
    /// the latest.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.shared.state.subscribe()
    }

    /// This elector's identity, the `holderIdentity` it writes.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease's name: the `name` label of the leader-status gauge.
    pub(crate) fn lease_name(&self) -> &str {
        &self.lease_name
    }

    /// The holder identity last seen on the Lease, whoever it is (`None` when
    /// the Lease is free or not yet read).
    pub fn observed_leader(&self) -> Option<String> {
        self.shared.observed_leader.lock().clone()
    }

    /// Waits until this replica leads and returns the term's scope, a token
    /// cancelled the moment leadership ends. Start leader-only work here and
    /// stop it when the token is cancelled.
    ///
    /// Fails with [`LeaderError::NotLeading`] if the elector ends first.
    pub async fn became_leader(&self) -> Result<CancellationToken, LeaderError> {
        let mut rx = self.subscribe();
        loop {
            let state = *rx
                .wait_for(|s| s.is_leading() || s.is_final())
                .await
                .map_err(|_| LeaderError::NotLeading {
                    state: LeaderState::Stopped,
                })?;
            if state.is_final() {
                return Err(LeaderError::NotLeading { state });
            }
            if let Some(scope) = self.shared.scope.lock().clone() {
                return Ok(scope);
            }
            // The term ended between the state change and this read: the
            // state is final by now, or about to be.
            if rx.changed().await.is_err() {
                return Err(LeaderError::NotLeading {
                    state: self.state(),
                });
            }
        }
    }

    /// Waits until the elector ends, and returns the final state
    /// ([`Lost`](LeaderState::Lost) or [`Stopped`](LeaderState::Stopped)).
    pub async fn stopped(&self) -> LeaderState {
        let mut rx = self.subscribe();
        match rx.wait_for(|s| s.is_final()).await {
            Ok(state) => *state,
            Err(_) => LeaderState::Stopped,
        }
    }

    /// Shuts the election down and waits until it has: the leading scope is
    /// cancelled and, with [`release_on_cancel`](super::LeaderElection::release_on_cancel),
    /// the lease is released so another replica takes over at once.
    ///
    /// Stop the work the lease guards *before* calling this: releasing tells
    /// other replicas they may act now.
    pub async fn shutdown(&self) -> LeaderState {
        self.shutdown.cancel();
        self.stopped().await
    }
}
