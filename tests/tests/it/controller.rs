//! Controllers against a real control plane: owned objects, mapped watches,
//! predicates, and the one-worker-per-key guarantee under load.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use opkit::cache::SharedCache;
use opkit::controller::Controller;
use opkit::predicate::GenerationChanged;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "ctl.opkit.dev", version = "v1", kind = "Gadget", namespaced)]
struct GadgetSpec {
    colour: String,
}

/// Keeps a ConfigMap `<gadget>-cm` owned by each Gadget, holding its colour
/// and the `theme` key of the ConfigMap `settings` (a mapped watch).
struct GadgetReconciler {
    seen: Mutex<Vec<Request>>,
}

impl Reconcile for GadgetReconciler {
    type Object = Gadget;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Gadget>,
    ) -> Result<Action, ReconcileError> {
        self.seen.lock().unwrap().push(req.clone());
        let Some(gadget) = ctx.object().await? else {
            return Ok(Action::done());
        };
        let ns = gadget.namespace().unwrap_or_default();
        let theme = ctx
            .get::<ConfigMap>(Some(&ns), "settings")
            .await?
            .and_then(|cm| cm.data.as_ref()?.get("theme").cloned())
            .unwrap_or_default();
        let owner = gadget.controller_owner_ref(&()).expect("has uid");
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("{}-cm", req.name)),
                namespace: Some(ns.clone()),
                owner_references: Some(vec![owner]),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("colour".to_owned(), gadget.spec.colour.clone()),
                ("theme".to_owned(), theme),
            ])),
            ..ConfigMap::default()
        };
        // Server-side apply as the controller's field manager: its name.
        ctx.apply(&cm).await?;
        ctx.recorder()
            .normal(&*gadget, "Synced", "Reconcile", "ConfigMap applied");
        Ok(Action::done())
    }
}

async fn cm_data(api: &Api<ConfigMap>, name: &str) -> Option<BTreeMap<String, String>> {
    api.get_opt(name).await.unwrap().and_then(|cm| cm.data)
}

#[tokio::test]
async fn owned_and_mapped_objects_converge() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    plane.install_crds(&[Gadget::crd()]).await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, "ctl-flows").await;
    let gadgets: Api<Gadget> = Api::namespaced(client.clone(), "ctl-flows");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ctl-flows");

    let reconciler = GadgetReconciler {
        seen: Mutex::new(Vec::new()),
    };
    let cache = SharedCache::builder(client.clone())
        .namespace("ctl-flows")
        .build();
    let controller = Controller::new(reconciler)
        .owns::<ConfigMap>()
        .watches::<ConfigMap>(|cm: &ConfigMap, _gadgets: &opkit::cache::Store<Gadget>| {
            // `settings` wakes every Gadget in its namespace: here, the two we make.
            if cm.name_any() != "settings" {
                return Vec::new();
            }
            let ns = cm.namespace().unwrap_or_default();
            ["red", "blue"]
                .iter()
                .map(|n| Request::namespaced(ns.clone(), *n))
                .collect()
        });
    cache.start().unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let token = token.clone();
        let cache = cache.clone();
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });

    for (name, colour) in [("red", "crimson"), ("blue", "navy")] {
        gadgets
            .create(
                &PostParams::default(),
                &Gadget::new(
                    name,
                    GadgetSpec {
                        colour: colour.to_owned(),
                    },
                ),
            )
            .await
            .unwrap();
    }
    eventually("owned ConfigMaps created", WAIT, || async {
        (cm_data(&cms, "red-cm")
            .await
            .is_some_and(|d| d["colour"] == "crimson")
            && cm_data(&cms, "blue-cm")
                .await
                .is_some_and(|d| d["colour"] == "navy"))
        .then_some(())
    })
    .await;
    let owned = cms.get("red-cm").await.unwrap();
    let owner = &owned.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Gadget", "red", Some(true))
    );
    let managers: Vec<_> = owned
        .managed_fields()
        .iter()
        .filter(|entry| entry.operation.as_deref() == Some("Apply"))
        .filter_map(|entry| entry.manager.clone())
        .collect();
    assert_eq!(
        managers,
        ["gadget"],
        "ctx.apply applies as the controller's name"
    );

    // Update the primary: the owned object follows.
    gadgets
        .patch(
            "red",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"colour": "scarlet"}})),
        )
        .await
        .unwrap();
    eventually("update reaches the owned ConfigMap", WAIT, || async {
        cm_data(&cms, "red-cm")
            .await
            .is_some_and(|d| d["colour"] == "scarlet")
            .then_some(())
    })
    .await;

    // Someone edits the owned object: the owner is reconciled and repairs it.
    cms.patch(
        "blue-cm",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"data": {"colour": "tampered"}})),
    )
    .await
    .unwrap();
    eventually("owner repairs its ConfigMap", WAIT, || async {
        cm_data(&cms, "blue-cm")
            .await
            .is_some_and(|d| d["colour"] == "navy")
            .then_some(())
    })
    .await;

    // A mapped watch: `settings` wakes both Gadgets.
    let settings = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("theme".to_owned(), "dark".to_owned())])),
        ..ConfigMap::default()
    };
    cms.create(&PostParams::default(), &settings).await.unwrap();
    eventually("mapped watch re-reconciles both", WAIT, || async {
        (cm_data(&cms, "red-cm")
            .await
            .is_some_and(|d| d["theme"] == "dark")
            && cm_data(&cms, "blue-cm")
                .await
                .is_some_and(|d| d["theme"] == "dark"))
        .then_some(())
    })
    .await;

    // The reconciler's Events, reported by the controller (named after the kind).
    opkit_tests::wait_for_event(
        &client,
        "ctl-flows",
        "a Synced Event about red",
        WAIT,
        |e| {
            e.reason.as_deref() == Some("Synced")
                && e.reporting_controller.as_deref() == Some("gadget")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("red")
        },
    )
    .await;

    token.cancel();
    run.await.unwrap().unwrap();
}

