//! [`ManagerBuilder`]: a manager's options.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::watch;

use super::assembled::Manager;
use super::error::ManagerError;
use super::health::{self, Checks};
#[cfg(feature = "webhook")]
use super::runnable::BoxError;
#[cfg(feature = "secure-metrics")]
use super::secure_metrics::SecureMetrics;
use super::secure_metrics::Secured;
use super::server::{self, Bound, Serves};
use crate::cache::SharedCache;
use crate::config::{self, ConfigSource};
use crate::leader::{LeaderElection, LeaderElector};
use crate::metrics::Metrics;
#[cfg(feature = "shard")]
use crate::shard::Sharding;
#[cfg(feature = "webhook")]
use crate::webhook::WebhookServer;

/// The default graceful shutdown timeout: how long running reconciles and
/// runnables get to finish after SIGTERM.
pub const DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time runnables wait for the shared cache to sync.
pub const DEFAULT_CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(120);

/// Where the manager's client comes from.
#[derive(Clone)]
enum Connection {
    Source(ConfigSource),
    Config(Box<kube::Config>),
    Client(kube::Client),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Source(source) => f.debug_tuple("Source").field(source).finish(),
            Self::Config(config) => f
                .debug_tuple("Config")
                .field(&config.cluster_url.to_string())
                .finish(),
            Self::Client(_) => f.write_str("Client"),
        }
    }
}

// The manager's constructor lives beside the builder it starts, so that the
// manager's file does not name its builder.
impl Manager {
    /// Options, starting from the defaults (see [`ManagerBuilder`]).
    pub fn builder() -> ManagerBuilder {
        ManagerBuilder::default()
    }
}

/// Options of a [`Manager`]; start from [`Manager::builder`].
///
/// | option | default |
/// |---|---|
/// | connection | `KUBECONFIG`, `~/.kube/config`, then in-cluster ([`ConfigSource::Infer`]) |
/// | [`namespace`](Self::namespace) | all namespaces |
/// | [`leader_election`](Self::leader_election) | off: this replica always reconciles |
/// | [`sharding`](Self::sharding) | off: this replica reconciles every object |
/// | [`metrics_bind_address`](Self::metrics_bind_address) | off |
/// | [`metrics_secure`](Self::metrics_secure) | off: plain HTTP, no authentication (controller-runtime's default) |
/// | [`health_probe_bind_address`](Self::health_probe_bind_address) | off |
/// | [`graceful_shutdown_timeout`](Self::graceful_shutdown_timeout) | 30 s |
/// | [`cache_sync_timeout`](Self::cache_sync_timeout) | 120 s |
/// | [`webhook_server`](Self::webhook_server) | none |
#[derive(Debug, Clone)]
pub struct ManagerBuilder {
    connection: Connection,
    namespace: Option<String>,
    leader_election: Option<LeaderElection>,
    #[cfg(feature = "shard")]
    sharding: Option<Sharding>,
    metrics_address: Option<String>,
    #[cfg(feature = "secure-metrics")]
    metrics_secure: Option<SecureMetrics>,
    probe_address: Option<String>,
    graceful_shutdown_timeout: Duration,
    cache_sync_timeout: Duration,
    metrics: Option<Metrics>,
    #[cfg(feature = "webhook")]
    webhook_server: Option<WebhookServer>,
    read_your_writes: bool,
}

impl Default for ManagerBuilder {
    fn default() -> Self {
        Self {
            connection: Connection::Source(ConfigSource::Infer),
            namespace: None,
            leader_election: None,
            #[cfg(feature = "shard")]
            sharding: None,
            metrics_address: None,
            #[cfg(feature = "secure-metrics")]
            metrics_secure: None,
            probe_address: None,
            graceful_shutdown_timeout: DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
            cache_sync_timeout: DEFAULT_CACHE_SYNC_TIMEOUT,
            metrics: None,
            #[cfg(feature = "webhook")]
            webhook_server: None,
            read_your_writes: true,
        }
    }
}

