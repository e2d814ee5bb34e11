//! Objects the API server serves that do not deserialize into the Rust type
//! (issue 22), against a real control plane: the CRD's schema lets `spec`
//! be anything, the Rust type requires `spec.size`. Such an object is never
//! reported as deleted: its reconciler gets `CacheError::Undecodable` with
//! the metadata, and removes its finalizer from metadata alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{CustomResource, CustomResourceExt};
use opkit::cache::{CacheError, SharedCache};
use opkit::client::remove_finalizer_by_meta;
use opkit::controller::Controller;
use opkit::metrics::Metrics;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
const NS: &str = "undecodable";
const FINALIZER: &str = "undecodable.opkit.dev/cleanup";

#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "undecodable.opkit.dev",
    version = "v1",
    kind = "Widget",
    namespaced
)]
struct WidgetSpec {
    size: u32,
}

/// What each reconcile of a key saw, in order.
#[derive(Default)]
struct Seen(Mutex<HashMap<String, Vec<String>>>);

impl Seen {
    fn of(&self, name: &str) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .cloned()
            .unwrap_or_default()
    }
}

struct WidgetReconciler(Arc<Seen>);

impl Reconcile for WidgetReconciler {
    type Object = Widget;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Widget>,
    ) -> Result<Action, ReconcileError> {
        let outcome = match ctx.object().await {
            Ok(Some(w)) => format!("ok size={}", w.spec.size),
            Ok(None) => "gone".to_owned(),
            Err(CacheError::Undecodable(bad)) => {
                let meta = bad.metadata();
                let mut line = format!(
                    "undecodable rv={} uid={} finalizers={:?}",
                    bad.metadata()
                        .resource_version
                        .as_deref()
                        .unwrap_or_default(),
                    meta.uid.is_some(),
                    meta.finalizers.clone().unwrap_or_default()
                );
                if meta.deletion_timestamp.is_some() {
                    remove_finalizer_by_meta(&ctx.object_api(), meta, FINALIZER).await?;
                    line.push_str(" deleting: finalizer removed");
                }
                line
            }
            Err(e) => return Err(e.into()),
        };
        self.0
            .0
            .lock()
            .unwrap()
            .entry(req.name)
            .or_default()
            .push(outcome);
        Ok(Action::done())
    }
}

/// The CRD with a schema that accepts any `spec` (what the Rust type
/// refuses when `size` is missing).
fn permissive_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let mut crd = serde_json::to_value(Widget::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] = serde_json::json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    });
    if let Some(schema) = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].as_object_mut() {
        schema.remove("required");
    }
    serde_json::from_value(crd).unwrap()
}

fn widget(name: &str, spec: serde_json::Value, finalizers: &[&str]) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "undecodable.opkit.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS, "finalizers": finalizers},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test]
async fn an_undecodable_object_is_an_error_never_a_deletion_and_its_finalizer_can_be_removed() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    plane.install_crds(&[permissive_crd()]).await.unwrap();
    let client = plane.client().unwrap();
    create_namespace(&client, NS).await;
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &ApiResource::erase::<Widget>(&()));

    let seen = Arc::new(Seen::default());
    let cache = SharedCache::builder(client.clone()).namespace(NS).build();
    let controller = Controller::new(WidgetReconciler(Arc::clone(&seen)));
    cache.start().unwrap();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let token = token.clone();
        let cache = cache.clone();
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });

    // created undecodable, with a finalizer: the reconciler sees the error
    // and the metadata, not `None`
    let pp = PostParams::default();
    raw.create(&pp, &widget("bad", serde_json::json!({}), &[FINALIZER]))
        .await
        .unwrap();
    // created decodable, then changed into what does not decode
    raw.create(&pp, &widget("flip", serde_json::json!({"size": 3}), &[]))
        .await
        .unwrap();
    eventually("the undecodable object reconciled", WAIT, || async {
        seen.of("bad")
            .iter()
            .any(|s| s.starts_with("undecodable"))
            .then_some(())
    })
    .await;
    // ... and a Warning Event says so on the object
    opkit_tests::wait_for_event(
        &client,
        NS,
        "a Warning Event Undecodable on bad",
        WAIT,
        |e| {
            e.reason.as_deref() == Some("Undecodable")
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("bad")
        },
    )
    .await;
    let first = seen.of("bad")[0].clone();
    assert!(
        first.starts_with("undecodable rv=") && first.contains("uid=true"),
        "{first}"
    );
    assert!(first.contains(FINALIZER), "{first}");
    eventually("the decodable object reconciled", WAIT, || async {
        (seen.of("flip") == ["ok size=3"]).then_some(())
    })
    .await;
    raw.patch(
        "flip",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"spec": {"size": null, "colour": "red"}})),
    )
    .await
    .unwrap();
    eventually(
        "the change into an undecodable shape reconciled",
        WAIT,
        || async { (seen.of("flip").len() >= 2).then_some(()) },
    )
    .await;
    let flip = seen.of("flip");
    assert!(flip[1].starts_with("undecodable"), "{flip:?}");
    // the stale decodable copy is not readable as if current
    assert!(matches!(
        cache.get::<Widget>(Some(NS), "flip").await,
        Err(CacheError::Undecodable(u)) if u.metadata().name.as_deref() == Some("flip")
    ));
    let metrics = Metrics::new().encode().unwrap();
    assert!(
        metrics.contains(
            r#"opkit_cache_undecodable_objects{kind="undecodable.opkit.dev/v1/Widget"} 2"#
        ),
        "{metrics}"
    );

    // deleted: the reconciler sees the deletion in the metadata, removes
    // its finalizer from metadata alone, and the object really goes
    raw.delete("bad", &DeleteParams::default()).await.unwrap();
    eventually(
        "the finalizer removed and the object gone",
        WAIT,
        || async { raw.get_opt("bad").await.unwrap().is_none().then_some(()) },
    )
    .await;
    eventually("the deletion reconciled", WAIT, || async {
        (seen.of("bad").last().map(String::as_str) == Some("gone")).then_some(())
    })
    .await;
    let bad = seen.of("bad");
    assert!(
        bad.iter()
            .any(|s| s.ends_with("deleting: finalizer removed")),
        "{bad:?}"
    );
    // `gone` only once the object really was
    assert_eq!(bad.iter().filter(|s| *s == "gone").count(), 1, "{bad:?}");
    assert!(!seen.of("flip").iter().any(|s| s == "gone"));
    assert!(matches!(
        cache.get::<Widget>(Some(NS), "bad").await,
        Ok(None)
    ));

    token.cancel();
    run.await.unwrap().unwrap();
}

