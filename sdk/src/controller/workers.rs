//! The worker pool of one controller: waits for the caches (and the
//! leadership gate), then runs `max_concurrent_reconciles` workers taking
//! keys from the queue, and drains them at shutdown.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::error::ControllerError;
use super::observer::ReconcileObserver;
use super::settings::{RunSettings, ShutdownBound};
#[cfg(feature = "shard")]
use super::sharded;
use super::stats::ReconcileStats;
use super::watch::RegisteredWatch;
use super::worker;
use crate::cache::SharedCache;
use crate::client::EventRecorder;
use crate::reconcile::{ControllerShared, Reconcile, Request};
use crate::workqueue::WorkQueue;

/// Resolves to the leading scope once the workers of a prepared controller
/// may start (a token cancelled when leadership ends), or to `None` if they
/// never may (the elector stopped first).
pub(crate) type StartGate = futures::future::BoxFuture<'static, Option<CancellationToken>>;

/// Everything the worker pool of one controller needs.
pub(super) struct Workers<'a, R> {
    pub(super) settings: &'a RunSettings,
    pub(super) reconciler: Arc<R>,
    pub(super) cache: &'a SharedCache,
    pub(super) queue: &'a WorkQueue<Request>,
    pub(super) stats: &'a Arc<ReconcileStats>,
    pub(super) observer: Option<Arc<dyn ReconcileObserver>>,
}

/// When the workers of a prepared controller start, and what ends them
/// at once.
pub(super) enum Start {
    /// Once the watches synced (failing after the sync timeout), then once
    /// the gate (if any) opens: its scope ends the workers at once.
    Gated(Option<StartGate>),
    /// A fleet member's instance: once its own watches synced, as long as
    /// that takes (a kind that never syncs there is logged at each sync
    /// timeout and holds up no other controller or cluster); `disengaged`
    /// ends the wait, and the workers at once.
    #[cfg(feature = "multicluster")]
    Member { disengaged: CancellationToken },
}

