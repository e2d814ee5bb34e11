//! The operator shipped as a user ships it, on the local single-node
//! cluster (`opkit_envtest::Cluster`: real controllers, kubelet,
//! containerd): `make image` builds and pushes its image to the local
//! registry, `make deploy IMG=...` applies `deploy/`, and containerd pulls
//! the image. Then the whole journey, for a project `cargo opkit new`
//! generates in a temporary directory and for `examples/memcached`, each on
//! a cluster of its own (two tests, which nextest runs at the same time):
//!
//! 1. the operator pod runs under its ServiceAccount, in-cluster config,
//!    passing the kubelet's readiness and liveness probes;
//! 2. a custom resource is reconciled (Memcached: a Deployment, real
//!    memcached pods Ready, `Available=True`; scaled; deleted: the
//!    finalizer runs, an Event is recorded, owned objects are gone);
//! 3. the operator pod is deleted: the replacement takes the Lease and
//!    carries on;
//! 4. `/metrics` is scraped through the metrics Service over HTTPS, from
//!    the host (by its ClusterIP): 401 without a token, 403 with a
//!    ServiceAccount token lacking the role, served to a ServiceAccount
//!    bound the generated metrics-reader ClusterRole; and from pods (by
//!    its name, through the cluster DNS) running `metrics_scrape`
//!    (`tests/src/bin`, a dev-profile image built and pushed with `cargo
//!    opkit image`'s library) with their ServiceAccount's token: 403
//!    without the role, the metrics with it;
//! 5. the operator logged no forbidden error; with a rule dropped from its
//!    ClusterRole, the error it reports names the verb and resource;
//! 6. `make undeploy` leaves nothing behind.
//!
//! A third test (`multicluster`) ships a hub operator the same way and
//! adds its member by a kubeconfig Secret.
//!
//! Prints the figures (image build time, time to ready, RSS). Needs root,
//! the node assets (`make cluster-assets`) and the registry (`make registry`).

use super::deploy_support;

mod multicluster;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cargo_opkit::image::{BuiltImage, ImageOptions, Profile, PushOptions};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams,
    PostParams,
};
use opkit_envtest::Cluster;
use opkit_tests::metrics_client::{MetricsClient, Trust};
use opkit_tests::{
    create_namespace, eventually, init_tracing, pod_phase, run_to_completion, service_account_token,
};
use serde_json::json;

use deploy_support::persist::Persisted;
use deploy_support::{
    MEMCACHED, Project, Tools, build_cargo_opkit, persist_and_render, target_dir, text, workspace,
};

/// How long the operator may take for anything it does.
const WAIT: Duration = Duration::from_secs(60);
/// How long pods may take to start on the node.
const POD_WAIT: Duration = Duration::from_secs(180);

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}

/// One deployed operator project and the cluster it runs on.
struct Deployed<'a> {
    cluster: &'a Cluster,
    tools: Tools,
    project: Project,
    dir: PathBuf,
    client: kube::Client,
    /// The custom resource kind the journey creates.
    resource: ApiResource,
    /// The pushed `metrics_scrape` image, by digest.
    scraper_image: String,
}

