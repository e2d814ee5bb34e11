//! Issue 4, tests 2 and 3: the reflector relists after 410 Gone and emits
//! tombstones for objects deleted during the gap; a broken watch (connection
//! cut, kube-apiserver restarted) is re-opened and converges, without a
//! relist while the resourceVersion is still valid.

use super::cache_support;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use cache_support::{Kind, Traffic, create_namespace, eventually, init_tracing};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use opkit::cache::{InformerEvent, SharedCache, SharedIndexInformer, handler_fn};
use opkit_envtest::ControlPlane;
use opkit_tests::plane_with_namespace;

fn cm(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("k".to_string(), "v".to_string())].into()),
        ..Default::default()
    }
}

/// A cache over `ns` and its ConfigMap informer (not started yet).
fn config_maps(client: kube::Client, ns: &str) -> (SharedCache, SharedIndexInformer<ConfigMap>) {
    let cache = SharedCache::builder(client).namespace(ns).build();
    let informer = cache.informer::<ConfigMap>().unwrap();
    (cache, informer)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Add(String),
    Update(String),
    Delete { name: String, tombstone: bool },
}

fn recorder() -> (
    Arc<Mutex<Vec<Seen>>>,
    impl opkit::cache::EventHandler<ConfigMap>,
) {
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let l2 = Arc::clone(&log);
    let h = handler_fn(move |e: InformerEvent<ConfigMap>| {
        let name = |c: &ConfigMap| c.metadata.name.clone().unwrap_or_default();
        let s = match e {
            InformerEvent::Add { obj, .. } => Seen::Add(name(&obj)),
            InformerEvent::Update { new, .. } => Seen::Update(name(&new)),
            InformerEvent::Delete { obj } => Seen::Delete {
                name: name(obj.object()),
                tombstone: obj.is_tombstone(),
            },
        };
        l2.lock().unwrap().push(s);
    });
    (log, h)
}

async fn cache_matches_list(informer: &SharedIndexInformer<ConfigMap>, api: &Api<ConfigMap>) {
    let last = Mutex::new((BTreeMap::new(), BTreeMap::new()));
    let _report = ReportOnPanic(|| {
        let (want, got) = &*last.lock().unwrap();
        eprintln!("the last LIST: {want:?}\nthe cache then: {got:?}");
    });
    eventually(
        "the cache to match a LIST",
        Duration::from_secs(60),
        || async {
            let want: BTreeMap<String, String> = api
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|c| {
                    (
                        c.metadata.name.unwrap(),
                        c.metadata.resource_version.unwrap(),
                    )
                })
                .collect();
            let got: BTreeMap<String, String> = informer
                .store()
                .list()
                .iter()
                .map(|c| {
                    (
                        c.metadata.name.clone().unwrap(),
                        c.metadata.resource_version.clone().unwrap(),
                    )
                })
                .collect();
            let matches = want == got;
            *last.lock().unwrap() = (want, got);
            matches.then_some(())
        },
    )
    .await;
}

/// Runs its closure when dropped during a panic (a failed wait's details).
struct ReportOnPanic<F: Fn()>(F);

impl<F: Fn()> Drop for ReportOnPanic<F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            (self.0)();
        }
    }
}

/// Has the informer's open watch deliver an event: creates `name` and
/// waits until the informer holds it. A watch that ends without any event
/// within a second of opening is a "very short watch", which the reflector
/// answers with a relist; one that delivered an event never is.
async fn watch_delivers_an_event(
    informer: &SharedIndexInformer<ConfigMap>,
    api: &Api<ConfigMap>,
    ns: &str,
    name: &str,
) {
    api.create(&PostParams::default(), &cm(name)).await.unwrap();
    eventually(
        &format!("the watch to deliver {name}"),
        Duration::from_secs(30),
        || async { informer.store().get(Some(ns), name).is_some().then_some(()) },
    )
    .await;
}

