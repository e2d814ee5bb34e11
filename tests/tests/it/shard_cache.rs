//! A divided cache (`Sharding::by_namespace`) against a real kube-apiserver
//! 1.36: with the `ShardedListAndWatch` gate on (envtest's default) each
//! of three replicas caches only the ConfigMaps (primary) and Secrets
//! (owned) of the namespaces it owns, together exactly all of them; when
//! one leaves, the others relist and take its namespaces. With the gate
//! off the ring runs in label mode: the replicas label the ConfigMaps
//! with their shard, each caches only the ones labelled with its own id
//! (the owned Secrets, not labelled, stay undivided), and when one leaves
//! its ConfigMaps are relabelled into the others' caches.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, PostParams};
use opkit::cache::SharedCache;
use opkit::controller::Controller;
use opkit::shard::{ShardHandle, Sharding};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, init_tracing};
use tokio_util::sync::CancellationToken;

use crate::shard_support::{Log, Recorder, assert_no_overlap};

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);

struct Replica {
    name: String,
    shard: ShardHandle,
    cache: SharedCache,
    stop: CancellationToken,
    run: tokio::task::JoinHandle<()>,
}

async fn start(client: &kube::Client, lease_ns: &str, name: &str, log: &Log) -> Replica {
    let shard = Sharding::new("divided")
        .namespace(lease_ns)
        .identity(name)
        .by_namespace()
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .spawn(client.clone())
        .unwrap();
    let cache = SharedCache::new(client.clone());
    let controller = Controller::new(Recorder::new(name, log, Duration::ZERO))
        .owns::<Secret>()
        .name(format!("divided-{name}"))
        .max_concurrent_reconciles(4)
        .sharded(shard.clone());
    cache.start().unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (stop, cache) = (stop.clone(), cache.clone());
        async move {
            controller
                .run(&cache, stop.cancelled_owned())
                .await
                .unwrap();
        }
    });
    Replica {
        name: name.to_owned(),
        shard,
        cache,
        stop,
        run,
    }
}

/// `count` namespaces `<prefix>-<random hex>`, each with `per` ConfigMaps
/// and as many Secrets, each Secret controller-owned by one ConfigMap.
/// Random names, as generated namespaces have: names differing only in a
/// last digit (`t-1` … `t-9`) hash close together under the server's
/// FNV-1a and would land on one replica.
async fn populate(admin: &kube::Client, prefix: &str, count: usize, per: usize) -> Vec<String> {
    let mut namespaces = Vec::new();
    let mut seed: u64 = 0x5eed;
    for _ in 0..count {
        // an LCG: random-looking, the same on every run
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let ns = format!("{prefix}-{:06x}", seed >> 40);
        create_namespace(admin, &ns).await;
        let cms = Api::<ConfigMap>::namespaced(admin.clone(), &ns);
        let secrets = Api::<Secret>::namespaced(admin.clone(), &ns);
        for j in 0..per {
            let name = format!("obj-{j}");
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
            let owner = OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: name.clone(),
                uid: cm.metadata.uid.unwrap(),
                controller: Some(true),
                ..OwnerReference::default()
            };
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name),
                    owner_references: Some(vec![owner]),
                    ..ObjectMeta::default()
                },
                ..Secret::default()
            };
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .unwrap();
        }
        namespaces.push(ns);
    }
    namespaces
}

/// The `namespace/name`s of `prefix-*` objects in a replica's cache.
fn cached<K>(replica: &Replica, prefix: &str) -> BTreeSet<String>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + opkit::cache::Cacheable,
{
    replica
        .cache
        .store::<K>()
        .unwrap()
        .list()
        .iter()
        .filter_map(|o| {
            let ns = o.meta().namespace.clone()?;
            ns.starts_with(&format!("{prefix}-"))
                .then(|| format!("{ns}/{}", o.meta().name.clone().unwrap_or_default()))
        })
        .collect()
}

