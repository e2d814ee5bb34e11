//! Helpers shared by the Memcached operator's tests.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use memcached_operator::api::memcached::Memcached;
use serde_json::json;

/// How long anything the operator does may take.
pub const WAIT: Duration = Duration::from_secs(30);

/// Polls `check` every 100 ms until it returns `Some`; panics naming
/// `what` after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates namespace `name` as `client`.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
}

/// Stands in for kube-controller-manager's Deployment controller, which
/// does not run under envtest: reports every replica of the Deployment's
/// current generation as available, through the status subresource,
/// exactly as that controller would once the pods were up.
pub async fn mark_deployment_available(admin: &kube::Client, namespace: &str, name: &str) {
    let api: Api<Deployment> = Api::namespaced(admin.clone(), namespace);
    let deployment = api.get(name).await.expect("read the Deployment");
    let replicas = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = json!({ "status": {
        "observedGeneration": deployment.metadata.generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch the Deployment's status");
}

/// Deletes Memcached `namespace/name` (uid `uid`) and checks its finalizer
/// ran: the CR is gone, its Deployment and Service were deleted, and a
/// `Finalized` Event about it was recorded by the `memcached` controller.
pub async fn delete_and_expect_finalized(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
) {
    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), namespace);
    memcacheds
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the Memcached");
    eventually("the Memcached to be gone", || async {
        memcacheds.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    assert!(deployments.get_opt(name).await.expect("get").is_none());
    assert!(services.get_opt(name).await.expect("get").is_none());
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    eventually("the Finalized Event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Finalized")
                    && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid)
                    && e.reporting_controller.as_deref() == Some("memcached")
            })
            .then_some(())
    })
    .await;
}