impl Deployed<'_> {
    fn operator_pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), self.project.namespace)
    }

    fn selector(&self) -> String {
        format!(
            "app.kubernetes.io/name={},app.kubernetes.io/component=manager",
            self.project.name
        )
    }

    /// The one Ready operator pod (waits for it).
    async fn ready_operator_pod(&self) -> Pod {
        let pods = self.operator_pods();
        let selector = self.selector();
        eventually("the operator pod to be Ready", POD_WAIT, || async {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            let live: Vec<&Pod> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            match live.as_slice() {
                [pod] if is_ready(pod) => Some((*pod).clone()),
                _ => None,
            }
        })
        .await
    }

    /// The Lease holder's identity, once it starts with `pod`'s name.
    async fn lease_held_by(&self, pod: &str) -> String {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), self.project.namespace);
        let name = format!("{}-lock", self.project.name);
        let prefix = format!("{pod}_");
        eventually(&format!("{pod} to hold the Lease {name}"), WAIT, || async {
            let holder = leases.get_opt(&name).await.ok()??.spec?.holder_identity?;
            holder.starts_with(&prefix).then_some(holder)
        })
        .await
    }

    /// The container log of `pod`.
    async fn log(&self, pod: &str) -> String {
        self.operator_pods()
            .logs(pod, &LogParams::default())
            .await
            .unwrap_or_else(|e| panic!("the log of {pod}: {e}"))
    }

    /// Resident memory of the operator container's process, in KiB, from
    /// the node's /proc (the node's processes are the host's).
    fn rss_kib(&self, pod: &Pod) -> u64 {
        let uid = pod.metadata.uid.clone().expect("pod uid");
        let marker = format!("pod{uid}");
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let path = entry.path();
            let Ok(cgroup) = std::fs::read_to_string(path.join("cgroup")) else {
                continue;
            };
            if !cgroup.contains(&marker) {
                continue;
            }
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            if comm.trim() == "pause" {
                continue;
            }
            let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
            if let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                return kib;
            }
        }
        panic!(
            "no process of pod {} (uid {uid}) under {}",
            pod.metadata.name.as_deref().unwrap_or_default(),
            self.cluster
                .node_address()
                .map(|a| a.to_string())
                .unwrap_or_default()
        );
    }

    /// `GET /metrics` through the metrics Service's ClusterIP (HTTPS, the
    /// manager's self-signed certificate), from the host (the cluster's
    /// Service range is routed into the node), as ServiceAccounts of
    /// `namespace` (which this creates): no token is 401, `stranger` 403,
    /// and `scraper`, bound the generated `<name>-metrics-reader`
    /// ClusterRole, gets the metrics, which this returns. Then the same
    /// from pods of `namespace` under those ServiceAccounts
    /// ([`Deployed::scrape_from_pods`]).
    async fn scrape_metrics(&self, namespace: &str) -> String {
        let services: Api<Service> = Api::namespaced(self.client.clone(), self.project.namespace);
        let service = services
            .get(&format!("{}-metrics", self.project.name))
            .await
            .expect("the metrics Service");
        let ip: std::net::IpAddr = service
            .spec
            .and_then(|s| s.cluster_ip)
            .expect("a cluster IP")
            .parse()
            .expect("an IP address");
        let addr = std::net::SocketAddr::new(ip, 8443);
        create_namespace(&self.client, namespace).await;
        let stranger = service_account_token(&self.client, namespace, "stranger").await;
        let scraper = service_account_token(&self.client, namespace, "scraper").await;
        // The binding is not the operator's (`make undeploy` leaves it):
        // deleted below.
        let bindings: Api<ClusterRoleBinding> = Api::all(self.client.clone());
        let binding_name = format!("{namespace}-metrics-reader");
        let binding = opkit::rbac::cluster_role_binding(
            &binding_name,
            &format!("{}-metrics-reader", self.project.name),
            "scraper",
            namespace,
        );
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .expect("bind the metrics-reader ClusterRole");

        let mut client = MetricsClient::connect(addr, Trust::AnyCertificate)
            .await
            .unwrap_or_else(|e| panic!("HTTPS to the metrics Service {addr}: {e}"));
        let (status, body) = client.get("/metrics", None).await.expect("a scrape");
        assert_eq!(status, 401, "without a token: {body}");
        let (status, body) = client
            .get("/metrics", Some(&stranger))
            .await
            .expect("a scrape");
        assert_eq!(status, 403, "as a ServiceAccount without the role: {body}");
        // The new binding reaches the apiserver's authorizer through an
        // informer; a refusal is cached for 10 s.
        let metrics = eventually("the bound scraper to get /metrics", WAIT, || async {
            let mut client = MetricsClient::connect(addr, Trust::AnyCertificate)
                .await
                .ok()?;
            let (status, body) = client.get("/metrics", Some(&scraper)).await.ok()?;
            (status == 200).then_some(body)
        })
        .await;
        self.scrape_from_pods(namespace).await;
        bindings
            .delete(&binding_name, &DeleteParams::default())
            .await
            .expect("delete the metrics-reader binding");
        metrics
    }

    /// `metrics_scrape` in pods of `namespace` (`restartPolicy: Never`),
    /// by the metrics Service's DNS name, with their ServiceAccount's
    /// token: as `stranger` it fails with 403; as `scraper` (bound the
    /// metrics-reader ClusterRole, the binding already in effect) it
    /// succeeds with a `controller_runtime_` metric.
    ///
    /// (busybox's wget, the HTTP client of the cluster's own images,
    /// cannot: its TLS sends no `signature_algorithms`, which rustls
    /// requires.)
    async fn scrape_from_pods(&self, namespace: &str) {
        let target = format!(
            "{}-metrics.{}.svc:8443",
            self.project.name, self.project.namespace
        );
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pod = |account: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": { "name": format!("scrape-as-{account}") },
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": account,
                    "containers": [{
                        "name": "scrape",
                        "image": self.scraper_image,
                        "imagePullPolicy": "IfNotPresent",
                        "args": [target, "controller_runtime_"]
                    }]
                }
            }))
            .expect("a pod")
        };

        let (ended, log) = run_to_completion(&pods, &pod("stranger"), POD_WAIT).await;
        println!("metrics_scrape in a pod as {namespace}/stranger:\n{log}");
        assert_eq!(pod_phase(&ended), "Failed", "{log}");
        assert!(log.contains("status 403"), "{log}");

        let (ended, log) = run_to_completion(&pods, &pod("scraper"), POD_WAIT).await;
        println!("metrics_scrape in a pod as {namespace}/scraper:\n{log}");
        assert_eq!(pod_phase(&ended), "Succeeded", "{log}");
        assert!(log.contains("status 200"), "{log}");
        assert!(log.contains("\nmetric controller_runtime_"), "{log}");
    }

    /// `make undeploy`; then the namespace, the CRDs, the ClusterRole and
    /// its binding are gone.
    async fn undeploy(&self, timeout: &str) -> Duration {
        let started = Instant::now();
        let output = self.tools.make(
            &self.dir,
            &["undeploy", &format!("UNDEPLOY_TIMEOUT={timeout}")],
        );
        let took = started.elapsed();
        assert!(output.status.success(), "make undeploy:\n{}", text(&output));
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        assert!(
            namespaces
                .get_opt(self.project.namespace)
                .await
                .expect("get")
                .is_none(),
            "the namespace is left"
        );
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let left: Vec<String> = crds
            .list(&ListParams::default())
            .await
            .expect("list CRDs")
            .items
            .into_iter()
            .filter(|c| c.spec.group == self.resource.group)
            .filter_map(|c| c.metadata.name)
            .collect();
        assert!(left.is_empty(), "CRDs left: {left:?}");
        let prefix = format!("{}-", self.project.name);
        let roles: Api<ClusterRole> = Api::all(self.client.clone());
        let bindings: Api<ClusterRoleBinding> = Api::all(self.client.clone());
        let mut left: Vec<String> = roles
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .filter(|n| n.starts_with(&prefix))
            .collect();
        left.extend(
            bindings
                .list(&ListParams::default())
                .await
                .expect("list")
                .items
                .into_iter()
                .filter_map(|r| r.metadata.name)
                .filter(|n| n.starts_with(&prefix)),
        );
        assert!(left.is_empty(), "RBAC left: {left:?}");
        took
    }
}