/// A third party's kind whose status the Rust type cannot read: the Rust
/// type knows the phases `Ready` and `Pending`, the other party's
/// controller writes `Degraded`.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "undecodable.opkit.dev",
    version = "v1",
    kind = "Gauge",
    namespaced,
    status = "GaugeStatus"
)]
struct GaugeSpec {
    size: u32,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema)]
struct GaugeStatus {
    phase: GaugePhase,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema)]
enum GaugePhase {
    Ready,
    Pending,
}

/// Gauge's CRD with a status the apiserver takes whatever its phase.
fn gauge_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let mut crd = serde_json::to_value(Gauge::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"] = serde_json::json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    });
    serde_json::from_value(crd).unwrap()
}

const GAUGE_FINALIZER: &str = "undecodable.opkit.dev/gauge";

/// Runs `client::finalizer` on the reconcile's read, recording each event.
struct GaugeReconciler(Arc<Seen>);

impl Reconcile for GaugeReconciler {
    type Object = Gauge;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Gauge>,
    ) -> Result<Action, ReconcileError> {
        let seen = &self.0;
        let record = |what: &str| {
            seen.0
                .lock()
                .unwrap()
                .entry(req.name.clone())
                .or_default()
                .push(what.to_owned());
        };
        opkit::client::finalizer(
            &ctx.object_api(),
            GAUGE_FINALIZER,
            ctx.object().await,
            |event| async {
                match event {
                    opkit::client::FinalizerEvent::Apply(_) => record("apply"),
                    opkit::client::FinalizerEvent::Cleanup(_) => record("cleanup"),
                    opkit::client::FinalizerEvent::CleanupUndecodable(bad) => {
                        assert!(bad.metadata().deletion_timestamp.is_some());
                        assert!(bad.error().contains("Degraded"), "{}", bad.error());
                        record("cleanup undecodable");
                    }
                }
                Ok(Action::done())
            },
        )
        .await
    }
}

/// Issue 38: a reconciler that used `ctx.object().await?` retried an
/// undecodable object being deleted forever, and its finalizer was never
/// released. `client::finalizer` handed the read runs the cleanup on
/// metadata, once, and releases the finalizer; while the object is not
/// being deleted, the read's error is returned (no cleanup).
#[tokio::test]
async fn the_finalizer_helper_releases_an_undecodable_object_being_deleted() {
    init_tracing();
    let ns = "undecodable-gauges";
    let (plane, client) = opkit_tests::plane_with_namespace(ns).await;
    plane.install_crds(&[gauge_crd()]).await.unwrap();
    let gauges: Api<Gauge> = Api::namespaced(client.clone(), ns);
    let raw: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<Gauge>(&()));

    let seen = Arc::new(Seen::default());
    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    cache.start().unwrap();
    let running =
        opkit_tests::spawn_controller(Controller::new(GaugeReconciler(Arc::clone(&seen))), &cache);

    gauges
        .create(
            &PostParams::default(),
            &Gauge::new("g", GaugeSpec { size: 1 }),
        )
        .await
        .unwrap();
    eventually("the finalizer added", WAIT, || async {
        let g = gauges.get("g").await.unwrap();
        g.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == GAUGE_FINALIZER)
            .then_some(())
    })
    .await;
    // The other party writes a phase the Rust type does not know.
    raw.patch_status(
        "g",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"phase": "Degraded"}})),
    )
    .await
    .unwrap();
    opkit_tests::wait_for_event(&client, ns, "a Warning Event Undecodable on g", WAIT, |e| {
        e.reason.as_deref() == Some("Undecodable")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("g")
    })
    .await;
    assert!(
        !seen.of("g").iter().any(|s| s.starts_with("cleanup")),
        "{:?}",
        seen.of("g")
    );

    raw.delete("g", &DeleteParams::default()).await.unwrap();
    eventually(
        "the finalizer released and the object gone",
        WAIT,
        || async { raw.get_opt("g").await.unwrap().is_none().then_some(()) },
    )
    .await;
    let g = seen.of("g");
    assert_eq!(
        g.iter()
            .filter(|s| s.starts_with("cleanup"))
            .collect::<Vec<_>>(),
        ["cleanup undecodable"],
        "{g:?}"
    );

    running.stop().await;
}
