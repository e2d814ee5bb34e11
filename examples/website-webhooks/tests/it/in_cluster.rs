//! The Website operator in a pod of the real single-node cluster
//! (`opkit_envtest::Cluster`; needs root and `make cluster-assets`): the
//! apiserver reaches its webhooks through their Service — a `service`
//! reference, resolved to the cluster IP, which the host routes into the
//! node (the whole Service range, with no step of the test's), forwarded by
//! kube-proxy to the pod — trusting the CA the manager issued itself and
//! injected.
//!
//! The pod runs this crate's binary, built by cargo, from a `hostPath`
//! volume in the busybox image (with the host's C library beside it), as
//! the cluster has no image of it yet; everything else is what a
//! deployment does: a Deployment, a ServiceAccount, a Service, the CRD and
//! the webhook configurations generated from the code.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams, PostParams};
use opkit_envtest::{Cluster, eventually};
use serde_json::json;
use website_webhooks::api::{v1, v2};
use website_webhooks::{CRD_NAME, Manifests, NAME, NAMESPACE, WEBHOOK_SERVICE};

const APP: &str = "website-webhooks";

fn from_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// What the operator's pod logged, and the namespace's events, for a
/// failure message.
async fn diagnostics(client: &kube::Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut out = String::new();
    for pod in pods
        .list(&ListParams::default().labels(&format!("app={APP}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let logs = pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_else(|e| format!("(no logs: {e})"));
        out.push_str(&format!(
            "--- pod {name} status {:?}\n{logs}\n",
            pod.status.map(|s| (s.phase, s.conditions))
        ));
    }
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NAMESPACE);
    for event in events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        out.push_str(&format!(
            "event {}: {}\n",
            event.reason.unwrap_or_default(),
            event.message.unwrap_or_default()
        ));
    }
    out
}

/// Runs `wait` (an [`eventually`]); when it times out, prints the
/// operator's log and the namespace's events before the failure carries on.
async fn explaining_a_timeout<T>(client: &kube::Client, wait: impl Future<Output = T>) -> T {
    match AssertUnwindSafe(wait).catch_unwind().await {
        Ok(found) => found,
        Err(timed_out) => {
            eprintln!("{}", diagnostics(client).await);
            std::panic::resume_unwind(timed_out)
        }
    }
}

async fn apply<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().expect("a name");
    api.patch(
        &name,
        &PatchParams::apply("in-cluster-test").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("applying {name}: {e}"));
}

