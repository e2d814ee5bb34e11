//! The Memcached controller in-process, on a whole local cluster
//! (`opkit_envtest::Cluster`): what it creates, the conditions it reports
//! from the real Deployment controller's status while real memcached pods
//! start, a scale, the schema's validation, and the finalizer.

use super::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use memcached_operator::api::memcached::{AVAILABLE, Memcached, MemcachedSpec, PROGRESSING};
use memcached_operator::controllers::memcached::{FINALIZER, IMAGE_ENV};
use opkit::conditions;
use opkit::manager::Manager;
use opkit_envtest::Cluster;
use opkit_envtest::eventually;
use serde_json::json;
use support::{WAIT, create_namespace, delete_and_expect_finalized, running_pods};

/// Whether the Memcached reports `Available` with `available/size` replicas.
fn available_with(m: &Memcached, replicas: &str) -> bool {
    m.status.as_ref().is_some_and(|status| {
        status.observed_generation == m.metadata.generation
            && conditions::find(&status.conditions, AVAILABLE)
                .is_some_and(|c| c.status == "True" && c.message.contains(replicas))
            && !conditions::is_true(&status.conditions, PROGRESSING)
    })
}

#[tokio::test]
async fn memcached_lifecycle() {
    let cluster = Cluster::start().await.expect("start the local cluster");
    let image = cluster.image("memcached").expect("the memcached image");
    // SAFETY: this binary's only test sets the variable before the operator
    // (the only reader) starts; no other thread reads the environment.
    unsafe { std::env::set_var(IMAGE_ENV, image) };
    let plane = cluster.control_plane();
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

    let deployment = eventually("the Deployment", WAIT, || async {
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
    let service = eventually("the Service", WAIT, || async {
        services.get_opt("sample").await.ok().flatten()
    })
    .await;
    assert_eq!(service.owner_references()[0].uid, uid);

    // The Deployment controller, scheduler and kubelet start 2 real
    // memcached pods; `Available` follows the Deployment's real status.
    let with_finalizer = eventually("the finalizer", WAIT, || async {
        let m = memcacheds.get("sample").await.ok()?;
        m.finalizers().iter().any(|f| f == FINALIZER).then_some(m)
    })
    .await;
    assert_eq!(with_finalizer.spec.size, 2, "the Memcached keeps its spec");
    running_pods(&client, "cache", "sample", 2).await;
    eventually("Available=True with 2/2 replicas", WAIT, || async {
        let m = memcacheds.get("sample").await.ok()?;
        available_with(&m, "2/2").then_some(())
    })
    .await;

    // Scale: the Deployment follows, 2 more pods start, Available again.
    memcacheds
        .patch(
            "sample",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "size": 4 } })),
        )
        .await
        .expect("scale");
    eventually("the Deployment at 4 replicas", WAIT, || async {
        let d = deployments.get("sample").await.ok()?;
        (d.spec?.replicas == Some(4)).then_some(())
    })
    .await;
    running_pods(&client, "cache", "sample", 4).await;
    eventually("Available=True with 4/4 replicas", WAIT, || async {
        let m = memcacheds.get("sample").await.ok()?;
        available_with(&m, "4/4").then_some(())
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
