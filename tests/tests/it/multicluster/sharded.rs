//! A fleet's clusters divided over the replicas of a shard ring
//! (`Fleet::shard_clusters`, issue 41): two replicas, each running the
//! same provider (a `ClusterSet` offering six clusters, two names for each
//! member control plane), engage disjoint shares that together are every
//! cluster; when one leaves gracefully the other engages its clusters, and
//! when it joins again (as a `Manager` built with `sharding`, which hands
//! its ring to its fleet) they split again. Every object is requeued every
//! 100 ms, so each engaged cluster is reconciled all the time; no two
//! replicas ever reconcile one cluster at overlapping times (a cancelled
//! reconcile counts until it was dropped).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use opkit::ControllerWiring;
use opkit::manager::Manager;
use opkit::multicluster::{ClusterName, ClusterSet, ClusterSetHandle, Fleet};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::shard::{ShardHandle, Sharding};
use opkit_tests::{create_namespace, eventually, init_tracing};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{WAIT, create_labelled, labelled, members};
use crate::shard_support::{Interval, assert_no_overlap};

const NS: &str = "mc-sharded";
const CLUSTERS: [&str; 6] = ["c1", "c2", "c3", "c4", "c5", "c6"];

type Log = Arc<Mutex<Vec<Interval<Instant>>>>;

/// Logs each reconcile of the test's ConfigMaps as (replica, cluster,
/// start, end) and asks to run again 100 ms later.
#[derive(opkit::Controller)]
#[controller(for(ConfigMap, predicates(labelled())), multicluster)]
struct Tracker {
    replica: &'static str,
    log: Log,
}

/// Logs its reconcile's interval when dropped: at its end, or where a
/// disengage cancelled it.
struct Logged {
    entry: Option<(String, String, Instant)>,
    log: Log,
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some((replica, cluster, start)) = self.entry.take() {
            self.log
                .lock()
                .unwrap()
                .push((replica, cluster, start, Instant::now()));
        }
    }
}

impl Reconcile for Tracker {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if req.namespace.as_deref() != Some(NS) {
            return Ok(Action::done());
        }
        let cluster = ctx.cluster().map(ToString::to_string).unwrap_or_default();
        let _logged = Logged {
            entry: Some((self.replica.to_owned(), cluster, Instant::now())),
            log: Arc::clone(&self.log),
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        Ok(Action::requeue_after(Duration::from_millis(100)))
    }
}

struct Replica {
    /// A fleet's own ring, left at stop; `None` for a manager's.
    shard: Option<ShardHandle>,
    engaged: watch::Receiver<Vec<ClusterName>>,
    stop: CancellationToken,
    running: tokio::task::JoinHandle<()>,
}

fn ring(name: &str) -> Sharding {
    Sharding::new("fleet")
        .namespace(NS)
        .identity(name)
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(500))
}

impl Replica {
    /// A fleet run on its own, dividing its clusters over its ring.
    async fn fleet(
        name: &'static str,
        hub: &kube::Client,
        planes: &[kube::Client],
        log: &Log,
    ) -> Self {
        let shard = ring(name).spawn(hub.clone()).unwrap();
        let (clusters, handle) = ClusterSet::new();
        let mut fleet = Fleet::new(clusters);
        fleet.shard_clusters(shard.clone());
        let tracker = Tracker {
            replica: name,
            log: Arc::clone(log),
        };
        fleet.add(tracker.controller()).unwrap();
        let engaged = fleet.engaged();
        let stop = CancellationToken::new();
        let running = tokio::spawn({
            let stop = stop.clone();
            async move { fleet.run(stop.cancelled_owned()).await.unwrap() }
        });
        offer_all(&handle, planes).await;
        Self {
            shard: Some(shard),
            engaged,
            stop,
            running,
        }
    }

    /// A manager built with `sharding`: its fleet divides the clusters
    /// over the manager's ring.
    async fn manager(
        name: &'static str,
        hub: &kube::Client,
        planes: &[kube::Client],
        log: &Log,
    ) -> Self {
        let mut manager = Manager::builder()
            .client(hub.clone())
            .metrics_bind_address("0")
            .health_probe_bind_address("0")
            .sharding(ring(name))
            .build()
            .await
            .unwrap();
        let (clusters, handle) = ClusterSet::new();
        manager.set_cluster_provider(clusters);
        let tracker = Tracker {
            replica: name,
            log: Arc::clone(log),
        };
        manager.add(tracker.controller()).unwrap();
        let engaged = manager.engaged_clusters();
        let stop = CancellationToken::new();
        let running = tokio::spawn({
            let stop = stop.clone();
            async move { manager.run_until(stop.cancelled_owned()).await.unwrap() }
        });
        offer_all(&handle, planes).await;
        Self {
            shard: None,
            engaged,
            stop,
            running,
        }
    }

