//! [`Fleet`]: the clusters a provider engages, and the multicluster
//! controllers running in each of them.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::credentials::{CredentialSwap, swappable};
use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Command, Provider};
use crate::cache::{SharedCache, SyncState};
use crate::cluster_request::ClusterName;
use crate::controller::{ClusterController, Controller, ControllerError, until_shutdown};
use crate::reconcile::Reconcile;

/// Runs a provider until the fleet stops.
type RunProvider = Box<
    dyn FnOnce(ClusterSink, CancellationToken) -> BoxFuture<'static, Result<(), ProviderError>>
        + Send,
>;

/// How many cluster events may wait for the fleet (a provider's `engage`
/// waits beyond that).
const COMMANDS: usize = 64;

/// Multicluster controllers over the clusters a [`Provider`] engages: each
/// engaged cluster gets its own cache (informers for every controller's
/// watches) and, per controller, its own queue and workers; a disengaged
/// cluster's reconciles are cancelled and its informers, queues and tasks
/// stopped. See [`crate::multicluster`].
///
/// A [`Manager`](crate::manager::Manager) with a
/// [cluster provider](crate::manager::Manager::set_cluster_provider)
/// runs one (with leader election, probes and metrics); run one on its
/// own with [`run`](Self::run).
pub struct Fleet {
    provider: Option<RunProvider>,
    controllers: Vec<Arc<dyn ClusterController>>,
    engaged: watch::Sender<Vec<ClusterName>>,
    caches: EngagedCaches,
}

/// The caches of the engaged clusters, by name: what their states are read from.
type EngagedCaches = Arc<RwLock<BTreeMap<ClusterName, SharedCache>>>;

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field(
                "controllers",
                &self
                    .controllers
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>(),
            )
            .field("engaged", &*self.engaged.borrow())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A fleet of the clusters `provider` discovers, with no controller yet.
    pub fn new(provider: impl Provider) -> Self {
        let mut fleet = Self::without_provider();
        fleet.set_provider(provider);
        fleet
    }

    /// A fleet whose provider is set later (a manager's, by
    /// [`Manager::set_cluster_provider`](crate::manager::Manager::set_cluster_provider)).
    pub(crate) fn without_provider() -> Self {
        Self {
            provider: None,
            controllers: Vec::new(),
            engaged: watch::Sender::new(Vec::new()),
            caches: EngagedCaches::default(),
        }
    }

    /// Sets (or replaces) the provider.
    pub(crate) fn set_provider(&mut self, provider: impl Provider) {
        self.provider = Some(Box::new(move |sink, stop| {
            Box::pin(provider.run(sink, stop))
        }));
    }

    /// Whether a provider was set.
    pub(crate) fn has_provider(&self) -> bool {
        self.provider.is_some()
    }

    /// Whether no controller was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.controllers.is_empty()
    }

    /// Adds a controller that runs in every engaged cluster (whether or not
    /// [`Controller::multicluster`] was called). Fails for one that holds
    /// what cannot be given to each cluster (a custom rate limiter, an
    /// external source, a shard), or whose name another controller of the
    /// fleet has.
    pub fn add<R: Reconcile>(
        &mut self,
        controller: Controller<R>,
    ) -> Result<(), MultiClusterError> {
        let name = controller.controller_name().to_owned();
        if self.has_controller(&name) {
            return Err(MultiClusterError::DuplicateController { name });
        }
        self.controllers.push(controller.into_cluster_controller()?);
        Ok(())
    }

    /// Whether a controller named `name` was added.
    pub(crate) fn has_controller(&self, name: &str) -> bool {
        self.controllers.iter().any(|c| c.name() == name)
    }

    /// The clusters engaged now (sorted by name), current and after every
    /// change, also once [`run`](Self::run) took the fleet.
    pub fn engaged(&self) -> watch::Receiver<Vec<ClusterName>> {
        self.engaged.subscribe()
    }

    /// What each engaged cluster's state is now, for the hub's `/readyz`
    /// detail: `engaged` (its caches synced), `syncing` (with what has
    /// not synced and why) or `unreachable` (with its last error), e.g.
    /// `m1 engaged; m2 syncing (1 of 2 informers have not synced: ..)`.
    pub(crate) fn states(&self) -> impl Fn() -> String + Send + Sync + 'static {
        let caches = Arc::clone(&self.caches);
        move || {
            let caches = caches.read();
            if caches.is_empty() {
                return "no cluster engaged".to_owned();
            }
            let states: Vec<String> = caches
                .iter()
                .map(|(cluster, cache)| match cache.sync_state() {
                    SyncState::Synced => format!("{cluster} engaged"),
                    SyncState::Syncing(pending) => format!("{cluster} syncing ({pending})"),
                    SyncState::Unreachable(error) => {
                        format!("{cluster} unreachable (last error: {error})")
                    }
                })
                .collect();
            states.join("; ")
        }
    }

    /// Runs the provider and the controllers until `shutdown` completes:
    /// then no new reconcile starts, running ones get each controller's
    /// shutdown timeout, and every cluster's informers stop. Fails if the
    /// provider fails.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), MultiClusterError> {
        until_shutdown(shutdown, |token| self.run_until_cancelled(token)).await
    }

    /// Like [`run`](Self::run), stopping when `stop` is cancelled.
    pub(crate) async fn run_until_cancelled(
        self,
        stop: CancellationToken,
    ) -> Result<(), MultiClusterError> {
        let Some(provider) = self.provider else {
            return Err(MultiClusterError::NoProvider);
        };
        let (commands, mut requests) = mpsc::channel(COMMANDS);
        let mut provider = provider(ClusterSink { commands }, stop.child_token());
        let mut provider_running = true;
        let mut members = Members {
            controllers: self.controllers,
            clusters: BTreeMap::new(),
            engaged: self.engaged,
            caches: self.caches,
            stop: stop.clone(),
        };
        let mut open = true;
        let result = loop {
            tokio::select! {
                () = stop.cancelled() => break Ok(()),
                command = requests.recv(), if open => match command {
                    Some(command) => members.handle(command).await,
                    None => open = false,
                },
                ended = &mut provider, if provider_running => {
                    provider_running = false;
                    if let Err(error) = ended {
                        tracing::error!(%error, "the cluster provider failed; stopping the fleet");
                        break Err(MultiClusterError::Provider(error));
                    }
                    tracing::debug!("the cluster provider ended; its clusters stay engaged");
                }
            }
        };
        stop.cancel();
        members.shut_down().await;
        result
    }
}

