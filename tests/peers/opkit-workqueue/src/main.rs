//! Side-by-side workqueue workloads: the opkit half of `tests/peers/bench-workqueue.sh`
//! (the Go peer in `tests/peers/go-workqueue` runs the same workloads on client-go).
//!
//! ```text
//! cargo run --release --manifest-path tests/peers/opkit-workqueue/Cargo.toml -- <workload> [items]
//! ```
//!
//! Built as an operator is (opkit a plain dependency, the generated release
//! profile), not as an example of the opkit crate: an example also gets
//! opkit's dev-dependencies, and with them tokio's `test-util`.
//!
//! Workloads (items are `Arc<str>` keys like `ns-7/obj-123`, made before timing starts):
//! 1. one producer, one worker: `items` distinct keys, add → get → done (default 1M);
//! 2. four producers, four workers: 100k keys, each added 10 times;
//! 3. one producer, four workers: 100k `add_after` with delays of 0–100 ms
//!    (same pseudo-random sequence as the Go peer): time to drain.
//!
//! Prints one line: `RESULT impl=opkit workload=N ops=.. secs=.. cpu=.. gets=..`,
//! where `ops` is the number of add calls, `secs` the wall time until every
//! item is done, `cpu` the process CPU seconds used meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use opkit::workqueue::WorkQueue;

type Key = Arc<str>;

fn keys(n: usize) -> Vec<Key> {
    (0..n)
        .map(|i| Arc::from(format!("ns-{}/obj-{i}", i % 100)))
        .collect()
}

/// splitmix64, as in the Go peer, so both draw the same delays.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Process CPU time (user + system) in seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

struct Outcome {
    ops: usize,
    gets: usize,
}

async fn workload1(keys: Vec<Key>) -> Outcome {
    let n = keys.len();
    let q: WorkQueue<Key> = WorkQueue::new();
    let producer = tokio::spawn({
        let q = q.clone();
        async move {
            for k in keys {
                q.add(k);
            }
        }
    });
    let worker = tokio::spawn({
        let q = q.clone();
        async move {
            for _ in 0..n {
                let Some(k) = q.get().await else { break };
                q.done(&k);
            }
        }
    });
    producer.await.expect("producer");
    worker.await.expect("worker");
    Outcome { ops: n, gets: n }
}

async fn workload2(keys: Vec<Key>) -> Outcome {
    const PRODUCERS: usize = 4;
    const WORKERS: usize = 4;
    const ROUNDS: usize = 10;
    const YIELD_EVERY: usize = 16;
    let n_keys = keys.len();
    let keys = Arc::new(keys);
    let q: WorkQueue<Key> = WorkQueue::new();
    let gets = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, gets) = (q.clone(), gets.clone());
            tokio::spawn(async move {
                while let Some(k) = q.get().await {
                    gets.fetch_add(1, Ordering::Relaxed);
                    q.done(&k);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (q, keys) = (q.clone(), keys.clone());
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    for (i, k) in keys.iter().skip(p).step_by(PRODUCERS).enumerate() {
                        q.add(k.clone());
                        // like an event handler between events (the Go peer
                        // calls runtime.Gosched() at the same points)
                        if i % YIELD_EVERY == YIELD_EVERY - 1 {
                            tokio::task::yield_now().await;
                        }
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.expect("producer");
    }
    q.shutdown();
    for w in workers {
        w.await.expect("worker");
    }
    Outcome {
        ops: n_keys * ROUNDS,
        gets: gets.load(Ordering::Relaxed),
    }
}

/// The delays of workload 3: 0–100 ms, in microseconds, from splitmix64(42).
fn delays(n: usize) -> Vec<Duration> {
    let mut rng = SplitMix(42);
    (0..n)
        .map(|_| Duration::from_micros(rng.next() % 100_001))
        .collect()
}

async fn workload3(keys: Vec<Key>, delays: Vec<Duration>) -> Outcome {
    const WORKERS: usize = 4;
    let n = keys.len();
    let q: WorkQueue<Key> = WorkQueue::new();
    let gets = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(tokio::sync::Notify::new());
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, gets, all_done) = (q.clone(), gets.clone(), all_done.clone());
            tokio::spawn(async move {
                while let Some(k) = q.get().await {
                    q.done(&k);
                    if gets.fetch_add(1, Ordering::Relaxed) + 1 == n {
                        all_done.notify_one();
                    }
                }
            })
        })
        .collect();
    let done = all_done.notified();
    let producer = tokio::spawn({
        let q = q.clone();
        async move {
            for (k, d) in keys.into_iter().zip(delays) {
                q.add_after(k, d);
            }
        }
    });
    producer.await.expect("producer");
    done.await;
    q.shutdown();
    for w in workers {
        w.await.expect("worker");
    }
    Outcome {
        ops: n,
        gets: gets.load(Ordering::Relaxed),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let workload: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let default_items = if workload == 1 { 1_000_000 } else { 100_000 };
    let items: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(default_items);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("tokio runtime");

    // Inputs are made before the clock starts.
    let keys = keys(items);
    let delays = if workload == 3 {
        delays(items)
    } else {
        Vec::new()
    };

    let (cpu0, start) = (cpu_seconds(), Instant::now());
    let outcome = runtime.block_on(async {
        match workload {
            1 => workload1(keys).await,
            2 => workload2(keys).await,
            3 => workload3(keys, delays).await,
            other => panic!("unknown workload {other} (1, 2 or 3)"),
        }
    });
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    println!(
        "RESULT impl=opkit workload={workload} ops={} secs={secs:.4} cpu={cpu:.3} gets={}",
        outcome.ops, outcome.gets
    );
}
