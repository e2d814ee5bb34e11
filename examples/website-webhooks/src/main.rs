//! Runs the Website operator (controller and webhooks) against the
//! cluster in the kubeconfig, or prints its manifests.
//!
//! ```text
//! website-webhooks manifests                       # CRD + webhook configurations, as YAML
//! website-webhooks [--webhook-cert-dir DIR] [--webhook-bind-address ADDR] [--manage-webhook-certificate]
//! ```
//!
//! With `--manage-webhook-certificate` the manager issues the serving
//! certificate itself (kept in a Secret, its CA injected into the webhook
//! configurations and the CRD); otherwise it reads `tls.crt` and `tls.key`
//! from the cert dir (a mounted cert-manager Secret).
//!
//! ```text
//! ```

use std::process::ExitCode;

use opkit::controller::Controller;
use opkit::manager::Manager;
use opkit::webhook::{DEFAULT_CERT_DIR, WebhookServer};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("manifests") {
        return match website_webhooks::manifests() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    // ANCHOR: server
    let mut server = WebhookServer::new(website_webhooks::webhooks())
        .cert_dir(flag("--webhook-cert-dir").unwrap_or_else(|| DEFAULT_CERT_DIR.to_owned()))
        .bind_address(flag("--webhook-bind-address").unwrap_or_else(|| ":9443".to_owned()));
    if args.iter().any(|a| a == "--manage-webhook-certificate") {
        server = server.managed_certificate(website_webhooks::managed_certificate());
    }
    // ANCHOR_END: server
    match run(server).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "website-webhooks failed");
            ExitCode::FAILURE
        }
    }
}

// ANCHOR: run
async fn run(server: WebhookServer) -> Result<(), Box<dyn std::error::Error>> {
    let mut manager = Manager::builder()
        .webhook_server(server)
        .health_probe_bind_address(":8081")
        .build()
        .await?;
    manager.add(Controller::new(website_webhooks::WebsiteReconciler))?;
    manager.run().await?;
    Ok(())
}
// ANCHOR_END: run
