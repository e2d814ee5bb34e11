//! `make bench-multicluster` (issue 41): what an engaged cluster costs and
//! whether disengaging gives it back. One control plane holds 1 000
//! ConfigMaps; a `Fleet` engages N = 1, 10, 50 clusters named `c<i>`, each
//! through a client of its own to that control plane (its own connections,
//! its own cache of the 1 000 ConfigMaps, its own queue and workers), and a
//! multicluster controller reconciles every ConfigMap in each. Per N: the
//! time until every cluster's objects were all reconciled, this process's
//! RSS, open sockets and live tokio tasks once engaged, and again after
//! every cluster was disengaged (`ClusterSink::disengage` returned) and the
//! sockets closed. Prints a markdown table:
//! `cargo test -p opkit-tests --test it multicluster::footprint_bench -- --ignored --nocapture`.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use opkit::ControllerWiring;
use opkit::multicluster::{ClusterSet, Fleet};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_config_maps, create_namespace, eventually, init_tracing};
use tokio_util::sync::CancellationToken;

const NS: &str = "mc-footprint";
const OBJECTS: usize = 1_000;

/// The (cluster, key) pairs reconciled so far.
type Seen = Arc<Mutex<HashSet<(String, String)>>>;

/// Records each reconcile of the benchmark's namespace, once per cluster
/// and key.
#[derive(opkit::Controller)]
#[controller(for = ConfigMap, multicluster)]
struct Counter {
    seen: Seen,
}

impl Reconcile for Counter {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if req.namespace.as_deref() == Some(NS) {
            let cluster = ctx.cluster().map(ToString::to_string).unwrap_or_default();
            self.seen.lock().unwrap().insert((cluster, req.name));
        }
        Ok(Action::done())
    }
}

/// This process's RSS in MiB.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// This process's open sockets (file descriptors that are sockets).
fn sockets() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter(|fd| {
                    std::fs::read_link(fd.path())
                        .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

unsafe extern "C" {
    /// glibc's: gives the heap's free memory back to the system.
    fn malloc_trim(pad: usize) -> i32;
}

/// RSS once glibc gave back what the heap holds free: what is still in
/// use, as opposed to memory freed but kept by the allocator.
fn trimmed_rss_mib() -> f64 {
    // SAFETY: malloc_trim only releases free memory of the heap; it takes
    // no pointer and is safe to call at any time.
    unsafe {
        malloc_trim(0);
    }
    rss_mib()
}

fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, not a check (about two minutes)"]
async fn measure_engaged_cluster_footprint() {
    init_tracing();
    let plane = ControlPlane::start().await.unwrap();
    let admin = plane.client().unwrap();
    create_namespace(&admin, NS).await;
    create_config_maps(&admin, NS, OBJECTS).await;
    let seen: Seen = Arc::default();
    let (clusters, handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    fleet
        .add(
            Counter {
                seen: Arc::clone(&seen),
            }
            .controller(),
        )
        .unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn(fleet.run(stop.clone().cancelled_owned()));
    // the fleet's own tasks are running; nothing is engaged
    tokio::task::yield_now().await;
    let baseline = (trimmed_rss_mib(), sockets(), tasks());
    println!(
        "{OBJECTS} ConfigMaps per cluster, all clusters on one control plane (a client and cache each); \
         baseline: RSS {:.1} MiB, {} sockets, {} tasks",
        baseline.0, baseline.1, baseline.2
    );
    println!();
    println!(
        "| clusters | engaged and all reconciled after s | RSS engaged MiB | over baseline per cluster MiB | sockets engaged | tasks engaged | RSS after disengaging all MiB | after malloc_trim MiB | sockets after | tasks after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // 50 twice: memory kept by the allocator is reused, not added to
    for n in [1usize, 10, 50, 50] {
        seen.lock().unwrap().clear();
        let started = Instant::now();
        for i in 0..n {
            handle
                .add(format!("c{i}"), plane.client().unwrap())
                .await
                .unwrap();
        }
        eventually(
            &format!("{n} clusters' objects reconciled"),
            Duration::from_secs(600),
            || async { (seen.lock().unwrap().len() >= n * OBJECTS).then_some(()) },
        )
        .await;
        let took = started.elapsed().as_secs_f64();
        let engaged = (rss_mib(), sockets(), tasks());
        // the record of what was reconciled is the benchmark's own memory,
        // not the fleet's: freed (with its capacity) before measuring after
        *seen.lock().unwrap() = HashSet::new();
        for i in 0..n {
            assert!(handle.remove(format!("c{i}")).await.unwrap());
        }
        // connections of a dropped client close as their tasks end
        let _ = eventually(
            "the clusters' sockets closed",
            Duration::from_secs(30),
            || async { (sockets() <= baseline.1).then_some(()) },
        )
        .await;
        let after = (rss_mib(), sockets(), tasks());
        let trimmed = trimmed_rss_mib();
        println!(
            "| {n} | {took:.1} | {:.1} | {:.2} | {} | {} | {:.1} | {trimmed:.1} | {} | {} |",
            engaged.0,
            (engaged.0 - baseline.0) / n as f64,
            engaged.1,
            engaged.2,
            after.0,
            after.1,
            after.2
        );
    }
    stop.cancel();
    running.await.unwrap().unwrap();
}
