//! A hub operator shipped as a pod (`cargo opkit new --multicluster
//! kubeconfig-secrets`, kind Widget), on the local single-node cluster:
//! members are added by creating kubeconfig Secrets in the hub's `fleet`
//! namespace, as a user adds them, each with a ServiceAccount token bound
//! to the controller's ClusterRole (as the generated README says). Two
//! members:
//!
//! - `self`, the cluster itself, reached from the pod at
//!   `https://kubernetes.default.svc` (the cluster DNS and the Service
//!   network): a Widget made before it joined is reconciled when it joins,
//!   one made after goes through its whole round trip (finalizer,
//!   `Ready=True`, deletion);
//! - `remote`, a control plane of its own listening on the host end of the
//!   node link (where the cluster's API server listens), with the CRDs and
//!   the ClusterRole applied from `deploy/`: a Widget made there is
//!   reconciled by the pod.
//!
//! Deleting a member's Secret disengages it.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ObjectMeta, PostParams};
use opkit::multicluster::{KUBECONFIG_SECRET_KEY, KUBECONFIG_SECRET_LABEL};
use opkit::rbac::cluster_role_binding;
use opkit_envtest::{Cluster, ControlPlane};
use opkit_tests::{create_namespace, eventually, init_tracing, service_account_token};

use super::deploy_support::persist::Persisted;
use super::deploy_support::{Project, Tools, build_cargo_opkit};
use super::{
    Deployed, Figures, WAIT, build_and_push, cluster_while, condition_true, deploy,
    forbidden_lines, generate_widget_operator, has_finalizer, widget, widget_round_trip,
};

/// The generated hub operator's name.
const NAME: &str = "fleet-gen";

/// `cargo opkit new fleet-gen --multicluster kubeconfig-secrets` (kind
/// Widget) in `parent`, built in its directory that persists between runs.
fn generate_hub_operator(parent: &Path) -> Persisted {
    generate_widget_operator(
        parent,
        NAME,
        &["--multicluster", "kubeconfig-secrets"],
        "deploy_in_cluster_multicluster",
    )
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
/// the operator's ClusterRole, and its kubeconfig Secret.
async fn add_self_member(admin: &kube::Client) {
    let token = service_account_token(admin, "fleet", "member-self").await;
    let binding = cluster_role_binding(
        "fleet-member-self",
        &format!("{NAME}-manager-role"),
        "member-self",
        "fleet",
    );
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind the member's identity to the controller's ClusterRole");
    let kubeconfig = in_cluster_kubeconfig(admin, &token).await;
    create_kubeconfig_secret(admin, "self", kubeconfig).await;
}

/// The hub's kubeconfig Secret `fleet/<name>`, labelled for the provider.
async fn create_kubeconfig_secret(admin: &kube::Client, name: &str, kubeconfig: String) {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("fleet".to_owned()),
            labels: Some(BTreeMap::from([(
                KUBECONFIG_SECRET_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            KUBECONFIG_SECRET_KEY.to_owned(),
            ByteString(kubeconfig.into_bytes()),
        )])),
        ..Secret::default()
    };
    Api::<Secret>::namespaced(admin.clone(), "fleet")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create the kubeconfig Secret of {name}: {e}"));
}

/// The member `remote`: a control plane listening where the cluster's pods
/// reach it (the host end of the node link, the address of the cluster's
/// own API server), given the operator's CRDs and ClusterRole from
/// `deploy/`, and its kubeconfig Secret on the hub, as a ServiceAccount of
/// its own bound to that ClusterRole.
async fn add_remote_member(
    cluster: &Cluster,
    admin: &kube::Client,
    project: &Path,
) -> ControlPlane {
    let server = cluster.control_plane().server_url();
    let host: Ipv4Addr = server
        .trim_start_matches("https://")
        .split(':')
        .next()
        .and_then(|host| host.parse().ok())
        .unwrap_or_else(|| panic!("the cluster's API server address in {server}"));
    let remote = ControlPlane::builder()
        .address(host)
        .start()
        .await
        .expect("start the remote member's control plane");
    let tools = Tools::new(remote.kubeconfig_path());
    // The hub's identity is a ServiceAccount of `fleet` here; 03-rbac.yaml's
    // Role for Secrets there is the hub's, harmless in a member.
    let remote_admin = remote.client().expect("remote admin client");
    create_namespace(&remote_admin, "fleet").await;
    for manifest in ["deploy/01-crds.yaml", "deploy/03-rbac.yaml"] {
        let path = project.join(manifest);
        tools.kubectl_ok(&[
            "apply",
            "--server-side",
            "-f",
            path.to_str().expect("utf-8"),
        ]);
    }
    let token = service_account_token(&remote_admin, "fleet", "hub").await;
    let binding =
        cluster_role_binding("fleet-hub", &format!("{NAME}-manager-role"), "hub", "fleet");
    Api::<ClusterRoleBinding>::all(remote_admin)
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind the hub's identity to the controller's ClusterRole in the member");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig");
    remote
        .write_token_kubeconfig(&token, &path)
        .expect("the remote member's kubeconfig");
    let kubeconfig = std::fs::read_to_string(&path).expect("read the kubeconfig");
    create_kubeconfig_secret(admin, "remote", kubeconfig).await;
    remote
}

