//! Queue-level tests, on tokio's paused clock: no test waits in real time.
//!
//! Why one long file (about 870 lines): these are the queue's rules as a
//! user sees them (the module docs' dedup, delays, priorities, rate
//! limiting, throttle, shutdown and metrics), one group per rule, all
//! through `WorkQueue`'s public methods; the state machine's own tests are
//! in `state.rs`, the properties in `proptests.rs`.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, advance, sleep, timeout};

use super::metrics::testing::RecordingProvider;
use super::*;

const MS: Duration = Duration::from_millis(1);

fn queue() -> WorkQueue<&'static str> {
    WorkQueue::new()
}

/// Gets an item that must be ready (or become ready) within `within`.
async fn get_within<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(
    q: &WorkQueue<T>,
    within: Duration,
) -> T {
    timeout(within, q.get())
        .await
        .expect("no item in time")
        .expect("queue shut down")
}

/// Asserts that no item is handed out during `d`.
async fn assert_nothing_for<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(
    q: &WorkQueue<T>,
    d: Duration,
) {
    assert!(timeout(d, q.get()).await.is_err(), "an item was handed out");
}

#[tokio::test(start_paused = true)]
async fn add_dedups_waiting_items() {
    let q = queue();
    q.add("a");
    q.add("b");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    assert!(q.is_empty());
    assert_nothing_for(&q, Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn add_during_processing_requeues_exactly_once_after_done() {
    let q = queue();
    q.add("a");
    let item = q.get().await.unwrap();
    q.add("a");
    q.add("a");
    q.add("a");
    assert_eq!(q.len(), 0, "not waiting while it is processed");
    assert_nothing_for(&q, Duration::from_secs(1)).await;
    q.done(&item);
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("a"));
    q.done(&"a");
    assert_eq!(q.len(), 0);
    assert_nothing_for(&q, Duration::from_secs(1)).await;
    q.with_state(|st| assert!(st.is_idle()));
}

#[tokio::test(start_paused = true)]
async fn one_item_is_never_held_by_two_workers() {
    let q = queue();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for worker in 0..3 {
        let q = q.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(item) = q.get().await {
                tx.send((worker, item, Instant::now())).unwrap();
                sleep(Duration::from_secs(1)).await;
                q.done(&item);
            }
        });
    }
    q.add("a");
    tokio::task::yield_now().await;
    // added while processing: must wait for the first worker's done
    q.add("a");
    let (_, _, first) = rx.recv().await.unwrap();
    let (_, item, second) = rx.recv().await.unwrap();
    assert_eq!(item, "a");
    assert_eq!(second - first, Duration::from_secs(1));
    q.shutdown();
}

