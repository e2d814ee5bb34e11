//! Criterion benchmarks of `opkit::workqueue` (single-threaded costs; the
//! multi-threaded, side-by-side workloads are `tests/peers/bench-workqueue.sh`).
//!
//! ```text
//! cargo bench -p opkit --bench workqueue
//! ```
//!
//! * `cycle/*`: one add → get → done on a small queue, per item type;
//! * `metrics/*`: the same cycle without a provider, with the no-op provider
//!   (must cost the same: the queue skips metrics entirely) and with a
//!   counting provider (what metrics cost when they are on);
//! * `dedup_add`: adding an item that is already waiting;
//! * `batch_1k`: add 1000 distinct items, then drain them;
//! * `async_get`: the cycle through `get().await` on a current-thread runtime;
//! * `delayed_1k`: 1000 `add_after`s, time passes (paused clock), drain.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use opkit::workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use opkit::workqueue::{NoopMetricsProvider, WorkQueue};

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

/// Metrics that count into atomics.
#[derive(Default)]
struct Counting(Arc<AtomicU64>);

impl GaugeMetric for Counting {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
impl CounterMetric for Counting {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}
impl HistogramMetric for Counting {
    fn observe(&self, v: f64) {
        self.0.fetch_add(v.to_bits() & 1, Ordering::Relaxed);
    }
}
impl SettableGaugeMetric for Counting {
    fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }
}

#[derive(Default)]
struct CountingProvider(Arc<AtomicU64>);

impl CountingProvider {
    fn make(&self) -> Box<Counting> {
        Box::new(Counting(self.0.clone()))
    }
}

impl MetricsProvider for CountingProvider {
    fn new_depth_metric(&self, _: &str) -> Box<dyn GaugeMetric> {
        self.make()
    }
    fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        self.make()
    }
    fn new_queue_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        self.make()
    }
    fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        self.make()
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> {
        self.make()
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.make()
    }
    fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        self.make()
    }
}

fn bench_metrics(c: &mut Criterion) {
    let mut g = c.benchmark_group("metrics");
    let queues: [(&str, WorkQueue<u64>); 3] = [
        ("none", WorkQueue::builder().name("bench").build()),
        (
            "noop_provider",
            WorkQueue::builder()
                .name("bench")
                .metrics(Arc::new(NoopMetricsProvider))
                .build(),
        ),
        (
            "counting_provider",
            WorkQueue::builder()
                .name("bench")
                .metrics(Arc::new(CountingProvider::default()))
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
