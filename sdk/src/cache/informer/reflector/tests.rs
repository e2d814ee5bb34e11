//! The reflector's protocol against a scripted server, for what a real
//! API server cannot be made to do on demand (an expired continue token
//! mid-list, a server without streaming lists).
use super::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::client::Body;
use std::sync::Mutex as StdMutex;

#[derive(Default)]
struct Recorder {
    calls: StdMutex<Vec<String>>,
}

impl ReflectorStore<ConfigMap> for Recorder {
    fn add(&self, obj: Arc<ConfigMap>) {
        self.push(format!("add {}", name(&obj)));
    }
    fn update(&self, obj: Arc<ConfigMap>) {
        self.push(format!("update {}", name(&obj)));
    }
    fn delete(&self, obj: Arc<ConfigMap>) {
        self.push(format!("delete {}", name(&obj)));
    }
    fn replace(&self, list: Vec<Arc<ConfigMap>>, rv: &str) {
        let names: Vec<_> = list.iter().map(|o| name(o)).collect();
        self.push(format!("replace {} @{rv}", names.join(",")));
    }
    fn replace_with_undecodable(
        &self,
        list: Vec<Arc<ConfigMap>>,
        undecodable: Vec<UndecodableObject>,
        rv: &str,
    ) {
        let names: Vec<_> = list.iter().map(|o| name(o)).collect();
        let mut line = format!("replace {} @{rv}", names.join(","));
        if !undecodable.is_empty() {
            let keys: Vec<_> = undecodable.iter().map(|u| u.key().to_string()).collect();
            line.push_str(&format!("; undecodable {}", keys.join(",")));
        }
        self.push(line);
    }
    fn undecodable(&self, record: UndecodableObject) {
        assert!(record.metadata().resource_version.is_some());
        self.push(format!("undecodable {}", record.key()));
    }
    fn undecodable_deleted(&self, record: UndecodableObject) {
        self.push(format!("undecodable-deleted {}", record.key()));
    }
}

impl Recorder {
    fn push(&self, s: String) {
        self.calls.lock().unwrap().push(s);
    }
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

fn name(o: &ConfigMap) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

fn obj(name: &str, rv: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv,
        "managedFields": [{"manager": "x", "operation": "Update"}]}})
}

fn list(items: &[serde_json::Value], rv: &str, cont: Option<&str>) -> (u16, String) {
    let body = serde_json::json!({"kind": "ConfigMapList", "apiVersion": "v1",
        "metadata": {"resourceVersion": rv, "continue": cont.unwrap_or("")}, "items": items});
    (200, body.to_string())
}

fn events(lines: &[serde_json::Value]) -> (u16, String) {
    (
        200,
        lines
            .iter()
            .map(|l| l.to_string() + "\n")
            .collect::<String>(),
    )
}

fn status(code: u16, reason: &str) -> (u16, String) {
    (
        code,
        serde_json::json!({"kind": "Status", "code": code, "reason": reason, "message": reason})
            .to_string(),
    )
}

type Script = Arc<dyn Fn(usize, &str) -> (u16, String) + Send + Sync>;

/// A client whose n-th request (with its path and query) is answered by `script`.
fn scripted(script: Script) -> (kube::Client, Arc<StdMutex<Vec<String>>>) {
    let seen = Arc::new(StdMutex::new(Vec::<String>::new()));
    let s2 = Arc::clone(&seen);
    let svc = tower::service_fn(move |req: http::Request<Body>| {
        let pq = req
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default();
        let n = {
            let mut seen = s2.lock().unwrap();
            seen.push(pq.clone());
            seen.len() - 1
        };
        let (code, body) = script(n, &pq);
        async move {
            Ok::<_, std::convert::Infallible>(
                http::Response::builder()
                    .status(code)
                    .body(Body::from(body.into_bytes()))
                    .unwrap(),
            )
        }
    });
    (kube::Client::new(svc, "default"), seen)
}

