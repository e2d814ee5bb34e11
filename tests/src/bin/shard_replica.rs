//! One replica of a sharded ConfigMap controller, for the multi-process
//! tests of `tests/tests/it/shard_processes.rs`. Reports on stdout, one line
//! each (times are Unix nanoseconds):
//! - `status <active> <member,member,...>` when its shard status changes;
//! - `start <key> <t>` and `end <key> <t>` around each reconcile;
//! - with `SHARD_BY_NAMESPACE=1` (namespaces assigned, the cache divided
//!   server-side where the apiserver can, else by the shard label (label
//!   mode), over all namespaces):
//!   `cache <ConfigMaps cached> <RSS KiB>` each time either changes
//!   (checked every 200 ms).
//!
//! `SHARD_RECONCILE_MS` (default 10) is how long each reconcile waits (a
//! simulated external call), `SHARD_WORKERS` (default 4) the controller's
//! workers: the throughput benchmark (`shard_bench.rs`) sets them.
//! `SHARD_REQUEUE_MS` (default 0: done) makes every reconcile ask to run
//! again after that long, so that each key this replica owns is
//! reconciled steadily (the pause benchmark reads the gaps). With
//! `SHARD_WAIT_MEMBERS=N` the controller starts only once this replica is
//! active in a ring of N members, so that a benchmark times reconciles and
//! not the ring's formation.
//!
//! Usage: `shard_replica <kubeconfig> <namespace> <identity> <lease-ms> <renew-ms> <retry-ms>`

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ConfigMap;
use opkit::cache::SharedCache;
use opkit::controller::Controller;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::shard::Sharding;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn now() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

struct Recorder {
    /// How long a reconcile waits: a simulated external call.
    wait: Duration,
    /// Run again after this long; zero: done.
    requeue: Duration,
}

impl Reconcile for Recorder {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let key = format!("{}/{}", req.namespace.unwrap_or_default(), req.name);
        say(&format!("start {key} {}", now()));
        tokio::time::sleep(self.wait).await;
        say(&format!("end {key} {}", now()));
        Ok(Action::requeue_after(self.requeue))
    }
}

/// Reports `cache <ConfigMaps cached> <RSS KiB>` whenever either changes.
async fn report_cache(cache: SharedCache) {
    let mut last = (usize::MAX, 0);
    loop {
        let cached = cache.list::<ConfigMap>(None).await.map_or(0, |l| l.len());
        let rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
            .unwrap_or(0u64);
        if (cached, rss) != last {
            say(&format!("cache {cached} {rss}"));
            last = (cached, rss);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn millis(arg: &str) -> Duration {
    Duration::from_millis(arg.parse().expect("a number of milliseconds"))
}

/// A number from the environment, or `default` when unset.
fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {v:?}"))
    })
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let [_, kubeconfig, namespace, identity, lease, renew, retry] = args.as_slice() else {
        eprintln!(
            "usage: shard_replica <kubeconfig> <namespace> <identity> <lease-ms> <renew-ms> <retry-ms>"
        );
        std::process::exit(64);
    };
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).expect("read the kubeconfig"),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a kubeconfig");
    let client = kube::Client::try_from(config).expect("a client");
    let by_namespace = std::env::var("SHARD_BY_NAMESPACE").is_ok_and(|v| v == "1");
    let mut sharding = Sharding::new("replicas");
    if by_namespace {
        sharding = sharding.by_namespace();
    }
    let shard = sharding
        .namespace(namespace.clone())
        .identity(identity.clone())
        .lease_duration(millis(lease))
        .renew_deadline(millis(renew))
        .retry_period(millis(retry))
        .spawn(client.clone())
        .unwrap_or_else(|error| {
            eprintln!("shard_replica: {error}");
            std::process::exit(2);
        });
    let mut status = shard.subscribe();
    tokio::spawn(async move {
        loop {
            let s = status.borrow_and_update().clone();
            say(&format!("status {} {}", s.active, s.members.join(",")));
            if status.changed().await.is_err() {
                return;
            }
        }
    });
    let mut cache = SharedCache::builder(client);
    if !by_namespace {
        cache = cache.namespace(namespace.clone());
    }
    let cache = cache.build();
    if by_namespace {
        tokio::spawn(report_cache(cache.clone()));
    }
    let wait = Duration::from_millis(env_number("SHARD_RECONCILE_MS", 10));
    let requeue = Duration::from_millis(env_number("SHARD_REQUEUE_MS", 0));
    let workers = usize::try_from(env_number("SHARD_WORKERS", 4)).expect("a worker count");
    let controller = Controller::new(Recorder { wait, requeue })
        .name(format!("recorder-{identity}"))
        .max_concurrent_reconciles(workers)
        .sharded(shard.clone());
    let members = usize::try_from(env_number("SHARD_WAIT_MEMBERS", 0)).expect("a member count");
    if members > 0 {
        let mut status = shard.subscribe();
        let _ = status
            .wait_for(|s| s.active && s.members.len() >= members)
            .await;
    }
    if let Err(error) = cache.start() {
        eprintln!("shard_replica: {error}");
        std::process::exit(2);
    }
    let result = controller
        .run(&cache, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await;
    shard.shutdown().await;
    if let Err(error) = result {
        eprintln!("shard_replica: {error}");
        std::process::exit(1);
    }
}