fn api_message(result: Result<impl std::fmt::Debug, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_apiserver_calls_the_webhooks_in_a_pod_through_their_service() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let cluster = Cluster::start()
        .await
        .expect("start the cluster (root, `make cluster-assets`)");
    let client = cluster.client().unwrap();
    let busybox = cluster
        .image("busybox")
        .expect("a busybox image")
        .to_owned();

    // The namespace, the identity (admin rights: this test is about the
    // webhooks, not RBAC), and the Service.
    apply(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
        &from_json(
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE } }),
        ),
    )
    .await;
    apply(
        &Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE),
        &from_json(
            json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": APP } }),
        ),
    )
    .await;
    apply(
        &Api::<ClusterRoleBinding>::all(client.clone()),
        &from_json(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": { "name": APP },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
            "subjects": [{ "kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE }]
        })),
    )
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    apply(
        &services,
        &from_json(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": { "name": WEBHOOK_SERVICE },
            "spec": { "selector": { "app": APP }, "ports": [{ "name": "webhook", "port": 443, "targetPort": 9443 }] }
        })),
    )
    .await;
    // The apiserver runs on the host; the cluster routes its whole Service
    // range into the node, as kube-proxy would on a control-plane node.
    let cluster_ip: std::net::Ipv4Addr = services
        .get(WEBHOOK_SERVICE)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a cluster IP")
        .parse()
        .unwrap();
    assert!(cluster.service_cidr().contains(cluster_ip), "{cluster_ip}");

    // The CRD and webhook configurations as generated: Service references,
    // no caBundle.
    let generated = Manifests::generate().unwrap();
    let validating = generated.validating.expect("a validating configuration");
    let mutating = generated.mutating.expect("a mutating configuration");
    for client_config in validating
        .webhooks
        .iter()
        .flatten()
        .map(|w| &w.client_config)
        .chain(mutating.webhooks.iter().flatten().map(|w| &w.client_config))
    {
        assert!(client_config.url.is_none() && client_config.ca_bundle.is_none());
        assert_eq!(
            client_config.service.as_ref().unwrap().name,
            WEBHOOK_SERVICE
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    apply(&crds, &generated.crd).await;
    let validating_api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating_api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    apply(&validating_api, &validating).await;
    apply(&mutating_api, &mutating).await;

    // The operator: the binary cargo built, in the busybox image.
    let binary = env!("CARGO_BIN_EXE_website-webhooks");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    apply(
        &deployments,
        &from_json(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": APP },
            "spec": {
                "replicas": 1,
                "selector": { "matchLabels": { "app": APP } },
                "template": {
                    "metadata": { "labels": { "app": APP } },
                    "spec": {
                        "serviceAccountName": APP,
                        "containers": [{
                            "name": "manager",
                            "image": busybox,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/opkit/manager", "--manage-webhook-certificate", "--webhook-cert-dir", "/certs"],
                            "env": [{ "name": "RUST_LOG", "value": "info,opkit=debug" }],
                            "ports": [
                                { "name": "webhook", "containerPort": 9443 },
                                { "name": "probes", "containerPort": 8081 }
                            ],
                            "readinessProbe": { "httpGet": { "path": "/readyz", "port": "probes" }, "periodSeconds": 1 },
                            "volumeMounts": [
                                { "name": "manager", "mountPath": "/opkit/manager", "readOnly": true },
                                { "name": "libc", "mountPath": "/lib/x86_64-linux-gnu", "readOnly": true },
                                { "name": "loader", "mountPath": "/lib64", "readOnly": true },
                                { "name": "certs", "mountPath": "/certs" }
                            ]
                        }],
                        "volumes": [
                            { "name": "manager", "hostPath": { "path": binary, "type": "File" } },
                            { "name": "libc", "hostPath": { "path": "/lib/x86_64-linux-gnu", "type": "Directory" } },
                            { "name": "loader", "hostPath": { "path": "/lib64", "type": "Directory" } },
                            { "name": "certs", "emptyDir": {} }
                        ]
                    }
                }
            }
        })),
    )
    .await;

    // Ready means: the webhook server serves, and the informer listed v2
    // Websites (stored as v1) through the conversion webhook — so the
    // apiserver already reached the pod through the Service.
    let deployed = std::time::Instant::now();
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    explaining_a_timeout(
        &client,
        eventually(
            "the operator's pod to be Ready",
            Duration::from_secs(120),
            || async {
                pods.list(&ListParams::default().labels(&format!("app={APP}")))
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default()
                    .iter()
                    .any(|p| {
                        p.status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .is_some_and(|c| {
                                c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                            })
                    })
                    .then_some(())
            },
        ),
    )
    .await;

    println!(
        "cluster started in {:.1?}; operator pod Ready {:.1?} after the Deployment was applied",
        cluster.started_in(),
        deployed.elapsed()
    );

    // The manager issued its certificate into a Secret and injected the CA
    // into both configurations and the CRD.
    let secret = Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .get(website_webhooks::managed_certificate().secret_name())
        .await
        .unwrap();
    let ca = secret.data.unwrap()["ca.crt"].0.clone();
    let crd = crds.get(CRD_NAME).await.unwrap();
    let conversion = crd
        .spec
        .conversion
        .unwrap()
        .webhook
        .unwrap()
        .client_config
        .unwrap();
    assert_eq!(conversion.ca_bundle.unwrap().0, ca);
    assert!(conversion.url.is_none());
    for webhook in validating_api.get(NAME).await.unwrap().webhooks.unwrap() {
        assert_eq!(webhook.client_config.ca_bundle.unwrap().0, ca);
    }
    for webhook in mutating_api.get(NAME).await.unwrap().webhooks.unwrap() {
        assert_eq!(webhook.client_config.ca_bundle.unwrap().0, ca);
    }

    let ns = "websites";
    apply(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()),
        &from_json(json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns } })),
    )
    .await;
    let old: Api<v1::Website> = Api::namespaced(client.clone(), ns);
    let new: Api<v2::Website> = Api::namespaced(client.clone(), ns);

    // Created as v1: converted (to v2 for the webhooks, matchPolicy
    // Equivalent), defaulted, validated; read back as v2 with defaults.
    old.create(
        &PostParams::default(),
        &v1::Website::new(
            "shop",
            v1::WebsiteSpec {
                url: "https://shop.example".to_owned(),
            },
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("create v1: {e}"));
    let shop = new.get("shop").await.unwrap();
    assert_eq!(shop.spec.host, "shop.example");
    assert_eq!(shop.spec.tls, Some(true));
    assert_eq!(
        shop.spec.replicas,
        Some(1),
        "defaulted by the mutating webhook"
    );

    // A refusal carries the webhook's message.
    let message = api_message(
        new.create(
            &PostParams::default(),
            &v2::Website::new(
                "big",
                v2::WebsiteSpec {
                    host: "big.example".to_owned(),
                    tls: None,
                    replicas: Some(9),
                },
            ),
        )
        .await,
    );
    assert!(
        message.contains("spec.replicas 9 must be between 1 and 5"),
        "{message}"
    );

    // What a create through all three webhooks (conversion, defaulting,
    // validating), via the Service, costs: 20 dry-run creates as v1.
    let mut took = Vec::new();
    for i in 0..20 {
        let begun = std::time::Instant::now();
        old.create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &v1::Website::new(
                &format!("dry-{i}"),
                v1::WebsiteSpec {
                    url: "https://dry.example".to_owned(),
                },
            ),
        )
        .await
        .unwrap();
        took.push(begun.elapsed());
    }
    took.sort();
    println!(
        "dry-run create as v1 through the Service's webhooks: p50 {:.1?}, max {:.1?}",
        took[10], took[19]
    );

    // The controller in the pod reconciles what it read through conversion.
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    explaining_a_timeout(
        &client,
        eventually(
            "the shop-site ConfigMap",
            Duration::from_secs(60),
            || async {
                config_maps
                    .get_opt("shop-site")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|cm| cm.data)
                    .filter(|d| d.get("url").map(String::as_str) == Some("https://shop.example"))
            },
        ),
    )
    .await;

    // With no pod behind the Service, the apiserver's calls are refused
    // inside the node (kube-proxy rejects a Service without endpoints; the
    // apiserver retries until the webhook's timeout) and the create fails
    // (failurePolicy Fail): the calls above went through the Service.
    deployments
        .patch(
            APP,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "replicas": 0 } })),
        )
        .await
        .unwrap();
    explaining_a_timeout(
        &client,
        eventually(
            "the operator's pods to be gone",
            Duration::from_secs(60),
            || async {
                pods.list(&ListParams::default().labels(&format!("app={APP}")))
                    .await
                    .ok()
                    .filter(|l| l.items.is_empty())
                    .map(|_| ())
            },
        ),
    )
    .await;
    let refused = std::time::Instant::now();
    let message = api_message(
        new.create(
            &PostParams::default(),
            &v2::Website::new(
                "unreachable",
                v2::WebsiteSpec {
                    host: "unreachable.example".to_owned(),
                    tls: None,
                    replicas: None,
                },
            ),
        )
        .await,
    );
    assert!(message.contains("failed calling webhook"), "{message}");
    assert!(
        message.contains(&format!("{WEBHOOK_SERVICE}.{NAMESPACE}.svc")),
        "{message}"
    );
    println!(
        "a create with no webhook pod failed in {:.1?}: {message}",
        refused.elapsed()
    );

    let footprint = cluster.footprint().clone();
    cluster.stop();
    assert_eq!(footprint.remaining(), Vec::<String>::new());
}
