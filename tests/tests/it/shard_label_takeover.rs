//! Label mode's takeover when a join overlaps it (issue 38): on a server
//! without the `ShardedListAndWatch` gate, three `shard_replica` processes
//! (`SHARD_BY_NAMESPACE=1`) divide 200 ConfigMaps in 40 namespaces by
//! their shard label. One is SIGKILLed, and a fourth joins before the
//! survivors could have removed the dead one's Lease, so the member set
//! changes twice while its objects sit, labelled with a departed member's
//! id, in no replica's cache. Every one of its objects must be reconciled
//! by another replica within the lease duration plus a few seconds.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opkit_envtest::ControlPlane;
use opkit_tests::{create_config_maps, create_namespace, eventually};

use crate::shard_bench::{NS, Replica, Shared, converge, now, secs};

const NAMESPACES: usize = 40;
const PER_NAMESPACE: usize = 5;
/// The lease duration `shard_bench`'s replicas run with.
const LEASE: Duration = Duration::from_secs(3);
/// What a takeover may take beyond the lease: the survivors' next
/// membership rounds (500 ms retry), acknowledging the new member set,
/// relabelling, and the objects' arrival in their new owners' caches, on
/// a loaded 2-core machine.
const TAKEOVER_SLACK: Duration = Duration::from_secs(7);

fn by_namespace() -> Vec<(&'static str, String)> {
    vec![("SHARD_BY_NAMESPACE", "1".to_owned())]
}

async fn populate(admin: &kube::Client) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for n in 0..NAMESPACES {
        // the varying part first: FNV-1a puts names that differ only at
        // the end close together on the ring
        let namespace = format!("{n:02}-takeover");
        create_namespace(admin, &namespace).await;
        create_config_maps(admin, &namespace, PER_NAMESPACE).await;
        keys.extend((0..PER_NAMESPACE).map(|i| format!("{namespace}/obj-{i}")));
    }
    keys
}

/// The replica that started `key` last before `before` (Unix ns).
fn owner(tally: &Shared, key: &str, before: u128) -> Option<String> {
    let tally = tally.lock().unwrap();
    tally
        .starts
        .get(key)?
        .iter()
        .filter(|(_, t)| *t < before)
        .max_by_key(|(_, t)| *t)
        .map(|(r, _)| r.clone())
}

/// Of `keys`, those not yet started by a replica other than `dead` since
/// `since` (Unix ns).
fn not_taken_over(tally: &Shared, keys: &[String], dead: &str, since: u128) -> Vec<String> {
    let tally = tally.lock().unwrap();
    keys.iter()
        .filter(|key| {
            !tally
                .starts
                .get(*key)
                .is_some_and(|starts| starts.iter().any(|(r, t)| r != dead && *t >= since))
        })
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_during_a_label_mode_takeover_does_not_hold_it_up() {
    let plane = ControlPlane::builder()
        .apiserver_arg("--feature-gates=ShardedListAndWatch=false")
        .start()
        .await
        .unwrap();
    let admin = plane.client().unwrap();
    create_namespace(&admin, NS).await;
    let keys = populate(&admin).await;
    let tally: Shared = Arc::default();
    let env = by_namespace();
    let mut replicas: Vec<Replica> = ["a", "b", "c"]
        .into_iter()
        .map(|name| Replica::start_with(&plane, name, 3, &tally, &env))
        .collect();
    converge(&tally, &["a", "b", "c"], Duration::from_secs(60)).await;
    eventually(
        "every ConfigMap labelled and reconciled by its owner",
        Duration::from_secs(60),
        || async {
            let tally = tally.lock().unwrap();
            keys.iter()
                .all(|k| tally.starts.contains_key(k))
                .then_some(())
        },
    )
    .await;

    let killed = now();
    let theirs: Vec<String> = keys
        .iter()
        .filter(|k| owner(&tally, k, killed).as_deref() == Some("c"))
        .cloned()
        .collect();
    assert!(
        theirs.len() > keys.len() / 10,
        "c owned {} of {}",
        theirs.len(),
        keys.len()
    );
    let at = Instant::now();
    let mut c = replicas.remove(2);
    c.child.start_kill().unwrap();
    let _ = c.child.wait().await;
    // d joins while c's Lease still looks alive to the survivors
    tokio::time::sleep(LEASE * 2 / 3).await;
    replicas.push(Replica::start_with(&plane, "d", 0, &tally, &env));

    let within = LEASE + TAKEOVER_SLACK;
    loop {
        let left = not_taken_over(&tally, &theirs, "c", killed);
        if left.is_empty() {
            break;
        }
        assert!(
            at.elapsed() < within,
            "{} of c's {} ConfigMaps not reconciled by another replica {:?} after the SIGKILL \
             (lease {LEASE:?}); e.g. {:?}",
            left.len(),
            theirs.len(),
            at.elapsed(),
            &left[..left.len().min(3)]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = at.elapsed();
    let last = {
        let tally = tally.lock().unwrap();
        theirs
            .iter()
            .filter_map(|k| {
                tally.starts[k]
                    .iter()
                    .filter(|(r, t)| r != "c" && *t >= killed)
                    .map(|(_, t)| *t)
                    .min()
            })
            .max()
            .unwrap_or(killed)
    };
    eprintln!(
        "c's {} ConfigMaps taken over; the last started {:.1} s after the SIGKILL (seen after {took:?})",
        theirs.len(),
        secs(last - killed)
    );
    converge(&tally, &["a", "b", "d"], Duration::from_secs(30)).await;
    for replica in replicas {
        replica.stop().await;
    }
}
