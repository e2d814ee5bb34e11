//! The opkit peer of `make bench-e2e` (tests/peers/bench-e2e.sh).
//!
//! The same small operator as the controller-runtime and kube-runtime
//! peers: for every ConfigMap labelled `bench=src`, keep an owned ConfigMap
//! `<name>-derived` whose `data["source-hash"]` is the hash of the source's
//! payload, and write that hash back on the source as the annotation
//! `bench/observed` — each write only when it differs, so it converges.
//!
//! opkit's defaults (`SharedCache` for the namespace, `Controller::for_` +
//! `owns`), 4 concurrent reconciles; kube's client has no client-side rate
//! limit.
//!
//! Output, one line per event (read by the driver):
//!
//! ```text
//! S <name> <resourceVersion|-> <unix ns> <requests so far>   reconcile start
//! W <name> <hash> <unix ns> <requests so far>               source converged
//! ```
//!
//! `e2e-opkit --kubeconfig K --namespace NS --salt S [--workers 4]
//! [--read-your-writes true|false]` (default true, opkit's default; false
//! measures what read-your-own-writes costs)

use std::sync::atomic::{AtomicU64, Ordering};

use bench_support::{arg, now_ns};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::Selector;
use kube::{Client, ResourceExt};
use opkit::cache::SharedCache;
use opkit::controller::Controller;
use opkit::predicate::LabelSelector;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

static REQUESTS: AtomicU64 = AtomicU64::new(0);

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

struct Derive {
    salt: String,
}

impl Reconcile for Derive {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let Some(src) = ctx.object().await? else {
            println!(
                "S {} - {} {}",
                req.name,
                now_ns(),
                REQUESTS.load(Ordering::Relaxed)
            );
            return Ok(Action::done());
        };
        println!(
            "S {} {} {} {}",
            req.name,
            src.resource_version().as_deref().unwrap_or("-"),
            now_ns(),
            REQUESTS.load(Ordering::Relaxed)
        );
        if src.labels().get("bench").map(String::as_str) != Some("src") {
            return Ok(Action::done());
        }
        let payload = src
            .data
            .as_ref()
            .and_then(|d| d.get("payload"))
            .map(String::as_str)
            .unwrap_or("");
        let hash = source_hash(&self.salt, payload);
        let ns = req.namespace.clone().unwrap_or_default();
        let api: Api<ConfigMap> = Api::namespaced(ctx.client(), &ns);
        let derived_name = format!("{}-derived", req.name);
        match ctx.get::<ConfigMap>(Some(&ns), &derived_name).await? {
            None => {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(derived_name),
                        namespace: Some(ns.clone()),
                        labels: Some([("bench".to_string(), "derived".to_string())].into()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "ConfigMap".into(),
                            name: req.name.clone(),
                            uid: src.uid().unwrap_or_default(),
                            controller: Some(true),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    },
                    data: Some([("source-hash".to_string(), hash.clone())].into()),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await?;
            }
            Some(d) if d.data.as_ref().and_then(|m| m.get("source-hash")) != Some(&hash) => {
                let patch = serde_json::json!({"data": {"source-hash": hash}});
                api.patch(
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
            api.patch(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        println!(
            "W {} {hash} {} {}",
            req.name,
            now_ns(),
            REQUESTS.load(Ordering::Relaxed)
        );
        Ok(Action::done())
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kubeconfig = arg(&args, "--kubeconfig").expect("--kubeconfig");
    let ns = arg(&args, "--namespace").expect("--namespace");
    let salt = arg(&args, "--salt").unwrap_or_default();
    let workers: usize = arg(&args, "--workers")
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let read_your_writes = match arg(&args, "--read-your-writes").as_deref() {
        None | Some("true") => true,
        Some("false") => false,
        Some(other) => panic!("--read-your-writes takes true or false, not {other:?}"),
    };

    let config = opkit::config::load(&opkit::config::ConfigSource::File {
        path: kubeconfig.into(),
        context: None,
    })
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
    let cache = SharedCache::builder(client)
        .namespace(ns)
        .read_your_writes(read_your_writes)
        .build();
    let controller = Controller::with_predicate(
        Derive { salt },
        LabelSelector::new(Selector::from_iter([("bench", "src")])),
    )
    .owns::<ConfigMap>()
    .max_concurrent_reconciles(workers)
    .read_your_writes(read_your_writes);
    controller
        .run(&cache, std::future::pending())
        .await
        .expect("controller");
}
