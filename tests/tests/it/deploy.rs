//! The deploy targets of an operator project's Makefile (`examples/memcached`,
//! the same Makefile `cargo opkit new` generates), run as a user runs them:
//! `make` with `kubectl` and `KUBECONFIG` pointing at a local cluster.
//!
//! - `make undeploy` deletes the custom resources first and waits, bounded,
//!   for the operator to finalize them; when something still holds on it
//!   stops, names it, and says what to do — it never hangs.
//! - `make run` without the CRDs installed fails at once, saying to run
//!   `make install`.
//!
//! Needs the node assets (`make cluster-assets`: kubectl, the controllers).

use super::deploy_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use opkit_envtest::{Cluster, ControlPlane};
use opkit_tests::{eventually, init_tracing};

use deploy_support::{MEMCACHED, Tools, text};

/// A Memcached carrying the operator's finalizer, created while no operator
/// runs: nothing will ever remove the finalizer.
const STUCK_MEMCACHED: &str = r#"
apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: stuck
  namespace: default
  finalizers: ["cache.example.com/finalizer"]
spec:
  size: 1
"#;

#[tokio::test]
async fn undeploy_stops_within_its_bound_naming_what_holds_on_then_finishes() {
    init_tracing();
    // The controllers (namespace deletion, garbage collection), no node: the
    // operator's pod is never run, so nobody finalizes the Memcached.
    let cluster = Cluster::builder()
        .without_node()
        .start()
        .await
        .expect("start the control plane and controllers");
    let tools = Tools::new(cluster.kubeconfig_path());
    let project = MEMCACHED.dir();
    for file in [
        "00-namespace.yaml",
        "01-crds.yaml",
        "02-service-account.yaml",
        "03-rbac.yaml",
        "04-deployment.yaml",
    ] {
        tools.kubectl_ok(&[
            "apply",
            "--server-side",
            "-f",
            project.join("deploy").join(file).to_str().expect("utf-8"),
        ]);
    }
    tools.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/memcacheds.cache.example.com",
        "--timeout=30s",
    ]);
    tools.kubectl_stdin_ok(&["apply", "-f", "-"], STUCK_MEMCACHED);

    let started = Instant::now();
    let output = tools.make(&project, &["undeploy", "UNDEPLOY_TIMEOUT=3s"]);
    let took = started.elapsed();
    assert!(
        !output.status.success(),
        "undeploy succeeded with a finalizer nobody removes:\n{}",
        text(&output)
    );
    assert!(
        took < Duration::from_secs(30),
        "undeploy took {took:?} with a 3s bound"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("make undeploy with a finalizer nobody removes, after {took:?}:\n{stderr}");
    for expected in [
        "these still hold on",
        "Memcached",
        "stuck",
        "cache.example.com/finalizer",
        "kubectl logs -n memcached-operator-system deployment/memcached-operator-controller-manager",
        "finalizers\":null",
    ] {
        assert!(
            stderr.contains(expected),
            "the message does not say {expected:?}:\n{}",
            text(&output)
        );
    }
    // It stopped before the operator: nothing else was deleted, so the
    // operator could still finalize the Memcached.
    let client = cluster.client().expect("admin client");
    let operator: Api<Deployment> = Api::namespaced(client.clone(), MEMCACHED.namespace);
    assert!(
        operator
            .get_opt(&MEMCACHED.manager())
            .await
            .expect("get")
            .is_some(),
        "the operator was deleted before its custom resources"
    );

    // What the message says to do by hand, then undeploy finishes and
    // leaves nothing.
    tools.kubectl_ok(&[
        "patch",
        "memcached",
        "stuck",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let output = tools.make(&project, &["undeploy", "UNDEPLOY_TIMEOUT=60s"]);
    assert!(output.status.success(), "undeploy:\n{}", text(&output));
    expect_nothing_left(&client, &MEMCACHED).await;
}

#[tokio::test]
async fn make_run_without_the_crds_says_to_run_make_install() {
    init_tracing();
    let plane = ControlPlane::start()
        .await
        .expect("start etcd and kube-apiserver");
    let tools = Tools::new(plane.kubeconfig_path());
    let started = Instant::now();
    // CARGO=false: the check comes before any build.
    let output = tools.make(&MEMCACHED.dir(), &["run", "CARGO=false"]);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not installed") && stderr.contains("make install"),
        "{}",
        text(&output)
    );
}

/// `make deploy IMAGE_PULL_SECRET=<name>` gives the manager's Deployment
/// `imagePullSecrets` (a private registry); without it there are none.
#[tokio::test]
async fn make_deploy_sets_the_image_pull_secret() {
    init_tracing();
    let plane = ControlPlane::start()
        .await
        .expect("start etcd and kube-apiserver");
    let tools = Tools::new(plane.kubeconfig_path());
    let client = plane.client().expect("admin client");
    let deployments: Api<Deployment> = Api::namespaced(client, MEMCACHED.namespace);
    let secrets = |d: &Deployment| -> Vec<String> {
        d.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.image_pull_secrets.as_ref())
            .map(|list| list.iter().map(|r| r.name.clone()).collect())
            .unwrap_or_default()
    };
    // CARGO=true: the committed manifests are deployed as they are.
    let output = tools.make(
        &MEMCACHED.dir(),
        &[
            "deploy",
            "CARGO=true",
            "IMG=registry.example:5000/memcached-operator:v1",
            "IMAGE_PULL_SECRET=regcred",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("pulled with the Secret regcred"),
        "{}",
        text(&output)
    );
    let deployment = deployments.get(&MEMCACHED.manager()).await.expect("get");
    assert_eq!(secrets(&deployment), vec!["regcred".to_owned()]);

    // Deployed again without it, the field (owned by make deploy's apply)
    // goes away.
    let output = tools.make(&MEMCACHED.dir(), &["deploy", "CARGO=true"]);
    assert!(output.status.success(), "{}", text(&output));
    let deployment = deployments.get(&MEMCACHED.manager()).await.expect("get");
    assert!(secrets(&deployment).is_empty(), "{deployment:?}");
}

/// Whether any object of `api` is named `prefix...` (true if the list
/// fails: "not known to be gone").
async fn any_named_with<K>(api: &Api<K>, prefix: &str) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items.iter().any(|o| {
                o.meta()
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(prefix))
            })
        })
        .unwrap_or(true)
}

/// Waits until the project's namespace, CRDs, ClusterRole and
/// ClusterRoleBinding are gone.
async fn expect_nothing_left(client: &kube::Client, project: &deploy_support::Project) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    eventually(
        "undeploy to leave nothing",
        Duration::from_secs(5),
        || async {
            let ns_gone = namespaces
                .get_opt(project.namespace)
                .await
                .is_ok_and(|n| n.is_none());
            let crds_left = crds
                .list(&ListParams::default())
                .await
                .map(|l| l.items.iter().any(|c| c.spec.group == project.group))
                .unwrap_or(true);
            let prefix = format!("{}-", project.name);
            let roles_left = any_named_with(&roles, &prefix).await;
            let bindings_left = any_named_with(&bindings, &prefix).await;
            (ns_gone && !crds_left && !roles_left && !bindings_left).then_some(())
        },
    )
    .await;
}
