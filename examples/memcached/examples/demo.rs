//! `make demo`: the Memcached operator against a local control plane, in a
//! few readable lines.
//!
//! Starts a real etcd + kube-apiserver (opkit::envtest), installs the CRD
//! generated from the Rust types, runs the operator (the same
//! `add_controllers` its binary runs, with leader election), creates a
//! Memcached, scales it, deletes it, and shuts everything down. Set
//! `RUST_LOG=info` to see the operator's own logs as well.
//!
//! No kube-controller-manager runs here, so nothing turns a Deployment into
//! pods or reports its replicas. Where the demo needs replicas reported it
//! says so and writes the Deployment's status itself, as the Deployment
//! controller would once the pods were up.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use memcached_operator::api::memcached::{AVAILABLE, Memcached, MemcachedSpec, PROGRESSING};
use opkit::conditions;
use opkit::envtest::ControlPlane;
use opkit::manager::{LeaderElection, Manager};
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const NS: &str = "demo";
const NAME: &str = "sample";

/// Polls `check` until it returns `Some`, for at most 30 s.
async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after 30s waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `Type=Status — message` of a condition.
fn condition(m: &Memcached, type_: &str) -> String {
    m.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_))
        .map_or_else(
            || format!("{type_} not set"),
            |c| format!("{type_}={} — {}", c.status, c.message),
        )
}

