//! One round of the election: read the Lease, judge whether it is free,
//! expired or ours, and write it under optimistic concurrency. The loop
//! around it (when to try, when to give up) is in `elector.rs`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::lock::LeaseLock;

/// What a round found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Round {
    /// The Lease is ours now (acquired or renewed).
    Ours,
    /// Another holder's lease has not expired by our observation.
    HeldBy(String),
}

/// The election state of one elector between rounds.
pub(crate) struct Election<L> {
    lock: L,
    namespace: String,
    name: String,
    identity: Arc<str>,
    lease_seconds: i32,
    /// The record last read or written, and *our* time of the last change we
    /// saw. Expiry is judged from this time, never from the holder's clock.
    observed: Option<(LeaseSpec, Instant)>,
    /// The Lease object last read or written (with its resourceVersion).
    cached: Option<Lease>,
}

fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or_default()
}

impl<L: LeaseLock> Election<L> {
    pub(crate) fn new(
        lock: L,
        namespace: String,
        name: String,
        identity: Arc<str>,
        lease_seconds: i32,
    ) -> Self {
        Self {
            lock,
            namespace,
            name,
            identity,
            lease_seconds,
            observed: None,
            cached: None,
        }
    }

    /// `namespace/name` of the Lease.
    pub(crate) fn describe(&self) -> &str {
        self.lock.describe()
    }

    /// The holder identity last observed (`None` if free or never read).
    pub(crate) fn observed_holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .map(|(spec, _)| holder(spec))
            .filter(|h| !h.is_empty())
    }

    /// Whether the observed record is unexpired at `now`: observed time plus
    /// the record's own `leaseDurationSeconds`.
    fn observed_valid(&self, now: Instant) -> bool {
        match &self.observed {
            Some((spec, at)) => {
                let secs = spec.lease_duration_seconds.unwrap_or(0).max(0);
                *at + Duration::from_secs(secs.unsigned_abs().into()) > now
            }
            None => false,
        }
    }

    fn is_ours(&self, spec: &LeaseSpec) -> bool {
        holder(spec) == &*self.identity
    }

    /// Records a Lease read from the apiserver: the observed time moves only
    /// when the record changed.
    fn observe_read(&mut self, lease: &Lease) {
        let spec = lease.spec.clone().unwrap_or_default();
        let changed = self.observed.as_ref().is_none_or(|(old, _)| *old != spec);
        if changed {
            self.observed = Some((spec, Instant::now()));
        }
        self.cached = Some(lease.clone());
    }

    /// Records a Lease this elector wrote.
    fn observe_written(&mut self, lease: Lease) {
        self.observed = Some((lease.spec.clone().unwrap_or_default(), Instant::now()));
        self.cached = Some(lease);
    }

    fn spec_for_us(&self, now: Timestamp, acquired: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.identity.to_string()),
            lease_duration_seconds: Some(self.lease_seconds),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<Round, kube::Error> {
        let now = Timestamp::now();

        // 1. Fast path: we hold it by our last observation; write optimistically
        //    on top of the Lease we last saw. A conflict falls back to a read.
        if let Some(cached) = &self.cached
            && let Some(spec) = &cached.spec
            && self.is_ours(spec)
            && self.observed_valid(Instant::now())
        {
            let acquired = spec.acquire_time.as_ref().map_or(now, |t| t.0);
            let transitions = spec.lease_transitions.unwrap_or(0);
            let mut lease = cached.clone();
            lease.spec = Some(self.spec_for_us(now, acquired, transitions));
            match self.lock.replace(&lease).await {
                Ok(written) => {
                    self.observe_written(written);
                    return Ok(Round::Ours);
                }
                Err(e) if is_conflict(&e) => {
                    tracing::debug!(lease = %self.describe(), error = %e, "optimistic renew conflicted; reading the lease");
                }
                Err(e) => return Err(e),
            }
        }

        // 2. Read (or create) the Lease.
        let Some(current) = self.lock.get().await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec_for_us(now, now, 0)),
            };
            let created = self.lock.create(&lease).await?;
            self.observe_written(created);
            return Ok(Round::Ours);
        };
        self.observe_read(&current);

        // 3. Held by another and not expired by our clock: wait.
        let spec = current.spec.clone().unwrap_or_default();
        let current_holder = holder(&spec);
        if !current_holder.is_empty() && !self.is_ours(&spec) && self.observed_valid(Instant::now())
        {
            return Ok(Round::HeldBy(current_holder.to_owned()));
        }

        // 4. Free, expired, or ours: write it, guarded by its resourceVersion.
        let new_spec = if self.is_ours(&spec) {
            let acquired = spec.acquire_time.as_ref().map_or(now, |t| t.0);
            self.spec_for_us(now, acquired, spec.lease_transitions.unwrap_or(0))
        } else {
            let transitions = spec.lease_transitions.unwrap_or(0).saturating_add(1);
            self.spec_for_us(now, now, transitions)
        };
        let mut lease = current;
        lease.spec = Some(new_spec);
        let written = self.lock.replace(&lease).await?;
        self.observe_written(written);
        Ok(Round::Ours)
    }

    /// client-go's `release`: if we still hold the Lease, empty its holder and
    /// set `leaseDurationSeconds: 1` so a standby takes it at its next try.
    /// Returns whether the Lease was released by this call.
    pub(crate) async fn release(&mut self) -> Result<bool, kube::Error> {
        let Some(current) = self.lock.get().await? else {
            return Ok(false);
        };
        self.observe_read(&current);
        let spec = current.spec.clone().unwrap_or_default();
        if !self.is_ours(&spec) {
            return Ok(false);
        }
        let now = Timestamp::now();
        let mut lease = current;
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        let written = self.lock.replace(&lease).await?;
        self.observe_written(written);
        Ok(true)
    }
}

/// A 409 Conflict (a stale resourceVersion) or AlreadyExists.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}
