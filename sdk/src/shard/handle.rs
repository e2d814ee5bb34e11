//! [`ShardHandle`]: what the rest of the process sees of its membership.

use std::sync::Arc;

use tokio::sync::{Mutex as AsyncMutex, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::division::{DividedKinds, ShardSelector};
use super::gate::{Gate, ShardPermit};
use super::label::own_selector;
use super::shares::ShareFamilies;
use super::view::{KeyScheme, View};

/// Where this replica stands in its ring, for metrics, logs and `/readyz`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardStatus {
    /// Whether this replica may start every key it owns now: its Lease is
    /// fresh and every member acknowledged the current member set. While
    /// it is not (a member-set change being acknowledged), the keys it
    /// owns in both the old and the new set still start; only keys that
    /// move wait.
    pub active: bool,
    /// The members (identities) of the current view, sorted.
    pub members: Vec<String>,
    /// How many times the member set changed since this replica joined.
    pub rebalances: u64,
}

/// One replica's membership in a ring, from [`Sharding::spawn`](super::Sharding::spawn).
/// Clones share the membership; it ends at [`shutdown`](Self::shutdown)
/// or when the last clone is dropped.
#[derive(Debug, Clone)]
pub struct ShardHandle {
    pub(crate) gate: Arc<Gate>,
    pub(crate) identity: Arc<str>,
    /// The ring's name (its label key's name part in label mode).
    pub(crate) ring: Arc<str>,
    pub(crate) status: watch::Receiver<ShardStatus>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) task: Arc<AsyncMutex<Option<JoinHandle<()>>>>,
    /// Cancels the membership when the last handle is dropped.
    pub(crate) _drop: Arc<tokio_util::sync::DropGuard>,
    /// Per-controller share metrics, once a manager exported them.
    pub(crate) shares: Arc<std::sync::OnceLock<ShareFamilies>>,
    /// How keys are hashed: only [`KeyScheme::Namespace`] divides the cache.
    pub(crate) scheme: KeyScheme,
    /// The kinds this replica's sharded controllers reconcile
    /// (`Kind.group`), published in its member Lease.
    pub(crate) kinds: Kinds,
    /// The kinds whose cache this replica divides, with their modes.
    pub(crate) divided: DividedKinds,
}

/// The kinds a replica's sharded controllers reconcile, shared between the
/// controllers (which register theirs) and the membership loop (which
/// publishes them).
pub(crate) type Kinds = Arc<parking_lot::Mutex<std::collections::BTreeSet<String>>>;

impl ShardHandle {
    /// This replica's identity: its name in the ring.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// A permit to reconcile `key` (`namespace/name`, or `name` for a
    /// cluster-scoped object) now, or `None` when another replica owns it
    /// or this replica may not start anything yet. Hold the permit until
    /// the reconcile ends.
    pub fn try_start(&self, key: &str) -> Option<ShardPermit> {
        self.gate.try_start(key)
    }

    /// A permit to keep the fleet cluster `cluster` engaged on this
    /// replica (a fleet whose clusters the ring divides), or `None`. The
    /// cluster's key spreads its name over the ring under either key
    /// scheme: [`cluster_key`](super::hash::cluster_key).
    #[cfg(feature = "multicluster")]
    pub(crate) fn try_start_cluster(&self, cluster: &str) -> Option<ShardPermit> {
        self.gate.try_start(&super::hash::cluster_key(cluster))
    }

    /// Whether this replica owns `key` in the member set it currently
    /// sees (it may still have to wait before starting it).
    pub fn owns(&self, key: &str) -> bool {
        self.gate.owns(key)
    }

    /// Records that a sharded controller of this replica reconciles
    /// `kind` of `group` (`""`: the core group); the next renew publishes
    /// it in the member Lease, where replicas of another operator sharing
    /// the ring name are told apart.
    pub(crate) fn register_kind(&self, group: &str, kind: &str) {
        let kind = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        self.kinds.lock().insert(kind);
    }

    /// The current status.
    pub fn status(&self) -> ShardStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every status change.
    pub fn subscribe(&self) -> watch::Receiver<ShardStatus> {
        self.status.clone()
    }

