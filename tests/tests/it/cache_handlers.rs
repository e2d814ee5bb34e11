//! Issue 4, tests 4 and 5: a late handler gets the existing objects; a slow
//! handler does not delay another; an undeserializable custom resource is
//! skipped while the others keep flowing; an object that stops deserializing
//! leaves the cache (issue 11: no stale copy); controllers asking for the same
//! scope share one watch; scoped, dynamic and metadata-only informers.
//! Issue 22: a handler registration belongs to its informer; a stopped
//! informer refuses handlers and leaves no task; the watch-error hook and
//! `last_error` through a 403 and its recovery.

use super::cache_support;

use std::{
    collections::BTreeSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use cache_support::{Kind, Traffic, create_namespace, eventually, init_tracing};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceValidation, JSONSchemaProps,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::{CustomResource, CustomResourceExt};
use opkit::cache::{
    BackoffConfig, CacheError, EventHandler, InformerEvent, ReflectorConfig, ReflectorError, Scope,
    SharedCache, handler_fn,
};
use opkit_envtest::ControlPlane;
use opkit_tests::plane_with_namespace;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        data: Some([("k".to_string(), "v".to_string())].into()),
        ..Default::default()
    }
}

fn names(log: &Mutex<Vec<String>>) -> BTreeSet<String> {
    log.lock().unwrap().iter().cloned().collect()
}

fn add_recorder() -> (Arc<Mutex<Vec<String>>>, impl EventHandler<ConfigMap>) {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l2 = Arc::clone(&log);
    let h = handler_fn(move |e: InformerEvent<ConfigMap>| {
        if let InformerEvent::Add { obj, .. } = e {
            l2.lock()
                .unwrap()
                .push(obj.metadata.name.clone().unwrap_or_default());
        }
    });
    (log, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_handler_gets_existing_objects_and_slow_handler_delays_nobody() {
    let ns = "cache-handlers";
    let (cp, admin) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for i in 0..30 {
        api.create(&PostParams::default(), &cm(&format!("pre-{i:02}"), &[]))
            .await
            .unwrap();
    }
    let cache = SharedCache::new(cp.client().unwrap());
    let informer = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();

    // A handler registered after sync is replayed the existing objects as
    // initial-list adds, and reports synced once it has handled them.
    let initial = Arc::new(AtomicUsize::new(0));
    let i2 = Arc::clone(&initial);
    let late = informer
        .add_event_handler(handler_fn(move |e: InformerEvent<ConfigMap>| {
            if let InformerEvent::Add {
                is_in_initial_list: true,
                ..
            } = e
            {
                i2.fetch_add(1, Ordering::SeqCst);
            }
        }))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), late.wait_synced())
        .await
        .unwrap();
    assert!(late.has_synced());
    assert_eq!(initial.load(Ordering::SeqCst), 30);

    // A handler stuck on its first event does not delay another handler.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    struct Stuck(Arc<tokio::sync::Semaphore>, Arc<AtomicUsize>);
    impl EventHandler<ConfigMap> for Stuck {
        async fn on_add(&mut self, _obj: Arc<ConfigMap>, is_in_initial_list: bool) {
            if !is_in_initial_list {
                let _permit = self.0.acquire().await;
                self.1.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let stuck_done = Arc::new(AtomicUsize::new(0));
    let stuck = informer
        .add_event_handler(Stuck(Arc::clone(&gate), Arc::clone(&stuck_done)))
        .unwrap();
    let (fast_log, fast) = add_recorder();
    informer.add_event_handler(fast).unwrap();
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("new-{i:02}"), &[]))
            .await
            .unwrap();
    }
    eventually(
        "the fast handler to see 20 new objects",
        Duration::from_secs(20),
        || async {
            (names(&fast_log)
                .iter()
                .filter(|n| n.starts_with("new-"))
                .count()
                == 20)
                .then_some(())
        },
    )
    .await;
    assert_eq!(stuck_done.load(Ordering::SeqCst), 0);
    assert!(stuck.backlog() >= 20, "backlog {}", stuck.backlog());
    // the store is not held up either
    assert_eq!(informer.store().len(), 50);
    gate.add_permits(100);
    eventually(
        "the stuck handler to drain",
        Duration::from_secs(20),
        || async { (stuck_done.load(Ordering::SeqCst) == 20).then_some(()) },
    )
    .await;

    // Removed handlers get nothing more.
    assert!(informer.remove_event_handler(&stuck));
    api.create(&PostParams::default(), &cm("after-removal", &[]))
        .await
        .unwrap();
    eventually(
        "the fast handler to see after-removal",
        Duration::from_secs(20),
        || async { names(&fast_log).contains("after-removal").then_some(()) },
    )
    .await;
    assert_eq!(stuck_done.load(Ordering::SeqCst), 20);
    cache.stop();
}