impl<R: Reconcile> Workers<'_, R> {
    /// Waits for the watched caches (and the start's gate), then runs
    /// `count` workers until `token` is cancelled, then gives running
    /// reconciles the shutdown timeout. If the start's scope ends first,
    /// running reconciles are abandoned at once.
    pub(super) async fn run(
        self,
        watches: &[RegisteredWatch],
        token: CancellationToken,
        start: Start,
    ) -> Result<(), ControllerError> {
        // A member's wait ends when it is disengaged; a gated one's only at shutdown.
        let abandon = match &start {
            Start::Gated(_) => CancellationToken::new(),
            #[cfg(feature = "multicluster")]
            Start::Member { disengaged } => disengaged.clone(),
        };
        for watch in watches {
            // Only a member's wait goes round (at each sync timeout).
            #[cfg_attr(not(feature = "multicluster"), allow(clippy::never_loop))]
            loop {
                let synced = tokio::select! {
                    () = token.cancelled() => return Ok(()),
                    () = abandon.cancelled() => return Ok(()),
                    synced = tokio::time::timeout(self.settings.cache_sync_timeout, (watch.synced)()) => synced,
                };
                match synced {
                    Ok(true) => break,
                    #[cfg(feature = "multicluster")]
                    Err(_) if matches!(start, Start::Member { .. }) => tracing::warn!(
                        controller = %self.settings.name,
                        cluster = %self.settings.cluster.as_ref().map_or("", |c| c.as_str()),
                        kind = %watch.kind,
                        timeout = ?self.settings.cache_sync_timeout,
                        "not synced in this member cluster yet; its informer keeps retrying with \
                         backoff, and no other controller or cluster waits for it"
                    ),
                    Ok(false) | Err(_) => {
                        return Err(ControllerError::CacheSync {
                            controller: self.settings.name.clone(),
                            kind: watch.kind.clone(),
                            timeout: self.settings.cache_sync_timeout,
                        });
                    }
                }
            }
        }
        let scope = match start {
            Start::Gated(None) => CancellationToken::new(),
            Start::Gated(Some(gate)) => {
                tracing::debug!(
                    controller = %self.settings.name,
                    "caches synced; waiting for leadership"
                );
                tokio::select! {
                    () = token.cancelled() => return Ok(()),
                    scope = gate => match scope {
                        Some(scope) => scope,
                        None => return Ok(()),
                    },
                }
            }
            #[cfg(feature = "multicluster")]
            Start::Member { disengaged } => disengaged,
        };
        tracing::info!(
            controller = %self.settings.name,
            workers = self.settings.max_concurrent_reconciles,
            "caches synced; starting workers"
        );
        let recorder = EventRecorder::builder(self.cache.client().clone(), &self.settings.name)
            .build()
            .map_err(|source| ControllerError::EventRecorder {
                controller: self.settings.name.clone(),
                source,
            })?;
        let shared = Arc::new(ControllerShared {
            name: self.settings.name.clone(),
            cache: self.cache.clone(),
            recorder,
            read_sync_timeout: self.settings.cache_sync_timeout,
            read_your_writes: self.settings.read_your_writes,
            field_manager: self
                .settings
                .field_manager
                .clone()
                .unwrap_or_else(|| self.settings.name.clone()),
            #[cfg(feature = "multicluster")]
            cluster: self.settings.cluster.clone(),
        });
        let mut tasks = tokio::task::JoinSet::new();
        #[cfg(feature = "shard")]
        let resync = self.settings.shard.clone().map(|shard| {
            tokio::spawn(sharded::resync_on_rebalance::<R>(
                shard,
                self.cache.clone(),
                self.queue.clone(),
                self.settings.name.clone(),
            ))
        });
        #[cfg(feature = "shard")]
        let _resync = resync.map(tokio_util::task::AbortOnDropHandle::new);
        #[cfg(feature = "shard")]
        let labeller = self.settings.shard.clone().map(|shard| {
            tokio::spawn(crate::shard::label_primary::<R::Object>(
                shard,
                self.cache.clone(),
                self.settings.name.clone(),
            ))
        });
        #[cfg(feature = "shard")]
        let _labeller = labeller.map(tokio_util::task::AbortOnDropHandle::new);
        for _ in 0..self.settings.max_concurrent_reconciles {
            #[cfg(feature = "shard")]
            let shard = self.settings.shard.clone();
            let reconciler = Arc::clone(&self.reconciler);
            let shared = Arc::clone(&shared);
            let queue = self.queue.clone();
            let stats = Arc::clone(self.stats);
            let observer = self.observer.clone();
            let token = token.clone();
            let scope = scope.clone();
            let timeout = self.settings.reconcile_timeout;
            tasks.spawn(async move {
                loop {
                    // A cancelled token wins over a ready key: no new work at shutdown.
                    let request = tokio::select! {
                        biased;
                        () = token.cancelled() => break,
                        () = scope.cancelled() => break,
                        request = queue.get_with_priority() => match request {
                            Some(request) => request,
                            None => break,
                        },
                    };
                    #[cfg(feature = "shard")]
                    if let Some(shard) = &shard {
                        let Some(permit) = sharded::admit(shard, &queue, &request.0) else {
                            continue;
                        };
                        let key = request.0.clone();
                        let reconcile = worker::process_observed(
                            &*reconciler,
                            &shared,
                            &queue,
                            &stats,
                            observer.as_deref(),
                            timeout,
                            request,
                        );
                        sharded::run_under(shard, &queue, &shared.name, &key, permit, reconcile)
                            .await;
                        continue;
                    }
                    worker::process_observed(
                        &*reconciler,
                        &shared,
                        &queue,
                        &stats,
                        observer.as_deref(),
                        timeout,
                        request,
                    )
                    .await;
                }
            });
        }
        tokio::select! {
            () = token.cancelled() => {}
            () = scope.cancelled() => {
                // The fleet logs a disengaged cluster; only a lost
                // leadership is this controller's own news.
                #[cfg(feature = "multicluster")]
                let disengaged = self.settings.cluster.is_some();
                #[cfg(not(feature = "multicluster"))]
                let disengaged = false;
                if !disengaged {
                    tracing::warn!(
                        controller = %self.settings.name,
                        "leadership lost; abandoning running reconciles"
                    );
                }
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
                return Ok(());
            }
        }
        tracing::info!(
            controller = %self.settings.name,
            "shutting down; waiting for running reconciles"
        );
        let ShutdownBound::Own(bound) = self.settings.shutdown else {
            // The runner bounds the drain (and aborts this task at its end).
            while tasks.join_next().await.is_some() {}
            return Ok(());
        };
        let drained =
            tokio::time::timeout(bound, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                controller = %self.settings.name,
                timeout = ?bound,
                "reconciles still running at the shutdown timeout; abandoning them"
            );
            tasks.abort_all();
        }
        Ok(())
    }
}
