//! A sharded controller's reconcile under a permit that lapses, on tokio's
//! paused clock, through the real worker path (`admit`, `run_under`,
//! `process_observed`) and workqueue, over a shard gate set by hand.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::sharded::{admit, run_under};
use super::stats::ReconcileStats;
use super::tests::shared;
use super::worker::process_observed;
use crate::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use crate::shard::ShardHandle;
use crate::workqueue::WorkQueue;

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Each reconcile first waits for its next `responses` receiver (a call
/// to some server: no receiver left, no wait), then "writes".
#[derive(Default)]
struct Gated {
    responses: Mutex<VecDeque<oneshot::Receiver<()>>>,
    started: AtomicUsize,
    writes: AtomicUsize,
    /// Set when a reconcile's future is dropped before it wrote.
    dropped: Arc<AtomicBool>,
}

impl Gated {
    fn new(responses: Vec<oneshot::Receiver<()>>) -> Self {
        Self {
            responses: Mutex::new(responses.into()),
            ..Self::default()
        }
    }
}

impl Reconcile for Gated {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let guard = SetOnDrop(self.dropped.clone());
        let response = self.responses.lock().unwrap().pop_front();
        if let Some(response) = response {
            let _ = response.await;
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        std::mem::forget(guard);
        Ok(Action::done())
    }
}

/// One worker of a sharded controller, as `Workers::run` runs it, for
/// `how_long`.
async fn work(
    shard: &ShardHandle,
    queue: &WorkQueue<Request>,
    reconciler: &Gated,
    stats: &ReconcileStats,
    how_long: Duration,
) {
    let shared = shared();
    let until = Instant::now() + how_long;
    while let Ok(Some(request)) = tokio::time::timeout_at(until, queue.get_with_priority()).await {
        let Some(permit) = admit(shard, queue, &request.0) else {
            continue;
        };
        let key = request.0.clone();
        let reconcile = process_observed(reconciler, &shared, queue, stats, None, None, request);
        run_under(shard, queue, "test", &key, permit, reconcile).await;
    }
}

/// What each test starts from: a replica `me` active until `deadline`, a
/// reconciler whose calls wait on `responses`, and one key (`ns/a` unless
/// given) taken from the queue and admitted.
struct Fixture {
    shard: ShardHandle,
    queue: WorkQueue<Request>,
    reconciler: Arc<Gated>,
    stats: Arc<ReconcileStats>,
    request: Request,
    priority: crate::workqueue::Priority,
    permit: crate::shard::ShardPermit,
}

impl Fixture {
    async fn new(shard: ShardHandle, responses: Vec<oneshot::Receiver<()>>, key: Request) -> Self {
        let queue = WorkQueue::builder().build();
        queue.add(key);
        let (request, priority) = queue.get_with_priority().await.unwrap();
        let permit = admit(&shard, &queue, &request).unwrap();
        Self {
            shard,
            queue,
            reconciler: Arc::new(Gated::new(responses)),
            stats: Arc::new(ReconcileStats::default()),
            request,
            priority,
            permit,
        }
    }
}

/// An active replica `me` whose renew deadline is `deadline` from now.
fn active_me(deadline: Duration) -> ShardHandle {
    let shard = ShardHandle::detached("me");
    shard.activate(&["me"], deadline);
    shard
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_past_the_renew_deadline_is_dropped_and_runs_again_only_under_a_new_permit() {
    let (logs, _guard) = crate::test_log::capture();
    let (_never, blocked) = oneshot::channel();
    let f = Fixture::new(
        active_me(Duration::from_secs(2)),
        vec![blocked],
        Request::namespaced("ns", "a"),
    )
    .await;
    let started = Instant::now();
    let shared = shared();
    let reconcile = process_observed(
        &*f.reconciler,
        &shared,
        &f.queue,
        &f.stats,
        None,
        None,
        (f.request.clone(), f.priority),
    );
    let out = run_under(&f.shard, &f.queue, "test", &f.request, f.permit, reconcile).await;
    assert!(out.is_none(), "cancelled");
    assert_eq!(started.elapsed(), Duration::from_secs(2), "at the deadline");
    assert!(f.reconciler.dropped.load(Ordering::SeqCst));
    assert_eq!(f.reconciler.writes.load(Ordering::SeqCst), 0);
    assert_eq!(f.stats.snapshot().active, 0);
    assert_eq!(f.stats.snapshot().error, 0, "not counted as a failure");
    assert_eq!(f.shard.gate.in_flight(), 0, "the permit is released");
    let lines = logs.with_message("shard permit lapsed; reconcile cancelled");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].field("reason"), Some("renew deadline passed"));
    assert_eq!(lines[0].field("controller"), Some("test"));
    assert_eq!(lines[0].field("namespace"), Some("ns"));
    assert_eq!(lines[0].field("name"), Some("a"));

    // Not run again while this replica may not start it ...
    work(
        &f.shard,
        &f.queue,
        &f.reconciler,
        &f.stats,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(f.reconciler.started.load(Ordering::SeqCst), 1);
    // ... and run once it holds a permit again (the key is still its own).
    f.shard.activate(&["me"], Duration::from_secs(10));
    work(
        &f.shard,
        &f.queue,
        &f.reconciler,
        &f.stats,
        Duration::from_secs(2),
    )
    .await;
    assert_eq!(f.reconciler.started.load(Ordering::SeqCst), 2);
    assert_eq!(f.reconciler.writes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_whose_key_moves_is_dropped_at_once_and_the_key_left_to_its_owner() {
    // A key the member set {me, other} gives to `other`.
    let view = ShardHandle::detached("other");
    view.activate(&["me", "other"], Duration::from_secs(60));
    let key = (0..)
        .map(|i| Request::namespaced("ns", format!("k{i}")))
        .find(|r| view.owns(&format!("ns/{}", r.name)))
        .unwrap();
    let (_never, blocked) = oneshot::channel();
    let f = Fixture::new(active_me(Duration::from_secs(60)), vec![blocked], key).await;
    let running = tokio::spawn({
        let (shard, queue, reconciler, stats, request, priority, permit) = (
            f.shard.clone(),
            f.queue.clone(),
            f.reconciler.clone(),
            f.stats.clone(),
            f.request.clone(),
            f.priority,
            f.permit,
        );
        async move {
            let shared = shared();
            let reconcile = process_observed(
                &*reconciler,
                &shared,
                &queue,
                &stats,
                None,
                None,
                (request.clone(), priority),
            );
            run_under(&shard, &queue, "test", &request, permit, reconcile).await
        }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!running.is_finished());
    let moved = Instant::now();
    f.shard.observe(&["me", "other"]);
    let out = running.await.unwrap();
    assert!(out.is_none());
    assert_eq!(moved.elapsed(), Duration::ZERO, "at once");
    assert!(f.reconciler.dropped.load(Ordering::SeqCst));
    assert_eq!(f.shard.gate.in_flight(), 0);
    // Not requeued: the key is its new owner's.
    assert_eq!(f.queue.len(), 0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(f.queue.len(), 0);
}

/// A replica frozen (SIGSTOP) mid-reconcile, past its renew deadline, with
/// the reply its reconcile awaited arriving as it resumes: the first poll
/// after resuming drops the reconcile before it can write.
#[tokio::test(start_paused = true)]
async fn a_reconcile_resumed_past_its_deadline_is_dropped_before_it_writes() {
    let (reply, awaited) = oneshot::channel();
    let f = Fixture::new(
        active_me(Duration::from_secs(2)),
        vec![awaited],
        Request::namespaced("ns", "a"),
    )
    .await;
    let shared = shared();
    let reconcile = process_observed(
        &*f.reconciler,
        &shared,
        &f.queue,
        &f.stats,
        None,
        None,
        (f.request.clone(), f.priority),
    );
    let mut run = std::pin::pin!(run_under(
        &f.shard, &f.queue, "test", &f.request, f.permit, reconcile
    ));
    assert!(futures::poll!(run.as_mut()).is_pending());
    assert_eq!(f.reconciler.started.load(Ordering::SeqCst), 1);
    // Frozen: not polled while the clock passes the deadline.
    tokio::time::advance(Duration::from_secs(5)).await;
    // Resumed with the reply in: both branches are ready.
    reply.send(()).unwrap();
    assert_eq!(futures::poll!(run.as_mut()), std::task::Poll::Ready(None));
    assert_eq!(f.reconciler.writes.load(Ordering::SeqCst), 0, "no write");
    assert!(f.reconciler.dropped.load(Ordering::SeqCst));
}