/// Lines of `log` that mention a forbidden request.
fn forbidden_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
        .collect()
}

/// What one journey measured.
#[derive(Debug, Default)]
struct Figures {
    image_summary: String,
    image_build_cold: Duration,
    image_build_warm: Duration,
    make_deploy: Duration,
    deploy_to_ready: Duration,
    applied_to_ready: Duration,
    rss_idle_kib: u64,
    rss_loaded_kib: u64,
    loaded_objects: usize,
    undeploy: Duration,
}

/// The registry the cluster's containerd pulls from, as `host:port`.
fn local_registry(cluster: &Cluster) -> String {
    cluster
        .registry()
        .expect("the cluster was started with_registry")
        .host()
}

/// `make image IMG=<registry>/<name>:e2e PUSH=1`, twice: the first build
/// (cold or not, as the target directory is) and the second (warm).
fn build_and_push(deployed: &Deployed<'_>, figures: &mut Figures) -> String {
    let image = format!(
        "{}/{}:e2e",
        local_registry(deployed.cluster),
        deployed.project.name
    );
    let img = format!("IMG={image}");
    for warm in [false, true] {
        let started = Instant::now();
        let output = deployed
            .tools
            .make(&deployed.dir, &["image", &img, "PUSH=1", "INSECURE=1"]);
        assert!(output.status.success(), "make image:\n{}", text(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        if let Some(line) = stdout.lines().find(|l| l.starts_with("digest ")) {
            figures.image_summary = line.to_owned();
        }
        println!(
            "FIGURE make image ({}) {:.1?}: {}",
            if warm { "warm" } else { "first" },
            started.elapsed(),
            figures.image_summary
        );
        if warm {
            figures.image_build_warm = started.elapsed();
        } else {
            figures.image_build_cold = started.elapsed();
        }
    }
    image
}

/// `make deploy IMG=...`, then the operator pod is Ready under its
/// ServiceAccount and holds the Lease; returns the pod.
async fn deploy(
    deployed: &Deployed<'_>,
    image: &str,
    env: &[(&str, &str)],
    figures: &mut Figures,
) -> Pod {
    let started = Instant::now();
    let output = deployed
        .tools
        .make(&deployed.dir, &["deploy", &format!("IMG={image}")]);
    figures.make_deploy = started.elapsed();
    assert!(output.status.success(), "make deploy:\n{}", text(&output));
    let applied = Instant::now();
    if !env.is_empty() {
        let mut args = vec![
            "set".to_owned(),
            "env".to_owned(),
            "-n".to_owned(),
            deployed.project.namespace.to_owned(),
            format!("deployment/{}", deployed.project.manager()),
        ];
        args.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        deployed.tools.kubectl_ok(&args);
    }
    let pod = deployed.ready_operator_pod().await;
    figures.deploy_to_ready = started.elapsed();
    figures.applied_to_ready = applied.elapsed();
    println!(
        "FIGURE make deploy {:.1?}; make deploy -> operator Ready {:.1?} (applied -> Ready {:.1?})",
        figures.make_deploy, figures.deploy_to_ready, figures.applied_to_ready
    );
    let spec = pod.spec.as_ref().expect("pod spec");
    assert_eq!(
        spec.service_account_name.as_deref(),
        Some(deployed.project.manager().as_str())
    );
    let container = &spec.containers[0];
    // `make deploy` deploys the digest `make image PUSH=1` recorded for IMG.
    let deployed_image = container.image.as_deref().unwrap_or_default();
    assert!(
        deployed_image
            .strip_prefix(image)
            .is_some_and(|rest| rest.starts_with("@sha256:")),
        "deployed {deployed_image}, pushed {image}"
    );
    assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
    let name = pod.metadata.name.clone().expect("pod name");
    deployed.lease_held_by(&name).await;
    pod
}

/// The operator pod is deleted; its replacement becomes Ready and takes
/// the Lease. Returns the replacement.
async fn replace_operator_pod(deployed: &Deployed<'_>, old: &Pod) -> Pod {
    let old_name = old.metadata.name.clone().expect("pod name");
    deployed
        .operator_pods()
        .delete(&old_name, &DeleteParams::default())
        .await
        .expect("delete the operator pod");
    let pods = deployed.operator_pods();
    eventually("the old operator pod to be gone", POD_WAIT, || async {
        pods.get_opt(&old_name).await.ok()?.is_none().then_some(())
    })
    .await;
    let new = deployed.ready_operator_pod().await;
    let new_name = new.metadata.name.clone().expect("pod name");
    assert_ne!(new_name, old_name);
    deployed.lease_held_by(&new_name).await;
    new
}

/// How many custom resources the load step creates: `OPKIT_DEPLOY_LOAD`,
/// default 100 (`make test`'s budget); 1000 for the recorded figure.
fn load_size() -> usize {
    match std::env::var("OPKIT_DEPLOY_LOAD") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("OPKIT_DEPLOY_LOAD must be a number of objects, not {v:?}")),
        Err(_) => 100,
    }
}

