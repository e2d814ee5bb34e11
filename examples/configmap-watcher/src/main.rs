//! Runs the Website controller against the cluster in the kubeconfig.

use opkit::ControllerWiring;
use opkit::manager::{Manager, ManagerError};

#[tokio::main]
async fn main() -> Result<(), ManagerError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let mut manager = Manager::builder().build().await?;
    configmap_watcher::WebsiteReconciler.add_to(&mut manager)?;
    manager.run().await
}
