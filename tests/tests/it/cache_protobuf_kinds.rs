//! Every built-in kind through protobuf, against a real apiserver: objects
//! created through JSON with many fields set (int-or-string, quantities,
//! times with fractions, maps, empty and absent lists, raw extensions,
//! schemas) read back by an informer that asks for protobuf equal what an
//! informer reading JSON decodes, for the fixtures below and for every
//! object the apiserver keeps of those kinds itself (system roles,
//! priority classes, flow schemas, API services, leases, ...); after a
//! LIST and again after watch events. Every protobuf response really was
//! protobuf.

use std::{collections::BTreeMap, fmt::Debug, time::Duration};

use futures::future::BoxFuture;
use k8s_openapi::{
    api::{
        admissionregistration::v1 as admission, apps::v1 as apps, autoscaling::v2 as autoscaling,
        batch::v1 as batch, coordination::v1 as coordination, core::v1 as core,
        discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
        networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac,
        scheduling::v1 as scheduling, storage::v1 as storage,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    kube_aggregator::pkg::apis::apiregistration::v1::APIService,
};
use kube::{
    Client, Resource,
    api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams},
};
use opkit::cache::{Cacheable, ReflectorConfig, SharedCache, SharedIndexInformer, StreamingList};
use opkit_envtest::ControlPlane;
use opkit_tests::{content_type_recording_client, create_namespace, eventually, init_tracing};
use serde::Serialize;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const NS: &str = "pbkinds";
/// Quotas and limits would constrain the fixtures of `NS`: they live here.
const QUOTA_NS: &str = "pbkinds-quota";

/// `apiVersion/kind` of `K`.
fn kind_of<K: Resource<DynamicType = ()>>() -> String {
    format!("{}/{}", K::api_version(&()), K::kind(&()))
}

/// What two informers of one kind hold: objects by `namespace/name`, with
/// their resourceVersion and JSON form.
type Snapshot = BTreeMap<String, (String, Value)>;

/// One kind read three times: through protobuf (streaming list, and
/// paginated LIST) and through JSON.
trait Both: Send + Sync {
    fn kind(&self) -> String;
    fn synced(&self) -> BoxFuture<'_, ()>;
    /// The protobuf informers' snapshots, and the JSON informer's.
    fn snapshots(&self) -> (Vec<Snapshot>, Snapshot);
}

struct Pair<K: Cacheable> {
    pb: Vec<SharedIndexInformer<K>>,
    json: SharedIndexInformer<K>,
}

fn snapshot<K>(informer: &SharedIndexInformer<K>) -> Snapshot
where
    K: Cacheable<DynamicType = ()> + Serialize,
{
    informer
        .store()
        .list()
        .into_iter()
        .map(|o| {
            let m = o.meta();
            let key = format!(
                "{}/{}",
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default()
            );
            let rv = m.resource_version.clone().unwrap_or_default();
            (key, (rv, serde_json::to_value(&*o).expect("serializes")))
        })
        .collect()
}

impl<K> Both for Pair<K>
where
    K: Cacheable<DynamicType = ()> + Serialize + Clone + Debug,
{
    fn kind(&self) -> String {
        kind_of::<K>()
    }

    fn synced(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for i in self.pb.iter().chain([&self.json]) {
                tokio::time::timeout(WAIT, i.wait_for_sync())
                    .await
                    .unwrap_or_else(|_| panic!("{} synced in time", kind_of::<K>()))
                    .expect("synced");
            }
        })
    }

    fn snapshots(&self) -> (Vec<Snapshot>, Snapshot) {
        (self.pb.iter().map(snapshot).collect(), snapshot(&self.json))
    }
}

fn pair<K>(pb: &[SharedCache], json: &SharedCache) -> Box<dyn Both>
where
    K: Cacheable<DynamicType = ()> + Serialize + Clone + Debug,
{
    Box::new(Pair::<K> {
        pb: pb
            .iter()
            .map(|c| c.informer::<K>().expect("protobuf informer"))
            .collect(),
        json: json.informer::<K>().expect("JSON informer"),
    })
}

