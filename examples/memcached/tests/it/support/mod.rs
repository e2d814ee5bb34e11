//! Helpers shared by the Memcached operator's tests.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use memcached_operator::api::memcached::Memcached;
use opkit_envtest::eventually;

/// How long anything the operator does may take.
pub const WAIT: Duration = Duration::from_secs(30);
/// How long pods may take to start on the local cluster's node.
pub const POD_WAIT: Duration = Duration::from_secs(120);

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

/// Waits until `count` pods of Memcached `namespace/name` run and are
/// Ready: made by the real Deployment controller's ReplicaSet, scheduled,
/// and run by the kubelet (on a [`opkit_envtest::Cluster`]).
pub async fn running_pods(client: &kube::Client, namespace: &str, name: &str, count: usize) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("app.kubernetes.io/instance={name}");
    let what = format!("{count} running memcached pods of {namespace}/{name}");
    eventually(&what, POD_WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        let ready = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        (ready == count).then_some(())
    })
    .await;
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
    eventually("the Memcached to be gone", WAIT, || async {
        memcacheds.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    assert!(deployments.get_opt(name).await.expect("get").is_none());
    assert!(services.get_opt(name).await.expect("get").is_none());
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    eventually("the Finalized Event", WAIT, || async {
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
