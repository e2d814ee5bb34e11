//! The local cluster (`opkit_envtest::Cluster`) against its own promises:
//! real controllers, a real node running real containers, and a stop that
//! leaves nothing behind.
//!
//! Needs the node assets (`make cluster-assets`) and root.

mod dns;
mod network;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use opkit_envtest::{Cluster, NODE_NAME};
use opkit_tests::{create_namespace, eventually, init_tracing, pod_phase, run_to_completion};
use serde_json::json;

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

async fn is_ready(pods: &Api<Pod>, name: &str) -> bool {
    let Ok(Some(pod)) = pods.get_opt(name).await else {
        return false;
    };
    pod.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

async fn node_ready_status(nodes: &Api<Node>) -> String {
    nodes
        .get_opt(NODE_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|n| n.status)
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
        .unwrap_or_default()
}

/// Controllers alone (no node, no root): a Deployment gets its ReplicaSet and
/// Pods from kube-controller-manager, the garbage collector deletes owned
/// objects, and namespace deletion completes.
#[tokio::test]
async fn controllers_run_without_a_node() {
    init_tracing();
    let cluster = Cluster::builder().without_node().start().await.unwrap();
    let client = cluster.client().unwrap();
    let ns = "controllers";
    create_namespace(&client, ns).await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let deployment: Deployment = from_json(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "opkit.local/pause:1" }] }
            }
        }
    }));
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(
        "the Deployment's ReplicaSet and 2 Pods",
        Duration::from_secs(60),
        || async {
            let sets = replica_sets.list(&ListParams::default()).await.unwrap();
            let pods = pods.list(&ListParams::default()).await.unwrap();
            (sets.items.len() == 1 && pods.items.len() == 2).then_some(())
        },
    )
    .await;

    // The garbage collector removes what the Deployment owned.
    deployments
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the GC to delete the ReplicaSet and Pods",
        Duration::from_secs(60),
        || async {
            let sets = replica_sets.list(&ListParams::default()).await.unwrap();
            let pods = pods.list(&ListParams::default()).await.unwrap();
            (sets.items.is_empty() && pods.items.is_empty()).then_some(())
        },
    )
    .await;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(ns, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the namespace to be deleted",
        Duration::from_secs(60),
        || async {
            namespaces
                .get_opt(ns)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    cluster.stop();
    assert_eq!(cluster.footprint().remaining(), Vec::<String>::new());
}

/// One cluster with a node, in stages: a pod runs and becomes Ready; a
/// Service routes to it from another pod through kube-proxy; pods reach the
/// apiserver through the `kubernetes` Service and nothing outside; owner
/// references cascade; a namespace deletes; the node goes NotReady when its
/// kubelet dies; stopping leaves nothing.
#[tokio::test]
async fn cluster_runs_pods_and_stops_clean() {
    init_tracing();
    let cluster = Cluster::start().await.unwrap();
    println!("cluster started in {:.1?}", cluster.started_in());
    let client = cluster.client().unwrap();
    let ns = "cluster";
    create_namespace(&client, ns).await;
    let memcached = cluster
        .image("memcached")
        .expect("a memcached image")
        .to_owned();
    let busybox = cluster
        .image("busybox")
        .expect("a busybox image")
        .to_owned();

    // A real memcached runs in a pod and passes its readiness probe.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let server: Pod = from_json(json!({
        "metadata": { "name": "memcached", "labels": { "app": "memcached" } },
        "spec": { "containers": [{
            "name": "memcached",
            "image": memcached,
            "imagePullPolicy": "IfNotPresent",
            "command": ["memcached", "--memory-limit=16"],
            "ports": [{ "containerPort": 11211 }],
            "readinessProbe": { "tcpSocket": { "port": 11211 }, "periodSeconds": 1 }
        }]}
    }));
    pods.create(&PostParams::default(), &server).await.unwrap();
    eventually(
        "the memcached pod to be Ready",
        Duration::from_secs(90),
        || async { is_ready(&pods, "memcached").await.then_some(()) },
    )
    .await;

    // Another pod reaches it through the Service's cluster IP.
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let service: Service = from_json(json!({
        "metadata": { "name": "memcached" },
        "spec": { "selector": { "app": "memcached" }, "ports": [{ "port": 11211 }] }
    }));
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let cluster_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP");
    let probe: Pod = from_json(json!({
        "metadata": { "name": "client" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "client",
                "image": busybox,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", format!("printf 'version\\r\\nquit\\r\\n' | nc -w 5 {cluster_ip} 11211")]
            }]
        }
    }));
    let (client_pod, output) = run_to_completion(&pods, &probe, Duration::from_secs(60)).await;
    assert_eq!(
        pod_phase(&client_pod),
        "Succeeded",
        "client output: {output}"
    );
    assert!(
        output.starts_with("VERSION 1."),
        "memcached answered through the Service: {output:?}"
    );

    // Pods reach the apiserver through the `kubernetes` Service, and nothing
    // beyond the machine: the node has no route out.
    let reach: Pod = from_json(json!({
        "metadata": { "name": "reach" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "reach",
                "image": busybox,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", concat!(
                    "nc -w 3 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT </dev/null; echo \"apiserver=$?\"; ",
                    "nc -w 3 203.0.113.1 80 </dev/null; echo \"outside=$?\""
                )]
            }]
        }
    }));
    let (_, output) = run_to_completion(&pods, &reach, Duration::from_secs(60)).await;
    assert!(
        output.contains("apiserver=0"),
        "the kubernetes Service from a pod: {output}"
    );
    assert!(
        output.contains("Network is unreachable"),
        "no route out: {output}"
    );
    assert!(output.contains("outside=1"), "no route out: {output}");

    // The garbage collector follows owner references.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let owner = config_maps
        .create(
            &PostParams::default(),
            &from_json(json!({ "metadata": { "name": "owner" } })),
        )
        .await
        .unwrap();
    let uid = owner.metadata.uid.clone().unwrap();
    let owned: ConfigMap = from_json(json!({ "metadata": {
        "name": "owned",
        "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid }]
    }}));
    config_maps
        .create(&PostParams::default(), &owned)
        .await
        .unwrap();
    config_maps
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually(
        "the GC to delete the owned ConfigMap",
        Duration::from_secs(60),
        || async {
            config_maps
                .get_opt("owned")
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;

    // Namespace deletion completes (its pods are stopped by the kubelet).
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(ns, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "the namespace to be deleted",
        Duration::from_secs(90),
        || async {
            namespaces
                .get_opt(ns)
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;

    // The node goes NotReady once its kubelet is gone.
    let nodes: Api<Node> = Api::all(client.clone());
    assert_eq!(node_ready_status(&nodes).await, "True");
    cluster.stop_kubelet();
    eventually(
        "the node to be NotReady",
        Duration::from_secs(60),
        || async { (node_ready_status(&nodes).await == "Unknown").then_some(()) },
    )
    .await;

    // Stopping removes every process, mount, link, cgroup and directory.
    let footprint = cluster.footprint().clone();
    cluster.stop();
    assert_eq!(footprint.remaining(), Vec::<String>::new());
    let tables = std::process::Command::new("nft")
        .args(["list", "tables"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(!tables.contains("kube-proxy"), "host nftables: {tables}");
    assert!(
        !std::path::Path::new("/sys/class/net/cni0").exists(),
        "the pod bridge lives only in the node's namespace"
    );
}

/// The busybox image links every applet busybox has on `PATH`: a pod runs
/// `httpd`, `wget`, `awk`, ... by their bare names, and `httpd` serves a page
/// that `wget` fetches.
#[tokio::test]
async fn busybox_runs_every_applet_by_name() {
    init_tracing();
    let cluster = Cluster::start().await.unwrap();
    let client = cluster.client().unwrap();
    let ns = "applets";
    create_namespace(&client, ns).await;
    let busybox = cluster.image("busybox").expect("a busybox image");
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let script = concat!(
        "missing=''; for a in $(busybox --list); do command -v \"$a\" >/dev/null || missing=\"$missing $a\"; done; ",
        "echo \"missing=[$missing]\"; ",
        "mkdir -p /tmp/www && echo served-by-httpd > /tmp/www/index.html && ",
        "httpd -p 127.0.0.1:8080 -h /tmp/www && ",
        "wget -q -O - http://127.0.0.1:8080/ | awk '{ print \"page=\" $0 }'",
    );
    let pod: Pod = from_json(json!({
        "metadata": { "name": "applets" },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "applets",
                "image": busybox,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", script]
            }]
        }
    }));
    let (pod, output) = run_to_completion(&pods, &pod, Duration::from_secs(60)).await;
    assert_eq!(pod_phase(&pod), "Succeeded", "pod output: {output}");
    assert!(
        output.contains("missing=[]"),
        "every applet on PATH: {output}"
    );
    assert!(
        output.contains("page=served-by-httpd"),
        "httpd served, wget fetched: {output}"
    );
    let footprint = cluster.footprint().clone();
    cluster.stop();
    assert_eq!(footprint.remaining(), Vec::<String>::new());
}
