//! Property tests: random interleavings of producers' operations and
//! several concurrent workers, on tokio's paused clock (deterministic for a
//! given case, so proptest can shrink a failure to a minimal script).
//!
//! Invariants checked for every case:
//! * no item is held by two workers at once;
//! * every item added is processed at least once after its last add;
//! * nothing is processed that was never added;
//! * once everything is done, the queue is empty (`len`, the depth metric and
//!   the internal slot table all return to zero).
//!
//! `PROPTEST_CASES=N` runs more cases (default 96).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use proptest::prelude::*;

use super::metrics::testing::RecordingProvider;
use super::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8, Priority),
    AddAfter(u8, u8),
    AddRateLimited(u8),
    Forget(u8),
    Yield(u8),
    Sleep(u8),
}

#[derive(Debug, Clone, Copy)]
enum Limits {
    None,
    Throttle,
    PerKey,
    Both,
}

fn priority() -> impl Strategy<Value = Priority> {
    prop_oneof![
        Just(Priority::Low),
        Just(Priority::Normal),
        Just(Priority::High)
    ]
}

fn op(keys: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..keys, priority()).prop_map(|(k, p)| Op::Add(k, p)),
        2 => (0..keys, 0..100u8).prop_map(|(k, ms)| Op::AddAfter(k, ms)),
        2 => (0..keys).prop_map(Op::AddRateLimited),
        1 => (0..keys).prop_map(Op::Forget),
        2 => (0..4u8).prop_map(Op::Yield),
        1 => (0..20u8).prop_map(Op::Sleep),
    ]
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        3 => Just(Limits::None),
        1 => Just(Limits::Throttle),
        1 => Just(Limits::PerKey),
        1 => Just(Limits::Both),
    ]
}

/// What happened, in order (one global sequence on the single-threaded runtime).
#[derive(Default)]
struct Log {
    seq: u64,
    /// Sequence number of each item's last add of any kind.
    last_add: HashMap<u8, u64>,
    /// Sequence number of each item's first add.
    first_add: HashMap<u8, u64>,
    /// Sequence numbers at which each item was handed out.
    gets: HashMap<u8, Vec<u64>>,
    held: HashSet<u8>,
    violations: Vec<String>,
}

impl Log {
    fn added(&mut self, key: u8) {
        self.seq += 1;
        self.last_add.insert(key, self.seq);
        self.first_add.entry(key).or_insert(self.seq);
    }

    fn got(&mut self, worker: usize, key: u8) {
        self.seq += 1;
        if !self.held.insert(key) {
            self.violations.push(format!(
                "worker {worker} got {key} while another worker held it"
            ));
        }
        match self.first_add.get(&key) {
            Some(&first) if first < self.seq => {}
            _ => self
                .violations
                .push(format!("{key} handed out but never added")),
        }
        self.gets.entry(key).or_default().push(self.seq);
    }

    fn finishing(&mut self, key: u8) {
        self.held.remove(&key);
    }
}

fn run_case(
    producers: Vec<Vec<Op>>,
    workers: Vec<Vec<u8>>,
    limits: Limits,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    runtime.block_on(async move {
        let provider = RecordingProvider::default();
        let recorded = provider.0.clone();
        let mut builder = WorkQueue::builder()
            .name("prop")
            .metrics_provider(Arc::new(provider))
            .unfinished_work_update_period(Duration::ZERO)
            .rate_limiter(ExponentialFailureRateLimiter::new(
                Duration::from_millis(1),
                Duration::from_millis(50),
            ));
        if matches!(limits, Limits::Throttle | Limits::Both) {
            builder = builder.throttle(crate::workqueue::Quota::per_second(500).burst(3));
        }
        if matches!(limits, Limits::PerKey | Limits::Both) {
            builder = builder.per_key_min_interval(Duration::from_millis(3));
        }
        let q: WorkQueue<u8> = builder.build();
        let log = Arc::new(Mutex::new(Log::default()));

        let mut worker_tasks = Vec::new();
        for (id, pattern) in workers.into_iter().enumerate() {
            let (q, log) = (q.clone(), log.clone());
            worker_tasks.push(tokio::spawn(async move {
                let mut step = 0;
                while let Some(key) = q.get().await {
                    log.lock().got(id, key);
                    // "work": a pattern of yields and short sleeps
                    let w = pattern
                        .get(step % pattern.len().max(1))
                        .copied()
                        .unwrap_or(0);
                    step += 1;
                    match w % 3 {
                        0 => {}
                        1 => {
                            for _ in 0..w {
                                tokio::task::yield_now().await;
                            }
                        }
                        _ => tokio::time::sleep(Duration::from_millis(u64::from(w % 7))).await,
                    }
                    log.lock().finishing(key);
                    q.done(&key);
                }
            }));
        }

        let mut producer_tasks = Vec::new();
        for ops in producers {
            let (q, log) = (q.clone(), log.clone());
            producer_tasks.push(tokio::spawn(async move {
                for op in ops {
                    match op {
                        Op::Add(k, p) => {
                            log.lock().added(k);
                            q.add_with_priority(k, p);
                        }
                        Op::AddAfter(k, ms) => {
                            log.lock().added(k);
                            q.add_after(k, Duration::from_millis(u64::from(ms)));
                        }
                        Op::AddRateLimited(k) => {
                            log.lock().added(k);
                            q.add_rate_limited(k);
                        }
                        Op::Forget(k) => {
                            q.forget(&k);
                            if q.num_requeues(&k) != 0 {
                                log.lock().violations.push(format!("{k} not forgotten"));
                            }
                        }
                        Op::Yield(n) => {
                            for _ in 0..n {
                                tokio::task::yield_now().await;
                            }
                        }
                        Op::Sleep(ms) => {
                            tokio::time::sleep(Duration::from_millis(u64::from(ms))).await
                        }
                    }
                }
            }));
        }
        for p in producer_tasks {
            p.await.map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        // Longer than any delay, backoff, throttle or per-key interval in play.
        tokio::time::sleep(Duration::from_secs(10)).await;

        {
            let log = log.lock();
            prop_assert!(log.violations.is_empty(), "{:?}", log.violations);
            prop_assert!(log.held.is_empty(), "items still held: {:?}", log.held);
            for (key, last) in &log.last_add {
                let processed_after = log
                    .gets
                    .get(key)
                    .is_some_and(|gets| gets.iter().any(|g| g > last));
                prop_assert!(processed_after, "{key} not processed after its last add");
            }
        }
        prop_assert_eq!(q.len(), 0);
        prop_assert_eq!(recorded.depth(), 0);
        q.with_state(|st| {
            st.check_invariants();
            st.is_idle()
        })
        .then_some(())
        .ok_or_else(|| TestCaseError::fail("slots left behind"))?;

        q.shutdown();
        for w in worker_tasks {
            w.await.map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        Ok(())
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_interleavings_keep_the_invariants(
        producers in prop::collection::vec(prop::collection::vec(op(6), 1..60), 1..4),
        workers in prop::collection::vec(prop::collection::vec(0..12u8, 1..8), 1..5),
        limits in limits(),
    ) {
        run_case(producers, workers, limits)?;
    }

    #[test]
    fn many_keys_few_workers(
        producers in prop::collection::vec(prop::collection::vec(op(40), 20..120), 1..3),
        workers in prop::collection::vec(prop::collection::vec(0..6u8, 1..4), 1..3),
        limits in limits(),
    ) {
        run_case(producers, workers, limits)?;
    }
}
