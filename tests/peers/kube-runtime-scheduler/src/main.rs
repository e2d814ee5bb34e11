//! kube-runtime's `scheduler` on the workqueue workloads where it fits.
//!
//! ```text
//! cargo run --release -- <workload> [items]
//! ```
//!
//! The scheduler is a stream transformer: requests `(message, run_at)` in,
//! deduplicated messages out at their time (the earliest `run_at` wins). It
//! has no processing set and no `done`: kube-runtime's Controller keeps
//! "one object, one reconcile at a time" in its runner, outside the scheduler.
//! So:
//!
//! 3. 100k delayed adds, 0–100 ms (same splitmix64(42) delays as the other
//!    peers): fits exactly; one consumer drains the stream.
//! 1. 1M distinct keys scheduled for "now", one producer, one consumer: a
//!    partial fit (dedup + FIFO hand-out, but no processing set or done).
//!
//! Workload 2 (dedup against items being processed, four workers) does not
//! fit and prints nothing.
//!
//! Prints `RESULT impl=kube-runtime workload=N ops=.. secs=.. cpu=.. gets=..`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::channel::mpsc;
use kube_runtime::scheduler::{ScheduleRequest, scheduler};

type Key = Arc<str>;

fn keys(n: usize) -> Vec<Key> {
    (0..n)
        .map(|i| Arc::from(format!("ns-{}/obj-{i}", i % 100)))
        .collect()
}

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

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Feeds `requests` into a scheduler from a producer task and counts what
/// comes out until `expect` messages were emitted.
async fn run(requests: Vec<(Key, Duration)>, expect: usize) -> usize {
    let (tx, rx) = mpsc::unbounded::<ScheduleRequest<Key>>();
    let producer = tokio::spawn(async move {
        for (message, delay) in requests {
            let run_at = tokio::time::Instant::now() + delay;
            if tx
                .unbounded_send(ScheduleRequest { message, run_at })
                .is_err()
            {
                break;
            }
        }
        // keep the sender open until the consumer is done: the scheduler
        // ends as soon as its request stream does
        tx
    });
    let mut out = Box::pin(scheduler(rx));
    let mut gets = 0;
    while gets < expect {
        match out.next().await {
            Some(_) => gets += 1,
            None => break,
        }
    }
    drop(producer.await);
    gets
}

fn main() {
    let mut args = std::env::args().skip(1);
    let workload: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let default_items = if workload == 1 { 1_000_000 } else { 100_000 };
    let items: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(default_items);
    let requests: Vec<(Key, Duration)> = match workload {
        1 => keys(items)
            .into_iter()
            .map(|k| (k, Duration::ZERO))
            .collect(),
        3 => {
            let mut rng = SplitMix(42);
            keys(items)
                .into_iter()
                .map(|k| (k, Duration::from_micros(rng.next() % 100_001)))
                .collect()
        }
        _ => {
            eprintln!("kube-runtime scheduler: workload {workload} does not fit (see the doc)");
            return;
        }
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (cpu0, start) = (cpu_seconds(), Instant::now());
    let gets = runtime.block_on(run(requests, items));
    let (secs, cpu) = (start.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    println!(
        "RESULT impl=kube-runtime workload={workload} ops={items} secs={secs:.4} cpu={cpu:.3} gets={gets}"
    );
}
