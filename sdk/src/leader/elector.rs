//! [`LeaderElector`] and the election loop: acquire every retry period,
//! then renew until shut down or until the renew deadline passes.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::election::{Election, Round};
use super::handle::{LeaderHandle, Shared};
use super::lock::{KubeLeaseLock, LeaseLock};
use super::state::LeaderState;
use super::timing::{JITTER_FACTOR, Timing};

/// A configured, not yet running, election on one Lease.
///
/// Built from a [`LeaderElection`](super::LeaderElection), then
/// [`spawn`](Self::spawn)ed.
#[derive(Clone)]
pub(crate) struct LeaderElector {
    pub(crate) client: kube::Client,
    pub(crate) namespace: String,
    pub(crate) lease_name: String,
    pub(crate) identity: Arc<str>,
    pub(crate) timing: Timing,
    pub(crate) lease_seconds: i32,
    pub(crate) release_on_cancel: bool,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("namespace", &self.namespace)
            .field("lease_name", &self.lease_name)
            .field("identity", &self.identity)
            .field("timing", &self.timing)
            .field("release_on_cancel", &self.release_on_cancel)
            .finish_non_exhaustive()
    }
}

impl LeaderElector {
    /// Starts the election on the current tokio runtime and returns its
    /// handle. The election runs until [`LeaderHandle::shutdown`], until the
    /// last handle is dropped, or until leadership is lost.
    pub(crate) fn spawn(self) -> LeaderHandle {
        let lock = KubeLeaseLock::new(self.client, &self.namespace, &self.lease_name);
        let election = Election::new(
            lock,
            self.namespace,
            self.lease_name.clone(),
            self.identity.clone(),
            self.lease_seconds,
        );
        spawn_election(
            election,
            self.timing,
            self.release_on_cancel,
            self.identity,
            Arc::from(self.lease_name),
        )
    }
}

/// Spawns the loop over any lock; the unit tests use an in-memory one.
pub(crate) fn spawn_election<L: LeaseLock>(
    election: Election<L>,
    timing: Timing,
    release_on_cancel: bool,
    identity: Arc<str>,
    lease_name: Arc<str>,
) -> LeaderHandle {
    let shared = Arc::new(Shared::new());
    let shutdown = CancellationToken::new();
    let runner = Runner {
        election,
        timing,
        release_on_cancel,
        shared: shared.clone(),
        shutdown: shutdown.clone(),
        identity: identity.clone(),
    };
    tokio::spawn(runner.run());
    LeaderHandle::new(shared, shutdown, identity, lease_name)
}

/// How one attempt of the leading loop ended.
enum Step {
    Renewed(Instant),
    Failed,
    Shutdown,
    Deadline,
    Taken(String),
}

struct Runner<L> {
    election: Election<L>,
    timing: Timing,
    release_on_cancel: bool,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    identity: Arc<str>,
}

impl<L: LeaseLock> Runner<L> {
    async fn run(mut self) {
        tracing::info!(lease = %self.election.describe(), identity = %self.identity, "attempting to acquire leader lease");
        let Some(renewed_at) = self.acquire().await else {
            self.finish(LeaderState::Stopped);
            return;
        };
        let scope = CancellationToken::new();
        *self.shared.scope.lock() = Some(scope.clone());
        self.shared.state.send_replace(LeaderState::Leading);
        tracing::info!(lease = %self.election.describe(), identity = %self.identity, "successfully acquired lease; leading");

        let end = self.renew(renewed_at).await;
        // Stop acting first: cancel the scope before anything else can happen.
        scope.cancel();
        *self.shared.scope.lock() = None;
        match end {
            LeaderState::Lost => {
                self.finish(LeaderState::Lost);
            }
            _ => {
                if self.release_on_cancel {
                    self.release().await;
                }
                self.finish(LeaderState::Stopped);
            }
        }
    }

    fn finish(&self, state: LeaderState) {
        self.shared.state.send_replace(state);
        tracing::info!(lease = %self.election.describe(), identity = %self.identity, ?state, "leader election ended");
    }

    /// Copies the observed holder to the handle, logging a new leader.
    fn publish_holder(&self) {
        let observed = self.election.observed_holder().map(str::to_owned);
        let mut current = self.shared.observed_leader.lock();
        if *current != observed {
            tracing::info!(lease = %self.election.describe(), leader = ?observed, "new leader observed");
            *current = observed;
        }
    }

