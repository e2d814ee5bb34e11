//! Criterion benchmarks of `opkit::workqueue` (single-threaded costs; the
//! multi-threaded, side-by-side workloads are `tests/peers/bench-workqueue.sh`).
//!
//! ```text
//! cargo bench -p opkit --bench workqueue
//! ```
//!
//! * `cycle/*`: one add → get → done on a small queue, per item type;
//! * `metrics/*`: the same cycle without metrics, with a registry but no
//!   queue name (must cost the same: the queue skips metrics entirely) and
//!   with opkit's Prometheus registry on a named queue (what metrics cost
//!   when they are on);
//! * `dedup_add`: adding an item that is already waiting;
//! * `batch_1k`: add 1000 distinct items, then drain them;
//! * `async_get`: the cycle through `get().await` on a current-thread runtime;
//! * `delayed_1k`: 1000 `add_after`s, time passes (paused clock), drain.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use opkit::metrics::Metrics;
use opkit::workqueue::WorkQueue;

fn cycle<T: Eq + std::hash::Hash + Clone + Send + Sync + 'static>(q: &WorkQueue<T>, item: T) {
    q.add(item);
    if let Some(got) = q.try_get() {
        q.done(&got);
    }
}

fn bench_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    let q: WorkQueue<u64> = WorkQueue::new();
    let mut i = 0u64;
    g.bench_function("u64", |b| {
        b.iter(|| {
            i = (i + 1) % 1024;
            cycle(&q, black_box(i));
        })
    });
    let keys: Vec<Arc<str>> = (0..1024)
        .map(|i| Arc::from(format!("default/object-{i}")))
        .collect();
    let q: WorkQueue<Arc<str>> = WorkQueue::new();
    let mut i = 0;
    g.bench_function("arc_str", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            cycle(&q, keys[i].clone());
        })
    });
    let strings: Vec<String> = (0..1024).map(|i| format!("default/object-{i}")).collect();
    let q: WorkQueue<String> = WorkQueue::new();
    let mut i = 0;
    g.bench_function("string", |b| {
        b.iter(|| {
            i = (i + 1) % strings.len();
            cycle(&q, strings[i].clone());
        })
    });
    g.finish();
}

fn bench_metrics(c: &mut Criterion) {
    let mut g = c.benchmark_group("metrics");
    let metrics = Metrics::new();
    let queues: [(&str, WorkQueue<u64>); 3] = [
        ("none", WorkQueue::builder().name("bench").build()),
        ("unnamed", WorkQueue::builder().metrics(&metrics).build()),
        (
            "prometheus",
            WorkQueue::builder()
                .name("bench")
                .metrics(&metrics)
                .unfinished_work_update_period(Duration::ZERO)
                .build(),
        ),
    ];
    for (name, q) in &queues {
        let mut i = 0u64;
        g.bench_function(*name, |b| {
            b.iter(|| {
                i = (i + 1) % 1024;
                cycle(q, black_box(i));
            })
        });
    }
    g.finish();
}

fn bench_shapes(c: &mut Criterion) {
    let q: WorkQueue<u64> = WorkQueue::new();
    q.add(7);
    c.bench_function("dedup_add", |b| b.iter(|| q.add(black_box(7))));

    let q: WorkQueue<u64> = WorkQueue::new();
    c.bench_function("batch_1k", |b| {
        b.iter(|| {
            for i in 0..1000 {
                q.add(i);
            }
            while let Some(i) = q.try_get() {
                q.done(&i);
            }
        })
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let q: WorkQueue<u64> = WorkQueue::new();
    let mut i = 0u64;
    c.bench_function("async_get", |b| {
        b.to_async(&rt).iter(|| {
            i = (i + 1) % 1024;
            let q = q.clone();
            let item = i;
            async move {
                q.add(item);
                if let Some(got) = q.get().await {
                    q.done(&got);
                }
            }
        })
    });

    let paused = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    let q: WorkQueue<u64> = paused.block_on(async { WorkQueue::new() });
    c.bench_function("delayed_1k", |b| {
        b.to_async(&paused).iter(|| {
            let q = q.clone();
            async move {
                for i in 0..1000u64 {
                    q.add_after(i, Duration::from_micros((i * 7919) % 1000 + 1));
                }
                tokio::time::advance(Duration::from_millis(2)).await;
                while let Some(i) = q.try_get() {
                    q.done(&i);
                }
            }
        })
    });
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_cycle, bench_metrics, bench_shapes
}
criterion_main!(benches);