/// Creates `count` objects of the journey's kind in `namespace`, from
/// `object(i)`, waits until `done` says each was reconciled, and returns
/// the operator pod's RSS then.
async fn load(
    deployed: &Deployed<'_>,
    pod: &Pod,
    namespace: &str,
    count: usize,
    object: impl Fn(usize) -> serde_json::Value,
    reconciled: impl Fn(&DynamicObject) -> bool,
) -> u64 {
    let api: Api<DynamicObject> =
        Api::namespaced_with(deployed.client.clone(), namespace, &deployed.resource);
    for i in 0..count {
        let value = object(i);
        let object: DynamicObject = serde_json::from_value(value).expect("an object");
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create object {i}: {e}"));
    }
    eventually(
        &format!("{count} objects reconciled"),
        Duration::from_secs(600),
        || async {
            let list = api.list(&ListParams::default()).await.ok()?;
            let done = list.items.iter().filter(|o| reconciled(o)).count();
            (done >= count).then_some(())
        },
    )
    .await;
    deployed.rss_kib(pod)
}

fn condition_true(object: &DynamicObject, kind: &str) -> bool {
    object.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

fn print_figures(what: &str, figures: &Figures) {
    println!(
        "FIGURES {what}: image {}; image build cold {:.1?}, warm {:.1?}; make deploy {:.1?}; \
         make deploy -> operator Ready {:.1?} (manifests applied -> Ready {:.1?}); RSS idle {} KiB, with {} objects {} KiB; \
         make undeploy {:.1?}",
        figures.image_summary,
        figures.image_build_cold,
        figures.image_build_warm,
        figures.make_deploy,
        figures.deploy_to_ready,
        figures.applied_to_ready,
        figures.rss_idle_kib,
        figures.loaded_objects,
        figures.rss_loaded_kib,
        figures.undeploy
    );
}

fn memcached_resource() -> ApiResource {
    ApiResource {
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        plural: "memcacheds".into(),
    }
}

fn memcached(name: &str, size: i32) -> serde_json::Value {
    json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": { "name": name },
        "spec": { "size": size }
    })
}

