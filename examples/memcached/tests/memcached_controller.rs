//! The Memcached controller in-process, against a real kube-apiserver and
//! etcd (`opkit::envtest`): what it creates, the conditions it reports, a
//! scale, the schema's validation, and the finalizer.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memcached_operator::api::memcached::{AVAILABLE, Memcached, MemcachedSpec, PROGRESSING};
use memcached_operator::controllers::memcached::FINALIZER;
use opkit::conditions;
use opkit::envtest::ControlPlane;
use opkit::manager::Manager;
use serde_json::json;
use support::{
    create_namespace, delete_and_expect_finalized, eventually, mark_deployment_available,
};

#[tokio::test]
async fn memcached_lifecycle() {
    let plane = ControlPlane::start()
        .await
        .expect("start etcd and kube-apiserver");
    plane
        .install_crds(&memcached_operator::crds())
        .await
        .expect("install the CRD");
    let client = plane.client().expect("admin client");
    create_namespace(&client, "cache").await;

    let mut manager = Manager::builder()
        .client(client.clone())
        .build()
        .await
        .expect("manager");
    memcached_operator::add_controllers(&mut manager).expect("add the controllers");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async move {
        let _ = stopped.await;
    }));

    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), "cache");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "cache");
    let services: Api<Service> = Api::namespaced(client.clone(), "cache");

    // The schema rejects a size out of range.
    let too_big = Memcached::new("too-big", MemcachedSpec { size: 9 });
    let err = memcacheds
        .create(&PostParams::default(), &too_big)
        .await
        .expect_err("size 9 is out of range");
    assert!(err.to_string().contains("spec.size"), "{err}");

    let created = memcacheds
        .create(
            &PostParams::default(),
            &Memcached::new("sample", MemcachedSpec { size: 2 }),
        )
        .await
        .expect("create the Memcached");
    let uid = created.uid().expect("uid");

    let deployment = eventually("the Deployment", || async {
        deployments.get_opt("sample").await.ok().flatten()
    })
    .await;
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(2));
    let owner = &deployment.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Memcached", uid.as_str())
    );
    assert_eq!(owner.controller, Some(true));
    let service = eventually("the Service", || async {
        services.get_opt("sample").await.ok().flatten()
    })
    .await;
    assert_eq!(service.owner_references()[0].uid, uid);

    // No Deployment controller runs here: the Memcached waits, Progressing.
    let waiting = eventually("Progressing=True", || async {
        let m = memcacheds.get("sample").await.ok()?;
        let status = m.status.clone()?;
        conditions::is_true(&status.conditions, PROGRESSING).then_some(m)
    })
    .await;
    assert!(waiting.finalizers().iter().any(|f| f == FINALIZER));
    let status = waiting.status.expect("status");
    assert!(!conditions::is_true(&status.conditions, AVAILABLE));

    // Standing in for the Deployment controller: the replicas are up.
    mark_deployment_available(&client, "cache", "sample").await;
    eventually("Available=True", || async {
        let status = memcacheds.get("sample").await.ok()?.status?;
        let available = conditions::is_true(&status.conditions, AVAILABLE)
            && !conditions::is_true(&status.conditions, PROGRESSING);
        available.then_some(())
    })
    .await;

    // Scale: the Deployment follows, and the Memcached waits again.
    memcacheds
        .patch(
            "sample",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "size": 4 } })),
        )
        .await
        .expect("scale");
    eventually("the Deployment at 4 replicas", || async {
        let d = deployments.get("sample").await.ok()?;
        (d.spec?.replicas == Some(4)).then_some(())
    })
    .await;
    eventually("Available=False while scaling", || async {
        let m = memcacheds.get("sample").await.ok()?;
        let status = m.status?;
        let scaling = status.observed_generation == m.metadata.generation
            && !conditions::is_true(&status.conditions, AVAILABLE);
        scaling.then_some(())
    })
    .await;

    // Delete: the finalizer deletes the children, records an Event, lets go.
    delete_and_expect_finalized(&client, "cache", "sample", &uid).await;

    let _ = stop.send(());
    running
        .await
        .expect("manager task")
        .expect("the manager stopped cleanly");
}
