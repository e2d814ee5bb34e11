//! `informer-peer MODE --kubeconfig K --namespace NS [--resource pods]`:
//! one informer (or the raw LIST floor) syncs the ConfigMaps (or, with
//! `--resource pods`, the Pods) of one namespace; prints one JSON line
//! `{"peer", "sync_ms", "objects", "rss_kib"}`.
//!
//! Modes:
//! - `opkit`: an informer of an `opkit::cache::SharedCache`, defaults
//!   (streaming list when the server supports it, protobuf for ConfigMaps,
//!   managedFields stripped);
//! - `opkit-list`: same, paginated LIST instead of the streaming list;
//! - `opkit-no-ryow`: same as `opkit`, read-your-own-writes off
//!   (`SharedCacheBuilder::read_your_writes(false)`: no recording client
//!   layer, no write tracker, so the informer skips even the one atomic
//!   load per applied change): what RYOW costs the informer (issue 27);
//! - `opkit-keep-mf`: same as `opkit`, managedFields kept;
//! - `opkit-json`: same as `opkit`, JSON instead of protobuf;
//! - `opkit-projected`: same as `opkit`, each ConfigMap cached as a
//!   projection (issue 27) keeping its name (in the metadata essentials),
//!   its labels and one data key (`shard`); each Pod as one keeping its
//!   metadata essentials (labels among them), node name and phase
//!   (issue 39; client-go's `-transform` peer keeps the same fields);
//! - `kube-runtime`: `kube::runtime::reflector` over `watcher` (defaults);
//! - `raw-list`: the floor — a paginated LIST (500 per page) of JSON
//!   decoded into `ConfigMap`s (`Pod`s) and dropped, nothing stored.

use std::{
    future::ready,
    time::{Duration, Instant},
};

use bench_support::{Pid, arg, cpu_secs, status_kib};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::{ConfigMap, Pod},
};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, reflector, watcher},
};
use opkit::cache::{Cacheable, Projected, Projection, ReflectorConfig, SharedCache, StreamingList};
use serde::de::DeserializeOwned;

/// What the peers are generic over: ConfigMap or Pod.
trait Kind:
    Cacheable
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + DeserializeOwned
{
}
impl<K> Kind for K where
    K: Cacheable
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
{
}

/// What the projected peer keeps of a ConfigMap beside the metadata
/// essentials: its labels (compact: a boxed slice, not a `BTreeMap`) and
/// the `shard` data key.
#[allow(dead_code)] // kept to be read, as an operator would
struct CmView {
    labels: Box<[(Box<str>, Box<str>)]>,
    shard: Option<Box<str>>,
}

impl Projection<ConfigMap> for CmView {
    // the view keeps the labels itself, more compactly than the metadata's map
    const LABELS: bool = false;
    fn project(cm: ConfigMap) -> Self {
        CmView {
            labels: cm
                .metadata
                .labels
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
            shard: cm
                .data
                .and_then(|mut d| d.remove("shard"))
                .map(String::into_boxed_str),
        }
    }
}

/// What the projected peer keeps of a Pod beside the metadata essentials
/// (its labels among them): the node it runs on and its phase.
#[allow(dead_code)] // kept to be read, as an operator would
struct PodView {
    node: Option<Box<str>>,
    phase: Option<Box<str>>,
}

impl Projection<Pod> for PodView {
    fn project(pod: Pod) -> Self {
        PodView {
            node: pod
                .spec
                .and_then(|s| s.node_name)
                .map(String::into_boxed_str),
            phase: pod.status.and_then(|s| s.phase).map(String::into_boxed_str),
        }
    }
}

async fn opkit_projected<T: Cacheable + Resource<DynamicType = ()>>(
    client: Client,
    ns: &str,
) -> usize {
    let cache = SharedCache::builder(client).namespace(ns).build();
    let informer = cache.informer::<T>().expect("informer");
    cache.start().expect("start");
    informer
        .wait_for_sync()
        .await
        .expect("informer stopped before sync");
    let n = informer.store().len();
    std::mem::forget(informer);
    std::mem::forget(cache);
    n
}

/// `--features mimalloc` / `--features jemalloc`: the allocator A/B of
/// BENCHMARKS.md ("Informer"); glibc malloc otherwise.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The opkit informer as a controller gets it: from a `SharedCache` limited
/// to the namespace (defaults: streaming list, protobuf for ConfigMaps,
/// managedFields stripped, read-your-own-writes on).
async fn opkit<K: Kind>(
    client: Client,
    ns: &str,
    streaming: bool,
    strip: bool,
    protobuf: bool,
    ryow: bool,
) -> usize {
    // The cache's own scope is the namespace, as a controller's cache
    // limited to its namespace: its informer is the one reconcile reads
    // use, so it is the one that does read-your-own-writes bookkeeping (an
    // informer of another scope, e.g. `informer_for` a namespace of a
    // cluster-wide cache, does none).
    let mut builder = SharedCache::builder(client)
        .namespace(ns)
        .read_your_writes(ryow)
        .reflector_config(ReflectorConfig {
            streaming_list: if streaming {
                StreamingList::Auto
            } else {
                StreamingList::Off
            },
            protobuf,
            ..Default::default()
        });
    if !strip {
        builder = builder.keep_managed_fields();
    }
    let cache = builder.build();
    let informer = cache.informer::<K>().expect("informer");
    cache.start().expect("start");
    informer
        .wait_for_sync()
        .await
        .expect("informer stopped before sync");
    let n = informer.store().len();
    std::mem::forget(informer); // keep it (and its cache) alive until exit
    std::mem::forget(cache);
    n
}