/// Waits until `count` memcached pods of Memcached `namespace/name` are Ready.
async fn memcached_pods_ready(client: &kube::Client, namespace: &str, name: &str, count: usize) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("app.kubernetes.io/instance={name}");
    eventually(
        &format!("{count} Ready memcached pods of {namespace}/{name}"),
        POD_WAIT,
        || async {
            let list = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            (list.items.iter().filter(|p| is_ready(p)).count() == count).then_some(())
        },
    )
    .await;
}

/// Creates Memcached `shop/name` of `size` and waits for its Deployment,
/// its Ready pods and `Available=True`; returns its uid.
async fn memcached_available(deployed: &Deployed<'_>, name: &str, size: i32) -> String {
    let client = &deployed.client;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "shop", &deployed.resource);
    let object: DynamicObject = serde_json::from_value(memcached(name, size)).expect("a Memcached");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .expect("create the Memcached");
    let uid = created.metadata.uid.clone().expect("uid");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let deployment = eventually("the Memcached's Deployment", WAIT, || async {
        deployments.get_opt(name).await.ok().flatten()
    })
    .await;
    let owner = &deployment
        .metadata
        .owner_references
        .as_ref()
        .expect("owners")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Memcached", uid.as_str())
    );
    memcached_pods_ready(client, "shop", name, usize::try_from(size).expect("size")).await;
    eventually("Available=True", WAIT, || async {
        let object = api.get(name).await.ok()?;
        condition_true(&object, "Available").then_some(())
    })
    .await;
    uid
}

/// Deletes Memcached `shop/name`: the finalizer runs (a `Finalized` Event
/// about it), the object, its Deployment and Service are gone.
async fn memcached_finalized(deployed: &Deployed<'_>, name: &str, uid: &str) {
    let client = &deployed.client;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "shop", &deployed.resource);
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete the Memcached");
    eventually("the Memcached to be gone", WAIT, || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let services: Api<Service> = Api::namespaced(client.clone(), "shop");
    eventually("its Deployment and Service to be gone", WAIT, || async {
        let gone = deployments.get_opt(name).await.ok()?.is_none()
            && services.get_opt(name).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), "shop");
    eventually("the Finalized Event", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Finalized")
                    && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid)
            })
            .then_some(())
    })
    .await;
}

