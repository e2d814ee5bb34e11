//! Multicluster controllers on real control planes: three members started
//! side by side (shared by the tests of this module, each test in its own
//! namespace), engaged through a `ClusterSet` and through kubeconfig
//! Secrets on the hub; objects reconciled in each member; a member removed
//! while its reconciles run (cancelled, none after the removal is
//! acknowledged), re-added with new credentials, its credentials rotated
//! to the same server (its cache kept); an unreachable member that holds
//! nobody up; a controller whose kind a member lacks that holds up no
//! other controller; the `cluster` label on the manager's `/metrics`, and
//! each member's state on its `/readyz`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::CustomResource;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::Selector;
use opkit::ControllerWiring;
use opkit::controller::Controller;
use opkit::manager::Manager;
use opkit::multicluster::{
    ClusterName, ClusterSet, Fleet, KUBECONFIG_SECRET_KEY, KUBECONFIG_SECRET_LABEL,
    KubeconfigSecrets,
};
use opkit::predicate::LabelSelector;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing, plane_with_namespace};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod cluster_profiles;
mod footprint_bench;
mod hub_watches;
mod sharded;

const WAIT: Duration = Duration::from_secs(30);
const MEMBERS: [&str; 3] = ["m1", "m2", "m3"];

/// The member control planes, started side by side on first use.
async fn members() -> &'static [ControlPlane] {
    static PLANES: OnceCell<Result<Vec<ControlPlane>, String>> = OnceCell::const_new();
    let started = PLANES
        .get_or_init(|| async {
            let (a, b, c) = tokio::try_join!(
                ControlPlane::start(),
                ControlPlane::start(),
                ControlPlane::start()
            )
            .map_err(|e| e.to_string())?;
            Ok(vec![a, b, c])
        })
        .await;
    started
        .as_deref()
        .unwrap_or_else(|e| panic!("starting the member control planes: {e}"))
}

/// What the reconciler saw: every reconcile's start, by cluster and name,
/// and the reconciles cancelled before they finished.
#[derive(Default)]
struct Log {
    started: Mutex<Vec<(String, String, Instant)>>,
    cancelled: Mutex<Vec<(String, String)>>,
}

impl Log {
    fn started(&self, cluster: &str, name: &str) -> bool {
        self.started
            .lock()
            .unwrap()
            .iter()
            .any(|(c, n, _)| c == cluster && n == name)
    }

    fn started_after(&self, cluster: &str, after: Instant) -> Vec<String> {
        self.started
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _, at)| c == cluster && *at >= after)
            .map(|(_, n, _)| n.clone())
            .collect()
    }

    fn cancelled(&self, cluster: &str, name: &str) -> bool {
        self.cancelled
            .lock()
            .unwrap()
            .iter()
            .any(|(c, n)| c == cluster && n == name)
    }
}

/// Records a reconcile cancelled mid-way: dropped before `finish`.
struct InFlight {
    log: Arc<Log>,
    key: Option<(String, String)>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.log.cancelled.lock().unwrap().push(key);
        }
    }
}

/// Only ConfigMaps labelled `fleet=yes`.
fn labelled() -> LabelSelector {
    LabelSelector::new(Selector::from_iter([("fleet", "yes")]))
}

/// For each ConfigMap labelled `fleet=yes`, writes `<name>-seen` in the
/// same cluster naming that cluster; a ConfigMap named `slow*` first
/// sleeps a minute (a reconcile in flight to cancel). The reconciler is a
/// single-cluster one's: the derive's `multicluster` makes it run in
/// every cluster.
#[derive(opkit::Controller)]
#[controller(
    for(ConfigMap, predicates(labelled())),
    max_concurrent_reconciles = 2,
    multicluster
)]
struct Copier {
    log: Arc<Log>,
    /// The test's namespace: the tests share the members, and each
    /// fleet watches every namespace of them.
    namespace: &'static str,
}

