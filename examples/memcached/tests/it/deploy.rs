//! Deploying the operator, verified against a real kube-apiserver with RBAC
//! enforced: the manifests `make deploy` applies (server-side apply, the
//! Deployment included), then the operator binary run out of cluster **as
//! its ServiceAccount**, with a token from the TokenRequest API.
//!
//! The reconciling test runs on a whole local cluster
//! (`opkit_envtest::Cluster`): the Memcached's Deployment really rolls out
//! memcached pods (the locally built image, passed to the operator as
//! `$MEMCACHED_IMAGE`) and `Available` comes from the real Deployment
//! controller. Here the operator's Deployment from `deploy/` is applied
//! with 0 replicas and the binary runs out of cluster; the operator as a
//! pod, from its own image (`make image`, `make deploy`, `make undeploy`),
//! is `tests/tests/it/deploy_in_cluster.rs` in the opkit repository.

use super::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use memcached_operator::api::memcached::{AVAILABLE, DEGRADED, Memcached, MemcachedSpec};
use memcached_operator::controllers::memcached::IMAGE_ENV;
use opkit::conditions;
use opkit_envtest::eventually;
use opkit_envtest::{Cluster, ControlPlane};
use serde_json::json;
use support::{WAIT, create_namespace, delete_and_expect_finalized, running_pods};

/// The files `make deploy` applies, in its order.
const MANIFESTS: [&str; 5] = [
    "00-namespace.yaml",
    "01-crds.yaml",
    "02-service-account.yaml",
    "03-rbac.yaml",
    "04-deployment.yaml",
];

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// Reads `deploy/`, lets `edit` change the objects, and server-side
/// applies them as the admin, in order; waits for the CRD to be served.
async fn apply_manifests(plane: &ControlPlane, edit: impl Fn(&mut DynamicObject)) {
    let admin = plane.client().expect("admin client");
    for file in MANIFESTS {
        let text = std::fs::read_to_string(deploy_dir().join(file))
            .unwrap_or_else(|e| panic!("reading deploy/{file}: {e}"));
        let mut objects =
            opkit::manifest::parse(&text).unwrap_or_else(|e| panic!("parsing deploy/{file}: {e}"));
        objects.iter_mut().for_each(&edit);
        opkit::manifest::apply(&admin, &objects, "make-deploy")
            .await
            .unwrap_or_else(|e| panic!("applying deploy/{file}: {e}"));
    }
    // The operator's Deployment was accepted (nothing runs its pod here).
    let operator: Api<Deployment> = Api::namespaced(admin.clone(), memcached_operator::NAMESPACE);
    assert!(
        operator
            .get_opt("memcached-operator-controller-manager")
            .await
            .expect("read the operator's Deployment")
            .is_some()
    );
    let memcacheds: Api<Memcached> = Api::all(admin);
    eventually("the Memcached CRD to be served", WAIT, || async {
        memcacheds
            .list(&ListParams::default())
            .await
            .ok()
            .map(|_| ())
    })
    .await;
}

/// A running operator binary and its log file.
struct Operator {
    child: Child,
    log: PathBuf,
    _dir: TempDir,
}

