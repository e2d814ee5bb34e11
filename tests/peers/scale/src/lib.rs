//! What the scale benchmark's driver (`bench-scale`) and the memory
//! model (`managed-fields`) share: the Pods they create.

use k8s_openapi::api::core::v1::Pod;

/// The namespace the benchmark's Pods live in.
pub const NAMESPACE: &str = "scale";

/// The name of simulated Node `k`.
pub fn node_name(k: usize) -> String {
    format!("kwok-node-{k:03}")
}

/// The name of Pod `i` in its `generation`.
pub fn pod_name(i: usize, generation: u32) -> String {
    format!("pod-{i:05}-g{generation}")
}

/// A Pod as a Deployment would make it (labels, one container with
/// ports, resources and env), bound to its Node.
pub fn pod(i: usize, generation: u32, nodes: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(i, generation),
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/name": "scale-bench",
                "app.kubernetes.io/component": "worker",
                "shard": format!("shard-{}", i % 16),
                "pod-template-hash": "7d9f8b6c5d",
            },
            "annotations": {"bench.opkit.dev/index": i.to_string()},
        },
        "spec": {
            "nodeName": node_name(i % nodes),
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
