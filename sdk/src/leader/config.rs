//! [`LeaderElection`]: the options of one election, for a manager or on
//! its own.

use std::time::Duration;

use super::builder::LeaderElectorBuilder;
use super::elector::LeaderElector;
use super::error::LeaderError;
use super::handle::LeaderHandle;
use super::timing::{DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD};

/// Leader election on a `coordination.k8s.io/v1` Lease: of all replicas
/// of the operator, only the one holding the Lease acts (see the
/// [module docs](crate::leader) for the semantics). Give it to
/// [`ManagerBuilder::leader_election`](crate::manager::ManagerBuilder::leader_election),
/// or [`spawn`](Self::spawn) it on its own.
///
/// ```
/// use std::time::Duration;
/// use opkit::leader::LeaderElection;
///
/// let election = LeaderElection::new("memcached-operator-lock")
///     .namespace("memcached-system")
///     .lease_duration(Duration::from_secs(15))
///     .release_on_cancel(true);
/// ```
#[derive(Debug, Clone)]
pub struct LeaderElection {
    pub(crate) lease_name: String,
    pub(crate) namespace: Option<String>,
    identity: Option<String>,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    release_on_cancel: bool,
}

impl LeaderElection {
    /// Elect a leader on the Lease `lease_name` (controller-runtime's
    /// `LeaderElectionID`): the same name on every replica, unique per
    /// operator.
    pub fn new(lease_name: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            namespace: None,
            identity: None,
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: false,
        }
    }

    /// The Lease's namespace. Default: the connection's namespace (in a
    /// cluster, the pod's; from a kubeconfig, the context's, else `default`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// This replica's identity (default `<hostname>_<random UUID>`).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// How long standbys wait before taking a Lease that is not renewed
    /// (default 15 s).
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long the leader keeps reconciling without a successful renew
    /// (default 10 s; less than the lease duration).
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// How often the leader renews and standbys try (default 2 s).
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// Release the Lease at graceful shutdown, after every controller and
    /// runnable has stopped, so a standby takes over at its next try rather
    /// than after the lease duration (default `false`, as in
    /// controller-runtime). Safe only if nothing else in the process acts
    /// as leader after the manager returns.
    pub fn release_on_cancel(mut self, release: bool) -> Self {
        self.release_on_cancel = release;
        self
    }

    /// Validates the options and starts the election on its own (outside a
    /// [`Manager`](crate::manager::Manager)) on the current tokio runtime,
    /// in the Lease's [`namespace`](Self::namespace), else the client's
    /// default namespace. The election runs until
    /// [`LeaderHandle::shutdown`], until the last handle is dropped, or
    /// until leadership is lost.
    pub fn spawn(self, client: kube::Client) -> Result<LeaderHandle, LeaderError> {
        let namespace = match &self.namespace {
            Some(namespace) => namespace.clone(),
            None => client.default_namespace().to_owned(),
        };
        Ok(self.elector(client, namespace)?.spawn())
    }

    /// The validated, not yet running elector on `namespace/lease_name`.
    pub(crate) fn elector(
        self,
        client: kube::Client,
        namespace: String,
    ) -> Result<LeaderElector, LeaderError> {
        let mut builder = LeaderElectorBuilder::new(client, namespace, self.lease_name)
            .lease_duration(self.lease_duration)
            .renew_deadline(self.renew_deadline)
            .retry_period(self.retry_period)
            .release_on_cancel(self.release_on_cancel);
        if let Some(identity) = self.identity {
            builder = builder.identity(identity);
        }
        builder.build()
    }
}
