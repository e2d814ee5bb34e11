//! Pods watched through a projection, against a real kube-apiserver: the
//! report follows each Pod's readiness (set here, as there is no kubelet)
//! and its deletion.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, Pod, PodSpec};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::manager::Manager;
use opkit_envtest::{ControlPlane, eventually};
use pod_readiness::REPORT;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("example.com/app:1".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

#[tokio::test]
async fn the_report_follows_pod_readiness() {
    let plane = ControlPlane::shared().await.expect("control plane");
    let client = plane.client().expect("client");
    let ns = "pod-readiness";
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.into());
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await;

    let mut manager = Manager::builder()
        .client(client.clone())
        .namespace(ns)
        .build()
        .await
        .expect("manager");
    manager
        .add(pod_readiness::controller())
        .expect("add the controller");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async move {
        let _ = stopped.await;
    }));

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in ["web-0", "web-1"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .expect("pod");
    }
    // No kubelet: the test plays it, marking web-0 running and ready.
    pods.patch_status(
        "web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }})),
    )
    .await
    .expect("status");
    let expected = BTreeMap::from([
        ("web-0".to_owned(), "ready".to_owned()),
        ("web-1".to_owned(), "not ready (Pending)".to_owned()),
    ]);
    eventually("both Pods reported", WAIT, || async {
        let data = maps.get_opt(REPORT).await.ok()??.data?;
        (data == expected).then_some(())
    })
    .await;

    // An unscheduled Pod is deleted at once: it leaves the report.
    pods.delete("web-1", &DeleteParams::default())
        .await
        .expect("delete");
    eventually("web-1 gone from the report", WAIT, || async {
        let data = maps.get_opt(REPORT).await.ok()??.data?;
        (data.len() == 1 && data.contains_key("web-0")).then_some(())
    })
    .await;

    let _ = stop.send(());
    running.await.expect("manager task").expect("manager");
}
