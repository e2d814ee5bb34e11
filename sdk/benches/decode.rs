//! Decode CPU of list bodies, JSON against protobuf, per kind, as opkit's
//! informers decode them (BENCHMARKS.md, "Protobuf beyond ConfigMap and
//! Secret", and the issue 39 figures after it).
//!
//! ```text
//! cargo bench -p opkit --features protobuf --bench decode
//! ```
//!
//! Each kind is a list of 1000 objects with the same content on both sides
//! (the protobuf body is encoded by prost from `k8s-pb` messages and put in
//! the `k8s\0` envelope the API server sends):
//!
//! * `json_decode`: serde_json into the `k8s-openapi` type;
//! * `json_decode_exact`: the same body decoded as opkit's informers decode
//!   JSON, by `opkit::cache::from_slice_exact` (every `Vec` at its length;
//!   one extra scan of the bytes);
//! * `pb_decode`: opkit's generated protobuf decoder, straight into the
//!   `k8s-openapi` type, as an informer decodes a LIST page
//!   (`managedFields` left out, the kind's codec resolved once per page);
//! * for Pods, a projection (`Projected<Pod, PodView>`: labels, node name,
//!   phase): `json_projected` (exact JSON decode, then the projection),
//!   `pb_projected` (the projection's own protobuf codec, as an informer
//!   of the projection uses it) and `pb_whole_then_project` (the whole
//!   Pods' codec, then the projection by hand): the last two differ only
//!   in how the projection's codec reaches the Pod decoder.
//!
//! * `configmap/*`: 5 data keys, 3 labels, 2 annotations, an owner;
//! * `pod/*`: a Deployment's Pod as the API server stores it: 2 containers
//!   (image, args, 5 env vars, a port, requests/limits, readiness and
//!   liveness probes, 2 mounts, defaults filled in), 2 volumes, tolerations,
//!   and a Running status with 4 conditions and 2 container statuses.

use std::{collections::BTreeMap, hint::black_box};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_pb::{
    api::core::v1 as pb,
    apimachinery::pkg::{
        api::resource::Quantity, apis::meta::v1 as pb_meta, util::intstr::IntOrString,
    },
};
use opkit::cache::{Cacheable, Projected, Projection, decode_protobuf_list, from_slice_exact};
use prost::Message;
use serde::Deserialize;
use serde_json::json;

const N: usize = 1000;
const CREATED: i64 = 1_700_000_000;
const CREATED_JSON: &str = "2023-11-14T22:13:20Z";

#[derive(Deserialize)]
struct List<K> {
    items: Vec<K>,
}

/// What the projected Pods keep beside the metadata essentials (labels
/// among them): the node and the phase.
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

type PodProjected = Projected<Pod, PodView>;