/// A custom resource whose Rust type is stricter than its CRD schema.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "cachetest.opkit.dev",
    version = "v1",
    kind = "Gadget",
    namespaced
)]
struct GadgetSpec {
    size: i32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeserializable_custom_resource_is_skipped_and_others_flow() {
    let ns = "cache-bad-cr";
    let (cp, admin) = plane_with_namespace(ns).await;
    // The CRD accepts anything under spec (schema drift / a bad CR).
    let mut crd = Gadget::crd();
    crd.spec.versions[0].schema = Some(CustomResourceValidation {
        open_api_v3_schema: Some(JSONSchemaProps {
            type_: Some("object".into()),
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..Default::default()
        }),
    });
    cp.install_crds(&[crd]).await.unwrap();
    let raw = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        ns,
        &ApiResource::erase::<Gadget>(&()),
    );
    let gadget = |name: &str, size: serde_json::Value| {
        serde_json::from_value::<DynamicObject>(serde_json::json!({
            "apiVersion": "cachetest.opkit.dev/v1",
            "kind": "Gadget",
            "metadata": {"name": name},
            "spec": {"size": size},
        }))
        .unwrap()
    };
    raw.create(&PostParams::default(), &gadget("good-1", 1.into()))
        .await
        .unwrap();
    raw.create(&PostParams::default(), &gadget("bad", "huge".into()))
        .await
        .unwrap();
    raw.create(&PostParams::default(), &gadget("good-2", 2.into()))
        .await
        .unwrap();

    let cache = SharedCache::builder(cp.client().unwrap())
        .namespace(ns)
        .build();
    let informer = cache.informer::<Gadget>().unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    let stored = |inf: &opkit::cache::SharedIndexInformer<Gadget>| -> BTreeSet<String> {
        inf.store()
            .list()
            .iter()
            .map(|g| g.metadata.name.clone().unwrap())
            .collect()
    };
    assert_eq!(
        stored(&informer),
        BTreeSet::from(["good-1".into(), "good-2".into()])
    );
    assert_eq!(informer.stats().skipped_objects, 1);

    // The watch keeps flowing around the bad object.
    let patch = serde_json::json!({"spec": {"size": "still huge", "x": 1}});
    raw.patch("bad", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    raw.create(&PostParams::default(), &gadget("good-3", 3.into()))
        .await
        .unwrap();
    eventually("good-3 in the cache", Duration::from_secs(20), || async {
        stored(&informer).contains("good-3").then_some(())
    })
    .await;
    assert_eq!(informer.stats().skipped_objects, 2);
    assert_eq!(
        informer.stats().relists,
        1,
        "no relist because of a bad object"
    );
    assert!(
        cache
            .get::<Gadget>(Some(ns), "good-3")
            .await
            .unwrap()
            .is_some()
    );
    // issue 22: not deleted, not readable as a Gadget: a typed error
    assert!(matches!(
        cache.get::<Gadget>(Some(ns), "bad").await,
        Err(opkit::cache::CacheError::Undecodable(u)) if u.metadata().name.as_deref() == Some("bad")
    ));

    // A dynamic informer of the same kind sees every object, the bad one too.
    let ar = ApiResource::erase::<Gadget>(&());
    let dynamic = cache
        .informer_for(Scope::<DynamicObject>::with_dyntype(ar).namespace(ns))
        .unwrap();
    tokio::time::timeout(Duration::from_secs(20), dynamic.wait_for_sync())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dynamic.store().len(), 4);
    cache.stop();
}

/// A custom resource whose Rust type (`u8`) is stricter than its CRD schema
/// (any integer).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "cachetest.opkit.dev",
    version = "v1",
    kind = "Dial",
    namespaced
)]
struct DialSpec {
    level: u8,
}

