//! One reconcile of one key, and what its result does to the queue.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use tracing::Instrument;

use super::observer::{ReconcileObserver, ReconcileResult};
use super::stats::ReconcileStats;
use crate::reconcile::{ActionKind, Context, ControllerShared, Reconcile, ReconcileError, Request};
use crate::workqueue::{Priority, WorkQueue};

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Done,
    Requeue,
    RequeueAfter(Duration),
    Retry,
    /// A retryable error that chose its own delay
    /// ([`ReconcileError::retry_after`]).
    RetryAfter(Duration),
    Terminal,
}

/// Runs `reconcile` for `request` (recovering a panic, enforcing the
/// timeout), applies the result to the queue (requeues keep the key's
/// `priority`), marks the key done, and tells `observer` (if any) when the
/// reconcile starts and how it ended.
pub(crate) async fn process_observed<R: Reconcile>(
    reconciler: &R,
    shared: &Arc<ControllerShared>,
    queue: &WorkQueue<Request>,
    stats: &ReconcileStats,
    observer: Option<&dyn ReconcileObserver>,
    timeout: Option<Duration>,
    (request, priority): (Request, Priority),
) -> Outcome {
    let reconcile_id = format!("{:016x}", fastrand::u64(..));
    let span = tracing::info_span!(
        "reconcile",
        controller = %shared.name,
        namespace = request.namespace.as_deref().unwrap_or(""),
        name = %request.name,
        reconcile_id = %reconcile_id,
        cluster = tracing::field::Empty,
    );
    #[cfg(feature = "multicluster")]
    if let Some(cluster) = &shared.cluster {
        span.record("cluster", cluster.as_str());
    }
    let ctx = Context::<R::Object>::new(Arc::clone(shared), request.clone());
    let active = Active::start(stats, observer);
    let started = tokio::time::Instant::now();
    // As controller-runtime's "Reconciling" / "Reconcile successful" (debug
    // there too): with `opkit::controller=debug`, every reconcile's start
    // and end (its `on_error` included), the object on the event itself.
    tracing::debug!(
        controller = %shared.name,
        namespace = request.namespace.as_deref().unwrap_or(""),
        name = %request.name,
        reconcile_id = %reconcile_id,
        "reconcile started"
    );
    let run = AssertUnwindSafe(reconciler.reconcile(request.clone(), &ctx)).catch_unwind();
    let result = match timeout {
        Some(limit) => tokio::time::timeout(limit, run).await.ok(),
        None => Some(run.await),
    };
    drop(active);

    let (outcome, observed, failure) = async {
        match result {
            None => {
                ReconcileStats::bump(&stats.timeout);
                ReconcileStats::bump(&stats.error);
                let why = match timeout {
                    Some(limit) => format!("reconcile timed out after {limit:?}"),
                    None => "reconcile timed out".to_owned(),
                };
                (
                    Outcome::Retry,
                    ReconcileResult::Timeout,
                    Some(ReconcileError::retryable(why)),
                )
            }
            Some(Err(panic)) => {
                ReconcileStats::bump(&stats.panic);
                ReconcileStats::bump(&stats.error);
                let why = format!("reconcile panicked: {}", panic_message(&*panic));
                (
                    Outcome::Retry,
                    ReconcileResult::Panic,
                    Some(ReconcileError::retryable(why)),
                )
            }
            Some(Ok(Err(error))) if error.is_terminal() => {
                ReconcileStats::bump(&stats.terminal_error);
                ReconcileStats::bump(&stats.error);
                (
                    Outcome::Terminal,
                    ReconcileResult::TerminalError,
                    Some(error),
                )
            }
            Some(Ok(Err(error))) => {
                ReconcileStats::bump(&stats.error);
                let outcome = match error.retry_delay() {
                    Some(delay) => Outcome::RetryAfter(delay),
                    None => Outcome::Retry,
                };
                (outcome, ReconcileResult::Error, Some(error))
            }
            Some(Ok(Ok(action))) => match action.kind() {
                ActionKind::Done => {
                    ReconcileStats::bump(&stats.success);
                    (Outcome::Done, ReconcileResult::Success, None)
                }
                ActionKind::Requeue => {
                    ReconcileStats::bump(&stats.requeue);
                    (Outcome::Requeue, ReconcileResult::Requeue, None)
                }
                ActionKind::RequeueAfter(delay) => {
                    ReconcileStats::bump(&stats.requeue_after);
                    (
                        Outcome::RequeueAfter(delay),
                        ReconcileResult::RequeueAfter,
                        None,
                    )
                }
            },
        }
    }
    .instrument(span.clone())
    .await;
    if let Some(error) = &failure {
        on_error(reconciler, &request, error, &ctx, timeout)
            .instrument(span)
            .await;
    }
    tracing::debug!(
        controller = %shared.name,
        namespace = request.namespace.as_deref().unwrap_or(""),
        name = %request.name,
        reconcile_id = %reconcile_id,
        result = ?observed,
        elapsed = ?started.elapsed(),
        "reconcile finished"
    );
    if let Some(observer) = observer {
        observer.finished(observed, started.elapsed());
    }

    // As controller-runtime: success forgets the key's failure history; a
    // terminal error keeps it (the next failure after a fix backs off from
    // where it was); every requeue keeps the priority the key was queued
    // with (a retry of an initial-list key stays behind fresh events).
    let retry = match outcome {
        Outcome::Done => {
            queue.forget(&request);
            None
        }
        Outcome::Terminal => None,
        Outcome::RequeueAfter(delay) => {
            queue.forget(&request);
            queue.add_after_with_priority(request.clone(), delay, priority);
            None
        }
        Outcome::RetryAfter(delay) => {
            queue.add_after_with_priority(request.clone(), delay, priority);
            None
        }
        Outcome::Requeue | Outcome::Retry => {
            queue.add_rate_limited_reporting(request.clone(), priority)
        }
    };
    log_outcome(
        &shared.name,
        &request,
        &reconcile_id,
        outcome,
        failure.as_ref().map(ToString::to_string).as_deref(),
        retry,
    );
    queue.done(&request);
    outcome
}

