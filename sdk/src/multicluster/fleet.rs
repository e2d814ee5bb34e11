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

use super::claims::{Claim, Claims};
use super::credentials::{CredentialSwap, swappable};
use super::error::{MultiClusterError, ProviderError};
use super::provider::{ClusterSink, Command, Provider};
use crate::cache::{SharedCache, SyncState};
use crate::cluster_request::ClusterName;
use crate::controller::{
    ClusterController, Controller, ControllerError, MemberRegistrations, MemberWatchFeed,
    until_shutdown,
};
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
    claims: Claims,
    /// The hub's cache: where the controllers' hub-side watches register.
    hub: Option<SharedCache>,
    /// The hub controllers' member-side watches, registered on every
    /// engaged cluster, and how many hub controllers feed them.
    member_watches: MemberWatchFeed,
    member_watchers: usize,
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
            claims: Claims::All,
            hub: None,
            member_watches: MemberWatchFeed::default(),
            member_watchers: 0,
        }
    }

    /// The hub's cache: the cluster the fleet's controllers' hub-side
    /// watches ([`Controller::watches_hub`]) register on, the cache of
    /// the cluster the operator runs against. A
    /// [`Manager`](crate::manager::Manager) gives its fleet its own.
    pub fn hub(&mut self, cache: SharedCache) {
        self.hub = Some(cache);
    }

    /// Where a hub controller's member-side watches
    /// ([`Controller::watches_members`]) join the fleet: registered on
    /// every cluster it engages (the fleet runs for them even with no
    /// multicluster controller).
    pub(crate) fn feed_member_watches(&mut self) -> MemberWatchFeed {
        self.member_watchers += 1;
        self.member_watches.clone()
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

    /// Whether no controller was added (nor member-side watches fed).
    pub(crate) fn is_empty(&self) -> bool {
        self.controllers.is_empty() && self.member_watchers == 0
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

    #[cfg(feature = "shard")]
    #[cfg_attr(docsrs, doc(cfg(feature = "shard")))]
    /// Divides the clusters over the replicas of `shard`'s ring, as a
    /// sharded controller divides objects: each cluster the provider
    /// offers is engaged on the one replica that owns it (its name hashed
    /// onto the ring), under a [`ShardPermit`](crate::shard::ShardPermit)
    /// held for as long as it stays engaged there. Every replica runs the
    /// provider and the fleet; [`engaged`](Self::engaged) shows this
    /// replica's clusters.
    ///
    /// - **When the ring changes**, a cluster that moves away is disengaged
    ///   here (its reconciles cancelled, its informers stopped), and only
    ///   then is its permit released: the replica it moves to engages it
    ///   once every member acknowledged the new member set, which this
    ///   replica does only after that release. No cluster is engaged on
    ///   two replicas at once, with the guarantee the permits give keys
    ///   (see [`crate::shard`]). Clusters that stay where they are keep
    ///   running through the change.
    /// - **A replica that crashes**: its clusters are engaged elsewhere once
    ///   its Lease expired. One that cannot renew disengages its clusters
    ///   at its renew deadline, before the others may take them.
    /// - **The provider's answers** are about the fleet, not this replica:
    ///   [`ClusterSink::engage`] succeeds for a cluster another replica
    ///   engages (it is offered, and engaged here if it moves here), and
    ///   [`ClusterSink::update_credentials`] / [`ClusterSink::disengage`]
    ///   answer `true` for an offered cluster.
    ///
    /// A [`Manager`](crate::manager::Manager) built with
    /// [`sharding`](crate::manager::ManagerBuilder::sharding) does this
    /// with its ring. The ring may be the one sharded controllers use, or
    /// one of its own.
    pub fn shard_clusters(&mut self, shard: crate::shard::ShardHandle) {
        self.claims = Claims::sharded(shard);
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
        // hub-side watches route to the clusters' queues from the start
        let mut hub_watches = Vec::with_capacity(self.controllers.len());
        for controller in &self.controllers {
            hub_watches.push(controller.watch_hub(self.hub.as_ref())?);
        }
        let (commands, mut requests) = mpsc::channel(COMMANDS);
        let mut provider = provider(ClusterSink { commands }, stop.child_token());
        let mut provider_running = true;
        let (lapses, mut lapsed) = mpsc::unbounded_channel();
        let mut claims = self.claims;
        claims.announce();
        let mut members = Members {
            controllers: self.controllers,
            clusters: BTreeMap::new(),
            offered: BTreeMap::new(),
            engaged: self.engaged,
            caches: self.caches,
            hub: self.hub,
            member_watches: self.member_watches,
            stop: stop.clone(),
            lapses,
            engagements: 0,
        };
        let mut open = true;
        let result = loop {
            tokio::select! {
                () = stop.cancelled() => break Ok(()),
                command = requests.recv(), if open => match command {
                    Some(command) => members.handle(command, &claims).await,
                    None => open = false,
                },
                Some((cluster, engagement)) = lapsed.recv() => {
                    members.lapsed(&cluster, engagement).await;
                }
                () = claims.changed() => members.claim_offered(&claims).await,
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
        drop(hub_watches);
        result
    }
}

/// The engaged clusters.
struct Members {
    controllers: Vec<Arc<dyn ClusterController>>,
    clusters: BTreeMap<ClusterName, Member>,
    /// Every cluster the provider engaged and has not disengaged, with its
    /// latest client: with sharding, also those another replica engages
    /// (claimed here when the ring gives them to this replica).
    offered: BTreeMap<ClusterName, kube::Client>,
    engaged: watch::Sender<Vec<ClusterName>>,
    caches: EngagedCaches,
    hub: Option<SharedCache>,
    member_watches: MemberWatchFeed,
    stop: CancellationToken,
    /// Where a member's claim reports its lapse: (cluster, engagement).
    lapses: mpsc::UnboundedSender<(ClusterName, u64)>,
    /// Engagements so far: each member's number, so that a lapse reported
    /// late is not taken for a later engagement's.
    engagements: u64,
}

/// One engaged cluster: its cache (over a client whose credentials can
/// be swapped), its controllers' runs, and the claim it is engaged under
/// (released when the member is dropped, after it was disengaged).
struct Member {
    cache: SharedCache,
    credentials: CredentialSwap,
    disengaged: CancellationToken,
    runs: JoinSet<()>,
    /// The hub controllers' watches on this cluster.
    member_watches: Option<MemberRegistrations>,
    claim: Claim,
    engagement: u64,
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
        if let Some(watches) = self.member_watches.take() {
            watches.farewell();
        }
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
    async fn handle(&mut self, command: Command, claims: &Claims) {
        match command {
            Command::Engage {
                cluster,
                client,
                done,
            } => {
                let result = self.engage(cluster, client, claims).await;
                let _ = done.send(result);
            }
            Command::Disengage { cluster, done } => {
                let offered = self.offered.remove(&cluster).is_some();
                let was = self
                    .disengage(&cluster, "cluster disengaged")
                    .await
                    .is_some();
                let _ = done.send(was || offered);
            }
            Command::UpdateCredentials {
                cluster,
                client,
                done,
            } => {
                let offered = match self.offered.get_mut(&cluster) {
                    Some(latest) => {
                        *latest = client.clone();
                        true
                    }
                    None => false,
                };
                let engaged = match self.clusters.get(&cluster) {
                    Some(member) => {
                        member.credentials.swap(client);
                        tracing::info!(%cluster, "cluster's credentials swapped; its caches kept");
                        true
                    }
                    None => false,
                };
                let _ = done.send(engaged || offered);
            }
        }
    }

    /// The provider offers `cluster`: engaged here if this replica may
    /// claim it (always, without sharding), else remembered.
    async fn engage(
        &mut self,
        cluster: ClusterName,
        client: kube::Client,
        claims: &Claims,
    ) -> Result<(), MultiClusterError> {
        self.offered.insert(cluster.clone(), client.clone());
        // engaged again (new credentials): the old engagement goes first,
        // and its claim stays held across the re-engagement
        let old = self
            .disengage(
                &cluster,
                "cluster engaged again (new credentials); the old engagement disengaged",
            )
            .await;
        let claim = old.or_else(|| claims.claim(&cluster));
        let Some(claim) = claim else {
            tracing::debug!(%cluster, "cluster offered; another replica of the ring engages it");
            return Ok(());
        };
        let engaged = self.engage_claimed(cluster.clone(), client, claim).await;
        if engaged.is_err() && claims.all() {
            self.offered.remove(&cluster);
        }
        engaged
    }

    /// Engages `cluster` under `claim`; a claim that can lapse is watched:
    /// at its lapse the cluster's reconciles are cancelled at once and the
    /// fleet told to disengage it.
    async fn engage_claimed(
        &mut self,
        cluster: ClusterName,
        client: kube::Client,
        claim: Claim,
    ) -> Result<(), MultiClusterError> {
        let (client, credentials) = swappable(client);
        self.engagements += 1;
        let mut member = Member {
            cache: SharedCache::new(client),
            credentials,
            disengaged: CancellationToken::new(),
            runs: JoinSet::new(),
            member_watches: None,
            claim,
            engagement: self.engagements,
        };
        if let Err(source) = self.start(&cluster, &mut member) {
            member.disengage(&cluster, &self.controllers).await;
            return Err(MultiClusterError::Engage {
                cluster,
                source: Box::new(source),
            });
        }
        if member.claim.can_lapse() {
            let (claim, disengaged) = (member.claim.clone(), member.disengaged.clone());
            let (lapses, report) = (self.lapses.clone(), (cluster.clone(), member.engagement));
            tokio::spawn(async move {
                tokio::select! {
                    () = claim.lapsed() => {
                        disengaged.cancel();
                        let _ = lapses.send(report);
                    }
                    () = disengaged.cancelled() => {}
                }
            });
        }
        tracing::info!(%cluster, controllers = self.controllers.len(), "cluster engaged");
        self.clusters.insert(cluster, member);
        self.publish();
        Ok(())
    }

    /// The claim of engagement `engagement` of `cluster` lapsed (its
    /// reconciles were cancelled then): disengages it, which releases the
    /// claim. It stays offered, claimed again when the ring allows.
    async fn lapsed(&mut self, cluster: &ClusterName, engagement: u64) {
        if self
            .clusters
            .get(cluster)
            .is_none_or(|member| member.engagement != engagement)
        {
            return;
        }
        self.disengage(cluster, "cluster disengaged: the ring gives it to another replica, or this replica's membership lapsed").await;
    }

    /// Disengages `cluster` if it is engaged here (logging `why`) and
    /// publishes the change; returns the claim it was engaged under, held
    /// until the caller drops it.
    async fn disengage(&mut self, cluster: &ClusterName, why: &str) -> Option<Claim> {
        let member = self.clusters.remove(cluster)?;
        let claim = member.claim.clone();
        member.disengage(cluster, &self.controllers).await;
        tracing::info!(%cluster, "{why}");
        self.publish();
        Some(claim)
    }

    /// Engages each offered cluster not engaged here that this replica
    /// may claim now (the ring changed).
    async fn claim_offered(&mut self, claims: &Claims) {
        let waiting: Vec<(ClusterName, kube::Client)> = self
            .offered
            .iter()
            .filter(|(cluster, _)| !self.clusters.contains_key(*cluster))
            .map(|(cluster, client)| (cluster.clone(), client.clone()))
            .collect();
        for (cluster, client) in waiting {
            let Some(claim) = claims.claim(&cluster) else {
                continue;
            };
            if let Err(error) = self.engage_claimed(cluster.clone(), client, claim).await {
                tracing::warn!(%cluster, %error, "could not engage a cluster the ring gives this replica; trying again at the ring's next change");
            }
        }
    }

    /// Engages every controller on `member`'s cache and starts it.
    fn start(&self, cluster: &ClusterName, member: &mut Member) -> Result<(), ControllerError> {
        for controller in &self.controllers {
            let run = controller.engage(
                cluster,
                &member.cache,
                self.hub.as_ref(),
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
        member.member_watches = Some(self.member_watches.register(cluster, &member.cache)?);
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
