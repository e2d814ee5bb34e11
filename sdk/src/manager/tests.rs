//! The manager without a server: options, runnables, shutdown timing (on
//! tokio's paused clock), and the HTTP endpoints through the router.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::health::{self, Checks};
use super::server::{self, Endpoints, Serves};
use super::*;
use crate::controller::Controller;
use crate::metrics::Metrics;
use crate::reconcile::{Action, Reconcile, ReconcileError};

/// A client for a server that does not exist: the tests here never call it.
fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

async fn manager(timeout: Duration) -> Manager {
    Manager::builder()
        .client(offline_client())
        .graceful_shutdown_timeout(timeout)
        .build()
        .await
        .unwrap()
}

struct Noop;

impl Reconcile for Noop {
    type Object = k8s_openapi::api::core::v1::ConfigMap;

    async fn reconcile(
        &self,
        _req: crate::reconcile::Request,
        _ctx: &crate::reconcile::Context<k8s_openapi::api::core::v1::ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

#[test]
fn addresses_follow_controller_runtimes_flag_forms() {
    assert_eq!(server::parse_address("0"), None);
    assert_eq!(server::parse_address(""), None);
    assert_eq!(
        server::parse_address(":8080").as_deref(),
        Some("0.0.0.0:8080")
    );
    assert_eq!(
        server::parse_address("127.0.0.1:0").as_deref(),
        Some("127.0.0.1:0")
    );
}

#[tokio::test]
async fn servers_are_bound_at_build_one_when_addresses_match() {
    let separate = Manager::builder()
        .client(offline_client())
        .metrics_bind_address("127.0.0.1:0")
        .health_probe_bind_address("127.0.0.1:0")
        .build()
        .await
        .unwrap();
    let (metrics, probes) = (
        separate.metrics_address().unwrap(),
        separate.health_probe_address().unwrap(),
    );
    assert_ne!(metrics.port(), 0);
    assert_ne!(metrics, probes, "two servers on two ports");

    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let shared = Manager::builder()
        .client(offline_client())
        .metrics_bind_address(port.clone())
        .health_probe_bind_address(port.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(shared.metrics_address(), shared.health_probe_address());
    assert_eq!(shared.metrics_address().unwrap().to_string(), port);

    let off = manager(Duration::from_secs(1)).await;
    assert_eq!(off.metrics_address(), None);
    assert_eq!(off.health_probe_address(), None);

    // A taken port is a clear error at build time.
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let both = Manager::builder()
        .client(offline_client())
        .metrics_bind_address(addr.clone())
        .health_probe_bind_address(addr.clone())
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(
            &both,
            ManagerError::Bind {
                server: "metrics and health probe",
                ..
            }
        ),
        "{both:?}"
    );
    assert!(both.to_string().contains(&addr), "{both}");
}

#[tokio::test]
async fn invalid_leader_election_options_fail_the_build() {
    let err = Manager::builder()
        .client(offline_client())
        .leader_election(
            LeaderElection::new("lock")
                .lease_duration(Duration::from_secs(5))
                .renew_deadline(Duration::from_secs(10)),
        )
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, ManagerError::LeaderElection(_)), "{err:?}");
    assert!(err.to_string().contains("renew_deadline"), "{err}");
}