/// examples/memcached's journey on `cluster`: namespaces `shop`,
/// `memcached-scrape` and `memcached-load`.
async fn memcached_operator_journey(cluster: &Cluster, scraper_image: &str) {
    let client = cluster.client().expect("admin client");
    let deployed = Deployed {
        cluster,
        tools: Tools::new(cluster.kubeconfig_path()),
        project: MEMCACHED,
        dir: MEMCACHED.dir(),
        client: client.clone(),
        resource: memcached_resource(),
        scraper_image: scraper_image.to_owned(),
    };
    let mut figures = Figures::default();

    let image = build_and_push(&deployed, &mut figures);
    let memcached_image = cluster.image("memcached").expect("the memcached image");
    let pod = deploy(
        &deployed,
        &image,
        &[("MEMCACHED_IMAGE", memcached_image)],
        &mut figures,
    )
    .await;
    figures.rss_idle_kib = deployed.rss_kib(&pod);
    println!("FIGURE operator RSS idle {} KiB", figures.rss_idle_kib);

    // A Memcached: Deployment, real memcached pods, Available; scaled; deleted.
    create_namespace(&client, "shop").await;
    let uid = memcached_available(&deployed, "cache", 2).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "shop", &deployed.resource);
    api.patch(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({ "spec": { "size": 3 } })),
    )
    .await
    .expect("scale to 3");
    memcached_pods_ready(&client, "shop", "cache", 3).await;
    memcached_finalized(&deployed, "cache", &uid).await;

    // The replacement of a deleted operator pod takes the Lease and carries on.
    let pod_name = pod.metadata.name.clone().expect("pod name");
    let first_log = deployed.log(&pod_name).await;
    assert!(
        first_log.contains("caches synced; starting workers"),
        "the operator never started reconciling:\n{first_log}"
    );
    let pod = replace_operator_pod(&deployed, &pod).await;
    let uid = memcached_available(&deployed, "after", 1).await;
    memcached_finalized(&deployed, "after", &uid).await;

    // /metrics through the metrics Service.
    let metrics = deployed.scrape_metrics("memcached-scrape").await;
    assert!(
        metrics.contains("controller_runtime_reconcile_total{controller=\"memcached\""),
        "{metrics}"
    );

    // Under load: OPKIT_DEPLOY_LOAD (default 100) Memcacheds of size 1 (a
    // Deployment and a Service each; the node runs what fits, the rest of
    // the pods stay Pending, so each gets an Available condition, True or
    // False). The recorded RSS figure is taken with OPKIT_DEPLOY_LOAD=1000,
    // which adds about 8 minutes (creating, then undeploying, 1000).
    create_namespace(&client, "memcached-load").await;
    let loaded = load_size();
    figures.loaded_objects = loaded;
    let load_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "memcached-load", &deployed.resource);
    figures.rss_loaded_kib = load(
        &deployed,
        &pod,
        "memcached-load",
        loaded,
        |i| memcached(&format!("m{i}"), 1),
        |o| {
            o.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Available"))
        },
    )
    .await;

    // No forbidden error from either operator pod.
    let pod_name = pod.metadata.name.clone().expect("pod name");
    let log = deployed.log(&pod_name).await;
    for (which, log) in [("first", &first_log), ("replacement", &log)] {
        let forbidden = forbidden_lines(log);
        assert!(
            forbidden.is_empty(),
            "the {which} operator pod logged forbidden errors:\n{}",
            forbidden.join("\n")
        );
    }

    // A rule dropped from the generated ClusterRole: the error names it.
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role_name = format!("{}-manager-role", MEMCACHED.name);
    let mut role = roles.get(&role_name).await.expect("the ClusterRole");
    for rule in role.rules.iter_mut().flatten() {
        if rule.resources.iter().flatten().any(|r| r == "deployments") {
            rule.verbs.retain(|v| v != "patch");
        }
    }
    role.metadata.managed_fields = None;
    roles
        .replace(&role_name, &PostParams::default(), &role)
        .await
        .expect("drop patch on deployments");
    let object: DynamicObject =
        serde_json::from_value(memcached("denied", 1)).expect("a Memcached");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create the Memcached");
    let expected = r#"cannot patch resource \"deployments\" in API group \"apps\""#;
    let logged = eventually(
        "the forbidden error in the operator's log",
        WAIT,
        || async {
            let log = deployed.log(&pod_name).await;
            log.lines()
                .find(|l| l.contains(expected))
                .map(str::to_owned)
        },
    )
    .await;
    println!("the operator reports the missing rule: {logged}");
    // Restore the rule (make deploy's RBAC), so the finalizers run again.
    deployed.tools.kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        MEMCACHED
            .dir()
            .join("deploy/03-rbac.yaml")
            .to_str()
            .expect("utf-8"),
    ]);
    assert_eq!(
        restarts(&deployed.ready_operator_pod().await),
        0,
        "the liveness probe restarted the operator"
    );

    // Undeploy deletes the 1001 Memcacheds (finalized by the operator) and everything else.
    drop(load_api);
    figures.undeploy = deployed.undeploy("300s").await;
    print_figures("memcached-operator", &figures);
}

