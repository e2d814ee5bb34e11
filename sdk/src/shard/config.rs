//! [`Sharding`]: the options of one ring, validated.

use std::sync::Arc;
use std::time::Duration;

use crate::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, lease_seconds,
};

use super::error::ShardError;
use super::handle::ShardHandle;
use super::member::{Member, Timing, lease_name, spawn_member, valid_identity};
use super::store::KubeLeaseStore;
use super::view::KeyScheme;

/// The longest ring name: it is a label value (63) and the prefix of each
/// member Lease's name, `<ring>-<16 hex digits>`.
const MAX_RING_LEN: usize = 63;

/// Split one operator's objects across its replicas: each replica holds a
/// Lease labelled with the ring's name, and owns the keys the ring gives
/// it (see the [module docs](crate::shard) for the protocol).
///
/// ```
/// use std::time::Duration;
/// use opkit::shard::Sharding;
///
/// let sharding = Sharding::new("memcached-operator")
///     .namespace("memcached-system")
///     .lease_duration(Duration::from_secs(15));
/// ```
#[derive(Debug, Clone)]
pub struct Sharding {
    ring: String,
    namespace: Option<String>,
    identity: Option<String>,
    lease_duration: Duration,
    renew_deadline: Duration,
    retry_period: Duration,
    scheme: KeyScheme,
}

impl Sharding {
    /// A ring named `ring`: the same name on every replica, unique per
    /// operator (and per sharded controller group).
    pub fn new(ring: impl Into<String>) -> Self {
        Self {
            ring: ring.into(),
            namespace: None,
            identity: None,
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            scheme: KeyScheme::Object,
        }
    }

    /// Assign whole namespaces: a key's owner is decided by its namespace
    /// alone, hashed as a Kubernetes 1.36 apiserver hashes
    /// `object.metadata.namespace` for a sharded list/watch (KEP-5866).
    /// Each replica's cache then lists and watches only its share of the
    /// primary kind and of the kinds it owns (an owned object lives in its
    /// owner's namespace, so it lands on the same replica), where the
    /// server supports it (feature gate `ShardedListAndWatch`). Elsewhere
    /// the primary kind runs in label mode: the replicas label each object
    /// with its owner's shard and each caches only its own label's (this
    /// needs `patch` on the primary kind); owned kinds are then cached
    /// whole. See the [module docs](crate::shard). Balance is per namespace: spread the objects
    /// over many more namespaces than replicas. A divided kind is divided
    /// for every reader in the process: a controller that reads objects of
    /// a kind another one owns, in namespaces this replica does not own,
    /// does not find them in the cache. Every replica of a ring must agree
    /// on this option: replicas that differ log an error and never start a
    /// key (see the [module docs](crate::shard)).
    pub fn by_namespace(mut self) -> Self {
        self.scheme = KeyScheme::Namespace;
        self
    }

    /// The member Leases' namespace. Default: the client's namespace.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// This replica's identity (default `<hostname>_<random UUID>`).
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    /// How long others wait, from the last change they saw of a member's
    /// Lease, before removing it (default 15 s).
    pub fn lease_duration(mut self, duration: Duration) -> Self {
        self.lease_duration = duration;
        self
    }

    /// How long a replica keeps starting reconciles without a successful
    /// renew (default 10 s; less than the lease duration).
    pub fn renew_deadline(mut self, deadline: Duration) -> Self {
        self.renew_deadline = deadline;
        self
    }

    /// How often a replica renews its Lease and reads the others (default 2 s).
    pub fn retry_period(mut self, period: Duration) -> Self {
        self.retry_period = period;
        self
    }

    /// Whether [`namespace`](Self::namespace) was set.
    pub(crate) fn has_namespace(&self) -> bool {
        self.namespace.is_some()
    }

    /// Validates the options and joins the ring on the current tokio
    /// runtime. Membership runs until [`ShardHandle::shutdown`] or until
    /// the last handle is dropped.
    pub fn spawn(self, client: kube::Client) -> Result<ShardHandle, ShardError> {
        let namespace = match &self.namespace {
            Some(namespace) => namespace.clone(),
            None => client.default_namespace().to_owned(),
        };
        let member = self.member(namespace)?;
        let store = KubeLeaseStore::new(client, &member.namespace, &member.ring);
        Ok(spawn_member(member, store))
    }

    /// The validated member, not yet running.
    pub(crate) fn member(self, namespace: String) -> Result<Member, ShardError> {
        validate_ring(&self.ring)?;
        if namespace.is_empty() {
            return Err(ShardError::EmptyNamespace);
        }
        let identity = match self.identity {
            Some(identity) => identity,
            None => crate::leader::default_identity(),
        };
        if !valid_identity(&identity) {
            return Err(ShardError::InvalidIdentity(identity));
        }
        let invalid = |e: crate::leader::LeaderError| ShardError::InvalidTiming(e.to_string());
        let timing = Timing {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
        .validate()
        .map_err(invalid)?;
        let lease_seconds = lease_seconds(self.lease_duration).map_err(invalid)?;
        let lease_name = lease_name(&self.ring, &identity);
        Ok(Member {
            ring: self.ring,
            namespace,
            lease_name,
            identity: Arc::from(identity),
            timing,
            lease_seconds,
            scheme: self.scheme,
        })
    }
}

fn validate_ring(ring: &str) -> Result<(), ShardError> {
    let ok = !ring.is_empty()
        && ring.len() <= MAX_RING_LEN
        && ring
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ring.starts_with('-')
        && !ring.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ShardError::InvalidRing(ring.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_rejected_with_the_reason() {
        let ns = || "ns".to_owned();
        assert!(matches!(
            Sharding::new("").member(ns()),
            Err(ShardError::InvalidRing(_))
        ));
        assert!(matches!(
            Sharding::new("Bad_Ring").member(ns()),
            Err(ShardError::InvalidRing(_))
        ));
        assert!(matches!(
            Sharding::new("r".repeat(64)).member(ns()),
            Err(ShardError::InvalidRing(_))
        ));
        assert!(matches!(
            Sharding::new("ring").member(String::new()),
            Err(ShardError::EmptyNamespace)
        ));
        assert!(matches!(
            Sharding::new("ring").identity("").member(ns()),
            Err(ShardError::InvalidIdentity(_))
        ));
        assert!(matches!(
            Sharding::new("ring")
                .lease_duration(Duration::from_secs(5))
                .renew_deadline(Duration::from_secs(5))
                .member(ns()),
            Err(ShardError::InvalidTiming(_))
        ));
        assert!(matches!(
            Sharding::new("ring")
                .renew_deadline(Duration::from_secs(2))
                .member(ns()),
            Err(ShardError::InvalidTiming(_))
        ));
        let member = Sharding::new("ring").identity("a").member(ns()).unwrap();
        assert!(member.lease_name.starts_with("ring-"));
        assert_eq!(member.lease_name.len(), "ring-".len() + 16);
        assert_eq!(member.lease_seconds, 15);
    }
}