/// Records overlapping reconciles of one key; slow enough for overlaps to show.
struct Instrumented {
    running: Mutex<HashSet<Request>>,
    overlaps: Mutex<Vec<Request>>,
    last_seen_value: Mutex<HashMap<String, String>>,
}

impl Reconcile for Instrumented {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if !self.running.lock().unwrap().insert(req.clone()) {
            self.overlaps.lock().unwrap().push(req.clone());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        if let Some(cm) = ctx.object().await? {
            let value = cm
                .data
                .as_ref()
                .and_then(|d| d.get("n").cloned())
                .unwrap_or_default();
            self.last_seen_value
                .lock()
                .unwrap()
                .insert(req.name.clone(), value);
        }
        self.running.lock().unwrap().remove(&req);
        Ok(Action::done())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_is_reconciled_twice_at_once_under_load() {
    const OBJECTS: usize = 500;
    const UPDATES: usize = 3;
    let plane = ControlPlane::shared().await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, "ctl-load").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ctl-load");

    let reconciler = Arc::new(Instrumented {
        running: Mutex::default(),
        overlaps: Mutex::default(),
        last_seen_value: Mutex::default(),
    });
    struct Shared(Arc<Instrumented>);
    impl Reconcile for Shared {
        type Object = ConfigMap;

        async fn reconcile(
            &self,
            req: Request,
            ctx: &Context<ConfigMap>,
        ) -> Result<Action, ReconcileError> {
            self.0.reconcile(req, ctx).await
        }
    }
    let cache = SharedCache::builder(client.clone())
        .namespace("ctl-load")
        .build();
    let controller = Controller::new(Shared(Arc::clone(&reconciler))).max_concurrent_reconciles(8);
    let stats = controller.stats();
    cache.start().unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (token, cache) = (token.clone(), cache.clone());
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });

    let writes = futures::stream::iter(0..OBJECTS).for_each_concurrent(16, |i| {
        let cms = cms.clone();
        async move {
            let name = format!("load-{i}");
            for n in 0..=UPDATES {
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..ObjectMeta::default()
                    },
                    data: Some(BTreeMap::from([("n".to_owned(), n.to_string())])),
                    ..ConfigMap::default()
                };
                cms.patch(&name, &PatchParams::apply("load"), &Patch::Apply(&cm))
                    .await
                    .unwrap();
            }
        }
    });
    use futures::StreamExt;
    writes.await;

    let want = UPDATES.to_string();
    eventually("every object's final state reconciled", WAIT, || async {
        let seen = reconciler.last_seen_value.lock().unwrap();
        (seen.len() == OBJECTS && seen.values().all(|v| *v == want)).then_some(())
    })
    .await;
    token.cancel();
    run.await.unwrap().unwrap();
    assert!(
        reconciler.overlaps.lock().unwrap().is_empty(),
        "overlapping reconciles: {:?}",
        reconciler.overlaps.lock().unwrap()
    );
    let counts = stats.snapshot();
    assert!(counts.success >= OBJECTS as u64, "{counts:?}");
    assert_eq!(counts.error, 0);
    eprintln!(
        "{OBJECTS} objects x {} writes: {} reconciles",
        UPDATES + 1,
        counts.total()
    );
}

