//! Read-your-own-writes against a real control plane: a reconciler that
//! creates a child when the cache says it is absent, and rewrites a
//! "status" when the cache says it is out of date, never acts on a state
//! older than its own write, under churn and across an apiserver restart;
//! with the opt-out it does (the classic bug), so the test can fail.
//!
//! Run: `cargo test -p opkit-tests --test it read_your_writes:: -- --nocapture`
//! (prints the counts of both runs).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use opkit::cache::SharedCache;
use opkit::client;
use opkit::controller::Controller;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const PARENTS: usize = 24;
const ROUNDS: usize = 6;
const WAIT: Duration = Duration::from_secs(90);

/// What the reconciler saw that it should not have.
#[derive(Default, Debug)]
struct Counts {
    /// Creates of a child that already existed (the cache said absent).
    already_exists: AtomicUsize,
    /// Reads of a parent older than this process's last write of it.
    stale_parent_reads: AtomicUsize,
    /// "Status" writes made from such a stale read.
    stale_status_rewrites: AtomicUsize,
    /// Reads that found a child this process had deleted.
    deleted_child_seen: AtomicUsize,
    creates: AtomicUsize,
    status_writes: AtomicUsize,
    deletes: AtomicUsize,
}

/// Parent `p-N` (data `spec`) gets a child `c-N` and `observed = spec`;
/// a parent with `drop-child` has its child deleted instead.
struct Parents {
    counts: Arc<Counts>,
    last_written_rv: Mutex<HashMap<String, u64>>,
    deleted_children: Mutex<HashSet<String>>,
}

fn rv_of(cm: &ConfigMap) -> u64 {
    cm.resource_version()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or_default()
}

fn data<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.data.as_ref()?.get(key).map(String::as_str)
}

impl Reconcile for Parents {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let Some(id) = req.name.strip_prefix("p-") else {
            return Ok(Action::done());
        };
        let ns = req.namespace.clone().unwrap_or_default();
        let Some(parent) = ctx.object().await? else {
            return Ok(Action::done());
        };
        let last = self.last_written_rv.lock().unwrap().get(&req.name).copied();
        let stale = last.is_some_and(|last| rv_of(&parent) < last);
        if stale {
            self.counts
                .stale_parent_reads
                .fetch_add(1, Ordering::Relaxed);
        }
        let api = ctx.api::<ConfigMap>(Some(&ns));
        let child_name = format!("c-{id}");
        let child = ctx.get::<ConfigMap>(Some(&ns), &child_name).await?;
        let mut wrote = false;
        if data(&parent, "drop-child").is_some() {
            if let Some(child) = child {
                if self
                    .deleted_children
                    .lock()
                    .unwrap()
                    .contains(&child.uid().unwrap_or_default())
                {
                    self.counts
                        .deleted_child_seen
                        .fetch_add(1, Ordering::Relaxed);
                }
                match api.delete(&child_name, &DeleteParams::default()).await {
                    Ok(_) => {
                        self.counts.deletes.fetch_add(1, Ordering::Relaxed);
                        self.deleted_children
                            .lock()
                            .unwrap()
                            .insert(child.uid().unwrap_or_default());
                    }
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
                wrote = true;
            }
        } else if child.is_none() {
            let child = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(child_name.clone()),
                    namespace: Some(ns.clone()),
                    ..ObjectMeta::default()
                },
                data: Some(BTreeMap::from([("parent".to_owned(), req.name.clone())])),
                ..ConfigMap::default()
            };
            match api.create(&PostParams::default(), &child).await {
                Ok(_) => {
                    self.counts.creates.fetch_add(1, Ordering::Relaxed);
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    self.counts.already_exists.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(e.into()),
            }
            // Look again at once: where a stale cache says "still absent".
            return Ok(Action::requeue_after(Duration::from_millis(1)));
        }
        let spec = data(&parent, "spec").unwrap_or_default().to_owned();
        if data(&parent, "observed") != Some(spec.as_str()) {
            if stale {
                self.counts
                    .stale_status_rewrites
                    .fetch_add(1, Ordering::Relaxed);
            }
            let written = api
                .patch(
                    &req.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"observed": spec}})),
                )
                .await?;
            self.counts.status_writes.fetch_add(1, Ordering::Relaxed);
            let rv = rv_of(&written);
            let mut last = self.last_written_rv.lock().unwrap();
            let entry = last.entry(req.name.clone()).or_default();
            *entry = (*entry).max(rv);
            wrote = true;
        }
        // Read again right away after a write: where a stale cache bites.
        Ok(if wrote {
            Action::requeue_after(Duration::from_millis(1))
        } else {
            Action::done()
        })
    }
}

