//! `opkit::manager` against a real control plane: leader election between
//! managers (one reconciles, hand-over, a leader cut off stops first),
//! `/metrics` scraped and parsed, `/readyz` flipping once caches sync, a
//! missing CRD or an unreachable API server failing the start with an error
//! naming it, `process_*` and `rest_client_*` metrics, and SIGTERM / a second signal on a separate operator process.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::CustomResource;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use opkit::cache::CacheError;
use opkit::controller::Controller;
use opkit::manager::{LeaderElection, Manager, ManagerError};
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{eventually, grant, init_tracing, plane_with_namespace, rule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE: Duration = Duration::from_secs(2);
const RENEW: Duration = Duration::from_millis(1_500);
const RETRY: Duration = Duration::from_millis(250);

fn election(ns: &str, identity: &str) -> LeaderElection {
    LeaderElection::new("manager-lock")
        .namespace(ns)
        .identity(identity)
        .lease_duration(LEASE)
        .renew_deadline(RENEW)
        .retry_period(RETRY)
        .release_on_cancel(true)
}

/// One reconcile as a test sees it: which manager, which object, when it
/// started and (if it did) when it finished.
#[derive(Debug, Clone)]
struct Seen {
    manager: usize,
    name: String,
    started: Instant,
    finished: Option<Instant>,
}

/// Every reconcile of every manager of one test.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<Seen>>>);

impl Journal {
    fn start(&self, manager: usize, name: &str) -> usize {
        let mut all = self.0.lock().unwrap();
        all.push(Seen {
            manager,
            name: name.to_owned(),
            started: Instant::now(),
            finished: None,
        });
        all.len() - 1
    }

    fn finish(&self, index: usize) {
        self.0.lock().unwrap()[index].finished = Some(Instant::now());
    }

    fn all(&self) -> Vec<Seen> {
        self.0.lock().unwrap().clone()
    }

    fn by(&self, manager: usize) -> Vec<Seen> {
        self.all()
            .into_iter()
            .filter(|s| s.manager == manager)
            .collect()
    }

    fn names_by(&self, manager: usize) -> BTreeSet<String> {
        self.by(manager).into_iter().map(|s| s.name).collect()
    }
}

/// Records each reconcile in the journal; `ticker` objects requeue every
/// 100 ms, so a leader reconciles continuously; each reconcile takes `work`.
struct Recording {
    manager: usize,
    journal: Journal,
    work: Duration,
}

impl Reconcile for Recording {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let index = self.journal.start(self.manager, &req.name);
        tokio::time::sleep(self.work).await;
        self.journal.finish(index);
        if req.name.starts_with("ticker") {
            return Ok(Action::requeue_after(Duration::from_millis(100)));
        }
        Ok(Action::done())
    }
}

async fn config_map(client: &kube::Client, ns: &str, name: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// A running manager: its task, its stop button, what the test reads.
struct Running {
    task: JoinHandle<Result<(), ManagerError>>,
    stop: CancellationToken,
    leading: tokio::sync::watch::Receiver<bool>,
    cache: opkit::cache::SharedCache,
    metrics_address: Option<SocketAddr>,
    probe_address: Option<SocketAddr>,
}

impl Running {
    fn start(manager: Manager) -> Self {
        let stop = CancellationToken::new();
        let leading = manager.leading();
        let cache = manager.cache().clone();
        let metrics_address = manager.metrics_address();
        let probe_address = manager.health_probe_address();
        let task = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
        Self {
            task,
            stop,
            leading,
            cache,
            metrics_address,
            probe_address,
        }
    }

    fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    async fn stop(self) -> Result<(), ManagerError> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("the manager stops")
            .expect("the manager task")
    }
}

async fn recording_manager(
    client: kube::Client,
    ns: &str,
    index: usize,
    journal: &Journal,
    work: Duration,
) -> Manager {
    let mut manager = Manager::builder()
        .client(client)
        .namespace(ns)
        .leader_election(election(ns, &format!("manager-{index}")))
        .metrics_bind_address("127.0.0.1:0")
        .graceful_shutdown_timeout(Duration::from_secs(10))
        .build()
        .await
        .unwrap();
    manager
        .add(
            Controller::new(Recording {
                manager: index,
                journal: journal.clone(),
                work,
            })
            .max_concurrent_reconciles(2),
        )
        .unwrap();
    manager
}