impl ManagerBuilder {
    /// Connect as `source` says (the default is [`ConfigSource::Infer`]:
    /// `KUBECONFIG`, `~/.kube/config`, then the in-cluster service account).
    pub(crate) fn config_source(mut self, source: ConfigSource) -> Self {
        self.connection = Connection::Source(source);
        self
    }

    /// Connect with the kubeconfig file at `path`, in its current context.
    pub fn kubeconfig(self, path: impl Into<PathBuf>) -> Self {
        self.config_source(ConfigSource::File {
            path: path.into(),
            context: None,
        })
    }

    /// Connect with this configuration.
    pub fn config(mut self, config: kube::Config) -> Self {
        self.connection = Connection::Config(Box::new(config));
        self
    }

    /// Use this client.
    pub fn client(mut self, client: kube::Client) -> Self {
        self.connection = Connection::Client(client);
        self
    }

    /// Whether the shared cache records writes through the controllers'
    /// clients so reconcile reads see them (default: on; see
    /// [`read_your_writes`](crate::cache::read_your_writes)). Off for every
    /// controller of this manager; one controller opts out with
    /// [`Controller::read_your_writes`](crate::controller::Controller::read_your_writes).
    pub fn read_your_writes(mut self, enabled: bool) -> Self {
        self.read_your_writes = enabled;
        self
    }

    /// Watch, read and reconcile only in `namespace`: the shared cache is
    /// scoped to it (cluster-scoped kinds are still watched cluster-wide),
    /// so every controller's watches and reads are too.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// Split the objects across the replicas (see [`crate::shard`]): each
    /// replica joins the ring at [`build`](Self::build), and every
    /// controller [`add`](Manager::add)ed reconciles only this replica's
    /// share; with feature `multicluster`, the clusters of the manager's
    /// cluster provider are divided too, each engaged on one replica
    /// (`multicluster::Fleet::shard_clusters`).
    /// Adds the `/readyz` check `shard` (this replica is a member)
    /// and the `opkit_shard_*` metrics. Excludes leader election. The ring's
    /// Leases default to the manager's [`namespace`](Self::namespace), else
    /// the connection's.
    pub fn sharding(mut self, sharding: Sharding) -> Self {
        self.sharding = Some(sharding);
        self
    }

    /// Elect a leader among the replicas; only the leader reconciles, while
    /// standbys keep their caches warm.
    pub fn leader_election(mut self, election: LeaderElection) -> Self {
        self.leader_election = Some(election);
        self
    }

    /// Serve `/metrics` on `address` (`"0.0.0.0:8080"`, `":8080"`,
    /// `"127.0.0.1:0"` for any free port; `"0"` turns it off). The same
    /// address (and a fixed port) as the health probes serves both from one
    /// server.
    pub fn metrics_bind_address(mut self, address: impl Into<String>) -> Self {
        self.metrics_address = Some(address.into());
        self
    }