async fn kube_runtime<K: Kind>(client: Client, ns: &str) -> usize {
    let api: Api<K> = Api::namespaced(client, ns);
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, watcher::Config::default()))
        .applied_objects()
        .for_each(|_| ready(()));
    tokio::spawn(stream);
    reader.wait_until_ready().await.expect("reflector ready");
    let n = reader.state().len();
    std::mem::forget(reader);
    n
}

/// A list page, decoded with no detour (no `#[serde(flatten)]` buffering).
#[derive(serde::Deserialize)]
#[serde(bound = "K: DeserializeOwned")]
struct Page<K> {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta,
    items: Vec<K>,
}

async fn raw_list<K: Kind>(client: Client, ns: &str) -> usize {
    let path = K::url_path(&(), Some(ns));
    let mut cont: Option<String> = None;
    let mut n = 0;
    loop {
        let mut q = format!("{path}?limit=500");
        if let Some(c) = &cont {
            q.push_str("&continue=");
            q.push_str(c);
        }
        let req = http::Request::get(q)
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::empty())
            .expect("request");
        let t0 = Instant::now();
        let res = client.send(req).await.expect("LIST");
        assert!(res.status().is_success(), "LIST failed: {}", res.status());
        let t1 = Instant::now();
        let bytes = res.into_body().collect().await.expect("body").to_bytes();
        let t2 = Instant::now();
        let page: Page<K> = serde_json::from_slice(&bytes).expect("decode");
        if std::env::var_os("PEER_DEBUG").is_some() {
            eprintln!(
                "page: headers {:?} body {:?} decode {:?} ({} bytes)",
                t1 - t0,
                t2 - t1,
                t2.elapsed(),
                bytes.len()
            );
        }
        n += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => cont = Some(c),
            None => return n,
        }
    }
}

/// Runs the peer `mode` over kind `K`, projected as `P`.
async fn run<K: Kind, P: Cacheable + Resource<DynamicType = ()>>(
    mode: &str,
    client: Client,
    ns: &str,
) -> usize {
    match mode {
        "opkit" => opkit::<K>(client, ns, true, true, true, true).await,
        "opkit-no-ryow" => opkit::<K>(client, ns, true, true, true, false).await,
        "opkit-list" => opkit::<K>(client, ns, false, true, true, true).await,
        "opkit-keep-mf" => opkit::<K>(client, ns, true, false, true, true).await,
        "opkit-json" => opkit::<K>(client, ns, true, true, false, true).await,
        "opkit-projected" => opkit_projected::<P>(client, ns).await,
        "kube-runtime" => kube_runtime::<K>(client, ns).await,
        "raw-list" => raw_list::<K>(client, ns).await,
        other => panic!("unknown mode {other:?}"),
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_default();
    let kubeconfig = arg(&args, "--kubeconfig").expect("--kubeconfig");
    let ns = arg(&args, "--namespace").expect("--namespace");
    let pods = match arg(&args, "--resource").as_deref() {
        None | Some("configmaps") => false,
        Some("pods") => true,
        Some(other) => panic!("--resource: configmaps or pods, not {other:?}"),
    };
    let settle = Duration::from_millis(
        arg(&args, "--settle-ms")
            .and_then(|s| s.parse().ok())
            .unwrap_or(1000),
    );
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    let client = Client::try_from(config).expect("client");

    let start = Instant::now();
    // Every peer runs on a runtime worker (as a spawned task), like the
    // informers' own tasks: the main thread's block_on would add a
    // cross-thread wake-up per received chunk.
    let m = mode.clone();
    let objects = tokio::spawn(async move {
        if pods {
            run::<Pod, Projected<Pod, PodView>>(&m, client, &ns).await
        } else {
            run::<ConfigMap, Projected<ConfigMap, CmView>>(&m, client, &ns).await
        }
    })
    .await
    .expect("peer task");
    let sync_ms = start.elapsed().as_secs_f64() * 1000.0;
    // CPU time of this process so far, in ms (10 ms resolution)
    let cpu = cpu_secs(Pid::Me) * 1000.0;
    if std::env::var_os("PEER_MALLOC_STATS").is_some() {
        // where the RSS goes: live heap vs free memory malloc keeps
        // SAFETY: mallinfo2 only reads glibc's allocator statistics.
        let m = unsafe { libc::mallinfo2() };
        eprintln!(
            "malloc: in use {} KiB (arena {} KiB, mmap {} KiB), free held {} KiB, objects {objects}, in use per object {} B",
            (m.uordblks + m.hblkhd) / 1024,
            m.arena / 1024,
            m.hblkhd / 1024,
            m.fordblks / 1024,
            (m.uordblks + m.hblkhd) / objects.max(1),
        );
    }
    tokio::time::sleep(settle).await;
    println!(
        "{}",
        serde_json::json!({"peer": mode, "sync_ms": sync_ms, "cpu_ms": cpu, "objects": objects, "rss_kib": status_kib(Pid::Me, "VmRSS") as u64})
    );
    std::process::exit(0);
}
