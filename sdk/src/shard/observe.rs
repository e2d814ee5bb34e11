//! What a [`Manager`](crate::manager::Manager) shows of a ring: a
//! `/readyz` check and `opkit_shard_*` metrics.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use super::handle::ShardHandle;
use super::shares::ShareFamilies;
use crate::metrics::Metrics;

/// Registers `opkit_shard_members`, `opkit_shard_active`,
/// `opkit_shard_rebalances_total`, `opkit_shard_paused_keys` (kept by the
/// gate itself), `opkit_shard_owned_objects{controller}`
/// `opkit_shard_moved_in_objects_total{controller}` and
/// `opkit_shard_cancelled_reconciles_total{controller}` on `metrics`, and
/// keeps the first three current until the membership ends.
pub(crate) fn export_metrics(shard: &ShardHandle, metrics: &Metrics) {
    let families = ShareFamilies::default();
    metrics.register(
        "opkit_shard_owned_objects",
        "Objects of a sharded controller this replica owned at the last rebalance",
        families.owned.clone(),
    );
    metrics.register(
        "opkit_shard_moved_in_objects",
        "Objects a sharded controller took over from other replicas at rebalances",
        families.gained.clone(),
    );
    metrics.register(
        "opkit_shard_cancelled_reconciles",
        "Reconciles of a sharded controller cancelled because this replica's permit for \
         the key lapsed (renew deadline passed, left the ring, or the key moved)",
        families.cancelled.clone(),
    );
    let _ = shard.shares.set(families);
    let members: Gauge = Gauge::default();
    let active: Gauge = Gauge::default();
    let rebalances: Counter = Counter::default();
    metrics.register(
        "opkit_shard_members",
        "Members of this replica's shard ring, as it currently sees them",
        members.clone(),
    );
    metrics.register(
        "opkit_shard_active",
        "1 while every member acknowledged this replica's member set and its Lease is fresh, \
         else 0 (while 0, keys moving here wait: opkit_shard_paused_keys)",
        active.clone(),
    );
    metrics.register(
        "opkit_shard_rebalances",
        "Member set changes this replica has seen since it joined",
        rebalances.clone(),
    );
    metrics.register(
        "opkit_shard_paused_keys",
        "Keys this replica owns in the member set it sees but may not start until every \
         member acknowledged that set: the keys moving here (0 while active)",
        shard.gate.paused_gauge(),
    );
    let mut status = shard.subscribe();
    tokio::spawn(async move {
        loop {
            let s = status.borrow_and_update().clone();
            members.set(i64::try_from(s.members.len()).unwrap_or(i64::MAX));
            active.set(i64::from(s.active));
            let seen = rebalances.get();
            if s.rebalances > seen {
                rebalances.inc_by(s.rebalances - seen);
            }
            if status.changed().await.is_err() {
                return;
            }
        }
    });
}

/// The `/readyz` check: ready while this replica is a member of the view it
/// acts on (it may be briefly inactive during a handover and still ready).
pub(crate) fn readiness(
    shard: &ShardHandle,
) -> impl Fn() -> std::future::Ready<Result<(), Box<dyn std::error::Error + Send + Sync>>>
+ Send
+ Sync
+ 'static {
    let shard = shard.clone();
    let identity: Arc<str> = Arc::from(shard.identity());
    move || {
        let status = shard.status();
        let result = if status.members.iter().any(|m| **m == *identity) {
            Ok(())
        } else {
            Err(format!("replica {identity} is not a member of its shard ring").into())
        };
        std::future::ready(result)
    }
}