impl Reconcile for Copier {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if req.namespace.as_deref() != Some(self.namespace) {
            return Ok(Action::done());
        }
        let cluster = ctx
            .cluster()
            .expect("a multicluster reconcile names its cluster");
        assert_eq!(ctx.cluster_request().map(|r| r.request), Some(req.clone()));
        let cluster = cluster.to_string();
        self.log
            .started
            .lock()
            .unwrap()
            .push((cluster.clone(), req.name.clone(), Instant::now()));
        if req.name.starts_with("slow") {
            let mut in_flight = InFlight {
                log: Arc::clone(&self.log),
                key: Some((cluster.clone(), req.name.clone())),
            };
            tokio::time::sleep(Duration::from_secs(60)).await;
            in_flight.key = None;
        }
        if ctx.object().await?.is_none() {
            return Ok(Action::done());
        }
        let namespace = req.namespace.clone().unwrap_or_default();
        let seen = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-seen", req.name)),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("cluster".to_owned(), cluster)])),
            ..ConfigMap::default()
        };
        ctx.api::<ConfigMap>(Some(&namespace))
            .patch(
                &format!("{}-seen", req.name),
                &PatchParams::apply("copier").force(),
                &Patch::Apply(&seen),
            )
            .await?;
        Ok(Action::done())
    }
}

fn copier(log: &Arc<Log>, namespace: &'static str) -> Copier {
    Copier {
        log: Arc::clone(log),
        namespace,
    }
}

async fn create_labelled(client: &kube::Client, ns: &str, name: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([("fleet".to_owned(), "yes".to_owned())])),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("creating {ns}/{name}: {e}"));
}

/// The cluster `<name>-seen` names, once it exists.
async fn seen(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(&format!("{name}-seen"))
        .await
        .ok()
        .flatten()
        .and_then(|cm| cm.data?.get("cluster").cloned())
}

async fn wait_seen(client: &kube::Client, ns: &str, name: &str, cluster: &str) {
    let found = eventually(&format!("{cluster}: {ns}/{name}-seen"), WAIT, || {
        seen(client, ns, name)
    })
    .await;
    assert_eq!(found, cluster);
}

