//! What ships, installed on the local cluster (`opkit_envtest::Cluster`,
//! real controllers, kubelet, containerd) as a user installs it, from
//! `examples/memcached` (the generated Makefile), one after the other on
//! one cluster:
//!
//! 1. `make build-installer IMG=...` writes `dist/install.yaml`;
//!    `kubectl apply --server-side -f` installs it; applying it again
//!    changes nothing (every object keeps its resourceVersion); the
//!    operator runs and reconciles a Memcached; `kubectl delete -f` removes
//!    it all.
//! 2. `make helm-deploy IMG=...` installs the chart `cargo opkit chart`
//!    renders, with the real `helm` (tests/helm/build.sh); the operator
//!    reconciles a Memcached; `helm upgrade --set replicas=2` scales the
//!    manager; `--set replicas=three` fails on the chart's schema, naming
//!    the value and the type, and changes nothing; `make helm-uninstall`
//!    removes the Deployment, ServiceAccount, RBAC and Service, and the
//!    namespace with what the operator made in it (Lease, certificate
//!    Secret), and keeps the CRD (`crd.keep`, `helm.sh/resource-policy: keep`).
//!
//! Prints the figures (make build-installer, make helm-deploy to the
//! manager Available). Needs root, the node assets (`make cluster-assets`),
//! the registry (`make registry`) and helm (`make helm`).

use super::deploy_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use opkit_envtest::Cluster;
use opkit_tests::{eventually, init_tracing};
use serde_json::json;

use deploy_support::{MEMCACHED, Tools, target_dir, text, workspace};

/// How long the operator may take for anything it does.
const WAIT: Duration = Duration::from_secs(60);
/// How long pods may take to start on the node.
const POD_WAIT: Duration = Duration::from_secs(180);
const RELEASE: &str = "memcached-operator";

fn memcached_api(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        plural: "memcacheds".into(),
    };
    Api::namespaced_with(client.clone(), "default", &resource)
}

/// Creates Memcached `default/name`, waits for the operator to report its
/// `Available` condition, deletes it and waits for the operator's
/// finalizer to let it go.
async fn reconciles_a_memcached(client: &kube::Client, name: &str) {
    let api = memcached_api(client);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": { "name": name },
        "spec": { "size": 1 }
    }))
    .expect("a Memcached");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create the Memcached");
    eventually(
        &format!("the operator to report Memcached {name}'s Available condition"),
        WAIT,
        || async {
            let object = api.get(name).await.ok()?;
            object.data["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Available")
                .then_some(())
        },
    )
    .await;
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete the Memcached");
    eventually(
        &format!("Memcached {name} finalized and gone"),
        WAIT,
        || async { api.get_opt(name).await.ok()?.is_none().then_some(()) },
    )
    .await;
}

/// Waits for the manager's Deployment to be Available with `replicas`.
async fn manager_available(client: &kube::Client) -> Deployment {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MEMCACHED.namespace);
    eventually(
        "the manager's Deployment to be Available",
        POD_WAIT,
        || async {
            let d = deployments.get_opt(&MEMCACHED.manager()).await.ok()??;
            d.status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
                .then_some(d)
        },
    )
    .await
}