impl Operator {
    /// Runs the operator binary as the ServiceAccount from `deploy/`, with
    /// `env` added to its environment.
    async fn start(plane: &ControlPlane, name: &str, env: &[(&str, &str)]) -> Self {
        let admin = plane.client().expect("admin client");
        let accounts: Api<ServiceAccount> = Api::namespaced(admin, memcached_operator::NAMESPACE);
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            }),
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(
                memcached_operator::SERVICE_ACCOUNT,
                &PostParams::default(),
                &request,
            )
            .await
            .expect("TokenRequest for the operator's ServiceAccount")
            .status
            .expect("token status")
            .token
            .expect("a token");
        let dir = TempDir::new(name);
        let kubeconfig = dir.0.join("kubeconfig");
        plane
            .write_token_kubeconfig(&token, &kubeconfig)
            .expect("write the token kubeconfig");
        let log = dir.0.join("operator.log");
        let out = std::fs::File::create(&log).expect("create the log file");
        let err = out.try_clone().expect("clone the log file");
        let child = Command::new(env!("CARGO_BIN_EXE_memcached-operator"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "--leader-elect",
                "--leader-election-namespace",
                memcached_operator::NAMESPACE,
                "--metrics-bind-address",
                "127.0.0.1:0",
                "--health-probe-bind-address",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("start the operator binary");
        Self {
            child,
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, then waits for a clean exit; returns the log.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
        let status = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let log = self.log();
        assert!(
            status.is_some_and(|s| s.success()),
            "the operator did not exit cleanly on SIGTERM ({status:?}); log:\n{log}"
        );
        log
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("memcached-deploy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Lines of the log that mention a forbidden request.
fn forbidden_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
        .collect()
}

#[tokio::test]
async fn deployed_operator_reconciles_as_its_service_account_without_forbidden_errors() {
    let cluster = Cluster::start().await.expect("start the local cluster");
    let plane = cluster.control_plane();
    // The operator's own image is not built: its Deployment runs no pod.
    apply_manifests(plane, |object| {
        if object
            .types
            .as_ref()
            .is_some_and(|t| t.kind == "Deployment")
        {
            object.data["spec"]["replicas"] = json!(0);
        }
    })
    .await;
    let admin = plane.client().expect("admin client");
    create_namespace(&admin, "shop").await;
    let image = cluster.image("memcached").expect("the memcached image");
    let operator = Operator::start(plane, "ok", &[(IMAGE_ENV, image)]).await;

    let memcacheds: Api<Memcached> = Api::namespaced(admin.clone(), "shop");
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "shop");
    let services: Api<Service> = Api::namespaced(admin.clone(), "shop");
    let created = memcacheds
        .create(
            &PostParams::default(),
            &Memcached::new("cache", MemcachedSpec { size: 3 }),
        )
        .await
        .expect("create the Memcached");
    let uid = created.uid().expect("uid");

    let deployment = eventually("the Deployment", WAIT, || async {
        deployments.get_opt("cache").await.ok().flatten()
    })
    .await;
    assert_eq!(deployment.spec.as_ref().and_then(|s| s.replicas), Some(3));
    let owner = &deployment.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Memcached", uid.as_str(), Some(true))
    );
    let service = eventually("the Service", WAIT, || async {
        services.get_opt("cache").await.ok().flatten()
    })
    .await;
    assert_eq!(service.owner_references()[0].uid, uid);

    // The Deployment controller, scheduler and kubelet run 3 memcached pods.
    running_pods(&admin, "shop", "cache", 3).await;
    eventually("status Available=True, Degraded=False", WAIT, || async {
        let status = memcacheds.get("cache").await.ok()?.status?;
        let healthy = conditions::is_true(&status.conditions, AVAILABLE)
            && conditions::find(&status.conditions, DEGRADED).is_some_and(|c| c.status == "False");
        healthy.then_some(())
    })
    .await;

    memcacheds
        .patch(
            "cache",
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "size": 5 } })),
        )
        .await
        .expect("scale to 5");
    eventually("the Deployment at 5 replicas", WAIT, || async {
        let d = deployments.get("cache").await.ok()?;
        (d.spec?.replicas == Some(5)).then_some(())
    })
    .await;
    running_pods(&admin, "shop", "cache", 5).await;

    delete_and_expect_finalized(&admin, "shop", "cache", &uid).await;

    let log = operator.stop();
    assert!(
        log.contains("caches synced; starting workers"),
        "the operator never started reconciling; log:\n{log}"
    );
    let forbidden = forbidden_lines(&log);
    assert!(
        forbidden.is_empty(),
        "the operator logged {} forbidden errors:\n{}",
        forbidden.len(),
        forbidden.join("\n")
    );
}

#[tokio::test]
async fn a_missing_rule_is_a_clear_forbidden_error_naming_verb_and_resource() {
    let plane = ControlPlane::start()
        .await
        .expect("start etcd and kube-apiserver");
    // The generated ClusterRole without `patch` on deployments (the
    // operator's; the CRD's user roles are left as they are).
    apply_manifests(&plane, |object| {
        if object
            .types
            .as_ref()
            .is_some_and(|t| t.kind == "ClusterRole")
            && object.metadata.name.as_deref() == Some(memcached_operator::CLUSTER_ROLE)
        {
            let mut role: ClusterRole =
                serde_json::from_value(serde_json::to_value(&*object).expect("to JSON"))
                    .expect("a ClusterRole");
            let mut removed = false;
            for rule in role.rules.iter_mut().flatten() {
                let deployments = rule.resources.iter().flatten().any(|r| r == "deployments");
                if deployments && rule.verbs.iter().any(|v| v == "patch") {
                    rule.verbs.retain(|v| v != "patch");
                    removed = true;
                }
            }
            assert!(
                removed,
                "the generated ClusterRole has no patch on deployments"
            );
            *object = serde_json::from_value(serde_json::to_value(&role).expect("to JSON"))
                .expect("back to an object");
        }
    })
    .await;
    let admin = plane.client().expect("admin client");
    create_namespace(&admin, "shop").await;
    let operator = Operator::start(&plane, "forbidden", &[]).await;

    let memcacheds: Api<Memcached> = Api::namespaced(admin.clone(), "shop");
    memcacheds
        .create(
            &PostParams::default(),
            &Memcached::new("cache", MemcachedSpec { size: 1 }),
        )
        .await
        .expect("create the Memcached");

    let expected = r#"cannot patch resource "deployments" in API group "apps""#;
    let degraded = eventually("Degraded=True naming the missing rule", WAIT, || async {
        let status = memcacheds.get("cache").await.ok()?.status?;
        let degraded = conditions::find(&status.conditions, DEGRADED)?.clone();
        (degraded.status == "True").then_some(degraded)
    })
    .await;
    assert!(
        degraded.message.contains(expected),
        "Degraded does not name the missing verb and resource: {}",
        degraded.message
    );
    let logged = eventually(
        "the forbidden error in the operator's log",
        WAIT,
        || async {
            let log = operator.log();
            let lines: Vec<String> = forbidden_lines(&log)
                .into_iter()
                .map(str::to_owned)
                .collect();
            (!lines.is_empty()).then_some(lines)
        },
    )
    .await;
    assert!(
        logged
            .iter()
            .any(|l| l.contains(r#"cannot patch resource \"deployments\""#)),
        "the log does not name the verb and resource:\n{}",
        logged.join("\n")
    );
    operator.stop();
}
