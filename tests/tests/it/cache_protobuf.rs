//! Protobuf for built-in kinds, against a real apiserver: what an informer
//! decodes from protobuf (streaming list, paginated LIST, watch events) is
//! exactly what it decodes from JSON, and the responses really were
//! protobuf; custom resources stay JSON.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Secret},
};
use kube::{
    Client, Resource,
    api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
};
use opkit::cache::{Cacheable, ReflectorConfig, SharedCache, SharedIndexInformer, StreamingList};
use opkit_envtest::ControlPlane;
use opkit_tests::{content_type_recording_client, create_namespace, eventually, init_tracing};

const WAIT: Duration = Duration::from_secs(30);

/// An informer over `ns` keeping objects exactly as received (managedFields
/// too), with the cache that runs it (the informer stops with the cache).
fn informer<K>(
    client: Client,
    ns: &str,
    protobuf: bool,
    streaming: bool,
) -> (SharedCache, SharedIndexInformer<K>)
where
    K: Cacheable<DynamicType = ()> + Clone,
{
    let cache = SharedCache::builder(client)
        .namespace(ns)
        .keep_managed_fields()
        .reflector_config(ReflectorConfig {
            protobuf,
            streaming_list: if streaming {
                StreamingList::Auto
            } else {
                StreamingList::Off
            },
            ..ReflectorConfig::default()
        })
        .build();
    let informer = cache.informer::<K>().expect("informer");
    cache.start().expect("start");
    (cache, informer)
}

fn by_name<K>(informer: &SharedIndexInformer<K>) -> BTreeMap<String, K>
where
    K: Cacheable + Clone,
{
    informer
        .store()
        .list()
        .into_iter()
        .map(|o| (o.meta().name.clone().unwrap_or_default(), (*o).clone()))
        .collect()
}