/// Waits until every replica is active on exactly these replicas.
async fn converge(replicas: &[Replica], within: Duration) {
    crate::shard_support::converge(replicas.iter().map(|r| &r.shard), within).await;
}

/// Waits until each replica caches exactly the `prefix-*` ConfigMaps of
/// the namespaces it owns (`all` split with no overlap), and the Secrets
/// of them too if `owned_divided` (else all of them); returns the
/// ConfigMaps cached per replica.
async fn wait_divided(
    replicas: &[Replica],
    prefix: &str,
    all: &BTreeSet<String>,
    owned_divided: bool,
) -> Vec<usize> {
    let started = Instant::now();
    loop {
        let shares: Vec<(BTreeSet<String>, BTreeSet<String>)> = replicas
            .iter()
            .map(|r| (cached::<ConfigMap>(r, prefix), cached::<Secret>(r, prefix)))
            .collect();
        let exact = replicas.iter().zip(&shares).all(|(r, (cms, secrets))| {
            let owned: BTreeSet<String> = all.iter().filter(|k| r.shard.owns(k)).cloned().collect();
            *cms == owned && (if owned_divided { &owned } else { all }) == secrets
        });
        if exact {
            let sizes: Vec<usize> = shares.iter().map(|(c, _)| c.len()).collect();
            assert_eq!(sizes.iter().sum::<usize>(), all.len(), "{sizes:?}");
            eprintln!(
                "divided cache: {} objects per kind, per replica {sizes:?}",
                all.len()
            );
            return sizes;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "caches not divided: {:?}",
            shares
                .iter()
                .map(|(c, s)| (c.len(), s.len()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every key of `all` was reconciled (a reconcile starting
/// at `since` or later), each by its owner only, and no two replicas
/// reconciled one key at once (over the whole log).
async fn wait_reconciled(replicas: &[Replica], log: &Log, all: &BTreeSet<String>, since: Instant) {
    let started = Instant::now();
    let counts = |(_, key, start, _): &&(String, String, Instant, Instant)| {
        all.contains(key) && *start >= since
    };
    loop {
        let seen: BTreeSet<String> = log
            .lock()
            .unwrap()
            .iter()
            .filter(counts)
            .map(|(_, key, ..)| key.clone())
            .collect();
        if seen == *all {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {} reconciled",
            seen.len(),
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = log.lock().unwrap();
    for (replica, key, ..) in log.iter().filter(counts) {
        let owners: Vec<&str> = replicas
            .iter()
            .filter(|r| r.shard.owns(key))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(owners, [replica.as_str()], "{key} reconciled by {replica}");
    }
    assert_no_overlap(&log);
}

async fn stop(replica: Replica) {
    replica.stop.cancel();
    replica.run.await.unwrap();
    replica.shard.shutdown().await;
}

/// `count` namespaces of `per` ConfigMaps each (named by `prefix`), then
/// replicas `a`, `b` and `c` started and active on one ring: the keys, the
/// reconcile log, the replicas, and when they started.
async fn three_replicas(
    admin: &kube::Client,
    prefix: &str,
    count: usize,
    per: usize,
) -> (BTreeSet<String>, Log, Vec<Replica>, Instant) {
    let namespaces = populate(admin, prefix, count, per).await;
    let all = keys(&namespaces, per);
    let log = Log::default();
    let mut replicas = Vec::new();
    for name in ["a", "b", "c"] {
        replicas.push(start(admin, "shard-cache", name, &log).await);
    }
    let since = Instant::now();
    converge(&replicas, Duration::from_secs(20)).await;
    (all, log, replicas, since)
}

fn keys(namespaces: &[String], per: usize) -> BTreeSet<String> {
    namespaces
        .iter()
        .flat_map(|ns| (0..per).map(move |j| format!("{ns}/obj-{j}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_each_cache_their_namespaces_and_relist_on_leave() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let admin = plane.client().unwrap();
    create_namespace(&admin, "shard-cache").await;
    // the server filters: a sharded list says so in metadata.shardInfo
    let selector =
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')";
    let probe = http::Request::get(format!(
        "/api/v1/configmaps?limit=1&shardSelector={}",
        selector
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'0'..=b'9' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    ))
    .body(Vec::new())
    .unwrap();
    let text = admin.request_text(probe).await.unwrap();
    assert!(text.contains("\"shardInfo\""), "{text}");

    let (count, per) = (24, 4);
    let (all, log, mut replicas, since) = three_replicas(&admin, "shc", count, per).await;
    wait_divided(&replicas, "shc", &all, true).await;
    wait_reconciled(&replicas, &log, &all, since).await;

    // one leaves: the two others relist with their new selectors
    let gone = replicas.pop().unwrap();
    stop(gone).await;
    converge(&replicas, Duration::from_secs(20)).await;
    wait_divided(&replicas, "shc", &all, true).await;
    for replica in replicas {
        stop(replica).await;
    }
}

/// A `tracing` writer into a shared buffer: the lines a test asserts on.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A control plane without the `ShardedListAndWatch` gate, and this
/// thread's `opkit` log at info captured until the guard drops.
async fn gate_off_with_log() -> (Captured, tracing::subscriber::DefaultGuard, ControlPlane) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("opkit=info")
        .with_ansi(false)
        .with_writer({
            let captured = captured.clone();
            move || captured.clone()
        })
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    let plane = ControlPlane::builder()
        .apiserver_arg("--feature-gates=ShardedListAndWatch=false")
        .start()
        .await
        .unwrap();
    (captured, guard, plane)
}

/// Label mode, on a server without the gate: 3 replicas over 300
/// ConfigMaps (and 300 owned Secrets) in 30 namespaces. Every ConfigMap is
/// reconciled, each by its owner; each replica caches exactly the
/// ConfigMaps it owns, together all of them, none more than 3/5 of them
/// (with these names and identities: 110, 70, 120 of 300); the log says
/// label mode for ConfigMaps and the undivided cache for the Secrets.
/// ConfigMaps created while the ring runs are labelled and reconciled by
/// their owner too. When one replica leaves, its ConfigMaps are relabelled into the two others'
/// caches and reconciled there, with no overlap.
///
/// On a current-thread runtime, so that the log of every replica (all
/// tasks of this thread) reaches the capturing subscriber.
#[tokio::test]
async fn without_the_gate_the_replicas_label_their_share_and_cache_only_it() {
    let (captured, _log, plane) = gate_off_with_log().await;
    let admin = plane.client().unwrap();
    create_namespace(&admin, "shard-cache").await;
    let per = 10;
    let (all, log, mut replicas, since) = three_replicas(&admin, "nogate", 30, per).await;
    let sizes = wait_divided(&replicas, "nogate", &all, false).await;
    for size in &sizes {
        assert!(
            *size * 5 <= all.len() * 3,
            "one replica caches {size} of {}: {sizes:?}",
            all.len()
        );
    }
    wait_reconciled(&replicas, &log, &all, since).await;
    let text = captured.text();
    assert!(
        text.contains("label mode") && text.contains("mode=\"label selector\""),
        "no label mode in the log"
    );
    assert!(
        text.contains("mode=\"filter-at-queue\""),
        "Secrets not said undivided"
    );
    for line in text
        .lines()
        .filter(|l| l.contains("mode=") || l.contains("shard labels set"))
        .take(12)
    {
        eprintln!("{line}");
    }

    // objects created while the ring runs are labelled by their owner
    let since = Instant::now();
    let late = keys(&populate(&admin, "late", 3, per).await, per);
    wait_divided(&replicas, "late", &late, false).await;
    wait_reconciled(&replicas, &log, &late, since).await;

    // one leaves: its ConfigMaps move into the others' caches
    let gone = replicas.pop().unwrap();
    let moved: BTreeSet<String> = all.iter().filter(|k| gone.shard.owns(k)).cloned().collect();
    assert!(!moved.is_empty());
    stop(gone).await;
    let since = Instant::now();
    converge(&replicas, Duration::from_secs(20)).await;
    let sizes = wait_divided(&replicas, "nogate", &all, false).await;
    assert_eq!(sizes.iter().sum::<usize>(), all.len());
    wait_reconciled(&replicas, &log, &moved, since).await;
    eprintln!(
        "{} ConfigMaps moved to the two others: {sizes:?}",
        moved.len()
    );
    for replica in replicas {
        stop(replica).await;
    }
}

/// Label mode without `patch` on the primary kind: each replica finds out
/// before choosing the mode, says so in the log, and caches every
/// ConfigMap (undivided, as before label mode); no object is lost: every
/// one is reconciled, each by its owner, none twice at once.
#[tokio::test]
async fn without_the_gate_and_without_patch_the_cache_stays_whole_and_says_why() {
    use opkit::rbac::{Rules, Verb};
    let (captured, _log, plane) = gate_off_with_log().await;
    let admin = plane.client().unwrap();
    create_namespace(&admin, "shard-cache").await;
    // read the sharded kinds, the ring's Leases, Events; no `patch`
    let role = Rules::new()
        .allow::<ConfigMap>(&Verb::READ)
        .allow::<Secret>(&Verb::READ)
        .sharding()
        .events()
        .cluster_role("shard-no-patch");
    opkit_tests::grant_cluster_role(&admin, &role, "shard-cache", "no-patch").await;
    let token = opkit_tests::service_account_token(&admin, "shard-cache", "no-patch").await;
    let client = plane.client_with_token(&token).unwrap();
    let per = 4;
    let namespaces = populate(&admin, "nopatch", 8, per).await;
    let all = keys(&namespaces, per);
    let log = Log::default();
    let replicas = vec![
        start(&client, "shard-cache", "a", &log).await,
        start(&client, "shard-cache", "b", &log).await,
    ];
    let since = Instant::now();
    converge(&replicas, Duration::from_secs(20)).await;
    wait_reconciled(&replicas, &log, &all, since).await;
    for replica in &replicas {
        assert_eq!(cached::<ConfigMap>(replica, "nopatch"), all);
        assert_eq!(cached::<Secret>(replica, "nopatch"), all);
    }
    let text = captured.text();
    assert!(
        text.contains("may not patch this kind") && !text.contains("mode=\"label selector\""),
        "{text}"
    );
    let labelled = Api::<ConfigMap>::all(admin.clone())
        .list(&kube::api::ListParams::default().labels("shard.opkit.dev/divided"))
        .await
        .unwrap();
    assert!(labelled.items.is_empty(), "nothing is labelled");
    for replica in replicas {
        stop(replica).await;
    }
}

/// One `shard_replica` process (`SHARD_BY_NAMESPACE=1`); its `cache` and
/// `status` lines.
struct Process {
    child: tokio::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Process {
    fn start(plane: &ControlPlane, lease_ns: &str, name: &str) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_shard_replica"))
            .arg(plane.kubeconfig_path())
            .arg(lease_ns)
            .arg(name)
            .args(["3000", "2000", "500"])
            .env("SHARD_BY_NAMESPACE", "1")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start shard_replica");
        let stdout = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn({
            let lines = lines.clone();
            async move {
                let mut reader = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    if line.starts_with("cache ") || line.starts_with("status ") {
                        lines.lock().unwrap().push(line);
                    }
                }
            }
        });
        Self { child, lines }
    }

    /// The last `cache` line: (objects, RSS KiB), and the most objects seen.
    fn cache(&self) -> ((usize, u64), usize) {
        let lines = self.lines.lock().unwrap();
        let parsed: Vec<(usize, u64)> = lines
            .iter()
            .filter_map(|l| {
                let mut it = l.strip_prefix("cache ")?.split(' ');
                Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
            })
            .collect();
        let peak = parsed.iter().map(|(n, _)| *n).max().unwrap_or(0);
        (parsed.last().copied().unwrap_or((0, 0)), peak)
    }

    fn status(&self) -> String {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .rev()
            .find(|l| l.starts_with("status "))
            .cloned()
            .unwrap_or_default()
    }

    async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// Starts `names` on `plane`, waits until they are all active together and
/// their caches hold `total` ConfigMaps between them, unchanged for 2 s;
/// prints one row per replica.
async fn measure(plane: &ControlPlane, lease_ns: &str, names: &[&str], total: usize, mode: &str) {
    let procs: Vec<Process> = names
        .iter()
        .map(|n| Process::start(plane, lease_ns, n))
        .collect();
    let want = format!("status true {}", names.join(","));
    let started = Instant::now();
    let mut stable_since: Option<(Instant, Vec<(usize, u64)>)> = None;
    loop {
        let now: Vec<(usize, u64)> = procs.iter().map(|p| p.cache().0).collect();
        let active = procs.iter().all(|p| p.status() == want);
        let covered = now.iter().map(|(n, _)| *n).sum::<usize>() >= total;
        let counts: Vec<usize> = now.iter().map(|(n, _)| *n).collect();
        match &stable_since {
            Some((since, before))
                if active
                    && covered
                    && before.iter().map(|(n, _)| *n).collect::<Vec<_>>() == counts =>
            {
                if since.elapsed() > Duration::from_secs(2) {
                    break;
                }
            }
            _ => stable_since = (active && covered).then(|| (Instant::now(), now.clone())),
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "no stable division: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // from the start of the processes to the first of the 2 s unchanged
    let divided = stable_since.map_or(Duration::ZERO, |(since, _)| since - started);
    for (name, p) in names.iter().zip(&procs) {
        let ((objects, rss), peak) = p.cache();
        println!(
            "| {mode} | {} | {name} | {objects} of {total} | {peak} | {:.1} | {:.1} |",
            names.len(),
            rss as f64 / 1024.0,
            divided.as_secs_f64()
        );
    }
    for p in procs {
        p.stop().await;
    }
}

/// The per-replica cache of 1 and 3 replicas, in `shard_replica`
/// processes, over 3 000 ConfigMaps of 4 KiB in 60 namespaces: with the
/// gate on (server-side) and off (label mode). Prints a table:
/// `cargo test -p opkit-tests --test it shard_cache::measure -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement, not a check (about a minute)"]
async fn measure_per_replica_cache() {
    init_tracing();
    println!(
        "| mode | replicas | replica | ConfigMaps cached | peak | RSS MiB | divided after s |"
    );
    println!("|---|---|---|---|---|---|---|");
    let gate_off = ControlPlane::builder()
        .apiserver_arg("--feature-gates=ShardedListAndWatch=false")
        .start()
        .await
        .unwrap();
    for (plane, mode) in [
        (ControlPlane::shared().await.unwrap(), "server-side"),
        (&gate_off, "label selector (gate off)"),
    ] {
        let admin = plane.client().unwrap();
        let (count, per) = (60, 50);
        let mut seed: u64 = 0xca11;
        let data = "x".repeat(4096);
        for _ in 0..count {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let ns = format!("mem-{:06x}", seed >> 40);
            create_namespace(&admin, &ns).await;
            let api = Api::<ConfigMap>::namespaced(admin.clone(), &ns);
            futures::future::join_all((0..per).map(|j| {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(format!("obj-{j}")),
                        ..ObjectMeta::default()
                    },
                    data: Some([("payload".to_owned(), data.clone())].into()),
                    ..ConfigMap::default()
                };
                let api = api.clone();
                async move { api.create(&PostParams::default(), &cm).await.unwrap() }
            }))
            .await;
        }
        let total = count * per;
        create_namespace(&admin, "mem-one").await;
        measure(plane, "mem-one", &["solo"], total, mode).await;
        create_namespace(&admin, "mem-three").await;
        measure(plane, "mem-three", &["a", "b", "c"], total, mode).await;
    }
}
