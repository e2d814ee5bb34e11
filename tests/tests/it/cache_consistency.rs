//! Issue 4, test 1: an informer runs while 1000 objects are created, updated
//! and deleted concurrently; after quiescence the cache equals a fresh LIST
//! (uid + resourceVersion), and per key the handler saw its events in
//! resourceVersion order with none missing for the final state.

use super::cache_support;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use cache_support::{Traffic, eventually};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::cache::{InformerEvent, SharedCache, handler_fn};
use opkit_tests::plane_with_namespace;

const NS: &str = "cache-consistency";
const N: usize = 1000;

fn rv_of(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .expect("numeric resourceVersion")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Add(u64),
    Update(u64),
    Delete(u64),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_equals_a_fresh_list_after_concurrent_churn() {
    let (cp, admin) = plane_with_namespace(NS).await;

    let traffic = Traffic::default();
    let cache = SharedCache::builder(traffic.client(cp.config()))
        .namespace(NS)
        .build();
    let informer = cache.informer::<ConfigMap>().unwrap();
    let seen: Arc<Mutex<HashMap<String, Vec<Seen>>>> = Arc::default();
    let s2 = Arc::clone(&seen);
    informer
        .add_event_handler(handler_fn(move |e: InformerEvent<ConfigMap>| {
            let (name, ev) = match &e {
                InformerEvent::Add { obj, .. } => {
                    (obj.metadata.name.clone(), Seen::Add(rv_of(obj)))
                }
                InformerEvent::Update { new, .. } => {
                    (new.metadata.name.clone(), Seen::Update(rv_of(new)))
                }
                InformerEvent::Delete { obj } => (
                    obj.object().metadata.name.clone(),
                    Seen::Delete(rv_of(obj.object())),
                ),
            };
            s2.lock()
                .unwrap()
                .entry(name.unwrap_or_default())
                .or_default()
                .push(ev);
        }))
        .unwrap();
    cache.start().unwrap();
    cache.wait_for_sync(Duration::from_secs(60)).await.unwrap();

    // Churn: create, update twice, delete every third; 16 requests in flight.
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), NS);
    futures::stream::iter(0..N)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                let name = format!("cm-{i:04}");
                let cm = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        ..Default::default()
                    },
                    data: Some([("v".to_string(), "0".to_string())].into()),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &cm).await.unwrap();
                for v in 1..=2 {
                    let patch = serde_json::json!({"data": {"v": v.to_string()}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .unwrap();
                }
                if i % 3 == 0 {
                    api.delete(&name, &DeleteParams::default()).await.unwrap();
                }
            }
        })
        .await;

    // Quiescence: the cache converges on a fresh LIST (uid + resourceVersion).
    let listed = api.list(&ListParams::default()).await.unwrap();
    let want: BTreeMap<String, (String, String)> = listed
        .items
        .iter()
        .map(|cm| {
            (
                format!("{NS}/{}", cm.metadata.name.clone().unwrap()),
                (
                    cm.metadata.uid.clone().unwrap(),
                    cm.metadata.resource_version.clone().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(want.len(), N - N.div_ceil(3));
    let snapshot = || -> BTreeMap<String, (String, String)> {
        informer
            .store()
            .list()
            .into_iter()
            .map(|cm| {
                (
                    format!(
                        "{}/{}",
                        cm.metadata.namespace.clone().unwrap_or_default(),
                        cm.metadata.name.clone().unwrap_or_default()
                    ),
                    (
                        cm.metadata.uid.clone().unwrap_or_default(),
                        cm.metadata.resource_version.clone().unwrap_or_default(),
                    ),
                )
            })
            .collect()
    };
    eventually(
        "the cache to equal a fresh LIST",
        Duration::from_secs(60),
        || async { (snapshot() == want).then_some(()) },
    )
    .await;
    // ... and the typed reads of the shared cache agree.
    assert_eq!(
        cache.list::<ConfigMap>(Some(NS)).await.unwrap().len(),
        want.len()
    );
    let any = want
        .keys()
        .next()
        .unwrap()
        .split_once('/')
        .unwrap()
        .1
        .to_string();
    assert!(
        cache
            .get::<ConfigMap>(Some(NS), &any)
            .await
            .unwrap()
            .is_some()
    );

    // Wait until the handler has caught up with the final state of every key.
    let final_rv: HashMap<String, u64> = listed
        .items
        .iter()
        .map(|cm| (cm.metadata.name.clone().unwrap(), rv_of(cm)))
        .collect();
    let caught_up = || {
        let seen = seen.lock().unwrap();
        (0..N).all(|i| {
            let name = format!("cm-{i:04}");
            match (seen.get(&name).and_then(|v| v.last()), final_rv.get(&name)) {
                (Some(Seen::Add(rv) | Seen::Update(rv)), Some(want)) => rv == want,
                (Some(Seen::Delete(_)), None) => true,
                _ => false,
            }
        })
    };
    eventually(
        "the handler to see every final state",
        Duration::from_secs(60),
        || async { caught_up().then_some(()) },
    )
    .await;

    // Per key: resourceVersions strictly increase, the first event is an Add,
    // nothing follows a Delete, and the last event is the final state.
    let seen = seen.lock().unwrap();
    for i in 0..N {
        let name = format!("cm-{i:04}");
        let events = &seen[&name];
        assert!(matches!(events[0], Seen::Add(_)), "{name}: {events:?}");
        let rvs: Vec<u64> = events
            .iter()
            .map(|e| match e {
                Seen::Add(rv) | Seen::Update(rv) | Seen::Delete(rv) => *rv,
            })
            .collect();
        assert!(
            rvs.windows(2).all(|w| w[0] < w[1]),
            "{name}: out of order {events:?}"
        );
        if let Some(pos) = events.iter().position(|e| matches!(e, Seen::Delete(_))) {
            assert_eq!(
                pos,
                events.len() - 1,
                "{name}: events after delete {events:?}"
            );
            assert_eq!(i % 3, 0, "{name}: unexpected delete");
        }
    }
    let stats = informer.stats();
    assert_eq!(stats.relists, 1, "no relist during churn: {stats:?}");
    assert_eq!(stats.skipped_objects, 0);
    assert_eq!(traffic.relists(&format!("/namespaces/{NS}/configmaps")), 1);
    eprintln!("informer stats: {stats:?}");
}
