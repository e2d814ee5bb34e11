//! Starts a local single-node cluster and keeps it running until Ctrl-C.
//!
//! `make cluster` runs this: control plane, kube-controller-manager,
//! kube-scheduler, a node (containerd, kubelet, kube-proxy) that runs real
//! containers, and an OCI registry the node pulls from (`--no-registry`,
//! `make cluster REGISTRY=0`, leaves it out). It prints one line per start
//! phase with the time since start, then the kubeconfig, the registry, the
//! images pods can use, and waits.

use std::fmt::Write as _;
use std::time::Instant;

use opkit_envtest::Cluster;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// The image name the printed `make image` line uses (any name works: `make
/// deploy` takes the same `IMG`).
const SAMPLE_IMAGE: &str = "my-operator:dev";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let with_registry = !std::env::args().any(|a| a == "--no-registry");
    tracing_subscriber::registry()
        .with(Phases {
            begun: Instant::now(),
        })
        .init();
    let builder = Cluster::builder();
    let builder = if with_registry {
        builder.with_registry()
    } else {
        builder
    };
    let cluster = builder.start().await?;
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
    println!(
        "network:    Services {}, pods {} (routed into the node; nothing leaves the machine)",
        cluster.service_cidr(),
        cluster.pod_cidr()
    );
    if let Some(dns) = cluster.dns_service_ip() {
        println!("dns:        {dns} (CoreDNS; <service>.<namespace>.svc.cluster.local from pods)");
    }
    let kubectl = opkit_envtest::find_node_assets()?.bin("kubectl");
    println!("logs:       {}", cluster.dir_path()?.display());
    if let Some(registry) = cluster.registry() {
        let img = registry.reference(
            SAMPLE_IMAGE.split(':').next().unwrap_or(SAMPLE_IMAGE),
            SAMPLE_IMAGE.rsplit(':').next().unwrap_or("dev"),
        );
        println!(
            "registry:   {} (plain HTTP, until Ctrl-C; the node pulls from it)",
            registry.host()
        );
        println!("push:       make image IMG={img} PUSH=1 INSECURE=1");
        println!("deploy:     make deploy IMG={img}");
    }
    println!("kubeconfig: {}", cluster.kubeconfig_path().display());
    println!(
        "try:        export KUBECONFIG={}; {} get nodes,pods -A",
        cluster.kubeconfig_path().display(),
        kubectl.display(),
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

/// Prints one line per start phase from opkit-envtest's events: each process
/// started and each part ready, with the seconds since `begun`; warnings and
/// errors too.
struct Phases {
    begun: Instant,
}

impl<S: tracing::Subscriber> Layer<S> for Phases {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if !meta.target().starts_with("opkit_envtest") {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let level = *meta.level();
        let phase = level <= tracing::Level::INFO || line.message == "started";
        if !phase || line.message == "stopped" {
            return;
        }
        let prefix = if level <= tracing::Level::WARN {
            format!("{level}: ")
        } else {
            String::new()
        };
        let what = match line.process.as_deref() {
            Some("unshare") => format!("{} the node's namespaces (unshare)", line.message),
            Some(process) => format!("{} {process}", line.message),
            None => line.message,
        };
        println!(
            "{:>6.1}s  {prefix}{what}{}",
            self.begun.elapsed().as_secs_f64(),
            line.fields
        );
    }
}

/// An event's message and its fields worth a terminal line (`dir`, `log`,
/// `pid` and `elapsed_ms` are left out: the logs line and the time column say
/// them).
#[derive(Default)]
struct Line {
    message: String,
    process: Option<String>,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "process" => self.process = Some(format!("{value:?}").trim_matches('"').to_owned()),
            "dir" | "log" | "pid" | "elapsed_ms" => {}
            name => {
                let _ = write!(self.fields, " {name}={value:?}");
            }
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "process" => self.process = Some(value.to_owned()),
            _ => self.record_debug(field, &value),
        }
    }
}
