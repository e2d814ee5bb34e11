//! The end-to-end test, as kubebuilder's `test/e2e`: the operator built
//! into its image (`make image PUSH=1`), deployed with `make deploy
//! NETWORK_POLICY=1` (each NetworkPolicy selecting the manager's pod, which
//! still works under them), every object in `samples/` reconciled, the CRDs' admin/editor/viewer roles
//! aggregated into the built-in `edit` and `view`, then `make undeploy`
//! leaving nothing behind. `#[ignore]`d, so `make test` skips it; `make
//! test-e2e` runs it:
//!
//! - with `KUBECONFIG` set, against that cluster, pushing the image `IMG`
//!   (`make test-e2e IMG=registry.example.com/backup-operator:e2e`; the cluster
//!   must be able to pull it; `INSECURE=1` for a plain-HTTP registry);
//! - otherwise, as root, it starts opkit's local cluster with a registry
//!   (`opkit_envtest::Cluster`, built from source: `make cluster-assets` in
//!   an opkit checkout), pushes there, and stops the cluster at the end.
//!
//! A sample is reconciled once its `status.observedGeneration` reaches its
//! `metadata.generation` and its `Ready` condition, if it has one, is
//! `True`: what the scaffolded reconciler reports. Change [`reconciled`] if
//! yours reports otherwise.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use opkit_envtest::{Cluster, eventually};

use backup_operator::{NAME, NAMESPACE};

/// How long each wait on the cluster may take (the image pulled, the
/// rollout, a reconcile, the aggregation).
const WAIT: Duration = Duration::from_secs(180);

#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end: needs a cluster or root; run it with `make test-e2e`"]
async fn the_operator_deploys_reconciles_the_samples_and_undeploys() {
    let target = Target::choose().await;
    let client = target.client.clone();
    let project = Project::new(&target);

    project.make(&["image", &format!("IMG={}", target.image), "PUSH=1"]);
    project.make(&[
        "deploy",
        &format!("IMG={}", target.image),
        "NETWORK_POLICY=1",
    ]);
    let deployed = Deployed(&project);
    manager_available(&client).await;
    network_policies_select_the_manager(&client).await;

    roles_aggregate(&project).await;
    samples_reconciled(&client).await;

    drop(deployed); // `make undeploy`: the samples first, finalized by the operator.
    nothing_left(&client).await;
    target.stop();
}

/// The cluster the test deploys to, and the image it pushes there.
struct Target {
    local: Option<Cluster>,
    client: kube::Client,
    kubeconfig: Option<PathBuf>,
    image: String,
    /// `make image` pushes over plain HTTP (the local cluster's registry).
    insecure: bool,
    /// A directory holding a kubectl of the cluster's version, put first on
    /// `PATH` (the local cluster's).
    kubectl_dir: Option<PathBuf>,
}

impl Target {
    async fn choose() -> Self {
        if std::env::var_os("KUBECONFIG").is_some_and(|k| !k.is_empty()) {
            let image = std::env::var("E2E_IMG").unwrap_or_default();
            assert!(
                !image.is_empty(),
                "KUBECONFIG is set: name the image to push where that cluster pulls from, \
                 e.g. `make test-e2e IMG=registry.example.com/{NAME}:e2e`"
            );
            let client = kube::Client::try_default()
                .await
                .unwrap_or_else(|e| panic!("cannot use the cluster in KUBECONFIG: {e}"));
            if let Err(e) = client.apiserver_version().await {
                panic!("cannot reach the cluster in KUBECONFIG: {e}");
            }
            return Self {
                local: None,
                client,
                kubeconfig: None,
                image,
                insecure: false,
                kubectl_dir: None,
            };
        }
        let root = std::fs::read_to_string("/proc/self/status")
            .map(|s| {
                s.lines()
                    .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false);
        assert!(
            root,
            "no cluster: set KUBECONFIG (and IMG=<an image that cluster pulls>), \
             or run as root so the test can start opkit's local cluster"
        );
        let kubectl = opkit_envtest::find_node_assets()
            .unwrap_or_else(|e| panic!("cannot start opkit's local cluster: {e}"))
            .bin("kubectl");
        let cluster = Cluster::builder()
            .with_registry()
            .without_dns()
            .start()
            .await
            .unwrap_or_else(|e| panic!("cannot start opkit's local cluster: {e}"));
        let registry = cluster.registry().expect("the cluster's registry");
        println!(
            "opkit's local cluster started in {:.1}s (kubeconfig {}, registry {})",
            cluster.started_in().as_secs_f64(),
            cluster.kubeconfig_path().display(),
            registry.host()
        );
        Self {
            client: cluster.client().expect("the local cluster's client"),
            image: registry.reference(NAME, "e2e"),
            kubeconfig: Some(cluster.kubeconfig_path().to_owned()),
            insecure: true,
            kubectl_dir: kubectl.parent().map(Path::to_owned),
            local: Some(cluster),
        }
    }

    /// Stops the local cluster and checks that nothing it started is left.
    fn stop(self) {
        if let Some(cluster) = self.local {
            cluster.stop();
            let left = cluster.footprint().remaining();
            assert!(left.is_empty(), "the local cluster left {left:?}");
        }
    }
}

/// The project's directory, and how `make` and `kubectl` run in it.
/// Dropped, it puts back the `.pushed-image` the test's `make image PUSH=1`
/// overwrote, so a later `make deploy` deploys what it did before.
struct Project {
    dir: PathBuf,
    kubeconfig: Option<PathBuf>,
    path: OsString,
    insecure: bool,
    pushed_before: Option<Vec<u8>>,
}

impl Drop for Project {
    fn drop(&mut self) {
        let pushed = self.dir.join(".pushed-image");
        let _ = match &self.pushed_before {
            Some(before) => std::fs::write(&pushed, before),
            None => std::fs::remove_file(&pushed),
        };
    }
}

impl Project {
    fn new(target: &Target) -> Self {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            target
                .kubectl_dir
                .iter()
                .cloned()
                .chain(std::env::split_paths(&path)),
        )
        .expect("PATH");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        Self {
            pushed_before: std::fs::read(dir.join(".pushed-image")).ok(),
            dir,
            kubeconfig: target.kubeconfig.clone(),
            path,
            insecure: target.insecure,
        }
    }