    #[cfg(feature = "secure-metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "secure-metrics")))]
    /// Serve `/metrics` over HTTPS, to scrapers whose bearer token is
    /// allowed `get` on `/metrics` only (see [`SecureMetrics`]: TLS,
    /// TokenReview, SubjectAccessReview, a short cache). The generated
    /// project turns it on (`--metrics-secure`, port 8443). The metrics
    /// server then never shares the health probes' address.
    ///
    /// ```no_run
    /// use opkit::manager::{Manager, SecureMetrics};
    ///
    /// # async fn example() -> Result<(), opkit::manager::ManagerError> {
    /// let manager = Manager::builder()
    ///     .metrics_bind_address(":8443")
    ///     .metrics_secure(SecureMetrics::new().cert_dir("/tmp/k8s-metrics-server/metrics-certs"))
    ///     .health_probe_bind_address(":8081")
    ///     .build()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn metrics_secure(mut self, secure: SecureMetrics) -> Self {
        self.metrics_secure = Some(secure);
        self
    }

    /// Serve `/healthz` and `/readyz` on `address` (same forms as
    /// [`metrics_bind_address`](Self::metrics_bind_address)).
    pub fn health_probe_bind_address(mut self, address: impl Into<String>) -> Self {
        self.probe_address = Some(address.into());
        self
    }

    /// How long running reconciles and runnables get to finish at shutdown
    /// (default 30 s). Past it they are abandoned and
    /// [`run`](Manager::run) returns [`ManagerError::ShutdownTimeout`].
    ///
    /// This is the one shutdown timeout of everything the manager runs: a
    /// controller's own
    /// [`shutdown_timeout`](crate::controller::Controller::shutdown_timeout)
    /// applies only when it runs without a manager.
    pub fn graceful_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.graceful_shutdown_timeout = timeout;
        self
    }

    /// How long runnables wait for the shared cache to sync before the
    /// manager fails (default 120 s). Controllers have their own
    /// ([`Controller::cache_sync_timeout`](crate::controller::Controller::cache_sync_timeout)).
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }

    /// Register the manager's metrics in `metrics` rather than a new
    /// registry (to share one registry between several managers, or with
    /// code built before the manager).
    pub fn metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    #[cfg(feature = "webhook")]
    #[cfg_attr(docsrs, doc(cfg(feature = "webhook")))]
    /// Serve admission and conversion webhooks (see [`crate::webhook`]).
    /// [`build`](Self::build) reads the certificate and binds the address;
    /// [`run`](Manager::run) serves it on every replica, leader or not,
    /// from before the caches sync (a converted kind cannot be read without
    /// it) until after the controllers have stopped. `/readyz` gains the
    /// check `webhook`.
    pub fn webhook_server(mut self, server: WebhookServer) -> Self {
        self.webhook_server = Some(server);
        self
    }

    /// Connects (loading the configuration), validates the leader-election
    /// options and binds the HTTP addresses. Nothing runs until
    /// [`Manager::run`].
    pub async fn build(self) -> Result<Manager, ManagerError> {
        let metrics = self.metrics.unwrap_or_default();
        let (client, api_url) = match self.connection {
            Connection::Client(client) => (
                client,
                "the URL of the client given to ManagerBuilder::client".to_owned(),
            ),
            Connection::Config(config) => instrumented_client(*config, &metrics)?,
            Connection::Source(source) => {
                instrumented_client(config::load(&source).await?, &metrics)?
            }
        };
        #[cfg(feature = "shard")]
        if self.sharding.is_some() && self.leader_election.is_some() {
            return Err(ManagerError::ShardingWithLeaderElection);
        }
        let elector = match self.leader_election {
            None => None,
            Some(election) => Some(elector(&client, election)?),
        };
        // Only when metrics are served at all ("0" turns them off).
        #[cfg(feature = "secure-metrics")]
        let serves_metrics = self
            .metrics_address
            .as_deref()
            .and_then(server::parse_address)
            .is_some();
        #[cfg(feature = "secure-metrics")]
        let secure = match &self.metrics_secure {
            Some(secure) if serves_metrics => Some(secure.prepare(&client)?),
            _ => None,
        };
        #[cfg(not(feature = "secure-metrics"))]
        let secure = None;
        #[cfg(feature = "shard")]
        let shard = match self.sharding {
            None => None,
            Some(mut sharding) => {
                if !sharding.has_namespace()
                    && let Some(namespace) = &self.namespace
                {
                    sharding = sharding.namespace(namespace.clone());
                }
                let shard = sharding
                    .spawn(client.clone())
                    .map_err(ManagerError::Sharding)?;
                crate::shard::export_metrics(&shard, &metrics);
                Some(shard)
            }
        };
        let servers = bind_servers(
            self.metrics_address.as_deref(),
            self.probe_address.as_deref(),
            secure,
        )
        .await?;

        #[cfg(feature = "webhook")]
        let webhook = match self.webhook_server {
            Some(mut server) => {
                let serve = server
                    .provision(&client, &api_url)
                    .await
                    .map_err(ManagerError::Webhook)?;
                match serve {
                    true => Some(server.bind().await.map_err(ManagerError::Webhook)?),
                    false => None,
                }
            }
            None => None,
        };

        let mut cache =
            SharedCache::builder(client.clone()).read_your_writes(self.read_your_writes);
        if let Some(namespace) = self.namespace {
            cache = cache.namespace(namespace);
        }
        let cache = cache.build();
        let mut healthz = Checks::default();
        healthz.add("ping".to_owned(), health::ping());
        let mut readyz = Checks::default();
        readyz.add(
            "informers".to_owned(),
            health::informers_synced(cache.clone()),
        );
        #[cfg(feature = "webhook")]
        if let Some(webhook) = &webhook {
            let readiness = webhook.readiness();
            readyz.add(
                "webhook".to_owned(),
                health::check(move || {
                    let result = readiness.check().map_err(BoxError::from);
                    async move { result }
                }),
            );
        }
        #[cfg(feature = "shard")]
        if let Some(shard) = &shard {
            readyz.add(
                "shard".to_owned(),
                health::check(crate::shard::readiness(shard)),
            );
        }
        let (leading, _) = watch::channel(false);
        let leading = std::sync::Arc::new(leading);
        // A sharded manager divides the fleet's clusters over its ring too.
        // The fleet's hub-side watches register on the manager's cache.
        #[cfg(feature = "multicluster")]
        let mut fleet = crate::multicluster::Fleet::without_provider();
        #[cfg(feature = "multicluster")]
        fleet.hub(cache.clone());
        #[cfg(all(feature = "multicluster", feature = "shard"))]
        if let Some(shard) = &shard {
            fleet.shard_clusters(shard.clone());
        }
        Ok(Manager {
            client,
            api_url,
            cache,
            metrics,
            elector,
            #[cfg(feature = "shard")]
            shard,
            servers,
            #[cfg(feature = "webhook")]
            webhook,
            healthz,
            readyz,
            controllers: Vec::new(),
            runnables: Vec::new(),
            graceful_shutdown_timeout: self.graceful_shutdown_timeout,
            cache_sync_timeout: self.cache_sync_timeout,
            leading,
            #[cfg(feature = "multicluster")]
            fleet,
        })
    }
}

