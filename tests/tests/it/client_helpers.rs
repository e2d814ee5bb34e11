//! `opkit::client` against a real kube-apiserver: server-side apply, status
//! patches, finalizers under concurrent writers, the `finalizer` helper's
//! apply/cleanup semantics, owner references, Events folded into series,
//! and forbidden errors that name what is missing.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt, Resource, ResourceExt};
use opkit::client::{self, ClientError, EventRecorder, FinalizerEvent, OwnerError};
use opkit::reconcile::{Action, ReconcileError};
use opkit_tests::{grant, plane_with_namespace, rule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const MANAGER: &str = "opkit-test-controller";

/// A custom resource with a status subresource.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "helpers.opkit.dev",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus"
)]
struct GizmoSpec {
    size: i32,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
struct GizmoStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ready_replicas: Option<i32>,
}

fn config_map(ns: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

fn managers(obj: &impl Resource) -> Vec<(String, String)> {
    obj.meta()
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test]
async fn apply_creates_then_updates_and_forces_ownership() {
    let ns = "client-apply";
    let (_, client) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client, ns);

    let created = client::apply(
        &api,
        &config_map(ns, "settings", &[("colour", "blue")]),
        MANAGER,
    )
    .await
    .unwrap();
    assert_eq!(created.data.as_ref().unwrap()["colour"], "blue");
    assert!(
        managers(&created).contains(&(MANAGER.to_owned(), "Apply".to_owned())),
        "{:?}",
        managers(&created)
    );

    // Another manager takes the field; our forced apply takes it back. The
    // body is an object read from the server: managedFields and a stale
    // resourceVersion must not get in the way.
    api.patch(
        "settings",
        &PatchParams::apply("someone-else").force(),
        &Patch::Apply(&serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"colour": "red"}
        })),
    )
    .await
    .unwrap();
    let mut desired = created.clone();
    desired
        .data
        .as_mut()
        .unwrap()
        .insert("size".to_owned(), "3".to_owned());
    let updated = client::apply(&api, &desired, MANAGER).await.unwrap();
    let data = updated.data.clone().unwrap();
    assert_eq!(
        (data["colour"].as_str(), data["size"].as_str()),
        ("blue", "3")
    );
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    assert!(
        !managers(&updated).iter().any(|(m, _)| m == "someone-else"),
        "{:?}",
        managers(&updated)
    );

    // Fields this manager stops sending are removed.
    let trimmed = client::apply(&api, &config_map(ns, "settings", &[("size", "3")]), MANAGER)
        .await
        .unwrap();
    assert_eq!(
        trimmed.data.unwrap().into_keys().collect::<Vec<_>>(),
        ["size"]
    );
}