fn version() -> (u16, String) {
    (200, r#"{"major":"1","minor":"36","gitVersion":"v1.36.3","gitCommit":"","gitTreeState":"","buildDate":"","goVersion":"","compiler":"","platform":""}"#.into())
}

async fn run_until(
    client: kube::Client,
    store: Arc<Recorder>,
    config: ReflectorConfig,
    done: impl Fn(&[String]) -> bool,
) -> Arc<ReflectorMetrics> {
    let r = Reflector::new(
        ListWatch::<ConfigMap>::new(client, &()).namespace("ns"),
        Arc::clone(&store),
        config,
    );
    let metrics = r.metrics();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(r.run(cancel.clone()));
    tokio::time::timeout(Duration::from_secs(600), async {
        while !done(&store.calls()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("condition not reached; calls: {:?}", store.calls()));
    cancel.cancel();
    task.await.unwrap();
    metrics
}

fn list_config() -> ReflectorConfig {
    ReflectorConfig {
        page_size: 2,
        streaming_list: StreamingList::Off,
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn paginated_list_restarts_on_expired_continue_then_watches() {
    let script: Script = Arc::new(|n, pq| {
        assert!(pq.starts_with("/api/v1/namespaces/ns/configmaps?"), "{pq}");
        match n {
            0 => list(&[obj("a", "5"), obj("b", "5")], "10", Some("t1")),
            1 => status(410, "Expired"), // the continue token expired
            2 => list(&[obj("a", "5"), obj("b", "5")], "12", Some("t2")),
            3 => list(&[obj("c", "11")], "12", None),
            4 => {
                assert!(
                    pq.contains("watch=true") && pq.contains("resourceVersion=12"),
                    "{pq}"
                );
                assert!(pq.contains("allowWatchBookmarks=true"), "{pq}");
                events(&[
                    serde_json::json!({"type": "ADDED", "object": obj("d", "13")}),
                    serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}}),
                ])
            }
            _ => {
                // re-opened from the bookmark's resourceVersion, no relist
                assert!(
                    pq.contains("watch=true") && pq.contains("resourceVersion=20"),
                    "{pq}"
                );
                events(&[serde_json::json!({"type": "MODIFIED", "object": obj("d", "21")})])
            }
        }
    });
    let (client, seen) = scripted(script);
    let store = Arc::new(Recorder::default());
    let metrics = run_until(client, Arc::clone(&store), list_config(), |c| {
        c.iter().any(|s| s == "update d")
    })
    .await;
    let calls = store.calls();
    assert_eq!(calls[0], "replace a,b,c @12");
    assert_eq!(calls[1], "add d");
    let stats = metrics.stats();
    assert_eq!(stats.list_restarts, 1);
    assert_eq!(stats.relists, 1);
    assert_eq!(stats.bookmarks, 1);
    let seen = seen.lock().unwrap();
    assert!(seen[1].contains("continue=t1"), "{seen:?}");
    assert!(!seen[2].contains("continue="), "{seen:?}");
    let timeout: u32 = seen[4]
        .split("timeoutSeconds=")
        .nth(1)
        .and_then(|s| s.split('&').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!((300..=600).contains(&timeout), "watch timeout {timeout}");
}

#[tokio::test(start_paused = true)]
async fn expired_watch_relists_and_bad_objects_are_skipped() {
    let script: Script = Arc::new(|n, pq| match n {
        0 => list(&[obj("a", "5")], "10", None),
        1 => events(&[
            // an object that does not deserialize: skipped, the stream goes on
            serde_json::json!({"type": "ADDED", "object": {"metadata": {"name": "bad", "resourceVersion": "11"}, "data": 7}}),
            serde_json::json!({"type": "ADDED", "object": obj("b", "12")}),
            serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
        ]),
        2 => {
            assert!(!pq.contains("watch="), "relist expected: {pq}");
            list(&[obj("b", "12")], "30", None)
        }
        _ => events(&[]),
    });
    let (client, _seen) = scripted(script);
    let store = Arc::new(Recorder::default());
    let metrics = run_until(client, Arc::clone(&store), list_config(), |c| c.len() >= 4).await;
    assert_eq!(
        store.calls(),
        ["replace a @10", "undecodable bad", "add b", "replace b @30"]
    );
    let stats = metrics.stats();
    assert_eq!(stats.skipped_objects, 1);
    assert_eq!(stats.relists, 2);
}

#[tokio::test(start_paused = true)]
async fn streaming_list_then_fallback_when_rejected() {
    // a server that streams: initial events until the bookmark, then the same stream goes on
    let script: Script = Arc::new(|n, pq| match n {
        0 => version(),
        1 => {
            assert!(pq.contains("sendInitialEvents=true"), "{pq}");
            assert!(pq.contains("resourceVersionMatch=NotOlderThan"), "{pq}");
            events(&[
                serde_json::json!({"type": "ADDED", "object": obj("a", "3")}),
                serde_json::json!({"type": "ADDED", "object": obj("b", "4")}),
                serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9",
                    "annotations": {"k8s.io/initial-events-end": "true"}}}}),
                serde_json::json!({"type": "DELETED", "object": obj("a", "10")}),
            ])
        }
        _ => events(&[]),
    });
    let (client, _seen) = scripted(script);
    let store = Arc::new(Recorder::default());
    let metrics = run_until(
        client,
        Arc::clone(&store),
        ReflectorConfig::default(),
        |c| c.len() >= 2,
    )
    .await;
    assert_eq!(store.calls()[..2], ["replace a,b @9", "delete a"]);
    assert_eq!(metrics.stats().watch_list_requests, 1);
    assert_eq!(metrics.stats().list_requests, 0);

    // a server that rejects sendInitialEvents: LIST, and never ask again
    let script: Script = Arc::new(|n, pq| match n {
        0 => version(),
        1 => status(422, "Invalid"),
        2 => list(&[obj("a", "3")], "9", None),
        3 => {
            assert!(!pq.contains("sendInitialEvents"), "{pq}");
            events(&[serde_json::json!({"type": "ADDED", "object": obj("z", "11")})])
        }
        _ => {
            assert!(!pq.contains("sendInitialEvents"), "{pq}");
            events(&[])
        }
    });
    let (client, seen) = scripted(script);
    let store = Arc::new(Recorder::default());
    let metrics = run_until(
        client,
        Arc::clone(&store),
        ReflectorConfig::default(),
        |c| c.len() >= 2,
    )
    .await;
    assert_eq!(store.calls()[..2], ["replace a @9", "add z"]);
    assert_eq!(metrics.stats().list_requests, 1);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .filter(|p| p.contains("sendInitialEvents"))
            .count()
            == 1
    );
}

