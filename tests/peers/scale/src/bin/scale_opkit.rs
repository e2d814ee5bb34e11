//! The opkit peer of `make bench-scale` (tests/peers/bench-scale.sh).
//!
//! The same controller as the controller-runtime peer
//! (tests/peers/scale-controller-runtime): it watches every Pod in the
//! cluster and, for each Pod it is woken for, reads the Pod from the cache
//! and tallies whether it is Running with condition Ready=True. No writes.
//!
//! Every watch event delivered to the controller passes through a predicate
//! that counts it and lets it through; every reconcile is counted.
//!
//! opkit's defaults (`SharedCache` cluster-wide, managed fields stripped,
//! JSON), `--workers` concurrent reconciles (default 4).
//!
//! `--projected`: the same controller over a projection (issue 27): Pods
//! cached as `Projected<Pod, PodView>`, the view keeping only what the
//! reconciler reads (Running, Ready), beside the metadata essentials.
//!
//! `--current-thread`: tokio's current-thread runtime instead of the
//! multi-thread one (what cross-thread wake-ups cost per event).
//!
//! Output on stdout, read by the driver:
//!
//! ```text
//! Y <unix ns>                                        the Pod cache has synced
//! T <unix ns> <events> <reconciles> <ready> <gone>   every 100 ms
//! ```
//!
//! `scale-opkit --kubeconfig K [--workers 4] [--projected]`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench_support::{arg, now_ns};
use k8s_openapi::api::core::v1::Pod;
use opkit::cache::{Projected, Projection, SharedCache};
use opkit::controller::Controller;
use opkit::predicate::PredicateEvent;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};

/// Watch events the controller was handed (creates, updates, deletes).
static EVENTS: AtomicU64 = AtomicU64::new(0);
/// Reconciles run.
static RECONCILES: AtomicU64 = AtomicU64::new(0);
/// Reconciles that found their Pod Running and Ready.
static READY: AtomicU64 = AtomicU64::new(0);
/// Reconciles whose Pod was no longer in the cache.
static GONE: AtomicU64 = AtomicU64::new(0);

/// Running, with condition Ready=True.
fn running_and_ready(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

struct TallyReadiness;

impl Reconcile for TallyReadiness {
    type Object = Pod;

    async fn reconcile(&self, _req: Request, ctx: &Context<Pod>) -> Result<Action, ReconcileError> {
        RECONCILES.fetch_add(1, Ordering::Relaxed);
        match ctx.object().await? {
            None => {
                GONE.fetch_add(1, Ordering::Relaxed);
            }
            Some(pod) if running_and_ready(&pod) => {
                READY.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {}
        }
        Ok(Action::done())
    }
}

/// What the reconciler reads of a Pod (`--projected`).
struct PodView {
    running_and_ready: bool,
}

impl Projection<Pod> for PodView {
    fn project(pod: Pod) -> Self {
        PodView {
            running_and_ready: running_and_ready(&pod),
        }
    }
}

/// The same reconciler over the projection.
struct TallyProjected;

impl Reconcile for TallyProjected {
    type Object = Projected<Pod, PodView>;

    async fn reconcile(
        &self,
        _req: Request,
        ctx: &Context<Projected<Pod, PodView>>,
    ) -> Result<Action, ReconcileError> {
        RECONCILES.fetch_add(1, Ordering::Relaxed);
        match ctx.object().await? {
            None => {
                GONE.fetch_add(1, Ordering::Relaxed);
            }
            Some(pod) if pod.running_and_ready => {
                READY.fetch_add(1, Ordering::Relaxed);
            }
            Some(_) => {}
        }
        Ok(Action::done())
    }
}

/// Default: tokio's multi-thread runtime with a worker per core, as
/// `#[tokio::main]`; `--current-thread`: one thread for everything (to
/// measure what waking tasks across threads costs per event).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut runtime = if args.iter().any(|a| a == "--current-thread") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    runtime
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(run(args));
}

async fn run(args: Vec<String>) {
    let kubeconfig = arg(&args, "--kubeconfig").expect("--kubeconfig");
    let workers: usize = arg(&args, "--workers")
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);

    let config = opkit::config::load(&opkit::config::ConfigSource::File {
        path: kubeconfig.into(),
        context: None,
    })
    .await
    .expect("kubeconfig");
    let client = kube::Client::try_from(config).expect("client");
    let cache = SharedCache::new(client);
    tokio::spawn(async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            println!(
                "T {} {} {} {} {}",
                now_ns(),
                EVENTS.load(Ordering::Relaxed),
                RECONCILES.load(Ordering::Relaxed),
                READY.load(Ordering::Relaxed),
                GONE.load(Ordering::Relaxed)
            );
        }
    });
    if args.iter().any(|a| a == "--projected") {
        let informer = cache
            .informer::<Projected<Pod, PodView>>()
            .expect("pod informer");
        tokio::spawn(async move {
            if informer.wait_for_sync().await.is_ok() {
                println!("Y {}", now_ns());
            }
        });
        let count_events = |_: &PredicateEvent<'_, Projected<Pod, PodView>>| {
            EVENTS.fetch_add(1, Ordering::Relaxed);
            true
        };
        Controller::with_predicate(TallyProjected, count_events)
            .max_concurrent_reconciles(workers)
            .run(&cache, std::future::pending())
            .await
            .expect("controller");
        return;
    }
    let informer = cache.informer::<Pod>().expect("pod informer");
    tokio::spawn(async move {
        if informer.wait_for_sync().await.is_ok() {
            println!("Y {}", now_ns());
        }
    });
    let count_events = |_: &PredicateEvent<'_, Pod>| {
        EVENTS.fetch_add(1, Ordering::Relaxed);
        true
    };
    Controller::with_predicate(TallyReadiness, count_events)
        .max_concurrent_reconciles(workers)
        .run(&cache, std::future::pending())
        .await
        .expect("controller");
}
