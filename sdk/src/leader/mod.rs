//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics, so that of several replicas of an operator exactly one acts.
//!
//! ```no_run
//! use std::time::Duration;
//! use opkit::leader::{LeaderElection, LeaderState};
//!
//! # async fn example(client: kube::Client) -> Result<(), opkit::leader::LeaderError> {
//! // What a Manager does with `ManagerBuilder::leader_election`, on its own:
//! let leader = LeaderElection::new("memcached-operator-lock")
//!     .namespace("memcached-system")
//!     .lease_duration(Duration::from_secs(15))
//!     .renew_deadline(Duration::from_secs(10))
//!     .retry_period(Duration::from_secs(2))
//!     .release_on_cancel(true)
//!     .spawn(client)?;
//!
//! // Caches start on every replica; leader-only work waits for the lease.
//! let scope = leader.became_leader().await?;
//! let worker = tokio::spawn(async move {
//!     // Reconcile until the scope is cancelled: leadership ended.
//!     scope.cancelled().await;
//! });
//!
//! // Metrics and probes read the state; it changes Standby → Leading → Lost | Stopped.
//! let mut states = leader.subscribe();
//! assert_eq!(*states.borrow_and_update(), LeaderState::Leading);
//!
//! // Graceful shutdown: stop the leader-only work first, then release.
//! worker.abort();
//! let _ = worker.await;
//! leader.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # How it works
//!
//! Each replica runs an elector with a unique identity (default
//! `<hostname>_<random UUID>`). Every *retry period* (plus up to 120 %
//! jitter) a standby reads the Lease. It takes the Lease when it does not
//! exist, has an empty holder, or has not changed for `leaseDurationSeconds`
//! **by the standby's own clock**: expiry is judged from the time this
//! elector last *observed a change* of the record, never from the holder's
//! timestamps, so clock skew between nodes does not matter. Every write
//! carries the Lease's `resourceVersion`; a 409 Conflict means another
//! replica won this round.
//!
//! The leader renews every retry period. If no renew succeeds within the
//! *renew deadline*, measured from when its last successful renew was
//! *sent*, it stops acting at once: the leading scope is cancelled and the
//! state becomes [`LeaderState::Lost`]. Another replica can take the Lease
//! only *lease duration* after it observed that renew, which is later than
//! the renew was sent; since the renew deadline is shorter than the lease
//! duration, the old leader has always stopped before a new one starts.
//!
//! A lost election is final, as in client-go: the process should stop its
//! controllers and exit, to be restarted with a clean state.
//!
//! # Defaults and validation
//!
//! | option | default | rule |
//! |---|---|---|
//! | lease duration | 15 s | > renew deadline; written rounded up to whole seconds |
//! | renew deadline | 10 s | > retry period × 1.2 (client-go's `JitterFactor`) |
//! | retry period | 2 s | > 0 |
//! | release on cancel | `false` | on shutdown: empty holder, `leaseDurationSeconds: 1` |
//!
//! # RBAC
//!
//! The elector needs `get`, `create` and `update` on `leases` in API group
//! `coordination.k8s.io`, in the Lease's namespace.

mod builder;
mod config;
mod election;
mod elector;
mod error;
mod handle;
mod identity;
mod lock;
mod state;
mod timing;

#[cfg(test)]
mod tests;

pub use config::LeaderElection;
pub(crate) use elector::LeaderElector;
pub use error::LeaderError;
pub use handle::LeaderHandle;
#[cfg(feature = "shard")]
pub(crate) use identity::default_identity;
pub use state::LeaderState;
pub use timing::{DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD};
#[cfg(feature = "shard")]
pub(crate) use timing::{Timing as LeaseTiming, lease_seconds};
