//! [`LeaderElectorBuilder`]: the options of an election, validated.

use std::sync::Arc;
use std::time::Duration;

use super::elector::LeaderElector;
use super::error::LeaderError;
use super::identity::{MAX_IDENTITY_LEN, default_identity};
use super::timing::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, Timing, lease_seconds,
};

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
