//! The result → queue semantics on tokio's paused clock, through the real
//! worker and workqueue (no server: the cache is never started).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::stats::ReconcileStats;
use super::worker::Outcome;
use crate::cache::SharedCache;
use crate::reconcile::ControllerShared;
use crate::reconcile::{Action, Reconcile, ReconcileError, Request};
use crate::workqueue::{Priority, WorkQueue};
use k8s_openapi::api::core::v1::ConfigMap;

/// What the scripted reconciler does on each call, in order.
#[derive(Clone, Copy, Debug)]
enum Step {
    Ok,
    RequeueAfter(Duration),
    Requeue,
    Fail,
    FailRetryAfter(Duration),
    Terminal,
    Panic,
    Hang,
}

struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    calls: Mutex<Vec<Instant>>,
    /// What `on_error` was handed: (error text, terminal?).
    failures: Mutex<Vec<(String, bool)>>,
}

impl Scripted {
    fn new(steps: &[Step]) -> Self {
        Self {
            steps: Mutex::new(steps.iter().copied().collect()),
            calls: Mutex::new(Vec::new()),
            failures: Mutex::new(Vec::new()),
        }
    }
}

impl Reconcile for Scripted {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _req: Request,
        _ctx: &crate::reconcile::Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        self.calls.lock().unwrap().push(Instant::now());
        let step = self.steps.lock().unwrap().pop_front().unwrap_or(Step::Ok);
        match step {
            Step::Ok => Ok(Action::done()),
            Step::RequeueAfter(d) => Ok(Action::requeue_after(d)),
            Step::Requeue => Ok(Action::requeue_rate_limited()),
            Step::Fail => Err(ReconcileError::retryable("transient")),
            Step::FailRetryAfter(d) => {
                Err(ReconcileError::retryable("come back later").retry_after(d))
            }
            Step::Terminal => Err(ReconcileError::terminal("invalid spec")),
            Step::Panic => panic!("reconciler bug"),
            Step::Hang => {
                std::future::pending::<()>().await;
                Ok(Action::done())
            }
        }
    }

    async fn on_error(
        &self,
        _req: &Request,
        error: &ReconcileError,
        _ctx: &crate::reconcile::Context<ConfigMap>,
    ) {
        self.failures
            .lock()
            .unwrap()
            .push((error.to_string(), error.is_terminal()));
    }
}

pub(super) fn shared() -> Arc<ControllerShared> {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    Arc::new(ControllerShared {
        name: "test".to_owned(),
        recorder: crate::client::EventRecorder::builder(client.clone(), "test")
            .build()
            .unwrap(),
        cache: SharedCache::new(client),
        read_sync_timeout: Duration::from_secs(1),
        read_your_writes: Some(Duration::from_secs(1)),
        field_manager: "test".to_owned(),
        #[cfg(feature = "multicluster")]
        cluster: None,
    })
}

/// Runs up to `rounds` reconciles of whatever the queue hands out; returns
/// the outcomes. Stops early when nothing is queued or delayed for an hour.
async fn drive(
    reconciler: &Scripted,
    queue: &WorkQueue<Request>,
    stats: &ReconcileStats,
    timeout: Option<Duration>,
    rounds: usize,
) -> Vec<Outcome> {
    let shared = shared();
    let mut outcomes = Vec::new();
    for _ in 0..rounds {
        let Ok(Some(request)) =
            tokio::time::timeout(Duration::from_secs(3600), queue.get_with_priority()).await
        else {
            break;
        };
        outcomes.push(
            super::worker::process_observed(
                reconciler, &shared, queue, stats, None, timeout, request,
            )
            .await,
        );
    }
    outcomes
}

fn gaps(calls: &[Instant]) -> Vec<Duration> {
    calls.windows(2).map(|w| w[1] - w[0]).collect()
}

fn key() -> Request {
    Request::namespaced("ns", "a")
}

#[tokio::test(start_paused = true)]
async fn error_backoff_grows_per_item_and_resets_on_success() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, Fail, Fail, Ok, Fail]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 4).await;
    assert_eq!(
        outcomes,
        [
            Outcome::Retry,
            Outcome::Retry,
            Outcome::Retry,
            Outcome::Done
        ]
    );
    assert_eq!(
        gaps(&reconciler.calls.lock().unwrap()),
        [
            Duration::from_millis(5),
            Duration::from_millis(10),
            Duration::from_millis(20)
        ]
    );
    assert_eq!(queue.num_requeues(&key()), 0, "success forgets the history");
    // The next failure starts again from the base delay.
    queue.add(key());
    let begun = Instant::now();
    drive(&reconciler, &queue, &stats, None, 2).await;
    let calls = reconciler.calls.lock().unwrap();
    assert_eq!(calls[calls.len() - 1] - begun, Duration::from_millis(5));
    assert_eq!(stats.snapshot().error, 4);
    assert_eq!(stats.snapshot().success, 2);
}