/// The helm tests/helm/build.sh builds (at once when it is built).
fn helm_binary() -> PathBuf {
    let output = Command::new(workspace().join("tests/helm/build.sh"))
        .output()
        .expect("run tests/helm/build.sh");
    assert!(
        output.status.success(),
        "tests/helm/build.sh (make helm):\n{}",
        text(&output)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join("helm")
}

/// `helm ARGS` against the cluster, with its state in `home`.
fn helm(helm: &Path, tools: &Tools, home: &Path, args: &[&str]) -> Output {
    Command::new(helm)
        .args(args)
        .env("KUBECONFIG", &tools.kubeconfig)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .current_dir(MEMCACHED.dir())
        .output()
        .expect("run helm")
}

/// `make ARGS` in the example, with helm's state in `home`.
fn make(tools: &Tools, home: &Path, args: &[&str]) -> Output {
    tools
        .make_command(&MEMCACHED.dir(), args)
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("run make")
}

/// The resourceVersion of every object of `file`.
fn resource_versions(tools: &Tools, file: &Path) -> BTreeMap<String, String> {
    let listed = tools.kubectl_ok(&["get", "-f", file.to_str().expect("utf-8"), "-o", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("kubectl's JSON");
    listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| {
            (
                format!("{}/{}", o["kind"], o["metadata"]["name"]),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .expect("resourceVersion")
                    .to_owned(),
            )
        })
        .collect()
}

fn build_cargo_opkit() {
    let output = cargo_opkit::cargo_command()
        .args(["build", "-p", "cargo-opkit"])
        .current_dir(workspace())
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "building cargo-opkit:\n{}",
        text(&output)
    );
}

async fn installer_journey(client: &kube::Client, tools: &Tools, home: &Path, image: &str) {
    let started = Instant::now();
    let output = make(tools, home, &["build-installer", &format!("IMG={image}")]);
    let build = started.elapsed();
    assert!(
        output.status.success(),
        "make build-installer:\n{}",
        text(&output)
    );
    let install = MEMCACHED.dir().join("dist/install.yaml");
    let installer = std::fs::read_to_string(&install).expect("dist/install.yaml");
    // The digest `make image PUSH=1` pushed, as `make deploy` deploys.
    assert!(
        installer.contains(&format!("image: {image}@sha256:")),
        "{installer}"
    );
    let file = install.to_str().expect("utf-8");
    let applied = Instant::now();
    tools.kubectl_ok(&["apply", "--server-side", "-f", file]);
    manager_available(client).await;
    println!(
        "FIGURE make build-installer {build:.1?}; kubectl apply -f dist/install.yaml -> manager Available {:.1?}",
        applied.elapsed()
    );
    let before = resource_versions(tools, &install);
    assert_eq!(
        before.len(),
        installer.matches("\n---\n").count(),
        "{before:?}"
    );
    tools.kubectl_ok(&["apply", "--server-side", "-f", file]);
    assert_eq!(
        resource_versions(tools, &install),
        before,
        "applying dist/install.yaml again changed objects"
    );
    reconciles_a_memcached(client, "from-installer").await;
    tools.kubectl_ok(&["delete", "--wait", "--timeout=120s", "-f", file]);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually("the namespace gone", POD_WAIT, || async {
        namespaces
            .get_opt(MEMCACHED.namespace)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
}

async fn helm_journey(
    client: &kube::Client,
    tools: &Tools,
    home: &Path,
    image: &str,
    helm_bin: &Path,
) {
    let helm_arg = format!("HELM={}", helm_bin.display());
    // `make chart` first, so make helm-deploy's figure is helm's (and the
    // committed chart stays what `cargo opkit chart` renders).
    let output = make(tools, home, &["chart"]);
    assert!(output.status.success(), "make chart:\n{}", text(&output));
    let started = Instant::now();
    let output = make(
        tools,
        home,
        &["helm-deploy", &format!("IMG={image}"), &helm_arg],
    );
    let deploy = started.elapsed();
    assert!(
        output.status.success(),
        "make helm-deploy:\n{}",
        text(&output)
    );
    let deployment = manager_available(client).await;
    println!(
        "FIGURE make helm-deploy (helm upgrade --install --wait) -> manager Available {deploy:.1?}"
    );
    let container = &deployment
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod spec")
        .containers[0];
    let deployed_image = container.image.as_deref().unwrap_or_default();
    assert!(
        deployed_image.starts_with(&format!("{image}@sha256:")),
        "deployed {deployed_image}, pushed {image}"
    );
    let labels = deployment.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("Helm")
    );
    reconciles_a_memcached(client, "from-helm").await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), MEMCACHED.namespace);
    let ns = MEMCACHED.namespace;
    let output = helm(
        helm_bin,
        tools,
        home,
        &[
            "upgrade",
            RELEASE,
            "dist/chart",
            "-n",
            ns,
            "--reuse-values",
            "--set",
            "replicas=2",
            "--wait",
        ],
    );
    assert!(
        output.status.success(),
        "helm upgrade --set replicas=2:\n{}",
        text(&output)
    );
    let scaled = deployments
        .get(&MEMCACHED.manager())
        .await
        .expect("the Deployment");
    assert_eq!(scaled.spec.as_ref().and_then(|s| s.replicas), Some(2));

    let history = |home: &Path| {
        let output = helm(
            helm_bin,
            tools,
            home,
            &["history", RELEASE, "-n", ns, "-o", "json"],
        );
        assert!(output.status.success(), "helm history:\n{}", text(&output));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).expect("helm history JSON")
    };
    let revisions = history(home).as_array().expect("revisions").len();
    let output = helm(
        helm_bin,
        tools,
        home,
        &[
            "upgrade",
            RELEASE,
            "dist/chart",
            "-n",
            ns,
            "--reuse-values",
            "--set",
            "replicas=three",
        ],
    );
    assert!(!output.status.success(), "replicas=three was accepted");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("values don't meet the specifications of the schema")
            && stderr.contains("at '/replicas': got string, want integer"),
        "{stderr}"
    );
    println!("helm upgrade --set replicas=three: {}", stderr.trim());
    assert_eq!(
        history(home).as_array().expect("revisions").len(),
        revisions,
        "a revision was recorded"
    );
    let unchanged = deployments
        .get(&MEMCACHED.manager())
        .await
        .expect("the Deployment");
    assert_eq!(unchanged.spec.as_ref().and_then(|s| s.replicas), Some(2));
    assert_eq!(unchanged.metadata.generation, scaled.metadata.generation);

    let output = make(tools, home, &["helm-uninstall", &helm_arg]);
    assert!(
        output.status.success(),
        "make helm-uninstall:\n{}",
        text(&output)
    );
    // Of everything the installer holds (the same manifests), only the CRD
    // (`crd.keep`) is left: the Makefile deletes the namespace, which
    // `--create-namespace` made and helm never deletes, and with it the
    // Lease and the webhook certificate's Secret the operator made there
    // (issue 38).
    let install = MEMCACHED.dir().join("dist/install.yaml");
    let left = tools.kubectl_ok(&[
        "get",
        "--ignore-not-found",
        "-f",
        install.to_str().expect("utf-8"),
        "-o",
        "name",
    ]);
    let left: Vec<&str> = left.lines().collect();
    assert_eq!(
        left,
        ["customresourcedefinition.apiextensions.k8s.io/memcacheds.cache.example.com".to_owned()],
        "helm uninstall left more"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt("memcacheds.cache.example.com")
            .await
            .expect("get")
            .is_some(),
        "crd.keep: helm uninstall keeps the CRD"
    );
    let output = helm(helm_bin, tools, home, &["list", "-n", ns, "-q"]);
    assert!(
        output.status.success() && output.stdout.trim_ascii().is_empty(),
        "{}",
        text(&output)
    );
    // `make helm-uninstall` deleted the namespace and waited for it.
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt(ns)
            .await
            .expect("get the namespace")
            .is_none(),
        "make helm-uninstall left the namespace {ns}"
    );
    // What helm leaves by design: the kept CRD.
    crds.delete("memcacheds.cache.example.com", &DeleteParams::default())
        .await
        .expect("delete the CRD");
}

/// Both on one cluster (starting one takes a while): the installer, then
/// the chart.
#[tokio::test]
async fn the_installer_and_the_helm_chart_install_the_operator_and_helm_upgrades_and_uninstalls_it()
{
    init_tracing();
    build_cargo_opkit();
    let helm_bin = helm_binary();
    let home = tempfile::tempdir().expect("tempdir");
    let cluster = Cluster::builder()
        .with_registry()
        .start()
        .await
        .expect("start the local cluster and its registry");
    let client = cluster.client().expect("admin client");
    let tools = Tools::new(cluster.kubeconfig_path());
    let registry = cluster
        .registry()
        .expect("the cluster was started with_registry")
        .host();
    let image = format!("{registry}/memcached-operator:dist");
    let output = make(
        &tools,
        home.path(),
        &["image", &format!("IMG={image}"), "PUSH=1", "INSECURE=1"],
    );
    assert!(output.status.success(), "make image:\n{}", text(&output));

    installer_journey(&client, &tools, home.path(), &image).await;
    helm_journey(&client, &tools, home.path(), &image, &helm_bin).await;
}
