//! `memory-model measure MODE --kind configmap|pod --kubeconfig K
//! --namespace NS --objects N`: one measurement in a process of its own (a
//! clean heap), printed as one JSON line: the live heap the objects added
//! (bytes asked for, allocations, malloc chunks: `counting`), and the
//! resident set it added.
//!
//! Modes:
//! - `bare`: the objects LISTed as JSON (500 a page, kube's `Api::list`:
//!   serde_json into `k8s_openapi` types), managedFields dropped, kept in
//!   one `Vec<K>`: the k8s-openapi layout of the objects and nothing else;
//! - `bare-exact`: the same, each page decoded as opkit's informers decode
//!   JSON (`opkit::cache::from_slice_exact`: every `Vec` at its length);
//! - `opkit`: an opkit `SharedCache` limited to the namespace, its informer
//!   of `K` synced (defaults: streaming list, protobuf for ConfigMaps, JSON
//!   for Pods, managedFields stripped, read-your-own-writes on);
//! - `opkit-json`: same, JSON (the decoder `bare` uses);
//! - `opkit-no-ryow`: same as `opkit`, read-your-own-writes off;
//! - `opkit-projected`: a projection (`CmView` as in `bench-informer`;
//!   `PodView`: the Pod's phase and readiness, what bench-scale's
//!   reconciler reads) with the metadata essentials.

use std::time::Duration;

use bench_support::{Pid, status_kib};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{Api, Client, Resource, api::ListParams};
use opkit::cache::{Projected, Projection, ReflectorConfig, SharedCache};
use serde::de::DeserializeOwned;

use crate::counting::Counts;

/// What the ConfigMap projection keeps (as `bench-informer`'s `CmView`):
/// the labels (compact) and the `shard` data key.
#[allow(dead_code)] // kept to be read, as an operator would
pub struct CmView {
    labels: Box<[(Box<str>, Box<str>)]>,
    shard: Option<Box<str>>,
}

impl Projection<ConfigMap> for CmView {
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

/// What bench-scale's reconciler reads of a Pod: is it Running, is it
/// Ready (the metadata essentials, labels included, are kept beside).
#[allow(dead_code)]
pub struct PodView {
    running: bool,
    ready: bool,
}

impl Projection<Pod> for PodView {
    fn project(pod: Pod) -> Self {
        let status = pod.status.unwrap_or_default();
        PodView {
            running: status.phase.as_deref() == Some("Running"),
            ready: status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True"),
        }
    }
}

/// Live heap and RSS at one moment.
#[derive(Clone, Copy)]
struct Mark {
    heap: Counts,
    rss_kib: i64,
}

fn mark() -> Mark {
    Mark {
        heap: Counts::now(),
        rss_kib: status_kib(Pid::Me, "VmRSS") as i64,
    }
}

/// The JSON line of one measurement of `n` objects since `before`.
fn report(mode: &str, kind: &str, n: usize, before: Mark, extra: serde_json::Value) {
    let after = mark();
    let d = after.heap.since(before.heap);
    let per = |x: i64| x as f64 / n.max(1) as f64;
    let mut out = serde_json::json!({
        "mode": mode,
        "kind": kind,
        "objects": n,
        "bytes": d.bytes,
        "allocs": d.allocs,
        "chunks": d.chunks,
        "rss_kib": after.rss_kib - before.rss_kib,
        "bytes_per_object": per(d.bytes),
        "allocs_per_object": per(d.allocs),
        "chunks_per_object": per(d.chunks),
        "rss_per_object": per((after.rss_kib - before.rss_kib) * 1024),
    });
    if let (Some(out), Some(extra)) = (out.as_object_mut(), extra.as_object()) {
        out.extend(extra.clone());
    }
    println!("{out}");
}

/// The objects LISTed and kept, managedFields dropped; each page decoded
/// by kube (serde_json), or with `exact` by `opkit::cache::from_slice_exact`.
async fn bare<K>(client: Client, ns: &str, expect: usize, exact: bool) -> Vec<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let request = kube::core::Request::new(K::url_path(&(), Some(ns)));
    let mut kept = Vec::with_capacity(expect);
    let mut lp = ListParams::default().limit(500);
    loop {
        let page = if exact {
            let body = client
                .request_text(request.list(&lp).expect("list request"))
                .await
                .expect("LIST");
            opkit::cache::from_slice_exact::<kube::core::ObjectList<K>>(body.as_bytes())
                .expect("decode")
        } else {
            api.list(&lp).await.expect("LIST")
        };
        for mut obj in page.items {
            obj.meta_mut().managed_fields = None;
            kept.push(obj);
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => return kept,
        }
    }
}

/// An informer of `K` from a cache limited to `ns`, synced; its object count.
async fn informer<K>(client: Client, ns: &str, protobuf: bool, ryow: bool) -> usize
where
    K: opkit::cache::Cacheable<DynamicType = ()>,
    K::Scope: 'static,
{
    let cache = SharedCache::builder(client)
        .namespace(ns)
        .read_your_writes(ryow)
        .reflector_config(ReflectorConfig {
            protobuf,
            ..Default::default()
        })
        .build();
    let informer = cache.informer::<K>().expect("informer");
    cache.start().expect("start");
    informer
        .wait_for_sync()
        .await
        .expect("informer stopped before sync");
    // let the list's transient buffers go, as bench-informer's settle does
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = informer.store().len();
    std::mem::forget(informer); // alive until the process exits
    std::mem::forget(cache);
    n
}

/// Runs one measurement (see the module docs).
pub async fn run(mode: &str, kind: &str, client: Client, ns: &str, expect: usize) {
    // the client's connection and TLS state exist before the first mark
    client.apiserver_version().await.expect("apiserver version");
    let before = mark();
    macro_rules! measure {
        ($k:ty, $view:ty) => {
            match mode {
                "bare" | "bare-exact" => {
                    let kept = bare::<$k>(client, ns, expect, mode == "bare-exact").await;
                    report(
                        mode,
                        kind,
                        kept.len(),
                        before,
                        serde_json::json!({"size_of": std::mem::size_of::<$k>()}),
                    );
                    drop(kept);
                }
                "opkit" | "opkit-json" | "opkit-no-ryow" => {
                    let n = informer::<$k>(client, ns, mode != "opkit-json", mode != "opkit-no-ryow")
                        .await;
                    report(
                        mode,
                        kind,
                        n,
                        before,
                        serde_json::json!({"size_of": std::mem::size_of::<$k>()}),
                    );
                }
                "opkit-projected" => {
                    let n = informer::<Projected<$k, $view>>(client, ns, true, true).await;
                    report(
                        mode,
                        kind,
                        n,
                        before,
                        serde_json::json!({"size_of": std::mem::size_of::<Projected<$k, $view>>()}),
                    );
                }
                other => panic!("unknown mode {other:?}"),
            }
        };
    }
    match kind {
        "configmap" => measure!(ConfigMap, CmView),
        "pod" => measure!(Pod, PodView),
        other => panic!("unknown kind {other:?}"),
    }
}
