//! `make demo`: opkit's local control plane, end to end, in a few lines.
//!
//! Starts a real etcd + kube-apiserver, installs a CRD generated from a Rust
//! type, creates a custom resource, shows the schema rejecting a bad one,
//! and shuts everything down.

use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use opkit::envtest::ControlPlane;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The spec of a `Memcached`, as in operator-sdk's tutorial.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "cache.example.com",
    version = "v1alpha1",
    kind = "Memcached",
    namespaced
)]
pub struct MemcachedSpec {
    /// How many memcached pods to run.
    #[schemars(range(min = 1, max = 5))]
    pub size: i32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let begun = Instant::now();
    let plane = ControlPlane::start().await?;
    let client = plane.client()?;
    let version = client.apiserver_version().await?;
    println!(
        "✓ kube-apiserver {} + etcd on {} (ready in {:.1}s)",
        version.git_version,
        plane.server_url(),
        begun.elapsed().as_secs_f64()
    );

    plane.install_crds(&[Memcached::crd()]).await?;
    println!("✓ CRD {} installed and Established", Memcached::crd_name());

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("demo".to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;

    let memcacheds: Api<Memcached> = Api::namespaced(client, "demo");
    let sample = Memcached::new("sample", MemcachedSpec { size: 3 });
    let created = memcacheds.create(&PostParams::default(), &sample).await?;
    println!(
        "✓ created Memcached demo/{} with size {} (resourceVersion {})",
        created.name_any(),
        created.spec.size,
        created.resource_version().unwrap_or_default()
    );

    let too_big = Memcached::new("too-big", MemcachedSpec { size: 50 });
    match memcacheds.create(&PostParams::default(), &too_big).await {
        Err(kube::Error::Api(status)) => {
            println!("✓ schema rejected size 50: {}", status.message)
        }
        Ok(_) => println!("✗ the schema accepted size 50"),
        Err(e) => return Err(e.into()),
    }

    println!(
        "  kubeconfig while it ran: {}",
        plane.kubeconfig_path().display()
    );
    plane.stop();
    println!("✓ control plane stopped; nothing left running");
    println!("  (the Memcached operator joins this demo when the controller runtime lands)");
    Ok(())
}
