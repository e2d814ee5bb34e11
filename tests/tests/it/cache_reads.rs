//! The read contract a reconciler relies on, against a real apiserver: a
//! namespaced cache, owned kinds read as whole objects, custom indexes,
//! reads of a kind nobody declared, a namespace outside the cache, and
//! predicates that belong to one watch.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::Resource;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use opkit::cache::{CacheError, SharedCache};
use opkit::controller::Controller;
use opkit::predicate::GenerationChanged;
use opkit::reconcile::{Action, Context, Reconcile, ReconcileError, Request};
use opkit_envtest::ControlPlane;
use opkit_tests::{create_namespace, eventually, init_tracing, plane_with_namespace};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

fn config_map(ns: &str, name: &str, tier: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            labels: Some(BTreeMap::from([("tier".to_owned(), tier.to_owned())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("v".to_owned(), "1".to_owned())])),
        ..ConfigMap::default()
    }
}

fn secret(ns: &str, name: &str, owner: Option<&ConfigMap>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(ns.to_owned()),
            owner_references: owner.map(|o| vec![o.controller_owner_ref(&()).expect("uid")]),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([("token".to_owned(), "s3cret".to_owned())])),
        ..Secret::default()
    }
}

/// What one reconcile of `app` could read.
#[derive(Debug, Default, Clone)]
struct Seen {
    owned_secret_data: bool,
    listed: Vec<String>,
    web_tier: Vec<String>,
    service_account: bool,
    other_namespace: String,
}

struct Reader {
    seen: Arc<Mutex<Option<Seen>>>,
}

impl Reconcile for Reader {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        if req.name != "app" || ctx.object().await?.is_none() {
            return Ok(Action::done());
        }
        let ns = req.namespace.as_deref();
        let owned = ctx.get::<Secret>(ns, "app-owned").await?;
        let mut listed: Vec<String> = ctx
            .list::<ConfigMap>(None)
            .await?
            .iter()
            .map(|cm| {
                format!(
                    "{}/{}",
                    cm.metadata.namespace.clone().unwrap_or_default(),
                    cm.metadata.name.clone().unwrap_or_default()
                )
            })
            .collect();
        listed.sort();
        let mut web_tier: Vec<String> = ctx
            .by_index::<ConfigMap>("by-tier", "web")
            .await?
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        web_tier.sort();
        // Nobody declared ServiceAccounts: the read starts an informer.
        let service_account = ctx.get::<ServiceAccount>(ns, "robot").await?.is_some();
        let other_namespace = match ctx.list::<ConfigMap>(Some("reads-b")).await {
            Err(e @ CacheError::NamespaceNotCached { .. }) => e.to_string(),
            other => format!("unexpected: {other:?}"),
        };
        *self.seen.lock().unwrap() = Some(Seen {
            owned_secret_data: owned.is_some_and(|s| s.data.is_some()),
            listed,
            web_tier,
            service_account,
            other_namespace,
        });
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_reconciler_reads_every_kind_in_the_cache_scope() {
    let (_, client) = plane_with_namespace("reads-a").await;
    create_namespace(&client, "reads-b").await;
    let cms_a: Api<ConfigMap> = Api::namespaced(client.clone(), "reads-a");
    let cms_b: Api<ConfigMap> = Api::namespaced(client.clone(), "reads-b");
    let pp = PostParams::default();
    let app = cms_a
        .create(&pp, &config_map("reads-a", "app", "web"))
        .await
        .unwrap();
    cms_a
        .create(&pp, &config_map("reads-a", "db", "data"))
        .await
        .unwrap();
    cms_a
        .create(&pp, &config_map("reads-a", "edge", "web"))
        .await
        .unwrap();
    cms_b
        .create(&pp, &config_map("reads-b", "app", "web"))
        .await
        .unwrap();
    Api::<Secret>::namespaced(client.clone(), "reads-a")
        .create(&pp, &secret("reads-a", "app-owned", Some(&app)))
        .await
        .unwrap();
    let robot = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("robot".to_owned()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(client.clone(), "reads-a")
        .create(&pp, &robot)
        .await
        .unwrap();

    let cache = SharedCache::builder(client.clone())
        .namespace("reads-a")
        .build();
    cache
        .add_index::<ConfigMap>("by-tier", |cm: &ConfigMap| {
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tier").cloned())
                .into_iter()
                .collect()
        })
        .unwrap();
    let seen = Arc::new(Mutex::new(None));
    let controller = Controller::new(Reader {
        seen: Arc::clone(&seen),
    })
    .owns::<Secret>();
    // No cache.start(): running the controller starts the cache it needs.
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (token, cache) = (token.clone(), cache.clone());
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });

    eventually("the reconciler to read everything", WAIT, || async {
        seen.lock().unwrap().is_some().then_some(())
    })
    .await;
    let seen = seen.lock().unwrap().clone().unwrap();
    assert!(
        seen.owned_secret_data,
        "owns caches whole objects: {seen:?}"
    );
    assert_eq!(
        seen.listed,
        ["reads-a/app", "reads-a/db", "reads-a/edge"],
        "list(None) is the cache's scope, never another namespace"
    );
    assert_eq!(
        seen.web_tier,
        ["app", "edge"],
        "by_index in a namespaced cache"
    );
    assert!(
        seen.service_account,
        "an undeclared kind is read through a lazily started informer"
    );
    assert!(
        seen.other_namespace
            .contains("\"reads-b\" is not in the cache")
            && seen.other_namespace.contains("reads-a"),
        "{}",
        seen.other_namespace
    );
    token.cancel();
    run.await.unwrap().unwrap();
    cache.stop();
}

/// Counts reconciles per key.
struct Counter(Arc<Mutex<BTreeMap<String, usize>>>);

impl Reconcile for Counter {
    type Object = ConfigMap;

    async fn reconcile(
        &self,
        req: Request,
        _ctx: &Context<ConfigMap>,
    ) -> Result<Action, ReconcileError> {
        *self.0.lock().unwrap().entry(req.name).or_default() += 1;
        Ok(Action::done())
    }
}

#[tokio::test]
async fn predicates_belong_to_their_watch() {
    let ns = "reads-predicates";
    let (_, client) = plane_with_namespace(ns).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    let owner = cms
        .create(&pp, &config_map(ns, "owner", "web"))
        .await
        .unwrap();
    secrets
        .create(&pp, &secret(ns, "owned", Some(&owner)))
        .await
        .unwrap();

    let counts = Arc::new(Mutex::new(BTreeMap::new()));
    let cache = SharedCache::builder(client.clone()).namespace(ns).build();
    // GenerationChanged on the primary watch only: ConfigMaps have no
    // generation, so their updates are dropped; the owned Secret's updates
    // must still wake the owner.
    let controller = Controller::with_predicate(Counter(Arc::clone(&counts)), GenerationChanged)
        .owns::<Secret>();
    let token = CancellationToken::new();
    let run = tokio::spawn({
        let (token, cache) = (token.clone(), cache.clone());
        async move { controller.run(&cache, token.cancelled_owned()).await }
    });
    let count = || counts.lock().unwrap().get("owner").copied().unwrap_or(0);
    eventually("the initial reconcile", WAIT, || async {
        (count() >= 1).then_some(())
    })
    .await;
    let settled = count();

    let patch = |data: &str| Patch::Merge(serde_json::json!({ "stringData": { "token": data } }));
    secrets
        .patch("owned", &PatchParams::default(), &patch("rotated"))
        .await
        .unwrap();
    eventually(
        "the owned Secret's update to wake the owner",
        WAIT,
        || async { (count() > settled).then_some(()) },
    )
    .await;

    token.cancel();
    run.await.unwrap().unwrap();
    cache.stop();
}

/// A kind whose CRD is never installed.
#[derive(
    kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(group = "absent.opkit.dev", version = "v1", kind = "Ghost", namespaced)]
struct GhostSpec {
    size: i32,
}

struct Nothing;

impl Reconcile for Nothing {
    type Object = Ghost;

    async fn reconcile(
        &self,
        _req: Request,
        _ctx: &Context<Ghost>,
    ) -> Result<Action, ReconcileError> {
        Ok(Action::done())
    }
}

#[tokio::test]
async fn a_controller_on_its_own_names_a_missing_crd_instead_of_waiting() {
    init_tracing();
    let plane = ControlPlane::shared().await.unwrap();
    let cache = SharedCache::new(plane.client().unwrap());
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        Controller::new(Nothing).run(&cache, std::future::pending()),
    )
    .await
    .expect("the run ends by itself, well before the 120 s sync timeout");
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("ghosts.absent.opkit.dev") && message.contains("not installed"),
        "{message}"
    );
    cache.stop();
}
