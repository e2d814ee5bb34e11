//! Typed projections (issue 27) against a real control plane: owned Pods
//! cached as a small view wake their owner, mappers and predicates see the
//! view, reads share the stored projection, and the projection runs once per
//! event however many handlers and reads there are.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec};
use kube::Resource;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::cache::{InformerEvent, Projected, Projection, SharedCache, Store, handler_fn};
use opkit::controller::Controller;
use opkit::predicate::from_fn;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing, spawn_controller};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "cache-projection";

/// A Pod's phase; counts how often a Pod is projected.
struct PodPhase(Option<String>);

static PROJECTED: AtomicUsize = AtomicUsize::new(0);

impl Projection<Pod> for PodPhase {
    fn project(pod: Pod) -> Self {
        PROJECTED.fetch_add(1, Ordering::SeqCst);
        PodPhase(pod.status.and_then(|s| s.phase))
    }
}

type PodView = Projected<Pod, PodPhase>;

/// A reconciled request, with the (Pod, phase) pairs read from the cache.
type Seen = (String, Vec<(String, Option<String>)>);

/// Reconciles ConfigMaps; records each request with the phases of the
/// owned Pods it reads from the cache.
#[derive(Default, Clone)]
struct Parent {
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Reconcile for Parent {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let pods: Vec<Arc<PodView>> = ctx.list::<PodView>(req.namespace.as_deref()).await?;
        let phases = pods
            .iter()
            .map(|p| (p.metadata().name.clone().unwrap_or_default(), p.0.clone()))
            .collect();
        self.seen.lock().unwrap().push((req.name.clone(), phases));
        Ok(Action::done())
    }
}

fn seen(parent: &Parent, name: &str, phase: Option<&str>) -> bool {
    parent.seen.lock().unwrap().iter().any(|(n, pods)| {
        n == name
            && pods
                .iter()
                .any(|(p, ph)| p == "p1" && ph.as_deref() == phase)
    })
}

#[tokio::test]
async fn owned_pods_cached_as_a_projection_wake_their_owner() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, NS).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    let cache = SharedCache::builder(client.clone()).namespace(NS).build();
    // every event of the projected informer, counted by a handler of its own
    let events = Arc::new(AtomicUsize::new(0));
    cache
        .informer::<PodView>()
        .unwrap()
        .add_event_handler(handler_fn({
            let events = Arc::clone(&events);
            move |e: InformerEvent<PodView>| {
                if !matches!(
                    e,
                    InformerEvent::Update {
                        is_resync: true,
                        ..
                    }
                ) {
                    events.fetch_add(1, Ordering::SeqCst);
                }
            }
        }))
        .unwrap();
    let parent = Parent::default();
    let controller = Controller::new(parent.clone())
        .owns_projected::<Pod, PodPhase>()
        // the mapper and the predicate see the projection: a running Pod wakes `running`
        .watches_with::<PodView>(
            |pod: &PodView, _: &Store<ConfigMap>| {
                vec![Request::namespaced(
                    pod.meta().namespace.clone().unwrap_or_default(),
                    "running",
                )]
            },
            from_fn(|e: &opkit::predicate::PredicateEvent<'_, PodView>| {
                e.object().0.as_deref() == Some("Running")
            }),
        );
    let running = spawn_controller(controller, &cache);

    let owner = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("web".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("p1".into()),
            owner_references: Some(vec![owner.controller_owner_ref(&()).unwrap()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("example.com/app:1".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let before = PROJECTED.load(Ordering::SeqCst);
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually(
        "the owner reconciled with its Pod pending",
        WAIT,
        || async { seen(&parent, "web", Some("Pending")).then_some(()) },
    )
    .await;
    pods.patch_status(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    eventually("the owner sees it running", WAIT, || async {
        seen(&parent, "web", Some("Running")).then_some(())
    })
    .await;
    eventually("the mapper saw the running view", WAIT, || async {
        seen(&parent, "running", Some("Running")).then_some(())
    })
    .await;

    // Two events (create, status): projected twice, for three handlers
    // (owns, watches, the counter) and every read in between.
    assert_eq!(events.load(Ordering::SeqCst), 2);
    let store = cache.store::<PodView>().unwrap();
    let a = store.get(Some(NS), "p1").unwrap();
    let b = cache.get::<PodView>(Some(NS), "p1").await.unwrap().unwrap();
    assert!(Arc::ptr_eq(&a, &b), "reads share the stored projection");
    assert_eq!(a.0.as_deref(), Some("Running"));
    assert_eq!(PROJECTED.load(Ordering::SeqCst) - before, 2);
    // the projected informer is not the whole-object one
    assert!(cache.get::<Pod>(Some(NS), "p1").await.is_err());

    running.stop().await;
}

/// `WithManagedFields`: with the cache stripping managedFields (its
/// default), the projection still gets them — for a ConfigMap (read as
/// protobuf) and a Pod (JSON) — keeps them as bytes, and decodes them to
/// what the apiserver serves; the whole-object informer of the same kind
/// stays stripped.
#[tokio::test]
async fn managed_fields_kept_as_bytes_by_a_projection_decode_to_the_servers() {
    use opkit::cache::WithManagedFields;
    const NS: &str = "cache-managed-fields";
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, NS).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let as_manager = |manager: &str| PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    };
    cms.create(
        &as_manager("writer-one"),
        &serde_json::from_value(json!({
            "metadata": {"name": "settings", "labels": {"app": "web"}},
            "data": {"colour": "blue"},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    pods.create(
        &as_manager("writer-one"),
        &serde_json::from_value(json!({
            "metadata": {"name": "p1"},
            "spec": {"containers": [{"name": "app", "image": "example.com/app:1"}]},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    pods.patch_status(
        "p1",
        &PatchParams {
            field_manager: Some("writer-two".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();

    let cache = SharedCache::builder(client.clone()).namespace(NS).build();
    let kept_cms = cache
        .store::<Projected<ConfigMap, WithManagedFields<ConfigMap>>>()
        .unwrap();
    let kept_pods = cache
        .store::<Projected<Pod, WithManagedFields<Pod>>>()
        .unwrap();
    let whole_cms = cache.store::<ConfigMap>().unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(WAIT).await.unwrap();

    let served = cms.get("settings").await.unwrap();
    let cm = kept_cms.get(Some(NS), "settings").unwrap();
    assert_eq!(cm.data, served.data, "the object by Deref");
    assert!(cm.metadata.managed_fields.is_none());
    assert_eq!(
        Some(cm.managed_fields().unwrap()),
        served.metadata.managed_fields,
        "protobuf path"
    );
    let served = pods.get("p1").await.unwrap();
    let pod = kept_pods.get(Some(NS), "p1").unwrap();
    let entries = pod.managed_fields().unwrap();
    assert_eq!(
        Some(entries.clone()),
        served.metadata.managed_fields,
        "JSON path"
    );
    let managers: Vec<_> = entries
        .iter()
        .filter_map(|e| e.manager.as_deref())
        .collect();
    assert_eq!(managers, ["writer-one", "writer-two"]);
    assert!(
        whole_cms
            .get(Some(NS), "settings")
            .unwrap()
            .metadata
            .managed_fields
            .is_none(),
        "whole objects stay stripped"
    );
    cache.stop();
}