fn rich_config_map(ns: &str, name: &str, owner: &ConfigMap) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some([("app".into(), "shop".into()), ("tier".into(), "web".into())].into()),
            annotations: Some([("note".into(), "ünïcödé ✓".into())].into()),
            finalizers: Some(vec!["example.com/keep".into()]),
            owner_references: Some(vec![owner.controller_owner_ref(&()).expect("owner uid")]),
            ..ObjectMeta::default()
        },
        data: Some([("a".into(), "1".into()), ("empty".into(), String::new())].into()),
        binary_data: Some([("bin".into(), ByteString(vec![0, 1, 254, 255]))].into()),
        immutable: Some(false),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_decodes_what_json_decodes() {
    init_tracing();
    let cp = ControlPlane::start().await.expect("control plane");
    let admin = cp.client().expect("client");
    let config = cp.config().clone();
    let ns = "protobuf";
    create_namespace(&admin, ns).await;

    // Objects with most ObjectMeta fields set, created through the API
    // (so they carry managedFields, a uid, timestamps, a generation of 0).
    let cms: Api<ConfigMap> = Api::namespaced(admin.clone(), ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .expect("owner");
    cms.create(&PostParams::default(), &rich_config_map(ns, "rich", &owner))
        .await
        .expect("rich");
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                generate_name: Some("gen-".into()),
                ..ObjectMeta::default()
            },
            immutable: Some(true),
            ..ConfigMap::default()
        },
    )
    .await
    .expect("generated");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("tls".into()),
                    ..ObjectMeta::default()
                },
                type_: Some("kubernetes.io/tls".into()),
                string_data: Some(
                    [
                        ("tls.crt".into(), "cert".into()),
                        ("tls.key".into(), "key".into()),
                    ]
                    .into(),
                ),
                ..Secret::default()
            },
        )
        .await
        .expect("secret");
    // a server-side apply adds a second managedFields entry (operation Apply)
    cms.patch(
        "rich",
        &PatchParams::apply("protobuf-test").force(),
        &Patch::Apply(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rich", "labels": {"applied": "yes"}},
        })),
    )
    .await
    .expect("apply");

    let (pb_client, pb_seen) = content_type_recording_client(&config);
    let (json_client, json_seen) = content_type_recording_client(&config);
    let (_pb_stream_cache, pb_stream) = informer::<ConfigMap>(pb_client.clone(), ns, true, true);
    let (_pb_list_cache, pb_list) = informer::<ConfigMap>(pb_client.clone(), ns, true, false);
    let (_json_cache, json) = informer::<ConfigMap>(json_client.clone(), ns, false, true);
    let (_pb_secrets_cache, pb_secrets) = informer::<Secret>(pb_client, ns, true, true);
    let (_json_secrets_cache, json_secrets) = informer::<Secret>(json_client, ns, false, true);
    for i in [&pb_stream, &pb_list, &json] {
        tokio::time::timeout(WAIT, i.wait_for_sync())
            .await
            .expect("sync in time")
            .expect("synced");
    }
    for i in [&pb_secrets, &json_secrets] {
        tokio::time::timeout(WAIT, i.wait_for_sync())
            .await
            .expect("sync in time")
            .expect("synced");
    }

    let expected = by_name(&json);
    assert_eq!(expected.len(), 3, "{:?}", expected.keys());
    let rich = &expected["rich"];
    assert!(
        rich.metadata
            .managed_fields
            .as_ref()
            .is_some_and(|m| m.len() == 2)
    );
    assert!(rich.metadata.owner_references.is_some());
    assert_eq!(
        by_name(&pb_stream),
        expected,
        "streaming list: protobuf vs JSON"
    );
    assert_eq!(
        by_name(&pb_list),
        expected,
        "paginated LIST: protobuf vs JSON"
    );
    let expected_secrets = by_name(&json_secrets);
    assert_eq!(
        expected_secrets["tls"].data.as_ref().map(|d| d.len()),
        Some(2)
    );
    assert_eq!(
        by_name(&pb_secrets),
        expected_secrets,
        "Secret: protobuf vs JSON"
    );

    // Watch events: an update, a new object and a deletion.
    cms.patch(
        "rich",
        &PatchParams::default(),
        &Patch::Merge(
            serde_json::json!({"data": {"a": "2"}, "metadata": {"annotations": {"note": null}}}),
        ),
    )
    .await
    .expect("update");
    cms.create(
        &PostParams::default(),
        &rich_config_map(ns, "later", &owner),
    )
    .await
    .expect("later");
    let generated = expected
        .keys()
        .find(|k| k.starts_with("gen-"))
        .expect("generated name")
        .clone();
    cms.delete(&generated, &DeleteParams::default())
        .await
        .expect("delete");
    let done = |i: &SharedIndexInformer<ConfigMap>| {
        let m = by_name(i);
        m.contains_key("later")
            && !m.contains_key(&generated)
            && m["rich"].data.as_ref().is_some_and(|d| d["a"] == "2")
    };
    eventually("every informer saw the watch events", WAIT, || {
        let ok = done(&json) && done(&pb_stream) && done(&pb_list);
        async move { ok.then_some(()) }
    })
    .await;
    let expected = by_name(&json);
    assert_eq!(
        by_name(&pb_stream),
        expected,
        "watch events: protobuf vs JSON"
    );
    assert_eq!(
        by_name(&pb_list),
        expected,
        "watch after LIST: protobuf vs JSON"
    );

    // The protobuf informers were answered in protobuf, the JSON ones in JSON.
    let pb_types = pb_seen.lock().unwrap().clone();
    assert!(
        pb_types
            .iter()
            .any(|t| t == "application/vnd.kubernetes.protobuf"),
        "{pb_types:?}"
    );
    assert!(
        pb_types
            .iter()
            .any(|t| t == "application/vnd.kubernetes.protobuf;stream=watch"),
        "{pb_types:?}"
    );
    let json_types = json_seen.lock().unwrap().clone();
    assert!(
        json_types.iter().all(|t| !t.contains("protobuf")),
        "{json_types:?}"
    );
    cp.stop();
}
