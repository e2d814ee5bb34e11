//! Starts a local control plane and keeps it running until Ctrl-C.
//!
//! `make dev-cluster` runs this: it prints the kubeconfig path and a kubectl
//! command to try, then waits.

use opkit_envtest::ControlPlane;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let begun = std::time::Instant::now();
    let plane = ControlPlane::start().await?;
    let version = plane.client()?.apiserver_version().await?;
    println!(
        "control plane {} ready in {:.1}s at {}",
        version.git_version,
        begun.elapsed().as_secs_f64(),
        plane.server_url()
    );
    println!("kubeconfig: {}", plane.kubeconfig_path().display());
    println!(
        "try:        kubectl --kubeconfig {} get namespaces",
        plane.kubeconfig_path().display()
    );
    println!("press Ctrl-C to stop");
    tokio::signal::ctrl_c().await?;
    plane.stop();
    println!("stopped");
    Ok(())
}