/// True when a watch from `rv` is answered with 410 Gone / Expired.
async fn rv_expired(api: &Api<ConfigMap>, rv: &str) -> bool {
    let Ok(stream) = api.watch(&WatchParams::default().timeout(2), rv).await else {
        return true;
    };
    let mut stream = stream.boxed();
    match tokio::time::timeout(Duration::from_secs(3), stream.next()).await {
        Ok(Some(Ok(WatchEvent::Error(e)))) => e.code == 410,
        Ok(Some(Err(kube::Error::Api(e)))) => e.code == 410,
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_after_410_emits_tombstones_for_deletions_in_the_gap() {
    init_tracing();
    // Watches served by etcd directly, compacted every second: an old
    // resourceVersion expires within seconds.
    let cp = ControlPlane::builder()
        .etcd_compaction_interval(Duration::from_secs(1))
        .apiserver_arg("--watch-cache=false")
        .start()
        .await
        .unwrap();
    let admin = cp.client().unwrap();
    let ns = "cache-relist";
    create_namespace(&admin, ns).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for i in 0..20 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:02}")))
            .await
            .unwrap();
    }

    let traffic = Traffic::default();
    let (cache, informer) = config_maps(traffic.client(cp.config()), ns);
    let (log, h) = recorder();
    informer.add_event_handler(h).unwrap();
    cache.start().unwrap();
    informer.wait_for_sync().await.unwrap();
    eventually("20 initial adds", Duration::from_secs(30), || async {
        (log.lock().unwrap().len() == 20).then_some(())
    })
    .await;

    // Cut the watch and keep it down.
    let watches_before = traffic.count(Kind::Watch, ns) + traffic.count(Kind::WatchList, ns);
    traffic.block_watches(true);
    traffic.kill_watches();
    eventually(
        "the reflector to try re-watching",
        Duration::from_secs(30),
        || async {
            (traffic.count(Kind::Watch, ns) + traffic.count(Kind::WatchList, ns) > watches_before)
                .then_some(())
        },
    )
    .await;
    let rv_before = informer.stats().last_sync_resource_version.unwrap();
    let relists_before = informer.stats().relists;

    // Changes during the gap: 5 deletions, 3 creations, 1 update.
    for i in 0..5 {
        api.delete(&format!("cm-{i:02}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("new-{i}")))
            .await
            .unwrap();
    }
    let patch = serde_json::json!({"data": {"k": "changed"}});
    api.patch("cm-10", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    // Wait until the old resourceVersion is compacted away.
    eventually(
        &format!("resourceVersion {rv_before} to expire"),
        Duration::from_secs(120),
        || async { rv_expired(&api, &rv_before).await.then_some(()) },
    )
    .await;

    traffic.block_watches(false);
    cache_matches_list(&informer, &api).await;
    eventually(
        "the gap's notifications",
        Duration::from_secs(30),
        || async {
            let log = log.lock().unwrap();
            (log.iter()
                .filter(|s| matches!(s, Seen::Delete { .. }))
                .count()
                == 5
                && log
                    .iter()
                    .filter(|s| matches!(s, Seen::Add(n) if n.starts_with("new-")))
                    .count()
                    == 3)
                .then_some(())
        },
    )
    .await;

    let log = log.lock().unwrap().clone();
    for i in 0..5 {
        let name = format!("cm-{i:02}");
        assert!(
            log.contains(&Seen::Delete {
                name: name.clone(),
                tombstone: true
            }),
            "no tombstone for {name}: {log:?}"
        );
    }
    assert!(log.contains(&Seen::Update("cm-10".into())));
    let stats = informer.stats();
    assert_eq!(
        stats.relists,
        relists_before + 1,
        "exactly one relist after the 410: {stats:?}"
    );
    eprintln!("relist test: {stats:?}; requests: {:?}", traffic.log());
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_watch_is_reopened_without_relist() {
    let ns = "cache-rewatch";
    let (cp, admin) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i}")))
            .await
            .unwrap();
    }
    let traffic = Traffic::default();
    let (cache, informer) = config_maps(traffic.client(cp.config()), ns);
    cache.start().unwrap();
    informer.wait_for_sync().await.unwrap();
    watch_delivers_an_event(&informer, &api, ns, "before-the-cuts").await;

    for round in 0..3 {
        traffic.kill_watches();
        api.create(&PostParams::default(), &cm(&format!("after-cut-{round}")))
            .await
            .unwrap();
        // The cache matches only once the re-opened watch delivered
        // `after-cut-{round}` (a cut watch delivers nothing more, and a
        // relist fails the test): the next cut ends a watch with an event.
        cache_matches_list(&informer, &api).await;
    }
    assert_eq!(traffic.relists(ns), 1, "no relist: {:?}", traffic.log());
    assert!(traffic.count(Kind::Watch, ns) >= 3, "{:?}", traffic.log());
    assert_eq!(informer.stats().relists, 1);
    cache.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restart_reconnects_and_converges() {
    // With the watch cache a restarted apiserver usually no longer serves the
    // old resourceVersion (its cache starts at the current revision): 410, one relist.
    restart_case(ControlPlane::builder(), "cache-restart", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_restart_with_valid_resource_version_does_not_relist() {
    // Watches served by etcd: the resourceVersion stays valid across the
    // restart, so the watch is re-opened from it without a relist.
    restart_case(
        ControlPlane::builder().apiserver_arg("--watch-cache=false"),
        "cache-restart-etcd",
        Some(true),
    )
    .await;
}

async fn restart_case(
    builder: opkit_envtest::ControlPlaneBuilder,
    ns: &str,
    expect_valid: Option<bool>,
) {
    init_tracing();
    let cp = builder.start().await.unwrap();
    let admin = cp.client().unwrap();
    create_namespace(&admin, ns).await;
    let api: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i}")))
            .await
            .unwrap();
    }
    let traffic = Traffic::default();
    let (cache, informer) = config_maps(traffic.client(cp.config()), ns);
    cache.start().unwrap();
    informer.wait_for_sync().await.unwrap();
    watch_delivers_an_event(&informer, &api, ns, "before-restart").await;
    let rv_before = informer.stats().last_sync_resource_version.unwrap();
    let relists_before = traffic.relists(ns);

    cp.restart_apiserver().await.unwrap();
    let admin = cp.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(admin, ns);
    let still_valid = !rv_expired(&api, &rv_before).await;
    if let Some(expected) = expect_valid {
        assert_eq!(
            still_valid, expected,
            "validity of {rv_before} after restart"
        );
    }
    api.create(&PostParams::default(), &cm("after-restart"))
        .await
        .unwrap();
    api.delete("cm-0", &DeleteParams::default()).await.unwrap();
    cache_matches_list(&informer, &api).await;

    let relists = traffic.relists(ns) - relists_before;
    eprintln!(
        "after restart: resourceVersion {rv_before} still valid: {still_valid}; relists: {relists}; requests: {:?}",
        traffic.log()
    );
    if still_valid {
        assert_eq!(
            relists, 0,
            "relisted although the resourceVersion was valid"
        );
    } else {
        assert_eq!(relists, 1, "one relist after the resourceVersion expired");
    }
    cache.stop();
}
