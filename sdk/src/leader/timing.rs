//! The timing of an election: client-go's defaults and checks, and the
//! Lease's `leaseDurationSeconds`.

use std::time::Duration;

use super::error::LeaderError;

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