/// `raw` in the envelope the API server puts a protobuf body in.
fn enveloped(kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: s("v1"),
            kind: s(kind),
        }),
        raw: Some(raw),
        content_encoding: s(""),
        content_type: s(""),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn s(v: &str) -> Option<String> {
    Some(v.to_owned())
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn time() -> Option<pb_meta::Time> {
    Some(pb_meta::Time {
        seconds: Some(CREATED),
        nanos: Some(0),
    })
}

fn meta_pb(i: usize, kind: &str) -> pb_meta::ObjectMeta {
    pb_meta::ObjectMeta {
        name: s(&format!("{kind}-{i}")),
        namespace: s("shop"),
        uid: s(&format!("6c0f6a2e-0000-4000-8000-{i:012}")),
        resource_version: s(&format!("{}", 1000 + i)),
        generation: Some(1),
        creation_timestamp: time(),
        labels: map(&[
            ("app", "shop"),
            ("tier", "web"),
            ("pod-template-hash", "5d8f7c9b6"),
        ]),
        annotations: map(&[
            ("example.com/owner", "team-a"),
            ("example.com/revision", "42"),
        ]),
        owner_references: vec![pb_meta::OwnerReference {
            api_version: s("apps/v1"),
            kind: s("ReplicaSet"),
            name: s("shop-5d8f7c9b6"),
            uid: s("0b3e3a9e-0000-4000-8000-000000000001"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        ..Default::default()
    }
}

fn meta_json(i: usize, kind: &str) -> serde_json::Value {
    json!({
        "name": format!("{kind}-{i}"),
        "namespace": "shop",
        "uid": format!("6c0f6a2e-0000-4000-8000-{i:012}"),
        "resourceVersion": format!("{}", 1000 + i),
        "generation": 1,
        "creationTimestamp": CREATED_JSON,
        "labels": {"app": "shop", "tier": "web", "pod-template-hash": "5d8f7c9b6"},
        "annotations": {"example.com/owner": "team-a", "example.com/revision": "42"},
        "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "shop-5d8f7c9b6",
            "uid": "0b3e3a9e-0000-4000-8000-000000000001",
            "controller": true, "blockOwnerDeletion": true
        }]
    })
}

fn config_maps() -> (Vec<u8>, Vec<u8>) {
    let data: Vec<(String, String)> = (0..5)
        .map(|k| (format!("key-{k}"), format!("value-{k}-").repeat(8)))
        .collect();
    let pb_items = (0..N)
        .map(|i| pb::ConfigMap {
            metadata: Some(meta_pb(i, "cm")),
            data: data.iter().cloned().collect(),
            ..Default::default()
        })
        .collect();
    let json_items: Vec<_> = (0..N)
        .map(|i| {
            json!({
                "metadata": meta_json(i, "cm"),
                "data": data.iter().cloned().collect::<BTreeMap<_, _>>(),
            })
        })
        .collect();
    let pb_list = pb::ConfigMapList {
        metadata: Some(pb_meta::ListMeta::default()),
        items: pb_items,
    };
    (
        serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "ConfigMapList", "items": json_items}),
        )
        .expect("JSON"),
        enveloped("ConfigMapList", pb_list.encode_to_vec()),
    )
}

fn quantities(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    [("cpu", cpu), ("memory", memory)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity { string: s(v) }))
        .collect()
}

