//! The cluster's DNS: CoreDNS (built by `tests/coredns/build.sh`) as real
//! clusters run it — a Deployment in `kube-system` with its RBAC, the
//! Corefile in a ConfigMap, and the `kube-dns` Service at the fixed IP the
//! kubelet hands pods as their nameserver. It serves `cluster.local` (and
//! reverse lookups) from the Kubernetes API and forwards nothing: any other
//! name is refused inside the node.

use std::net::Ipv4Addr;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::error::{EnvtestError, Result};

/// The cluster's DNS domain.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
/// The namespace and name CoreDNS runs under.
const NAMESPACE: &str = "kube-system";
const NAME: &str = "coredns";
/// The DNS Service's name, as every cluster spells it.
pub(crate) const SERVICE: &str = "kube-dns";
/// The field manager of the objects.
const MANAGER: &str = "opkit-envtest";

/// The Corefile: the cluster domain and reverse zones from the API, nothing
/// forwarded (names outside these zones get REFUSED at once).
fn corefile() -> String {
    format!(
        "{CLUSTER_DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{\n    \
         errors\n    \
         health\n    \
         ready\n    \
         kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n        \
         pods insecure\n        \
         ttl 30\n    \
         }}\n    \
         cache 30\n    \
         reload\n\
         }}\n"
    )
}

fn labels() -> Value {
    json!({ "k8s-app": SERVICE })
}

fn deployment(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": NAME, "namespace": NAMESPACE, "labels": labels() },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": labels() },
            "template": {
                "metadata": { "labels": labels() },
                "spec": {
                    "serviceAccountName": NAME,
                    "priorityClassName": "system-cluster-critical",
                    // CoreDNS itself resolves nothing through the cluster.
                    "dnsPolicy": "Default",
                    // Scheduled as soon as the node registers, not once Ready.
                    "tolerations": [
                        { "key": "CriticalAddonsOnly", "operator": "Exists" },
                        { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule" },
                        { "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" }
                    ],
                    "securityContext": {
                        // Port 53 without root or capabilities.
                        "sysctls": [{ "name": "net.ipv4.ip_unprivileged_port_start", "value": "53" }],
                        "runAsNonRoot": true,
                        "runAsUser": 65532,
                        "runAsGroup": 65532
                    },
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "coredns",
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "args": ["-conf", "/etc/coredns/Corefile"],
                        "ports": [
                            { "name": "dns", "containerPort": 53, "protocol": "UDP" },
                            { "name": "dns-tcp", "containerPort": 53, "protocol": "TCP" }
                        ],
                        "resources": {
                            "requests": { "cpu": "50m", "memory": "32Mi" },
                            "limits": { "memory": "170Mi" }
                        },
                        "livenessProbe": {
                            "httpGet": { "path": "/health", "port": 8080 },
                            "periodSeconds": 10, "failureThreshold": 5
                        },
                        "readinessProbe": {
                            "httpGet": { "path": "/ready", "port": 8181 },
                            "periodSeconds": 1
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "capabilities": { "drop": ["ALL"] },
                            "readOnlyRootFilesystem": true
                        },
                        "volumeMounts": [{ "name": "config", "mountPath": "/etc/coredns", "readOnly": true }]
                    }],
                    "volumes": [{
                        "name": "config",
                        "configMap": { "name": NAME, "items": [{ "key": "Corefile", "path": "Corefile" }] }
                    }]
                }
            }
        }
    })
}

fn service(cluster_ip: Ipv4Addr) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": SERVICE, "namespace": NAMESPACE,
            "labels": { "k8s-app": SERVICE, "kubernetes.io/name": "CoreDNS" }
        },
        "spec": {
            "clusterIP": cluster_ip.to_string(),
            "selector": labels(),
            "ports": [
                { "name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53 },
                { "name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53 }
            ]
        }
    })
}

fn cluster_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": "system:coredns" },
        "rules": [
            { "apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"] },
            { "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"] }
        ]
    })
}

fn cluster_role_binding() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": "system:coredns" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns" },
        "subjects": [{ "kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE }]
    })
}

async fn apply<K>(api: Api<K>, object: Value) -> Result<()>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await
    .map_err(|e| EnvtestError::NodeSetup {
        step: "creating the cluster DNS objects",
        detail: format!(
            "{} {name}: {e}",
            object["kind"].as_str().unwrap_or("object")
        ),
    })?;
    Ok(())
}

/// Creates CoreDNS's ServiceAccount, RBAC, Corefile, `kube-dns` Service (at
/// `cluster_ip`) and Deployment (running `image`).
pub(crate) async fn install(
    client: &kube::Client,
    image: &str,
    cluster_ip: Ipv4Addr,
) -> Result<()> {
    apply(
        Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": NAME, "namespace": NAMESPACE } }),
    )
    .await?;
    apply(Api::<ClusterRole>::all(client.clone()), cluster_role()).await?;
    apply(
        Api::<ClusterRoleBinding>::all(client.clone()),
        cluster_role_binding(),
    )
    .await?;
    apply(
        Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": NAME, "namespace": NAMESPACE },
            "data": { "Corefile": corefile() }
        }),
    )
    .await?;
    apply(
        Api::<Service>::namespaced(client.clone(), NAMESPACE),
        service(cluster_ip),
    )
    .await?;
    apply(
        Api::<Deployment>::namespaced(client.clone(), NAMESPACE),
        deployment(image),
    )
    .await?;
    tracing::debug!(%cluster_ip, image, "cluster DNS objects created");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corefile_serves_the_cluster_zones_and_forwards_nothing() {
        let corefile = corefile();
        assert!(
            corefile.starts_with("cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {\n"),
            "{corefile}"
        );
        assert!(corefile.contains("    kubernetes cluster.local in-addr.arpa ip6.arpa {\n"));
        assert!(!corefile.contains("forward"), "{corefile}");
        assert!(!corefile.contains("fallthrough"), "{corefile}");
    }

    #[test]
    fn the_objects_are_valid_kubernetes_objects() {
        let deployment: Deployment =
            serde_json::from_value(deployment("opkit.local/coredns:1")).unwrap();
        let spec = deployment.spec.unwrap().template.spec.unwrap();
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("opkit.local/coredns:1")
        );
        let service: Service =
            serde_json::from_value(service(Ipv4Addr::new(10, 96, 1, 10))).unwrap();
        assert_eq!(
            service.spec.unwrap().cluster_ip.as_deref(),
            Some("10.96.1.10")
        );
        let _: ClusterRole = serde_json::from_value(cluster_role()).unwrap();
        let _: ClusterRoleBinding = serde_json::from_value(cluster_role_binding()).unwrap();
    }
}
