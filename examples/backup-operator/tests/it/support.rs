//! What every test here starts with: the operator's logs in the test's
//! output, and a control plane with a namespace.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use opkit_envtest::ControlPlane;
use tracing_subscriber::EnvFilter;

/// Sends the operator's logs to the test's output (shown when a test
/// fails, or always with `-- --nocapture`). `RUST_LOG` picks the level
/// (default: info).
pub fn show_logs() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// A started control plane, its admin client, and the namespace `namespace`.
pub async fn control_plane(namespace: &str) -> (ControlPlane, kube::Client) {
    show_logs();
    let plane = ControlPlane::start()
        .await
        .expect("start etcd and kube-apiserver");
    let client = plane.client().expect("admin client");
    let mut ns = Namespace::default();
    ns.metadata.name = Some(namespace.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create the namespace");
    (plane, client)
}