fn probe_pb(path: &str) -> Option<pb::Probe> {
    Some(pb::Probe {
        handler: Some(pb::ProbeHandler {
            http_get: Some(pb::HttpGetAction {
                path: s(path),
                port: Some(IntOrString {
                    r#type: Some(0),
                    int_val: Some(8080),
                    str_val: None,
                }),
                scheme: s("HTTP"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        initial_delay_seconds: Some(5),
        timeout_seconds: Some(1),
        period_seconds: Some(10),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        ..Default::default()
    })
}

fn container_pb(name: &str) -> pb::Container {
    pb::Container {
        name: s(name),
        image: s("registry.local/shop/web:1.4.2"),
        args: vec![
            "--port=8080".into(),
            "--log=json".into(),
            "--cache=64Mi".into(),
        ],
        ports: vec![pb::ContainerPort {
            name: s("http"),
            container_port: Some(8080),
            protocol: s("TCP"),
            ..Default::default()
        }],
        env: (0..5)
            .map(|e| pb::EnvVar {
                name: s(&format!("SHOP_SETTING_{e}")),
                value: s(&format!("value-{e}")),
                ..Default::default()
            })
            .collect(),
        resources: Some(pb::ResourceRequirements {
            limits: quantities("500m", "256Mi"),
            requests: quantities("100m", "128Mi"),
            ..Default::default()
        }),
        volume_mounts: vec![
            pb::VolumeMount {
                name: s("config"),
                mount_path: s("/etc/shop"),
                read_only: Some(true),
                ..Default::default()
            },
            pb::VolumeMount {
                name: s("kube-api-access"),
                mount_path: s("/var/run/secrets/kubernetes.io/serviceaccount"),
                read_only: Some(true),
                ..Default::default()
            },
        ],
        liveness_probe: probe_pb("/healthz"),
        readiness_probe: probe_pb("/readyz"),
        termination_message_path: s("/dev/termination-log"),
        termination_message_policy: s("File"),
        image_pull_policy: s("IfNotPresent"),
        ..Default::default()
    }
}

fn probe_json(path: &str) -> serde_json::Value {
    json!({
        "httpGet": {"path": path, "port": 8080, "scheme": "HTTP"},
        "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10,
        "successThreshold": 1, "failureThreshold": 3
    })
}

fn container_json(name: &str) -> serde_json::Value {
    json!({
        "name": name,
        "image": "registry.local/shop/web:1.4.2",
        "args": ["--port=8080", "--log=json", "--cache=64Mi"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": (0..5).map(|e| json!({"name": format!("SHOP_SETTING_{e}"), "value": format!("value-{e}")})).collect::<Vec<_>>(),
        "resources": {
            "limits": {"cpu": "500m", "memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"}
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/shop", "readOnly": true},
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
        ],
        "livenessProbe": probe_json("/healthz"),
        "readinessProbe": probe_json("/readyz"),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    })
}

const CONDITIONS: [&str; 4] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
];

fn pod_pb(i: usize) -> pb::Pod {
    let status = |name: &str| pb::ContainerStatus {
        name: s(name),
        state: Some(pb::ContainerState {
            running: Some(pb::ContainerStateRunning { started_at: time() }),
            ..Default::default()
        }),
        last_state: Some(pb::ContainerState::default()),
        ready: Some(true),
        restart_count: Some(0),
        image: s("registry.local/shop/web:1.4.2"),
        image_id: s("registry.local/shop/web@sha256:3f1d0c2b8e"),
        container_id: s(&format!("containerd://{i:064}")),
        started: Some(true),
        ..Default::default()
    };
    pb::Pod {
        metadata: Some(meta_pb(i, "shop")),
        spec: Some(pb::PodSpec {
            volumes: vec![
                pb::Volume {
                    name: s("config"),
                    volume_source: Some(pb::VolumeSource {
                        config_map: Some(pb::ConfigMapVolumeSource {
                            local_object_reference: Some(pb::LocalObjectReference {
                                name: s("shop-config"),
                            }),
                            default_mode: Some(420),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                },
                pb::Volume {
                    name: s("kube-api-access"),
                    volume_source: Some(pb::VolumeSource {
                        secret: Some(pb::SecretVolumeSource {
                            secret_name: s("shop-token"),
                            default_mode: Some(420),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                },
            ],
            containers: vec![container_pb("web"), container_pb("sidecar")],
            restart_policy: s("Always"),
            termination_grace_period_seconds: Some(30),
            dns_policy: s("ClusterFirst"),
            service_account_name: s("default"),
            service_account: s("default"),
            node_name: s("node-1"),
            security_context: Some(pb::PodSecurityContext::default()),
            scheduler_name: s("default-scheduler"),
            tolerations: ["not-ready", "unreachable"]
                .iter()
                .map(|t| pb::Toleration {
                    key: s(&format!("node.kubernetes.io/{t}")),
                    operator: s("Exists"),
                    effect: s("NoExecute"),
                    toleration_seconds: Some(300),
                    ..Default::default()
                })
                .collect(),
            priority: Some(0),
            enable_service_links: Some(true),
            preemption_policy: s("PreemptLowerPriority"),
            ..Default::default()
        }),
        status: Some(pb::PodStatus {
            phase: s("Running"),
            conditions: CONDITIONS
                .iter()
                .map(|c| pb::PodCondition {
                    r#type: s(c),
                    status: s("True"),
                    last_probe_time: Some(pb_meta::Time::default()),
                    last_transition_time: time(),
                    ..Default::default()
                })
                .collect(),
            host_ip: s("10.0.0.1"),
            host_ips: vec![pb::HostIp { ip: s("10.0.0.1") }],
            pod_ip: s(&format!("10.244.{}.{}", i / 250, i % 250)),
            pod_ips: vec![pb::PodIp {
                ip: s(&format!("10.244.{}.{}", i / 250, i % 250)),
            }],
            start_time: time(),
            container_statuses: vec![status("web"), status("sidecar")],
            qos_class: s("Burstable"),
            ..Default::default()
        }),
    }
}

fn pod_json(i: usize) -> serde_json::Value {
    let status = |name: &str| {
        json!({
            "name": name,
            "state": {"running": {"startedAt": CREATED_JSON}},
            "lastState": {},
            "ready": true,
            "restartCount": 0,
            "image": "registry.local/shop/web:1.4.2",
            "imageID": "registry.local/shop/web@sha256:3f1d0c2b8e",
            "containerID": format!("containerd://{i:064}"),
            "started": true
        })
    };
    let ip = format!("10.244.{}.{}", i / 250, i % 250);
    json!({
        "metadata": meta_json(i, "shop"),
        "spec": {
            "volumes": [
                {"name": "config", "configMap": {"name": "shop-config", "defaultMode": 420}},
                {"name": "kube-api-access", "secret": {"secretName": "shop-token", "defaultMode": 420}}
            ],
            "containers": [container_json("web"), container_json("sidecar")],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": "node-1",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": (["not-ready", "unreachable"].iter().map(|t| json!({
                "key": format!("node.kubernetes.io/{t}"), "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300
            })).collect::<Vec<_>>()),
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {
            "phase": "Running",
            "conditions": CONDITIONS.iter().map(|c| json!({
                "type": c, "status": "True", "lastProbeTime": null,
                "lastTransitionTime": CREATED_JSON
            })).collect::<Vec<_>>(),
            "hostIP": "10.0.0.1",
            "hostIPs": [{"ip": "10.0.0.1"}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": CREATED_JSON,
            "containerStatuses": [status("web"), status("sidecar")],
            "qosClass": "Burstable"
        }
    })
}

fn pods() -> (Vec<u8>, Vec<u8>) {
    let pb_list = pb::PodList {
        metadata: Some(pb_meta::ListMeta::default()),
        items: (0..N).map(pod_pb).collect(),
    };
    let json_items: Vec<_> = (0..N).map(pod_json).collect();
    (
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "PodList", "items": json_items}))
            .expect("JSON"),
        enveloped("PodList", pb_list.encode_to_vec()),
    )
}

fn bench_kind<K>(
    c: &mut Criterion,
    name: &str,
    (json_body, pb_body): (Vec<u8>, Vec<u8>),
) -> (Vec<u8>, Vec<u8>)
where
    K: Cacheable + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    // the fixtures decode on both sides, to the same objects (managedFields
    // are not set, so leaving them out changes nothing)
    let decoded: List<K> = serde_json::from_slice(&json_body).expect("JSON fixture decodes");
    assert_eq!(decoded.items.len(), N);
    let pb = decode_protobuf_list::<K>(&pb_body).expect("protobuf fixture decodes");
    assert_eq!(
        pb, decoded.items,
        "protobuf and JSON decode to the same objects"
    );
    println!(
        "{name}: {N} objects, JSON {} bytes, protobuf {} bytes",
        json_body.len(),
        pb_body.len()
    );
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("json_decode", |b| {
        b.iter(|| black_box(serde_json::from_slice::<List<K>>(black_box(&json_body))))
    });
    g.bench_function("json_decode_exact", |b| {
        b.iter(|| black_box(from_slice_exact::<List<K>>(black_box(&json_body))))
    });
    g.bench_function("pb_decode", |b| {
        b.iter(|| black_box(decode_protobuf_list::<K>(black_box(&pb_body))))
    });
    g.finish();
    (json_body, pb_body)
}

/// The projection's decoders against each other (see the module docs).
fn bench_projection(c: &mut Criterion, (json_body, pb_body): (Vec<u8>, Vec<u8>)) {
    let projected = decode_protobuf_list::<PodProjected>(&pb_body).expect("projected decode");
    assert_eq!(projected.len(), N);
    assert_eq!(projected[0].node.as_deref(), Some("node-1"));
    let mut g = c.benchmark_group("pod_projected");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("json_projected", |b| {
        b.iter(|| {
            black_box(
                from_slice_exact::<List<Pod>>(black_box(&json_body)).map(|l| {
                    l.items
                        .into_iter()
                        .map(PodProjected::from_whole)
                        .collect::<Vec<_>>()
                }),
            )
        })
    });
    g.bench_function("pb_projected", |b| {
        b.iter(|| black_box(decode_protobuf_list::<PodProjected>(black_box(&pb_body))))
    });
    g.bench_function("pb_whole_then_project", |b| {
        b.iter(|| {
            black_box(
                decode_protobuf_list::<Pod>(black_box(&pb_body)).map(|pods| {
                    pods.into_iter()
                        .map(PodProjected::from_whole)
                        .collect::<Vec<_>>()
                }),
            )
        })
    });
    g.finish();
}

fn decode(c: &mut Criterion) {
    bench_kind::<ConfigMap>(c, "configmap", config_maps());
    let pods = bench_kind::<Pod>(c, "pod", pods());
    bench_projection(c, pods);
}

criterion_group!(benches, decode);
criterion_main!(benches);
