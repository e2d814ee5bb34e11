//! [`Member`] and its loop: every retry period, read the ring's Leases,
//! compute the view, drain what it takes away, acknowledge it in this
//! replica's Lease, and open the gate once every member acknowledged it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use tokio::sync::{Mutex as AsyncMutex, watch};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::gate::Gate;
use super::handle::{Kinds, ShardHandle, ShardStatus};
use super::liveness::Liveness;
use super::store::{KINDS_ANNOTATION, LeaseStore, RING_LABEL, VIEW_ANNOTATION};
use super::view::{KeyScheme, View};
use crate::leader::LeaseTiming;

/// The validated timing of a ring: a member Lease is timed, and checked,
/// as leader election's Lease is.
pub(crate) type Timing = LeaseTiming;

/// While a view change is being acknowledged, a round runs every retry
/// period divided by this.
const FAST_ROUNDS: u32 = 4;

/// The name of `identity`'s member Lease in `ring`: `<ring>-<16 hex digits
/// of the identity's hash>`.
pub(crate) fn lease_name(ring: &str, identity: &str) -> String {
    format!("{ring}-{}", super::label::member_id(identity))
}

/// Whether `identity` may name a replica (1 to 128 bytes).
pub(crate) fn valid_identity(identity: &str) -> bool {
    !identity.is_empty() && identity.len() <= 128
}

/// A validated, not yet running, member of a ring.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) ring: String,
    pub(crate) namespace: String,
    pub(crate) lease_name: String,
    pub(crate) identity: Arc<str>,
    pub(crate) timing: Timing,
    pub(crate) lease_seconds: i32,
    pub(crate) scheme: KeyScheme,
}

/// Starts the membership loop over any store; the unit tests use an
/// in-memory one.
pub(crate) fn spawn_member<S: LeaseStore>(member: Member, store: S) -> ShardHandle {
    let gate = Gate::new(member.identity.clone());
    let (status_tx, status_rx) = watch::channel(ShardStatus::default());
    let shutdown = CancellationToken::new();
    let identity = member.identity.clone();
    let ring = Arc::from(member.ring.as_str());
    let scheme = member.scheme;
    let kinds = Kinds::default();
    let runner = Runner {
        store,
        member,
        gate: gate.clone(),
        liveness: Liveness::default(),
        own: None,
        acked: None,
        status: status_tx,
        shutdown: shutdown.clone(),
        disagreeing: hashbrown::HashSet::new(),
        kinds: kinds.clone(),
        reported_invalid: hashbrown::HashSet::new(),
        reported_kinds: hashbrown::HashSet::new(),
        reported_durations: hashbrown::HashSet::new(),
        changed_at: None,
    };
    let task = tokio::spawn(runner.run());
    ShardHandle {
        gate,
        identity,
        ring,
        status: status_rx,
        shutdown: shutdown.clone(),
        task: Arc::new(AsyncMutex::new(Some(task))),
        _drop: Arc::new(shutdown.drop_guard()),
        shares: Arc::default(),
        scheme,
        kinds,
        divided: Default::default(),
    }
}

struct Runner<S> {
    store: S,
    member: Member,
    gate: Arc<Gate>,
    liveness: Liveness,
    /// This replica's Lease as last written (`None`: not created yet, or
    /// removed by others, and so to be created anew).
    own: Option<Lease>,
    /// The view id this replica's Lease acknowledges.
    acked: Option<String>,
    status: watch::Sender<ShardStatus>,
    shutdown: CancellationToken,
    /// Members already reported as hashing keys another way.
    disagreeing: hashbrown::HashSet<String>,
    /// The kinds this replica's sharded controllers reconcile.
    kinds: Kinds,
    /// `(Lease, reason)` of the invalid ring Leases already reported.
    reported_invalid: hashbrown::HashSet<(String, String)>,
    /// The other members' kinds already reported as differing from ours.
    reported_kinds: hashbrown::HashSet<String>,
    /// `(Lease, seconds)` of lease durations already reported as differing.
    reported_durations: hashbrown::HashSet<(String, i32)>,
    /// When this replica last entered a new view.
    changed_at: Option<Instant>,
}

