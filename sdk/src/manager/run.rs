//! The manager's run: start in order, wait for a reason to stop, stop in
//! the reverse order.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use super::assembled::{Manager, RunController};
use super::error::ManagerError;
use super::runnable::Runnable;
use super::server::{self, Endpoints};
use super::signals;
use crate::cache::SharedCache;
use crate::controller::StartGate;
use crate::leader::LeaderHandle;
use crate::metrics::Metrics;

impl Manager {
    /// Runs until SIGTERM or SIGINT, then shuts down gracefully (see the
    /// [module docs](crate::manager)); a second signal exits the process at once with
    /// status 1. `Ok(())` after a clean shutdown.
    pub async fn run(self) -> Result<(), ManagerError> {
        let mut signals = signals::Signals::install().map_err(ManagerError::Signal)?;
        self.run_until(async move {
            let signal = signals.recv().await;
            tracing::info!(
                signal,
                "shutting down gracefully; a second signal exits at once"
            );
            tokio::spawn(async move {
                let signal = signals.recv().await;
                tracing::error!(signal, "second signal: exiting at once");
                std::process::exit(1);
            });
        })
        .await
    }

    /// Runs until `shutdown` completes, then shuts down gracefully (no
    /// signal handling: for tests, or a process that handles signals
    /// itself).
    ///
    /// ```no_run
    /// # async fn example(manager: opkit::manager::Manager) -> Result<(), opkit::manager::ManagerError> {
    /// use tokio_util::sync::CancellationToken;
    ///
    /// let stop = CancellationToken::new();
    /// let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    /// // ...
    /// stop.cancel();
    /// running.await.expect("manager task")?;
    /// # Ok(()) }
    /// ```
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ManagerError> {
        run(self, shutdown).await
    }
}

/// How long the HTTP servers get to finish their requests at the very end.
const SERVER_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the manager waits, once the cache is stopped, for the
/// informers' tasks to end.
const CACHE_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the manager stops.
enum Reason {
    /// The shutdown future completed (a signal).
    Shutdown,
    /// This replica's leadership ended.
    LeaderLost,
    /// A controller, runnable or server failed.
    Failed(ManagerError),
}