    /// Tries every jittered retry period until the lease is ours; returns
    /// when the successful write was sent, or `None` on shutdown.
    async fn acquire(&mut self) -> Option<Instant> {
        let mut failures = 0u32;
        loop {
            let sent = Instant::now();
            let outcome = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return None,
                r = tokio::time::timeout(self.timing.renew_deadline, self.election.try_acquire_or_renew()) => r,
            };
            self.publish_holder();
            let wait = jittered(self.timing.retry_period);
            match outcome {
                Ok(Ok(Round::Ours)) => return Some(sent),
                Ok(Ok(Round::HeldBy(holder))) => {
                    failures = 0;
                    tracing::debug!(lease = %self.election.describe(), %holder, retry_in = ?wait, "lease is held and has not expired");
                }
                Ok(Err(error)) => {
                    failures += 1;
                    tracing::warn!(lease = %self.election.describe(), %error, attempt = failures, retry_in = ?wait, "failed to acquire the lease; retrying");
                }
                Err(_) => {
                    failures += 1;
                    tracing::warn!(lease = %self.election.describe(), timeout = ?self.timing.renew_deadline, attempt = failures, retry_in = ?wait, "acquiring the lease timed out; retrying");
                }
            }
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return None,
                () = sleep(wait) => {}
            }
        }
    }

    /// Renews every retry period. Returns `Lost` as soon as the renew
    /// deadline passes, counted from when the last successful renew was
    /// sent, or as soon as another holder is seen; `Stopped` on shutdown.
    async fn renew(&mut self, mut renewed_at: Instant) -> LeaderState {
        let mut attempt_at = renewed_at;
        let mut failures = 0u32;
        loop {
            let deadline = renewed_at + self.timing.renew_deadline;
            let next = attempt_at + self.timing.retry_period;
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return LeaderState::Stopped,
                () = sleep_until(deadline) => return self.lost("renew deadline passed without a successful renew"),
                () = sleep_until(next) => {}
            }
            attempt_at = Instant::now();
            let step = {
                let election = &mut self.election;
                tokio::select! {
                    biased;
                    () = self.shutdown.cancelled() => Step::Shutdown,
                    () = sleep_until(deadline) => Step::Deadline,
                    r = election.try_acquire_or_renew() => match r {
                        Ok(Round::Ours) => Step::Renewed(attempt_at),
                        Ok(Round::HeldBy(holder)) => Step::Taken(holder),
                        Err(error) => {
                            failures += 1;
                            let next = attempt_at + self.timing.retry_period;
                            tracing::warn!(
                                lease = %election.describe(),
                                %error,
                                attempt = failures,
                                retry_in = ?next.saturating_duration_since(Instant::now()),
                                deadline_in = ?deadline.saturating_duration_since(Instant::now()),
                                "failed to renew the lease; retrying until the renew deadline"
                            );
                            Step::Failed
                        }
                    },
                }
            };
            self.publish_holder();
            match step {
                Step::Renewed(at) => {
                    renewed_at = at;
                    failures = 0;
                    tracing::trace!(lease = %self.election.describe(), "renewed the lease");
                }
                Step::Failed => {}
                Step::Shutdown => return LeaderState::Stopped,
                Step::Deadline => {
                    return self.lost("renew deadline passed without a successful renew");
                }
                Step::Taken(holder) => {
                    tracing::warn!(lease = %self.election.describe(), %holder, "another replica holds the lease");
                    return self.lost("another replica holds the lease");
                }
            }
        }
    }

    fn lost(&self, why: &'static str) -> LeaderState {
        tracing::error!(lease = %self.election.describe(), identity = %self.identity, reason = why, "leader election lost");
        LeaderState::Lost
    }

    /// Releases the lease, bounded by the renew deadline.
    async fn release(&mut self) {
        let describe = self.election.describe().to_owned();
        match tokio::time::timeout(self.timing.renew_deadline, self.election.release()).await {
            Ok(Ok(true)) => tracing::info!(lease = %describe, "released the lease"),
            Ok(Ok(false)) => {
                tracing::info!(lease = %describe, "the lease was no longer ours; nothing to release")
            }
            Ok(Err(error)) => {
                tracing::warn!(lease = %describe, %error, "failed to release the lease; others take it when it expires")
            }
            Err(_) => {
                tracing::warn!(lease = %describe, "releasing the lease timed out; others take it when it expires")
            }
        }
        self.publish_holder();
    }
}

/// `period * (1 + rand * 1.2)`, as client-go's `wait.Jitter`.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + fastrand::f64() * JITTER_FACTOR)
}
