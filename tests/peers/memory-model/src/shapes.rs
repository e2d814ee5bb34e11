//! The objects measured, in the shapes of the benchmarks they model: the
//! ConfigMaps of `bench-informer` (~1 KiB `payload` + a `shard` key, one
//! label; `tests/peers/rust-informers/src/bin/bench_informer.rs`) and the
//! Pods of `bench-scale` (a Deployment-like Pod bound to a Node, with the
//! Running/Ready status kwok writes there; `tests/peers/scale`). Both are
//! created through the API (so the apiserver defaults them and they carry
//! `managedFields`, as there); the Pod status is written here by the driver
//! (a second field manager, as kwok is there), no kwok needed.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

/// ~1 KiB of varied text, as `bench_informer`'s `payload`.
fn payload(i: usize) -> String {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect()
}

fn configmap(i: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("cm-{i:06}")),
            labels: Some([("bench".to_string(), "informer".to_string())].into()),
            ..Default::default()
        },
        data: Some(
            [
                ("payload".to_string(), payload(i)),
                ("shard".to_string(), (i % 16).to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

const NODES: usize = 20;

/// The Pod of `bench_scale` (its `pod(i, 0, 20)`), in namespace `ns`.
fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i:05}-g0"),
            "labels": {
                "app.kubernetes.io/name": "scale-bench",
                "app.kubernetes.io/component": "worker",
                "shard": format!("shard-{}", i % 16),
                "pod-template-hash": "7d9f8b6c5d",
            },
            "annotations": {"bench.opkit.dev/index": i.to_string()},
        },
        "spec": {
            "nodeName": format!("kwok-node-{}", i % NODES),
            "containers": [{
                "name": "app",
                "image": "registry.example/scale-bench/app:1.4.2",
                "args": ["--listen=:8080", "--log-level=info"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [
                    {"name": "SHARD", "value": format!("shard-{}", i % 16)},
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"memory": "64Mi"},
                },
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            }],
            "terminationGracePeriodSeconds": 30,
        },
    }))
    .expect("pod template")
}

/// The status kwok's `scale-pod-running` Stage writes
/// (`tests/peers/scale/kwok/stages.yaml`).
fn running_status(i: usize) -> serde_json::Value {
    let now = "2026-11-26T07:00:00Z";
    let cond =
        |t: &str| serde_json::json!({"type": t, "status": "True", "lastTransitionTime": now});
    serde_json::json!({"status": {
        "phase": "Running",
        "startTime": now,
        "hostIP": format!("10.0.0.{}", 2 + i % NODES),
        "podIP": format!("10.64.{}.{}", (i / 250) % 256, 2 + i % 250),
        "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
        "containerStatuses": [{
            "name": "app",
            "image": "registry.example/scale-bench/app:1.4.2",
            "imageID": "kwok://registry.example/scale-bench/app:1.4.2",
            "containerID": "kwok://app",
            "ready": true,
            "started": true,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
        }],
    }})
}

async fn namespace(client: &kube::Client, ns: &str) {
    let nss: Api<Namespace> = Api::all(client.clone());
    let _ = nss
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await;
}

/// Retries `op` on transport errors; an object that already exists counts.
async fn retry<F, Fut, T>(what: &str, mut op: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    for attempt in 0..5 {
        match op().await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => return,
            Err(e) if attempt < 4 => {
                eprintln!("memory-model: {what}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Creates `n` ConfigMaps of the informer benchmark's shape in `ns`.
pub async fn configmaps(client: &kube::Client, ns: &str, n: usize) {
    namespace(client, ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .for_each_concurrent(64, |i| {
            let api = api.clone();
            async move {
                let cm = configmap(i);
                let pp = PostParams::default();
                retry(&format!("create cm {i}"), || api.create(&pp, &cm)).await;
            }
        })
        .await;
}

/// Creates `n` Pods of the scale benchmark's shape in `ns`, each then
/// marked Running and Ready as kwok would.
pub async fn pods(client: &kube::Client, ns: &str, n: usize) {
    namespace(client, ns).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    futures::stream::iter(0..n)
        .for_each_concurrent(64, |i| {
            let api = api.clone();
            async move {
                let p = pod(i);
                let name = p.metadata.name.clone().unwrap_or_default();
                let pp = PostParams::default();
                retry(&format!("create {name}"), || api.create(&pp, &p)).await;
                let status = running_status(i);
                let patch = Patch::Merge(&status);
                let params = PatchParams {
                    field_manager: Some("memory-model-kwok".into()),
                    ..Default::default()
                };
                retry(&format!("status of {name}"), || {
                    api.patch_status(&name, &params, &patch)
                })
                .await;
            }
        })
        .await;
}
