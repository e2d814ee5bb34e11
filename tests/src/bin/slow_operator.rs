//! An operator for the SIGTERM tests of `tests/tests/it/manager.rs`: a manager
//! with leader election (released on shutdown) and one ConfigMap controller
//! whose reconciles are slow. It reports on stdout, one line each:
//! `start <name>`, `finish <name>`, and `stopped` when `run` returned Ok.
//!
//! Usage: `slow_operator <kubeconfig> <namespace> <reconcile-ms> <workers>`

use std::io::Write;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use opkit::controller::Controller;
use opkit::manager::{LeaderElection, Manager};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

struct Slow(Duration);

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl Reconcile for Slow {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        say(&format!("start {}", req.name));
        tokio::time::sleep(self.0).await;
        say(&format!("finish {}", req.name));
        Ok(Action::done())
    }
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let [_, kubeconfig, namespace, millis, workers] = args.as_slice() else {
        eprintln!("usage: slow_operator <kubeconfig> <namespace> <reconcile-ms> <workers>");
        std::process::exit(64);
    };
    let millis: u64 = millis.parse().expect("reconcile-ms is a number");
    let workers: usize = workers.parse().expect("workers is a number");

    let manager = Manager::builder()
        .kubeconfig(kubeconfig)
        .namespace(namespace.clone())
        .leader_election(
            LeaderElection::new("slow-operator-lock")
                .namespace(namespace.clone())
                .identity("slow-operator")
                .lease_duration(Duration::from_secs(2))
                .renew_deadline(Duration::from_millis(1_500))
                .retry_period(Duration::from_millis(250))
                .release_on_cancel(true),
        )
        .graceful_shutdown_timeout(Duration::from_secs(120))
        .build()
        .await;
    let mut manager = match manager {
        Ok(manager) => manager,
        Err(error) => {
            eprintln!("slow_operator: {error}");
            std::process::exit(2);
        }
    };
    let controller =
        Controller::new(Slow(Duration::from_millis(millis))).max_concurrent_reconciles(workers);
    if let Err(error) = manager.add(controller) {
        eprintln!("slow_operator: {error}");
        std::process::exit(2);
    }
    match manager.run().await {
        Ok(()) => say("stopped"),
        Err(error) => {
            eprintln!("slow_operator: {error}");
            std::process::exit(2);
        }
    }
}