#[tokio::test(start_paused = true)]
async fn transform_strips_managed_fields_by_default() {
    let script: Script = Arc::new(|n, _| match n {
        0 => list(&[obj("a", "5")], "10", None),
        _ => events(&[]),
    });
    struct Keep(StdMutex<Vec<Arc<ConfigMap>>>);
    impl ReflectorStore<ConfigMap> for Keep {
        fn add(&self, _: Arc<ConfigMap>) {}
        fn update(&self, _: Arc<ConfigMap>) {}
        fn delete(&self, _: Arc<ConfigMap>) {}
        fn replace(&self, list: Vec<Arc<ConfigMap>>, _: &str) {
            self.0.lock().unwrap().extend(list);
        }
    }
    for strip in [true, false] {
        let (client, _) = scripted(Arc::clone(&script));
        let keep = Arc::new(Keep(StdMutex::new(vec![])));
        let mut r = Reflector::new(
            ListWatch::<ConfigMap>::new(client, &()),
            Arc::clone(&keep),
            list_config(),
        );
        if !strip {
            r = r.with_transform(None);
        }
        let cancel = CancellationToken::new();
        let task = tokio::spawn(r.run(cancel.clone()));
        tokio::time::timeout(Duration::from_secs(600), async {
            while keep.0.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the transform test's object never reached the store");
        cancel.cancel();
        task.await.unwrap();
        let got = keep.0.lock().unwrap()[0].metadata.managed_fields.is_some();
        assert_eq!(got, !strip);
    }
}

/// A ConfigMap whose `data` is not a map: valid JSON, not a `ConfigMap`.
fn undecodable(name: &str, rv: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "data": 7})
}

