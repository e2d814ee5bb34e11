//! A divided cache (`Sharding::by_namespace`) against a real kube-apiserver
//! 1.36: with the `ShardedListAndWatch` gate on (envtest's default) each
//! of three replicas caches only the ConfigMaps (primary) and Secrets
//! (owned) of the namespaces it owns, together exactly all of them; when
//! one leaves, the others relist and take its namespaces. With the gate
//! off each replica caches everything and still reconciles only its share.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ObjectMeta, PostParams};
use opkit::cache::SharedCache;
use opkit::controller::Controller;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::shard::{ShardHandle, Sharding};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, init_tracing};
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(500);

/// (replica, `namespace/name`) of every reconcile.
type Log = Arc<Mutex<Vec<(String, String)>>>;

struct Recorder {
    replica: String,
    log: Log,
}

impl Reconcile for Recorder {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let key = format!("{}/{}", req.namespace.unwrap_or_default(), req.name);
        self.log.lock().unwrap().push((self.replica.clone(), key));
        Ok(Action::done())
    }
}

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
    let controller = Controller::new(Recorder {
        replica: name.to_owned(),
        log: log.clone(),
    })
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
        + serde::de::DeserializeOwned
        + Clone
        + Send
        + Sync
        + 'static,
{
    replica
        .cache
        .list::<K>(None)
        .unwrap()
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
    let started = Instant::now();
    let mut names: Vec<String> = replicas.iter().map(|r| r.name.clone()).collect();
    names.sort();
    while !replicas.iter().all(|r| {
        let s = r.shard.status();
        s.active && s.members == names
    }) {
        assert!(started.elapsed() < within, "no convergence on {names:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until each replica caches exactly the `prefix-*` ConfigMaps and
/// Secrets of the namespaces it owns (`all` split with no overlap).
async fn wait_divided(replicas: &[Replica], prefix: &str, all: &BTreeSet<String>) {
    let started = Instant::now();
    loop {
        let shares: Vec<(BTreeSet<String>, BTreeSet<String>)> = replicas
            .iter()
            .map(|r| (cached::<ConfigMap>(r, prefix), cached::<Secret>(r, prefix)))
            .collect();
        let exact = replicas.iter().zip(&shares).all(|(r, (cms, secrets))| {
            let owned: BTreeSet<String> = all.iter().filter(|k| r.shard.owns(k)).cloned().collect();
            *cms == owned && *secrets == owned
        });
        if exact {
            let sizes: Vec<usize> = shares.iter().map(|(c, _)| c.len()).collect();
            assert_eq!(sizes.iter().sum::<usize>(), all.len(), "{sizes:?}");
            eprintln!(
                "divided cache: {} objects per kind, per replica {sizes:?}",
                all.len()
            );
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "caches not divided: {:?}",
            shares
                .iter()
                .map(|(c, s)| (c.len(), s.len()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every key was reconciled, each by its owner only.
async fn wait_reconciled(replicas: &[Replica], log: &Log, all: &BTreeSet<String>) {
    let started = Instant::now();
    loop {
        let seen: BTreeSet<String> = log
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, key)| all.contains(key))
            .map(|(_, key)| key.clone())
            .collect();
        if seen == *all {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} of {} reconciled",
            seen.len(),
            all.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (replica, key) in log.lock().unwrap().iter().filter(|(_, k)| all.contains(k)) {
        let owners: Vec<&str> = replicas
            .iter()
            .filter(|r| r.shard.owns(key))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(owners, [replica.as_str()], "{key} reconciled by {replica}");
    }
}

async fn stop(replica: Replica) {
    replica.stop.cancel();
    replica.run.await.unwrap();
    replica.shard.shutdown().await;
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
    let namespaces = populate(&admin, "shc", count, per).await;
    let all = keys(&namespaces, per);
    let log = Log::default();
    let mut replicas = Vec::new();
    for name in ["a", "b", "c"] {
        replicas.push(start(&admin, "shard-cache", name, &log).await);
    }
    converge(&replicas, Duration::from_secs(20)).await;
    wait_divided(&replicas, "shc", &all).await;
    wait_reconciled(&replicas, &log, &all).await;

    // one leaves: the two others relist with their new selectors
    let gone = replicas.pop().unwrap();
    stop(gone).await;
    converge(&replicas, Duration::from_secs(20)).await;
    wait_divided(&replicas, "shc", &all).await;
    for replica in replicas {
        stop(replica).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_every_replica_caches_everything_and_reconciles_its_share() {
    init_tracing();
    let plane = ControlPlane::builder()
        .apiserver_arg("--feature-gates=ShardedListAndWatch=false")
        .start()
        .await
        .unwrap();
    let admin = plane.client().unwrap();
    create_namespace(&admin, "shard-cache").await;
    let per = 2;
    let namespaces = populate(&admin, "nogate", 6, per).await;
    let all = keys(&namespaces, per);
    let log = Log::default();
    let replicas = vec![
        start(&admin, "shard-cache", "a", &log).await,
        start(&admin, "shard-cache", "b", &log).await,
    ];
    converge(&replicas, Duration::from_secs(20)).await;
    wait_reconciled(&replicas, &log, &all).await;
    for replica in &replicas {
        assert_eq!(cached::<ConfigMap>(replica, "nogate"), all);
        assert_eq!(cached::<Secret>(replica, "nogate"), all);
    }
    for replica in replicas {
        stop(replica).await;
    }
}