async fn run(
    manager: Manager,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ManagerError> {
    let Manager {
        client: _,
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
        controllers,
        runnables,
        graceful_shutdown_timeout,
        cache_sync_timeout,
        leading,
        #[cfg(feature = "multicluster")]
        fleet,
    } = manager;
    // Multicluster controllers with no provider: said before any election,
    // not once this replica has waited to lead.
    #[cfg(feature = "multicluster")]
    if !fleet.is_empty() && !fleet.has_provider() {
        return Err(ManagerError::MultiCluster(
            crate::multicluster::MultiClusterError::NoProvider,
        ));
    }
    // Each member's state shows on `/readyz?verbose`; none fails the hub's readiness.
    #[cfg(feature = "multicluster")]
    let readyz = {
        let mut readyz = readyz;
        if !fleet.is_empty() {
            readyz.add("clusters".to_owned(), super::health::detail(fleet.states()));
        }
        readyz
    };
    #[cfg(feature = "multicluster")]
    let runnables = with_fleet(runnables, fleet);

    // 1. Leader election, on every replica.
    let leader = elector.map(|(elector, lease)| (elector.spawn(), lease));
    let status = publish_status(leader.as_ref().map(|(h, _)| h), &metrics, &leading);

    // 2. Every controller's watches, on every replica: standbys keep warm
    // caches, and their queues fill while they wait.
    let mut prepared: Vec<(String, RunController)> = Vec::with_capacity(controllers.len());
    for entry in controllers {
        match (entry.prepare)(&cache) {
            Ok(run) => prepared.push((entry.name, run)),
            Err(error) => {
                stop_early(leader.as_ref(), &leading, &cache).await;
                return Err(error.into());
            }
        }
    }
    if let Err(error) = cache.start() {
        stop_early(leader.as_ref(), &leading, &cache).await;
        return Err(ManagerError::Cache(error));
    }

    // 3. HTTP: metrics and probes, on every replica.
    let serving = CancellationToken::new();
    let endpoints = Endpoints {
        metrics: metrics.clone(),
        healthz: Arc::new(healthz),
        readyz: Arc::new(readyz),
    };
    let mut http = JoinSet::new();
    for bound in servers {
        http.spawn(server::serve(bound, endpoints.clone(), serving.clone()));
    }
    // Webhooks too, on every replica and before the caches sync: a
    // converted kind cannot be listed until the conversion webhook answers.
    #[cfg(feature = "webhook")]
    if let Some(webhook) = webhook {
        let serving = serving.clone();
        http.spawn(async move { webhook.serve(serving).await.map_err(ManagerError::Webhook) });
    }

    // 4. Workers and runnables: gated on leadership.
    let work = CancellationToken::new();
    let mut tasks = Tasks::default();
    let gate = || {
        leader
            .as_ref()
            .map(|(handle, _)| leading_gate(handle.clone()))
    };
    for (name, run) in prepared {
        let future = run(work.clone(), gate());
        tasks.spawn(
            name,
            async move { future.await.map_err(ManagerError::from) },
        );
    }
    for runnable in runnables {
        let gate = if runnable.needs_leader_election {
            gate()
        } else {
            None
        };
        let name = runnable.name.clone();
        let future = run_runnable(
            runnable,
            cache.clone(),
            cache_sync_timeout,
            gate,
            work.clone(),
        );
        tasks.spawn(name, future);
    }
    // A kind that is not served, or a server out of reach, fails the start
    // after a bounded number of attempts, with an error naming it.
    {
        let cache = cache.clone();
        let work = work.clone();
        tasks.spawn("cache start check".to_owned(), async move {
            cache
                .wait_for_start(super::START_LIST_ATTEMPTS, &api_url, &work)
                .await
                .map_err(ManagerError::Start)
        });
    }
    tracing::info!(
        tasks = tasks.names.len(),
        leader_election = leader.is_some(),
        "manager started"
    );

    // 5. Until a reason to stop.
    let reason = tokio::select! {
        () = shutdown => Reason::Shutdown,
        () = leadership_ended(leader.as_ref()) => Reason::LeaderLost,
        error = tasks.first_error() => Reason::Failed(error),
        error = first_server_error(&mut http) => Reason::Failed(error),
    };

    // Stop: controllers and runnables first, then the Lease, then the cache
    // and the HTTP servers.
    let result = match reason {
        Reason::LeaderLost => {
            let lease = leader
                .as_ref()
                .map(|(_, lease)| lease.clone())
                .unwrap_or_default();
            tracing::error!(
                lease,
                "leader election lost: stopping every controller at once"
            );
            work.cancel();
            tasks.abort_all().await;
            Err(ManagerError::LeaderElectionLost { lease })
        }
        Reason::Shutdown | Reason::Failed(_) => {
            let failed = match reason {
                Reason::Failed(error) => {
                    tracing::error!(%error, "stopping the manager after a failure");
                    Some(error)
                }
                _ => None,
            };
            tracing::info!(
                timeout = ?graceful_shutdown_timeout,
                "shutting down: no new reconciles; waiting for running ones"
            );
            work.cancel();
            let drained = tokio::time::timeout(graceful_shutdown_timeout, tasks.drain()).await;
            let timed_out = if drained.is_err() {
                let running = tasks.running();
                tracing::warn!(
                    timeout = ?graceful_shutdown_timeout,
                    running = ?running,
                    "graceful shutdown timeout: abandoning what still runs"
                );
                tasks.abort_all().await;
                Some(running)
            } else {
                None
            };
            match (failed, timed_out) {
                (Some(error), _) => Err(error),
                (None, Some(running)) => Err(ManagerError::ShutdownTimeout {
                    timeout: graceful_shutdown_timeout,
                    running,
                }),
                (None, None) => Ok(()),
            }
        }
    };

    // Nothing reconciles any more: leave the shard ring (its Lease is
    // deleted, so the others take this replica's share at once).
    #[cfg(feature = "shard")]
    if let Some(shard) = &shard {
        shard.shutdown().await;
    }
    // Nothing reconciles any more: the Lease may go (released if configured).
    if let Some((handle, lease)) = &leader {
        let state = handle.shutdown().await;
        tracing::info!(lease, ?state, "leader election stopped");
    }
    if let Some(status) = status {
        status.abort();
        let _ = status.await;
    }
    if let Some((handle, _)) = &leader {
        metrics.set_leader(handle.lease_name(), false);
    }
    leading.send_replace(false);
    serving.cancel();
    // The informers end with the manager: no watch and no task outlives `run`.
    if tokio::time::timeout(CACHE_STOP_TIMEOUT, cache.stop_and_wait())
        .await
        .is_err()
    {
        tracing::warn!(
            timeout = ?CACHE_STOP_TIMEOUT,
            "informer tasks still running after the cache stopped"
        );
    }
    if tokio::time::timeout(SERVER_STOP_TIMEOUT, async {
        while http.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        http.abort_all();
    }
    match &result {
        Ok(()) => tracing::info!("manager stopped"),
        Err(error) => tracing::error!(%error, "manager stopped"),
    }
    result
}

/// Stops what was started when the manager fails before running anything.
async fn stop_early(
    leader: Option<&(LeaderHandle, String)>,
    leading: &watch::Sender<bool>,
    cache: &SharedCache,
) {
    if let Some((handle, _)) = leader {
        handle.shutdown().await;
    }
    leading.send_replace(false);
    let _ = tokio::time::timeout(CACHE_STOP_TIMEOUT, cache.stop_and_wait()).await;
}

/// Follows the election into `leading` and
/// `leader_election_master_status`; without an election, this replica
/// leads from now on.
fn publish_status(
    leader: Option<&LeaderHandle>,
    metrics: &Metrics,
    leading: &Arc<watch::Sender<bool>>,
) -> Option<tokio::task::JoinHandle<()>> {
    let Some(handle) = leader else {
        leading.send_replace(true);
        return None;
    };
    let lease = handle.lease_name().to_owned();
    metrics.set_leader(&lease, false);
    let mut states = handle.subscribe();
    let metrics = metrics.clone();
    let leading = Arc::clone(leading);
    Some(tokio::spawn(async move {
        loop {
            let state = *states.borrow_and_update();
            metrics.set_leader(&lease, state.is_leading());
            leading.send_replace(state.is_leading());
            if state.is_final() || states.changed().await.is_err() {
                break;
            }
        }
    }))
}

/// Opens when this replica leads, with the term's scope.
fn leading_gate(handle: LeaderHandle) -> StartGate {
    Box::pin(async move { handle.became_leader().await.ok() })
}

/// Completes when the election ends by itself (lost); never without one.
async fn leadership_ended(leader: Option<&(LeaderHandle, String)>) {
    match leader {
        Some((handle, _)) => {
            handle.stopped().await;
        }
        None => std::future::pending().await,
    }
}

/// The first error of an HTTP server; never if they all serve.
async fn first_server_error(http: &mut JoinSet<Result<(), ManagerError>>) -> ManagerError {
    while let Some(done) = http.join_next().await {
        match done {
            Ok(Err(error)) => return error,
            Ok(Ok(())) => {}
            Err(join) if join.is_panic() => {
                return ManagerError::Panicked {
                    name: "HTTP server".to_owned(),
                };
            }
            Err(_) => {}
        }
    }
    std::future::pending().await
}

/// Runs a runnable once the cache has synced and (if gated) this replica
/// leads, with a token cancelled at shutdown or when leadership ends.
async fn run_runnable(
    runnable: Runnable,
    cache: SharedCache,
    cache_sync_timeout: Duration,
    gate: Option<StartGate>,
    work: CancellationToken,
) -> Result<(), ManagerError> {
    tokio::select! {
        () = work.cancelled() => return Ok(()),
        synced = cache.wait_for_sync(cache_sync_timeout) => synced.map_err(ManagerError::Cache)?,
    }
    let token = work.child_token();
    if let Some(gate) = gate {
        let scope = tokio::select! {
            () = work.cancelled() => return Ok(()),
            scope = gate => match scope {
                Some(scope) => scope,
                None => return Ok(()),
            },
        };
        let token = token.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = scope.cancelled() => token.cancel(),
                () = token.cancelled() => {}
            }
        });
    }
    tracing::info!(runnable = %runnable.name, "starting runnable");
    let name = runnable.name;
    (runnable.run)(token)
        .await
        .map_err(|source| ManagerError::Runnable { name, source })
}