fn parent(name: &str, spec: usize) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("spec".to_owned(), spec.to_string())])),
        ..ConfigMap::default()
    }
}

/// Runs the scenario in `ns` and returns what the reconciler counted.
async fn run_scenario(
    plane: &ControlPlane,
    ns: &str,
    read_your_writes: bool,
    restart: bool,
) -> Arc<Counts> {
    let client = plane.client().unwrap();
    create_namespace(&client, ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    let counts = Arc::new(Counts::default());
    let reconciler = Parents {
        counts: Arc::clone(&counts),
        last_written_rv: Mutex::new(HashMap::new()),
        deleted_children: Mutex::new(HashSet::new()),
    };
    let controller = Controller::new(reconciler)
        .max_concurrent_reconciles(4)
        .read_your_writes(read_your_writes);
    cache.start().unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let token = token.clone();
        let cache = cache.clone();
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });

    for i in 0..PARENTS {
        cms.create(&PostParams::default(), &parent(&format!("p-{i}"), 0))
            .await
            .unwrap();
    }
    // Churn: every round bumps every parent's spec while the reconciler
    // writes; the last two rounds drop the children of the even parents.
    for round in 1..=ROUNDS {
        let mut writes = Vec::new();
        for i in 0..PARENTS {
            let cms = cms.clone();
            let mut patch = json!({"data": {"spec": round.to_string()}});
            if round >= ROUNDS - 1 && i % 2 == 0 {
                patch["data"]["drop-child"] = json!("yes");
            }
            writes.push(tokio::spawn(async move {
                cms.patch(
                    &format!("p-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            }));
        }
        for w in writes {
            // A write racing the restart may fail; the churn is best effort.
            let _ = w.await.unwrap();
        }
        if restart && round == ROUNDS / 2 {
            plane.restart_apiserver().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // The last round's spec may have been lost to the restart: converge on
    // what the parents hold.
    eventually(
        "every parent observed its spec, children as asked",
        WAIT,
        || async {
            let Ok(list) = cms.list(&ListParams::default()).await else {
                return None;
            };
            let by_name: HashMap<String, &ConfigMap> =
                list.items.iter().map(|cm| (cm.name_any(), cm)).collect();
            (0..PARENTS)
                .all(|i| {
                    let child = by_name.contains_key(&format!("c-{i}"));
                    by_name.get(&format!("p-{i}")).is_some_and(|p| {
                        data(p, "observed") == data(p, "spec")
                            && child == data(p, "drop-child").is_none()
                    })
                })
                .then_some(())
        },
    )
    .await;
    token.cancel();
    run.await.unwrap().unwrap();
    // Memory: every record goes once the informer caught up.
    eventually("no write left pending", WAIT, || async {
        (cache.pending_writes() == 0).then_some(())
    })
    .await;
    if restart {
        let stats = cache.informer::<ConfigMap>().unwrap().stats();
        assert!(
            stats.watch_requests + stats.watch_list_requests >= 2,
            "the restart did not break the watch: {stats:?}"
        );
    }
    cache.stop();
    tracing::info!(?counts, read_your_writes, restart, "scenario done");
    counts
}

fn get(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_after_writes_never_miss_them_under_churn_and_a_restart() {
    init_tracing();
    // Its own control plane: the restart must not break other tests' watches.
    let plane = ControlPlane::start().await.unwrap();
    let counts = run_scenario(&plane, "ryow-on", true, true).await;
    eprintln!("read-your-writes on, apiserver restarted mid-run: {counts:?}");
    assert_eq!(
        get(&counts.already_exists),
        0,
        "duplicate creates: {counts:?}"
    );
    assert_eq!(
        get(&counts.stale_parent_reads),
        0,
        "stale reads: {counts:?}"
    );
    assert_eq!(
        get(&counts.stale_status_rewrites),
        0,
        "stale rewrites: {counts:?}"
    );
    assert_eq!(
        get(&counts.deleted_child_seen),
        0,
        "deleted child read back: {counts:?}"
    );
    assert!(get(&counts.creates) >= PARENTS, "{counts:?}");
    assert!(get(&counts.deletes) >= PARENTS / 2, "{counts:?}");
    assert!(get(&counts.status_writes) >= PARENTS * 2, "{counts:?}");
    plane.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_your_writes_the_classic_bug_shows() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let counts = run_scenario(plane, "ryow-off", false, false).await;
    eprintln!("read-your-writes off: {counts:?}");
    // Which symptom shows depends on how the watch races the reconciler (a
    // duplicate create, a stale read and the status rewrite made from it,
    // a deleted child read back); the scenario must show at least one, or
    // it could not tell the two modes apart.
    let symptoms = get(&counts.already_exists)
        + get(&counts.stale_parent_reads)
        + get(&counts.stale_status_rewrites)
        + get(&counts.deleted_child_seen);
    assert!(
        symptoms > 0,
        "the opt-out read nothing stale; the scenario cannot tell the difference: {counts:?}"
    );
}

/// A custom resource with a status subresource, for the status write paths.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "ryow.opkit.dev",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
struct WidgetSpec {
    size: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
}

/// The write paths, in the order each trigger walks them.
const STEPS: [&str; 9] = [
    "create",
    "replace",
    "patch",
    "client::apply",
    "client::add_finalizer",
    "client::patch_status",
    "client::apply_status",
    "client::remove_finalizer",
    "delete",
];

const FINALIZER: &str = "ryow.opkit.dev/hold";

/// For trigger ConfigMap `t-N`: walks Widget `w-N` through every write
/// path, one per reconcile, and reads it back through the Context right
/// after each write.
struct WritePaths {
    step: Mutex<HashMap<String, usize>>,
    /// (step, what the read returned) for every read older than the write.
    stale: Arc<Mutex<Vec<String>>>,
    done: Arc<AtomicUsize>,
}

impl WritePaths {
    async fn write(
        &self,
        step: &str,
        api: &Api<Widget>,
        name: &str,
        current: Option<&Widget>,
    ) -> Result<Option<Widget>, ReconcileError> {
        let widget = |size| {
            let mut w = Widget::new(name, WidgetSpec { size });
            w.metadata.namespace = api_namespace(current);
            w
        };
        Ok(match step {
            "create" => Some(
                api.create(
                    &PostParams::default(),
                    &Widget::new(name, WidgetSpec { size: 1 }),
                )
                .await?,
            ),
            "replace" => {
                let mut w = current
                    .cloned()
                    .ok_or_else(|| ReconcileError::retryable("replace: widget missing"))?;
                w.spec.size = 2;
                Some(api.replace(name, &PostParams::default(), &w).await?)
            }
            "patch" => Some(
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"size": 3}})),
                )
                .await?,
            ),
            "client::apply" => Some(client::apply(api, &widget(4), "ryow-test").await?),
            "client::add_finalizer" => {
                let w = current
                    .ok_or_else(|| ReconcileError::retryable("add_finalizer: widget missing"))?;
                let written = client::add_finalizer(api, &Arc::new(w.clone()), FINALIZER).await?;
                Some(Widget::clone(&written))
            }
            "client::patch_status" => Some(
                client::patch_status(
                    api,
                    name,
                    &WidgetStatus {
                        phase: Some("Patched".into()),
                    },
                )
                .await?,
            ),
            "client::apply_status" => {
                let mut w = widget(4);
                w.status = Some(WidgetStatus {
                    phase: Some("Applied".into()),
                });
                Some(client::apply_status(api, &w, "ryow-test").await?)
            }
            "client::remove_finalizer" => {
                let w = current
                    .ok_or_else(|| ReconcileError::retryable("remove_finalizer: widget missing"))?;
                client::remove_finalizer(api, &Arc::new(w.clone()), FINALIZER)
                    .await?
                    .map(|w| Widget::clone(&w))
            }
            _ => {
                api.delete(name, &DeleteParams::default()).await?;
                None
            }
        })
    }
}

fn api_namespace(current: Option<&Widget>) -> Option<String> {
    current.and_then(|w| w.metadata.namespace.clone())
}

impl Reconcile for WritePaths {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let Some(id) = req.name.strip_prefix("t-") else {
            return Ok(Action::done());
        };
        let ns = req.namespace.clone().unwrap_or_default();
        let name = format!("w-{id}");
        let step = *self.step.lock().unwrap().get(&req.name).unwrap_or(&0);
        let Some(step_name) = STEPS.get(step) else {
            return Ok(Action::done());
        };
        let api = ctx.api::<Widget>(Some(&ns));
        let current = ctx.get::<Widget>(Some(&ns), &name).await?;
        let mut with_ns = current.as_deref().cloned();
        if let Some(w) = &mut with_ns {
            w.metadata.namespace = Some(ns.clone());
        }
        let written = self.write(step_name, &api, &name, with_ns.as_ref()).await?;
        // Read back at once.
        let read = ctx.get::<Widget>(Some(&ns), &name).await?;
        let ok = match (&written, &read) {
            (Some(w), Some(r)) => {
                r.resource_version().and_then(|v| v.parse::<u64>().ok())
                    >= w.resource_version().and_then(|v| v.parse::<u64>().ok())
            }
            (Some(_), None) => false,
            (None, read) => read.is_none(),
        };
        if !ok {
            self.stale.lock().unwrap().push(format!(
                "{step_name}: wrote {:?}, read {:?}",
                written.as_ref().and_then(|w| w.resource_version()),
                read.as_ref().map(|r| r.resource_version())
            ));
        }
        self.step.lock().unwrap().insert(req.name.clone(), step + 1);
        if step + 1 == STEPS.len() {
            self.done.fetch_add(1, Ordering::Relaxed);
            return Ok(Action::done());
        }
        Ok(Action::requeue_after(Duration::from_millis(1)))
    }
}

async fn run_write_paths(ns: &str, read_your_writes: bool) -> Vec<String> {
    const TRIGGERS: usize = 16;
    let plane = ControlPlane::shared().await.unwrap();
    plane.install_crds(&[Widget::crd()]).await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, ns).await;
    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    let stale = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let controller = Controller::new(WritePaths {
        step: Mutex::new(HashMap::new()),
        stale: Arc::clone(&stale),
        done: Arc::clone(&done),
    })
    .reads::<Widget>()
    .max_concurrent_reconciles(4)
    .read_your_writes(read_your_writes);
    cache.start().unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let token = token.clone();
        let cache = cache.clone();
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for i in 0..TRIGGERS {
        cms.create(&PostParams::default(), &parent(&format!("t-{i}"), 0))
            .await
            .unwrap();
    }
    eventually("every trigger walked every write path", WAIT, || async {
        (done.load(Ordering::Relaxed) == TRIGGERS).then_some(())
    })
    .await;
    token.cancel();
    run.await.unwrap().unwrap();
    eventually("no write left pending", WAIT, || async {
        (cache.pending_writes() == 0).then_some(())
    })
    .await;
    cache.stop();
    stale.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_path_is_read_back() {
    init_tracing();
    let stale = run_write_paths("ryow-paths-on", true).await;
    assert!(stale.is_empty(), "reads older than the write: {stale:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_your_writes_write_paths_read_stale() {
    init_tracing();
    let stale = run_write_paths("ryow-paths-off", false).await;
    eprintln!("read-your-writes off, stale reads after a write: {stale:#?}");
    assert!(!stale.is_empty(), "the opt-out read no stale state");
}