#[tokio::test(start_paused = true)]
async fn undecodable_watch_events_keep_the_key_and_a_deleted_one_goes() {
    let script: Script = Arc::new(|n, _| match n {
        0 => list(&[obj("a", "5"), obj("b", "5")], "10", None),
        1 => events(&[
            serde_json::json!({"type": "MODIFIED", "object": undecodable("a", "11")}),
            serde_json::json!({"type": "DELETED", "object": undecodable("b", "12")}),
            serde_json::json!({"type": "ADDED", "object": undecodable("c", "13")}),
            serde_json::json!({"type": "MODIFIED", "object": obj("a", "14")}),
        ]),
        _ => events(&[]),
    });
    let (client, seen) = scripted(script);
    let store = Arc::new(Recorder::default());
    let metrics = run_until(client, Arc::clone(&store), list_config(), |c| {
        c.iter().any(|s| s == "update a")
    })
    .await;
    assert_eq!(
        store.calls()[..5],
        [
            "replace a,b @10",
            "undecodable ns/a",
            "undecodable-deleted ns/b",
            "undecodable ns/c",
            "update a"
        ]
    );
    let stats = metrics.stats();
    assert_eq!(stats.skipped_objects, 3);
    assert_eq!(stats.last_sync_resource_version.as_deref(), Some("14"));
    // the watch re-opens from the last event, undecodable ones included
    assert!(
        seen.lock().unwrap()[2].contains("resourceVersion=14"),
        "{:?}",
        seen.lock().unwrap()
    );
}

#[tokio::test(start_paused = true)]
async fn undecodable_initial_event_is_kept_beside_the_streamed_list() {
    let script: Script = Arc::new(|n, _| match n {
        0 => version(),
        1 => events(&[
            serde_json::json!({"type": "ADDED", "object": obj("a", "3")}),
            serde_json::json!({"type": "ADDED", "object": obj("b", "4")}),
            serde_json::json!({"type": "MODIFIED", "object": undecodable("a", "5")}),
            serde_json::json!({"type": "ADDED", "object": undecodable("c", "6")}),
            serde_json::json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9",
                "annotations": {"k8s.io/initial-events-end": "true"}}}}),
        ]),
        _ => events(&[]),
    });
    let (client, _) = scripted(script);
    let store = Arc::new(Recorder::default());
    let metrics = run_until(
        client,
        Arc::clone(&store),
        ReflectorConfig::default(),
        |c| !c.is_empty(),
    )
    .await;
    assert_eq!(store.calls()[0], "replace b @9; undecodable ns/a,ns/c");
    assert_eq!(metrics.stats().skipped_objects, 2);
}