#[tokio::test]
async fn predicates_filter_status_only_changes() {
    let plane = ControlPlane::shared().await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, "ctl-pred").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "ctl-pred");
    struct Count(Arc<Mutex<Vec<Request>>>);
    impl Reconcile for Count {
        type Object = ConfigMap;

        async fn reconcile(
            &self,
            req: Request,
            _ctx: &Context<ConfigMap>,
        ) -> Result<Action, ReconcileError> {
            self.0.lock().unwrap().push(req);
            Ok(Action::done())
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cache = SharedCache::builder(client.clone())
        .namespace("ctl-pred")
        .build();
    // ConfigMaps have no generation: GenerationChanged drops every update.
    let controller = Controller::with_predicate(Count(Arc::clone(&seen)), GenerationChanged);
    cache.start().unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (token, cache) = (token.clone(), cache.clone());
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("p".into());
    cms.create(&PostParams::default(), &cm).await.unwrap();
    eventually("create passes the predicate", WAIT, || async {
        (seen.lock().unwrap().len() == 1).then_some(())
    })
    .await;
    for i in 0..3 {
        cms.patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"data": {"i": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    // A marker object created after the updates: once it is reconciled, the
    // updates (delivered earlier, in order) were seen by the handler.
    let mut marker = ConfigMap::default();
    marker.metadata.name = Some("marker".into());
    cms.create(&PostParams::default(), &marker).await.unwrap();
    eventually("marker reconciled", WAIT, || async {
        seen.lock()
            .unwrap()
            .iter()
            .any(|r| r.name == "marker")
            .then_some(())
    })
    .await;
    let names: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        names,
        ["p", "marker"],
        "updates without a generation change were filtered"
    );
    token.cancel();
    run.await.unwrap().unwrap();
    let _ = Gadget::api_version(&());
}

/// Issue 22: an external event source (controller-runtime's
/// `source.Channel`) wakes the controller for a key no watch event named:
/// against the real apiserver, a Gadget created before the controller
/// started is reconciled again only because the channel asked, and the
/// reconcile reads it from the cache as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_source_wakes_the_controller() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    plane.install_crds(&[Gadget::crd()]).await.unwrap();
    let ns = "ctl-channel";
    let client = plane.client().unwrap();
    create_namespace(&client, ns).await;
    let gadgets: Api<Gadget> = Api::namespaced(client.clone(), ns);
    gadgets
        .create(
            &PostParams::default(),
            &Gadget::new(
                "quiet",
                GadgetSpec {
                    colour: "grey".into(),
                },
            ),
        )
        .await
        .unwrap();
    let reconciler = Arc::new(GadgetReconciler {
        seen: Mutex::new(Vec::new()),
    });
    /// Shares the recording reconciler with the test.
    struct Shared(Arc<GadgetReconciler>);
    impl Reconcile for Shared {
        type Object = Gadget;
        async fn reconcile(
            &self,
            req: Request,
            ctx: &Context<Gadget>,
        ) -> Result<Action, ReconcileError> {
            self.0.reconcile(req, ctx).await
        }
    }
    let (wake, woken) = tokio::sync::mpsc::channel(4);
    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    let controller = Controller::new(Shared(Arc::clone(&reconciler)))
        .owns::<ConfigMap>()
        .watches_channel(woken);
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (token, cache) = (token.clone(), cache.clone());
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });
    let count = |r: &GadgetReconciler| {
        r.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|q| q.name == "quiet")
            .count()
    };
    // The initial list reconciles it once; its owned ConfigMap's creation
    // may wake it once more. Wait until it has settled.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    eventually("the initial reconcile", WAIT, || async {
        cm_data(&cms, "quiet-cm").await.map(|_| ())
    })
    .await;
    let settled = eventually("the reconciles to settle", WAIT, || async {
        let before = count(&reconciler);
        tokio::task::yield_now().await;
        cache.wait_for_sync(WAIT).await.ok()?;
        (count(&reconciler) == before && before > 0).then_some(before)
    })
    .await;
    // Nothing changed in the cluster; the channel alone asks.
    wake.send(Request::namespaced(ns, "quiet")).await.unwrap();
    eventually("the channel's request reconciled", WAIT, || async {
        (count(&reconciler) > settled).then_some(())
    })
    .await;
    token.cancel();
    run.await.unwrap().unwrap();
    // The controller is gone: nobody reads the channel any more.
    tokio::time::timeout(WAIT, wake.closed()).await.unwrap();
}

