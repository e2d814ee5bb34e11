//! Running a controller: `prepare` registers its watches (the queue starts
//! filling), then its workers run once the caches synced (and, under a
//! manager, once this replica leads).

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::builder::Controller;
use super::error::ControllerError;
use super::observer::ReconcileObserver;
use super::settings::RunSettings;
#[cfg(feature = "shard")]
use super::sharded;
use super::stats::ReconcileStats;
use super::watch::{self, RegisteredWatch, WatchTarget};
use super::workers::{Start, StartGate, Workers};
use crate::cache::{CacheError, START_LIST_ATTEMPTS, SharedCache};
use crate::reconcile::{Reconcile, Request};
use crate::workqueue::{RateLimiter, WorkQueue};

impl<R: Reconcile> Controller<R> {
    /// Registers the watches on `cache`, starts the cache (if it is not
    /// already), waits for the watches to sync, then reconciles until
    /// `shutdown` completes. At shutdown no new reconcile starts; running
    /// ones get [`shutdown_timeout`](Self::shutdown_timeout) to finish.
    pub async fn run(
        self,
        cache: &SharedCache,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ControllerError> {
        until_shutdown(shutdown, |token| self.run_until_cancelled(cache, token)).await
    }

    /// Like [`run`](Self::run), stopping when `token` is cancelled.
    pub(crate) async fn run_until_cancelled(
        self,
        cache: &SharedCache,
        token: CancellationToken,
    ) -> Result<(), ControllerError> {
        let prepared = self.prepare(cache)?;
        let name = prepared.settings.name.clone();
        cache.start().map_err(|source| ControllerError::Watch {
            controller: name.clone(),
            kind: "(starting the cache)".to_owned(),
            source,
        })?;
        // A missing CRD or an unreachable server fails the run after a few
        // attempts instead of waiting out the sync timeout (as a manager does).
        let workers = token.child_token();
        let run = prepared.run(workers.clone(), None);
        tokio::pin!(run);
        let checked = tokio::select! {
            result = &mut run => return result,
            checked = cache.wait_for_start(START_LIST_ATTEMPTS, "its configured URL", &workers) => checked,
        };
        match checked {
            Ok(()) => run.await,
            Err(source) => {
                workers.cancel();
                let _ = run.await;
                Err(ControllerError::Start {
                    controller: name,
                    source,
                })
            }
        }
    }

    /// Builds the queue and registers every watch on `cache`, so events
    /// start filling the queue; no reconcile runs until
    /// [`Prepared::run`]. On error nothing stays registered.
    pub(crate) fn prepare(mut self, cache: &SharedCache) -> Result<Prepared<R>, ControllerError> {
        let limiter = self.rate_limiter.take();
        let observer = self
            .observer
            .take()
            .or_else(|| self.reconcile_observer(None));
        let settings = self.settings.clone();
        let sources = std::mem::take(&mut self.sources);
        #[cfg(feature = "multicluster")]
        if self.watches_the_hub() {
            return Err(ControllerError::HubWatchesNeedMulticluster {
                controller: settings.name,
            });
        }
        let mut prepared = self.prepare_on(cache, settings, limiter, observer)?;
        #[cfg(feature = "multicluster")]
        self.feed_member_watches(&prepared.queue)?;
        for source in sources {
            let registered =
                watch::forward_source(&prepared.settings.name, source, &prepared.queue)
                    .map_err(|failed| watch_failed(&prepared.settings.name, failed))?;
            prepared.watches.push(registered);
        }
        Ok(prepared)
    }

    /// The reconcile observer of this controller (of its instance in
    /// member cluster `cluster`), made now (its series exist from here
    /// on), if anything observes it.
    pub(super) fn reconcile_observer(
        &self,
        cluster: Option<&str>,
    ) -> Option<Arc<dyn ReconcileObserver>> {
        self.observers.as_ref().map(|observers| {
            observers.reconcile_observer(
                &self.settings.name,
                self.settings.max_concurrent_reconciles,
                cluster,
            )
        })
    }

    /// [`prepare`](Self::prepare) on `cache` with `settings`, leaving the
    /// builder as it was (its external sources too, which only `prepare`
    /// takes): what a multicluster controller does once per engaged
    /// cluster (each with a queue of its own).
    pub(super) fn prepare_on(
        &self,
        cache: &SharedCache,
        settings: RunSettings,
        rate_limiter: Option<Box<dyn RateLimiter<Request>>>,
        observer: Option<Arc<dyn ReconcileObserver>>,
    ) -> Result<Prepared<R>, ControllerError> {
        let mut builder = WorkQueue::builder().name(settings.name.clone());
        if let Some(limiter) = rate_limiter {
            builder = builder.rate_limiter(limiter);
        }
        if let Some(quota) = self.throttle {
            builder = builder.throttle(quota);
        }
        if let Some(observers) = &self.observers {
            #[cfg(feature = "multicluster")]
            let cluster = settings.cluster.as_ref().map(|c| c.as_str());
            #[cfg(not(feature = "multicluster"))]
            let cluster = None;
            builder = builder.metrics_provider(observers.queue_metrics(cluster));
        }
        let queue = builder.build();
        let target = WatchTarget {
            queue: queue.clone(),
            event_filters: Arc::from(self.event_filters.clone()),
        };
        let mut prepared = Prepared {
            settings,
            reconciler: Arc::clone(&self.reconciler),
            cache: cache.clone(),
            queue,
            watches: Vec::with_capacity(self.watches.len()),
            stats: Arc::clone(&self.stats),
            observer,
        };
        #[cfg(feature = "shard")]
        if let Some(shard) = &prepared.settings.shard {
            sharded::divide_cache::<R::Object>(
                shard,
                cache,
                &self.primary,
                &self.sharded_kinds,
                &prepared.settings.name,
            );
        }
        for index in &self.indexes {
            index(cache).map_err(|failed| watch_failed(&prepared.settings.name, failed))?;
        }
        for watch in &self.watches {
            // On error, dropping `prepared` shuts the queue down and
            // removes the watches registered so far.
            let registered = watch(cache, &target)
                .map_err(|failed| watch_failed(&prepared.settings.name, failed))?;
            prepared.watches.push(registered);
        }
        Ok(prepared)
    }
}

/// The error of controller `controller` whose watch (or index) of `kind`
/// could not be registered on the cache.
fn watch_failed(controller: &str, (kind, source): (String, CacheError)) -> ControllerError {
    ControllerError::Watch {
        controller: controller.to_owned(),
        kind,
        source,
    }
}

/// Runs `run` with a token cancelled when `shutdown` completes, and
/// returns its output (what a controller's or a fleet's `run` does with
/// its `run_until_cancelled`).
pub(crate) async fn until_shutdown<F: Future>(
    shutdown: impl Future<Output = ()>,
    run: impl FnOnce(CancellationToken) -> F,
) -> F::Output {
    let token = CancellationToken::new();
    let run = run(token.clone());
    tokio::pin!(run);
    tokio::select! {
        output = &mut run => return output,
        () = shutdown => token.cancel(),
    }
    run.await
}

/// A controller whose watches are registered: its queue fills while it
/// waits to [`run`](Self::run). Dropping it shuts the queue down and
/// removes the watches.
pub(crate) struct Prepared<R> {
    settings: RunSettings,
    reconciler: Arc<R>,
    cache: SharedCache,
    pub(super) queue: WorkQueue<Request>,
    watches: Vec<RegisteredWatch>,
    stats: Arc<ReconcileStats>,
    observer: Option<Arc<dyn ReconcileObserver>>,
}

impl<R> Drop for Prepared<R> {
    fn drop(&mut self) {
        self.queue.shutdown();
        for watch in self.watches.drain(..) {
            (watch.remove)();
        }
    }
}

impl<R: Reconcile> Prepared<R> {
    /// Waits for the watched caches to sync, then for `gate` (if any), then
    /// reconciles until `token` is cancelled (running reconciles get the
    /// shutdown timeout) or the gate's leading scope is (running reconciles
    /// are abandoned at once: another replica may take over).
    pub(crate) async fn run(
        self,
        token: CancellationToken,
        gate: Option<StartGate>,
    ) -> Result<(), ControllerError> {
        self.run_with(token, Start::Gated(gate)).await
    }

    /// A fleet member's instance: waits for its own watches to sync (as long
    /// as it takes), then reconciles until `token` is cancelled (graceful)
    /// or `disengaged` is (at once).
    #[cfg(feature = "multicluster")]
    pub(super) async fn run_member(
        self,
        token: CancellationToken,
        disengaged: CancellationToken,
    ) -> Result<(), ControllerError> {
        self.run_with(token, Start::Member { disengaged }).await
    }

    async fn run_with(self, token: CancellationToken, start: Start) -> Result<(), ControllerError> {
        let workers = Workers {
            settings: &self.settings,
            reconciler: Arc::clone(&self.reconciler),
            cache: &self.cache,
            queue: &self.queue,
            stats: &self.stats,
            observer: self.observer.clone(),
        };
        workers.run(&self.watches, token, start).await
    }
}
