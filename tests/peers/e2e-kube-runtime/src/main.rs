//! The kube-runtime peer of `make bench-e2e` (tests/peers/bench-e2e.sh).
//!
//! The same small operator as the opkit and controller-runtime peers: for
//! every ConfigMap labelled `bench=src`, keep an owned ConfigMap
//! `<name>-derived` whose `data["source-hash"]` is the hash of the source's
//! payload, and write that hash back on the source as the annotation
//! `bench/observed` — each write only when it differs, so it converges.
//!
//! kube-runtime's `Controller` with its defaults, except 4 concurrent
//! reconciles. The derived objects are read from a reflector store fed by
//! the same watch that triggers the owner (`owns_stream`, kube's
//! `unstable-runtime` feature), so reads come from a cache as in the other
//! peers and no object is watched twice. kube-rs has no client-side rate
//! limit.
//!
//! Output, one line per event (read by the driver):
//!
//! ```text
//! S <name> <resourceVersion|-> <unix ns> <requests so far>   reconcile start
//! W <name> <hash> <unix ns> <requests so far>               source converged
//! ```
//!
//! `e2e-kube-runtime --kubeconfig K --namespace NS --salt S [--workers 4]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bench_support::{arg, now_ns};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

static REQUESTS: AtomicU64 = AtomicU64::new(0);

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct Error(#[from] kube::Error);

struct Ctx {
    api: Api<ConfigMap>,
    derived: Store<ConfigMap>,
    salt: String,
}

/// FNV-1a 64 over salt, a newline and the payload, as hex.
fn source_hash(salt: &str, payload: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in salt
        .bytes()
        .chain(std::iter::once(b'\n'))
        .chain(payload.bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

async fn reconcile(src: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = src.name_any();
    println!(
        "S {name} {} {} {}",
        src.resource_version().as_deref().unwrap_or("-"),
        now_ns(),
        REQUESTS.load(Ordering::Relaxed)
    );
    if src.labels().get("bench").map(String::as_str) != Some("src") {
        return Ok(Action::await_change());
    }
    let payload = src
        .data
        .as_ref()
        .and_then(|d| d.get("payload"))
        .map(String::as_str)
        .unwrap_or("");
    let hash = source_hash(&ctx.salt, payload);
    let derived_name = format!("{name}-derived");
    let ns = src.namespace().unwrap_or_default();
    let derived = ctx.derived.get(&ObjectRef::new(&derived_name).within(&ns));
    match derived {
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(derived_name),
                    namespace: Some(ns.clone()),
                    labels: Some([("bench".to_string(), "derived".to_string())].into()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "ConfigMap".into(),
                        name: name.clone(),
                        uid: src.uid().unwrap_or_default(),
                        controller: Some(true),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                data: Some([("source-hash".to_string(), hash.clone())].into()),
                ..Default::default()
            };
            ctx.api.create(&PostParams::default(), &cm).await?;
        }
        Some(d) if d.data.as_ref().and_then(|m| m.get("source-hash")) != Some(&hash) => {
            let patch = serde_json::json!({"data": {"source-hash": hash}});
            ctx.api
                .patch(
                    &derived_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        Some(_) => {}
    }
    if src.annotations().get("bench/observed") != Some(&hash) {
        let patch = serde_json::json!({"metadata": {"annotations": {"bench/observed": hash}}});
        ctx.api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    println!(
        "W {name} {hash} {} {}",
        now_ns(),
        REQUESTS.load(Ordering::Relaxed)
    );
    Ok(Action::await_change())
}

fn error_policy(_src: Arc<ConfigMap>, _error: &Error, _ctx: Arc<Ctx>) -> Action {
    // kube-runtime has no per-key backoff of its own; retry soon, like the
    // first steps of the other peers' rate limiters.
    Action::requeue(std::time::Duration::from_millis(5))
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kubeconfig = arg(&args, "--kubeconfig").expect("--kubeconfig");
    let ns = arg(&args, "--namespace").expect("--namespace");
    let salt = arg(&args, "--salt").unwrap_or_default();
    let workers: u16 = arg(&args, "--workers")
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);

    let kc = kube::config::Kubeconfig::read_from(&kubeconfig).expect("read kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig");
    let count = tower::util::MapRequestLayer::new(|req: http::Request<kube::client::Body>| {
        REQUESTS.fetch_add(1, Ordering::Relaxed);
        req
    });
    let client: Client = kube::client::ClientBuilder::try_from(config)
        .expect("client")
        .with_layer(&count)
        .build();
    let api: Api<ConfigMap> = Api::namespaced(client, &ns);

    let (derived, writer) = reflector::store();
    let derived_stream = reflector::reflector(
        writer,
        watcher(
            api.clone(),
            watcher::Config::default().labels("bench=derived"),
        ),
    )
    .touched_objects();
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        derived,
        salt,
    });
    Controller::new(api, watcher::Config::default().labels("bench=src"))
        .with_config(ControllerConfig::default().concurrency(workers))
        .owns_stream(derived_stream)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| std::future::ready(()))
        .await;
}
