//! Starts a local single-node cluster and keeps it running until Ctrl-C.
//!
//! `make cluster` runs this: control plane, kube-controller-manager,
//! kube-scheduler and a node (containerd, kubelet, kube-proxy) that runs real
//! containers. It prints the start time, the kubeconfig and the images pods
//! can use, then waits.

use opkit_envtest::Cluster;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cluster = Cluster::start().await?;
    let version = cluster.client()?.apiserver_version().await?;
    println!(
        "cluster {} ready in {:.1}s: node {} at {}, apiserver {}",
        version.git_version,
        cluster.started_in().as_secs_f64(),
        opkit_envtest::NODE_NAME,
        cluster
            .node_address()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        cluster.control_plane().server_url()
    );
    for name in ["memcached", "busybox", "pause"] {
        if let Some(image) = cluster.image(name) {
            println!("image:      {image} (imagePullPolicy: IfNotPresent)");
        }
    }
    let kubectl = opkit_envtest::find_node_assets()?.bin("kubectl");
    println!("logs:       {}", cluster.dir_path()?.display());
    println!("kubeconfig: {}", cluster.kubeconfig_path().display());
    println!(
        "try:        {} --kubeconfig {} get nodes,pods -A",
        kubectl.display(),
        cluster.kubeconfig_path().display()
    );
    println!("press Ctrl-C to stop");
    tokio::signal::ctrl_c().await?;
    cluster.stop();
    let left = cluster.footprint().remaining();
    if left.is_empty() {
        println!("stopped; nothing left behind");
    } else {
        println!("stopped; still present: {left:?}");
    }
    Ok(())
}