/// Writes the Deployment's status as kube-controller-manager's Deployment
/// controller would once `replicas` pods were available.
async fn report_replicas(deployments: &Api<Deployment>) -> Result<i32> {
    let deployment = deployments.get(NAME).await?;
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
    deployments
        .patch_status(NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(replicas)
}

async fn wait_available(memcacheds: &Api<Memcached>) -> Result<Memcached> {
    wait_for("Available=True", || async {
        let m = memcacheds.get(NAME).await.ok()?;
        let status = m.status.as_ref()?;
        (conditions::is_true(&status.conditions, AVAILABLE)
            && status.observed_generation == m.metadata.generation)
            .then_some(m)
    })
    .await
}

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    println!("opkit demo: the Memcached operator (examples/memcached) on a local control plane\n");

    let begun = Instant::now();
    let plane = ControlPlane::start().await?;
    let client = plane.client()?;
    let version = client.apiserver_version().await?;
    println!(
        "✓ kube-apiserver {} + etcd running on {} ({:.1}s)",
        version.git_version,
        plane.server_url(),
        begun.elapsed().as_secs_f64()
    );
    plane.install_crds(&memcached_operator::crds()).await?;
    println!(
        "✓ CRD {} installed (generated from the Rust types)",
        Memcached::crd_name()
    );
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;

    let mut manager = Manager::builder()
        .client(client.clone())
        .leader_election(
            LeaderElection::new(memcached_operator::LEADER_ELECTION_ID)
                .namespace(NS)
                .release_on_cancel(true),
        )
        .health_probe_bind_address("127.0.0.1:0")
        .build()
        .await?;
    memcached_operator::add_controllers(&mut manager)?;
    let mut leading = manager.leading();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(manager.run_until(async move {
        let _ = stopped.await;
    }));
    leading.wait_for(|leads| *leads).await?;
    println!(
        "✓ operator running: controller memcached, leader of Lease {NS}/{}",
        memcached_operator::LEADER_ELECTION_ID
    );

    let memcacheds: Api<Memcached> = Api::namespaced(client.clone(), NS);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let services: Api<Service> = Api::namespaced(client.clone(), NS);

    println!("\n→ create Memcached {NS}/{NAME} with spec.size 9");
    match memcacheds
        .create(
            &PostParams::default(),
            &Memcached::new(NAME, MemcachedSpec { size: 9 }),
        )
        .await
    {
        Err(kube::Error::Api(status)) => {
            println!("✓ rejected by the CRD's schema: {}", status.message)
        }
        Err(e) => return Err(e.into()),
        Ok(_) => return Err("the schema accepted size 9".into()),
    }

    println!("\n→ create Memcached {NS}/{NAME} with spec.size 3");
    memcacheds
        .create(
            &PostParams::default(),
            &Memcached::new(NAME, MemcachedSpec { size: 3 }),
        )
        .await?;
    let deployment = wait_for("the Deployment", || async {
        deployments.get_opt(NAME).await.ok().flatten()
    })
    .await?;
    let spec = deployment.spec.as_ref();
    let image = spec
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    let owner = deployment
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| format!("{}/{}", r.kind, r.name))
        .unwrap_or_default();
    println!(
        "✓ operator created Deployment {NS}/{NAME}: {} replicas of {image}, controlled by {owner}",
        spec.and_then(|s| s.replicas).unwrap_or_default()
    );
    let service = wait_for("the Service", || async {
        services.get_opt(NAME).await.ok().flatten()
    })
    .await?;
    let port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map(|p| p.port)
        .unwrap_or_default();
    println!("✓ operator created Service {NS}/{NAME} on port {port}");
    let waiting = wait_for("Progressing=True", || async {
        let m = memcacheds.get(NAME).await.ok()?;
        conditions::is_true(&m.status.as_ref()?.conditions, PROGRESSING).then_some(m)
    })
    .await?;
    println!("  status: {}", condition(&waiting, PROGRESSING));

    let replicas = report_replicas(&deployments).await?;
    println!(
        "  [no kube-controller-manager runs here; standing in for its Deployment controller: {replicas}/{replicas} replicas available]"
    );
    let available = wait_available(&memcacheds).await?;
    println!("✓ status: {}", condition(&available, AVAILABLE));

    println!("\n→ scale: spec.size 3 → 5");
    memcacheds
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "size": 5 } })),
        )
        .await?;
    let scaled = wait_for("the Deployment at 5 replicas", || async {
        let d = deployments.get(NAME).await.ok()?;
        (d.spec.as_ref()?.replicas == Some(5)).then_some(d)
    })
    .await?;
    println!(
        "✓ operator updated Deployment {NS}/{NAME} to {} replicas (generation {})",
        scaled
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or_default(),
        scaled.metadata.generation.unwrap_or_default()
    );
    let waiting = wait_for("Available=False while scaling", || async {
        let m = memcacheds.get(NAME).await.ok()?;
        let status = m.status.as_ref()?;
        (status.observed_generation == m.metadata.generation
            && !conditions::is_true(&status.conditions, AVAILABLE))
        .then_some(m)
    })
    .await?;
    println!("  status: {}", condition(&waiting, PROGRESSING));
    let replicas = report_replicas(&deployments).await?;
    println!(
        "  [standing in for the Deployment controller: {replicas}/{replicas} replicas available]"
    );
    let available = wait_available(&memcacheds).await?;
    println!("✓ status: {}", condition(&available, AVAILABLE));

    println!("\n→ delete Memcached {NS}/{NAME}");
    let uid = available.uid().unwrap_or_default();
    memcacheds.delete(NAME, &DeleteParams::default()).await?;
    wait_for("the Memcached to be gone", || async {
        memcacheds.get_opt(NAME).await.ok()?.is_none().then_some(())
    })
    .await?;
    let children_gone =
        deployments.get_opt(NAME).await?.is_none() && services.get_opt(NAME).await?.is_none();
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let event = wait_for("the Finalized Event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("Finalized")
                && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str())
        })
    })
    .await?;
    println!(
        "✓ finalizer ran: Deployment and Service {}; Event {} {:?}",
        if children_gone {
            "deleted"
        } else {
            "NOT deleted"
        },
        event.reason.unwrap_or_default(),
        event.note.unwrap_or_default()
    );
    println!("✓ Memcached {NS}/{NAME} is gone");

    let _ = stop.send(());
    operator.await??;
    println!("\n✓ operator stopped gracefully (Lease released)");
    plane.stop();
    println!(
        "✓ control plane stopped; nothing left running ({:.1}s in all)",
        begun.elapsed().as_secs_f64()
    );
    Ok(())
}