/// The whole path, reflector → DeltaFIFO → informer store → handlers,
/// for each way an undecodable object can arrive.
#[tokio::test(start_paused = true)]
async fn informer_keeps_undecodable_objects_as_metadata_and_never_reports_them_deleted() {
    use crate::cache::informer::InformerOptions;
    use crate::cache::{CacheError, DeletedObject, EventHandler, SharedIndexInformer};
    let script: Script = Arc::new(|n, pq| match n {
        0 => list(
            &[obj("a", "5"), obj("b", "5"), obj("c", "5"), obj("d", "5")],
            "10",
            None,
        ),
        1 => events(&[
            serde_json::json!({"type": "MODIFIED", "object": undecodable("a", "11")}),
            serde_json::json!({"type": "DELETED", "object": undecodable("b", "12")}),
            serde_json::json!({"type": "ADDED", "object": undecodable("new", "13")}),
            serde_json::json!({"type": "MODIFIED", "object": obj("d", "14")}),
            serde_json::json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}),
        ]),
        2 => {
            assert!(!pq.contains("watch="), "relist expected: {pq}");
            // `a` decodes again, `c` no longer does
            list(
                &[obj("a", "20"), undecodable("c", "18"), obj("d", "14")],
                "21",
                None,
            )
        }
        _ => events(&[]),
    });
    let (client, _) = scripted(script);
    let informer = SharedIndexInformer::new(
        ListWatch::<ConfigMap>::new(client, &()).namespace("ns"),
        InformerOptions {
            reflector: list_config(),
            ..Default::default()
        },
    );
    let log = Arc::new(StdMutex::new(Vec::<String>::new()));
    struct Log(Arc<StdMutex<Vec<String>>>);
    impl EventHandler<ConfigMap> for Log {
        async fn on_add(&mut self, obj: Arc<ConfigMap>, _: bool) {
            self.0.lock().unwrap().push(format!("add {}", name(&obj)));
        }
        async fn on_update(&mut self, _: Arc<ConfigMap>, new: Arc<ConfigMap>, _: bool) {
            self.0
                .lock()
                .unwrap()
                .push(format!("update {}", name(&new)));
        }
        async fn on_delete(&mut self, obj: DeletedObject<ConfigMap>) {
            let tomb = if obj.is_tombstone() {
                " (tombstone)"
            } else {
                ""
            };
            let line = format!("delete {}{tomb}", name(obj.object()));
            self.0.lock().unwrap().push(line);
        }
        async fn on_undecodable(&mut self, obj: Arc<UndecodableObject>) {
            let gone = if obj.is_deleted() { " deleted" } else { "" };
            let line = format!(
                "undecodable {}@{}{gone}",
                obj.name(),
                obj.resource_version().unwrap_or_default()
            );
            self.0.lock().unwrap().push(line);
        }
    }
    informer.add_event_handler(Log(Arc::clone(&log))).unwrap();
    informer.start().unwrap();
    tokio::time::timeout(Duration::from_secs(600), async {
        while !log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l == "undecodable new@13 deleted")
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no deletion of new; events: {:?}", log.lock().unwrap()));
    let events: Vec<String> = log.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "add a",
            "add b",
            "add c",
            "add d",
            // never a delete for `a`: its metadata replaces the stale copy
            "undecodable a@11",
            // deleted while undecodable: the stale copy's tombstone
            "delete b (tombstone)",
            "undecodable new@13",
            "update d",
            // the relist: `c` no longer decodes, `a` does again; `d`
            // unchanged; `new` is gone
            "undecodable c@18",
            "add a",
            "undecodable new@13 deleted",
        ]
    );
    let store = informer.store();
    let mut keys: Vec<String> = store.list().iter().map(|o| name(o)).collect();
    keys.sort();
    assert_eq!(keys, ["a", "d"]);
    assert!(store.get(Some("ns"), "c").is_none());
    let c = store
        .undecodable(Some("ns"), "c")
        .expect("c kept as metadata");
    assert_eq!(c.resource_version(), Some("18"));
    assert_eq!(c.kind(), "v1/ConfigMap");
    assert!(matches!(
        store.try_get(Some("ns"), "c"),
        Err(CacheError::Undecodable(u)) if u.name() == "c"
    ));
    assert!(store.try_get(Some("ns"), "new").unwrap().is_none());
    assert!(store.try_get(Some("ns"), "a").unwrap().is_some());
    assert_eq!(store.undecodable_len(), 1);
    assert_eq!(informer.stats().skipped_objects, 4);
    assert_eq!(informer.stats().undecodable_objects, 1);
    informer.stop();
}