#[tokio::test]
async fn status_patches_change_only_the_status() {
    let ns = "client-status";
    let (plane, client) = plane_with_namespace(ns).await;
    plane.install_crds(&[Gizmo::crd()]).await.unwrap();
    let api: Api<Gizmo> = Api::namespaced(client, ns);
    let created = api
        .create(
            &PostParams::default(),
            &Gizmo::new("g", GizmoSpec { size: 1 }),
        )
        .await
        .unwrap();
    let generation = created.metadata.generation;

    let patched: Gizmo = client::patch_status(
        &api,
        "g",
        &GizmoStatus {
            phase: Some("Ready".into()),
            ready_replicas: Some(1),
        },
    )
    .await
    .unwrap();
    assert_eq!(
        patched.status.as_ref().unwrap().phase.as_deref(),
        Some("Ready")
    );
    assert_eq!(patched.spec, GizmoSpec { size: 1 });
    assert_eq!(patched.metadata.generation, generation);

    // Merge: a partial status keeps the other fields.
    let patched: Gizmo = client::patch_status(&api, "g", &serde_json::json!({"phase": "Degraded"}))
        .await
        .unwrap();
    let status = patched.status.clone().unwrap();
    assert_eq!(
        (status.phase.as_deref(), status.ready_replicas),
        (Some("Degraded"), Some(1))
    );

    // Apply on /status: a changed spec in the object is not sent.
    let mut desired = patched.clone();
    desired.spec.size = 9;
    desired.status = Some(GizmoStatus {
        phase: Some("Scaling".into()),
        ready_replicas: Some(2),
    });
    let applied = client::apply_status(&api, &desired, MANAGER).await.unwrap();
    assert_eq!(applied.spec.size, 1);
    assert_eq!(
        applied.status.as_ref().unwrap().phase.as_deref(),
        Some("Scaling")
    );
    assert_eq!(api.get("g").await.unwrap().spec.size, 1);
    assert_eq!(applied.metadata.generation, generation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_finalizer_writers_converge_exactly() {
    let ns = "client-finalizers";
    let (_, client) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let mut cm = config_map(ns, "guarded", &[]);
    cm.metadata.finalizers = Some(
        ["keep", "remove-0", "remove-1", "remove-2", "remove-3"]
            .map(|f| format!("test.opkit.dev/{f}"))
            .to_vec(),
    );
    let stale = Arc::new(api.create(&PostParams::default(), &cm).await.unwrap());

    // Eight writers at once, each starting from the same (soon stale) copy:
    // four add their own finalizer, four remove one.
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (adder_api, adder_stale) = (api.clone(), stale.clone());
        tasks.push(tokio::spawn(async move {
            let (api, stale) = (adder_api, adder_stale);
            client::add_finalizer(&api, &stale, &format!("test.opkit.dev/add-{i}"))
                .await
                .map(|_| ())
        }));
        let (remover_api, remover_stale) = (api.clone(), stale.clone());
        tasks.push(tokio::spawn(async move {
            let (api, stale) = (remover_api, remover_stale);
            client::remove_finalizer(&api, &stale, &format!("test.opkit.dev/remove-{i}"))
                .await
                .map(|_| ())
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let stored = Arc::new(api.get("guarded").await.unwrap());
    let expected: BTreeSet<String> = ["keep", "add-0", "add-1", "add-2", "add-3"]
        .map(|f| format!("test.opkit.dev/{f}"))
        .into();
    assert_eq!(
        stored.finalizers().iter().cloned().collect::<BTreeSet<_>>(),
        expected
    );
    assert_eq!(stored.finalizers().len(), 5, "no duplicates");

    // Present / absent already: no write at all.
    let again = client::add_finalizer(&api, &stored, "test.opkit.dev/keep")
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        stored.metadata.resource_version
    );
    let again = client::remove_finalizer(&api, &stored, "test.opkit.dev/never")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        stored.metadata.resource_version
    );

    // A deleting object gets no new finalizer, and removing the last one
    // lets the deletion finish.
    api.delete("guarded", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = Arc::new(api.get("guarded").await.unwrap());
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let err = client::add_finalizer(&api, &deleting, "test.opkit.dev/late")
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("no new finalizers"), "{err}");
    let mut current = deleting;
    for f in &expected {
        current = client::remove_finalizer(&api, &current, f)
            .await
            .unwrap()
            .expect("the object exists until its last finalizer is gone");
    }
    // The last removal returned the final state; then the deletion finished.
    assert!(current.finalizers().is_empty());
    assert!(current.metadata.deletion_timestamp.is_some());
    assert!(api.get_opt("guarded").await.unwrap().is_none());
    // On a vanished object, removing is a no-op that says so.
    let gone = client::remove_finalizer(
        &api,
        &Arc::new({
            let mut c = (*current).clone();
            c.metadata.finalizers = Some(vec!["test.opkit.dev/x".into()]);
            c
        }),
        "test.opkit.dev/x",
    )
    .await
    .unwrap();
    assert!(gone.is_none());
}

/// What `client::finalizer` handed its body: `Apply` or `Cleanup`, and the
/// object's finalizers at that moment.
#[derive(Debug, PartialEq)]
enum Seen {
    Apply(Vec<String>),
    Cleanup(Vec<String>),
}

/// Runs `client::finalizer` on `obj` with a body that records what it was
/// handed and answers `answer`. Returns the helper's result and what the
/// body saw (`None`: not called).
async fn run_finalizer(
    api: &Api<ConfigMap>,
    obj: ConfigMap,
    answer: Result<Action, ReconcileError>,
) -> (Result<Action, ReconcileError>, Option<Seen>) {
    let seen = std::sync::Mutex::new(None);
    let result = client::finalizer(api, HELPER_FINALIZER, Arc::new(obj), |event| {
        let saw = match &event {
            FinalizerEvent::Apply(o) => Seen::Apply(o.finalizers().to_vec()),
            FinalizerEvent::Cleanup(o) => Seen::Cleanup(o.finalizers().to_vec()),
            FinalizerEvent::CleanupUndecodable(o) => {
                Seen::Cleanup(o.metadata().finalizers.clone().unwrap_or_default())
            }
        };
        *seen.lock().unwrap() = Some(saw);
        async move { answer }
    })
    .await;
    let seen = seen.into_inner().unwrap();
    (result, seen)
}

const HELPER_FINALIZER: &str = "test.opkit.dev/helper";
/// Another controller's finalizer: keeps a deleted object readable.
const HOLD: &str = "test.opkit.dev/hold";

/// `client::finalizer` with kube-runtime's semantics, on a real apiserver:
/// it adds the finalizer before the first apply, and after deletion it
/// removes it after any successful cleanup (whatever the `Action`, which it
/// returns) and keeps it after a failed one (retryable or terminal).
#[tokio::test]
async fn finalizer_helper_releases_after_any_successful_cleanup() {
    let ns = "client-finalizer-helper";
    let (_, client) = plane_with_namespace(ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client, ns);
    let ours = vec![HELPER_FINALIZER.to_owned()];
    let both = vec![HOLD.to_owned(), HELPER_FINALIZER.to_owned()];
    let mut cm = config_map(ns, "held", &[]);
    cm.metadata.finalizers = Some(vec![HOLD.to_owned()]);
    let created = api.create(&PostParams::default(), &cm).await.unwrap();

    // A live object without the finalizer: added, then Apply sees it, and
    // Apply's action comes back as it is.
    let later = Action::requeue_after(Duration::from_secs(30));
    let (result, seen) = run_finalizer(&api, created, Ok(later)).await;
    assert_eq!(result.unwrap(), later);
    assert_eq!(seen, Some(Seen::Apply(both.clone())));
    let stored = api.get("held").await.unwrap();
    assert_eq!(stored.finalizers(), both.as_slice());

    // With the finalizer already there: Apply, and no write.
    let (result, seen) = run_finalizer(&api, stored.clone(), Ok(Action::done())).await;
    assert_eq!(result.unwrap(), Action::done());
    assert_eq!(seen, Some(Seen::Apply(both.clone())));
    let again = api.get("held").await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        stored.metadata.resource_version
    );

    // Deleted (the other finalizer keeps it readable): a failed cleanup
    // keeps the finalizer, retryable or terminal, and returns the error.
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("held").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    for error in [
        ReconcileError::retryable("not yet").retry_after(Duration::from_secs(5)),
        ReconcileError::terminal("cannot"),
    ] {
        let terminal = error.is_terminal();
        let (result, seen) = run_finalizer(&api, deleting.clone(), Err(error)).await;
        let err = result.expect_err("a failed cleanup is returned");
        assert_eq!(err.is_terminal(), terminal);
        assert_eq!(seen, Some(Seen::Cleanup(both.clone())));
        let stored = api.get("held").await.unwrap();
        assert_eq!(stored.finalizers(), both.as_slice(), "an error keeps it");
    }

    // A successful cleanup that asks to come back later still releases
    // it (kube-runtime's semantics), and its action is returned.
    let later = Action::requeue_after(Duration::from_secs(60));
    let (result, seen) = run_finalizer(&api, deleting.clone(), Ok(later)).await;
    assert_eq!(result.unwrap(), later);
    assert_eq!(seen, Some(Seen::Cleanup(both.clone())));
    let released = api.get("held").await.unwrap();
    assert_eq!(released.finalizers(), [HOLD.to_owned()].as_slice());

    // That requeue finds the object deleting without the finalizer: the
    // body is not called, nothing is written.
    let (result, seen) = run_finalizer(&api, released.clone(), Ok(later)).await;
    assert_eq!(result.unwrap(), Action::done());
    assert_eq!(seen, None);
    let after = api.get("held").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        released.metadata.resource_version
    );

    // With only this finalizer, a successful cleanup (`Ok(Action::done())`)
    // lets the deletion finish.
    let mut cm = config_map(ns, "alone", &[]);
    cm.metadata.finalizers = Some(ours.clone());
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("alone", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("alone").await.unwrap();
    let (result, seen) = run_finalizer(&api, deleting, Ok(Action::done())).await;
    assert_eq!(result.unwrap(), Action::done());
    assert_eq!(seen, Some(Seen::Cleanup(ours)));
    assert!(api.get_opt("alone").await.unwrap().is_none());

    // Let the held object go.
    client::remove_finalizer(&api, &Arc::new(after), HOLD)
        .await
        .unwrap();
}

#[tokio::test]
async fn owner_references_follow_controller_runtime_rules() {
    let ns = "client-owners";
    let (plane, client) = plane_with_namespace(ns).await;
    plane.install_crds(&[Gizmo::crd()]).await.unwrap();
    let gizmos: Api<Gizmo> = Api::namespaced(client.clone(), ns);
    let owner = gizmos
        .create(
            &PostParams::default(),
            &Gizmo::new("owner", GizmoSpec { size: 1 }),
        )
        .await
        .unwrap();
    let rival = gizmos
        .create(
            &PostParams::default(),
            &Gizmo::new("rival", GizmoSpec { size: 1 }),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);

    let mut child = config_map(ns, "owned", &[("k", "v")]);
    client::set_controller_reference(&owner, &mut child).unwrap();
    let stored = client::apply(&cms, &child, MANAGER).await.unwrap();
    let refs = stored.owner_references();
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (
            refs[0].api_version.as_str(),
            refs[0].kind.as_str(),
            refs[0].name.as_str()
        ),
        ("helpers.opkit.dev/v1", "Gizmo", "owner")
    );
    assert_eq!(Some(&refs[0].uid), owner.metadata.uid.as_ref());
    assert_eq!(
        (refs[0].controller, refs[0].block_owner_deletion),
        (Some(true), Some(true))
    );

    // Already controlled by another.
    let mut read_back = stored.clone();
    let err = client::set_controller_reference(&rival, &mut read_back).unwrap_err();
    assert!(
        matches!(&err, OwnerError::AlreadyOwned { existing, .. } if existing == "owner"),
        "{err}"
    );
    // A plain owner may be added next to the controller.
    client::set_owner_reference(&rival, &mut read_back).unwrap();
    let stored = client::apply(&cms, &read_back, MANAGER).await.unwrap();
    assert_eq!(stored.owner_references().len(), 2);

    // Cross-namespace and cluster-scoped owned objects are refused.
    let mut elsewhere = config_map("other", "owned", &[]);
    let err = client::set_controller_reference(&owner, &mut elsewhere).unwrap_err();
    assert!(matches!(err, OwnerError::CrossNamespace { .. }), "{err}");
    let mut namespace = Namespace {
        metadata: ObjectMeta {
            name: Some("tenant".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let err = client::set_controller_reference(&owner, &mut namespace).unwrap_err();
    assert!(
        matches!(err, OwnerError::ClusterScopedOwned { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("cluster-scoped Namespace"),
        "{err}"
    );
}

async fn events_about(client: &kube::Client, ns: &str, name: &str) -> Vec<KubeEvent> {
    let api: Api<KubeEvent> = Api::namespaced(client.clone(), ns);
    let mut events: Vec<KubeEvent> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    events.sort_by_key(|e| e.reason.clone());
    events
}

fn series_count(e: &KubeEvent) -> i32 {
    e.series.as_ref().map_or(1, |s| s.count)
}

#[tokio::test]
async fn events_fold_repeats_into_one_series() {
    let ns = "client-events";
    let (_, client) = plane_with_namespace(ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let burst = cms
        .create(&PostParams::default(), &config_map(ns, "burst", &[]))
        .await
        .unwrap();
    let paced = cms
        .create(&PostParams::default(), &config_map(ns, "paced", &[]))
        .await
        .unwrap();
    let recorder = EventRecorder::builder(client.clone(), "helpers.opkit.dev/test-controller")
        .reporting_instance("test-controller-0")
        .build()
        .unwrap();

    // Five identical warnings at once: one Event, count 5.
    for _ in 0..5 {
        recorder.warning(
            &burst,
            "InvalidSize",
            "Reconciling",
            "size must be positive",
        );
    }
    recorder.flush().await;
    let events = events_about(&client, ns, "burst").await;
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(series_count(event), 5);
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("InvalidSize"));
    assert_eq!(event.action.as_deref(), Some("Reconciling"));
    assert_eq!(event.note.as_deref(), Some("size must be positive"));
    assert_eq!(
        event.reporting_controller.as_deref(),
        Some("helpers.opkit.dev/test-controller")
    );
    assert_eq!(
        event.reporting_instance.as_deref(),
        Some("test-controller-0")
    );
    let regarding = event.regarding.as_ref().unwrap();
    assert_eq!(regarding.uid, burst.metadata.uid);
    assert_eq!(regarding.kind.as_deref(), Some("ConfigMap"));

    // Five identical events one at a time: a create, then series patches.
    for i in 1..=5 {
        recorder.normal(&paced, "Synced", "Reconciling", "up to date");
        recorder.flush().await;
        let events = events_about(&client, ns, "paced").await;
        assert_eq!(events.len(), 1, "after {i}: {events:?}");
        assert_eq!(series_count(&events[0]), i);
        if i >= 2 {
            let series = events[0].series.as_ref().unwrap();
            assert!(series.last_observed_time.0 >= events[0].event_time.as_ref().unwrap().0);
        }
    }

    // A different reason, type or note is a different Event.
    recorder.warning(
        &burst,
        "Unreachable",
        "Reconciling",
        "size must be positive",
    );
    recorder.normal(
        &burst,
        "InvalidSize",
        "Reconciling",
        "size must be positive",
    );
    recorder.warning(&burst, "InvalidSize", "Reconciling", "another note");
    recorder.warning(
        &burst,
        "InvalidSize",
        "Reconciling",
        "size must be positive",
    );
    recorder.flush().await;
    let events = events_about(&client, ns, "burst").await;
    assert_eq!(events.len(), 4, "{events:?}");
    let counts: BTreeSet<(String, String, String, i32)> = events
        .iter()
        .map(|e| {
            (
                e.reason.clone().unwrap(),
                e.type_.clone().unwrap(),
                e.note.clone().unwrap(),
                series_count(e),
            )
        })
        .collect();
    assert!(
        counts.contains(&(
            "InvalidSize".into(),
            "Warning".into(),
            "size must be positive".into(),
            6
        )),
        "{counts:?}"
    );
    assert!(counts.contains(&(
        "Unreachable".into(),
        "Warning".into(),
        "size must be positive".into(),
        1
    )));
    assert!(counts.contains(&(
        "InvalidSize".into(),
        "Normal".into(),
        "size must be positive".into(),
        1
    )));
    assert!(counts.contains(&(
        "InvalidSize".into(),
        "Warning".into(),
        "another note".into(),
        1
    )));

    // A bad reporting controller is refused up front.
    let err = EventRecorder::builder(client, "Not A Name")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("qualified name"), "{err}");
}

async fn bind(admin: &kube::Client, ns: &str, user: &str, rules: Vec<PolicyRule>) {
    grant(admin, ns, user, user, rules).await;
}

#[tokio::test]
async fn forbidden_errors_name_the_missing_verb_and_resource() {
    let ns = "client-forbidden";
    let (plane, admin) = plane_with_namespace(ns).await;
    plane.install_crds(&[Gizmo::crd()]).await.unwrap();
    Api::<Gizmo>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &Gizmo::new("g", GizmoSpec { size: 1 }),
        )
        .await
        .unwrap();
    // May read and patch gizmos and read config maps; nothing else.
    bind(
        &admin,
        ns,
        "limited",
        vec![
            rule("helpers.opkit.dev", &["gizmos"], &["get", "patch"]),
            rule("", &["configmaps"], &["get"]),
        ],
    )
    .await;
    let limited = plane.client_as("limited", &[]).unwrap();

    let cms: Api<ConfigMap> = Api::namespaced(limited.clone(), ns);
    let err = client::apply(&cms, &config_map(ns, "nope", &[]), MANAGER)
        .await
        .unwrap_err();
    match &err {
        ClientError::Forbidden {
            verb,
            resource,
            group,
            namespace,
            ..
        } => {
            assert_eq!(
                (verb.as_str(), resource.as_str(), group.as_str()),
                ("patch", "configmaps", "")
            );
            assert_eq!(namespace.as_deref(), Some(ns));
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(r#"cannot patch resource "configmaps""#),
        "{text}"
    );
    assert!(text.contains("add verb \"patch\""), "{text}");

    // Allowed on gizmos, but not on their status subresource.
    let gizmos: Api<Gizmo> = Api::namespaced(limited, ns);
    let err =
        client::patch_status::<Gizmo, _>(&gizmos, "g", &serde_json::json!({"phase": "Ready"}))
            .await
            .unwrap_err();
    assert!(
        matches!(&err, ClientError::Forbidden { verb, resource, group, .. }
            if verb == "patch" && resource == "gizmos/status" && group == "helpers.opkit.dev"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains(r#"cannot patch resource "gizmos/status" in API group "helpers.opkit.dev""#),
        "{err}"
    );
    // And the allowed write works for the same identity.
    let g = Arc::new(gizmos.get("g").await.unwrap());
    client::add_finalizer(&gizmos, &g, "helpers.opkit.dev/cleanup")
        .await
        .unwrap();

    // An event recorder without rights logs and keeps going.
    let recorder = EventRecorder::builder(
        plane.client_as("limited", &[]).unwrap(),
        "helpers.opkit.dev/limited",
    )
    .build()
    .unwrap();
    recorder.warning(&*g, "Denied", "Reconciling", "cannot write events");
    tokio::time::timeout(Duration::from_secs(10), recorder.flush())
        .await
        .unwrap();
    assert!(events_about(&admin, ns, "g").await.is_empty());
}
