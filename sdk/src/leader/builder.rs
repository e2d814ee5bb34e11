//! [`LeaderElectorBuilder`]: the options of an election, validated.

use std::sync::Arc;
use std::time::Duration;

use super::elector::LeaderElector;
use super::error::LeaderError;
use super::identity::{MAX_IDENTITY_LEN, default_identity};

/// Default lease duration: how long standbys wait, from the last change
/// they saw, before taking a lease whose holder stopped renewing.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default renew deadline: how long a leader keeps acting without a
/// successful renew.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default retry period: how often the leader renews and standbys try.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// client-go's `JitterFactor`: standbys wait `retry_period * (1 + rand * 1.2)`
/// between tries, and `renew_deadline` must exceed `retry_period * 1.2`.
pub(crate) const JITTER_FACTOR: f64 = 1.2;

/// The validated timing of an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

impl Timing {
    /// client-go's checks, with the reason each one matters in the error.
    pub(crate) fn validate(self) -> Result<Self, LeaderError> {
        for (option, value) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(LeaderError::ZeroDuration { option });
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaderError::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(LeaderError::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        lease_seconds(self.lease_duration)?;
        Ok(self)
    }
}

/// `leaseDurationSeconds` for a lease duration: rounded *up* to whole
/// seconds, so other replicas never wait less than the configured duration
/// (the safety margin over the renew deadline only grows).
pub(crate) fn lease_seconds(lease_duration: Duration) -> Result<i32, LeaderError> {
    let secs = lease_duration
        .as_secs()
        .saturating_add(u64::from(lease_duration.subsec_nanos() > 0));
    i32::try_from(secs.max(1)).map_err(|_| LeaderError::LeaseTooLong(lease_duration))
}

/// Options of a [`LeaderElector`], validated by [`build`](Self::build)
/// (what [`LeaderElection`](super::LeaderElection) fills in).
#[derive(Clone)]
pub(crate) struct LeaderElectorBuilder {
    client: kube::Client,
    namespace: String,
    lease_name: String,
    identity: Option<String>,
    timing: Timing,
    release_on_cancel: bool,
}

impl std::fmt::Debug for LeaderElectorBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElectorBuilder")
            .field("namespace", &self.namespace)
            .field("lease_name", &self.lease_name)
            .field("identity", &self.identity)
            .field("timing", &self.timing)
            .field("release_on_cancel", &self.release_on_cancel)
            .finish_non_exhaustive()
    }
}

impl LeaderElectorBuilder {
    pub(crate) fn new(client: kube::Client, namespace: String, lease_name: String) -> Self {
        Self {
            client,
            namespace,
            lease_name,
            identity: None,
            timing: Timing {
                lease_duration: DEFAULT_LEASE_DURATION,
                renew_deadline: DEFAULT_RENEW_DEADLINE,
                retry_period: DEFAULT_RETRY_PERIOD,
            },
            release_on_cancel: false,
        }
    }

    /// The `holderIdentity` to write; unique per process. Default
    /// `<hostname>_<random UUID>`.
    pub(crate) fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// How long standbys wait, from the last change of the Lease *they*
    /// observed, before taking it over (default 15 s). Written to the Lease
    /// rounded up to whole seconds.
    pub(crate) fn lease_duration(mut self, duration: Duration) -> Self {
        self.timing.lease_duration = duration;
        self
    }

    /// How long the leader keeps acting without a successful renew, measured
    /// from when its last successful renew was sent (default 10 s). Must be
    /// less than the lease duration.
    pub(crate) fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.timing.renew_deadline = deadline;
        self
    }

    /// How often the leader renews and standbys try to acquire (default
    /// 2 s; standbys add up to 120 % jitter, as client-go does).
    pub(crate) fn retry_period(mut self, period: Duration) -> Self {
        self.timing.retry_period = period;
        self
    }

    /// Release the lease on shutdown (empty holder, `leaseDurationSeconds: 1`)
    /// so a standby takes over at its next try instead of after the lease
    /// duration. Default `false`, as in controller-runtime; enable it only if
    /// the process stops all leader-only work before shutting the elector down.
    pub(crate) fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Validates the options.
    pub(crate) fn build(self) -> Result<LeaderElector, LeaderError> {
        if self.namespace.is_empty() {
            return Err(LeaderError::EmptyName { what: "namespace" });
        }
        if self.lease_name.is_empty() {
            return Err(LeaderError::EmptyName { what: "name" });
        }
        let identity = self.identity.unwrap_or_else(default_identity);
        if identity.is_empty() {
            return Err(LeaderError::InvalidIdentity {
                identity,
                reason: "it is empty",
            });
        }
        if identity.len() > MAX_IDENTITY_LEN {
            return Err(LeaderError::InvalidIdentity {
                identity,
                reason: "it is longer than 128 bytes",
            });
        }
        let timing = self.timing.validate()?;
        let lease_seconds = lease_seconds(timing.lease_duration)?;
        Ok(LeaderElector {
            client: self.client,
            namespace: self.namespace,
            lease_name: self.lease_name,
            identity: Arc::from(identity),
            timing,
            lease_seconds,
            release_on_cancel: self.release_on_cancel,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(lease: u64, renew: u64, retry: u64) -> Timing {
        Timing {
            lease_duration: Duration::from_millis(lease),
            renew_deadline: Duration::from_millis(renew),
            retry_period: Duration::from_millis(retry),
        }
    }

    #[test]
    fn defaults_and_short_test_timings_are_valid() {
        assert!(timing(15_000, 10_000, 2_000).validate().is_ok());
        assert!(timing(2_000, 1_500, 250).validate().is_ok());
    }

    #[test]
    fn invalid_timings_are_rejected_with_the_reason() {
        let e = timing(10_000, 10_000, 2_000).validate().unwrap_err();
        assert!(matches!(
            e,
            LeaderError::LeaseNotLongerThanRenewDeadline { .. }
        ));
        assert!(e.to_string().contains("steps down"), "{e}");

        // 2.4 s is not more than 2 s * 1.2.
        let e = timing(15_000, 2_400, 2_000).validate().unwrap_err();
        assert!(
            matches!(e, LeaderError::RenewDeadlineTooShort { .. }),
            "{e}"
        );

        let e = timing(15_000, 10_000, 0).validate().unwrap_err();
        assert_eq!(
            e,
            LeaderError::ZeroDuration {
                option: "retry_period"
            }
        );
    }

    #[test]
    fn lease_seconds_round_up() {
        assert_eq!(lease_seconds(Duration::from_millis(1_500)).unwrap(), 2);
        assert_eq!(lease_seconds(Duration::from_secs(15)).unwrap(), 15);
        assert_eq!(lease_seconds(Duration::from_millis(10)).unwrap(), 1);
        assert!(lease_seconds(Duration::from_secs(u64::MAX / 2)).is_err());
    }
}
