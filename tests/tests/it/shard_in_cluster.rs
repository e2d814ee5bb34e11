//! Sharding in the cluster, as a user ships it (issue 26): the memcached
//! operator, sharded over three replicas, on the local single-node cluster
//! (`opkit_envtest::Cluster`: real controllers, kubelet, containerd).
//!
//! The operator is `cargo opkit new sharded-memcached --group
//! cache.example.com --kind Memcached --sharding` (the manager's
//! `--sharding` flag on, `replicas: 3`, the ring's Lease RBAC) with
//! `examples/memcached`'s API type and reconciler copied in: the memcached
//! example, sharded. (Its own name, so that its binary and image never
//! collide with the example's in the shared target directory while the
//! other deploy journeys run.) `make image PUSH=1` and `make deploy`, as a
//! user runs them, with the operator's reconcile start and end logged
//! (`opkit::controller::worker=debug`, JSON lines).
//!
//! 1. Three operator pods Ready, and three member Leases of the ring, one
//!    per pod.
//! 2. 30 Memcacheds converge (the status observes the current generation;
//!    the owned Deployment runs `spec.size` replicas); more than one
//!    replica reconciled them (the work was divided).
//! 3. While Memcacheds are being created and resized, one operator pod is
//!    deleted: its replacement joins, and every Memcached converges,
//!    those created and resized after the deletion included; the member
//!    Leases are again the three live pods'.
//! 4. From every operator pod's whole log (followed from its start to its
//!    end, the deleted one's included): no Memcached was reconciled by two
//!    pods at once (their intervals, all on the one node's clock, never
//!    intersect), and no pod was refused a request (RBAC).
//!
//! Prints the figures (make image, deploy to three Ready, convergence
//! times, reconciles per pod). Needs root, the node assets (`make
//! cluster-assets`) and the registry (`make registry`).

use super::deploy_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams,
    PostParams,
};
use opkit_envtest::Cluster;
use opkit_tests::{create_namespace, eventually, init_tracing};
use serde_json::json;

use deploy_support::persist::{self, Persisted};
use deploy_support::{Tools, build_cargo_opkit, target_dir, text, workspace};

const NAME: &str = "sharded-memcached";
const NAMESPACE: &str = "sharded-memcached-system";
/// Where the Memcacheds live.
const CACHES: &str = "caches";
/// The Memcacheds created before the pod deletion.
const FIRST: usize = 30;
/// How long pods may take to start on the node.
const POD_WAIT: Duration = Duration::from_secs(180);
/// How long the Memcacheds may take to converge.
const CONVERGE_WAIT: Duration = Duration::from_secs(300);

fn memcached_resource() -> ApiResource {
    ApiResource {
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        plural: "memcacheds".into(),
    }
}

fn memcached(name: &str, size: i32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": { "name": name },
        "spec": { "size": size }
    }))
    .expect("a Memcached")
}

/// `cargo opkit new sharded-memcached ... --sharding` in `parent`, with
/// `examples/memcached`'s API type and reconciler, in its directory that
/// persists between runs (unchanged, it compiles nothing again); holds that
/// directory's lock.
fn generate(parent: &Path) -> Persisted {
    let lock = workspace().join("Cargo.lock");
    let output = std::process::Command::new(target_dir().join("debug/cargo-opkit"))
        .args(["opkit", "new", NAME, "--group", "cache.example.com"])
        .args(["--kind", "Memcached", "--sharding", "--skip-manifests"])
        .arg("--dir")
        .arg(parent)
        .arg("--lock-from")
        .arg(&lock)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .expect("run cargo-opkit");
    assert!(
        output.status.success(),
        "cargo opkit new --sharding:\n{}",
        text(&output)
    );
    let project = parent.join(NAME);
    let example = workspace().join("examples/memcached");
    for file in ["src/api/memcached.rs", "src/controllers/memcached.rs"] {
        std::fs::copy(example.join(file), project.join(file))
            .unwrap_or_else(|e| panic!("copying examples/memcached/{file}: {e}"));
    }
    // The scaffold's test is written against the scaffold's reconciler.
    std::fs::remove_file(project.join("tests/memcached_controller.rs"))
        .expect("remove the scaffold's controller test");
    persist::persist(
        &target_dir().join("opkit-generated"),
        &project,
        "shard_in_cluster",
        None,
    )
}