#[tokio::test(start_paused = true)]
async fn done_of_an_unknown_item_is_a_noop() {
    let q = queue();
    q.done(&"x");
    q.add("a");
    q.done(&"a"); // waiting, not processing
    assert_eq!(q.len(), 1);
    assert_eq!(q.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn getters_wait_for_adds() {
    let q = queue();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    sleep(Duration::from_secs(5)).await;
    q.add("late");
    assert_eq!(getter.await.unwrap(), Some("late"));
}

#[tokio::test(start_paused = true)]
async fn add_after_waits_then_adds() {
    let q = queue();
    let start = Instant::now();
    q.add_after("a", 100 * MS);
    assert_eq!(q.len(), 0, "delayed items are not waiting yet");
    assert_eq!(get_within(&q, Duration::from_secs(1)).await, "a");
    assert_eq!(start.elapsed(), 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn zero_delay_is_a_plain_add() {
    let q = queue();
    q.add_after("a", Duration::ZERO);
    assert_eq!(q.len(), 1);
    assert_eq!(q.try_get(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn earliest_add_after_wins() {
    let q = queue();
    let start = Instant::now();
    q.add_after("a", 500 * MS);
    q.add_after("a", 100 * MS);
    q.add_after("a", 300 * MS); // later than the pending one: ignored
    assert_eq!(get_within(&q, Duration::from_secs(1)).await, "a");
    assert_eq!(start.elapsed(), 100 * MS);
    q.done(&"a");
    // the superseded times do not fire again
    assert_nothing_for(&q, Duration::from_secs(2)).await;
}

#[tokio::test(start_paused = true)]
async fn delayed_item_dedups_against_a_dirty_one() {
    let q = queue();
    q.add_after("a", 100 * MS);
    q.add("a");
    advance(200 * MS).await;
    assert_eq!(q.len(), 1, "one copy waiting");
    assert_eq!(q.get().await, Some("a"));
    q.done(&"a");
    assert_nothing_for(&q, Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn delayed_item_becoming_ready_while_processing_is_requeued_after_done() {
    let q = queue();
    q.add("a");
    let a = q.get().await.unwrap();
    q.add_after("a", 100 * MS);
    advance(200 * MS).await;
    assert_eq!(q.len(), 0);
    q.done(&a);
    assert_eq!(q.try_get(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn an_earlier_delay_wakes_a_sleeping_getter() {
    let q = queue();
    let start = Instant::now();
    q.add_after("slow", Duration::from_secs(10));
    let getter = tokio::spawn({
        let q = q.clone();
        async move { (q.get().await, Instant::now()) }
    });
    sleep(MS).await; // the getter now sleeps until the 10 s deadline
    q.add_after("fast", Duration::from_secs(1));
    let (item, at) = getter.await.unwrap();
    assert_eq!(item, Some("fast"));
    assert_eq!(at - start, Duration::from_secs(1) + MS);
}

#[tokio::test(start_paused = true)]
async fn delayed_items_come_out_in_deadline_order() {
    let q = queue();
    for (item, ms) in [("c", 30), ("a", 10), ("d", 40), ("b", 20)] {
        q.add_after(item, ms * MS);
    }
    advance(Duration::from_secs(1)).await;
    let got: Vec<_> = std::iter::from_fn(|| q.try_get()).collect();
    assert_eq!(got, ["a", "b", "c", "d"]);
}

#[tokio::test(start_paused = true)]
async fn many_idle_getters_share_delayed_items() {
    let q: WorkQueue<u32> = WorkQueue::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..4 {
        let q = q.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(item) = q.get().await {
                tx.send(item).unwrap();
                q.done(&item);
            }
        });
    }
    drop(tx);
    for i in 0..100u32 {
        q.add_after(i, MS * (10 * (i % 10 + 1)));
    }
    let mut got = Vec::new();
    for _ in 0..100 {
        got.push(
            timeout(Duration::from_secs(1), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    got.sort_unstable();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
    q.shutdown();
    assert!(rx.recv().await.is_none(), "workers exit after shutdown");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_duty_getter_hands_over() {
    let q = queue();
    let start = Instant::now();
    q.add_after("a", Duration::from_secs(1));
    // This getter takes the timer duty, then is cancelled.
    let cancelled = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    let waiting = tokio::spawn({
        let q = q.clone();
        async move { (q.get().await, Instant::now()) }
    });
    sleep(MS).await;
    cancelled.abort();
    let (item, at) = waiting.await.unwrap();
    assert_eq!(item, Some("a"));
    assert_eq!(at - start, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn low_priority_items_wait_behind_normal_ones() {
    let q = queue();
    q.add_with_priority("list-1", Priority::Low);
    q.add_with_priority("list-2", Priority::Low);
    q.add("event-1");
    q.add_with_priority("list-3", Priority::Low);
    q.add("event-2");
    q.add_with_priority("urgent", Priority::High);
    let got: Vec<_> = std::iter::from_fn(|| q.try_get()).collect();
    assert_eq!(
        got,
        ["urgent", "event-1", "event-2", "list-1", "list-2", "list-3"]
    );
}

#[tokio::test(start_paused = true)]
async fn dedup_keeps_the_higher_priority() {
    let q = queue();
    q.add_with_priority("a", Priority::Low);
    q.add_with_priority("b", Priority::Low);
    q.add("c");
    q.add("b"); // upgraded: now behind c, ahead of a
    q.add_with_priority("c", Priority::Low); // never downgraded
    assert_eq!(q.len(), 3);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(q.get_with_priority().await.unwrap());
    }
    assert_eq!(
        got,
        [
            ("c", Priority::Normal),
            ("b", Priority::Normal),
            ("a", Priority::Low)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn priority_of_an_item_dirtied_during_processing() {
    let q = queue();
    q.add_with_priority("a", Priority::Low);
    let a = q.get().await.unwrap();
    q.add_with_priority("a", Priority::Low);
    q.add("a"); // upgrade while dirty
    q.add_with_priority("b", Priority::Low);
    q.done(&a);
    assert_eq!(q.get_with_priority().await, Some(("a", Priority::Normal)));
    assert_eq!(q.get_with_priority().await, Some(("b", Priority::Low)));
}

#[tokio::test(start_paused = true)]
async fn delayed_items_keep_their_priority() {
    let q = queue();
    q.add_with_priority("low-now", Priority::Low);
    q.add_after_with_priority("low-later", 10 * MS, Priority::Low);
    q.add_after("normal-later", 20 * MS);
    advance(50 * MS).await;
    let got: Vec<_> = std::iter::from_fn(|| q.try_get()).collect();
    assert_eq!(got, ["normal-later", "low-now", "low-later"]);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_adds_back_off_per_item() {
    let q = queue();
    let start = Instant::now();
    q.add_rate_limited("a");
    assert_eq!(q.num_requeues(&"a"), 1);
    assert_eq!(get_within(&q, Duration::from_secs(1)).await, "a");
    assert_eq!(start.elapsed(), 5 * MS);
    q.done(&"a");
    let again = Instant::now();
    q.add_rate_limited("a");
    assert_eq!(get_within(&q, Duration::from_secs(1)).await, "a");
    assert_eq!(again.elapsed(), 10 * MS);
    q.done(&"a");
    assert_eq!(q.num_requeues(&"a"), 2);
    q.forget(&"a");
    assert_eq!(q.num_requeues(&"a"), 0);
    let after_forget = Instant::now();
    q.add_rate_limited("a");
    assert_eq!(get_within(&q, Duration::from_secs(1)).await, "a");
    assert_eq!(after_forget.elapsed(), 5 * MS);
}

#[tokio::test(start_paused = true)]
async fn custom_rate_limiter() {
    let q: WorkQueue<&str> = WorkQueue::builder()
        .rate_limiter(MaxWaitRateLimiter::new(
            ExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000)),
            Duration::from_secs(3),
        ))
        .build();
    let mut delays = Vec::new();
    for _ in 0..4 {
        let start = Instant::now();
        q.add_rate_limited("a");
        let a = get_within(&q, Duration::from_secs(10)).await;
        delays.push(start.elapsed());
        q.done(&a);
    }
    let secs = |s| Duration::from_secs(s);
    assert_eq!(delays, [secs(1), secs(2), secs(3), secs(3)]);
}

/// Collects the instants at which `n` items are handed out by one worker.
async fn handout_times<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(
    q: &WorkQueue<T>,
    n: usize,
) -> Vec<Duration> {
    let start = Instant::now();
    let mut times = Vec::new();
    for _ in 0..n {
        let item = get_within(q, Duration::from_secs(60)).await;
        times.push(start.elapsed());
        q.done(&item);
    }
    times
}

#[tokio::test(start_paused = true)]
async fn throttle_paces_plain_adds() {
    let q: WorkQueue<u32> = WorkQueue::builder()
        .throttle(crate::workqueue::Quota::per_second(10).burst(2))
        .build();
    for i in 0..5 {
        q.add(i);
    }
    let times = handout_times(&q, 5).await;
    // a burst of 2, then one every 100 ms
    assert_eq!(
        times,
        [Duration::ZERO, Duration::ZERO, 100 * MS, 200 * MS, 300 * MS]
    );
}

#[tokio::test(start_paused = true)]
async fn throttle_holds_for_add_after_items() {
    let q: WorkQueue<u32> = WorkQueue::builder()
        .throttle(crate::workqueue::Quota::per_second(10).burst(1))
        .build();
    for i in 0..5 {
        q.add_after(i, MS); // a requeue_after loop: must not bypass the throttle
    }
    let times = handout_times(&q, 5).await;
    assert_eq!(times, [MS, 101 * MS, 201 * MS, 301 * MS, 401 * MS]);
}

#[tokio::test(start_paused = true)]
async fn throttle_holds_for_rate_limited_items() {
    let q: WorkQueue<u32> = WorkQueue::builder()
        .throttle(crate::workqueue::Quota::per_second(10).burst(1))
        .build();
    for i in 0..4 {
        q.add_rate_limited(i); // 5 ms backoff each
    }
    let times = handout_times(&q, 4).await;
    assert_eq!(times, [5 * MS, 105 * MS, 205 * MS, 305 * MS]);
}

#[tokio::test(start_paused = true)]
async fn throttle_with_several_workers() {
    let q: WorkQueue<u32> = WorkQueue::builder()
        .throttle(crate::workqueue::Quota::per_second(100).burst(1))
        .build();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    for _ in 0..4 {
        let q = q.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(item) = q.get().await {
                tx.send(start.elapsed()).unwrap();
                q.done(&item);
            }
        });
    }
    for i in 0..20 {
        q.add(i);
    }
    let mut times = Vec::new();
    for _ in 0..20 {
        times.push(
            timeout(Duration::from_secs(5), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    let expected: Vec<_> = (0..20).map(|i| i * 10 * MS).collect();
    assert_eq!(times, expected);
    q.shutdown();
}

#[tokio::test(start_paused = true)]
async fn throttle_applies_while_adds_keep_coming() {
    // adds that arrive while the getter on duty waits for a token do not
    // bypass the throttle and do not get lost
    let q: WorkQueue<u32> = WorkQueue::builder()
        .throttle(crate::workqueue::Quota::per_second(10).burst(1))
        .build();
    let worker = tokio::spawn({
        let q = q.clone();
        async move { handout_times(&q, 4).await }
    });
    for i in 0..4 {
        q.add(i);
        sleep(30 * MS).await;
    }
    assert_eq!(
        worker.await.unwrap(),
        [Duration::ZERO, 100 * MS, 200 * MS, 300 * MS]
    );
}

#[tokio::test(start_paused = true)]
async fn per_key_min_interval_guards_hot_loops_only() {
    let q: WorkQueue<&str> = WorkQueue::builder()
        .per_key_min_interval(Duration::from_secs(1))
        .build();
    let start = Instant::now();
    q.add("hot");
    let hot = q.get().await.unwrap();
    q.done(&hot);
    q.add("hot"); // immediately again: held back for the interval
    q.add("other");
    assert_eq!(q.get().await, Some("other"), "other items are not held up");
    assert_eq!(start.elapsed(), Duration::ZERO);
    q.done(&"other");
    q.add("hot"); // dedups against the held-back copy
    assert_eq!(q.len(), 1);
    assert_eq!(get_within(&q, Duration::from_secs(5)).await, "hot");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    q.done(&"hot");
    assert_nothing_for(&q, Duration::from_secs(5)).await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_hands_out_waiting_items_then_none() {
    let q = queue();
    q.add("a");
    q.add("b");
    q.add_after("delayed", 10 * MS);
    q.shutdown();
    assert!(q.is_shutting_down());
    q.add("ignored");
    q.add_after("ignored-too", MS);
    q.add_rate_limited("ignored-as-well");
    assert_eq!(q.get().await, Some("a"));
    assert_eq!(q.get().await, Some("b"));
    assert_eq!(q.get().await, None);
    advance(Duration::from_secs(1)).await;
    assert_eq!(q.get().await, None, "delayed adds are dropped");
    assert_eq!(q.num_requeues(&"ignored-as-well"), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_wakes_waiting_getters() {
    let q = queue();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await })
        })
        .collect();
    sleep(Duration::from_secs(1)).await;
    q.shutdown();
    for g in getters {
        assert_eq!(g.await.unwrap(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn dirty_item_is_still_handed_out_after_shutdown() {
    let q = queue();
    q.add("a");
    let a = q.get().await.unwrap();
    q.add("a");
    q.shutdown();
    q.done(&a);
    assert_eq!(q.get().await, Some("a"));
    q.done(&"a");
    assert_eq!(q.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_waits_for_processing_items() {
    let q = queue();
    q.add("a");
    q.add("b");
    let worker = tokio::spawn({
        let q = q.clone();
        async move {
            let mut seen = Vec::new();
            while let Some(item) = q.get().await {
                sleep(Duration::from_secs(1)).await;
                seen.push(item);
                q.done(&item);
            }
            seen
        }
    });
    tokio::task::yield_now().await;
    let start = Instant::now();
    q.shutdown_with_drain(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(worker.await.unwrap(), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_times_out() {
    let q: WorkQueue<&str> = WorkQueue::builder().name("stuck").build();
    q.add("a");
    q.add("b");
    let _held = q.get().await.unwrap(); // never done
    let start = Instant::now();
    let err = q
        .shutdown_with_drain(Duration::from_secs(3))
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(
        err,
        QueueError::DrainTimeout {
            queue: "stuck".into(),
            timeout: Duration::from_secs(3),
            processing: 1,
            waiting: 1
        }
    );
}

/// Issue 11: a plain `shutdown` wakes a pending drain at once (client-go's
/// `ShutDown` after `ShutDownWithDrain`); one made before the drain began
/// does not cut it short.
#[tokio::test(start_paused = true)]
async fn shutdown_wakes_a_pending_drain() {
    let q: WorkQueue<&str> = WorkQueue::builder().name("forced").build();
    q.add("a");
    q.add("b");
    let held = q.get().await.unwrap(); // in flight, not done yet
    let drain = tokio::spawn({
        let q = q.clone();
        async move {
            let start = Instant::now();
            let result = q.shutdown_with_drain(Duration::from_secs(60)).await;
            (result, start.elapsed())
        }
    });
    sleep(Duration::from_secs(5)).await;
    assert!(
        !drain.is_finished(),
        "the drain waits for the item in flight"
    );
    q.shutdown();
    let (result, waited) = drain.await.unwrap();
    assert_eq!(
        waited,
        Duration::from_secs(5),
        "woken at once, not at the timeout"
    );
    assert_eq!(
        result,
        Err(QueueError::DrainAbandoned {
            queue: "forced".into(),
            processing: 1,
            waiting: 1
        })
    );
    q.done(&held);

    // a shutdown before the drain does not abandon it
    let q = queue();
    q.add("a");
    let item = q.get().await.unwrap();
    q.shutdown();
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shutdown_with_drain(Duration::from_secs(60)).await }
    });
    sleep(Duration::from_secs(1)).await;
    assert!(!drain.is_finished());
    q.done(&item);
    assert_eq!(drain.await.unwrap(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn shutdown_with_drain_of_an_idle_queue_returns_at_once() {
    let q = queue();
    let start = Instant::now();
    q.shutdown_with_drain(Duration::from_secs(3)).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn metrics_follow_the_items() {
    let provider = RecordingProvider::default();
    let rec = provider.0.clone();
    let q: WorkQueue<&str> = WorkQueue::builder()
        .name("test")
        .metrics_provider(Arc::new(provider))
        .unfinished_work_update_period(Duration::ZERO)
        .build();
    q.add("a");
    q.add("a");
    q.add("b");
    assert_eq!((rec.depth(), rec.adds()), (2, 2));
    advance(Duration::from_secs(2)).await;
    let a = q.get().await.unwrap();
    assert_eq!(rec.depth(), 1);
    assert_eq!(*rec.queue_durations.lock(), [2.0]);
    advance(Duration::from_secs(3)).await;
    q.update_unfinished_work_metrics();
    assert_eq!(*rec.unfinished.lock(), 3.0);
    assert_eq!(*rec.longest.lock(), 3.0);
    q.add("a"); // dirty while processing counts as waiting
    assert_eq!((rec.depth(), rec.adds()), (2, 3));
    q.done(&a);
    assert_eq!(*rec.work_durations.lock(), [3.0]);
    q.update_unfinished_work_metrics();
    assert_eq!(*rec.unfinished.lock(), 0.0);
    q.add_after("c", MS);
    q.add_rate_limited("d");
    assert_eq!(rec.retries(), 2);
    advance(Duration::from_secs(1)).await;
    while let Some(item) = q.try_get() {
        q.done(&item);
    }
    assert_eq!(rec.depth(), 0);
    assert_eq!(rec.adds(), 5);
}

#[tokio::test(start_paused = true)]
async fn unfinished_work_is_refreshed_in_the_background() {
    let provider = RecordingProvider::default();
    let rec = provider.0.clone();
    let q: WorkQueue<&str> = WorkQueue::builder()
        .name("bg")
        .metrics_provider(Arc::new(provider))
        .build();
    q.add("a");
    let _a = q.get().await.unwrap();
    sleep(Duration::from_millis(2100)).await;
    assert_eq!(*rec.longest.lock(), 2.0);
    q.shutdown();
}

#[tokio::test(start_paused = true)]
async fn unnamed_queue_reports_nothing() {
    let provider = RecordingProvider::default();
    let rec = provider.0.clone();
    let q: WorkQueue<&str> = WorkQueue::builder()
        .metrics_provider(Arc::new(provider))
        .build();
    q.add("a");
    assert_eq!(rec.adds(), 0);
    assert!(rec.names.lock().is_empty());
}

#[tokio::test(start_paused = true)]
async fn clones_share_one_queue() {
    let q = queue();
    let q2 = q.clone();
    q.add("a");
    assert_eq!(q2.len(), 1);
    assert_eq!(q2.try_get(), Some("a"));
    assert!(format!("{q:?}").contains("processing: 1"));
}

#[test]
fn works_without_a_runtime_for_sync_operations() {
    let q: WorkQueue<u8> = WorkQueue::builder()
        .name("sync")
        .metrics_provider(Arc::new(RecordingProvider::default()))
        .build();
    q.add(1);
    assert_eq!(q.try_get(), Some(1));
    q.done(&1);
    assert!(q.is_empty());
}

/// Real threads: producers on OS threads race the workers for the lock, so
/// adds also go through the inbox. Checks exclusivity and that every key is
/// processed after its last add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_on_real_threads_keeps_the_invariants() {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicU64, Ordering};

    const KEYS: usize = 300;
    for round in 0..8u32 {
        let q: WorkQueue<u32> = WorkQueue::new();
        let clock = Arc::new(AtomicU64::new(1));
        let last_add: Arc<Vec<AtomicU64>> =
            Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let last_get: Arc<Vec<AtomicU64>> =
            Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let held = Arc::new(parking_lot::Mutex::new(HashSet::new()));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let (q, held, clock, last_get) =
                (q.clone(), held.clone(), clock.clone(), last_get.clone());
            workers.push(tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    let seq = clock.fetch_add(1, Ordering::SeqCst);
                    last_get[item as usize].fetch_max(seq, Ordering::SeqCst);
                    assert!(held.lock().insert(item), "item {item} held twice");
                    if item % 7 == 0 {
                        tokio::task::yield_now().await;
                    }
                    assert!(held.lock().remove(&item));
                    q.done(&item);
                }
            }));
        }
        let producers: Vec<_> = (0..2u32)
            .map(|p| {
                let (q, clock, last_add) = (q.clone(), clock.clone(), last_add.clone());
                std::thread::spawn(move || {
                    for r in 0..20u32 {
                        for k in 0..KEYS as u32 {
                            let seq = clock.fetch_add(1, Ordering::SeqCst);
                            last_add[k as usize].fetch_max(seq, Ordering::SeqCst);
                            match (k + r + p + round) % 6 {
                                0 => q.add_after(k, Duration::from_micros(u64::from(k % 50))),
                                1 => q.add_with_priority(k, Priority::Low),
                                _ => q.add(k),
                            }
                        }
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        // let the delayed adds fire and the workers finish
        tokio::time::sleep(Duration::from_millis(20)).await;
        for _ in 0..500 {
            let idle = q.is_empty() && q.with_state(|st| st.processing() == 0 && !st.has_timers());
            if idle {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        for k in 0..KEYS {
            let (added, got) = (
                last_add[k].load(Ordering::SeqCst),
                last_get[k].load(Ordering::SeqCst),
            );
            assert!(
                got > added,
                "round {round}: key {k} added at {added}, last handed out at {got}"
            );
        }
        q.shutdown_with_drain(Duration::from_secs(10))
            .await
            .unwrap();
        for w in workers {
            w.await.unwrap();
        }
        q.with_state(|st| {
            st.check_invariants();
            assert!(st.is_idle());
        });
    }
}

#[test]
fn adds_never_wait_for_the_lock_and_keep_their_order() {
    let q: WorkQueue<u32> = WorkQueue::new();
    let held = q.hold_lock();
    let producer = std::thread::spawn({
        let q = q.clone();
        move || {
            for i in 0..10 {
                q.add(i);
            }
            q.add(3); // a duplicate, deduplicated when applied
            q.add_with_priority(20, Priority::High);
        }
    });
    // the producer finishes while the lock is still held: adds went to the inbox
    producer.join().unwrap();
    drop(held);
    assert_eq!(q.len(), 11);
    let got: Vec<_> = std::iter::from_fn(|| q.try_get()).collect();
    assert_eq!(got, [20, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    q.with_state(|st| st.check_invariants());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_getter_is_woken_by_an_add_through_the_inbox() {
    let q: WorkQueue<u32> = WorkQueue::new();
    let getter = tokio::spawn({
        let q = q.clone();
        async move { q.get().await }
    });
    // wait (without sleeping) until the getter is registered as idle
    while q.with_state(|st| st.idle) == 0 {
        tokio::task::yield_now().await;
    }
    let held = q.hold_lock();
    std::thread::spawn({
        let q = q.clone();
        move || q.add(7)
    })
    .join()
    .unwrap();
    drop(held);
    let got = timeout(Duration::from_secs(10), getter)
        .await
        .expect("getter not woken");
    assert_eq!(got.unwrap(), Some(7));
}
