//! `opkit_fleet_peer --kubeconfig PATH --namespace NS [--objects 1000]
//! [--rounds 1,10,50,50] [--trim-engaged]`: the opkit peer of `make bench-multicluster-peers`
//! (tests/peers/bench-multicluster-peers.sh), the standalone release-build
//! counterpart of `tests/tests/it/multicluster/footprint_bench.rs`.
//!
//! One control plane stands for N clusters: per round, N clusters `c<i>`
//! are added to a [`ClusterSet`] whose [`Fleet`] runs one multicluster
//! controller on ConfigMaps, each cluster through a `kube::Client` of its
//! own built from the kubeconfig (its own connection pool; the fleet gives
//! it its own cache, queue and workers). The controller counts the
//! (cluster, key) pairs of NS it reconciled; once all N × objects were
//! reconciled every cluster is removed again ([`ClusterSetHandle::remove`]
//! returns once the cluster's reconciles ended and its informers stopped).
//!
//! Per round one JSON line on stdout, as the Go peer
//! (tests/peers/multicluster-runtime) prints: `n`, `engage_s` (from the
//! first add until all N × objects were reconciled), `rss_baseline_mib`
//! (after `malloc_trim(0)`, the fleet running with nothing engaged),
//! `rss_engaged_mib`, `cpu_s` (user + system CPU time over `engage_s`,
//! from getrusage),
//! `events` (N × objects), `rss_after_mib` (every cluster removed, its
//! sockets closed), `rss_after_trim_mib` (then `malloc_trim(0)`), `tasks`
//! / `tasks_after` (live tokio tasks), `threads`, `sockets` /
//! `sockets_after` and their baselines, `caches_stopped_s` (how long
//! removing all N took). `--trim-engaged` adds `rss_engaged_trim_mib`,
//! the engaged RSS after `malloc_trim(0)` (read after `rss_engaged_mib`
//! and `cpu_s`), to tell what the engaged clusters hold live from what
//! the allocator kept.
//!
//! [`ClusterSetHandle::remove`]: opkit::multicluster::ClusterSetHandle::remove

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_support::{Pid, arg, parsed, status_kib};
use k8s_openapi::api::core::v1::ConfigMap;
use opkit::controller::Controller;
use opkit::multicluster::{ClusterName, ClusterSet, Fleet};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use serde::Serialize;

/// The (cluster, key) pairs reconciled so far. The cluster's name is the
/// fleet's (an `Arc<str>`), not a copy per key, as the Go peer's map
/// shares its strings.
type Seen = Arc<Mutex<HashSet<(ClusterName, String)>>>;

/// Records each reconcile in the benchmark's namespace, once per cluster
/// and key.
struct Counter {
    namespace: String,
    seen: Seen,
}

impl Reconcile for Counter {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if req.namespace.as_deref() == Some(self.namespace.as_str())
            && let Some(cluster) = ctx.cluster()
        {
            self.seen
                .lock()
                .expect("the seen set's lock")
                .insert((cluster.clone(), req.name));
        }
        Ok(Action::done())
    }
}

/// One line of output.
#[derive(Serialize)]
struct Round {
    n: usize,
    engage_s: f64,
    rss_baseline_mib: f64,
    rss_engaged_mib: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    rss_engaged_trim_mib: Option<f64>,
    cpu_s: f64,
    events: usize,
    rss_after_mib: f64,
    rss_after_trim_mib: f64,
    tasks: usize,
    tasks_after: usize,
    threads: f64,
    sockets: usize,
    sockets_after: usize,
    tasks_baseline: usize,
    sockets_baseline: usize,
    caches_stopped_s: f64,
}

