//! Helpers shared by opkit's end-to-end tests: namespaces, RBAC grants,
//! bounded waits, and test logging.

/// The book's Rust code as doc tests (`book/src`).
#[cfg(doctest)]
pub mod book;

use std::time::Duration;

pub mod metrics_client;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use opkit_envtest::ControlPlane;

/// Sends `tracing` output to the test harness (shown for failing tests;
/// `opkit=info` unless `RUST_LOG` says otherwise, e.g. `RUST_LOG=opkit=debug`
/// for the reflector's story). Safe to call from every test: the first call
/// in the process sets it up.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "opkit=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// Creates namespace `name`, panicking with the server's answer if it fails.
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    if let Err(e) = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        panic!("creating namespace {name}: {e}");
    }
}

/// Creates `count` ConfigMaps `obj-0`… in `namespace` (which must
/// exist), each with one data key, 100 at a time: a benchmark's objects.
pub async fn create_config_maps(client: &kube::Client, namespace: &str, count: usize) {
    let api = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), namespace);
    let names: Vec<usize> = (0..count).collect();
    for chunk in names.chunks(100) {
        futures::future::join_all(chunk.iter().map(|i| {
            let cm = k8s_openapi::api::core::v1::ConfigMap {
                metadata: ObjectMeta {
                    name: Some(format!("obj-{i}")),
                    ..ObjectMeta::default()
                },
                data: Some([("k".to_owned(), format!("value {i}"))].into()),
                ..Default::default()
            };
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &cm)
                    .await
                    .unwrap_or_else(|e| panic!("creating {namespace}/obj-{i}: {e}"))
            }
        }))
        .await;
    }
}

/// The usual start of a test: tracing, the test process's shared control
/// plane (started on first use), an admin client for it, and a fresh
/// namespace `ns`. Panics, naming what failed, when any of it fails.
pub async fn plane_with_namespace(ns: &str) -> (&'static ControlPlane, kube::Client) {
    init_tracing();
    let plane = ControlPlane::shared()
        .await
        .unwrap_or_else(|e| panic!("starting the shared control plane: {e}"));
    let admin = plane
        .client()
        .unwrap_or_else(|e| panic!("a client for the control plane: {e}"));
    create_namespace(&admin, ns).await;
    (plane, admin)
}

/// A policy rule: `verbs` on `resources` of API `group` (`""` = core).
pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// Grants `user` the `rules` in `namespace` through a Role and a RoleBinding
/// both named `name`.
pub async fn grant(
    admin: &kube::Client,
    namespace: &str,
    name: &str,
    user: &str,
    rules: Vec<PolicyRule>,
) {
    let role = Role {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        rules: Some(rules),
    };
    if let Err(e) = Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
    {
        panic!("creating Role {namespace}/{name}: {e}");
    }
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: name.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "User".to_owned(),
            name: user.to_owned(),
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            ..Subject::default()
        }]),
    };
    if let Err(e) = Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
    {
        panic!("creating RoleBinding {namespace}/{name}: {e}");
    }
}

/// Polls `check` until it returns `Some`, and returns what it found;
/// panics naming `what` after `within`. The one poller of these tests
/// (opkit's own, on tokio's clock): a plain condition is
/// `cond.then_some(())`.
pub use opkit_envtest::eventually;

/// The phase of a pod (`""` before it has one).
pub fn pod_phase(pod: &k8s_openapi::api::core::v1::Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Creates `pod` (`restartPolicy: Never`), waits until it has Succeeded
/// or Failed, and returns it as it ended with its log.
pub async fn run_to_completion(
    pods: &Api<k8s_openapi::api::core::v1::Pod>,
    pod: &k8s_openapi::api::core::v1::Pod,
    within: Duration,
) -> (k8s_openapi::api::core::v1::Pod, String) {
    let name = pod.metadata.name.clone().unwrap_or_default();
    if let Err(e) = pods.create(&PostParams::default(), pod).await {
        panic!("creating pod {name}: {e}");
    }
    let ended = eventually(&format!("pod {name} to finish"), within, || async {
        let pod = pods.get_opt(&name).await.ok().flatten()?;
        matches!(pod_phase(&pod), "Succeeded" | "Failed").then_some(pod)
    })
    .await;
    let log = pods
        .logs(&name, &kube::api::LogParams::default())
        .await
        .unwrap_or_else(|e| panic!("the log of pod {name}: {e}"));
    (ended, log)
}

/// Waits (up to `within`) for an `events.k8s.io/v1` Event in `namespace`
/// that `matches`, and returns it; `what` names it in the timeout's panic.
pub async fn wait_for_event(
    client: &kube::Client,
    namespace: &str,
    what: &str,
    within: Duration,
    matches: impl Fn(&k8s_openapi::api::events::v1::Event) -> bool,
) -> k8s_openapi::api::events::v1::Event {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    opkit_envtest::eventually(what, within, || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| matches(e))
    })
    .await
}

/// Creates the ServiceAccount `name` in `namespace` (if missing) and returns
/// a token for it from the TokenRequest API (valid for an hour).
pub async fn service_account_token(admin: &kube::Client, namespace: &str, name: &str) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => panic!("creating ServiceAccount {namespace}/{name}: {e}"),
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"))
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("the TokenRequest for {namespace}/{name} returned no token"))
}

/// Grants the ServiceAccount `namespace/account` the ClusterRole `role`
/// (which this creates) through a ClusterRoleBinding of the same name.
pub async fn grant_cluster_role(
    admin: &kube::Client,
    role: &k8s_openapi::api::rbac::v1::ClusterRole,
    namespace: &str,
    account: &str,
) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = role.metadata.name.clone().unwrap_or_default();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), role)
        .await
        .unwrap_or_else(|e| panic!("creating ClusterRole {name}: {e}"));
    let binding = opkit::rbac::cluster_role_binding(&name, &name, account, namespace);
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("creating ClusterRoleBinding {name}: {e}"));
}

/// A controller running on a cache in a task of its own (see
/// [`spawn_controller`]).
pub struct RunningController {
    token: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Result<(), opkit::controller::ControllerError>>,
}

/// Runs `controller` on `cache` in a task until [`RunningController::stop`].
pub fn spawn_controller<R>(
    controller: opkit::controller::Controller<R>,
    cache: &opkit::cache::SharedCache,
) -> RunningController
where
    R: opkit::reconcile::Reconcile + Send + Sync + 'static,
{
    let token = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn({
        let (token, cache) = (token.clone(), cache.clone());
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });
    RunningController { token, task }
}

impl RunningController {
    /// Stops the controller; panics if it failed or panicked.
    pub async fn stop(self) {
        self.token.cancel();
        self.task
            .await
            .unwrap_or_else(|e| panic!("the controller task: {e}"))
            .unwrap_or_else(|e| panic!("the controller: {e}"));
    }
}

/// A client of `config` that records the `Content-Type` of every response
/// (which answers were protobuf), with the list it records into.
pub fn content_type_recording_client(
    config: &kube::Config,
) -> (kube::Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use kube::client::{ClientBuilder, DynBody};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    let layer = tower::util::MapResponseLayer::new(move |res: http::Response<Box<DynBody>>| {
        let ct = res
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        log.lock().expect("not poisoned").push(ct);
        res
    });
    let client = ClientBuilder::try_from(config.clone())
        .expect("client builder")
        .with_layer(&layer)
        .build();
    (client, seen)
}
