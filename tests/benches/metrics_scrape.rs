//! The cost of secure metrics on a scrape, against a real kube-apiserver:
//! `GET /metrics` from one kept-alive connection to a manager serving plain
//! HTTP, and to one serving HTTPS with authentication and authorization
//! (`ManagerBuilder::metrics_secure`), with a token seen before (the
//! decision is cached) and with a fresh token each time (a TokenReview and
//! a SubjectAccessReview per scrape, as the first scrape of a scraper after
//! the cache's TTL). Prints p50 and p99 of each and their ratio to plain
//! HTTP.
//!
//! `cargo bench -p opkit-tests --bench metrics_scrape` (`SCRAPES=N`,
//! default 300).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use opkit::manager::{Manager, SecureMetrics};
use opkit_envtest::ControlPlane;
use opkit_tests::metrics_client::{MetricsClient, Trust};
use opkit_tests::{create_namespace, grant_cluster_role, service_account_token};
use tokio_util::sync::CancellationToken;

const NS: &str = "metrics-scrape-bench";

fn scrapes() -> usize {
    match std::env::var("SCRAPES") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("SCRAPES must be a number of scrapes, not {v:?}")),
        Err(_) => 300,
    }
}

/// The latency at quantile `q` of sorted samples.
fn at(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,kube_client=off")),
        )
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(measure(scrapes()));
}

/// Starts a manager serving metrics (secure or not) on loopback.
async fn manager(plane: &ControlPlane, secure: bool, stop: &CancellationToken) -> SocketAddr {
    let mut builder = Manager::builder()
        .config(plane.config().clone())
        .namespace(NS)
        .metrics_bind_address("127.0.0.1:0");
    if secure {
        builder = builder.metrics_secure(SecureMetrics::new());
    }
    let manager = builder.build().await.expect("the manager builds");
    let addr = manager.metrics_address().expect("metrics are served");
    tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    addr
}

/// Times one scrape per token on one connection, after an untimed scrape
/// with `warm_up` (the connection is warm for every timed one).
async fn time_scrapes(
    addr: SocketAddr,
    trust: Trust<'_>,
    warm_up: Option<&str>,
    tokens: &[Option<String>],
) -> Vec<Duration> {
    let mut client = MetricsClient::connect(addr, trust)
        .await
        .expect("a connection");
    let _ = client.get("/metrics", warm_up).await;
    let mut samples = Vec::with_capacity(tokens.len());
    for token in tokens {
        let started = Instant::now();
        let (status, body) = client
            .get("/metrics", token.as_deref())
            .await
            .expect("a scrape");
        samples.push(started.elapsed());
        assert_eq!(status, 200, "{body}");
    }
    samples.sort();
    samples
}

async fn measure(scrapes: usize) {
    let plane = ControlPlane::shared().await.expect("the control plane");
    let admin = plane.client().expect("admin client");
    create_namespace(&admin, NS).await;
    grant_cluster_role(
        &admin,
        &opkit::rbac::metrics_reader_role(&format!("{NS}-metrics-reader")),
        NS,
        "scraper",
    )
    .await;
    // One token for the cached case (reviewed at its warm-up scrape); a
    // fresh one per timed scrape for the uncached case, each reviewed once.
    let seen = service_account_token(&admin, NS, "scraper").await;
    let mut fresh = Vec::with_capacity(scrapes);
    for _ in 0..scrapes {
        fresh.push(Some(service_account_token(&admin, NS, "scraper").await));
    }
    let cached = vec![Some(seen.clone()); scrapes];

    let stop = CancellationToken::new();
    let plain_addr = manager(plane, false, &stop).await;
    let secure_addr = manager(plane, true, &stop).await;
    // A new binding reaches the API server's authorizer through an
    // informer: give it a moment before the first review.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let plain = time_scrapes(plain_addr, Trust::PlainHttp, None, &vec![None; scrapes]).await;
    let secure_cached =
        time_scrapes(secure_addr, Trust::AnyCertificate, Some(&seen), &cached).await;
    let secure_uncached =
        time_scrapes(secure_addr, Trust::AnyCertificate, Some(&seen), &fresh).await;
    stop.cancel();

    let (p50, p99) = (at(&plain, 0.5), at(&plain, 0.99));
    println!("metrics scrape latency, {scrapes} scrapes each, one kept-alive connection:");
    println!(
        "{:<44} {:>10} {:>10} {:>8} {:>8}",
        "", "p50", "p99", "p50 ×", "p99 ×"
    );
    for (label, samples) in [
        ("plain HTTP", &plain),
        ("HTTPS + auth, cached decision", &secure_cached),
        ("HTTPS + auth, first scrape (2 reviews)", &secure_uncached),
    ] {
        let (s50, s99) = (at(samples, 0.5), at(samples, 0.99));
        println!(
            "{label:<44} {:>10} {:>10} {:>8.2} {:>8.2}",
            format!("{s50:.2?}"),
            format!("{s99:.2?}"),
            s50.as_secs_f64() / p50.as_secs_f64(),
            s99.as_secs_f64() / p99.as_secs_f64(),
        );
    }
}
