//! The foundation: a real control plane answers, stores objects, validates
//! custom resources against their schema, and enforces RBAC.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, grant, rule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[tokio::test]
async fn control_plane_is_a_real_v1_36_apiserver() {
    let begun = Instant::now();
    let plane = ControlPlane::start().await.unwrap();
    eprintln!("control plane ready in {:?}", begun.elapsed());
    let client = plane.client().unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
    assert_eq!(version.minor, "36");
    assert!(
        version.git_version.starts_with("v1.36."),
        "apiserver reports {}",
        version.git_version
    );

    // The kubeconfig on disk is one kube's own loader (and kubectl) accepts.
    let from_file = kube::config::Kubeconfig::read_from(plane.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(from_file, &Default::default())
        .await
        .unwrap();
    let via_file = kube::Client::try_from(config).unwrap();
    assert_eq!(
        via_file.apiserver_version().await.unwrap().git_version,
        version.git_version
    );

    let (etcd_pid, apiserver_pid) = plane.pids();
    plane.stop();
    for pid in [etcd_pid, apiserver_pid] {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "process {pid} still runs after stop"
        );
    }
    assert!(
        !plane.kubeconfig_path().exists(),
        "temp dir removed on stop"
    );
}

#[tokio::test]
async fn namespace_configmap_list_and_watch() {
    let plane = ControlPlane::shared().await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, "envtest-cm").await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "envtest-cm");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("colour".to_owned(), "blue".to_owned())].into()),
        ..ConfigMap::default()
    };
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();

    let listed = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .map(|c| c.name_any())
            .collect::<Vec<_>>(),
        ["settings"]
    );

    let rv = created.resource_version().unwrap();
    let mut events = cms
        .watch(&WatchParams::default().timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    let patch = serde_json::json!({"data": {"colour": "green"}});
    cms.patch("settings", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(30), events.try_next())
        .await
        .expect("no watch event within 30 s")
        .unwrap()
        .expect("watch ended");
    match event {
        WatchEvent::Modified(cm) => {
            assert_eq!(cm.data.unwrap()["colour"], "green");
        }
        other => panic!("expected Modified, got {other:?}"),
    }
}

/// A custom resource defined in Rust; its CRD is generated from this type.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "test.opkit.dev", version = "v1", kind = "Widget", namespaced)]
struct WidgetSpec {
    /// How many replicas; the schema bounds it.
    #[schemars(range(min = 1, max = 10))]
    size: i32,
    colour: String,
}

#[tokio::test]
async fn crd_from_rust_type_is_established_and_validates() {
    let plane = ControlPlane::shared().await.unwrap();
    let client = plane.client().unwrap();
    plane.install_crds(&[Widget::crd()]).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get("widgets.test.opkit.dev").await.unwrap();
    let conditions = crd.status.unwrap().conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True"),
        "{conditions:?}"
    );

    create_namespace(&client, "envtest-crd").await;
    let widgets: Api<Widget> = Api::namespaced(client, "envtest-crd");
    let good = Widget::new(
        "small",
        WidgetSpec {
            size: 3,
            colour: "red".to_owned(),
        },
    );
    let created = widgets.create(&PostParams::default(), &good).await.unwrap();
    assert_eq!(created.spec.size, 3);

    let bad = Widget::new(
        "huge",
        WidgetSpec {
            size: 99,
            colour: "red".to_owned(),
        },
    );
    let err = widgets
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("spec.size"), "{}", status.message);
            assert!(
                status.message.contains("less than or equal to 10"),
                "{}",
                status.message
            );
        }
        other => panic!("expected a 422 from the schema, got {other:?}"),
    }
    assert!(widgets.get_opt("huge").await.unwrap().is_none());
}

#[tokio::test]
async fn restricted_identity_is_forbidden_until_granted() {
    let plane = ControlPlane::shared().await.unwrap();
    let admin = plane.client().unwrap();
    create_namespace(&admin, "envtest-rbac").await;
    let alice = plane.client_as("alice", &["devs"]).unwrap();
    let as_alice: Api<ConfigMap> = Api::namespaced(alice, "envtest-rbac");

    let err = as_alice.list(&ListParams::default()).await.unwrap_err();
    match &err {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert_eq!(status.reason, "Forbidden");
            assert!(
                status
                    .message
                    .contains("User \"alice\" cannot list resource \"configmaps\""),
                "{}",
                status.message
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }

    grant(
        &admin,
        "envtest-rbac",
        "cm-reader",
        "alice",
        vec![rule("", &["configmaps"], &["get", "list"])],
    )
    .await;

    // The RBAC authorizer's cache follows the binding through a watch.
    eventually(
        "the grant to take effect",
        Duration::from_secs(30),
        || async {
            as_alice
                .list(&ListParams::default())
                .await
                .is_ok()
                .then_some(())
        },
    )
    .await;
    // The grant is exactly what the role says: no writes.
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("not-allowed".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let err = as_alice
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403 && s.message.contains("cannot create resource \"configmaps\"")),
        "{err:?}"
    );
}

#[tokio::test]
async fn apiserver_restart_keeps_etcd_state_and_port() {
    let plane = ControlPlane::start().await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, "survives-restart").await;
    let url = plane.server_url().to_owned();
    let (etcd_pid, old_apiserver_pid) = plane.pids();

    plane.restart_apiserver().await.unwrap();

    let (etcd_pid_after, new_apiserver_pid) = plane.pids();
    assert_eq!(etcd_pid, etcd_pid_after, "etcd keeps running");
    assert_ne!(old_apiserver_pid, new_apiserver_pid);
    assert!(!std::path::Path::new(&format!("/proc/{old_apiserver_pid}")).exists());
    assert_eq!(plane.server_url(), url);
    let namespaces: Api<Namespace> = Api::all(plane.client().unwrap());
    assert!(
        namespaces
            .get_opt("survives-restart")
            .await
            .unwrap()
            .is_some()
    );
}