fn widget(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "e2e.example.com/v1alpha1",
        "kind": "Widget",
        "metadata": { "name": name },
        "spec": { "message": "hello" }
    })
}

fn has_finalizer(object: &DynamicObject) -> bool {
    object
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == "e2e.example.com/finalizer")
}

/// Creates Widget `default/name`; waits for its finalizer and `Ready=True`;
/// deletes it and waits for the `Finalizing` Event and for it to be gone.
async fn widget_round_trip(deployed: &Deployed<'_>, name: &str) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(deployed.client.clone(), "default", &deployed.resource);
    let object: DynamicObject = serde_json::from_value(widget(name)).expect("a Widget");
    let created = api
        .create(&PostParams::default(), &object)
        .await
        .expect("create the Widget");
    let uid = created.metadata.uid.clone().expect("uid");
    eventually("the finalizer and Ready=True", WAIT, || async {
        let object = api.get(name).await.ok()?;
        (has_finalizer(&object) && condition_true(&object, "Ready")).then_some(())
    })
    .await;
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete the Widget");
    eventually("the Widget to be gone", WAIT, || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    let events: Api<Event> = Api::namespaced(deployed.client.clone(), "default");
    eventually("the Finalizing Event", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Finalizing")
                    && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
            })
            .then_some(())
    })
    .await;
}

/// `cargo opkit new gen-operator` (kind Widget) in `parent`, built in its
/// directory that persists between runs; holds that directory's lock.
fn generate_operator(parent: &Path) -> Persisted {
    generate_widget_operator(parent, "gen-operator", &[], "deploy_in_cluster")
}

/// `cargo opkit new NAME --group e2e.example.com --kind Widget` with
/// `flags` in `parent`, built in its directory that persists between runs
/// under `state`; holds that directory's lock.
fn generate_widget_operator(parent: &Path, name: &str, flags: &[&str], state: &str) -> Persisted {
    let lock = workspace().join("Cargo.lock");
    let output = std::process::Command::new(target_dir().join("debug/cargo-opkit"))
        .args(["opkit", "new", name, "--group", "e2e.example.com"])
        .args(["--kind", "Widget", "--skip-manifests"])
        .args(flags)
        .arg("--dir")
        .arg(parent)
        .arg("--lock-from")
        .arg(&lock)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo-opkit");
    assert!(
        output.status.success(),
        "cargo opkit new:\n{}",
        text(&output)
    );
    // Built in a directory that persists between runs: unchanged, it
    // compiles nothing again.
    persist_and_render(&parent.join(name), state)
}