fn names(engaged: &[ClusterName]) -> Vec<&str> {
    engaged.iter().map(ClusterName::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_set_engages_members_and_cancels_a_removed_ones_reconciles() {
    init_tracing();
    let ns = "mc-set";
    let planes = members().await;
    let admins: Vec<kube::Client> = planes.iter().map(|p| p.client().unwrap()).collect();
    for admin in &admins {
        create_namespace(admin, ns).await;
    }
    let log = Arc::new(Log::default());
    let (clusters, handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    // the slow reconcile is abandoned at the end of the test
    let controller = copier(&log, ns)
        .controller()
        .shutdown_timeout(Duration::from_millis(200));
    fleet.add(controller).unwrap();
    let engaged = fleet.engaged();
    let stop = CancellationToken::new();
    let running = tokio::spawn(fleet.run(stop.clone().cancelled_owned()));
    for (name, admin) in MEMBERS.iter().zip(&admins) {
        handle.add(*name, admin.clone()).await.unwrap();
    }
    assert_eq!(names(&engaged.borrow()), MEMBERS);

    // Objects flow in every member, each reconciled with its own cluster's context.
    for admin in &admins {
        create_labelled(admin, ns, "a").await;
    }
    for (name, admin) in MEMBERS.iter().zip(&admins) {
        wait_seen(admin, ns, "a", name).await;
    }

    // m2 is removed while a reconcile of it runs: once the removal is
    // acknowledged, that reconcile was cancelled and no other starts.
    create_labelled(&admins[1], ns, "slow").await;
    eventually("the slow reconcile in m2 to start", WAIT, || async {
        log.started("m2", "slow").then_some(())
    })
    .await;
    assert!(handle.remove("m2").await.unwrap(), "m2 was engaged");
    let removed = Instant::now();
    assert!(
        log.cancelled("m2", "slow"),
        "the in-flight reconcile of m2 was cancelled by the time its removal was acknowledged"
    );
    assert_eq!(names(&engaged.borrow()), ["m1", "m3"]);
    for admin in &admins {
        create_labelled(admin, ns, "b").await;
    }
    wait_seen(&admins[0], ns, "b", "m1").await;
    // The removal was acknowledged after m2's tasks ended, and "b" reached
    // m1 and m3 since: a reconcile of m2 would have shown by now.
    wait_seen(&admins[2], ns, "b", "m3").await;
    assert_eq!(
        log.started_after("m2", removed),
        Vec::<String>::new(),
        "no reconcile of m2 after its removal"
    );
    assert_eq!(seen(&admins[1], ns, "b").await, None);

    // Re-added with other credentials (an impersonated identity): its
    // objects, the ones created while it was gone too, converge.
    let other = planes[1]
        .client_as("fleet-operator", &["system:masters"])
        .unwrap();
    handle.add("m2", other).await.unwrap();
    wait_seen(&admins[1], ns, "b", "m2").await;
    assert_eq!(names(&engaged.borrow()), MEMBERS);

    stop.cancel();
    running.await.unwrap().unwrap();
    assert!(
        engaged.borrow().is_empty(),
        "every cluster disengaged at shutdown"
    );
}

/// A kubeconfig Secret for `cluster` in the hub's namespace `ns`.
fn kubeconfig_secret(ns: &str, cluster: &str, kubeconfig: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(cluster.to_owned()),
            namespace: Some(ns.to_owned()),
            labels: Some(BTreeMap::from([(
                KUBECONFIG_SECRET_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            KUBECONFIG_SECRET_KEY.to_owned(),
            ByteString(kubeconfig.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// A token of the ServiceAccount `ns/account` of `plane`, bound to
/// `cluster-admin`.
async fn cluster_admin_token(plane: &ControlPlane, ns: &str, account: &str) -> String {
    let admin = plane.client().unwrap();
    let token = opkit_tests::service_account_token(&admin, ns, account).await;
    let binding =
        opkit::rbac::cluster_role_binding(&format!("{ns}-{account}"), "cluster-admin", account, ns);
    Api::<ClusterRoleBinding>::all(admin)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("binding {ns}/{account}: {e}"));
    token
}

/// A kubeconfig for `plane` authenticating as the ServiceAccount
/// `ns/account`, bound to `cluster-admin`.
async fn service_account_kubeconfig(plane: &ControlPlane, ns: &str, account: &str) -> String {
    let token = cluster_admin_token(plane, ns, account).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    plane.write_token_kubeconfig(&token, &path).unwrap();
    std::fs::read_to_string(&path).unwrap()
}

async fn wait_engaged(engaged: &mut tokio::sync::watch::Receiver<Vec<ClusterName>>, want: &[&str]) {
    tokio::time::timeout(WAIT, engaged.wait_for(|now| names(now) == want))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for the engaged clusters to be {want:?}"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubeconfig_secrets_join_rotate_and_leave_under_a_manager() {
    let hub_ns = "mc-hub";
    let ns = "mc-secrets";
    let (_hub, hub) = plane_with_namespace(hub_ns).await;
    let planes = members().await;
    let admins: Vec<kube::Client> = planes.iter().map(|p| p.client().unwrap()).collect();
    for admin in &admins {
        create_namespace(admin, ns).await;
    }
    let admin_kubeconfig = |i: usize| std::fs::read_to_string(planes[i].kubeconfig_path()).unwrap();
    let old_m2 = service_account_kubeconfig(&planes[1], ns, "old").await;
    // a member no one can reach: its informers back off, the others converge
    let unreachable = admin_kubeconfig(0).replace(planes[0].server_url(), "https://127.0.0.1:9");

    let log = Arc::new(Log::default());
    let mut manager = Manager::builder()
        .client(hub.clone())
        .metrics_bind_address("0")
        .health_probe_bind_address("0")
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    manager.set_cluster_provider(KubeconfigSecrets::new(hub.clone(), hub_ns));
    copier(&log, ns).add_to(&mut manager).unwrap();
    let mut engaged = manager.engaged_clusters();
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));

    let secrets: Api<Secret> = Api::namespaced(hub.clone(), hub_ns);
    let create = |cluster: &str, kubeconfig: &str| {
        let secret = kubeconfig_secret(hub_ns, cluster, kubeconfig);
        let secrets = secrets.clone();
        async move {
            secrets
                .create(&PostParams::default(), &secret)
                .await
                .unwrap_or_else(|e| panic!("creating the kubeconfig Secret: {e}"));
        }
    };
    create("m1", &admin_kubeconfig(0)).await;
    create("m2", &old_m2).await;
    let first_m3 = service_account_kubeconfig(&planes[2], ns, "first").await;
    create("m3", &first_m3).await;
    create("unreachable", &unreachable).await;
    wait_engaged(&mut engaged, &["m1", "m2", "m3", "unreachable"]).await;
    for admin in &admins {
        create_labelled(admin, ns, "a").await;
    }
    for (name, admin) in MEMBERS.iter().zip(&admins) {
        wait_seen(admin, ns, "a", name).await;
    }

    // The Secret of m2 goes: m2 is disengaged, and nothing of it is reconciled after.
    secrets
        .delete("m2", &DeleteParams::default())
        .await
        .unwrap();
    wait_engaged(&mut engaged, &["m1", "m3", "unreachable"]).await;
    let removed = Instant::now();
    create_labelled(&admins[0], ns, "b").await;
    create_labelled(&admins[1], ns, "b").await;
    wait_seen(&admins[0], ns, "b", "m1").await;
    assert_eq!(log.started_after("m2", removed), Vec::<String>::new());
    assert_eq!(seen(&admins[1], ns, "b").await, None);

    // It comes back with new credentials, and the old ones stop working
    // (their ServiceAccount is deleted): its objects converge through the new.
    let new_m2 = service_account_kubeconfig(&planes[1], ns, "new").await;
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admins[1].clone(), ns)
        .delete("old", &DeleteParams::default())
        .await
        .unwrap();
    create("m2", &new_m2).await;
    wait_engaged(&mut engaged, &["m1", "m2", "m3", "unreachable"]).await;
    wait_seen(&admins[1], ns, "b", "m2").await;

    // m3's credentials rotate in place (its Secret changes, the server
    // stays) and the old ones stop working: swapped in under its cache,
    // it converges through the new ones without listing or reconciling
    // again what it had.
    let new_m3 = service_account_kubeconfig(&planes[2], ns, "rotated").await;
    let rotated = Instant::now();
    let secret = kubeconfig_secret(hub_ns, "m3", &new_m3);
    secrets
        .patch(
            "m3",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admins[2].clone(), ns)
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    create_labelled(&admins[2], ns, "c").await;
    wait_seen(&admins[2], ns, "c", "m3").await;
    let since = log.started_after("m3", rotated);
    assert!(
        !since.contains(&"a".to_owned()),
        "the rotation kept m3's cache: \"a\" was not reconciled again ({since:?})"
    );
    assert_eq!(names(&engaged.borrow()), ["m1", "m2", "m3", "unreachable"]);

    stop.cancel();
    running.await.unwrap().unwrap();
}

/// A kind no member serves (its CRD is installed nowhere).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "mc.opkit.dev", version = "v1", kind = "Gizmo", namespaced)]
struct GizmoSpec {
    size: u32,
}

struct Gizmos;

impl Reconcile for Gizmos {
    type Object = Gizmo;

    async fn reconcile(&self, _: Request, _: &Context<Gizmo>) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_lacking_one_controllers_crd_still_reconciles_the_others() {
    init_tracing();
    let ns = "mc-crd";
    let planes = members().await;
    let admin = planes[0].client().unwrap();
    create_namespace(&admin, ns).await;
    let log = Arc::new(Log::default());
    let (clusters, handle) = ClusterSet::new();
    let mut fleet = Fleet::new(clusters);
    fleet.add(copier(&log, ns).controller()).unwrap();
    // Its kind never syncs in m1: it waits (warning at each short
    // timeout) on its own, and the copier does not wait for it.
    fleet
        .add(
            Controller::new(Gizmos)
                .name("gizmo")
                .cache_sync_timeout(Duration::from_secs(1)),
        )
        .unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn(fleet.run(stop.clone().cancelled_owned()));
    handle.add("m1", admin.clone()).await.unwrap();
    create_labelled(&admin, ns, "a").await;
    wait_seen(&admin, ns, "a", "m1").await;
    assert!(handle.remove("m1").await.unwrap());
    stop.cancel();
    running.await.unwrap().unwrap();
}

/// A client of `plane`'s kubeconfig whose server no one serves.
async fn unreachable_client(plane: &ControlPlane) -> kube::Client {
    let text = std::fs::read_to_string(plane.kubeconfig_path())
        .unwrap()
        .replace(plane.server_url(), "https://127.0.0.1:9");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// A single-cluster controller of the hub beside the fleet.
struct HubConfigMaps;

impl Reconcile for HubConfigMaps {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        _: Request,
        _: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

/// GETs `path` on `addr`: status code and body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use http_body_util::{BodyExt, Empty};
    let client: hyper_util::client::legacy::Client<_, Empty<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http();
    let uri = format!("http://{addr}{path}").parse().unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.get(uri))
        .await
        .expect("the server answers")
        .expect("an HTTP response");
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// The value of the series `name{labels}` in the exposition `text`, if it is there.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let series = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|value| value.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_carry_the_cluster_and_readyz_shows_each_members_state() {
    init_tracing();
    let ns = "mc-metrics";
    let (_hub, hub) = plane_with_namespace("mc-metrics-hub").await;
    let planes = members().await;
    let (m1, m3) = (planes[0].client().unwrap(), planes[2].client().unwrap());
    for admin in [&m1, &m3] {
        create_namespace(admin, ns).await;
    }
    let log = Arc::new(Log::default());
    let mut manager = Manager::builder()
        .client(hub.clone())
        .metrics_bind_address("127.0.0.1:0")
        .health_probe_bind_address("127.0.0.1:0")
        .graceful_shutdown_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap();
    let (clusters, handle) = ClusterSet::new();
    manager.set_cluster_provider(clusters);
    copier(&log, ns).add_to(&mut manager).unwrap();
    manager
        .add(Controller::new(HubConfigMaps).name("hub-configmaps"))
        .unwrap();
    let metrics = manager.metrics_address().unwrap();
    let probes = manager.health_probe_address().unwrap();
    let stop = CancellationToken::new();
    let running = tokio::spawn(manager.run_until(stop.clone().cancelled_owned()));
    handle.add("m1", m1.clone()).await.unwrap();
    handle.add("m3", m3.clone()).await.unwrap();
    handle
        .add("gone", unreachable_client(&planes[0]).await)
        .await
        .unwrap();
    for (name, admin) in [("m1", &m1), ("m3", &m3)] {
        create_labelled(admin, ns, "a").await;
        wait_seen(admin, ns, "a", name).await;
    }

    // Every member counts under its own `cluster` label; the hub's
    // single-cluster controller has none, and the multicluster one no
    // series without it.
    let (_, text) = http_get(metrics, "/metrics").await;
    let success = |text: &str, cluster: &str| {
        sample(
            text,
            "controller_runtime_reconcile_total",
            &format!(r#"controller="configmap",result="success",cluster="{cluster}""#),
        )
    };
    assert!(success(&text, "m1").unwrap() >= 1.0, "{text}");
    assert!(success(&text, "m3").unwrap() >= 1.0, "{text}");
    assert!(
        sample(
            &text,
            "workqueue_adds_total",
            r#"name="configmap",controller="configmap",cluster="m1""#
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        sample(
            &text,
            "controller_runtime_reconcile_total",
            r#"controller="hub-configmaps",result="success""#
        )
        .is_some(),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "controller_runtime_reconcile_total",
            r#"controller="configmap",result="success""#
        ),
        None
    );

    // /readyz: each member's state in the detail; the unreachable one
    // does not fail the hub's readiness.
    let body = eventually("the unreachable member in /readyz", WAIT, || async {
        let (status, body) = http_get(probes, "/readyz?verbose").await;
        (status == 200 && body.contains("gone unreachable (last error:")).then_some(body)
    })
    .await;
    assert!(body.contains("[+]clusters ok: "), "{body}");
    assert!(body.contains("m1 engaged"), "{body}");
    assert!(body.contains("m3 engaged"), "{body}");
    assert_eq!(http_get(probes, "/readyz").await, (200, "ok".to_owned()));

    // Two slow reconciles run in m3 (two workers) and a third waits: each
    // member has its own depth and longest-running gauges (m1's keys are
    // done at once) ...
    for name in ["slow-1", "slow-2", "slow-3"] {
        create_labelled(&m3, ns, name).await;
    }
    let depth = |text: &str, cluster: &str| {
        sample(
            text,
            "workqueue_depth",
            &format!(r#"name="configmap",controller="configmap",cluster="{cluster}""#),
        )
    };
    let text = eventually("a key waiting in m3's queue", WAIT, || async {
        let (_, text) = http_get(metrics, "/metrics").await;
        let longest = sample(
            &text,
            "workqueue_longest_running_processor_seconds",
            r#"name="configmap",controller="configmap",cluster="m3""#,
        );
        let waiting = depth(&text, "m3").is_some_and(|d| d >= 1.0);
        (waiting && longest.is_some_and(|s| s > 1.0)).then_some(text)
    })
    .await;
    assert!(depth(&text, "m1").is_some(), "{text}");
    let m1_longest = sample(
        &text,
        "workqueue_longest_running_processor_seconds",
        r#"name="configmap",controller="configmap",cluster="m1""#,
    );
    assert!(m1_longest.is_some_and(|s| s < 1.0), "{text}");

    // ... and m3's removal takes its series with it: the key its dropped
    // queue left waiting is not counted anywhere.
    assert!(handle.remove("m3").await.unwrap());
    let (_, text) = http_get(metrics, "/metrics").await;
    assert!(!text.contains(r#"cluster="m3""#), "{text}");
    assert!(depth(&text, "m1").is_some(), "{text}");
    assert!(success(&text, "m1").is_some(), "{text}");
    let (_, body) = http_get(probes, "/readyz?verbose").await;
    assert!(!body.contains("m3"), "{body}");

    stop.cancel();
    running.await.unwrap().unwrap();
}
