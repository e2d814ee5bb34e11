//! A kind the project does not own, as kopium generates it: the types in
//! `tests/kopium/widget.rs` are kopium's output for the CRD
//! `tests/kopium/widgets.json`, committed unchanged and used in
//! `#[controller(...)]` as any other kind (the book's "Kinds you don't
//! own"). The generated `Condition` and `IntOrString` derive `JsonSchema`
//! through k8s-openapi's `schemars` feature, which the workspace and
//! generated projects turn on.
//!
//! The same CRD with no Rust type at all: its objects are
//! `DynamicObject`s, watched through a dynamic informer whose events feed a
//! typed controller's queue (`watches_channel`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::PartialObjectMeta;
use opkit::cache::{CacheError, DeletedObject, EventHandler, Scope, SharedCache};
use opkit::controller::Controller as ControllerBuilder;
use opkit::rbac::Verb;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit::{Controller, ControllerWiring};
use opkit_tests::{eventually, plane_with_namespace, spawn_controller};
use tokio::sync::mpsc;

// ANCHOR: controller
#[allow(clippy::all, missing_docs, dead_code)]
mod widget {
    include!("../../kopium/widget.rs");
}
use widget::{Widget, WidgetSpec};

/// Marks each Widget Ready in its status (the kopium `Condition` type).
#[derive(Controller)]
#[controller(for = Widget, status)]
struct WidgetReady;

impl Reconcile for WidgetReady {
    type Object = Widget;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<Widget>,
    ) -> Result<Action, ReconcileError> {
        let Some(widget) = ctx.object().await? else {
            return Ok(Action::done());
        };
        let status = serde_json::json!({ "status": { "conditions": [{
            "type": "Ready",
            "status": "True",
            "reason": "Reconciled",
            "message": format!("size {}", widget.spec.size),
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        ctx.object_api()
            .patch_status(&req.name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|e| ReconcileError::retryable(format!("patching the status of {req}: {e}")))?;
        Ok(Action::done())
    }
}

// ANCHOR_END: controller

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The shared control plane with the Widget CRD (`tests/kopium/widgets.json`)
/// installed and namespace `ns` created; an admin client.
async fn plane_with_widgets(ns: &str) -> kube::Client {
    let (plane, client) = plane_with_namespace(ns).await;
    let crd = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("tests/kopium/widgets.json")).unwrap(),
    )
    .unwrap();
    plane.install_crds(&[crd]).await.unwrap();
    client
}

#[test]
fn kopium_output_is_committed_unchanged() {
    let install = Command::new(workspace().join("tests/kopium/install.sh"))
        .output()
        .expect("run tests/kopium/install.sh");
    assert!(
        install.status.success(),
        "installing kopium failed: {install:?}"
    );
    let kopium = String::from_utf8(install.stdout).expect("a path");
    let generated = Command::new(kopium.trim())
        .args(["--auto", "-f", "tests/kopium/widgets.json"])
        .current_dir(workspace())
        .output()
        .expect("run kopium");
    assert!(generated.status.success(), "kopium failed: {generated:?}");
    let committed =
        std::fs::read(workspace().join("tests/kopium/widget.rs")).expect("read widget.rs");
    assert!(
        committed == generated.stdout,
        "tests/kopium/widget.rs is not kopium's output; regenerate it with\n  \
         $(tests/kopium/install.sh) --auto -f tests/kopium/widgets.json > tests/kopium/widget.rs"
    );
}

#[tokio::test]
async fn a_kopium_generated_kind_is_reconciled_unchanged() {
    let rules = WidgetReady::rbac_rules();
    assert!(rules.permits("thirdparty.example.com", "widgets", Verb::Watch));
    assert!(rules.permits("thirdparty.example.com", "widgets/status", Verb::Patch));

    let ns = "external-kinds";
    let client = plane_with_widgets(ns).await;
    let widgets: Api<Widget> = Api::namespaced(client.clone(), ns);

    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    let controller = ControllerBuilder::new(WidgetReady);
    cache.start().unwrap();
    let running = spawn_controller(controller, &cache);

    let spec: WidgetSpec =
        serde_json::from_value(serde_json::json!({ "size": 3, "port": "http" })).unwrap();
    widgets
        .create(&PostParams::default(), &Widget::new("gear", spec))
        .await
        .unwrap();
    let ready = eventually(
        "the Widget to be Ready",
        Duration::from_secs(30),
        || async {
            let widget = widgets.get("gear").await.ok()?;
            let conditions = widget.status?.conditions?;
            conditions
                .into_iter()
                .find(|c| c.type_ == "Ready" && c.status == "True")
        },
    )
    .await;
    assert_eq!(ready.message, "size 3");

    running.stop().await;
}

// ANCHOR: dynamic
/// The Widget kind, known only by name: no Rust type.
fn widget_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("thirdparty.example.com", "v1", "Widget");
    ApiResource::from_gvk_with_plural(&gvk, "widgets")
}

/// Keeps a ConfigMap `widgets` in each namespace that lists the names of
/// its Widgets, read as `DynamicObject`s.
struct WidgetIndex;

impl Reconcile for WidgetIndex {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let ns = req.namespace.clone().unwrap_or_default();
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(ctx.client(), &ns, &widget_resource());
        let mut names: Vec<String> = widgets
            .list(&ListParams::default())
            .await
            .map_err(|e| ReconcileError::retryable(format!("listing Widgets in {ns}: {e}")))?
            .items
            .into_iter()
            .filter_map(|w| w.metadata.name)
            .collect();
        names.sort();
        let index = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": { "name": req.name },
            "data": { "widgets": names.join(",") },
        });
        ctx.api::<ConfigMap>(Some(&ns))
            .patch(
                &req.name,
                &PatchParams::apply("widget-index").force(),
                &Patch::Apply(&index),
            )
            .await
            .map_err(|e| ReconcileError::retryable(format!("writing {req}: {e}")))?;
        Ok(Action::done())
    }
}

