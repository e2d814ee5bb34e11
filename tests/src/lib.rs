//! Helpers shared by opkit's end-to-end tests: namespaces, RBAC grants,
//! bounded waits, and test logging.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};

/// Sends `tracing` output to the test harness (shown for failing tests;
/// filter with `RUST_LOG`). Safe to call from every test.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
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

/// Polls `check` until it returns true; panics naming `what` after
/// `within`. For conditions a real server reaches asynchronously (the
/// boolean form of [`opkit_envtest::eventually`]).
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually_some(what, within, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await
}

/// Polls `check` until it returns `Some`, and returns what it found;
/// panics naming `what` after `within`.
pub use opkit_envtest::eventually as eventually_some;

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
    let ended = eventually_some(&format!("pod {name} to finish"), within, || async {
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