/// Issue 38 (a fault-injection run saw retry gaps of 6, 10, 20, 82, 80 and
/// 160 ms): an event for a failing key while it waits out its backoff runs
/// it at once, and that failure counts too, so the next delay is the one
/// after it, as client-go's per-item limiter does. The gap after an
/// event-woken failure is therefore twice the one the failure count
/// before the event gave; the schedule between failures stays exact.
#[tokio::test(start_paused = true)]
async fn an_event_during_backoff_runs_the_key_and_its_failure_counts() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, Fail, Fail, Fail, Fail, Fail]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let start = Instant::now();
    // Fails at 0, 5 and 15 ms; waits 20 ms after the third failure (until
    // 35 ms), but an event wakes the key at 25 ms.
    let event = {
        let queue = queue.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(25)).await;
            queue.add(key());
        })
    };
    drive(&reconciler, &queue, &stats, None, 6).await;
    event.await.unwrap();
    let at: Vec<Duration> = reconciler
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|t| *t - start)
        .collect();
    let ms = Duration::from_millis;
    // 25: the event (4th failure: its delay of 40, until 65, is later than
    // the pending wake-up at 35, and a pending delayed add keeps the
    // earlier time, as client-go's does); 35: that wake-up (5th failure:
    // next 80, until 115). Gaps: 5, 10, 10, 10, 80: after two quick
    // failures the gap is 8 times the one before.
    assert_eq!(&at[..4], [ms(0), ms(5), ms(15), ms(25)]);
    assert_eq!(at[4], ms(35), "{at:?}");
    assert_eq!(at[5], ms(115), "{at:?}");
    assert_eq!(stats.snapshot().error, 6);
}

#[tokio::test(start_paused = true)]
async fn requeue_after_fires_on_time_and_forgets_failures() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, RequeueAfter(Duration::from_secs(30)), Ok]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 3).await;
    assert_eq!(
        outcomes,
        [
            Outcome::Retry,
            Outcome::RequeueAfter(Duration::from_secs(30)),
            Outcome::Done
        ]
    );
    assert_eq!(
        gaps(&reconciler.calls.lock().unwrap()),
        [Duration::from_millis(5), Duration::from_secs(30)]
    );
    assert_eq!(stats.snapshot().requeue_after, 1);
}

/// Issue 22, decided as controller-runtime does: a terminal error does not
/// forget the key's failure history, so the next failure after a fix
/// backs off from where it was.
#[tokio::test(start_paused = true)]
async fn a_terminal_error_keeps_the_failure_history() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, Fail, Terminal, Fail]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 3).await;
    assert_eq!(
        outcomes,
        [Outcome::Retry, Outcome::Retry, Outcome::Terminal]
    );
    assert_eq!(queue.num_requeues(&key()), 2, "kept, not forgotten");
    // The next change's failure backs off from the third step (20 ms), not 5 ms.
    queue.add(key());
    drive(&reconciler, &queue, &stats, None, 1).await;
    let begun = Instant::now();
    queue.get().await;
    assert_eq!(Instant::now() - begun, Duration::from_millis(20));
}

/// Issue 22: `requeue_after(Duration::ZERO)` means done, as
/// controller-runtime's `RequeueAfter: 0`.
#[tokio::test(start_paused = true)]
async fn requeue_after_zero_is_done() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, RequeueAfter(Duration::ZERO)]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 3).await;
    assert_eq!(outcomes, [Outcome::Retry, Outcome::Done]);
    assert!(queue.is_empty(), "nothing requeued");
    assert_eq!(queue.num_requeues(&key()), 0, "history forgotten, as done");
}

/// Issue 22: an error with its own delay is counted as an error, comes back
/// after exactly that delay, and neither grows nor clears the backoff.
#[tokio::test(start_paused = true)]
async fn an_error_with_a_delay_comes_back_after_it() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, FailRetryAfter(Duration::from_secs(42)), Fail]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 3).await;
    assert_eq!(
        outcomes,
        [
            Outcome::Retry,
            Outcome::RetryAfter(Duration::from_secs(42)),
            Outcome::Retry
        ]
    );
    assert_eq!(
        gaps(&reconciler.calls.lock().unwrap()),
        [Duration::from_millis(5), Duration::from_secs(42)]
    );
    assert_eq!(stats.snapshot().error, 3);
    assert_eq!(
        reconciler.failures.lock().unwrap().len(),
        3,
        "on_error saw each"
    );
    assert_eq!(
        queue.num_requeues(&key()),
        2,
        "the delayed retry did not count"
    );
}