/// Keeps a Secret `<name>-child` owned by each ConfigMap it reconciles,
/// behind a finalizer whose cleanup deletes the child (so the child's
/// deletion wakes the key again while the cleanup runs) and counts.
struct CleansUpOnce(Arc<CleanupLog>);

/// Cleanups per name, and each reconcile's name and whether it read the
/// object being deleted.
#[derive(Default)]
struct CleanupLog {
    cleanups: Mutex<HashMap<String, usize>>,
    reconciles: Mutex<Vec<(String, bool)>>,
}

const ONCE_FINALIZER: &str = "ctl.opkit.dev/once";

impl Reconcile for CleansUpOnce {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        use k8s_openapi::api::core::v1::Secret;
        use opkit::client::{FinalizerEvent, IgnoreNotFound};
        let read = ctx.object().await;
        let deleting = matches!(&read, Ok(Some(cm)) if cm.metadata.deletion_timestamp.is_some());
        self.0
            .reconciles
            .lock()
            .unwrap()
            .push((req.name.clone(), deleting));
        let ns = req.namespace.clone().unwrap_or_default();
        let child = format!("{}-child", req.name);
        opkit::client::finalizer(&ctx.object_api(), ONCE_FINALIZER, read, |event| async {
            match event {
                FinalizerEvent::Apply(cm) => {
                    let mut secret = Secret {
                        metadata: ObjectMeta {
                            name: Some(child.clone()),
                            namespace: Some(ns.clone()),
                            ..ObjectMeta::default()
                        },
                        ..Secret::default()
                    };
                    opkit::client::set_controller_reference(&*cm, &mut secret)?;
                    ctx.apply(&secret).await?;
                }
                FinalizerEvent::Cleanup(_) | FinalizerEvent::CleanupUndecodable(_) => {
                    *self
                        .0
                        .cleanups
                        .lock()
                        .unwrap()
                        .entry(req.name.clone())
                        .or_default() += 1;
                    ctx.api::<Secret>(Some(&ns))
                        .delete(&child, &Default::default())
                        .await
                        .ignore_not_found()?;
                }
            }
            Ok(Action::done())
        })
        .await
    }
}

/// Issue 38: a new user's finalizer cleanup ran twice on one delete. The
/// cleanup here deletes an owned child, whose deletion wakes the key again
/// right after the finalizer's release: that reconcile must see the object
/// gone (or at least released), not the cache's copy from before the
/// release, and run no second cleanup.
#[tokio::test]
async fn one_delete_runs_the_finalizer_cleanup_once() {
    use k8s_openapi::api::core::v1::Secret;
    init_tracing();
    let ns = "ctl-cleanup-once";
    let (_, client) = opkit_tests::plane_with_namespace(ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let reconciler = Arc::new(CleanupLog::default());
    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    cache.start().unwrap();
    let running = opkit_tests::spawn_controller(
        Controller::new(CleansUpOnce(Arc::clone(&reconciler))).owns::<Secret>(),
        &cache,
    );

    let names: Vec<String> = (0..5).map(|i| format!("once-{i}")).collect();
    for name in &names {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    for name in &names {
        eventually("the child created", WAIT, || async {
            secrets
                .get_opt(&format!("{name}-child"))
                .await
                .unwrap()
                .map(|_| ())
        })
        .await;
    }
    for name in &names {
        cms.delete(name, &Default::default()).await.unwrap();
    }
    for name in &names {
        eventually("the ConfigMap gone", WAIT, || async {
            cms.get_opt(name).await.unwrap().is_none().then_some(())
        })
        .await;
        // The child's deletion woke the key once more after the cleanup:
        // wait for that reconcile (it sees no object, or one no longer
        // being deleted with the finalizer).
        eventually("the reconcile after the release", WAIT, || async {
            let seen = reconciler.reconciles.lock().unwrap().clone();
            let mine: Vec<_> = seen.iter().filter(|(n, _)| n == name).collect();
            let first_deleting = mine.iter().position(|(_, deleting)| *deleting)?;
            (mine.len() > first_deleting + 1).then_some(())
        })
        .await;
    }
    let cleanups = reconciler.cleanups.lock().unwrap().clone();
    for name in &names {
        assert_eq!(cleanups.get(name), Some(&1), "cleanups: {cleanups:?}");
    }
    running.stop().await;
}