/// `runnables` and, if it has controllers, the fleet as one more: it runs
/// while this replica leads, once the hub's cache synced.
#[cfg(feature = "multicluster")]
fn with_fleet(mut runnables: Vec<Runnable>, fleet: crate::multicluster::Fleet) -> Vec<Runnable> {
    if !fleet.is_empty() {
        runnables.push(Runnable::new("multicluster", move |stop| async move {
            fleet
                .run_until_cancelled(stop)
                .await
                .map_err(|e| Box::new(ManagerError::MultiCluster(e)) as super::runnable::BoxError)
        }));
    }
    runnables
}

/// The controllers and runnables, by name.
#[derive(Default)]
struct Tasks {
    set: JoinSet<Result<(), ManagerError>>,
    names: HashMap<Id, String>,
}

impl Tasks {
    fn spawn(
        &mut self,
        name: String,
        task: impl Future<Output = Result<(), ManagerError>> + Send + 'static,
    ) {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// The next finished task: `None` when none is left, `Some(Err)` if it
    /// failed or panicked.
    async fn next(&mut self) -> Option<Result<(), ManagerError>> {
        let done = self.set.join_next_with_id().await?;
        Some(match done {
            Ok((id, result)) => {
                self.names.remove(&id);
                result
            }
            Err(join) => {
                let name = self.names.remove(&join.id()).unwrap_or_default();
                if join.is_panic() {
                    Err(ManagerError::Panicked { name })
                } else {
                    Ok(())
                }
            }
        })
    }

    /// The first failure; never if every task ends well.
    async fn first_error(&mut self) -> ManagerError {
        while let Some(done) = self.next().await {
            if let Err(error) = done {
                return error;
            }
        }
        std::future::pending().await
    }

    /// Waits for every task, logging failures.
    async fn drain(&mut self) {
        while let Some(done) = self.next().await {
            if let Err(error) = done {
                tracing::error!(%error, "failed while shutting down");
            }
        }
    }

    /// Aborts every task and waits until they have stopped.
    async fn abort_all(&mut self) {
        self.set.abort_all();
        while self.set.join_next().await.is_some() {}
        self.names.clear();
    }

    /// What still runs, by name.
    fn running(&self) -> Vec<String> {
        let mut names: Vec<String> = self.names.values().cloned().collect();
        names.sort();
        names
    }
}
