//! A hub operator shipped as a pod (`cargo opkit new --multicluster
//! kubeconfig-secrets`, kind Widget), on the local single-node cluster:
//! members are added by creating kubeconfig Secrets in the hub's `fleet`
//! namespace, as a user adds them. The member here is the cluster itself,
//! reached from the pod the way a remote member is (its own kubeconfig,
//! server `https://kubernetes.default.svc` through the cluster DNS and the
//! Service network, a ServiceAccount token bound to the controller's
//! ClusterRole, as the generated README says), so what the provider does
//! in a pod is real: it reads the Secret with the hub's RBAC, builds a
//! client from the kubeconfig, engages the member (a Widget made before
//! the member joined is reconciled then, and one made after goes through
//! its whole round trip: finalizer, `Ready=True`, deletion), and
//! disengages it when the Secret is deleted.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use opkit_envtest::Cluster;
use opkit_tests::{create_namespace, eventually, init_tracing, service_account_token};

use super::deploy_support::persist::Persisted;
use super::deploy_support::{
    Project, Tools, build_cargo_opkit, persist_and_render, target_dir, text, workspace,
};
use super::{
    Deployed, Figures, WAIT, build_and_push, condition_true, deploy, forbidden_lines,
    has_finalizer, widget, widget_round_trip,
};

/// The generated hub operator's name.
const NAME: &str = "fleet-gen";

/// `cargo opkit new fleet-gen --multicluster kubeconfig-secrets` (kind
/// Widget) in `parent`, built in its directory that persists between runs.
fn generate_hub_operator(parent: &Path) -> Persisted {
    let lock = workspace().join("Cargo.lock");
    let output = std::process::Command::new(target_dir().join("debug/cargo-opkit"))
        .args(["opkit", "new", NAME, "--group", "e2e.example.com"])
        .args(["--kind", "Widget", "--skip-manifests"])
        .args(["--multicluster", "kubeconfig-secrets", "--dir"])
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
    persist_and_render(&parent.join(NAME), "deploy_in_cluster_multicluster")
}

/// A kubeconfig reaching this cluster from a pod: the API server by its
/// Service name, trusted by the cluster's CA, as `token`'s identity.
async fn in_cluster_kubeconfig(admin: &kube::Client, token: &str) -> String {
    let ca = Api::<ConfigMap>::namespaced(admin.clone(), "default")
        .get("kube-root-ca.crt")
        .await
        .expect("the cluster's CA bundle")
        .data
        .and_then(|d| d.get("ca.crt").cloned())
        .expect("ca.crt");
    let ca_data = serde_json::to_value(ByteString(ca.into_bytes())).expect("base64");
    let ca_data = ca_data.as_str().expect("a string");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: self\n  cluster:\n    server: https://kubernetes.default.svc\n    certificate-authority-data: {ca_data}\nusers:\n- name: member\n  user:\n    token: {token}\ncontexts:\n- name: self\n  context:\n    cluster: self\n    user: member\ncurrent-context: self\n"
    )
}

/// The member `self`: a ServiceAccount of the `fleet` namespace bound to
/// the operator's ClusterRole, and its kubeconfig Secret, labelled for the
/// provider.
async fn add_member(admin: &kube::Client) {
    let token = service_account_token(admin, "fleet", "member-self").await;
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some("fleet-member-self".to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: format!("{NAME}-manager-role"),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: "member-self".to_owned(),
            namespace: Some("fleet".to_owned()),
            ..Subject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind the member's identity to the controller's ClusterRole");
    let kubeconfig = in_cluster_kubeconfig(admin, &token).await;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some("self".to_owned()),
            namespace: Some("fleet".to_owned()),
            labels: Some(BTreeMap::from([(
                "sigs.k8s.io/multicluster-runtime-kubeconfig".to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "kubeconfig".to_owned(),
            ByteString(kubeconfig.into_bytes()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(admin.clone(), "fleet")
        .create(&PostParams::default(), &secret)
        .await
        .expect("create the member's kubeconfig Secret");
}

/// Whether the operator's JSON log has a line with `message` for cluster `self`.
fn logged(log: &str, message: &str) -> bool {
    log.lines()
        .any(|line| line.contains(message) && line.contains("\"cluster\":\"self\""))
}

#[tokio::test]
async fn a_hub_operator_in_a_pod_engages_members_from_kubeconfig_secrets() {
    init_tracing();
    build_cargo_opkit();
    let tmp = tempfile::tempdir().expect("tempdir");
    let parent = tmp.path().to_owned();
    let generated = tokio::task::spawn_blocking(move || generate_hub_operator(&parent));
    let cluster = Cluster::builder()
        .with_registry()
        .start()
        .await
        .expect("start the local cluster and its registry");
    let generated = generated
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let admin = cluster.client().expect("admin client");
    let deployed = Deployed {
        cluster: &cluster,
        tools: Tools::new(cluster.kubeconfig_path()),
        project: Project {
            name: NAME,
            namespace: "fleet-gen-system",
            group: "e2e.example.com",
            path: "",
        },
        dir: generated.dir.clone(),
        client: admin.clone(),
        resource: ApiResource {
            group: "e2e.example.com".into(),
            version: "v1alpha1".into(),
            api_version: "e2e.example.com/v1alpha1".into(),
            kind: "Widget".into(),
            plural: "widgets".into(),
        },
        scraper_image: String::new(),
    };
    let mut figures = Figures::default();
    let image = build_and_push(&deployed, &mut figures);
    let pod = deploy(&deployed, &image, &[], &mut figures).await;
    let pod_name = pod.metadata.name.clone().expect("pod name");

    // A Widget made while no member is engaged waits for one.
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), "default", &deployed.resource);
    let early: DynamicObject = serde_json::from_value(widget("early")).expect("a Widget");
    widgets
        .create(&PostParams::default(), &early)
        .await
        .expect("create the early Widget");

    // The member joins by its Secret: engaged from the pod, the early
    // Widget reconciled in it, and a new one through its round trip.
    create_namespace(&admin, "fleet").await;
    add_member(&admin).await;
    eventually(
        "the early Widget reconciled in member self",
        WAIT,
        || async {
            let object = widgets.get("early").await.ok()?;
            (has_finalizer(&object) && condition_true(&object, "Ready")).then_some(())
        },
    )
    .await;
    let log = deployed.log(&pod_name).await;
    assert!(logged(&log, "cluster engaged"), "{log}");
    widget_round_trip(&deployed, "one").await;
    widgets
        .delete("early", &DeleteParams::default())
        .await
        .expect("delete the early Widget");
    eventually("the early Widget finalized and gone", WAIT, || async {
        widgets.get_opt("early").await.ok()?.is_none().then_some(())
    })
    .await;

    // The member leaves with its Secret: disengaged in the pod.
    Api::<Secret>::namespaced(admin.clone(), "fleet")
        .delete("self", &DeleteParams::default())
        .await
        .expect("delete the member's Secret");
    eventually("member self disengaged", WAIT, || async {
        logged(&deployed.log(&pod_name).await, "cluster disengaged").then_some(())
    })
    .await;

    let log = deployed.log(&pod_name).await;
    let forbidden = forbidden_lines(&log);
    assert!(
        forbidden.is_empty(),
        "the hub operator logged forbidden errors:\n{}",
        forbidden.join("\n")
    );
    deployed.undeploy("300s").await;
}