#[tokio::test(start_paused = true)]
async fn watch_error_handler_sees_each_failed_attempt_and_recovery_clears_last_error() {
    let script: Script = Arc::new(|n, _pq| match n {
        0 => status(403, "Forbidden"),
        1 => status(500, "InternalError"),
        2 => list(&[obj("a", "5")], "10", None),
        3 => status(503, "ServiceUnavailable"), // opening the watch: retried without relist
        4 => events(&[serde_json::json!({"type": "ADDED", "object": obj("b", "11")})]),
        // re-opening after the stream ends: retried with backoff (a
        // watch answered at once would spin the paused clock's runtime)
        _ => status(503, "ServiceUnavailable"),
    });
    let (client, _seen) = scripted(script);
    let seen = Arc::new(StdMutex::new(Vec::<(String, u16)>::new()));
    let seen2 = Arc::clone(&seen);
    let store = Arc::new(Recorder::default());
    let r = Reflector::new(
        ListWatch::<ConfigMap>::new(client, &()).namespace("ns"),
        Arc::clone(&store),
        list_config(),
    )
    .with_watch_error_handler(Some(Arc::new(move |informer: &str, e: &ReflectorError| {
        let code = match e {
            ReflectorError::Api(s) => s.code,
            _ => 0,
        };
        let first = {
            let mut seen = seen2.lock().unwrap();
            seen.push((informer.to_owned(), code));
            seen.len() == 1
        };
        assert!(!first, "a panicking handler does not stop the reflector");
    })));
    let metrics = r.metrics();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(r.run(cancel.clone()));
    let mut last_errors = Vec::new();
    tokio::time::timeout(Duration::from_secs(600), async {
        while !store.calls().contains(&"add b".to_string()) {
            last_errors.push(metrics.last_error().is_some());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("recovered and watching");
    cancel.cancel();
    task.await.unwrap();
    let informer = "v1/ConfigMap (namespace ns)".to_string();
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[..3],
        [
            (informer.clone(), 403),
            (informer.clone(), 500),
            (informer.clone(), 503)
        ]
    );
    assert!(
        seen[3..]
            .iter()
            .all(|(i, code)| *i == informer && *code == 503)
    );
    assert!(last_errors.contains(&true), "set while failing");
    assert_eq!(metrics.last_error(), None, "cleared once a list succeeded");
    assert_eq!(metrics.stats().last_error, None);
}

mod retry_log {
    //! Issue 11: the reflector's retry logs carry the attempt and the delay.
    use super::super::*;
    use crate::cache::informer::{BackoffConfig, delta_fifo::DeltaFifo};
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test(start_paused = true)]
    async fn failed_rounds_log_attempt_and_delay() {
        let (logs, _guard) = crate::test_log::capture();
        let answered = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&answered);
        let svc = tower::service_fn(move |_req: http::Request<Body>| {
            count.fetch_add(1, Ordering::SeqCst);
            async {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .status(503)
                        .body(Body::from(b"overloaded".to_vec()))
                        .unwrap(),
                )
            }
        });
        let client = kube::Client::new(svc, "default");
        let fifo = Arc::new(DeltaFifo::<ConfigMap>::new(None));
        let config = ReflectorConfig {
            streaming_list: StreamingList::Off,
            backoff: BackoffConfig {
                jitter: 0.0,
                ..Default::default()
            },
            ..Default::default()
        };
        let r = Reflector::new(ListWatch::new(client, &()), fifo, config);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(r.run(cancel.clone()));
        tokio::time::timeout(Duration::from_secs(600), async {
            while answered.load(Ordering::SeqCst) < 4 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("four list attempts");
        cancel.cancel();
        task.await.unwrap();
        let failed = logs.with_message("list/watch failed; retrying");
        let seen: Vec<_> = failed
            .iter()
            .take(3)
            .map(|e| (e.field("attempt"), e.field("retry_in")))
            .collect();
        assert_eq!(
            seen,
            [
                (Some("1"), Some("800ms")),
                (Some("2"), Some("1.6s")),
                (Some("3"), Some("3.2s"))
            ]
        );
        assert_eq!(failed[0].level, tracing::Level::WARN);
        assert!(
            failed[0]
                .field("error")
                .is_some_and(|e| e.contains("503") && e.contains("overloaded")),
            "{failed:?}"
        );
    }
}

/// Protobuf per kind: on for a built-in kind, off for a kind named in
/// `json_kinds` (by kind or apiVersion/kind) and for every kind when
/// `protobuf` is false.
#[cfg(feature = "protobuf")]
#[tokio::test]
async fn json_kinds_and_protobuf_false_keep_a_kind_on_json() {
    let client = super::super::list_watch::tests::test_client;
    let with = |config: ReflectorConfig| {
        Reflector::new(
            ListWatch::<ConfigMap>::new(client(), &()),
            Arc::new(Recorder::default()),
            config,
        )
        .lw
        .is_protobuf()
    };
    assert!(with(ReflectorConfig::default()));
    for kinds in [["ConfigMap"], ["v1/ConfigMap"]] {
        let config = ReflectorConfig {
            json_kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
            ..ReflectorConfig::default()
        };
        assert!(!with(config), "{kinds:?}");
    }
    for other in ["Secret", "apps/v1/ConfigMap"] {
        let config = ReflectorConfig {
            json_kinds: vec![other.to_owned()],
            ..ReflectorConfig::default()
        };
        assert!(with(config), "{other}");
    }
    assert!(!with(ReflectorConfig {
        protobuf: false,
        ..ReflectorConfig::default()
    }));
}