/// Every change of a Widget asks for its namespace's `widgets` ConfigMap.
struct WidgetEvents(mpsc::Sender<Request>);

impl WidgetEvents {
    async fn enqueue(&self, widget: &DynamicObject) {
        if let Some(ns) = &widget.metadata.namespace {
            // Fails only when the controller has stopped.
            let _ = self.0.send(Request::namespaced(ns, "widgets")).await;
        }
    }
}

impl EventHandler<DynamicObject> for WidgetEvents {
    async fn on_add(&mut self, obj: Arc<DynamicObject>, _: bool) {
        self.enqueue(&obj).await;
    }
    async fn on_update(&mut self, _: Arc<DynamicObject>, new: Arc<DynamicObject>, _: bool) {
        self.enqueue(&new).await;
    }
    async fn on_delete(&mut self, obj: DeletedObject<DynamicObject>) {
        self.enqueue(obj.object()).await;
    }
}

/// The WidgetIndex controller, its queue fed by a dynamic informer of
/// Widgets in `ns` (one watch, shared like any other informer of the cache).
fn widget_index(
    cache: &SharedCache,
    ns: &str,
) -> Result<ControllerBuilder<WidgetIndex>, CacheError> {
    let widgets = cache
        .informer_for(Scope::<DynamicObject>::with_dyntype(widget_resource()).namespace(ns))?;
    let (requests, queue) = mpsc::channel(256);
    widgets.add_event_handler(WidgetEvents(requests))?;
    Ok(ControllerBuilder::new(WidgetIndex).watches_channel(queue))
}
// ANCHOR_END: dynamic

#[tokio::test]
async fn a_kind_without_a_rust_type_is_watched_as_dynamic_objects() {
    let ns = "dynamic-kinds";
    let client = plane_with_widgets(ns).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &widget_resource());
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);

    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    let controller = widget_index(&cache, ns).unwrap();
    cache.start().unwrap();
    let running = spawn_controller(controller, &cache);

    let widget = |name: &str| -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "thirdparty.example.com/v1", "kind": "Widget",
            "metadata": { "name": name },
            "spec": { "size": 1, "port": 80 },
        }))
        .unwrap()
    };
    let index = |want: &'static str| {
        let configmaps = configmaps.clone();
        move || {
            let configmaps = configmaps.clone();
            async move {
                let cm = configmaps.get("widgets").await.ok()?;
                (cm.data?.get("widgets")? == want).then_some(())
            }
        }
    };
    for name in ["bolt", "gear"] {
        widgets
            .create(&PostParams::default(), &widget(name))
            .await
            .unwrap();
    }
    eventually(
        "the index to list both Widgets",
        Duration::from_secs(30),
        index("bolt,gear"),
    )
    .await;
    widgets.delete("bolt", &Default::default()).await.unwrap();
    eventually(
        "the index to drop the deleted Widget",
        Duration::from_secs(30),
        index("gear"),
    )
    .await;

    running.stop().await;
}

// ANCHOR: metadata
/// Writes into each ConfigMap how many Secrets it owns, caching only the
/// Secrets' metadata (`PartialObjectMeta<Secret>`): their data never
/// reaches this process.
#[derive(Controller)]
#[controller(for = ConfigMap, owns(Secret, metadata))]
struct SecretCount;

impl Reconcile for SecretCount {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        let Some(cm) = ctx.object().await? else {
            return Ok(Action::done());
        };
        let uid = cm.metadata.uid.clone().unwrap_or_default();
        let owned = ctx
            .list::<PartialObjectMeta<Secret>>(req.namespace.as_deref())
            .await?
            .iter()
            .filter(|s| {
                s.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .count();
        let patch = serde_json::json!({ "data": { "secrets": owned.to_string() } });
        ctx.object_api()
            .patch(&req.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| ReconcileError::retryable(format!("patching {req}: {e}")))?;
        Ok(Action::done())
    }
}
// ANCHOR_END: metadata

#[tokio::test]
async fn owned_objects_cached_as_metadata_only_wake_their_owner() {
    let ns = "metadata-only";
    let (_, client) = plane_with_namespace(ns).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);

    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    let controller = SecretCount.controller();
    cache.start().unwrap();
    let running = spawn_controller(controller, &cache);

    let bundle: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "bundle" },
    }))
    .unwrap();
    let bundle = configmaps
        .create(&PostParams::default(), &bundle)
        .await
        .unwrap();
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "bundle".into(),
        uid: bundle.metadata.uid.clone().unwrap(),
        controller: Some(true),
        ..OwnerReference::default()
    };
    let count = |want: &'static str| {
        let configmaps = configmaps.clone();
        move || {
            let configmaps = configmaps.clone();
            async move {
                let cm = configmaps.get("bundle").await.ok()?;
                (cm.data?.get("secrets")? == want).then_some(())
            }
        }
    };
    eventually("no Secrets counted", Duration::from_secs(30), count("0")).await;
    for name in ["a", "b"] {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": { "name": name, "ownerReferences": [owner] },
            "stringData": { "password": "not cached here" },
        }))
        .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    eventually(
        "both owned Secrets counted",
        Duration::from_secs(30),
        count("2"),
    )
    .await;
    secrets.delete("a", &Default::default()).await.unwrap();
    eventually(
        "the deleted Secret dropped",
        Duration::from_secs(30),
        count("1"),
    )
    .await;

    running.stop().await;
}
