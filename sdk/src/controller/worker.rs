//! One reconcile of one key, and what its result does to the queue.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use tracing::Instrument;

use super::stats::{ReconcileObserver, ReconcileResult, ReconcileStats};
use crate::reconcile::{ActionKind, Context, ControllerShared, Error, Reconcile, Request};
use crate::workqueue::WorkQueue;

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Done,
    Requeue,
    RequeueAfter(Duration),
    Retry,
    Terminal,
}

/// Runs `reconcile` for `request` (recovering a panic, enforcing the
/// timeout), applies the result to the queue, and marks the key done.
#[cfg(test)]
pub(crate) async fn process<R: Reconcile>(
    reconciler: &R,
    shared: &Arc<ControllerShared>,
    queue: &WorkQueue<Request>,
    stats: &ReconcileStats,
    timeout: Option<Duration>,
    request: Request,
) -> Outcome {
    process_observed(reconciler, shared, queue, stats, None, timeout, request).await
}

/// [`process`], also telling `observer` (if any) when the reconcile starts
/// and how it ended.
pub(crate) async fn process_observed<R: Reconcile>(
    reconciler: &R,
    shared: &Arc<ControllerShared>,
    queue: &WorkQueue<Request>,
    stats: &ReconcileStats,
    observer: Option<&dyn ReconcileObserver>,
    timeout: Option<Duration>,
    request: Request,
) -> Outcome {
    let reconcile_id = format!("{:016x}", fastrand::u64(..));
    let span = tracing::info_span!(
        "reconcile",
        controller = %shared.name,
        namespace = request.namespace.as_deref().unwrap_or(""),
        name = %request.name,
        reconcile_id = %reconcile_id,
    );
    let ctx = Context::new(Arc::clone(shared), request.clone());
    let active = Active::start(stats, observer);
    let started = tokio::time::Instant::now();
    let run = AssertUnwindSafe(reconciler.reconcile(request.clone(), &ctx)).catch_unwind();
    let result = match timeout {
        Some(limit) => tokio::time::timeout(limit, run).await.ok(),
        None => Some(run.await),
    };
    drop(active);

    let mut failure: Option<Error> = None;
    let (outcome, observed) = async {
        match result {
            None => {
                failure = Some(Error::retryable(format!(
                    "reconcile timed out after {:?}",
                    timeout.unwrap_or_default()
                )));
                ReconcileStats::bump(&stats.timeout);
                ReconcileStats::bump(&stats.error);
                tracing::warn!(timeout = ?timeout, "reconcile timed out; retrying with backoff");
                (Outcome::Retry, ReconcileResult::Timeout)
            }
            Some(Err(panic)) => {
                failure = Some(Error::retryable(format!(
                    "reconcile panicked: {}",
                    panic_message(&*panic)
                )));
                ReconcileStats::bump(&stats.panic);
                ReconcileStats::bump(&stats.error);
                tracing::error!(
                    panic = panic_message(&*panic),
                    "reconcile panicked; retrying with backoff"
                );
                (Outcome::Retry, ReconcileResult::Panic)
            }
            Some(Ok(Err(error))) if error.is_terminal() => {
                ReconcileStats::bump(&stats.terminal_error);
                ReconcileStats::bump(&stats.error);
                tracing::error!(%error, "reconcile failed with a terminal error; not requeued");
                failure = Some(error);
                (Outcome::Terminal, ReconcileResult::TerminalError)
            }
            Some(Ok(Err(error))) => {
                ReconcileStats::bump(&stats.error);
                tracing::error!(%error, "reconcile failed; retrying with backoff");
                failure = Some(error);
                (Outcome::Retry, ReconcileResult::Error)
            }
            Some(Ok(Ok(action))) => match action.kind() {
                ActionKind::Done => {
                    ReconcileStats::bump(&stats.success);
                    (Outcome::Done, ReconcileResult::Success)
                }
                ActionKind::Requeue => {
                    ReconcileStats::bump(&stats.requeue);
                    (Outcome::Requeue, ReconcileResult::Requeue)
                }
                ActionKind::RequeueAfter(delay) => {
                    ReconcileStats::bump(&stats.requeue_after);
                    (Outcome::RequeueAfter(delay), ReconcileResult::RequeueAfter)
                }
            },
        }
    }
    .instrument(span.clone())
    .await;
    if let Some(error) = failure {
        on_error(reconciler, &request, &error, &ctx, timeout)
            .instrument(span)
            .await;
    }
    if let Some(observer) = observer {
        observer.finished(observed, started.elapsed());
    }

    match outcome {
        Outcome::Done | Outcome::Terminal => queue.forget(&request),
        Outcome::RequeueAfter(delay) => {
            queue.forget(&request);
            queue.add_after(request.clone(), delay);
        }
        Outcome::Requeue | Outcome::Retry => queue.add_rate_limited(request.clone()),
    }
    queue.done(&request);
    outcome
}

/// Hands a failure to [`Reconcile::on_error`], recovering a panic and
/// bounding it by the reconcile timeout.
async fn on_error<R: Reconcile>(
    reconciler: &R,
    request: &Request,
    error: &Error,
    ctx: &Context,
    timeout: Option<Duration>,
) {
    let hook = AssertUnwindSafe(reconciler.on_error(request, error, ctx)).catch_unwind();
    let finished = match timeout {
        Some(limit) => tokio::time::timeout(limit, hook).await.ok(),
        None => Some(hook.await),
    };
    match finished {
        None => tracing::warn!(timeout = ?timeout, "on_error timed out"),
        Some(Err(panic)) => {
            tracing::error!(panic = panic_message(&*panic), "on_error panicked");
        }
        Some(Ok(())) => {}
    }
}

/// Counts a reconcile as active until dropped, also when its worker is
/// aborted mid-reconcile (leadership lost, shutdown timeout).
struct Active<'a> {
    stats: &'a ReconcileStats,
    observer: Option<&'a dyn ReconcileObserver>,
}

impl<'a> Active<'a> {
    fn start(stats: &'a ReconcileStats, observer: Option<&'a dyn ReconcileObserver>) -> Self {
        stats.active.fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = observer {
            observer.started();
        }
        Self { stats, observer }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.stats.active.fetch_sub(1, Ordering::Relaxed);
        if let Some(observer) = self.observer {
            observer.stopped();
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)")
}
