//! The backup-operator binary: runs the manager with this operator's controllers,
//! or writes its manifests (`backup-operator manifests`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use opkit::manager::{LeaderElection, Manager, SecureMetrics};

mod telemetry;

/// A Kubernetes operator for Backup (tutorial.opkit.dev).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Kubeconfig to connect with (default: KUBECONFIG, ~/.kube/config, then in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Watch and reconcile only this namespace (default: all namespaces).
    #[arg(long)]
    namespace: Option<String>,
    /// Elect a leader among replicas; only the leader reconciles.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the leader-election Lease (default: the pod's, or the kubeconfig context's).
    #[arg(long)]
    leader_election_namespace: Option<String>,
    /// Where to serve /metrics (":8443" over HTTPS, ":8080" is usual with --metrics-secure=false; "0" turns it off).
    #[arg(long, default_value = ":8443")]
    metrics_bind_address: String,
    /// Serve /metrics over HTTPS to scrapers whose bearer token may `get /metrics` (TokenReview +
    /// SubjectAccessReview); false serves plain HTTP to anyone who can connect.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    metrics_secure: bool,
    /// Serve the metrics certificate `tls.crt` / `tls.key` from this directory (reloaded when
    /// they change) instead of a self-signed one.
    #[arg(long)]
    metrics_cert_dir: Option<PathBuf>,
    /// Where to serve /healthz and /readyz ("0" turns it off).
    #[arg(long, default_value = ":8081")]
    health_probe_bind_address: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Log level or filter (`info`, `debug`, `backup_operator=debug,opkit=info`); RUST_LOG wins if set.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Issue the webhook serving certificate in the cluster (a Secret) and inject its CA,
    /// instead of reading a mounted one (cert-manager); see src/webhooks/mod.rs.
    #[arg(long, default_value_t = false)]
    manage_webhook_certificate: bool,
    /// Serve the webhooks: `true` as in the cluster (behind the Service), `local` for an
    /// apiserver on this machine, registered by URL while this process runs (what `make run`
    /// sets), `false` not here.
    #[arg(long, env = "ENABLE_WEBHOOKS", value_enum, default_value_t = WebhookMode::True, num_args = 0..=1, default_missing_value = "true")]
    enable_webhooks: WebhookMode,
    /// Where to serve the webhooks (default: 0.0.0.0:9443; with `local`, 127.0.0.1:9443).
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS")]
    webhook_bind_address: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write the CRDs and the RBAC rules (from the code) to DIR: what `cargo opkit manifests` runs.
    Manifests {
        /// The directory to write `01-crds.yaml` and `03-rbac.yaml` to.
        #[arg(long, default_value = "deploy")]
        dir: PathBuf,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the webhooks are served (`--enable-webhooks`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum WebhookMode {
    /// Here, as in the cluster: behind the Service, with the certificate in the cert dir.
    True,
    /// Here, for an apiserver on this machine, registered by URL while this process runs.
    Local,
    /// Not here: the cluster calls a deployed operator.
    False,
}
#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Manifests { dir }) = &args.command {
        return match backup_operator::write_manifests(dir) {
            Ok(written) => {
                for path in written {
                    println!("wrote {}", path.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    telemetry::init(matches!(args.log_format, LogFormat::Json), &args.log_level);
    let result = {
        let span = tracing::info_span!("operator", name = backup_operator::NAME);
        tracing::Instrument::instrument(run(args), span).await
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the operator failed");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = Manager::builder()
        .metrics_bind_address(args.metrics_bind_address)
        .health_probe_bind_address(args.health_probe_bind_address);
    if args.metrics_secure {
        let mut secure = SecureMetrics::new();
        if let Some(dir) = args.metrics_cert_dir {
            secure = secure.cert_dir(dir);
        }
        builder = builder.metrics_secure(secure);
    }
    if let Some(path) = args.kubeconfig {
        builder = builder.kubeconfig(path);
    }
    if let Some(namespace) = args.namespace {
        builder = builder.namespace(namespace);
    }
    if args.leader_elect {
        let mut election =
            LeaderElection::new(backup_operator::LEADER_ELECTION_ID).release_on_cancel(true);
        if let Some(namespace) = args.leader_election_namespace {
            election = election.namespace(namespace);
        }
        builder = builder.leader_election(election);
    }
    let builder = match args.enable_webhooks {
        WebhookMode::True => {
            let mut server = backup_operator::webhooks::server(args.manage_webhook_certificate);
            if let Some(address) = &args.webhook_bind_address {
                server = server.bind_address(address.clone());
            }
            builder.webhook_server(server)
        }
        WebhookMode::Local => builder.webhook_server(backup_operator::webhooks::local_server(
            args.webhook_bind_address.as_deref(),
        )),
        WebhookMode::False => {
            tracing::warn!(
                "webhooks not served (ENABLE_WEBHOOKS=false): the cluster calls them through the \
                 operator's Service (`make deploy`)"
            );
            builder
        }
    };
    let mut manager = builder.build().await?;
    backup_operator::add_controllers(&mut manager)?;
    tracing::info!(leader_elect = args.leader_elect, "starting the manager");
    manager.run().await?;
    tracing::info!("the manager stopped");
    Ok(())
}