/// The generated Deployment, with the memcached image the node has and
/// the reconcile start and end logged (`make deploy` applies it as is).
fn configure_deployment(project: &Path, memcached_image: &str) {
    let path = project.join("deploy/04-deployment.yaml");
    let yaml = std::fs::read_to_string(&path).expect("deploy/04-deployment.yaml");
    assert!(yaml.contains("  replicas: 3\n"), "{yaml}");
    assert!(yaml.contains("- --sharding\n"), "{yaml}");
    assert!(yaml.contains("- --log-format=json\n"), "{yaml}");
    let env = format!(
        "          env:\n            - name: MEMCACHED_IMAGE\n              value: {memcached_image}\n            \
         - name: RUST_LOG\n              value: info,opkit::controller::worker=debug\n          ports:\n"
    );
    let yaml = yaml.replacen("          ports:\n", &env, 1);
    std::fs::write(&path, yaml).expect("write deploy/04-deployment.yaml");
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn selector() -> String {
    format!("app.kubernetes.io/name={NAME},app.kubernetes.io/component=manager")
}

/// The names of the three Ready operator pods, once there are exactly
/// three live ones, all Ready.
async fn three_ready(pods: &Api<Pod>) -> BTreeSet<String> {
    eventually("three Ready operator pods", POD_WAIT, || async {
        let list = pods
            .list(&ListParams::default().labels(&selector()))
            .await
            .ok()?;
        let live: Vec<&Pod> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        (live.len() == 3 && live.iter().all(|p| is_ready(p))).then(|| {
            live.iter()
                .filter_map(|p| p.metadata.name.clone())
                .collect()
        })
    })
    .await
}

/// Waits until the ring's member Leases are exactly one per pod of `pods`
/// (a holder identity is `<pod>_<uuid>`); returns their holders.
async fn member_leases(client: &kube::Client, pods: &BTreeSet<String>) -> Vec<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(
        &format!("one member Lease per pod of {pods:?}"),
        Duration::from_secs(60),
        || async {
            let list = leases
                .list(&ListParams::default().labels(&format!("shard.opkit.dev/ring={NAME}")))
                .await
                .ok()?;
            let holders: Vec<String> = list
                .items
                .iter()
                .filter_map(|l| l.spec.as_ref()?.holder_identity.clone())
                .collect();
            let of: BTreeSet<String> = holders
                .iter()
                .filter_map(|h| h.split_once('_').map(|(pod, _)| pod.to_owned()))
                .collect();
            (holders.len() == pods.len() && &of == pods).then_some(holders)
        },
    )
    .await
}

/// Every line of every operator pod, from its start: `(pod, line)`.
type Lines = Arc<Mutex<Vec<(String, String)>>>;