/// A client from `config` whose requests are counted and timed in
/// `rest_client_*`, and the API server's URL.
fn instrumented_client(
    config: kube::Config,
    metrics: &Metrics,
) -> Result<(kube::Client, String), ManagerError> {
    let url = config.cluster_url.to_string();
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(ManagerError::Client)?
        .with_layer(&metrics.rest_client_layer(host))
        .build();
    Ok((client, url))
}

/// The elector, and its Lease as `namespace/name`.
fn elector(
    client: &kube::Client,
    election: LeaderElection,
) -> Result<(LeaderElector, String), ManagerError> {
    let namespace = match election.namespace.clone() {
        Some(namespace) => namespace,
        None => {
            let namespace = client.default_namespace();
            if namespace.is_empty() {
                return Err(ManagerError::NoLeaseNamespace);
            }
            namespace.to_owned()
        }
    };
    let lease = format!("{namespace}/{}", election.lease_name);
    let elector = election
        .elector(client.clone(), namespace)
        .map_err(ManagerError::LeaderElection)?;
    Ok((elector, lease))
}

async fn bind_servers(
    metrics: Option<&str>,
    probes: Option<&str>,
    secure: Option<Secured>,
) -> Result<Vec<Bound>, ManagerError> {
    let metrics = metrics.and_then(server::parse_address);
    let probes = probes.and_then(server::parse_address);
    let mut bound = Vec::new();
    match (metrics, probes) {
        (Some(m), Some(p)) if m == p && !m.ends_with(":0") && secure.is_some() => {
            return Err(ManagerError::Bind {
                server: Serves::Metrics.describe(),
                address: m,
                source: std::io::Error::other(
                    "secure metrics (HTTPS) cannot share the health probes' plain-HTTP address",
                ),
            });
        }
        // One server for both when the same fixed port is asked for twice;
        // two "any free port" requests get two ports.
        (Some(m), Some(p)) if m == p && !m.ends_with(":0") => {
            bound.push(server::bind(Serves::Both, &m).await?);
        }
        (m, p) => {
            if let Some(m) = m {
                let mut metrics = server::bind(Serves::Metrics, &m).await?;
                metrics.secure = secure;
                bound.push(metrics);
            }
            if let Some(p) = p {
                bound.push(server::bind(Serves::Probes, &p).await?);
            }
        }
    }
    Ok(bound)
}