    /// Leaves the ring: stops granting permits, waits (up to the renew
    /// deadline) for held permits to drop, then deletes this replica's
    /// Lease so the others take its keys at their next read.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.lock().await.take() {
            let _ = task.await;
        }
    }

    /// For a ring assigning namespaces ([`Sharding::by_namespace`](super::Sharding::by_namespace)):
    /// receivers of this replica's share of its kinds, `None` until the
    /// replica is first active, then its share in the latest member set it
    /// was active on (it changes only once every member acknowledged the
    /// new set, so a replica losing keys keeps their objects until it can
    /// no longer start them): the KEP-5866 shard selector of its arcs, and,
    /// for the primary kind (the kind the ring labels), the label selector
    /// of its shard label. One task serves both. `None` for rings hashing
    /// whole keys, or outside a tokio runtime.
    pub(crate) fn cache_selectors(&self) -> Option<CacheSelectors> {
        if self.scheme != KeyScheme::Namespace {
            return None;
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (primary_tx, primary) = watch::channel(None);
        let (owned_tx, owned) = watch::channel(None);
        let mut status = self.status.clone();
        let identity = self.identity.clone();
        let labels = own_selector(&self.ring, &identity);
        let scheme = self.scheme;
        runtime.spawn(async move {
            let publish = |tx: &watch::Sender<Option<ShardSelector>>,
                           selector: Option<ShardSelector>| {
                tx.send_if_modified(|s| {
                    let changed = *s != selector;
                    if changed {
                        *s = selector;
                    }
                    changed
                });
            };
            loop {
                let current = status.borrow_and_update().clone();
                if current.active && !current.members.is_empty() {
                    let server =
                        View::with_scheme(current.members, scheme).server_selector(&identity);
                    let selector = |labels: Option<String>| {
                        server
                            .clone()
                            .map(|server| ShardSelector { server, labels })
                    };
                    publish(&primary_tx, selector(Some(labels.clone())));
                    publish(&owned_tx, selector(None));
                }
                tokio::select! {
                    changed = status.changed() => if changed.is_err() { return },
                    _ = async { tokio::join!(primary_tx.closed(), owned_tx.closed()) } => return,
                }
            }
        });
        Some(CacheSelectors { primary, owned })
    }
}

/// A sharded controller's share of its kinds, as the cache lists them
/// ([`ShardHandle::cache_selectors`]).
pub(crate) struct CacheSelectors {
    /// The primary kind's: with the shard label's selector (label mode).
    pub(crate) primary: watch::Receiver<Option<ShardSelector>>,
    /// Owned kinds': the shard selector only (they are never labelled).
    pub(crate) owned: watch::Receiver<Option<ShardSelector>>,
}

#[cfg(test)]
impl ShardHandle {
    /// A handle over a bare gate, with no membership loop: tests set its
    /// state with [`activate`](Self::activate) and [`observe`](Self::observe).
    pub(crate) fn detached(identity: &str) -> Self {
        let identity: Arc<str> = Arc::from(identity);
        let (_, status) = watch::channel(ShardStatus::default());
        let shutdown = CancellationToken::new();
        Self {
            gate: Gate::new(identity.clone()),
            identity,
            ring: Arc::from("detached"),
            status,
            shutdown: shutdown.clone(),
            task: Arc::default(),
            _drop: Arc::new(shutdown.drop_guard()),
            shares: Arc::default(),
            scheme: KeyScheme::Object,
            kinds: Kinds::default(),
            divided: DividedKinds::default(),
        }
    }

    /// As after a round in which every one of `members` acknowledged their
    /// view and this replica renewed its Lease: active for `fresh_for`.
    pub(crate) fn activate(&self, members: &[&str], fresh_for: std::time::Duration) {
        self.observe(members);
        self.gate
            .set_fresh_until(tokio::time::Instant::now() + fresh_for);
        self.gate.set_open(true);
    }

    /// As after a read that found `members`: the gate closes on their view
    /// until it is acknowledged.
    pub(crate) fn observe(&self, members: &[&str]) {
        self.gate
            .enter(&View::with_scheme(members.iter().copied(), self.scheme));
    }
}