/// GETs `path`; returns the status code and the body.
async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let uri = format!("http://{addr}{path}").parse().unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.get(uri))
        .await
        .expect("the server answers")
        .expect("an HTTP response");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// One sample of the exposition text.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the OpenMetrics / Prometheus text format (the subset it uses:
/// no escaped quotes or commas in label values).
fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series and value");
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let labels = body
                    .split(',')
                    .filter(|pair| !pair.is_empty())
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').expect("label=value");
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect();
                (name, labels)
            }
        };
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    samples
}

/// The value of the series `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

async fn scrape(addr: SocketAddr) -> Vec<Sample> {
    let (status, body) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    parse_metrics(&body)
}

/// Waits until exactly one of `managers` leads (never two at once); its index.
async fn wait_for_one_leader(managers: &[&Running], within: Duration) -> usize {
    tokio::time::timeout(within, async {
        loop {
            let leaders: Vec<usize> = (0..managers.len())
                .filter(|i| managers[*i].is_leading())
                .collect();
            assert!(leaders.len() <= 1, "two managers lead at once: {leaders:?}");
            if let Some(i) = leaders.first() {
                return *i;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("a manager leads in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_three_managers_reconciles_and_a_stopped_leader_hands_over() {
    let ns = "mgr-three";
    let (plane, admin) = plane_with_namespace(ns).await;
    for i in 0..5 {
        config_map(&admin, ns, &format!("cm-{i}")).await;
    }

    let journal = Journal::default();
    let mut managers = Vec::new();
    for i in 0..3 {
        let manager = recording_manager(
            plane.client().unwrap(),
            ns,
            i,
            &journal,
            Duration::from_millis(10),
        )
        .await;
        managers.push(Running::start(manager));
    }
    let all: Vec<&Running> = managers.iter().collect();
    let first = wait_for_one_leader(&all, Duration::from_secs(15)).await;
    let expected: BTreeSet<String> = (0..5).map(|i| format!("cm-{i}")).collect();
    eventually(
        "the leader reconciles every object",
        Duration::from_secs(30),
        || {
            let seen = journal.names_by(first);
            let expected = expected.clone();
            async move { (seen == expected).then_some(()) }
        },
    )
    .await;

    // Standbys: warm caches, no reconcile, leader gauge 0 (the leader's 1).
    for (i, m) in managers.iter().enumerate() {
        let cached = m.cache.list::<ConfigMap>(Some(ns)).await.unwrap();
        let names: BTreeSet<String> = cached
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .filter(|n| n.starts_with("cm-"))
            .collect();
        assert_eq!(names, expected, "manager {i}'s cache");
        let samples = scrape(m.metrics_address.unwrap()).await;
        let status = value(
            &samples,
            "leader_election_master_status",
            &[("name", "manager-lock")],
        );
        assert_eq!(
            status,
            Some(if i == first { 1.0 } else { 0.0 }),
            "manager {i}"
        );
        if i != first {
            assert!(journal.by(i).is_empty(), "standby {i} reconciled");
            let total = value(
                &samples,
                "controller_runtime_reconcile_total",
                &[("controller", "configmap"), ("result", "success")],
            );
            assert_eq!(total, Some(0.0), "standby {i}");
        }
    }

    // Stop the leader (graceful, lease released): another takes over within
    // the lease duration plus a retry period, and reconciles; the old one
    // reconciles no more.
    let stopped_at = Instant::now();
    let old = managers.remove(first);
    old.stop().await.unwrap();
    let old_count = journal.by(first).len();
    let rest: Vec<&Running> = managers.iter().collect();
    let next = wait_for_one_leader(&rest, LEASE + RETRY).await;
    let took = stopped_at.elapsed();
    assert!(took < LEASE + RETRY, "hand-over took {took:?}");
    let next_index = (0..3).filter(|i| *i != first).nth(next).unwrap();
    config_map(&admin, ns, "after-hand-over").await;
    eventually("the new leader reconciles", Duration::from_secs(30), || {
        let seen = journal.names_by(next_index);
        async move { (seen.contains("after-hand-over") && seen.len() == 6).then_some(()) }
    })
    .await;
    assert_eq!(
        journal.by(first).len(),
        old_count,
        "the stopped leader reconciled"
    );
    let third = 3 - first - next_index;
    assert!(
        journal.by(third).is_empty(),
        "the remaining standby reconciled"
    );
    // Every reconcile of the new leader started after the old one stopped.
    let old_last = journal
        .by(first)
        .iter()
        .filter_map(|s| s.finished)
        .max()
        .unwrap();
    assert!(journal.by(next_index).iter().all(|s| s.started > old_last));

    for m in managers {
        m.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_reconciling_before_another_starts() {
    let ns = "mgr-cut-off";
    let (plane, admin) = plane_with_namespace(ns).await;
    let user = "manager-a";
    grant(
        &admin,
        ns,
        "manager-a-leases",
        user,
        vec![rule(
            "coordination.k8s.io",
            &["leases"],
            &["get", "create", "update"],
        )],
    )
    .await;
    grant(
        &admin,
        ns,
        "manager-a-configmaps",
        user,
        vec![rule("", &["configmaps"], &["get", "list", "watch"])],
    )
    .await;
    config_map(&admin, ns, "ticker").await;

    // `a` (restricted) leads and reconciles the ticker continuously, each
    // reconcile taking 200 ms; `b` (admin) waits.
    let journal = Journal::default();
    let work = Duration::from_millis(200);
    let a = Running::start(
        recording_manager(plane.client_as(user, &[]).unwrap(), ns, 0, &journal, work).await,
    );
    wait_for_one_leader(&[&a], Duration::from_secs(15)).await;
    let b = Running::start(recording_manager(admin.clone(), ns, 1, &journal, work).await);
    eventually("a reconciles", Duration::from_secs(30), || {
        let n = journal.by(0).len();
        async move { (n >= 3).then_some(()) }
    })
    .await;
    assert!(!b.is_leading());

    // Cut `a` off the Lease: it must stop reconciling at its renew deadline,
    // and `run` fails so that the process would exit.
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .delete("manager-a-leases", &DeleteParams::default())
        .await
        .unwrap();
    let cut_at = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(15), a.task)
        .await
        .expect("a stops")
        .unwrap();
    let a_returned = Instant::now();
    assert!(
        matches!(&result, Err(ManagerError::LeaderElectionLost { lease }) if lease == "mgr-cut-off/manager-lock"),
        "{result:?}"
    );
    assert!(
        a_returned - cut_at <= RENEW + Duration::from_secs(1),
        "a stopped {:?} after the cut",
        a_returned - cut_at
    );
    eventually("b reconciles", Duration::from_secs(30), || {
        let n = journal.by(1).len();
        async move { (n >= 1).then_some(()) }
    })
    .await;
    let a_seen = journal.by(0);
    let b_first = journal.by(1).iter().map(|s| s.started).min().unwrap();
    // Nothing of a's ran on after b started: a's reconciles finished, or
    // were abandoned (at most one per worker), before b's first began.
    let abandoned = a_seen.iter().filter(|s| s.finished.is_none()).count();
    assert!(abandoned <= 2, "{a_seen:?}");
    for s in &a_seen {
        assert!(s.started < b_first, "a started a reconcile after b did");
        if let Some(finished) = s.finished {
            assert!(finished < b_first, "a's reconcile finished after b started");
        }
    }
    let after = journal.by(0).len();
    tokio::time::sleep(4 * RETRY).await;
    assert_eq!(journal.by(0).len(), after, "a reconciles after returning");
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_with_controller_runtimes_names_and_move() {
    let ns = "mgr-metrics";
    let (_, admin) = plane_with_namespace(ns).await;

    /// By name: `ok` done, `later` requeue_after, `again` requeue once,
    /// `flaky` fails once, `invalid` terminal, `buggy` panics once.
    struct Scripted(Mutex<BTreeSet<String>>);
    impl Reconcile for Scripted {
        type Object = ConfigMap;

        async fn reconcile(
            &self,
            req: Request,
            _ctx: &Context<ConfigMap>,
        ) -> Result<Action, ReconcileError> {
            let first = self.0.lock().unwrap().insert(req.name.clone());
            match (req.name.as_str(), first) {
                ("later", _) => Ok(Action::requeue_after(Duration::from_secs(3600))),
                ("again", true) => Ok(Action::requeue_rate_limited()),
                ("flaky", true) => Err(ReconcileError::retryable("transient")),
                ("invalid", _) => Err(ReconcileError::terminal("bad spec")),
                ("buggy", true) => panic!("reconciler bug"),
                _ => Ok(Action::done()),
            }
        }
    }

    let mut manager = Manager::builder()
        .client(admin.clone())
        .namespace(ns)
        .leader_election(election(ns, "metrics"))
        .metrics_bind_address("127.0.0.1:0")
        .build()
        .await
        .unwrap();
    manager
        .add(
            Controller::new(Scripted(Mutex::default()))
                .name("scripted")
                .max_concurrent_reconciles(2),
        )
        .unwrap();
    let running = Running::start(manager);
    let addr = running.metrics_address.unwrap();
    let c = [("controller", "scripted")];
    let q = [("name", "scripted"), ("controller", "scripted")];
    let total = |samples: &[Sample], result: &str| {
        value(
            samples,
            "controller_runtime_reconcile_total",
            &[("controller", "scripted"), ("result", result)],
        )
    };

    // Before any object: every series at zero (the workqueue's may not be).
    let before = scrape(addr).await;
    for result in ["success", "error", "requeue", "requeue_after"] {
        assert_eq!(total(&before, result), Some(0.0), "{result}");
    }
    for name in [
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_terminal_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_active_workers",
        "controller_runtime_reconcile_time_seconds_count",
    ] {
        assert_eq!(value(&before, name, &c), Some(0.0), "{name}");
    }
    assert_eq!(
        value(&before, "controller_runtime_max_concurrent_reconciles", &c),
        Some(2.0)
    );

    for name in ["ok", "later", "again", "flaky", "invalid", "buggy"] {
        config_map(&admin, ns, name).await;
    }
    // ok, later, again (2nd), flaky (2nd), buggy (2nd) succeed or requeue
    // after; again, flaky, invalid, buggy each count once more.
    let last = Arc::new(Mutex::new(Vec::new()));
    eventually(
        "the counters reach their values",
        Duration::from_secs(30),
        || {
            let last = Arc::clone(&last);
            async move {
                let samples = scrape(addr).await;
                let done = total(&samples, "success") == Some(4.0)
                    && total(&samples, "requeue_after") == Some(1.0)
                    && total(&samples, "requeue") == Some(1.0)
                    && total(&samples, "error") == Some(3.0);
                *last.lock().unwrap() = samples;
                done.then_some(())
            }
        },
    )
    .await;
    let after = last.lock().unwrap().clone();
    assert_eq!(
        value(&after, "controller_runtime_reconcile_errors_total", &c),
        Some(3.0)
    );
    assert_eq!(
        value(
            &after,
            "controller_runtime_terminal_reconcile_errors_total",
            &c
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "controller_runtime_reconcile_panics_total", &c),
        Some(1.0)
    );
    assert_eq!(
        value(&after, "controller_runtime_active_workers", &c),
        Some(0.0)
    );
    assert_eq!(
        value(
            &after,
            "controller_runtime_reconcile_time_seconds_count",
            &c
        ),
        Some(9.0)
    );
    assert_eq!(
        value(
            &after,
            "controller_runtime_reconcile_time_seconds_bucket",
            &[("controller", "scripted"), ("le", "+Inf")]
        ),
        Some(9.0)
    );
    assert!(
        value(
            &after,
            "controller_runtime_reconcile_time_seconds_bucket",
            &[("controller", "scripted"), ("le", "60.0")]
        )
        .is_some()
    );
    // The workqueue: six objects added, three retried with backoff
    // (requeue, error, panic) and one delayed (requeue_after); drained.
    let adds = value(&after, "workqueue_adds_total", &q).unwrap();
    assert!(adds >= 9.0, "adds {adds}");
    assert_eq!(value(&after, "workqueue_depth", &q), Some(0.0));
    let retries = value(&after, "workqueue_retries_total", &q).unwrap();
    assert!(retries >= 3.0, "retries {retries}");
    assert_eq!(
        value(&after, "workqueue_queue_duration_seconds_count", &q),
        Some(9.0)
    );
    assert_eq!(
        value(&after, "workqueue_work_duration_seconds_count", &q),
        Some(9.0)
    );
    for name in [
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
    ] {
        assert!(value(&after, name, &q).is_some(), "{name}");
    }
    assert_eq!(
        value(
            &after,
            "leader_election_master_status",
            &[("name", "manager-lock")]
        ),
        Some(1.0)
    );
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_flips_once_the_caches_sync() {
    let ns = "mgr-ready";
    let (plane, admin) = plane_with_namespace(ns).await;
    config_map(&admin, ns, "present").await;

    // The manager's identity cannot list ConfigMaps yet: its cache cannot
    // sync, so it is alive but not ready.
    let user = "manager-ready";
    let journal = Journal::default();
    let mut manager = Manager::builder()
        .client(plane.client_as(user, &[]).unwrap())
        .namespace(ns)
        .health_probe_bind_address("127.0.0.1:0")
        .build()
        .await
        .unwrap();
    manager
        .add(Controller::new(Recording {
            manager: 0,
            journal: journal.clone(),
            work: Duration::ZERO,
        }))
        .unwrap();
    let running = Running::start(manager);
    let probes = running.probe_address.unwrap();
    assert_eq!(running.metrics_address, None);

    let (status, body) = http_get(probes, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    eventually(
        "readyz names the forbidden list",
        Duration::from_secs(30),
        || async move {
            let (status, body) = http_get(probes, "/readyz?verbose").await;
            assert_eq!(status, 500, "{body}");
            body.contains("forbidden").then_some(())
        },
    )
    .await;
    let (_, body) = http_get(probes, "/readyz?verbose").await;
    assert_eq!(
        body,
        format!(
            "[-]informers failed: 1 of 1 informers have not synced: v1/ConfigMap (namespace {ns}): \
             the API server answered 403 Forbidden: configmaps is forbidden: User \"{user}\" \
             cannot list resource \"configmaps\" in API group \"\" in the namespace \"{ns}\" \
             (missing RBAC permission to list/watch?)\nreadyz check failed\n"
        )
    );
    let (status, _) = http_get(probes, "/readyz/informers").await;
    assert_eq!(status, 500);
    assert!(journal.all().is_empty());

    grant(
        &admin,
        ns,
        "manager-ready",
        user,
        vec![rule("", &["configmaps"], &["get", "list", "watch"])],
    )
    .await;
    eventually(
        "readyz turns ready",
        Duration::from_secs(60),
        || async move { (http_get(probes, "/readyz").await == (200, "ok".to_owned())).then_some(()) },
    )
    .await;
    let (status, body) = http_get(probes, "/readyz?verbose").await;
    assert_eq!(status, 200);
    assert_eq!(body, "[+]informers ok\nreadyz check passed\n");
    eventually("the controller reconciles", Duration::from_secs(30), || {
        let seen = journal.names_by(0);
        async move { seen.contains("present").then_some(()) }
    })
    .await;
    running.stop().await.unwrap();
}

/// Issue 11: the `process_*` and `rest_client_*` series users expect from
/// controller-runtime, scraped from a manager built from a `kube::Config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_and_rest_client_metrics_are_served() {
    let ns = "mgr-process-metrics";
    let (plane, admin) = plane_with_namespace(ns).await;
    config_map(&admin, ns, "listed").await;
    let mut manager = Manager::builder()
        .config(plane.config().clone())
        .namespace(ns)
        .metrics_bind_address("127.0.0.1:0")
        .build()
        .await
        .unwrap();
    manager.add(Controller::new(Idle)).unwrap();
    let running = Running::start(manager);
    let metrics = running.metrics_address.unwrap();
    let host = plane.config().cluster_url.authority().unwrap().to_string();

    // the cache's first requests (the server version, the list of the
    // ConfigMaps), counted once answered
    let ok_gets = [("code", "200"), ("method", "GET"), ("host", host.as_str())];
    eventually(
        "a GET answered 200 counted",
        Duration::from_secs(30),
        || async move {
            let samples = scrape(metrics).await;
            value(&samples, "rest_client_requests_total", &ok_gets)
                .is_some_and(|n| n >= 1.0)
                .then_some(())
        },
    )
    .await;
    let samples = scrape(metrics).await;
    let timed = value(
        &samples,
        "rest_client_request_duration_seconds_count",
        &[("verb", "GET"), ("host", &host)],
    );
    assert!(timed.is_some_and(|n| n >= 1.0), "{timed:?}");
    let seconds = value(
        &samples,
        "rest_client_request_duration_seconds_sum",
        &[("verb", "GET"), ("host", &host)],
    )
    .unwrap();
    assert!((0.0..60.0).contains(&seconds), "{seconds}");

    let process = |name: &str| value(&samples, name, &[]).unwrap_or_else(|| panic!("{name}"));
    let resident = process("process_resident_memory_bytes");
    assert!(resident > 1024.0 * 1024.0, "{resident}");
    assert!(process("process_virtual_memory_bytes") >= resident);
    let open = process("process_open_fds");
    assert!(open >= 3.0, "{open}");
    assert!(process("process_max_fds") >= open);
    assert!(process("process_cpu_seconds_total") > 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let start = process("process_start_time_seconds");
    assert!(
        start <= now + 1.0 && start > now - 86_400.0,
        "{start} vs {now}"
    );

    running.stop().await.unwrap();
}

/// A kind whose CustomResourceDefinition is never installed.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "missing.opkit.dev",
    version = "v1",
    kind = "Phantom",
    namespaced
)]
struct PhantomSpec {
    size: i32,
}

/// Reconciles nothing (these managers never get that far).
struct Idle;

impl Reconcile for Idle {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

/// Reconciles nothing, of a kind whose CRD is never installed.
struct IdlePhantom;

impl Reconcile for IdlePhantom {
    type Object = Phantom;

    async fn reconcile(
        &self,
        _req: Request,
        _ctx: &Context<Phantom>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

/// Issue 11: a CRD that is not installed fails `run` after a bounded retry
/// with an error naming the CRD and what to run, not an endless 404 with
/// `/healthz` 200; meanwhile `/readyz` says exactly what fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_fails_the_start_naming_it() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let ns = "mgr-missing-crd";
    let mut manager = Manager::builder()
        .client(plane.client().unwrap())
        .namespace(ns)
        .health_probe_bind_address("127.0.0.1:0")
        .build()
        .await
        .unwrap();
    manager.add(Controller::new(IdlePhantom)).unwrap();
    let probes = manager.health_probe_address().unwrap();
    let started = Instant::now();
    let run = tokio::spawn(manager.run_until(std::future::pending()));

    eventually(
        "readyz to name the failed list",
        Duration::from_secs(10),
        || async move {
            http_get(probes, "/readyz")
                .await
                .1
                .contains("404")
                .then_some(())
        },
    )
    .await;
    let (status, body) = http_get(probes, "/readyz?verbose").await;
    assert_eq!(status, 500);
    assert_eq!(
        body,
        format!(
            "[-]informers failed: 1 of 1 informers have not synced: missing.opkit.dev/v1/Phantom \
             (namespace {ns}): the API server answered 404 Not Found: 404 page not found\n\
             readyz check failed\n"
        )
    );

    let result = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("run fails within the bound")
        .unwrap();
    let elapsed = started.elapsed();
    let error = result.expect_err("a missing CRD fails the start");
    assert!(
        matches!(
            &error,
            ManagerError::Start(CacheError::CrdNotInstalled { crd, attempts: 4, .. })
                if crd == "phantoms.missing.opkit.dev"
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "cannot start: the CustomResourceDefinition for phantoms.missing.opkit.dev is not \
             installed (listing missing.opkit.dev/v1/Phantom (namespace {ns}) answered 404 Not \
             Found 4 times): install it (`make install` in a project made by `cargo opkit new`, \
             or `kubectl apply -f` the CRD manifest), then start again"
        )
    );
    // four attempts with the reflector's jittered backoff: 0.8+1.6+3.2 s at
    // least, twice that at most
    assert!(
        (Duration::from_millis(5_600)..Duration::from_secs(20)).contains(&elapsed),
        "{elapsed:?}"
    );
}

/// The error `run` fails with, within `bound`.
async fn start_error(manager: Manager, bound: Duration) -> ManagerError {
    tokio::time::timeout(bound, manager.run_until(std::future::pending()))
        .await
        .expect("run fails within the bound")
        .expect_err("the start fails")
}

/// Issue 37: a sharded controller of a kind whose CRD is missing fails the
/// start the same way. The shard module's probe of the kind (does the
/// server filter by shard selector?) fails while the CRD is missing; the
/// cache meanwhile lists by the shard selector, so its bounded start check
/// still sees the 404s and names the CRD, rather than waiting for a probe
/// that cannot succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_fails_a_sharded_start_naming_it() {
    let ns = "mgr-missing-crd-sharded";
    let (_plane, client) = plane_with_namespace(ns).await;
    let mut manager = Manager::builder()
        .client(client)
        .namespace(ns)
        .sharding(opkit::shard::Sharding::new("phantoms").by_namespace())
        .build()
        .await
        .unwrap();
    manager.add(Controller::new(IdlePhantom)).unwrap();
    let error = start_error(manager, Duration::from_secs(60)).await;
    assert!(
        matches!(
            &error,
            ManagerError::Start(CacheError::CrdNotInstalled { crd, attempts: 4, .. })
                if crd == "phantoms.missing.opkit.dev"
        ),
        "{error:?}"
    );
}

/// Issue 11: an API server that cannot be reached fails `run` after a
/// bounded retry, naming its URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_fails_the_start_naming_its_url() {
    init_tracing();
    // nothing listens on port 1 of the loopback address
    let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let mut manager = Manager::builder()
        .config(config)
        .namespace("anywhere")
        .build()
        .await
        .unwrap();
    manager.add(Controller::new(Idle)).unwrap();
    let error = start_error(manager, Duration::from_secs(30)).await;
    assert!(
        matches!(
            &error,
            ManagerError::Start(CacheError::Unreachable { url, attempts: 4, .. })
                if url == "https://127.0.0.1:1/"
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with(
            "cannot start: cannot reach the API server at https://127.0.0.1:1/ (4 attempts to \
             list): "
        ),
        "{message}"
    );
    assert!(message.contains("Connection refused"), "{message}");
    assert!(
        message.ends_with(
            "check that it is running and that the kubeconfig (or the in-cluster \
             configuration) points at it"
        ),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_past_the_graceful_timeout_is_abandoned_and_reported() {
    let ns = "mgr-graceful-timeout";
    let (_, admin) = plane_with_namespace(ns).await;
    config_map(&admin, ns, "endless").await;

    let journal = Journal::default();
    let mut manager = Manager::builder()
        .client(admin.clone())
        .namespace(ns)
        .graceful_shutdown_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    manager
        .add(Controller::new(Recording {
            manager: 0,
            journal: journal.clone(),
            work: Duration::from_secs(600),
        }))
        .unwrap();
    let running = Running::start(manager);
    eventually("the reconcile starts", Duration::from_secs(30), || {
        let n = journal.all().len();
        async move { (n == 1).then_some(()) }
    })
    .await;
    let stopping = Instant::now();
    let result = running.stop().await;
    let took = stopping.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "{took:?}"
    );
    match result {
        Err(ManagerError::ShutdownTimeout { timeout, running }) => {
            assert_eq!(timeout, Duration::from_secs(1));
            assert_eq!(running, ["configmap"]);
        }
        other => panic!("expected a shutdown timeout, got {other:?}"),
    }
    assert_eq!(journal.all()[0].finished, None);
}

/// The slow operator, started on the shared control plane.
struct Operator {
    child: tokio::process::Child,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    stderr: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Operator {
    fn start(plane: &ControlPlane, ns: &str, reconcile: Duration, workers: usize) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_slow_operator"))
            .arg(plane.kubeconfig_path())
            .arg(ns)
            .arg(reconcile.as_millis().to_string())
            .arg(workers.to_string())
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start slow_operator");
        let forward = |reader: Box<dyn tokio::io::AsyncRead + Unpin + Send>, echo: bool| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                let mut lines = BufReader::new(reader).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if echo {
                        eprintln!("slow_operator: {line}");
                    }
                    let _ = tx.send(line);
                }
            });
            rx
        };
        let lines = forward(Box::new(child.stdout.take().unwrap()), false);
        let stderr = forward(Box::new(child.stderr.take().unwrap()), true);
        Self {
            child,
            lines,
            stderr,
        }
    }

    /// The next stdout line (`None` at EOF), waiting at most `within`.
    async fn line(&mut self, within: Duration) -> Option<String> {
        tokio::time::timeout(within, self.lines.recv())
            .await
            .expect("slow_operator said something in time")
    }

    /// Waits for a stderr line containing `text`.
    async fn log(&mut self, text: &str, within: Duration) {
        tokio::time::timeout(within, async {
            while let Some(line) = self.stderr.recv().await {
                if line.contains(text) {
                    return;
                }
            }
            panic!("slow_operator's stderr ended before {text:?}");
        })
        .await
        .unwrap_or_else(|_| panic!("no {text:?} in slow_operator's log"));
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_running_reconciles_finish_starts_none_and_releases_the_lease() {
    let ns = "mgr-sigterm";
    let (plane, admin) = plane_with_namespace(ns).await;
    for i in 0..5 {
        config_map(&admin, ns, &format!("slow-{i}")).await;
    }

    // Two workers, reconciles of 3 s: once two have started, both workers
    // are busy for 3 s.
    let mut operator = Operator::start(plane, ns, Duration::from_secs(3), 2);
    let mut started = BTreeSet::new();
    while started.len() < 2 {
        let line = operator.line(Duration::from_secs(60)).await.unwrap();
        let name = line.strip_prefix("start ").expect("a start line first");
        started.insert(name.to_owned());
    }
    let lease: Api<Lease> = Api::namespaced(admin.clone(), ns);
    let holder = lease.get("slow-operator-lock").await.unwrap().spec.unwrap();
    assert_eq!(holder.holder_identity.as_deref(), Some("slow-operator"));

    let signalled = Instant::now();
    operator.signal("TERM");
    let mut finished = BTreeSet::new();
    let mut stopped = false;
    while let Some(line) = operator.line(Duration::from_secs(30)).await {
        if let Some(name) = line.strip_prefix("finish ") {
            finished.insert(name.to_owned());
        } else if line == "stopped" {
            stopped = true;
        } else {
            panic!("after SIGTERM the operator said {line:?}");
        }
    }
    let status = tokio::time::timeout(Duration::from_secs(30), operator.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0), "exit status {status:?}");
    assert!(stopped);
    assert_eq!(finished, started, "every running reconcile finished");
    // It waited for them (3 s each, started before the signal) and no more.
    assert!(signalled.elapsed() < Duration::from_secs(10));

    // The Lease was released: empty holder, so a successor need not wait.
    let spec = lease.get("slow-operator-lock").await.unwrap().spec.unwrap();
    assert!(
        spec.holder_identity
            .as_deref()
            .unwrap_or_default()
            .is_empty(),
        "{spec:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let ns = "mgr-second-signal";
    let (plane, admin) = plane_with_namespace(ns).await;
    config_map(&admin, ns, "endless").await;

    // A reconcile of ten minutes: the graceful shutdown would wait for it.
    let mut operator = Operator::start(plane, ns, Duration::from_secs(600), 1);
    let line = operator.line(Duration::from_secs(60)).await.unwrap();
    assert!(line.starts_with("start "), "{line}");
    operator.signal("TERM");
    operator
        .log("a second signal exits at once", Duration::from_secs(10))
        .await;
    let signalled = Instant::now();
    operator.signal("INT");
    let status = tokio::time::timeout(Duration::from_secs(10), operator.child.wait())
        .await
        .expect("exits at once")
        .unwrap();
    assert_eq!(status.code(), Some(1), "exit status {status:?}");
    assert!(signalled.elapsed() < Duration::from_secs(5));
    assert_eq!(operator.line(Duration::from_secs(5)).await, None);
}