/// Multicluster controllers without a provider fail the run at once, before
/// the election: this replica could never lead (its server does not exist),
/// so an error found after winning it would never come.
#[cfg(feature = "multicluster")]
#[tokio::test]
async fn multicluster_controllers_without_a_provider_fail_before_the_election() {
    let mut manager = Manager::builder()
        .client(offline_client())
        .leader_election(LeaderElection::new("lock").namespace("default"))
        .build()
        .await
        .unwrap();
    manager.add(Controller::new(Noop).multicluster()).unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(10),
        manager.run_until(std::future::pending()),
    )
    .await
    .expect("the run fails at once, not after leading")
    .unwrap_err();
    assert!(
        matches!(
            err,
            ManagerError::MultiCluster(crate::multicluster::MultiClusterError::NoProvider)
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_missing_kubeconfig_is_a_config_error() {
    let err = Manager::builder()
        .kubeconfig("/nonexistent/kubeconfig")
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, ManagerError::Config(_)), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/kubeconfig"), "{err}");
}

#[tokio::test]
async fn controller_names_are_unique_and_show_in_metrics_at_once() {
    let mut manager = manager(Duration::from_secs(1)).await;
    manager
        .add(crate::controller::Controller::new(Noop))
        .unwrap();
    let err = manager
        .add(crate::controller::Controller::new(Noop))
        .unwrap_err();
    assert!(
        matches!(&err, ManagerError::DuplicateController { name } if name == "configmap"),
        "{err:?}"
    );
    manager
        .add(
            crate::controller::Controller::new(Noop)
                .name("other")
                .max_concurrent_reconciles(3),
        )
        .unwrap();
    let text = manager.metrics().encode().unwrap();
    assert!(
        text.contains(r#"controller_runtime_max_concurrent_reconciles{controller="other"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="configmap",result="success"} 0"#
        ),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn runnables_finish_within_the_timeout_and_the_manager_returns_ok() {
    let mut manager = manager(Duration::from_secs(30)).await;
    let finished = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    manager.add_runnable(Runnable::new("worker", {
        let finished = Arc::clone(&finished);
        let started = Arc::clone(&started);
        move |stop| async move {
            started.notify_one();
            stop.cancelled().await;
            // Ten seconds of clean-up: within the 30 s timeout.
            tokio::time::sleep(Duration::from_secs(10)).await;
            finished.store(true, Ordering::SeqCst);
            Ok(())
        }
    }));
    let leading = manager.leading();
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    started.notified().await;
    assert!(
        *leading.borrow(),
        "without leader election, a running manager leads"
    );
    let begun = tokio::time::Instant::now();
    stop.cancel();
    run.await.unwrap().unwrap();
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(begun.elapsed(), Duration::from_secs(10));
    assert!(!*leading.borrow());
}

#[tokio::test(start_paused = true)]
async fn a_runnable_past_the_timeout_is_abandoned_and_named() {
    let mut manager = manager(Duration::from_secs(5)).await;
    let started = Arc::new(tokio::sync::Notify::new());
    manager.add_runnable(
        Runnable::new("stubborn", {
            let started = Arc::clone(&started);
            move |_stop| async move {
                started.notify_one();
                std::future::pending::<()>().await;
                Ok(())
            }
        })
        .needs_leader_election(false),
    );
    manager.add_runnable(Runnable::new("polite", |stop| async move {
        stop.cancelled().await;
        Ok(())
    }));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    started.notified().await;
    let begun = tokio::time::Instant::now();
    stop.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert_eq!(begun.elapsed(), Duration::from_secs(5));
    match err {
        ManagerError::ShutdownTimeout { timeout, running } => {
            assert_eq!(timeout, Duration::from_secs(5));
            assert_eq!(running, ["stubborn"]);
        }
        other => panic!("expected a shutdown timeout, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_runnable_stops_the_others_and_is_reported() {
    let mut manager = manager(Duration::from_secs(5)).await;
    let stopped = Arc::new(AtomicUsize::new(0));
    manager.add_runnable(Runnable::new("watcher", {
        let stopped = Arc::clone(&stopped);
        move |stop| async move {
            stop.cancelled().await;
            stopped.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }));
    manager.add_runnable(Runnable::new("broken", |_stop| async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Err("the backing store is gone".into())
    }));
    let err = manager.run_until(std::future::pending()).await.unwrap_err();
    assert!(
        matches!(&err, ManagerError::Runnable { name, .. } if name == "broken"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("the backing store is gone"),
        "{err}"
    );
    assert_eq!(stopped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_runnable_is_reported_by_name() {
    let mut manager = manager(Duration::from_secs(5)).await;
    manager.add_runnable(Runnable::new("buggy", |_stop| async move {
        panic!("bug");
    }));
    let err = manager.run_until(std::future::pending()).await.unwrap_err();
    assert!(
        matches!(&err, ManagerError::Panicked { name } if name == "buggy"),
        "{err:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_runnable_that_ends_early_does_not_stop_the_manager() {
    let mut manager = manager(Duration::from_secs(5)).await;
    manager.add_runnable(Runnable::new("one-shot", |_stop| async move { Ok(()) }));
    let stop = CancellationToken::new();
    let run = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!run.is_finished());
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn checks_answer_in_the_apiservers_format() {
    let mut checks = Checks::default();
    checks.add("ping".into(), health::ping());
    let report = checks.run("readyz", None, false).await;
    assert!(report.healthy);
    assert_eq!(report.body, "ok");
    let report = checks.run("readyz", None, true).await;
    assert_eq!(report.body, "[+]ping ok\nreadyz check passed\n");

    checks.add(
        "db".into(),
        health::check(|| async { Err("connection refused".into()) }),
    );
    let report = checks.run("readyz", None, false).await;
    assert!(!report.healthy);
    assert_eq!(
        report.body,
        "[+]ping ok\n[-]db failed: connection refused\nreadyz check failed\n"
    );
    let only = checks.run("readyz", Some("ping"), false).await;
    assert!(only.healthy);
}

async fn get(router: &axum::Router, uri: &str) -> (StatusCode, String, Option<String>) {
    let response = router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        String::from_utf8(body.to_vec()).unwrap(),
        content_type,
    )
}

#[tokio::test]
async fn endpoints_serve_metrics_and_probes() {
    let metrics = Metrics::new();
    metrics.set_leader("lock", true);
    let mut healthz = Checks::default();
    healthz.add("ping".into(), health::ping());
    let mut readyz = Checks::default();
    let ready = Arc::new(AtomicBool::new(false));
    readyz.add(
        "informers".into(),
        health::check({
            let ready = Arc::clone(&ready);
            move || {
                let ready = ready.load(Ordering::SeqCst);
                async move {
                    if ready {
                        Ok(())
                    } else {
                        Err("ConfigMap (all namespaces): not synced".into())
                    }
                }
            }
        }),
    );
    let endpoints = Endpoints {
        metrics,
        healthz: Arc::new(healthz),
        readyz: Arc::new(readyz),
    };
    let both = server::router(Serves::Both, endpoints.clone());

    let (status, body, content_type) = get(&both, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("leader_election_master_status{name=\"lock\"} 1"));
    assert_eq!(content_type.as_deref(), Some(crate::metrics::CONTENT_TYPE));

    assert_eq!(get(&both, "/healthz").await.0, StatusCode::OK);
    let (status, body, _) = get(&both, "/readyz").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("[-]informers failed: ConfigMap"), "{body}");
    ready.store(true, Ordering::SeqCst);
    let (status, body, _) = get(&both, "/readyz").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    let (status, body, _) = get(&both, "/readyz?verbose").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "[+]informers ok\nreadyz check passed\n");
    assert_eq!(get(&both, "/readyz/informers").await.0, StatusCode::OK);
    assert_eq!(get(&both, "/readyz/nope").await.0, StatusCode::NOT_FOUND);

    // Separate servers serve only their own paths.
    let metrics_only = server::router(Serves::Metrics, endpoints.clone());
    assert_eq!(
        get(&metrics_only, "/healthz").await.0,
        StatusCode::NOT_FOUND
    );
    let probes_only = server::router(Serves::Probes, endpoints);
    assert_eq!(get(&probes_only, "/metrics").await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&probes_only, "/healthz/ping").await.0, StatusCode::OK);
}

#[tokio::test]
async fn the_caches_informers_stop_with_the_manager() {
    let mut manager = manager(Duration::from_secs(5)).await;
    manager.add(Controller::new(Noop)).unwrap();
    // The controller's watch shares this informer (same kind, same scope).
    let informer = manager
        .cache()
        .informer::<k8s_openapi::api::core::v1::ConfigMap>()
        .unwrap();
    let watched = informer.clone();
    // Awaited here, not spawned: nothing else runs between `run_until`
    // returning and the checks below. The offline server may fail the start
    // first; either way the manager shuts down the same way.
    let _ = manager
        .run_until(async move {
            while !watched.is_started() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(watched.live_tasks() > 0);
        })
        .await;
    assert!(informer.is_stopped(), "the informer outlived the manager");
    assert_eq!(
        informer.live_tasks(),
        0,
        "informer tasks outlived the manager"
    );
}

#[cfg(feature = "secure-metrics")]
#[tokio::test]
async fn secure_metrics_never_share_the_probes_address_and_stay_off_with_metrics() {
    let shared = Manager::builder()
        .client(offline_client())
        .metrics_bind_address("127.0.0.1:18443")
        .health_probe_bind_address("127.0.0.1:18443")
        .metrics_secure(SecureMetrics::new())
        .build()
        .await
        .unwrap_err();
    assert!(shared.to_string().contains("cannot share"), "{shared}");
    // Metrics off: the (missing) certificate is never read.
    let off = Manager::builder()
        .client(offline_client())
        .metrics_bind_address("0")
        .metrics_secure(SecureMetrics::new().cert_dir("/nonexistent"))
        .build()
        .await
        .unwrap();
    assert_eq!(off.metrics_address(), None);
}