/// The engaged clusters.
struct Members {
    controllers: Vec<Arc<dyn ClusterController>>,
    clusters: BTreeMap<ClusterName, Member>,
    engaged: watch::Sender<Vec<ClusterName>>,
    caches: EngagedCaches,
    stop: CancellationToken,
}

/// One engaged cluster: its cache (over a client whose credentials can
/// be swapped), and its controllers' runs.
struct Member {
    cache: SharedCache,
    credentials: CredentialSwap,
    disengaged: CancellationToken,
    runs: JoinSet<()>,
}

impl Member {
    /// Cancels the cluster's reconciles, waits until its controllers' runs
    /// ended (no reconcile of it runs any more, its queues are shut down),
    /// then stops its informers and waits for their tasks, and drops what
    /// its controllers reported there (their metric series).
    async fn disengage(
        mut self,
        cluster: &ClusterName,
        controllers: &[Arc<dyn ClusterController>],
    ) {
        self.disengaged.cancel();
        while self.runs.join_next().await.is_some() {}
        self.cache.stop_and_wait().await;
        for controller in controllers {
            controller.forget(cluster);
        }
    }

    /// At fleet shutdown (the stop token is cancelled: running reconciles
    /// get their shutdown bound): waits for the runs, then stops the cache.
    async fn shut_down(mut self) {
        while self.runs.join_next().await.is_some() {}
        self.cache.stop_and_wait().await;
    }
}

impl Members {
    async fn handle(&mut self, command: Command) {
        match command {
            Command::Engage {
                cluster,
                client,
                done,
            } => {
                let result = self.engage(cluster, client).await;
                let _ = done.send(result);
            }
            Command::Disengage { cluster, done } => {
                let was = match self.clusters.remove(&cluster) {
                    Some(member) => {
                        member.disengage(&cluster, &self.controllers).await;
                        tracing::info!(%cluster, "cluster disengaged");
                        true
                    }
                    None => false,
                };
                self.publish();
                let _ = done.send(was);
            }
            Command::UpdateCredentials {
                cluster,
                client,
                done,
            } => {
                let engaged = match self.clusters.get(&cluster) {
                    Some(member) => {
                        member.credentials.swap(client);
                        tracing::info!(%cluster, "cluster's credentials swapped; its caches kept");
                        true
                    }
                    None => false,
                };
                let _ = done.send(engaged);
            }
        }
    }

    async fn engage(
        &mut self,
        cluster: ClusterName,
        client: kube::Client,
    ) -> Result<(), MultiClusterError> {
        if let Some(old) = self.clusters.remove(&cluster) {
            tracing::info!(%cluster, "cluster engaged again (new credentials); disengaging the old one first");
            old.disengage(&cluster, &self.controllers).await;
            self.publish();
        }
        let (client, credentials) = swappable(client);
        let mut member = Member {
            cache: SharedCache::new(client),
            credentials,
            disengaged: CancellationToken::new(),
            runs: JoinSet::new(),
        };
        if let Err(source) = self.start(&cluster, &mut member) {
            member.disengage(&cluster, &self.controllers).await;
            return Err(MultiClusterError::Engage {
                cluster,
                source: Box::new(source),
            });
        }
        tracing::info!(%cluster, controllers = self.controllers.len(), "cluster engaged");
        self.clusters.insert(cluster, member);
        self.publish();
        Ok(())
    }

    /// Engages every controller on `member`'s cache and starts it.
    fn start(&self, cluster: &ClusterName, member: &mut Member) -> Result<(), ControllerError> {
        for controller in &self.controllers {
            let run = controller.engage(
                cluster,
                &member.cache,
                self.stop.child_token(),
                member.disengaged.clone(),
            )?;
            let (name, cluster) = (controller.name().to_owned(), cluster.clone());
            member.runs.spawn(async move {
                if let Err(error) = run.await {
                    tracing::error!(controller = %name, %cluster, %error, "controller stopped in this cluster");
                }
            });
        }
        member
            .cache
            .start()
            .map_err(|source| ControllerError::Start {
                controller: "(the cluster's cache)".to_owned(),
                source,
            })
    }

    fn publish(&self) {
        let names: Vec<ClusterName> = self.clusters.keys().cloned().collect();
        *self.caches.write() = self
            .clusters
            .iter()
            .map(|(cluster, member)| (cluster.clone(), member.cache.clone()))
            .collect();
        self.engaged.send_replace(names);
    }

    async fn shut_down(mut self) {
        let members = std::mem::take(&mut self.clusters);
        futures::future::join_all(members.into_values().map(Member::shut_down)).await;
        self.publish();
    }
}