/// Issues 11 and 22: an object updated to a shape the Rust type cannot
/// deserialize must not stay in the cache with its old state, and must not
/// look deleted: its metadata replaces it (no Delete is heard), an Add comes
/// when it decodes again; deleting it while undecodable leaves no ghost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_that_stops_deserializing_is_replaced_by_its_metadata() {
    let ns = "cache-undecodable";
    let (cp, admin) = plane_with_namespace(ns).await;
    let mut crd = Dial::crd();
    let props = |ty: &str| JSONSchemaProps {
        type_: Some(ty.into()),
        ..Default::default()
    };
    crd.spec.versions[0].schema = Some(CustomResourceValidation {
        open_api_v3_schema: Some(JSONSchemaProps {
            properties: Some(
                [(
                    "spec".to_string(),
                    JSONSchemaProps {
                        properties: Some([("level".to_string(), props("integer"))].into()),
                        required: Some(vec!["level".into()]),
                        ..props("object")
                    },
                )]
                .into(),
            ),
            ..props("object")
        }),
    });
    cp.install_crds(&[crd]).await.unwrap();
    let api: Api<Dial> = Api::namespaced(admin.clone(), ns);
    // writes of undecodable shapes go through an untyped API (the typed one
    // could not read the answer)
    let raw =
        Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &ApiResource::erase::<Dial>(&()));
    let set_level = |name: &'static str, level: i64| {
        let api = raw.clone();
        async move {
            let patch = serde_json::json!({"spec": {"level": level}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap();
        }
    };
    for name in ["one", "two"] {
        api.create(
            &PostParams::default(),
            &Dial::new(name, DialSpec { level: 1 }),
        )
        .await
        .unwrap();
    }

    let cache = SharedCache::new(cp.client().unwrap());
    let informer = cache
        .informer_for(Scope::<Dial>::all().namespace(ns))
        .unwrap();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let l2 = Arc::clone(&log);
    informer
        .add_event_handler(handler_fn(move |e: InformerEvent<Dial>| {
            let name = |d: &Dial| d.metadata.name.clone().unwrap_or_default();
            let line = match e {
                InformerEvent::Add { obj, .. } => format!("add {} {}", name(&obj), obj.spec.level),
                InformerEvent::Update { new, .. } => {
                    format!("update {} {}", name(&new), new.spec.level)
                }
                InformerEvent::Delete { obj } => format!(
                    "delete {} {}{}",
                    name(obj.object()),
                    obj.object().spec.level,
                    if obj.is_tombstone() { " tombstone" } else { "" }
                ),
            };
            l2.lock().unwrap().push(line);
        }))
        .unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    let cached = |name: &str| informer.store().get(Some(ns), name);
    let logged = |line: &str| log.lock().unwrap().iter().any(|l| l == line);
    assert_eq!(cached("one").unwrap().spec.level, 1);

    // Valid in the schema, not in a u8: the stale copy goes, its metadata
    // stays, no Delete is heard.
    set_level("one", 300).await;
    let undecodable = |name: &str| informer.store().undecodable(Some(ns), name);
    eventually(
        "one to be replaced by its metadata",
        Duration::from_secs(20),
        || {
            std::future::ready(
                (cached("one").is_none() && undecodable("one").is_some()).then_some(()),
            )
        },
    )
    .await;
    assert!(
        !log.lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("delete one"))
    );
    assert_eq!(informer.store().len(), 1, "only two is listed");
    assert_eq!(informer.stats().skipped_objects, 1);

    // Decodable again: an Add.
    set_level("one", 7).await;
    eventually("one back with an Add", Duration::from_secs(20), || async {
        (cached("one").is_some_and(|d| d.spec.level == 7) && logged("add one 7")).then_some(())
    })
    .await;

    // Deleted while undecodable: no ghost, and no second Delete.
    set_level("two", 1000).await;
    eventually(
        "two to be replaced by its metadata",
        Duration::from_secs(20),
        || {
            std::future::ready(
                (cached("two").is_none() && undecodable("two").is_some()).then_some(()),
            )
        },
    )
    .await;
    raw.delete("two", &Default::default()).await.unwrap();
    // a fence: once this object is cached, the delete before it was handled
    api.create(
        &PostParams::default(),
        &Dial::new("fence", DialSpec { level: 2 }),
    )
    .await
    .unwrap();
    eventually(
        "the fence in the cache",
        Duration::from_secs(20),
        || async { cached("fence").is_some().then_some(()) },
    )
    .await;
    assert!(cached("two").is_none());
    assert!(undecodable("two").is_none(), "deleted: no record left");
    let names: BTreeSet<String> = informer
        .store()
        .list()
        .iter()
        .map(|d| d.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, BTreeSet::from(["one".into(), "fence".into()]));
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("delete two"))
            .count(),
        0,
        "{:?}",
        log.lock().unwrap()
    );
    // three undecodable events: one's update, two's update and its delete
    assert_eq!(informer.stats().skipped_objects, 3);
    assert_eq!(informer.stats().relists, 1, "no relist needed");
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_scope_shares_one_watch_and_scopes_filter() {
    let ns = "cache-shared";
    let (cp, admin) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for i in 0..10 {
        let labels: &[(&str, &str)] = if i % 2 == 0 { &[("team", "a")] } else { &[] };
        api.create(&PostParams::default(), &cm(&format!("cm-{i}"), labels))
            .await
            .unwrap();
    }
    let traffic = Traffic::default();
    let cache = SharedCache::new(traffic.client(cp.config()));

    // Two controllers ask for the same (GVK, namespace, selectors).
    let first = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    let (log_a, a) = add_recorder();
    first.add_event_handler(a).unwrap();
    let second = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    let (log_b, b) = add_recorder();
    second.add_event_handler(b).unwrap();
    assert_eq!(first.handler_count(), 2, "both handlers on one informer");
    assert_eq!(second.handler_count(), 2, "the same informer");

    // Other scopes: a label selector, a field selector, metadata only.
    let labelled = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns).labels("team=a"))
        .unwrap();
    let one = cache
        .informer_for(
            Scope::<ConfigMap>::all()
                .namespace(ns)
                .fields("metadata.name=cm-3"),
        )
        .unwrap();
    let meta = cache
        .informer_for(Scope::<PartialObjectMeta<ConfigMap>>::all().namespace(ns))
        .unwrap();
    // one informer per scope: four informers, none holding the first's handlers
    let scopes = BTreeSet::from([
        first.describe(),
        labelled.describe(),
        one.describe(),
        meta.describe(),
    ]);
    assert_eq!(scopes.len(), 4, "{scopes:?}");
    assert_eq!(
        (
            labelled.handler_count(),
            one.handler_count(),
            meta.handler_count()
        ),
        (0, 0, 0)
    );
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();

    eventually(
        "both handlers see 10 objects",
        Duration::from_secs(20),
        || async { (names(&log_a).len() == 10 && names(&log_b).len() == 10).then_some(()) },
    )
    .await;
    assert_eq!(labelled.store().len(), 5);
    assert_eq!(one.store().len(), 1);
    assert!(one.store().get(Some(ns), "cm-3").is_some());
    assert_eq!(meta.store().len(), 10);
    let m = meta.store().get(Some(ns), "cm-0").unwrap();
    assert!(m.metadata.uid.is_some());

    // One watch for the shared scope: the requests on the plain path (no
    // selector) are exactly one initial list/watch-list, no second watch.
    let path = format!("/api/v1/namespaces/{ns}/configmaps?");
    let plain = |k: Kind| {
        traffic
            .log()
            .iter()
            .filter(|(kind, p)| {
                *kind == k
                    && p.starts_with(&path)
                    && !p.contains("labelSelector")
                    && !p.contains("fieldSelector")
            })
            .count()
    };
    // the metadata-only informer watches the same path: tell it apart by its
    // own counters instead
    let meta_stats = meta.stats();
    let shared_stats = first.stats();
    assert_eq!(
        shared_stats.watch_list_requests + shared_stats.list_requests,
        1
    );
    assert_eq!(shared_stats.watch_requests, 0);
    assert_eq!(
        plain(Kind::WatchList) + plain(Kind::List) + plain(Kind::Watch),
        (shared_stats.watch_list_requests
            + shared_stats.list_requests
            + shared_stats.watch_requests
            + meta_stats.watch_list_requests
            + meta_stats.list_requests
            + meta_stats.watch_requests) as usize,
        "{:?}",
        traffic.log()
    );
    assert_eq!(
        traffic.count(Kind::WatchList, "labelSelector")
            + traffic.count(Kind::List, "labelSelector"),
        1
    );

    // New objects reach both handlers through the one watch.
    api.create(&PostParams::default(), &cm("late", &[("team", "a")]))
        .await
        .unwrap();
    eventually(
        "both handlers see the new object",
        Duration::from_secs(20),
        || async {
            (names(&log_a).contains("late") && names(&log_b).contains("late")).then_some(())
        },
    )
    .await;
    eventually(
        "the labelled informer sees it too",
        Duration::from_secs(20),
        || async { (labelled.store().len() == 6).then_some(()) },
    )
    .await;
    assert_eq!(
        first.stats().watch_list_requests + first.stats().list_requests,
        1
    );
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_handler_resync_and_managed_fields_transform() {
    let ns = "cache-resync";
    let (cp, admin) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i}"), &[]))
            .await
            .unwrap();
    }
    let cache = SharedCache::new(cp.client().unwrap());
    let informer = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    let counter = |resync_only: bool| {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = Arc::clone(&n);
        let h = handler_fn(move |e: InformerEvent<ConfigMap>| {
            if let InformerEvent::Update {
                old,
                new,
                is_resync,
            } = e
                && is_resync == resync_only
            {
                assert!(
                    !is_resync || old.metadata.resource_version == new.metadata.resource_version
                );
                n2.fetch_add(1, Ordering::SeqCst);
            }
        });
        (n, h)
    };
    let (resyncs, every_second) = counter(true);
    informer
        .add_event_handler_with_resync(every_second, Some(Duration::from_secs(1)))
        .unwrap();
    let (never, no_resync) = counter(true);
    informer.add_event_handler(no_resync).unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    eventually(
        "two resync rounds for the 1 s handler",
        Duration::from_secs(15),
        || async { (resyncs.load(Ordering::SeqCst) >= 6).then_some(()) },
    )
    .await;
    assert_eq!(
        never.load(Ordering::SeqCst),
        0,
        "a handler without resync got resyncs"
    );

    // managedFields are stripped by default, kept on request
    let stored = informer.store().get(Some(ns), "cm-0").unwrap();
    assert!(stored.metadata.managed_fields.is_none());
    let keep = SharedCache::builder(cp.client().unwrap())
        .keep_managed_fields()
        .build();
    let kept = keep
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    keep.start().unwrap();
    keep.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    let stored = kept.store().get(Some(ns), "cm-0").unwrap();
    assert!(stored.metadata.managed_fields.is_some());
    keep.stop();
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_sync_names_the_kind_that_lacks_rbac() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    // an identity with no RBAC binding at all
    let cache = SharedCache::new(cp.client_as("cache-nobody", &[]).unwrap());
    cache
        .informer::<k8s_openapi::api::core::v1::Secret>()
        .unwrap();
    cache.start().unwrap();
    let err = cache
        .wait_for_sync(Duration::from_secs(3))
        .await
        .unwrap_err();
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(msg.contains("v1/Secret (all namespaces)"), "{msg}");
    assert!(msg.contains("403"), "{msg}");
    assert!(msg.contains("RBAC"), "{msg}");
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_is_removed_only_through_its_own_informer() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client().unwrap();
    let (ns_a, ns_b) = ("cache-owner-a", "cache-owner-b");
    create_namespace(&admin, ns_a).await;
    create_namespace(&admin, ns_b).await;
    let cache = SharedCache::new(cp.client().unwrap());
    let a = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns_a))
        .unwrap();
    let b = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns_b))
        .unwrap();
    let (log_a, ha) = add_recorder();
    let (log_b, hb) = add_recorder();
    let reg_a = a.add_event_handler(ha).unwrap();
    let reg_b = b.add_event_handler(hb).unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();

    // A's handle given to B, and B's to A: no-ops (client-go's RemoveEventHandler)
    assert!(!b.remove_event_handler(&reg_a));
    assert!(!a.remove_event_handler(&reg_b));
    assert!(!reg_a.is_removed() && !reg_b.is_removed());
    assert_eq!((a.handler_count(), b.handler_count()), (1, 1));

    // both handlers still get their informer's events
    for ns in [ns_a, ns_b] {
        Api::<ConfigMap>::namespaced(admin.clone(), ns)
            .create(&PostParams::default(), &cm(&format!("in-{ns}"), &[]))
            .await
            .unwrap();
    }
    eventually(
        "each handler to see its namespace's object",
        Duration::from_secs(20),
        || {
            std::future::ready(
                (names(&log_a).contains("in-cache-owner-a")
                    && names(&log_b).contains("in-cache-owner-b"))
                .then_some(()),
            )
        },
    )
    .await;
    assert!(!names(&log_a).contains("in-cache-owner-b"));
    assert!(!names(&log_b).contains("in-cache-owner-a"));

    // each informer removes its own
    assert!(a.remove_event_handler(&reg_a));
    assert!(reg_a.is_removed() && !reg_b.is_removed());
    assert_eq!((a.handler_count(), b.handler_count()), (0, 1));
    assert!(b.remove_event_handler(&reg_b));
    assert_eq!(b.handler_count(), 0);
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_informer_refuses_handlers_and_leaves_no_task() {
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client().unwrap();
    let ns = "cache-stopped";
    create_namespace(&admin, ns).await;
    Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &cm("existing", &[]))
        .await
        .unwrap();
    let cache = SharedCache::new(cp.client().unwrap());
    let informer = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    // a handler stuck in its first call does not keep its task alive past stop
    struct Stuck;
    impl EventHandler<ConfigMap> for Stuck {
        async fn on_add(&mut self, _obj: Arc<ConfigMap>, _initial: bool) {
            std::future::pending::<()>().await;
        }
    }
    let stuck = informer.add_event_handler(Stuck).unwrap();
    let (_log, h) = add_recorder();
    informer.add_event_handler(h).unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    // reflector, delta processing, resync timer, two listeners
    assert_eq!(informer.live_tasks(), 5);
    eventually(
        "the stuck handler to hold its first event",
        Duration::from_secs(20),
        || std::future::ready((stuck.backlog() == 1).then_some(())),
    )
    .await;

    informer.stop();
    let (late_log, late) = add_recorder();
    let err = informer.add_event_handler(late).unwrap_err();
    assert!(matches!(&err, CacheError::InformerStopped(_)), "{err}");
    assert!(err.to_string().contains("stopped"), "{err}");
    tokio::time::timeout(Duration::from_secs(20), informer.wait_stopped())
        .await
        .expect("every task of the informer ends after stop");
    assert_eq!(informer.live_tasks(), 0);
    assert_eq!(informer.handler_count(), 0);
    assert!(stuck.is_removed());
    assert!(
        late_log.lock().unwrap().is_empty(),
        "nothing replayed to a refused handler"
    );
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_error_hook_sees_a_403_and_last_error_clears_once_access_is_granted() {
    use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
    init_tracing();
    let cp = ControlPlane::shared().await.unwrap();
    let admin = cp.client().unwrap();
    let ns = "cache-hook";
    let user = "cache-hook-user";
    create_namespace(&admin, ns).await;
    Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &cm("visible", &[]))
        .await
        .unwrap();

    let seen: Arc<Mutex<Vec<(String, bool, String)>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let cache = SharedCache::builder(cp.client_as(user, &[]).unwrap())
        .reflector_config(ReflectorConfig {
            backoff: BackoffConfig {
                initial: Duration::from_millis(100),
                max: Duration::from_millis(500),
                ..BackoffConfig::default()
            },
            ..ReflectorConfig::default()
        })
        .watch_error_handler(move |informer: &str, error: &ReflectorError| {
            let forbidden = matches!(error, ReflectorError::Api(s) if s.is_forbidden());
            seen2
                .lock()
                .unwrap()
                .push((informer.to_owned(), forbidden, error.to_string()));
        })
        .build();
    let informer = cache
        .informer_for(Scope::<ConfigMap>::all().namespace(ns))
        .unwrap();
    cache.start().unwrap();

    // no RBAC yet: every failed attempt reaches the hook, with the 403
    eventually(
        "the hook to see two failed lists",
        Duration::from_secs(20),
        || std::future::ready((seen.lock().unwrap().len() >= 2).then_some(())),
    )
    .await;
    for (who, forbidden, msg) in seen.lock().unwrap().iter() {
        assert_eq!(who, informer.describe());
        assert!(*forbidden, "{msg}");
        assert!(msg.contains("403"), "{msg}");
    }
    let last = informer
        .stats()
        .last_error
        .expect("a last error while forbidden");
    assert!(last.contains("403"), "{last}");
    assert!(!informer.has_synced());

    // grant list/watch: the informer recovers and last_error is cleared
    let role = Role {
        metadata: ObjectMeta {
            name: Some("read-configmaps".into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..Default::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("read-configmaps".into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "read-configmaps".into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: user.into(),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    cache.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    assert!(informer.store().get(Some(ns), "visible").is_some());
    assert_eq!(
        informer.stats().last_error,
        None,
        "recovered: no last error"
    );
    let failures = seen.lock().unwrap().len();
    // the watch goes on: a new object arrives and nothing new reaches the hook
    Api::<ConfigMap>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &cm("after-grant", &[]))
        .await
        .unwrap();
    let store = informer.store();
    eventually(
        "the cache to show after-grant",
        Duration::from_secs(20),
        || std::future::ready((store.get(Some(ns), "after-grant").is_some()).then_some(())),
    )
    .await;
    assert_eq!(seen.lock().unwrap().len(), failures);
    assert_eq!(informer.stats().last_error, None);
    cache.stop();
}