/// Whether the operator's JSON log has a line with `message` for `cluster`.
fn logged(log: &str, message: &str, cluster: &str) -> bool {
    let cluster = format!("\"cluster\":\"{cluster}\"");
    log.lines()
        .any(|line| line.contains(message) && line.contains(&cluster))
}

#[tokio::test]
async fn a_hub_operator_in_a_pod_engages_members_from_kubeconfig_secrets() {
    init_tracing();
    build_cargo_opkit();
    let tmp = tempfile::tempdir().expect("tempdir");
    let parent = tmp.path().to_owned();
    let (cluster, generated) = cluster_while(move || generate_hub_operator(&parent)).await;
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
    // The fleet namespace is the user's, made before the deploy (its Role
    // goes in it).
    create_namespace(&admin, "fleet").await;
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

    // deploy/ let the operator read Secrets in the fleet namespace (made
    // before, as the README says), and there only (a Role, not a
    // ClusterRole rule).
    let operator = format!("system:serviceaccount:fleet-gen-system:{NAME}-controller-manager");
    let can_i = |namespace: &str| {
        let output = deployed.tools.kubectl(&[
            "auth", "can-i", "watch", "secrets", "-n", namespace, "--as", &operator,
        ]);
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(
        can_i("fleet"),
        "yes",
        "the operator reads the fleet's Secrets"
    );
    assert_eq!(
        can_i("default"),
        "no",
        "the operator reads no other Secrets"
    );

    // The member joins by its Secret: engaged from the pod, the early
    // Widget reconciled in it, and a new one through its round trip.
    add_self_member(&admin).await;
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
    assert!(logged(&log, "cluster engaged", "self"), "{log}");
    widget_round_trip(&deployed, "one").await;
    widgets
        .delete("early", &DeleteParams::default())
        .await
        .expect("delete the early Widget");
    eventually("the early Widget finalized and gone", WAIT, || async {
        widgets.get_opt("early").await.ok()?.is_none().then_some(())
    })
    .await;

    // A member of its own, reached from the pod over the node link.
    let remote = add_remote_member(&cluster, &admin, &deployed.dir).await;
    let remote_widgets: Api<DynamicObject> = Api::namespaced_with(
        remote.client().expect("remote admin client"),
        "default",
        &deployed.resource,
    );
    let far: DynamicObject = serde_json::from_value(widget("far")).expect("a Widget");
    remote_widgets
        .create(&PostParams::default(), &far)
        .await
        .expect("create a Widget in the remote member");
    eventually("the Widget reconciled in member remote", WAIT, || async {
        let object = remote_widgets.get("far").await.ok()?;
        (has_finalizer(&object) && condition_true(&object, "Ready")).then_some(())
    })
    .await;
    remote_widgets
        .delete("far", &DeleteParams::default())
        .await
        .expect("delete the remote Widget");
    eventually("the remote Widget finalized and gone", WAIT, || async {
        remote_widgets
            .get_opt("far")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;

    // The members leave with their Secrets: disengaged in the pod.
    for member in ["self", "remote"] {
        Api::<Secret>::namespaced(admin.clone(), "fleet")
            .delete(member, &DeleteParams::default())
            .await
            .expect("delete the member's Secret");
        eventually(&format!("member {member} disengaged"), WAIT, || async {
            logged(&deployed.log(&pod_name).await, "cluster disengaged", member).then_some(())
        })
        .await;
    }

    let log = deployed.log(&pod_name).await;
    let forbidden = forbidden_lines(&log);
    assert!(
        forbidden.is_empty(),
        "the hub operator logged forbidden errors:\n{}",
        forbidden.join("\n")
    );
    deployed.undeploy("300s").await;
    // `make undeploy` took the operator's Role from the fleet namespace and
    // left the namespace (the members' Secrets live there).
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone());
    assert!(
        namespaces.get_opt("fleet").await.expect("get").is_some(),
        "make undeploy deleted the fleet namespace"
    );
    let roles = Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(admin.clone(), "fleet");
    assert!(
        roles
            .get_opt(&format!("{NAME}-fleet-secrets"))
            .await
            .expect("get")
            .is_none(),
        "the fleet Role is left"
    );
}