/// The generated project's journey on `cluster`, from its directory `dir`:
/// namespaces `default`, `gen-scrape` and `gen-load`.
async fn generated_operator_journey(cluster: &Cluster, dir: PathBuf, scraper_image: &str) {
    let client = cluster.client().expect("admin client");
    let deployed = Deployed {
        cluster,
        tools: Tools::new(cluster.kubeconfig_path()),
        project: Project {
            name: "gen-operator",
            namespace: "gen-operator-system",
            group: "e2e.example.com",
            path: "",
        },
        dir,
        client: client.clone(),
        resource: ApiResource {
            group: "e2e.example.com".into(),
            version: "v1alpha1".into(),
            api_version: "e2e.example.com/v1alpha1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        },
        scraper_image: scraper_image.to_owned(),
    };
    let mut figures = Figures::default();

    let image = build_and_push(&deployed, &mut figures);
    let pod = deploy(&deployed, &image, &[], &mut figures).await;
    figures.rss_idle_kib = deployed.rss_kib(&pod);
    println!("FIGURE operator RSS idle {} KiB", figures.rss_idle_kib);
    widget_round_trip(&deployed, "one").await;

    let pod_name = pod.metadata.name.clone().expect("pod name");
    let first_log = deployed.log(&pod_name).await;
    let pod = replace_operator_pod(&deployed, &pod).await;
    widget_round_trip(&deployed, "two").await;

    let metrics = deployed.scrape_metrics("gen-scrape").await;
    assert!(
        metrics.contains("controller_runtime_reconcile_total{controller=\"widget\""),
        "{metrics}"
    );

    create_namespace(&client, "gen-load").await;
    let loaded = load_size();
    figures.loaded_objects = loaded;
    figures.rss_loaded_kib = load(
        &deployed,
        &pod,
        "gen-load",
        loaded,
        |i| widget(&format!("w{i}")),
        |o| condition_true(o, "Ready"),
    )
    .await;

    let log = deployed
        .log(&pod.metadata.name.clone().expect("pod name"))
        .await;
    for (which, log) in [("first", &first_log), ("replacement", &log)] {
        let forbidden = forbidden_lines(log);
        assert!(
            forbidden.is_empty(),
            "the {which} operator pod logged forbidden errors:\n{}",
            forbidden.join("\n")
        );
    }
    assert_eq!(
        restarts(&deployed.ready_operator_pod().await),
        0,
        "the liveness probe restarted the operator"
    );
    figures.undeploy = deployed.undeploy("300s").await;
    print_figures("a generated operator", &figures);
}

/// The image of `metrics_scrape` (this package's binary), built as `cargo
/// opkit image` builds a dev image (`cargo build --bin metrics_scrape`,
/// with the host's glibc), written to `output`.
fn build_scraper_image(output: &Path) -> BuiltImage {
    let started = Instant::now();
    let image = ImageOptions {
        dir: workspace().join("tests"),
        bin: Some("metrics_scrape".to_owned()),
        output: Some(output.to_owned()),
        reference: None,
        profile: Profile::Dev,
    }
    .build()
    .unwrap_or_else(|e| panic!("the metrics_scrape image: {e}"));
    println!(
        "the metrics_scrape image {} ({} bytes) in {:.1?}",
        image.digest,
        image.size,
        started.elapsed()
    );
    image
}

/// Pushes `image` to the cluster's registry; its reference by digest.
async fn push_scraper_image(cluster: &Cluster, image: &BuiltImage) -> String {
    let registry = cluster
        .registry()
        .expect("the cluster was started with_registry");
    let reference = registry.reference("opkit/metrics-scrape", "e2e");
    // The host's end of the node link is not loopback: plain HTTP on request.
    let options = PushOptions {
        insecure: true,
        ..PushOptions::default()
    };
    let digest = image
        .push(&reference, options)
        .await
        .unwrap_or_else(|e| panic!("pushing {reference}: {e}"));
    format!("{}/opkit/metrics-scrape@{digest}", registry.host())
}

/// The generated operator's journey on a cluster of its own. Its project
/// is generated, and the `metrics_scrape` image built, while the cluster
/// starts. The memcached journey below runs at the same time on another
/// cluster (before, both ran one after the other on one cluster: 626 s of
/// a no-change `make test`'s 806, the longest test by far).
#[tokio::test]
async fn a_generated_operator_ships_as_a_pod_and_does_its_job() {
    init_tracing();
    build_cargo_opkit();
    let tmp = tempfile::tempdir().expect("tempdir");
    let parent = tmp.path().to_owned();
    let generated = tokio::task::spawn_blocking(move || generate_operator(&parent));
    let (cluster, scraper_image) = cluster_with_scraper(tmp.path()).await;
    let generated = generated
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    generated_operator_journey(&cluster, generated.dir.clone(), &scraper_image).await;
}

/// examples/memcached's journey on a cluster of its own.
#[tokio::test]
async fn memcached_ships_as_a_pod_and_does_its_job() {
    init_tracing();
    build_cargo_opkit();
    let tmp = tempfile::tempdir().expect("tempdir");
    let (cluster, scraper_image) = cluster_with_scraper(tmp.path()).await;
    memcached_operator_journey(&cluster, &scraper_image).await;
}

/// A local cluster with its registry, and the `metrics_scrape` image
/// (built under `tmp` while the cluster starts) pushed to it, by digest.
async fn cluster_with_scraper(tmp: &Path) -> (Cluster, String) {
    let scraper_output = tmp.join("metrics-scrape-oci");
    let (cluster, scraper) = cluster_while(move || build_scraper_image(&scraper_output)).await;
    let scraper_image = push_scraper_image(&cluster, &scraper).await;
    (cluster, scraper_image)
}

/// A local cluster with its registry, started while `work` (a build, a
/// project generated) runs on a blocking thread; with `work`'s result.
async fn cluster_while<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> (Cluster, T) {
    let work = tokio::task::spawn_blocking(work);
    let cluster = Cluster::builder()
        .with_registry()
        .start()
        .await
        .expect("start the local cluster and its registry");
    let done = work
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    (cluster, done)
}