/// Hands a failure to [`Reconcile::on_error`], recovering a panic and
/// bounding it by the reconcile timeout.
async fn on_error<R: Reconcile>(
    reconciler: &R,
    request: &Request,
    error: &ReconcileError,
    ctx: &Context<R::Object>,
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

/// Logs how a reconcile ended, when it is worth a line: every failure at
/// error level (retried ones too), with the controller, the object, the
/// reconcile id, and for a retry its attempt number and delay, as
/// controller-runtime's "Reconciler error". The fields are on the event
/// itself (not only on the `reconcile` span) so that they are there at
/// any span filter.
fn log_outcome(
    controller: &str,
    request: &Request,
    reconcile_id: &str,
    outcome: Outcome,
    failure: Option<&str>,
    retry: Option<(Duration, u32)>,
) {
    let namespace = request.namespace.as_deref().unwrap_or("");
    let name = request.name.as_str();
    let error = failure.unwrap_or("");
    match (outcome, retry) {
        (Outcome::Retry, Some((delay, attempt))) => tracing::error!(
            controller,
            namespace,
            name,
            reconcile_id,
            error,
            attempt,
            retry_in = ?delay,
            "reconcile failed; retrying with backoff"
        ),
        (Outcome::RetryAfter(delay), _) => tracing::error!(
            controller,
            namespace,
            name,
            reconcile_id,
            error,
            retry_in = ?delay,
            "reconcile failed; retrying after the delay it asked for"
        ),
        (Outcome::Retry, None) => tracing::error!(
            controller,
            namespace,
            name,
            reconcile_id,
            error,
            "reconcile failed; not retried: the queue is shutting down"
        ),
        (Outcome::Terminal, _) => tracing::error!(
            controller,
            namespace,
            name,
            reconcile_id,
            error,
            "reconcile failed with a terminal error; not requeued"
        ),
        (Outcome::Requeue, Some((delay, attempt))) => tracing::debug!(
            controller,
            namespace,
            name,
            reconcile_id,
            attempt,
            retry_in = ?delay,
            "reconcile asked to requeue; requeued with backoff"
        ),
        _ => {}
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
