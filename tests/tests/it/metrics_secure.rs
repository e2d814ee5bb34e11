//! Secure `/metrics` (`ManagerBuilder::metrics_secure`) against a real API
//! server: the manager runs as a ServiceAccount holding only
//! `Rules::metrics_auth()`; scrapers present ServiceAccount tokens. No
//! token or a garbage one answers 401, a user without the metrics-reader
//! role 403, one with it 200; a second scrape is answered from the cache
//! (no new review); a certificate in the cert dir is served and reloaded.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use opkit::manager::{Manager, ManagerError, SecureMetrics};
use opkit::rbac::{self, Rules};
use opkit::webhook::DevCertificate;
use opkit_envtest::ControlPlane;
use opkit_tests::metrics_client::{MetricsClient, Trust};
use opkit_tests::{
    eventually, grant_cluster_role, init_tracing, plane_with_namespace, service_account_token,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const WITHIN: Duration = Duration::from_secs(30);

/// A manager serving secure metrics, running as the ServiceAccount
/// `metrics-manager` of `ns` with only what secure metrics needs.
struct Running {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<Result<(), ManagerError>>,
}

impl Running {
    async fn start(
        plane: &ControlPlane,
        admin: &kube::Client,
        ns: &str,
        secure: SecureMetrics,
    ) -> Self {
        let role = Rules::new()
            .metrics_auth()
            .cluster_role(&format!("{ns}-metrics-auth"));
        grant_cluster_role(admin, &role, ns, "metrics-manager").await;
        let token = service_account_token(admin, ns, "metrics-manager").await;
        let mut config = plane.config().clone();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.into()),
            ..kube::config::AuthInfo::default()
        };
        let manager = Manager::builder()
            .config(config)
            .namespace(ns)
            .metrics_bind_address("127.0.0.1:0")
            .metrics_secure(secure)
            .build()
            .await
            .expect("the manager builds");
        let addr = manager.metrics_address().expect("metrics are served");
        let stop = CancellationToken::new();
        let task = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
        Self { addr, stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task
            .await
            .expect("the manager task")
            .expect("a clean shutdown");
    }
}

/// Waits until the API server's authorizer lets `user` get `/metrics`
/// (a new ClusterRoleBinding reaches it through an informer).
async fn until_allowed(admin: &kube::Client, user: &str) {
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    eventually(
        &format!("{user} to be allowed get /metrics"),
        WITHIN,
        || async {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.to_owned()),
                    non_resource_attributes: Some(NonResourceAttributes {
                        path: Some("/metrics".to_owned()),
                        verb: Some("get".to_owned()),
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
            answer.status?.allowed.then_some(())
        },
    )
    .await;
}

/// The manager's POSTs to the API server so far (the reviews), from a scrape.
fn review_posts(scrape: &str) -> f64 {
    scrape
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && l.contains(r#"method="POST""#))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_answer_by_token_401_403_200_and_cache_the_reviews() {
    let ns = "metrics-secure-auth";
    let (plane, admin) = plane_with_namespace(ns).await;
    let running = Running::start(plane, &admin, ns, SecureMetrics::new()).await;
    let stranger = service_account_token(&admin, ns, "stranger").await;
    let scraper = service_account_token(&admin, ns, "scraper").await;
    grant_cluster_role(
        &admin,
        &rbac::metrics_reader_role(&format!("{ns}-metrics-reader")),
        ns,
        "scraper",
    )
    .await;
    until_allowed(&admin, &format!("system:serviceaccount:{ns}:scraper")).await;

    // A self-signed certificate: scrapers skip verification.
    let mut client = MetricsClient::connect(running.addr, Trust::AnyCertificate)
        .await
        .expect("a TLS connection");
    assert!(client.peer_certificate.is_some());

    let (status, body) = client.get("/metrics", None).await.unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("bearer token"), "{body}");

    let (status, body) = client.get("/metrics", Some("garbage")).await.unwrap();
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("the bearer token is not valid"), "{body}");

    let (status, body) = client.get("/metrics", Some(&stranger)).await.unwrap();
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains(&format!("system:serviceaccount:{ns}:stranger")),
        "{body}"
    );
    assert!(body.contains("metrics-reader"), "{body}");

    let (status, body) = client.get("/metrics", Some(&scraper)).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    let posts = review_posts(&body);
    // garbage: 1 TokenReview; stranger: 2; scraper: 2 (the scrape's own
    // counters are taken after its reviews).
    assert_eq!(posts, 5.0, "{body}");

    // Cached: no new review for any of the tokens seen.
    for token in [&scraper, &stranger] {
        let _ = client.get("/metrics", Some(token)).await.unwrap();
    }
    let (status, body) = client.get("/metrics", Some(&scraper)).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(review_posts(&body), posts, "the decisions were cached");

    // Plain HTTP to the HTTPS port gets no metrics.
    let mut plain = MetricsClient::connect(running.addr, Trust::PlainHttp)
        .await
        .expect("a TCP connection");
    assert!(
        !matches!(plain.get("/metrics", Some(&scraper)).await, Ok((200, _))),
        "plain HTTP must not be served"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_serve_the_cert_dir_and_reload_it() {
    let ns = "metrics-secure-certs";
    let (plane, admin) = plane_with_namespace(ns).await;
    let dir = tempfile::tempdir().unwrap();
    let first = DevCertificate::generate(&["127.0.0.1"]).unwrap();
    first.write_to(dir.path()).unwrap();
    let running =
        Running::start(plane, &admin, ns, SecureMetrics::new().cert_dir(dir.path())).await;
    let served = MetricsClient::connect(running.addr, Trust::Ca(first.ca_pem()))
        .await
        .expect("the certificate verifies against its CA");
    assert!(served.peer_certificate.is_some());

    let rotated = DevCertificate::generate(&["127.0.0.1"]).unwrap();
    rotated.write_to(dir.path()).unwrap();
    eventually("the rotated certificate to be served", WITHIN, || async {
        MetricsClient::connect(running.addr, Trust::Ca(rotated.ca_pem()))
            .await
            .ok()
            .map(|_| ())
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn a_missing_metrics_certificate_fails_the_build_naming_the_file() {
    init_tracing();
    let plane = ControlPlane::shared().await.expect("the control plane");
    let dir = tempfile::tempdir().unwrap();
    let error = Manager::builder()
        .client(plane.client().unwrap())
        .metrics_bind_address("127.0.0.1:0")
        .metrics_secure(SecureMetrics::new().cert_dir(dir.path()))
        .build()
        .await
        .expect_err("no certificate in the cert dir");
    let text = error.to_string();
    assert!(
        matches!(error, ManagerError::MetricsCertificate { .. }) && text.contains("tls.crt"),
        "{text}"
    );
}