/// Issue 22: a retry keeps the priority its key was queued with, so an
/// initial-list key that fails stays behind fresh events.
#[tokio::test(start_paused = true)]
async fn a_retry_keeps_the_low_priority_of_an_initial_list_key() {
    use Step::*;
    let reconciler = Scripted::new(&[Fail, Requeue]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    let listed = Request::namespaced("ns", "listed");
    queue.add_with_priority(listed.clone(), Priority::Low);
    drive(&reconciler, &queue, &stats, None, 1).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let fresh = Request::namespaced("ns", "fresh");
    queue.add(fresh.clone());
    let first = queue.get_with_priority().await.unwrap();
    assert_eq!(
        first,
        (fresh.clone(), Priority::Normal),
        "the fresh event first"
    );
    queue.done(&fresh);
    let second = queue.get_with_priority().await.unwrap();
    assert_eq!(
        second,
        (listed.clone(), Priority::Low),
        "the retry kept Low"
    );
    queue.done(&listed);
    // A rate-limited requeue keeps it too.
    queue.add_with_priority(listed.clone(), Priority::Low);
    drive(&reconciler, &queue, &stats, None, 1).await;
    assert_eq!(queue.get_with_priority().await.unwrap().1, Priority::Low);
}

#[tokio::test(start_paused = true)]
async fn requeue_uses_the_rate_limiter() {
    use Step::*;
    let reconciler = Scripted::new(&[Requeue, Requeue, Ok]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    drive(&reconciler, &queue, &stats, None, 3).await;
    assert_eq!(
        gaps(&reconciler.calls.lock().unwrap()),
        [Duration::from_millis(5), Duration::from_millis(10)]
    );
    assert_eq!(stats.snapshot().requeue, 2);
}

#[tokio::test(start_paused = true)]
async fn terminal_error_is_not_retried() {
    let reconciler = Scripted::new(&[Step::Terminal]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 5).await;
    assert_eq!(outcomes, [Outcome::Terminal]);
    assert_eq!(reconciler.calls.lock().unwrap().len(), 1);
    assert_eq!(queue.len(), 0);
    let counts = stats.snapshot();
    assert_eq!((counts.terminal_error, counts.error), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn panic_is_recovered_counted_and_retried() {
    let reconciler = Scripted::new(&[Step::Panic, Step::Ok]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, None, 2).await;
    assert_eq!(outcomes, [Outcome::Retry, Outcome::Done]);
    assert_eq!(
        gaps(&reconciler.calls.lock().unwrap()),
        [Duration::from_millis(5)]
    );
    assert_eq!(stats.snapshot().panic, 1);
}

#[tokio::test(start_paused = true)]
async fn reconcile_timeout_cancels_and_retries() {
    let reconciler = Scripted::new(&[Step::Hang, Step::Ok]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, Some(Duration::from_secs(2)), 2).await;
    assert_eq!(outcomes, [Outcome::Retry, Outcome::Done]);
    assert_eq!(
        gaps(&reconciler.calls.lock().unwrap()),
        [Duration::from_secs(2) + Duration::from_millis(5)]
    );
    assert_eq!(stats.snapshot().timeout, 1);
}

#[tokio::test(start_paused = true)]
async fn throttle_holds_for_requeue_after_loops() {
    // A reconciler that asks to run again after 1 ms, forever: with a
    // throttle of 4/s it runs at most 4 times a second, not 1000.
    let steps = vec![Step::RequeueAfter(Duration::from_millis(1)); 50];
    let reconciler = Scripted::new(&steps);
    let queue = WorkQueue::builder()
        .throttle(crate::workqueue::Quota::per_second(4).burst(1))
        .build();
    let stats = ReconcileStats::default();
    queue.add(key());
    drive(&reconciler, &queue, &stats, None, 21).await;
    let calls = reconciler.calls.lock().unwrap();
    assert_eq!(calls.len(), 21);
    for gap in gaps(&calls) {
        assert!(
            gap >= Duration::from_millis(250),
            "gap {gap:?} beats the 4/s throttle"
        );
    }
    assert!(calls[20] - calls[0] >= Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn every_failure_reaches_on_error_and_successes_do_not() {
    use Step::*;
    let reconciler = Scripted::new(&[
        Fail,
        Panic,
        Hang,
        Terminal,
        Ok,
        RequeueAfter(Duration::from_secs(1)),
    ]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    let outcomes = drive(&reconciler, &queue, &stats, Some(Duration::from_secs(5)), 4).await;
    assert_eq!(
        outcomes,
        [
            Outcome::Retry,
            Outcome::Retry,
            Outcome::Retry,
            Outcome::Terminal
        ]
    );
    queue.add(key());
    drive(&reconciler, &queue, &stats, Some(Duration::from_secs(5)), 2).await;
    let failures = reconciler.failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 4, "{failures:?}");
    assert_eq!(failures[0], ("transient".to_owned(), false));
    assert!(
        failures[1].0.starts_with("reconcile panicked"),
        "{failures:?}"
    );
    assert_eq!(
        failures[2],
        ("reconcile timed out after 5s".to_owned(), false)
    );
    assert!(failures[3].1, "terminal errors reach on_error as terminal");
}

/// Issue 11: every failed reconcile logs at error level, retried ones too,
/// with the controller, the object, the reconcile id, the attempt and the
/// delay before the retry.
#[tokio::test(start_paused = true)]
async fn failures_log_at_error_with_attempt_and_delay() {
    use Step::*;
    let (logs, _guard) = crate::test_log::capture();
    let reconciler = Scripted::new(&[Fail, Fail, Panic, Terminal]);
    let queue = WorkQueue::builder().build();
    let stats = ReconcileStats::default();
    queue.add(key());
    drive(&reconciler, &queue, &stats, None, 4).await;

    let retried = logs.with_message("retrying with backoff");
    assert_eq!(retried.len(), 3, "{:?}", logs.events());
    for (i, event) in retried.iter().enumerate() {
        assert_eq!(event.level, tracing::Level::ERROR);
        assert_eq!(event.field("controller"), Some("test"));
        assert_eq!(event.field("namespace"), Some("ns"));
        assert_eq!(event.field("name"), Some("a"));
        assert_eq!(event.field("reconcile_id").map(str::len), Some(16));
        assert_eq!(event.field("attempt"), Some((i + 1).to_string().as_str()));
    }
    // the default per-item backoff: 5 ms doubling
    let delays: Vec<_> = retried.iter().map(|e| e.field("retry_in")).collect();
    assert_eq!(delays, [Some("5ms"), Some("10ms"), Some("20ms")]);
    assert_eq!(retried[0].field("error"), Some("transient"));
    assert_eq!(
        retried[2].field("error"),
        Some("reconcile panicked: reconciler bug")
    );
    let terminal = logs.with_message("terminal error");
    assert_eq!(terminal.len(), 1);
    assert_eq!(terminal[0].level, tracing::Level::ERROR);
    assert_eq!(
        terminal[0].field("error"),
        Some("terminal error: invalid spec")
    );
    assert_eq!(terminal[0].field("name"), Some("a"));
}

/// Issue 22: a controller run on its own reports controller-runtime's
/// metrics too, when given a registry.
#[tokio::test]
async fn a_standalone_controller_reports_to_the_metrics_it_is_given() {
    let metrics = crate::metrics::Metrics::new();
    let controller = super::Controller::new(Scripted::new(&[]))
        .name("alone")
        .metrics(&metrics);
    let cache = shared().cache.clone();
    let prepared = controller.prepare(&cache).unwrap();
    let text = metrics.encode().unwrap();
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="alone",result="success"} 0"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"workqueue_depth{name="alone""#), "{text}");
    drop(prepared);
}

/// Issue 22: an external source (controller-runtime's `source.Channel`)
/// wakes the controller with its requests, and stops with the controller.
#[tokio::test]
async fn a_channel_source_enqueues_its_requests_until_the_controller_goes() {
    let (wake, woken) = tokio::sync::mpsc::channel(4);
    let controller = super::Controller::new(Scripted::new(&[])).watches_channel(woken);
    let cache = shared().cache.clone();
    let prepared = controller.prepare(&cache).unwrap();
    wake.send(key()).await.unwrap();
    assert_eq!(prepared.queue.get().await, Some(key()));
    prepared.queue.done(&key());
    // Dropping the prepared controller removes its watches: the source is
    // no longer read (its receiver is dropped with the forwarding task).
    drop(prepared);
    tokio::time::timeout(Duration::from_secs(10), wake.closed())
        .await
        .expect("the forwarding task ends with the controller");
}

/// Issue 27: `owns_projected` refuses a projection without the
/// ownerReferences owner mapping needs, naming what to change.
#[tokio::test]
async fn a_projection_without_owner_references_cannot_be_owned() {
    struct NoOwners;
    impl crate::cache::Projection<k8s_openapi::api::core::v1::Pod> for NoOwners {
        const OWNER_REFERENCES: bool = false;
        fn project(_: k8s_openapi::api::core::v1::Pod) -> Self {
            NoOwners
        }
    }
    let controller = super::Controller::new(Scripted::new(&[]))
        .owns_projected::<k8s_openapi::api::core::v1::Pod, NoOwners>();
    let cache = shared().cache.clone();
    let err = controller.prepare(&cache).err().expect("a wiring error");
    let msg = err.to_string();
    assert!(msg.contains("NoOwners"), "{msg}");
    assert!(msg.contains("drops metadata.ownerReferences"), "{msg}");
    assert!(msg.contains("OWNER_REFERENCES = true"), "{msg}");
    assert!(msg.contains("Pod"), "{msg}");
}