    fn engaged(&self) -> BTreeSet<String> {
        self.engaged
            .borrow()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// A graceful stop: the fleet disengages everything, then the replica
    /// leaves the ring.
    async fn stop(self) {
        self.stop.cancel();
        self.running.await.unwrap();
        if let Some(shard) = self.shard {
            shard.shutdown().await;
        }
    }
}

/// Offers every cluster: `c<i>` reaches member plane `(i - 1) % 3`. Each
/// offer is answered once the fleet took it (engaged here or not).
async fn offer_all(handle: &ClusterSetHandle, planes: &[kube::Client]) {
    for (i, cluster) in CLUSTERS.iter().enumerate() {
        handle
            .add(*cluster, planes[i % planes.len()].clone())
            .await
            .unwrap();
    }
}

/// Waits until `replicas`' engaged clusters are disjoint, each non-empty,
/// and together every cluster.
async fn wait_divided(replicas: &[&Replica]) -> Vec<BTreeSet<String>> {
    eventually(
        "the clusters divided between the replicas",
        WAIT,
        || async {
            let shares: Vec<BTreeSet<String>> = replicas.iter().map(|r| r.engaged()).collect();
            let total: usize = shares.iter().map(BTreeSet::len).sum();
            let union: BTreeSet<&String> = shares.iter().flatten().collect();
            (total == CLUSTERS.len()
                && union.len() == CLUSTERS.len()
                && shares.iter().all(|s| !s.is_empty()))
            .then_some(shares)
        },
    )
    .await
}

/// Waits until every cluster of `share` was reconciled by `replica` at
/// least five times after `since` (so that each phase has reconciles
/// running around its handovers).
async fn wait_reconciled(log: &Log, replica: &str, share: &BTreeSet<String>, since: Instant) {
    eventually(
        &format!("{replica} reconciling {share:?}"),
        WAIT,
        || async {
            let log = log.lock().unwrap();
            share
                .iter()
                .all(|cluster| {
                    log.iter()
                        .filter(|(r, c, start, _)| r == replica && c == cluster && *start >= since)
                        .count()
                        >= 5
                })
                .then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_divide_the_clusters_and_hand_them_over_without_overlap() {
    init_tracing();
    let planes: Vec<kube::Client> = members()
        .await
        .iter()
        .map(|p| p.client().unwrap())
        .collect();
    for plane in &planes {
        create_namespace(plane, NS).await;
        create_labelled(plane, NS, "tracked").await;
    }
    let hub = &planes[0];
    let log: Log = Arc::default();

    let r1 = Replica::fleet("r1", hub, &planes, &log).await;
    let r2 = Replica::fleet("r2", hub, &planes, &log).await;
    let shares = wait_divided(&[&r1, &r2]).await;
    eprintln!("two replicas: r1 {:?}, r2 {:?}", shares[0], shares[1]);
    // each member Lease says the ring divides clusters, as a sharded
    // controller's says its kind (two operators sharing a ring are told apart)
    let leases = Api::<Lease>::namespaced(hub.clone(), NS)
        .list(&ListParams::default().labels("shard.opkit.dev/ring=fleet"))
        .await
        .unwrap();
    assert_eq!(leases.items.len(), 2);
    for lease in &leases.items {
        let kinds = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("shard.opkit.dev/kinds"));
        assert_eq!(
            kinds.map(String::as_str),
            Some("Cluster.multicluster.opkit.dev")
        );
    }
    let since = Instant::now();
    wait_reconciled(&log, "r1", &shares[0], since).await;
    wait_reconciled(&log, "r2", &shares[1], since).await;

    // r2 leaves gracefully: r1 engages every cluster.
    r2.stop().await;
    let left = Instant::now();
    eventually("r1 engaging every cluster", WAIT, || async {
        (r1.engaged().len() == CLUSTERS.len()).then_some(())
    })
    .await;
    let all: BTreeSet<String> = CLUSTERS.iter().map(ToString::to_string).collect();
    wait_reconciled(&log, "r1", &all, left).await;

    // r2 joins again, as a sharded manager: the clusters split again.
    let r2 = Replica::manager("r2", hub, &planes, &log).await;
    let shares = wait_divided(&[&r1, &r2]).await;
    let since = Instant::now();
    wait_reconciled(&log, "r2", &shares[1], since).await;
    wait_reconciled(&log, "r1", &shares[0], since).await;

    r2.stop().await;
    r1.stop().await;
    {
        let log = log.lock().unwrap();
        let mut counts = std::collections::BTreeMap::<(&str, &str), usize>::new();
        for (r, c, _, _) in log.iter() {
            *counts.entry((r.as_str(), c.as_str())).or_default() += 1;
        }
        eprintln!("reconciles by replica and cluster: {counts:?}");
    }
    let checked = assert_no_overlap(&log.lock().unwrap());
    eprintln!("no overlap among {checked} reconciles");
    assert!(
        checked >= 5 * 3 * CLUSTERS.len(),
        "only {checked} reconciles"
    );
}