/// Follows the log of every operator pod that appears, from its start to
/// its end (a stream that breaks is read again; lines are kept once).
fn follow_logs(pods: Api<Pod>, lines: Lines) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut followed = BTreeSet::new();
        // Aborting this task aborts the followers.
        let mut followers = tokio::task::JoinSet::new();
        loop {
            if let Ok(list) = pods.list(&ListParams::default().labels(&selector())).await {
                for pod in list.items {
                    let Some(name) = pod.metadata.name.clone() else {
                        continue;
                    };
                    if followed.insert(name.clone()) {
                        followers.spawn(follow(pods.clone(), name, lines.clone()));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

async fn follow(pods: Api<Pod>, name: String, lines: Lines) {
    let mut seen = BTreeSet::new();
    let params = LogParams {
        follow: true,
        ..LogParams::default()
    };
    // Until the pod is gone: its container may not have started yet, and
    // a stream may end before the container does.
    while !matches!(pods.get_opt(&name).await, Ok(None)) {
        if let Ok(stream) = pods.log_stream(&name, &params).await {
            let mut stream = stream.lines();
            while let Some(Ok(line)) = stream.next().await {
                if seen.insert(line.clone()) {
                    lines.lock().unwrap().push((name.clone(), line));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One reconcile, from a pod's log.
#[derive(Debug, Clone)]
struct Reconcile {
    pod: String,
    key: String,
    start: Timestamp,
    end: Option<Timestamp>,
}

/// The reconciles of Memcacheds in `namespace` in `lines`, per pod and
/// reconcile id; and the error lines.
fn reconciles(lines: &[(String, String)], namespace: &str) -> (Vec<Reconcile>, Vec<String>) {
    let mut by_id: BTreeMap<(String, String), Reconcile> = BTreeMap::new();
    let mut errors = Vec::new();
    for (pod, line) in lines {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if event["level"] == "ERROR" {
            errors.push(format!("{pod}: {line}"));
        }
        let fields = &event["fields"];
        let message = fields["message"].as_str().unwrap_or_default();
        if fields["controller"] != "memcached" || fields["namespace"] != namespace {
            continue;
        }
        let at: Timestamp = match event["timestamp"].as_str().map(str::parse) {
            Some(Ok(at)) => at,
            _ => continue,
        };
        let id = (
            pod.clone(),
            fields["reconcile_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        let key = format!(
            "{namespace}/{}",
            fields["name"].as_str().unwrap_or_default()
        );
        match message {
            "reconcile started" => {
                by_id.insert(
                    id,
                    Reconcile {
                        pod: pod.clone(),
                        key,
                        start: at,
                        end: None,
                    },
                );
            }
            "reconcile finished" => {
                if let Some(r) = by_id.get_mut(&id) {
                    r.end = Some(at);
                }
            }
            // A reconcile whose permit lapsed (its key moved) is dropped
            // where it stands and never logs its end: this line, logged
            // before the key is released, ends the one of this key running
            // on this pod (a key runs once at a time on a pod).
            "shard permit lapsed; reconcile cancelled" => {
                if let Some(r) = by_id
                    .values_mut()
                    .find(|r| r.pod == *pod && r.key == key && r.end.is_none())
                {
                    r.end = Some(at);
                }
            }
            _ => {}
        }
    }
    (by_id.into_values().collect(), errors)
}

/// No two reconciles of one key from two pods intersect. A reconcile with
/// no end (neither finished nor cancelled: none expected, a deleted pod
/// finishes its reconciles before it exits) counts as running until its
/// pod's last line.
fn assert_no_overlap(reconciles: &[Reconcile], last_line: &BTreeMap<String, Timestamp>) {
    let mut by_key: BTreeMap<&str, Vec<(&str, Timestamp, Timestamp)>> = BTreeMap::new();
    for r in reconciles {
        let end = r
            .end
            .or_else(|| last_line.get(&r.pod).copied())
            .unwrap_or(r.start);
        by_key
            .entry(r.key.as_str())
            .or_default()
            .push((r.pod.as_str(), r.start, end));
    }
    for (key, intervals) in by_key {
        for a in &intervals {
            for b in &intervals {
                assert!(
                    a.0 == b.0 || !(a.1 < b.2 && b.1 < a.2),
                    "{key} reconciled by {} ({} .. {}) and {} ({} .. {}) at once",
                    a.0,
                    a.1,
                    a.2,
                    b.0,
                    b.1,
                    b.2
                );
            }
        }
    }
}

/// The last timestamp of each pod's log.
fn last_lines(lines: &[(String, String)]) -> BTreeMap<String, Timestamp> {
    let mut last = BTreeMap::new();
    for (pod, line) in lines {
        if let Ok(event) = serde_json::from_str::<serde_json::Value>(line)
            && let Some(Ok(at)) = event["timestamp"].as_str().map(str::parse::<Timestamp>)
        {
            last.insert(pod.clone(), at);
        }
    }
    last
}

/// Waits until every Memcached of `names` converged: its status observes
/// its current generation and its Deployment runs `spec.size` replicas.
/// Names the stragglers if they are late.
async fn converged(client: &kube::Client, names: &BTreeSet<String>, what: &str) -> Duration {
    let started = Instant::now();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), CACHES, &memcached_resource());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), CACHES);
    loop {
        let late = not_converged(&api, &deployments, names).await;
        if late.as_ref().is_some_and(Vec::is_empty) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < CONVERGE_WAIT,
            "{what}: not converged within {CONVERGE_WAIT:?}: {late:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Memcacheds of `names` not converged yet (`None`: could not list).
async fn not_converged(
    api: &Api<DynamicObject>,
    deployments: &Api<Deployment>,
    names: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let memcacheds = api.list(&ListParams::default()).await.ok()?;
    let replicas: BTreeMap<String, i32> = deployments
        .list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .filter_map(|d| Some((d.metadata.name?, d.spec?.replicas?)))
        .collect();
    let mut late = Vec::new();
    let mut found = BTreeSet::new();
    for m in &memcacheds.items {
        let name = m.metadata.name.clone().unwrap_or_default();
        found.insert(name.clone());
        let observed = m.data["status"]["observedGeneration"].as_i64();
        let size = m.data["spec"]["size"]
            .as_i64()
            .and_then(|s| i32::try_from(s).ok());
        if observed != m.metadata.generation || replicas.get(&name).copied() != size {
            late.push(name);
        }
    }
    late.extend(names.difference(&found).cloned());
    Some(late)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_sharded_over_three_pods_keeps_converging_when_one_is_deleted() {
    init_tracing();
    let journey = Instant::now();
    build_cargo_opkit();
    let tmp = tempfile::tempdir().expect("tempdir");
    let parent = tmp.path().to_owned();
    let generated = tokio::task::spawn_blocking(move || generate(&parent));
    let cluster = Cluster::builder()
        .with_registry()
        .start()
        .await
        .expect("start the local cluster and its registry");
    let generated = generated
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let project = generated.dir.clone();
    let client = cluster.client().expect("admin client");
    let tools = Tools::new(cluster.kubeconfig_path());
    configure_deployment(
        &project,
        cluster.image("memcached").expect("the memcached image"),
    );

    // make image PUSH=1, make deploy: three pods, three member Leases.
    let registry = cluster
        .registry()
        .expect("the cluster was started with_registry")
        .host();
    let image = format!("{registry}/{NAME}:e2e");
    let started = Instant::now();
    let output = tools.make(
        &project,
        &["image", &format!("IMG={image}"), "PUSH=1", "INSECURE=1"],
    );
    assert!(output.status.success(), "make image:\n{}", text(&output));
    let image_took = started.elapsed();
    let started = Instant::now();
    let output = tools.make(&project, &["deploy", &format!("IMG={image}")]);
    assert!(output.status.success(), "make deploy:\n{}", text(&output));
    // The RBAC `make deploy` rendered from the code: the ring's Leases.
    let rbac = std::fs::read_to_string(project.join("deploy/03-rbac.yaml")).expect("03-rbac.yaml");
    let leases = rbac
        .split("- apiGroups:")
        .find(|rule| rule.contains("coordination.k8s.io") && rule.contains("leases"))
        .unwrap_or_else(|| panic!("no Lease rule:\n{rbac}"));
    for verb in ["get", "list", "create", "update", "delete"] {
        assert!(leases.contains(&format!("- {verb}")), "{verb}:\n{leases}");
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let lines: Lines = Arc::default();
    let follower = follow_logs(pods.clone(), lines.clone());
    let first = three_ready(&pods).await;
    let ready_took = started.elapsed();
    let holders = member_leases(&client, &first).await;
    println!(
        "FIGURE make image {image_took:.1?}; make deploy -> three operator pods Ready {ready_took:.1?}; member Leases {holders:?}"
    );

    // 30 Memcacheds converge, reconciled by more than one pod.
    create_namespace(&client, CACHES).await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), CACHES, &memcached_resource());
    let mut names = BTreeSet::new();
    for i in 0..FIRST {
        let name = format!("m{i}");
        api.create(&PostParams::default(), &memcached(&name, 1))
            .await
            .unwrap_or_else(|e| panic!("create Memcached {name}: {e}"));
        names.insert(name);
    }
    let took = converged(&client, &names, "before the deletion").await;
    println!("FIGURE {FIRST} Memcacheds converged in {took:.1?}");
    // The logs reach the test a little after the status: wait for every
    // Memcached's start line.
    let by_pod = eventually(
        "a reconcile of every Memcached in the logs",
        Duration::from_secs(30),
        || async {
            let (done, _) = reconciles(&lines.lock().unwrap(), CACHES);
            let mut by_pod: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for r in done {
                by_pod.entry(r.pod).or_default().insert(r.key);
            }
            let covered: BTreeSet<&String> = by_pod.values().flatten().collect();
            (covered.len() == FIRST).then_some(by_pod)
        },
    )
    .await;
    let shares: BTreeMap<&str, usize> = by_pod.iter().map(|(p, k)| (p.as_str(), k.len())).collect();
    println!("FIGURE Memcacheds reconciled per pod: {shares:?}");
    assert!(
        by_pod.len() >= 2,
        "one pod reconciled every Memcached: the work was not divided ({shares:?})"
    );

    // Creates and resizes while one operator pod is deleted.
    let writer = tokio::spawn({
        let api = api.clone();
        async move {
            let mut created = Vec::new();
            for i in 0..12 {
                let name = format!("m{}", FIRST + i);
                api.create(&PostParams::default(), &memcached(&name, 1))
                    .await
                    .unwrap_or_else(|e| panic!("create Memcached {name}: {e}"));
                created.push((name, Instant::now()));
                api.patch(
                    &format!("m{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "spec": { "size": 2 } })),
                )
                .await
                .unwrap_or_else(|e| panic!("resize Memcached m{i}: {e}"));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            created
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let victim = first.iter().next().cloned().expect("a pod");
    let deleted_at = Instant::now();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .expect("delete an operator pod");
    let created = writer.await.expect("the writer");
    let after_deletion = created.iter().filter(|(_, at)| *at > deleted_at).count();
    names.extend(created.into_iter().map(|(name, _)| name));
    eventually("the deleted pod gone", POD_WAIT, || async {
        pods.get_opt(&victim).await.ok()?.is_none().then_some(())
    })
    .await;
    // And once it is gone: more new objects and updates.
    for i in 0..5 {
        let name = format!("late{i}");
        api.create(&PostParams::default(), &memcached(&name, 1))
            .await
            .unwrap_or_else(|e| panic!("create Memcached {name}: {e}"));
        names.insert(name);
        api.patch(
            &format!("m{}", 12 + i),
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "size": 2 } })),
        )
        .await
        .unwrap_or_else(|e| panic!("resize Memcached m{}: {e}", 12 + i));
    }
    let second = three_ready(&pods).await;
    assert!(!second.contains(&victim));
    let took = converged(&client, &names, "after the deletion").await;
    println!(
        "FIGURE after deleting {victim}: {} Memcacheds ({after_deletion} created while it was going, 5 once it was gone; 17 resized) converged {took:.1?} after three pods were Ready again, {:.1?} after the deletion",
        names.len(),
        deleted_at.elapsed()
    );
    let holders = member_leases(&client, &second).await;
    println!("member Leases after the deletion: {holders:?}");

    // The whole logs: no overlap, no error.
    tokio::time::sleep(Duration::from_secs(2)).await;
    follower.abort();
    let lines = lines.lock().unwrap().clone();
    let (done, errors) = reconciles(&lines, CACHES);
    let unfinished: Vec<&Reconcile> = done.iter().filter(|r| r.end.is_none()).collect();
    let victim_reconciles = done.iter().filter(|r| r.pod == victim).count();
    let per_pod: BTreeMap<&str, usize> = done.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.pod.as_str()).or_default() += 1;
        m
    });
    println!(
        "FIGURE {} reconciles of Memcacheds in {} log lines; per pod {per_pod:?}; unfinished {}",
        done.len(),
        lines.len(),
        unfinished.len()
    );
    assert!(victim_reconciles > 0, "the deleted pod's log was not read");
    assert!(
        unfinished.iter().all(|r| second.contains(&r.pod)),
        "the deleted pod left reconciles unfinished: {unfinished:?}"
    );
    assert_no_overlap(&done, &last_lines(&lines));
    // Errors are printed (a transient one, e.g. a conflict retried, is not
    // a failure); a forbidden request is: the generated RBAC lacks a rule.
    println!("error lines of the operator pods: {}", errors.len());
    for line in &errors {
        println!("  {line}");
    }
    let forbidden: Vec<&String> = errors
        .iter()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
        .collect();
    assert!(forbidden.is_empty(), "forbidden requests: {forbidden:?}");
    println!(
        "FIGURE the sharded memcached journey took {:.1?}",
        journey.elapsed()
    );
}
