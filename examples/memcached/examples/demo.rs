//! `make demo`: the Memcached operator on a local single-node cluster, in a
//! few readable lines.
//!
//! Starts a whole cluster built from source (`opkit_envtest::Cluster`:
//! etcd, kube-apiserver, kube-controller-manager, kube-scheduler, and a node
//! with containerd, the kubelet and kube-proxy), installs the CRD generated
//! from the Rust types, runs the operator (the same `add_controllers` its
//! binary runs, with leader election), creates a Memcached, scales it,
//! deletes it, and shuts everything down. Every replica is a real memcached
//! (Debian's, packed into a local image) in a real pod; `Available` comes
//! from the real Deployment controller. Set `RUST_LOG=info` to see the
//! operator's own logs as well.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, ObjectMeta, Patch, PatchParams, PostParams,
};
use kube::{CustomResourceExt, ResourceExt};
use memcached_operator::api::memcached::{AVAILABLE, Memcached, MemcachedSpec};
use memcached_operator::controllers::memcached::IMAGE_ENV;
use opkit::conditions;
use opkit::manager::{LeaderElection, Manager};
use opkit_envtest::{Cluster, NODE_NAME};
use serde_json::json;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const NS: &str = "demo";
const NAME: &str = "sample";

/// How long any one step may take (pods start, images are local).
const STEP: Duration = Duration::from_secs(90);

/// Polls `check` until it returns `Some`, for at most [`STEP`].
async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + STEP;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after {STEP:?} waiting for {what}").into());
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

/// The Memcached's pods once `count` of them are running and ready:
/// `name (IP)` of each, made by the ReplicaSet the Deployment controller
/// created, placed by the scheduler, run by the kubelet.
async fn running_pods(pods: &Api<Pod>, count: usize) -> Result<Vec<String>> {
    let selector = format!("app.kubernetes.io/instance={NAME}");
    wait_for(&format!("{count} running memcached pods"), || async {
        let list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .ok()?;
        let ready: Vec<String> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| {
                let status = p.status.as_ref();
                status.and_then(|s| s.phase.as_deref()) == Some("Running")
                    && status
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .map(|p| {
                let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone());
                format!("{} ({})", p.name_any(), ip.unwrap_or_default())
            })
            .collect();
        (ready.len() == count).then_some(ready)
    })
    .await
}

/// Asks memcached for its version through the Service, from a client pod
/// (a static busybox), and returns the answer.
async fn ask_through_service(pods: &Api<Pod>, busybox: &str, service_ip: &str) -> Result<String> {
    let client: Pod = serde_json::from_value(json!({
        "metadata": { "name": "memcached-client" },
        "spec": {
            "restartPolicy": "Never",
            "securityContext": { "runAsNonRoot": true, "runAsUser": 1001 },
            "containers": [{
                "name": "client",
                "image": busybox,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", format!("printf 'version\\r\\nquit\\r\\n' | nc -w 5 {service_ip} 11211")]
            }]
        }
    }))?;
    pods.create(&PostParams::default(), &client).await?;
    wait_for("the client pod to finish", || async {
        let phase = pods.get("memcached-client").await.ok()?.status?.phase?;
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(())
    })
    .await?;
    let answer = pods
        .logs("memcached-client", &LogParams::default())
        .await?
        .trim()
        .to_owned();
    pods.delete("memcached-client", &DeleteParams::default())
        .await?;
    Ok(answer)
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

fn main() -> Result<()> {
    // The operator takes its memcached image from the environment; on this
    // cluster it is the locally built one (there is no registry). Set while
    // the process has a single thread, before the runtime starts.
    let assets = opkit_envtest::find_node_assets()?;
    let images = assets.images()?;
    let image_of = |name: &str| {
        images
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.reference.clone())
            .ok_or_else(|| format!("no {name} image in {}", assets.root.display()))
    };
    let memcached_image = image_of("memcached")?;
    let busybox_image = image_of("busybox")?;
    // SAFETY: no other thread exists yet, so nothing reads the environment
    // while it changes.
    unsafe { std::env::set_var(IMAGE_ENV, &memcached_image) };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(demo(&busybox_image))
}

async fn demo(busybox_image: &str) -> Result<()> {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .init();
    }
    println!("opkit demo: the Memcached operator (examples/memcached) on a local cluster\n");

    let begun = Instant::now();
    let cluster = Cluster::start().await?;
    let client = cluster.client()?;
    let version = client.apiserver_version().await?;
    let node = Api::<Node>::all(client.clone()).get(NODE_NAME).await?;
    let runtime = node
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.container_runtime_version.clone())
        .unwrap_or_default();
    println!(
        "✓ cluster {} up in {:.1}s: etcd, kube-apiserver, kube-controller-manager, kube-scheduler;",
        version.git_version,
        cluster.started_in().as_secs_f64()
    );
    println!("  node {NODE_NAME} Ready ({runtime}, kubelet, kube-proxy; images built locally)");
    cluster
        .control_plane()
        .install_crds(&memcached_operator::crds())
        .await?;
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
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

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
    let service_spec = service.spec.as_ref();
    let port = service_spec
        .and_then(|s| s.ports.as_ref())
        .and_then(|p| p.first())
        .map(|p| p.port)
        .unwrap_or_default();
    let service_ip = service_spec
        .and_then(|s| s.cluster_ip.clone())
        .unwrap_or_default();
    println!("✓ operator created Service {NS}/{NAME} at {service_ip}:{port}");
    let replica_set = wait_for("the ReplicaSet", || async {
        let list = replica_sets.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|rs| {
            rs.owner_references()
                .iter()
                .any(|r| r.kind == "Deployment" && r.name == NAME)
        })
    })
    .await?;
    println!(
        "✓ kube-controller-manager created ReplicaSet {NS}/{}",
        replica_set.name_any()
    );
    let running = running_pods(&pods, 3).await?;
    println!(
        "✓ scheduler placed and kubelet runs 3 memcached pods: {}",
        running.join(", ")
    );
    let available = wait_available(&memcacheds).await?;
    println!("✓ status: {}", condition(&available, AVAILABLE));
    let answer = ask_through_service(&pods, busybox_image, &service_ip).await?;
    println!("✓ a client pod asked memcached through the Service: {answer:?}");

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
    let running = running_pods(&pods, 5).await?;
    println!("✓ 5 memcached pods running: {}", running.join(", "));
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
    wait_for(
        "the garbage collector to remove the ReplicaSet and pods",
        || async {
            let sets = replica_sets.list(&ListParams::default()).await.ok()?;
            let left = pods.list(&ListParams::default()).await.ok()?;
            (sets.items.is_empty() && left.items.is_empty()).then_some(())
        },
    )
    .await?;
    println!(
        "✓ garbage collector removed the ReplicaSet and its pods; the kubelet stopped their containers"
    );
    println!("✓ Memcached {NS}/{NAME} is gone");

    let _ = stop.send(());
    operator.await??;
    println!("\n✓ operator stopped gracefully (Lease released)");
    cluster.stop();
    let left = cluster.footprint().remaining();
    if left.is_empty() {
        println!(
            "✓ cluster stopped; no process, mount, namespace, link, cgroup or directory left ({:.1}s in all)",
            begun.elapsed().as_secs_f64()
        );
        Ok(())
    } else {
        Err(format!("the cluster left behind: {left:?}").into())
    }
}