    /// `program` in the project, as a shell would run it: without the
    /// variables cargo set for this test (a cargo that inherits
    /// `CARGO_MANIFEST_DIR` reruns build scripts that watch it and rebuilds
    /// every crate above them).
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        for (name, _) in std::env::vars() {
            let set_by_cargo = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_EXE_"]
                .iter()
                .any(|p| name.starts_with(p))
                || [
                    "CARGO_CRATE_NAME",
                    "CARGO_BIN_NAME",
                    "CARGO_PRIMARY_PACKAGE",
                    "CARGO_TARGET_TMPDIR",
                    "CARGO_RUSTC_CURRENT_DIR",
                    "OUT_DIR",
                ]
                .contains(&name.as_str());
            if set_by_cargo {
                command.env_remove(name);
            }
        }
        command
            .current_dir(&self.dir)
            .env("PATH", &self.path)
            .stdin(Stdio::null());
        if let Some(kubeconfig) = &self.kubeconfig {
            command.env("KUBECONFIG", kubeconfig);
        }
        command
    }

    /// Runs `make ARGS`, its output shown as it goes; panics if it fails.
    fn make(&self, args: &[&str]) {
        println!("make {}", args.join(" "));
        let mut command = self.command("make");
        command.args(args);
        if self.insecure {
            command.arg("INSECURE=1");
        }
        let status = tokio::task::block_in_place(|| command.status()).expect("run make");
        assert!(
            status.success(),
            "make {} failed ({status})",
            args.join(" ")
        );
    }

    fn kubectl(&self, args: &[&str]) -> Output {
        tokio::task::block_in_place(|| self.command("kubectl").args(args).output())
            .expect("run kubectl")
    }
}

/// `make undeploy` when dropped, even when the test fails half-way (after
/// showing the manager's pods and log).
struct Deployed<'a>(&'a Project);

impl Drop for Deployed<'_> {
    fn drop(&mut self) {
        let project = self.0;
        if std::thread::panicking() {
            for args in [
                &["get", "pods", "-n", NAMESPACE, "-o", "wide"][..],
                &[
                    "logs",
                    "-n",
                    NAMESPACE,
                    &format!("deployment/{NAME}-controller-manager"),
                    "--tail=100",
                ],
            ] {
                let output = project.kubectl(args);
                eprintln!(
                    "kubectl {}:\n{}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            for name in ["viewer", "editor"] {
                project.kubectl(&[
                    "delete",
                    "clusterrolebinding",
                    "--ignore-not-found",
                    &format!("{NAME}-e2e-{name}"),
                ]);
            }
            let _ =
                tokio::task::block_in_place(|| project.command("make").arg("undeploy").status());
        } else {
            project.make(&["undeploy"]);
        }
    }
}

/// Waits for the manager's Deployment to be rolled out and available.
async fn manager_available(client: &kube::Client) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let name = format!("{NAME}-controller-manager");
    eventually("the manager to be available", WAIT, || async {
        let deployment = deployments.get_opt(&name).await.ok()??;
        let status = deployment.status?;
        let rolled_out = status.observed_generation >= deployment.metadata.generation
            && status.updated_replicas == deployment.spec?.replicas
            && status.available_replicas.unwrap_or(0) >= 1;
        rolled_out.then_some(())
    })
    .await;
}

