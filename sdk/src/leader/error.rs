//! Typed errors of `opkit::leader`.

use std::time::Duration;

use super::state::LeaderState;

/// Why a [`LeaderElection`](super::LeaderElection) could not start, or why
/// leadership could not be awaited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaderError {
    /// The lease name or namespace is empty.
    #[error("the lease {what} must not be empty")]
    EmptyName {
        /// `"name"` or `"namespace"`.
        what: &'static str,
    },
    /// The identity is empty or longer than a Lease's holderIdentity allows.
    #[error("the elector identity {identity:?} is invalid: {reason}")]
    InvalidIdentity {
        /// The identity that was given.
        identity: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A duration option is zero.
    #[error("{option} must be greater than zero")]
    ZeroDuration {
        /// `"lease_duration"`, `"renew_deadline"` or `"retry_period"`.
        option: &'static str,
    },
    /// `lease_duration <= renew_deadline`: a leader that gives up at its renew
    /// deadline could still be acting when another replica takes the lease.
    #[error(
        "lease_duration ({lease_duration:?}) must be greater than renew_deadline ({renew_deadline:?}), \
         so a leader that cannot renew steps down before another replica may take the lease"
    )]
    LeaseNotLongerThanRenewDeadline {
        /// The configured lease duration.
        lease_duration: Duration,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// `renew_deadline <= retry_period * 1.2` (client-go's `JitterFactor`):
    /// the leader would get at most one renew attempt per deadline.
    #[error(
        "renew_deadline ({renew_deadline:?}) must be greater than retry_period * 1.2 ({retry_period:?} * 1.2), \
         so a leader gets more than one renew attempt before it steps down"
    )]
    RenewDeadlineTooShort {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },
    /// The lease duration does not fit a Lease's `leaseDurationSeconds` (an i32).
    #[error("lease_duration {0:?} is too long for a Lease's leaseDurationSeconds")]
    LeaseTooLong(Duration),
    /// The elector ended (lost leadership or was shut down) before this
    /// replica became leader.
    #[error("the leader elector ended in state {state:?} before this replica led")]
    NotLeading {
        /// The state the elector ended in.
        state: LeaderState,
    },
}