/// The path of the first place two JSON values differ, and both sides.
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        // A key on one side only is a difference, `null` included: absent
        // and `null` are what the decoders must keep apart.
        (Value::Object(x), Value::Object(y)) => {
            x.keys()
                .chain(y.keys())
                .find_map(|k| match (x.get(k), y.get(k)) {
                    (Some(a), Some(b)) => first_difference(&format!("{path}.{k}"), a, b),
                    (a, b) => Some(format!("{path}.{k}: protobuf {a:?} / JSON {b:?}")),
                })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (a, b))| first_difference(&format!("{path}[{i}]"), a, b)),
        _ if a == b => None,
        _ => Some(format!("{path}: protobuf {a} / JSON {b}")),
    }
}

/// Compares the objects both informers hold at the same resourceVersion;
/// returns how many were compared and every difference.
fn compare(kinds: &[Box<dyn Both>]) -> (usize, Vec<String>) {
    let mut compared = 0;
    let mut differences = Vec::new();
    for k in kinds {
        let (pbs, json) = k.snapshots();
        for pb in &pbs {
            for (key, (rv, j)) in &json {
                let Some((pb_rv, p)) = pb.get(key) else {
                    continue;
                };
                if pb_rv != rv {
                    continue;
                }
                compared += 1;
                if let Some(d) = first_difference("", p, j) {
                    differences.push(format!("{} {key}: {d}", k.kind()));
                }
            }
        }
    }
    (compared, differences)
}

/// Creates `body` as a `K` through JSON (and its status, if given); the
/// apiserver's refusal as an error.
async fn create<K>(
    client: &Client,
    ns: Option<&str>,
    mut body: Value,
    status: Option<Value>,
) -> Result<Fixture, String>
where
    K: Resource<DynamicType = ()>,
{
    let ar = ApiResource::erase::<K>(&());
    body["apiVersion"] = json!(K::api_version(&()));
    body["kind"] = json!(K::kind(&()));
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let obj: DynamicObject = serde_json::from_value(body).expect("a DynamicObject");
    let name = obj.metadata.name.clone().expect("a name");
    api.create(&PostParams::default(), &obj)
        .await
        .map_err(|e| format!("create {} {name}: {e}", kind_of::<K>()))?;
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .map_err(|e| format!("status of {} {name}: {e}", kind_of::<K>()))?;
    }
    Ok(Fixture {
        kind: kind_of::<K>(),
        key: format!("{}/{name}", ns.unwrap_or_default()),
        name,
        namespace: ns.map(str::to_owned),
        resource: ar,
    })
}

struct Fixture {
    kind: String,
    key: String,
    name: String,
    namespace: Option<String>,
    resource: ApiResource,
}

fn container(name: &str) -> Value {
    json!({"name": name, "image": "example.com/app:1"})
}