/// This process's RSS in MiB.
fn rss_mib() -> f64 {
    status_kib(Pid::Me, "VmRSS") / 1024.0
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

/// User + system CPU time of this process so far, in seconds, from
/// getrusage (microseconds, as the Go peer reads it: /proc's stat, what
/// `bench_support::cpu_secs` reads, counts 10 ms ticks, coarser than one
/// round's CPU time at N = 1).
fn cpu_secs() -> f64 {
    // SAFETY: an all-zero rusage is a valid value, which getrusage fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Live tokio tasks.
fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Polls `cond` every 10 ms until it holds or `timeout` passed.
async fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Waits (at most `timeout`) until the task count stayed the same for one
/// second.
async fn settle(timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let (mut last, mut since) = (tasks(), Instant::now());
    while Instant::now() < deadline && since.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = tasks();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kubeconfig = arg(&args, "--kubeconfig").expect("--kubeconfig PATH is required");
    let namespace = arg(&args, "--namespace").expect("--namespace NS is required");
    let objects: usize = parsed(&args, "--objects", 1000);
    let trim_engaged = args.iter().any(|a| a == "--trim-engaged");
    let rounds: Vec<usize> = arg(&args, "--rounds")
        .unwrap_or_else(|| "1,10,50,50".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("--rounds: {s:?} is not a cluster count"))
        })
        .collect();
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig)
        .unwrap_or_else(|e| panic!("reading {kubeconfig}: {e}"));
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("the kubeconfig {kubeconfig}: {e}"));

    let seen: Seen = Arc::default();
    let (clusters, handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    fleet
        .add(
            Controller::new(Counter {
                namespace: namespace.clone(),
                seen: Arc::clone(&seen),
            })
            .multicluster(),
        )
        .expect("adding the multicluster controller to the fleet");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(fleet.run(async {
        let _ = stopped.await;
    }));
    // the fleet's own tasks are running; nothing is engaged
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = trimmed_rss_mib();
    let (base_tasks, base_sockets) = (tasks(), sockets());

    for n in rounds {
        let cpu0 = cpu_secs();
        let started = Instant::now();
        for i in 0..n {
            let client = kube::Client::try_from(config.clone())
                .unwrap_or_else(|e| panic!("a client for cluster c{i}: {e}"));
            handle
                .add(format!("c{i}"), client)
                .await
                .unwrap_or_else(|e| panic!("engaging cluster c{i}: {e}"));
        }
        let want = n * objects;
        let all = eventually(Duration::from_secs(600), || {
            seen.lock().expect("the seen set's lock").len() >= want
        })
        .await;
        assert!(
            all,
            "{n} clusters: {} of {want} (cluster, ConfigMap) pairs reconciled after 10 min",
            seen.lock().expect("the seen set's lock").len()
        );
        let engage_s = started.elapsed().as_secs_f64();
        let cpu_s = cpu_secs() - cpu0;
        let (rss_engaged_mib, engaged_tasks, engaged_sockets) = (rss_mib(), tasks(), sockets());
        let threads = status_kib(Pid::Me, "Threads");
        let rss_engaged_trim_mib = trim_engaged.then(trimmed_rss_mib);
        let removing = Instant::now();
        for i in 0..n {
            let removed = handle
                .remove(format!("c{i}"))
                .await
                .unwrap_or_else(|e| panic!("disengaging cluster c{i}: {e}"));
            assert!(removed, "cluster c{i} was not engaged");
        }
        let caches_stopped_s = removing.elapsed().as_secs_f64();
        // the benchmark's own record (N × objects pairs) is not the
        // fleet's: drop it, memory and all (`clear` keeps the capacity),
        // before reading what disengaging left
        drop(std::mem::take(
            &mut *seen.lock().expect("the seen set's lock"),
        ));
        // connections of a dropped client close as their tasks end
        eventually(Duration::from_secs(30), || sockets() <= base_sockets).await;
        settle(Duration::from_secs(30)).await;
        let (rss_after_mib, tasks_after, sockets_after) = (rss_mib(), tasks(), sockets());
        let round = Round {
            n,
            engage_s,
            rss_baseline_mib: baseline,
            rss_engaged_mib,
            rss_engaged_trim_mib,
            cpu_s,
            events: want,
            rss_after_mib,
            rss_after_trim_mib: trimmed_rss_mib(),
            tasks: engaged_tasks,
            tasks_after,
            threads,
            sockets: engaged_sockets,
            sockets_after,
            tasks_baseline: base_tasks,
            sockets_baseline: base_sockets,
            caches_stopped_s,
        };
        println!(
            "{}",
            serde_json::to_string(&round).expect("a round as JSON")
        );
    }
    let _ = stop.send(());
    running
        .await
        .expect("the fleet's task")
        .expect("the fleet stopped with an error");
}