/// A ring Lease read as a member: its holder and acknowledgement.
struct Read {
    holder: String,
    ack: Option<String>,
    kinds: Option<String>,
}

/// What one read of the ring found.
struct Observed {
    view: View,
    /// Whether every member, this replica's own Lease as last written by
    /// it included, acknowledged `view` in this read.
    all_acked: bool,
}

impl<S: LeaseStore> Runner<S> {
    async fn run(mut self) {
        let m = &self.member;
        tracing::info!(ring = %m.ring, namespace = %m.namespace, lease = %m.lease_name, identity = %m.identity, "joining the shard ring");
        let mut next = Instant::now();
        loop {
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => break,
                () = sleep_until(next) => {}
            }
            next = Instant::now() + self.member.timing.retry_period;
            let sent = Instant::now();
            let shutdown = self.shutdown.clone();
            let round = timeout(self.member.timing.renew_deadline, self.round(sent));
            let outcome = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                r = round => r,
            };
            if outcome.is_err() {
                tracing::warn!(ring = %self.member.ring, timeout = ?self.member.timing.renew_deadline, "shard membership round timed out");
            }
            if self.acknowledging() {
                next = next.min(sent + self.member.timing.retry_period / FAST_ROUNDS);
            }
            self.publish(false);
        }
        self.leave().await;
    }

    /// Whether a view change entered less than a lease duration ago is
    /// still being acknowledged. Every member's acknowledgement must be
    /// read in a later round, so at one round per retry period each change
    /// costs about two periods, and a join that overlaps a takeover
    /// another two: meanwhile rounds run [`FAST_ROUNDS`] times as often.
    /// Bounded by the lease duration so that a view that never completes
    /// (an invalid Lease, a member hashing keys another way) does not
    /// keep them fast.
    fn acknowledging(&self) -> bool {
        !self.gate.is_active()
            && self
                .changed_at
                .is_some_and(|at| at.elapsed() < self.member.timing.lease_duration)
    }

    /// One read-decide-write round. Errors are logged; a round that does
    /// not renew leaves the gate to close at its freshness deadline.
    async fn round(&mut self, sent: Instant) {
        let leases = match self.store.list().await {
            Ok(leases) => leases,
            Err(error) => {
                tracing::warn!(ring = %self.member.ring, %error, "failed to list the ring's Leases; not renewing this round");
                return;
            }
        };
        let observed = self.observe(&leases).await;
        if self.gate.enter(&observed.view) {
            self.changed_at = Some(Instant::now());
            let rebalances = self.publish(true);
            tracing::info!(
                ring = %self.member.ring,
                identity = %self.member.identity,
                view = %observed.view.id(),
                members = ?observed.view.ring().members(),
                rebalances,
                "shard ring membership changed; rebalancing"
            );
        }
        // Acknowledge the new view only when nothing it takes away is
        // still reconciling here; until then keep acknowledging the old one.
        let ack = if self.gate.drained_for(Some(&observed.view)) {
            // Recorded before the write: once it reaches the server another
            // replica may open on this view, reply or not.
            self.gate.acknowledged(&observed.view);
            Some(observed.view.id().to_owned())
        } else {
            self.acked.clone()
        };
        if self.write(ack.clone()).await {
            self.acked = ack;
            self.gate
                .set_fresh_until(sent + self.member.timing.renew_deadline);
            // Opening needs a read that shows this replica's own
            // acknowledgement too: then any replica that joined later reads
            // this one's Lease and waits for its acknowledgement in turn.
            let open = self.acked.as_deref() == Some(observed.view.id()) && observed.all_acked;
            let released = self.gate.set_open(open);
            if released > 0 {
                tracing::info!(
                    ring = %self.member.ring,
                    view = %observed.view.id(),
                    paused_keys = released,
                    "every member acknowledged the view; the keys that moved here may start"
                );
            }
        }
    }

    /// Reads liveness off `leases`, removes expired members (a delete
    /// under the observed resourceVersion: a member that renewed meanwhile
    /// is kept), and builds the view.
    async fn observe(&mut self, leases: &[Lease]) -> Observed {
        let now = Instant::now();
        self.liveness.observe(
            now,
            leases.iter().filter_map(|l| {
                Some((
                    l.metadata.name.as_deref()?,
                    l.metadata.resource_version.as_deref()?,
                ))
            }),
        );
        let mut members = vec![self.member.identity.to_string()];
        let mut acks = Vec::new();
        let own_version = self
            .own
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        let mut own_ack = None;
        let mut blocked = false;
        let mut listed = hashbrown::HashSet::new();
        let mut others_kinds: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for lease in leases {
            let (Some(name), Some(version)) = (
                lease.metadata.name.as_deref(),
                lease.metadata.resource_version.as_deref(),
            ) else {
                continue;
            };
            if name == self.member.lease_name {
                // Only the Lease exactly as this replica last wrote it.
                if own_version.as_deref() == Some(version) {
                    own_ack = Some(ack_of(lease));
                }
                continue;
            }
            listed.insert(name.to_owned());
            let read = self.read(lease, name);
            let fresh = self
                .liveness
                .is_fresh(name, now, self.member.timing.lease_duration);
            if !fresh {
                let member = read
                    .as_ref()
                    .map_or("(invalid Lease)", |r| r.holder.as_str());
                match self.store.delete(name, version).await {
                    Ok(()) => {
                        tracing::info!(ring = %self.member.ring, lease = name, member, "removed a member whose Lease expired");
                        continue;
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => continue,
                    Err(error) => {
                        // Renewed meanwhile (409) or unknown: still a member.
                        tracing::debug!(ring = %self.member.ring, lease = name, %error, "expired member Lease not removed");
                    }
                }
            }
            let Some(read) = read else {
                // Not a member, but perhaps a member's Lease edited by hand:
                // while it is fresh nobody may take that member's keys.
                blocked = true;
                continue;
            };
            self.check_scheme(&read.holder, name, read.ack.as_deref());
            if let Some(kinds) = read.kinds {
                others_kinds
                    .entry(kinds)
                    .or_default()
                    .push(read.holder.clone());
            }
            members.push(read.holder);
            acks.push(read.ack);
        }
        self.reported_invalid
            .retain(|(name, _)| listed.contains(name));
        self.reported_durations
            .retain(|(name, _)| listed.contains(name));
        self.check_kinds(others_kinds);
        let view = View::with_scheme(members, self.member.scheme);
        let all_acked = !blocked
            && own_ack.is_some_and(|a| a.as_deref() == Some(view.id()))
            && acks.iter().all(|a| a.as_deref() == Some(view.id()));
        Observed { view, all_acked }
    }

    /// `lease` (named `name`, not this replica's) as a member, or `None`,
    /// logged once, when it cannot be one: no ring label, no or an invalid
    /// holder, or a name that is not its holder's (a Lease edited or made
    /// by hand). A lease duration other than this replica's is logged and
    /// otherwise ignored: each replica judges expiry by its own.
    fn read(&mut self, lease: &Lease, name: &str) -> Option<Read> {
        let ring = &self.member.ring;
        let labelled = lease
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(RING_LABEL))
            .is_some_and(|r| r == ring);
        let spec = lease.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.as_deref());
        let reason = match holder {
            _ if !labelled => Some(format!("its label {RING_LABEL} is not {ring:?}")),
            None => Some("it has no holderIdentity".to_owned()),
            Some(holder) if !valid_identity(holder) => Some(format!(
                "its holderIdentity {holder:?} is not 1 to 128 bytes"
            )),
            Some(holder) if lease_name(ring, holder) != name => Some(format!(
                "its name is not its holder's (holderIdentity {holder:?} has the Lease {})",
                lease_name(ring, holder)
            )),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            if self
                .reported_invalid
                .insert((name.to_owned(), reason.clone()))
            {
                tracing::warn!(
                    ring = %ring,
                    namespace = %self.member.namespace,
                    lease = name,
                    reason,
                    "a Lease of this shard ring is not a valid member Lease (edited or created by \
                     hand?): it is not a member, and no replica starts new keys while it is fresh; \
                     its replica replaces it at its next renew, or it is deleted once unchanged \
                     for the lease duration"
                );
            }
            return None;
        }
        let holder = holder?.to_owned();
        let seconds = spec.and_then(|s| s.lease_duration_seconds);
        if let Some(seconds) = seconds
            && seconds != self.member.lease_seconds
            && self.reported_durations.insert((name.to_owned(), seconds))
        {
            tracing::warn!(
                ring = %ring,
                lease = name,
                member = %holder,
                lease_duration_seconds = seconds,
                this_replica_seconds = self.member.lease_seconds,
                "a member Lease states another lease duration than this replica's; ignored: \
                 each replica judges expiry by its own lease duration (give every replica of a \
                 ring the same timing)"
            );
        }
        let kinds = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(KINDS_ANNOTATION))
            .cloned();
        Some(Read {
            holder,
            ack: ack_of(lease),
            kinds,
        })
    }

    /// Logs, once per distinct set, members whose sharded controllers
    /// reconcile other kinds than this replica's: two operators sharing one
    /// ring name in one namespace (or a rolling upgrade that changes the
    /// sharded controllers). The ring still gives each object one member,
    /// so nothing is reconciled twice, but objects given to the other
    /// operator's replicas are reconciled by neither.
    fn check_kinds(&mut self, others: BTreeMap<String, Vec<String>>) {
        let ours = joined_kinds(&self.kinds);
        let differing: BTreeMap<String, Vec<String>> = if ours.is_empty() {
            BTreeMap::new()
        } else {
            others
                .into_iter()
                .filter(|(kinds, _)| *kinds != ours)
                .collect()
        };
        for (kinds, holders) in &differing {
            if self.reported_kinds.insert(kinds.clone()) {
                tracing::error!(
                    ring = %self.member.ring,
                    namespace = %self.member.namespace,
                    this_replica = %self.member.identity,
                    this_replica_kinds = %ours,
                    other_members = %holders.join(", "),
                    other_kinds = %kinds,
                    "two operators share this shard ring: its members reconcile different kinds \
                     (two Deployments using one ring name in one namespace, or a rolling upgrade \
                     changing the sharded controllers). Each object is still given to one member, \
                     so none is reconciled twice, but objects given to the other's replicas are \
                     reconciled by neither: give each operator its own ring name (Sharding::new)"
                );
            }
        }
        if differing.is_empty() && !self.reported_kinds.is_empty() {
            tracing::info!(ring = %self.member.ring, kinds = %ours, "the shard ring's members reconcile the same kinds again");
        }
        self.reported_kinds
            .retain(|kinds| differing.contains_key(kinds));
    }

    /// Logs, once per member, a member whose acknowledgement shows it
    /// hashes keys another way (`-ns` ends the view ids of
    /// [`KeyScheme::Namespace`]): no view is ever acknowledged by both, so
    /// neither starts a key — safe, but stuck until they agree.
    fn check_scheme(&mut self, holder: &str, lease: &str, ack: Option<&str>) {
        let Some(ack) = ack else {
            return;
        };
        let ours = self.member.scheme == KeyScheme::Namespace;
        if ack.ends_with("-ns") != ours && self.disagreeing.insert(holder.to_owned()) {
            tracing::error!(
                ring = %self.member.ring,
                member = holder,
                lease,
                this_replica_by_namespace = ours,
                "a member of this shard ring assigns keys differently (Sharding::by_namespace on \
                 one replica and not the other): two Deployments sharing one ring name, or a \
                 rolling change of that option; no replica of the ring starts a key until all agree"
            );
        }
    }

    /// Creates or renews this replica's Lease acknowledging `ack`. Returns
    /// whether the write succeeded. A renew that finds the Lease gone or
    /// changed means others removed this replica: it leaves (closes the
    /// gate and forgets its view) and joins anew next round.
    async fn write(&mut self, ack: Option<String>) -> bool {
        let now = MicroTime(Timestamp::now());
        let lease = match self.own.clone() {
            Some(mut lease) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.renew_time = Some(now);
                set_ack(&mut lease.metadata, ack.as_deref());
                set_kinds(&mut lease.metadata, &joined_kinds(&self.kinds));
                let result = self.store.replace(&lease).await;
                match result {
                    Ok(written) => {
                        self.own = Some(written);
                        return true;
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                        tracing::warn!(ring = %self.member.ring, identity = %self.member.identity, code = e.code, "this replica was removed from the ring (its Lease expired); stopping its keys and joining again");
                        self.expelled();
                        return false;
                    }
                    Err(error) => {
                        tracing::warn!(ring = %self.member.ring, %error, "failed to renew the member Lease");
                        return false;
                    }
                }
            }
            None => self.new_lease(now.clone(), ack.as_deref()),
        };
        match self.store.create(&lease).await {
            Ok(written) => {
                tracing::info!(ring = %self.member.ring, lease = %self.member.lease_name, "created the member Lease");
                self.own = Some(written);
                true
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                // A Lease of our name from an earlier life: never reuse its
                // acknowledgement; delete it and create ours next round.
                let Ok(leases) = self.store.list().await else {
                    return false;
                };
                let Some(mut old) = leases
                    .into_iter()
                    .find(|l| l.metadata.name.as_deref() == Some(&self.member.lease_name))
                else {
                    return false;
                };
                // The old Lease (edited by hand under this replica, say)
                // still holds the others off the keys this replica is
                // reconciling: renew it as it is until those reconciles
                // end, then delete it.
                if self.gate.in_flight() > 0 {
                    tracing::info!(ring = %self.member.ring, lease = %self.member.lease_name, in_flight = self.gate.in_flight(), "a member Lease of this identity exists; keeping it fresh until this replica's reconciles end, then replacing it");
                    if let Some(spec) = old.spec.as_mut() {
                        spec.renew_time = Some(now);
                    }
                    let _ = self.store.replace(&old).await;
                    return false;
                }
                tracing::warn!(ring = %self.member.ring, lease = %self.member.lease_name, "a member Lease of this identity exists; replacing it");
                if let Some(version) = old.metadata.resource_version.as_deref() {
                    let _ = self.store.delete(&self.member.lease_name, version).await;
                }
                false
            }
            Err(error) => {
                tracing::warn!(ring = %self.member.ring, %error, "failed to create the member Lease");
                false
            }
        }
    }

    fn expelled(&mut self) {
        self.own = None;
        self.acked = None;
        self.gate.leave();
    }

    fn new_lease(&self, now: MicroTime, ack: Option<&str>) -> Lease {
        let mut metadata = ObjectMeta {
            name: Some(self.member.lease_name.clone()),
            namespace: Some(self.member.namespace.clone()),
            labels: Some(BTreeMap::from([(
                RING_LABEL.to_owned(),
                self.member.ring.clone(),
            )])),
            ..ObjectMeta::default()
        };
        set_ack(&mut metadata, ack);
        set_kinds(&mut metadata, &joined_kinds(&self.kinds));
        Lease {
            metadata,
            spec: Some(LeaseSpec {
                holder_identity: Some(self.member.identity.to_string()),
                lease_duration_seconds: Some(self.member.lease_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Publishes the gate's state, counting one more rebalance if
    /// `rebalanced`; returns the rebalance count. A rebalance is published
    /// with the gate as it is then (closed, on the new members), never
    /// beside the old `active`: a sharded controller resyncs on a status
    /// that is active with a new count, and would enqueue its keys while
    /// the gate refuses them.
    fn publish(&self, rebalanced: bool) -> u64 {
        let active = self.gate.is_active();
        let members = self.gate.members();
        let mut rebalances = 0;
        self.status.send_if_modified(|s| {
            let changed = rebalanced || s.active != active || s.members != members;
            s.rebalances += u64::from(rebalanced);
            s.active = active;
            s.members = members;
            rebalances = s.rebalances;
            changed
        });
        rebalances
    }

    /// Graceful leave: no new permits; wait up to the renew deadline for
    /// held ones (they stay good until the last renew's deadline, when they
    /// lapse: nothing renews them any more); then delete the Lease so
    /// others need not wait for expiry.
    async fn leave(&mut self) {
        self.gate.stop();
        self.publish(false);
        let deadline = Instant::now() + self.member.timing.renew_deadline;
        while self.gate.in_flight() > 0 && Instant::now() < deadline {
            sleep(std::time::Duration::from_millis(50)).await;
        }
        self.gate.leave();
        self.publish(false);
        if self.gate.in_flight() > 0 {
            tracing::warn!(ring = %self.member.ring, "reconciles still running at shutdown; leaving the member Lease to expire");
            return;
        }
        let Some(version) = self
            .own
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone())
        else {
            return;
        };
        let name = &self.member.lease_name;
        let mut deleted = self.store.delete(name, &version).await;
        // The shutdown cut off a renew whose write went through: the Lease
        // is newer than the one this replica knows. If it is still this
        // replica's, delete that one.
        if matches!(&deleted, Err(kube::Error::Api(e)) if e.code == 409) {
            let Some(current) = self.own_lease_version().await else {
                return;
            };
            deleted = self.store.delete(name, &current).await;
        }
        match deleted {
            Ok(()) => {
                tracing::info!(ring = %self.member.ring, lease = %name, "left the shard ring")
            }
            Err(error) => {
                tracing::warn!(ring = %self.member.ring, %error, "failed to delete the member Lease; others remove it when it expires")
            }
        }
    }

    /// The `resourceVersion` of this replica's Lease as the apiserver has
    /// it now, if it is still this replica's (held by its identity).
    async fn own_lease_version(&self) -> Option<String> {
        let leases = match self.store.list().await {
            Ok(leases) => leases,
            Err(error) => {
                tracing::warn!(ring = %self.member.ring, %error, "failed to read the member Lease again; others remove it when it expires");
                return None;
            }
        };
        let identity = self.member.identity.to_string();
        leases
            .into_iter()
            .find(|l| l.metadata.name.as_deref() == Some(self.member.lease_name.as_str()))
            .filter(|l| {
                l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
                    == Some(identity.as_str())
            })
            .and_then(|l| l.metadata.resource_version)
    }
}

/// The view id a Lease acknowledges.
fn ack_of(lease: &Lease) -> Option<String> {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(VIEW_ANNOTATION))
        .cloned()
}

/// The registered kinds, as the annotation holds them.
fn joined_kinds(kinds: &Kinds) -> String {
    kinds
        .lock()
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

fn set_kinds(metadata: &mut ObjectMeta, kinds: &str) {
    let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
    if kinds.is_empty() {
        annotations.remove(KINDS_ANNOTATION);
    } else {
        annotations.insert(KINDS_ANNOTATION.to_owned(), kinds.to_owned());
    }
}

fn set_ack(metadata: &mut ObjectMeta, ack: Option<&str>) {
    let annotations = metadata.annotations.get_or_insert_with(BTreeMap::new);
    match ack {
        Some(ack) => {
            annotations.insert(VIEW_ANNOTATION.to_owned(), ack.to_owned());
        }
        None => {
            annotations.remove(VIEW_ANNOTATION);
        }
    }
}