/// Every NetworkPolicy of `deploy/network-policy/` is in the cluster and
/// its pod selector picks the manager's pod.
async fn network_policies_select_the_manager(client: &kube::Client) {
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/network-policy");
    let files = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect::<Vec<_>>())
        .unwrap_or_default();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a NetworkPolicy");
        for object in opkit::manifest::parse(&text).expect("parse a NetworkPolicy") {
            let name = object.metadata.name.unwrap_or_default();
            let policy = policies
                .get(&name)
                .await
                .unwrap_or_else(|e| panic!("NetworkPolicy {name} ({}): {e}", file.display()));
            let selector = policy
                .spec
                .and_then(|s| s.pod_selector)
                .and_then(|s| s.match_labels)
                .unwrap_or_default()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            assert!(
                !selector.is_empty(),
                "NetworkPolicy {name} selects every pod"
            );
            let selected = pods
                .list(&ListParams::default().labels(&selector))
                .await
                .expect("list pods");
            assert!(
                selected.items.iter().any(|p| p
                    .metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&format!("{NAME}-controller-manager-")))),
                "NetworkPolicy {name} ({selector}) selects no manager pod"
            );
            println!("NetworkPolicy {name} selects the manager's pod");
        }
    }
}

/// A user bound to the built-in `view` can read every kind of the project
/// and not create it; one bound to `edit` can create it: the CRDs'
/// viewer and editor roles aggregate into them.
async fn roles_aggregate(project: &Project) {
    let bind = |who: &str, role: &str| {
        let output = project.kubectl(&[
            "create",
            "clusterrolebinding",
            &format!("{NAME}-e2e-{who}"),
            &format!("--clusterrole={role}"),
            &format!("--user={NAME}-e2e-{who}"),
        ]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    bind("viewer", "view");
    bind("editor", "edit");
    for crd in backup_operator::crds() {
        let resource = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
        for (who, verb, expected) in [
            ("viewer", "list", "yes"),
            ("viewer", "create", "no"),
            ("editor", "create", "yes"),
        ] {
            let user = format!("{NAME}-e2e-{who}");
            let what = format!("{user} may {verb} {resource}: {expected}");
            eventually(&what, WAIT, || async {
                let output = project.kubectl(&["auth", "can-i", verb, &resource, "--as", &user]);
                (String::from_utf8_lossy(&output.stdout).trim() == expected).then_some(())
            })
            .await;
        }
    }
    for who in ["viewer", "editor"] {
        let name = format!("{NAME}-e2e-{who}");
        let output = project.kubectl(&["delete", "clusterrolebinding", &name]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Applies every object of `samples/` (again while a webhook of the
/// operator is not reachable yet) and waits for each to be reconciled.
async fn samples_reconciled(client: &kube::Client) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|f| f.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read a sample");
        let objects =
            opkit::manifest::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let what = format!("{} to be applied", file.display());
        eventually(&what, WAIT, || async {
            match opkit::manifest::apply(client, &objects, "e2e").await {
                Ok(_) => Some(()),
                Err(e) if e.to_string().contains("failed calling webhook") => None,
                Err(e) => panic!("applying {}: {e}", file.display()),
            }
        })
        .await;
        for object in &objects {
            let api = api_for(client, object).await;
            let name = object.metadata.name.clone().unwrap_or_default();
            let what = format!("{} {name} to be reconciled", file.display());
            eventually(&what, WAIT, || async {
                api.get_opt(&name)
                    .await
                    .ok()?
                    .filter(reconciled)
                    .map(|_| ())
            })
            .await;
            println!("{}: {name} reconciled", file.display());
        }
    }
}

/// Whether the operator reported on `object`'s current generation.
fn reconciled(object: &DynamicObject) -> bool {
    let status = &object.data["status"];
    let observed = status["observedGeneration"].as_i64();
    let ready = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .is_none_or(|c| c["status"] == "True");
    observed.is_some() && observed == object.metadata.generation && ready
}

async fn api_for(client: &kube::Client, object: &DynamicObject) -> Api<DynamicObject> {
    let types = object.types.clone().unwrap_or_default();
    let gvk = GroupVersionKind::try_from(&types).expect("a sample's apiVersion");
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .expect("the sample's kind is served");
    match capabilities.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            object.metadata.namespace.as_deref().unwrap_or("default"),
            &resource,
        ),
    }
}

/// After `make undeploy`: no namespace, CRD or ClusterRole of the project.
async fn nothing_left(client: &kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let roles: Api<ClusterRole> = Api::all(client.clone());
    eventually("make undeploy to leave nothing behind", WAIT, || async {
        let namespace = namespaces.get_opt(NAMESPACE).await.ok()?;
        let mut crds_left = 0;
        for crd in backup_operator::crds() {
            let name = crd.metadata.name.unwrap_or_default();
            crds_left += usize::from(crds.get_opt(&name).await.ok()?.is_some());
        }
        let prefix = format!("{NAME}-");
        let roles_left = roles
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .filter(|r| {
                r.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&prefix))
            })
            .count();
        (namespace.is_none() && crds_left == 0 && roles_left == 0).then_some(())
    })
    .await;
}
