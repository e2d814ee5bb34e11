//! Runs the pod-readiness controller against the cluster in the kubeconfig.

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
    manager.add(pod_readiness::controller())?;
    manager.run().await
}