#[allow(clippy::too_many_lines)]
async fn fixtures(c: &Client) -> Vec<Result<Fixture, String>> {
    let ns = Some(NS);
    let mut out = Vec::new();
    let pod_spec = json!({
        "containers": [{
            "name": "app", "image": "example.com/app:1", "args": [], "command": ["/app", "--x"],
            "env": [
                {"name": "A", "value": "1"}, {"name": "EMPTY", "value": ""},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}}
            ],
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"cpu": "0.5", "memory": "1Gi", "ephemeral-storage": "2G"}
            },
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
            "livenessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 3},
            "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}},
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true
            },
            "volumeMounts": [
                {"name": "data", "mountPath": "/data"},
                {"name": "cfg", "mountPath": "/cfg", "readOnly": true}
            ]
        }],
        "initContainers": [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always"}],
        "volumes": [
            {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 420, "items": [{"key": "a", "path": "a.txt"}]}},
            {"name": "proj", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}]}}
        ],
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [
            {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
            {"operator": "Exists", "tolerationSeconds": 30, "effect": "NoExecute"}
        ],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 10,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "shop"}}}
        }]}},
        "serviceAccountName": "sa",
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"fsGroup": 2000, "supplementalGroups": [1, 2, 3],
            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]},
        "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
        "topologySpreadConstraints": [{
            "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["shop"]}]}
        }],
        "readinessGates": [{"conditionType": "example.com/ready"}]
    });
    out.push(
        create::<core::Pod>(c, ns, json!({
            "metadata": {"name": "rich", "labels": {"app": "shop"}, "annotations": {"note": "ünïcödé ✓"}},
            "spec": pod_spec
        }), Some(json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}],
            "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}],
            "startTime": "2024-01-02T03:04:05Z",
            "containerStatuses": [{
                "name": "app", "ready": true, "restartCount": 0, "image": "example.com/app:1", "imageID": "",
                "state": {"running": {"startedAt": "2024-01-02T03:04:05Z"}}
            }]
        })))
        .await,
    );
    out.push(
        create::<core::ConfigMap>(c, ns, json!({
            "metadata": {"name": "cfg"},
            "data": {"a": "1", "empty": ""}, "binaryData": {"bin": "AAH+/w=="}, "immutable": false
        }), None)
        .await,
    );
    out.push(
        create::<core::Secret>(
            c,
            ns,
            json!({
                "metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": "cert", "tls.key": "key"}
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<apps::Deployment>(c, ns, json!({
            "metadata": {"name": "rich"},
            "spec": {
                "replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "revisionHistoryLimit": 3, "progressDeadlineSeconds": 60, "minReadySeconds": 0,
                "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{
                    "name": "c", "image": "nginx", "resources": {"limits": {"example.com/gpu": "1"}}
                }]}}
            }
        }), None)
        .await,
    );
    out.push(
        create::<apps::StatefulSet>(c, ns, json!({
            "metadata": {"name": "rich"},
            "spec": {
                "replicas": 0, "serviceName": "svc", "selector": {"matchLabels": {"app": "s"}},
                "podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                "ordinals": {"start": 1},
                "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [container("c")]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                    "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}
                }}]
            }
        }), None)
        .await,
    );
    out.push(
        create::<apps::DaemonSet>(c, ns, json!({
            "metadata": {"name": "rich"},
            "spec": {
                "selector": {"matchLabels": {"app": "ds"}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}},
                "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {"hostNetwork": true, "containers": [{
                    "name": "c", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 80}]
                }]}}
            }
        }), None)
        .await,
    );
    out.push(
        create::<apps::ReplicaSet>(c, ns, json!({
            "metadata": {"name": "rich"},
            "spec": {"replicas": 0, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                "template": {"metadata": {"labels": {"app": "rs"}}, "spec": {"containers": [container("c")]}}}
        }), None)
        .await,
    );
    out.push(
        create::<apps::ControllerRevision>(
            c,
            ns,
            json!({
                "metadata": {"name": "rev"},
                "data": {"spec": {"template": {"x": 1}}, "list": [1, "a", null, 2.5]},
                "revision": 3
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<core::Service>(c, ns, json!({
            "metadata": {"name": "svc"},
            "spec": {
                "type": "ClusterIP", "selector": {"app": "d"},
                "ports": [
                    {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                    {"name": "metrics", "port": 9090, "targetPort": 9091}
                ],
                "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 300}},
                "publishNotReadyAddresses": false
            }
        }), None)
        .await,
    );
    out.push(
        create::<core::Service>(
            c,
            ns,
            json!({
                "metadata": {"name": "headless"},
                "spec": {"clusterIP": "None", "ports": [{"port": 53, "protocol": "UDP"}]}
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<core::Node>(c, None, json!({
            "metadata": {"name": "pb-node", "labels": {"zone": "a"}},
            "spec": {"podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24"],
                "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
                "unschedulable": true, "providerID": "kwok://x"}
        }), Some(json!({
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "3800m", "memory": "7.5Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2024-01-02T03:04:05Z",
                "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "KubeletReady", "message": "ok"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6",
                "osImage": "x", "containerRuntimeVersion": "c", "kubeletVersion": "v1.36.0",
                "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
            "images": [{"names": ["nginx"], "sizeBytes": 123}]
        })))
        .await,
    );
    out.push(
        create::<batch::Job>(c, ns, json!({
            "metadata": {"name": "job"},
            "spec": {
                "suspend": true, "parallelism": 2, "completions": 4, "completionMode": "Indexed",
                "backoffLimit": 1, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 0,
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42, 43]}}]},
                "template": {"spec": {"restartPolicy": "Never", "containers": [container("c")]}}
            }
        }), None)
        .await,
    );
    out.push(
        create::<batch::CronJob>(c, ns, json!({
            "metadata": {"name": "cron"},
            "spec": {
                "schedule": "*/5 * * * *", "concurrencyPolicy": "Forbid",
                "suspend": true, "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 0,
                "startingDeadlineSeconds": 30,
                "jobTemplate": {"metadata": {"labels": {"x": "y"}}, "spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure", "containers": [container("c")]
                }}}}
            }
        }), Some(json!({"lastScheduleTime": "2024-01-02T03:04:05Z"})))
        .await,
    );
    out.push(
        create::<networking::Ingress>(c, ns, json!({
            "metadata": {"name": "ing"},
            "spec": {
                "ingressClassName": "nginx",
                "defaultBackend": {"service": {"name": "svc", "port": {"number": 80}}},
                "tls": [{"hosts": ["a.example.com"], "secretName": "tls"}],
                "rules": [{"host": "a.example.com", "http": {"paths": [
                    {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "svc", "port": {"name": "http"}}}},
                    {"path": "/r", "pathType": "Exact", "backend": {"resource": {"apiGroup": "example.com", "kind": "Bucket", "name": "b"}}}
                ]}}]
            }
        }), None)
        .await,
    );
    out.push(
        create::<networking::IngressClass>(c, None, json!({
            "metadata": {"name": "pb-nginx"},
            "spec": {"controller": "example.com/ingress", "parameters": {"apiGroup": "example.com", "kind": "P", "name": "p", "scope": "Cluster"}}
        }), None)
        .await,
    );
    out.push(
        create::<networking::NetworkPolicy>(c, ns, json!({
            "metadata": {"name": "np"},
            "spec": {
                "podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                "ingress": [{
                    "from": [
                        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                        {"namespaceSelector": {"matchLabels": {"a": "b"}}, "podSelector": {}}
                    ],
                    "ports": [{"protocol": "TCP", "port": "http"}, {"port": 8000, "endPort": 9000}]
                }],
                "egress": [{}]
            }
        }), None)
        .await,
    );
    out.push(
        create::<core::PersistentVolumeClaim>(
            c,
            ns,
            json!({
                "metadata": {"name": "claim"},
                "spec": {
                    "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                    "resources": {"requests": {"storage": "1.5Gi"}, "limits": {"storage": "2Gi"}},
                    "storageClassName": "", "volumeMode": "Filesystem",
                    "selector": {"matchLabels": {"pv": "x"}}
                }
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<core::PersistentVolume>(c, None, json!({
            "metadata": {"name": "pb-pv-nfs"},
            "spec": {
                "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "slow", "mountOptions": ["hard"],
                "nfs": {"server": "10.0.0.1", "path": "/exports", "readOnly": false},
                "claimRef": {"namespace": NS, "name": "claim"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}
                ]}]}}
            }
        }), None)
        .await,
    );
    out.push(
        create::<core::PersistentVolume>(c, None, json!({
            "metadata": {"name": "pb-pv-csi"},
            "spec": {
                "capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"], "volumeMode": "Block",
                "csi": {"driver": "pb.example.com", "volumeHandle": "h", "fsType": "ext4",
                    "volumeAttributes": {"a": "b"}, "nodePublishSecretRef": {"name": "s", "namespace": NS}}
            }
        }), None)
        .await,
    );
    out.push(
        create::<core::ServiceAccount>(
            c,
            ns,
            json!({
                "metadata": {"name": "sa"},
                "secrets": [{"name": "s"}], "imagePullSecrets": [{"name": "reg"}],
                "automountServiceAccountToken": false
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<rbac::Role>(c, ns, json!({
            "metadata": {"name": "rich"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"], "resourceNames": ["a"]}]
        }), None)
        .await,
    );
    out.push(
        create::<rbac::Role>(
            c,
            ns,
            json!({"metadata": {"name": "empty"}, "rules": []}),
            None,
        )
        .await,
    );
    out.push(
        create::<rbac::RoleBinding>(c, ns, json!({
            "metadata": {"name": "rich"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rich"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "default", "namespace": NS},
                {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}
            ]
        }), None)
        .await,
    );
    out.push(
        create::<rbac::ClusterRole>(
            c,
            None,
            json!({
                "metadata": {"name": "pb-cr"},
                "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "x"}}]}
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<core::Namespace>(
            c,
            None,
            json!({
                "metadata": {"name": "pb-ns", "labels": {"team": "a"}},
                "spec": {"finalizers": ["kubernetes"]}
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<core::Event>(c, ns, json!({
            "metadata": {"name": "legacy"},
            "involvedObject": {"kind": "Pod", "namespace": NS, "name": "rich", "apiVersion": "v1", "fieldPath": "spec.containers{app}"},
            "reason": "Started", "message": "m", "source": {"component": "kubelet", "host": "n"},
            "firstTimestamp": "2024-01-02T03:04:05Z", "lastTimestamp": "2024-01-02T03:04:06Z",
            "count": 2, "type": "Normal"
        }), None)
        .await,
    );
    out.push(
        create::<events::Event>(
            c,
            ns,
            json!({
                "metadata": {"name": "micro"},
                "eventTime": "2024-01-02T03:04:05.123456Z",
                "series": {"count": 2, "lastObservedTime": "2024-01-02T03:04:06.654321Z"},
                "reportingController": "example.com/c", "reportingInstance": "i", "action": "Start",
                "reason": "Started", "regarding": {"kind": "Pod", "namespace": NS, "name": "rich"},
                "note": "n", "type": "Normal"
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<coordination::Lease>(c, ns, json!({
            "metadata": {"name": "lease"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                "acquireTime": "2024-01-02T03:04:05.123456Z", "renewTime": "2024-01-02T03:04:06.000001Z",
                "leaseTransitions": 0}
        }), None)
        .await,
    );
    out.push(
        create::<discovery::EndpointSlice>(c, ns, json!({
            "metadata": {"name": "slice", "labels": {"kubernetes.io/service-name": "svc"}},
            "addressType": "IPv4",
            "endpoints": [{
                "addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true, "terminating": false},
                "hostname": "h", "nodeName": "n", "zone": "a", "hints": {"forZones": [{"name": "a"}]},
                "targetRef": {"kind": "Pod", "name": "p", "namespace": NS}
            }],
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"}, {"name": "", "port": 81}]
        }), None)
        .await,
    );
    out.push(
        create::<core::Endpoints>(c, ns, json!({
            "metadata": {"name": "ep"},
            "subsets": [{"addresses": [{"ip": "10.0.0.1", "hostname": "h"}], "notReadyAddresses": [{"ip": "10.0.0.2"}],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}]
        }), None)
        .await,
    );
    out.push(
        create::<autoscaling::HorizontalPodAutoscaler>(c, ns, json!({
            "metadata": {"name": "hpa"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rich"},
                "minReplicas": 1, "maxReplicas": 5,
                "metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
                    {"type": "Pods", "pods": {"metric": {"name": "qps", "selector": {"matchLabels": {"a": "b"}}},
                        "target": {"type": "AverageValue", "averageValue": "100m"}}}
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "selectPolicy": "Max",
                    "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}]}}
            }
        }), None)
        .await,
    );
    out.push(
        create::<policy::PodDisruptionBudget>(c, ns, json!({
            "metadata": {"name": "pct"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "d"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"}
        }), None)
        .await,
    );
    out.push(
        create::<policy::PodDisruptionBudget>(
            c,
            ns,
            json!({
                "metadata": {"name": "int"}, "spec": {"maxUnavailable": 1, "selector": {}}
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<storage::StorageClass>(c, None, json!({
            "metadata": {"name": "pb-sc"}, "provisioner": "example.com/p", "parameters": {"type": "ssd"},
            "reclaimPolicy": "Retain", "allowVolumeExpansion": true, "mountOptions": ["debug"],
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]
        }), None)
        .await,
    );
    out.push(
        create::<storage::CSIDriver>(c, None, json!({
            "metadata": {"name": "pb.example.com"},
            "spec": {"attachRequired": false, "podInfoOnMount": true, "volumeLifecycleModes": ["Persistent", "Ephemeral"],
                "fsGroupPolicy": "File", "tokenRequests": [{"audience": "a", "expirationSeconds": 3600}], "requiresRepublish": false}
        }), None)
        .await,
    );
    out.push(
        create::<scheduling::PriorityClass>(
            c,
            None,
            json!({
                "metadata": {"name": "pb-pc"}, "value": 1000, "globalDefault": false,
                "description": "d", "preemptionPolicy": "Never"
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<node::RuntimeClass>(
            c,
            None,
            json!({
                "metadata": {"name": "pb-rc"}, "handler": "runc",
                "overhead": {"podFixed": {"cpu": "10m", "memory": "1Mi"}},
                "scheduling": {"nodeSelector": {"a": "b"}, "tolerations": [{"operator": "Exists"}]}
            }),
            None,
        )
        .await,
    );
    out.push(
        create::<CustomResourceDefinition>(c, None, json!({
            "metadata": {"name": "widgets.pb.example.com"},
            "spec": {
                "group": "pb.example.com",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                    "shortNames": ["wd"], "categories": ["all"]},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}],
                    "selectableFields": [{"jsonPath": ".spec.color"}],
                    "schema": {"openAPIV3Schema": {
                        "type": "object", "description": "w",
                        "properties": {
                            "spec": {
                                "type": "object", "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
                                    "ratio": {"type": "number", "minimum": 0.5, "maximum": 10.5, "multipleOf": 0.25},
                                    "color": {"type": "string", "enum": ["red", "blue"], "pattern": "^[a-z]+$", "maxLength": 10},
                                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                    "replicas": {"type": "integer", "format": "int32"},
                                    "obj": {"type": "object", "x-kubernetes-embedded-resource": true,
                                        "x-kubernetes-preserve-unknown-fields": true}
                                },
                                "x-kubernetes-validations": [{"rule": "self.size >= 0", "message": "m",
                                    "reason": "FieldValueInvalid", "fieldPath": ".size"}]
                            },
                            "status": {"type": "object", "properties": {
                                "replicas": {"type": "integer"}, "selector": {"type": "string"}
                            }}
                        }
                    }}
                }]
            }
        }), None)
        .await,
    );
    out.push(
        create::<admission::ValidatingWebhookConfiguration>(c, None, json!({
            "metadata": {"name": "pb-vwc"},
            "webhooks": [{
                "name": "v.pb.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Ignore", "matchPolicy": "Equivalent", "timeoutSeconds": 5,
                "clientConfig": {"url": "https://example.com/validate", "caBundle": "Y2E="},
                "rules": [{"apiGroups": ["pb.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["widgets"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"never": "x"}}, "objectSelector": {},
                "matchConditions": [{"name": "c", "expression": "true"}]
            }]
        }), None)
        .await,
    );
    out.push(
        create::<admission::MutatingWebhookConfiguration>(c, None, json!({
            "metadata": {"name": "pb-mwc"},
            "webhooks": [{
                "name": "m.pb.example.com", "admissionReviewVersions": ["v1", "v1beta1"], "sideEffects": "NoneOnDryRun",
                "failurePolicy": "Ignore", "reinvocationPolicy": "IfNeeded",
                "clientConfig": {"service": {"namespace": NS, "name": "svc", "path": "/m", "port": 8443}},
                "rules": [{"apiGroups": ["pb.example.com"], "apiVersions": ["*"], "operations": ["*"], "resources": ["widgets/status"]}],
                "namespaceSelector": {"matchExpressions": [{"key": "never", "operator": "Exists"}]}
            }]
        }), None)
        .await,
    );
    out.push(
        create::<admission::ValidatingAdmissionPolicy>(c, None, json!({
            "metadata": {"name": "pb-vap"},
            "spec": {
                "failurePolicy": "Ignore",
                "matchConstraints": {"resourceRules": [{"apiGroups": ["pb.example.com"], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["widgets"]}]},
                "validations": [{"expression": "true", "message": "m"}],
                "variables": [{"name": "v", "expression": "1"}]
            }
        }), None)
        .await,
    );
    out.push(
        create::<core::ResourceQuota>(c, Some(QUOTA_NS), json!({
            "metadata": {"name": "quota"},
            "spec": {"hard": {"pods": "10", "requests.cpu": "2", "limits.memory": "4Gi"},
                "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["pb-pc"]}]}}
        }), None)
        .await,
    );
    out.push(
        create::<core::LimitRange>(c, Some(QUOTA_NS), json!({
            "metadata": {"name": "limits"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "10m"},
                "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"}, "maxLimitRequestRatio": {"cpu": "10"}}]}
        }), None)
        .await,
    );
    out.push(
        create::<core::PodTemplate>(c, ns, json!({
            "metadata": {"name": "tpl"},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [container("c")]}}
        }), None)
        .await,
    );
    out.push(
        create::<core::ReplicationController>(c, ns, json!({
            "metadata": {"name": "rc"},
            "spec": {"replicas": 0, "selector": {"app": "rc"},
                "template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": [container("c")]}}}
        }), None)
        .await,
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_built_in_kind_decodes_from_protobuf_as_from_json() {
    init_tracing();
    let cp = ControlPlane::start().await.expect("control plane");
    let admin = cp.client().expect("client");
    let config = cp.config().clone();
    create_namespace(&admin, NS).await;
    create_namespace(&admin, QUOTA_NS).await;
    let (fixtures, refused): (Vec<_>, Vec<_>) =
        fixtures(&admin).await.into_iter().partition(Result::is_ok);
    let refused: Vec<String> = refused.into_iter().filter_map(Result::err).collect();
    assert!(
        refused.is_empty(),
        "fixtures refused:\n{}",
        refused.join("\n")
    );
    let fixtures: Vec<Fixture> = fixtures.into_iter().filter_map(Result::ok).collect();

    let (stream_client, stream_seen) = content_type_recording_client(&config);
    let (list_client, list_seen) = content_type_recording_client(&config);
    let (json_client, json_seen) = content_type_recording_client(&config);
    let cache = |client: Client, protobuf: bool, streaming_list: StreamingList| {
        SharedCache::builder(client)
            .keep_managed_fields()
            .reflector_config(ReflectorConfig {
                protobuf,
                streaming_list,
                // several pages per kind: continue tokens over protobuf
                page_size: 3,
                ..ReflectorConfig::default()
            })
            .build()
    };
    let pb = [
        cache(stream_client, true, StreamingList::Auto),
        cache(list_client, true, StreamingList::Off),
    ];
    let json = cache(json_client, false, StreamingList::Auto);
    let kinds: Vec<Box<dyn Both>> = vec![
        pair::<core::Pod>(&pb, &json),
        pair::<core::ConfigMap>(&pb, &json),
        pair::<core::Secret>(&pb, &json),
        pair::<core::Service>(&pb, &json),
        pair::<core::Node>(&pb, &json),
        pair::<core::Namespace>(&pb, &json),
        pair::<core::ServiceAccount>(&pb, &json),
        pair::<core::PersistentVolume>(&pb, &json),
        pair::<core::PersistentVolumeClaim>(&pb, &json),
        pair::<core::Event>(&pb, &json),
        pair::<core::Endpoints>(&pb, &json),
        pair::<core::ResourceQuota>(&pb, &json),
        pair::<core::LimitRange>(&pb, &json),
        pair::<core::PodTemplate>(&pb, &json),
        pair::<core::ReplicationController>(&pb, &json),
        pair::<apps::Deployment>(&pb, &json),
        pair::<apps::StatefulSet>(&pb, &json),
        pair::<apps::DaemonSet>(&pb, &json),
        pair::<apps::ReplicaSet>(&pb, &json),
        pair::<apps::ControllerRevision>(&pb, &json),
        pair::<batch::Job>(&pb, &json),
        pair::<batch::CronJob>(&pb, &json),
        pair::<networking::Ingress>(&pb, &json),
        pair::<networking::IngressClass>(&pb, &json),
        pair::<networking::NetworkPolicy>(&pb, &json),
        pair::<rbac::Role>(&pb, &json),
        pair::<rbac::RoleBinding>(&pb, &json),
        pair::<rbac::ClusterRole>(&pb, &json),
        pair::<rbac::ClusterRoleBinding>(&pb, &json),
        pair::<events::Event>(&pb, &json),
        pair::<coordination::Lease>(&pb, &json),
        pair::<discovery::EndpointSlice>(&pb, &json),
        pair::<autoscaling::HorizontalPodAutoscaler>(&pb, &json),
        pair::<policy::PodDisruptionBudget>(&pb, &json),
        pair::<storage::StorageClass>(&pb, &json),
        pair::<storage::CSIDriver>(&pb, &json),
        pair::<scheduling::PriorityClass>(&pb, &json),
        pair::<node::RuntimeClass>(&pb, &json),
        pair::<flowcontrol::FlowSchema>(&pb, &json),
        pair::<flowcontrol::PriorityLevelConfiguration>(&pb, &json),
        pair::<CustomResourceDefinition>(&pb, &json),
        pair::<APIService>(&pb, &json),
        pair::<admission::ValidatingWebhookConfiguration>(&pb, &json),
        pair::<admission::MutatingWebhookConfiguration>(&pb, &json),
        pair::<admission::ValidatingAdmissionPolicy>(&pb, &json),
    ];
    for c in pb.iter().chain([&json]) {
        c.start().expect("start");
    }
    for k in &kinds {
        k.synced().await;
    }

    // Every fixture is in both caches (at whatever version each saw).
    let find = |f: &Fixture| {
        kinds
            .iter()
            .find(|k| k.kind() == f.kind)
            .unwrap_or_else(|| panic!("no informer for {}", f.kind))
    };
    for f in &fixtures {
        let (pbs, j) = find(f).snapshots();
        assert!(
            pbs.iter().all(|p| p.contains_key(&f.key)) && j.contains_key(&f.key),
            "{} {}",
            f.kind,
            f.key
        );
    }
    let (listed, differences) = compare(&kinds);
    assert!(
        differences.is_empty(),
        "after the initial list, protobuf differs from JSON:\n{}",
        differences.join("\n")
    );
    assert!(listed >= fixtures.len(), "{listed} compared after the list");

    // Watch events: each fixture changed once more.
    let mut changed = BTreeMap::new();
    for f in &fixtures {
        let api: Api<DynamicObject> = match &f.namespace {
            Some(ns) => Api::namespaced_with(admin.clone(), ns, &f.resource),
            None => Api::all_with(admin.clone(), &f.resource),
        };
        let o = api
            .patch(
                &f.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"round": "2"}}})),
            )
            .await
            .unwrap_or_else(|e| panic!("patch {} {}: {e}", f.kind, f.key));
        changed.insert(
            (f.kind.clone(), f.key.clone()),
            o.metadata.resource_version.unwrap_or_default(),
        );
    }
    eventually("both caches saw every change", WAIT, || {
        let seen = changed.iter().all(|((kind, key), rv)| {
            let k = kinds.iter().find(|k| &k.kind() == kind).expect("informer");
            let (pbs, j) = k.snapshots();
            let at = |s: &Snapshot| s.get(key).is_some_and(|(v, _)| v == rv);
            pbs.iter().all(at) && at(&j)
        });
        async move { seen.then_some(()) }
    })
    .await;
    let (watched, differences) = compare(&kinds);
    assert!(
        differences.is_empty(),
        "after watch events, protobuf differs from JSON:\n{}",
        differences.join("\n")
    );
    tracing::info!(listed, watched, kinds = kinds.len(), "objects compared");
    assert!(watched >= fixtures.len(), "{watched} compared");

    // Every protobuf LIST and watch was answered in protobuf (every kind
    // here is built in); the streaming lists too, beside the JSON
    // `/version` each of their reflectors asks first; the JSON ones in
    // JSON.
    let list_types = list_seen.lock().unwrap().clone();
    assert!(
        list_types
            .iter()
            .all(|t| t.starts_with("application/vnd.kubernetes.protobuf")),
        "{list_types:?}"
    );
    let stream_types = stream_seen.lock().unwrap().clone();
    let streamed = stream_types
        .iter()
        .filter(|t| *t == "application/vnd.kubernetes.protobuf;stream=watch")
        .count();
    assert!(streamed >= kinds.len(), "{stream_types:?}");
    assert!(
        stream_types.len() - streamed <= kinds.len(),
        "{stream_types:?}"
    );
    let json_types = json_seen.lock().unwrap().clone();
    assert!(
        json_types.iter().all(|t| !t.contains("protobuf")),
        "{json_types:?}"
    );
    cp.stop();
}
